/**
 * A batch of 10,000 translation jobs against an emulator in another process, run twice: embedded
 * (`runBatch`, 32 in flight) and on a BullMQ queue (`enqueueBatch` with one `runWorker` of 32 in
 * this process, on a `redis-server` started for it; skipped, and said, when there is none). For
 * each, the client's CPU time per job (create, status reads, the result, the journal or the job's
 * data in Redis, the output file and the results line: producer and worker together) and the
 * process's peak memory, which must not grow with the number of jobs. No baseline: these are the
 * figures users size machines by.
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuMsNow, record } from './harness.js';
import { LocalizationClient } from '../lib/http/client.js';
import { RateLimiter } from '../lib/http/rate-limiter.js';
import { runBatch, type BatchJobResult } from '../lib/batch/run-batch.js';
import { enqueueBatch } from '../lib/batch/queue-producer.js';
import { runWorker } from '../lib/batch/queue-worker.js';

const KEY = 'bench-key';
const JOBS = Number(process.env.BATCH_JOBS ?? 10_000);

export default async function (): Promise<void> {
  const child = fork(fileURLToPath(new URL('./emulator-child.js', import.meta.url)), { env: { ...process.env, BENCH_KEY: KEY } });
  const [{ baseUrl }] = (await once(child, 'message')) as [{ baseUrl: string }];
  const dir = await mkdtemp(join(tmpdir(), 'rtt-batch-bench-'));
  const jobs = join(dir, 'jobs.jsonl');
  const lines: string[] = [];
  for (let i = 0; i < JOBS; i++)
    lines.push(JSON.stringify({ id: `job-${i}`, kind: 'translate-text', text: `Line ${i} of the catalogue.`, from: 'en-us', to: 'es-es' }));
  await writeFile(jobs, `${lines.join('\n')}\n`);
  const fast = { initialIntervalMs: 10, maxIntervalMs: 10, factor: 1 };
  const client = new LocalizationClient({
    baseUrl,
    apiKey: KEY,
    allowInsecure: true,
    rateLimiter: new RateLimiter(),
    polling: { speech: fast, longMedia: fast },
  });
  try {
    await measure('embedded', () => runBatch({ jobs, outDir: join(dir, 'out'), client, concurrency: 32 }));
    const redis = await startRedis();
    if (redis === undefined) {
      console.log('redis-server is not installed: the BullMQ figures are missing');
      return;
    }
    try {
      const worker = await runWorker({ queue: redis.url, client, concurrency: 32 });
      try {
        await measure('BullMQ', () => enqueueBatch({ jobs, outDir: join(dir, 'queued'), client, queue: redis.url }));
      } finally {
        await worker.close();
      }
    } finally {
      redis.child.kill('SIGKILL');
      await once(redis.child, 'exit');
    }
  } finally {
    await client.close();
    child.disconnect();
    await rm(dir, { recursive: true, force: true });
  }
}

/** Runs a batch to the end; records its client CPU per job and the peak RSS so far. */
async function measure(name: string, run: () => AsyncIterable<BatchJobResult>): Promise<void> {
  const startCpu = cpuMsNow();
  const start = Date.now();
  let done = 0;
  for await (const result of run()) {
    if (result.status !== 'done') throw new Error(`job ${result.id}: ${result.status}: ${result.error?.message}`);
    done++;
  }
  const cpuPerJob = (cpuMsNow() - startCpu) / done;
  const seconds = (Date.now() - start) / 1000;
  const peakMb = (process.resourceUsage().maxRSS * 1024) / 1e6;
  console.log(`${name}: ${done} jobs in ${seconds.toFixed(1)} s: client CPU ${cpuPerJob.toFixed(2)} ms per job, peak RSS ${peakMb.toFixed(0)} MB`);
  record({ name: `${name}, ${done} jobs: client CPU per job`, value: cpuPerJob, kind: 'max', bound: undefined, unit: ' ms' });
  record({ name: `${name}, ${done} jobs: peak RSS`, value: peakMb, kind: 'max', bound: undefined, unit: ' MB' });
}

/** redis-server on a loopback port nothing listens on, nothing saved; undefined when it is not installed. */
async function startRedis(): Promise<{ url: string; child: ChildProcess } | undefined> {
  const probe = createServer().listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const started = await new Promise<boolean>((resolve) => {
    let said = '';
    child.on('error', () => resolve(false));
    child.stdout!.setEncoding('utf8').on('data', (text: string) => {
      said += text;
      if (said.includes('Ready to accept connections')) resolve(true);
    });
    child.on('exit', () => resolve(false));
  });
  return started ? { url: `redis://127.0.0.1:${port}`, child } : undefined;
}
