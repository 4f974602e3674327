/**
 * A batch of 10,000 translation jobs (`runBatch`, 32 in flight) against an emulator in another
 * process: the client's CPU time per job (create, two status reads, the result, the journal's
 * three synced lines, the output file and the results line) and the process's peak memory, which
 * must not grow with the number of jobs. No baseline: these are the figures users size machines by.
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuMsNow, record } from './harness.js';
import { LocalizationClient } from '../lib/http/client.js';
import { RateLimiter } from '../lib/http/rate-limiter.js';
import { runBatch } from '../lib/batch/run-batch.js';

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
    const startCpu = cpuMsNow();
    const start = Date.now();
    let done = 0;
    for await (const result of runBatch({ jobs, outDir: join(dir, 'out'), client, concurrency: 32 })) {
      if (result.status !== 'done') throw new Error(`job ${result.id}: ${result.status}: ${result.error?.message}`);
      done++;
    }
    const cpuPerJob = (cpuMsNow() - startCpu) / done;
    const seconds = (Date.now() - start) / 1000;
    const peakMb = (process.resourceUsage().maxRSS * 1024) / 1e6;
    console.log(`${done} jobs in ${seconds.toFixed(1)} s: client CPU ${cpuPerJob.toFixed(2)} ms per job, peak RSS ${peakMb.toFixed(0)} MB`);
    record({ name: `embedded, ${done} jobs: client CPU per job`, value: cpuPerJob, kind: 'max', bound: undefined, unit: ' ms' });
    record({ name: `embedded, ${done} jobs: peak RSS`, value: peakMb, kind: 'max', bound: undefined, unit: ' MB' });
  } finally {
    await client.close();
    child.disconnect();
    await rm(dir, { recursive: true, force: true });
  }
}
