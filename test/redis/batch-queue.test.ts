/**
 * The batch on a BullMQ queue (lib/batch/queue.ts, `rt-translate batch --queue` and
 * `rt-translate worker`) against a real redis-server and the emulator, behind a proxy that keeps
 * every POST so that each job's creates can be counted, every side a real process:
 * - 300 jobs of five kinds (a two-language dub among them, run as a flow) on two workers, one
 *   SIGKILLed mid-run and one stopped with SIGTERM, each replaced: the producer ends with every
 *   result, each job (each dub language) created once, and the files equal those of an embedded run;
 * - the same file enqueued again adds nothing to the queue and creates nothing;
 * - a worker stopped with SIGTERM ends gracefully (143), its jobs left for others;
 * - the producer stopped with SIGTERM exits 143 and, run again, writes what the workers did;
 * - a create whose answer is lost leaves its job `uncertain`, created again only when asked;
 * - a 429 seen by one worker rate-limits the whole queue for the wait the service named.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { once } from 'node:events';
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue, QueueEvents } from 'bullmq';
import type { RunningEmulator } from '../../lib/emulator/server.js';
import { startCountingProxy, type CountingProxy } from '../helpers/counting-proxy.js';
import { createsPerJob, mixedJob, outputs, resultsIn } from '../helpers/batch-outputs.js';
import { KEY, clientFor, control, emulator } from '../http-test-helpers.js';
import { killAllChildren, runCli, spawnCli } from '../helpers/cli.js';
import { startRedis, type RedisServer } from './redis-server.js';
import { RateLimiter, enqueueBatch, runWorker, type BatchJobResult, type QueueWorker } from '../../lib/batch/index.js';

let redis: RedisServer;
let emu: RunningEmulator;
let proxy: CountingProxy;
let dir: string;
const env = { RT_TRANSLATE_API_KEY: KEY };

beforeAll(async () => {
  redis = await startRedis();
  emu = await emulator({ taskMs: 150 });
  proxy = await startCountingProxy(emu.baseUrl);
  dir = await mkdtemp(join(tmpdir(), 'rtt-queue-'));
});
afterAll(async () => {
  killAllChildren();
  await proxy?.close();
  await emu?.close();
  await redis?.close();
  await rm(dir, { recursive: true, force: true });
});

/** The i-th job of a mixed batch, dubs among them; `tag` keeps the texts of different tests apart. */
function job(i: number, tag: string): Record<string, unknown> {
  return mixedJob(i, tag, { dub: true });
}

async function writeJobs(name: string, jobs: Array<Record<string, unknown>>): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, jobs.map((j) => JSON.stringify(j)).join('\n') + '\n');
  return path;
}

function answered(tag: string): number {
  return [...createsPerJob(proxy, tag).values()].reduce((a, b) => a + b, 0);
}

/** The flags that put a command on the test's queue and service. */
function onQueue(queueName: string): string[] {
  return ['--queue', redis.url, '--queue-name', queueName, '--base-url', proxy.baseUrl, '--allow-insecure'];
}

/** A worker process, resolved once it is taking jobs. */
async function startWorker(queueName: string): Promise<{ child: ChildProcess; stderr: () => string }> {
  const child = spawnCli(['worker', ...onQueue(queueName), '--poll-ms', '10', '--lock-ms', '1000', '--concurrency', '6'], env);
  let stderr = '';
  child.stderr!.setEncoding('utf8');
  await new Promise<void>((resolve, reject) => {
    const onData = (text: string): void => {
      stderr += text;
      if (stderr.includes('worker ready')) {
        child.off('exit', onExit);
        resolve();
      }
    };
    const onExit = (): void => reject(new Error(`the worker exited: ${stderr}`));
    child.stderr!.on('data', onData);
    child.on('exit', onExit);
  });
  return { child, stderr: () => stderr };
}

/** Resolves once the service has answered `count` creates of the batch. */
function afterCreates(tag: string, count: number): Promise<void> {
  return new Promise((resolve) => {
    const check = (): void => {
      if (answered(tag) < count) return;
      proxy.off('post', check);
      resolve();
    };
    proxy.on('post', check);
    check();
  });
}

/**
 * The ids of the batch jobs whose every queued part holds a task id (saved before its first status
 * read): a dub into two languages is two queued jobs, and is done being created only when both are.
 */
async function jobsWithTask(queueName: string): Promise<Set<string>> {
  const queue = new Queue(queueName, { connection: { url: redis.url } });
  try {
    const parts = new Map<string, boolean>();
    for (const job of await queue.getJobs(['active', 'wait', 'delayed', 'prioritized', 'waiting-children', 'completed', 'failed'])) {
      if (job === undefined || job.name === 'dub-flow') continue;
      const data = job.data as { job: { id: string }; state?: { taskId?: unknown } };
      const recorded = typeof data.state?.taskId === 'string';
      parts.set(data.job.id, (parts.get(data.job.id) ?? true) && recorded);
    }
    return new Set([...parts].filter(([, recorded]) => recorded).map(([id]) => id));
  } finally {
    await queue.close();
  }
}

describe('rt-translate batch --queue with rt-translate worker', () => {
  it('runs 300 jobs on workers killed and stopped mid-run: each created once, every file as an embedded run writes it', async () => {
    const tag = 'q';
    const queueName = 'rtt-test-main';
    const jobs = Array.from({ length: 300 }, (_, i) => job(i, tag));
    const path = await writeJobs('queue.jsonl', jobs);
    const outDir = join(dir, 'queued');
    const producerArgs = ['batch', path, '--out', outDir, ...onQueue(queueName), '--no-progress'];

    const first = await startWorker(queueName);
    const second = await startWorker(queueName);
    const producer = spawnCli(producerArgs, env);
    let producerStderr = '';
    producer.stderr!.setEncoding('utf8').on('data', (text: string) => (producerStderr += text));
    const producerExit = once(producer, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;

    // One worker dies mid-run; another takes its place.
    await afterCreates(tag, 80);
    first.child.kill('SIGKILL');
    expect((await once(first.child, 'exit'))[1]).toBe('SIGKILL');
    // What the kill can leave uncertain: a job whose create had been sent and whose task id was
    // not yet in its data. Jobs whose data held a task id were being polled: they must be resumed.
    const recordedBeforeKill = await jobsWithTask(queueName);
    const third = await startWorker(queueName);
    // One is stopped: it finishes what it is creating and puts its waits back.
    await afterCreates(tag, 160);
    second.child.kill('SIGTERM');
    const [termCode] = (await once(second.child, 'exit')) as [number | null];
    expect(termCode, second.stderr()).toBe(143);
    const fourth = await startWorker(queueName);

    const [code] = await producerExit;
    let outcome = await resultsIn(outDir);
    const uncertain = new Set(outcome.filter((r) => r.status === 'uncertain').map((r) => r.id!));
    expect(
      outcome.filter((r) => r.status !== 'done' && r.status !== 'uncertain'),
      producerStderr,
    ).toEqual([]);
    expect(code, producerStderr).toBe(uncertain.size > 0 ? 3 : 0);
    // Jobs being polled when their worker died, or when it was stopped, were resumed, not left
    // uncertain; a job left uncertain was one the killed worker (6 at a time) was creating. Its
    // create may not have left yet: the state is saved before the request is sent.
    expect([...uncertain].filter((id) => recordedBeforeKill.has(id))).toEqual([]);
    expect(uncertain.size).toBeLessThanOrEqual(6);
    if (uncertain.size > 0) {
      const again = await runCli([...producerArgs, '--retry-uncertain'], { env });
      expect(again.code, again.stderr).toBe(0);
      outcome = await resultsIn(outDir);
    }
    expect(outcome.filter((r) => r.status === 'done')).toHaveLength(300);

    // Each job created once, each dub language once; a job left uncertain by the kill at most twice, by choice.
    const creates = createsPerJob(proxy, tag);
    expect(creates.size).toBe(300);
    for (const [id, n] of creates) {
      const spec = jobs.find((j) => j.id === id)!;
      const once = spec.kind === 'dub' ? (spec.to as string[]).length : 1;
      expect(n, id).toBeGreaterThanOrEqual(once);
      // A dub's languages are tasks of their own: each may have been left uncertain by the kill.
      expect(n, id).toBeLessThanOrEqual(uncertain.has(id) ? 2 * once : once);
    }

    // The files equal those of an embedded run of the same jobs; a dub's result holds links signed
    // at each read, and a multi-language dub is one task per language here: the same languages' outputs.
    const embeddedDir = join(dir, 'embedded');
    const embedded = await runCli(['batch', path, '--out', embeddedDir, '--base-url', emu.baseUrl, '--allow-insecure', '--poll-ms', '10', '--no-progress'], {
      env,
    });
    expect(embedded.code, embedded.stderr).toBe(0);
    const expected = await outputs(embeddedDir);
    const got = await outputs(outDir);
    expect([...got.keys()]).toEqual([...expected.keys()]);
    for (const [name, bytes] of expected) {
      const spec = jobs.find((j) => `${j.id as string}.json` === name);
      if (spec?.kind === 'dub') {
        const languages = (JSON.parse(got.get(name)!.toString('utf8')) as { outputs: Array<{ language: string; audioUrl?: string }> }).outputs;
        const wanted = (JSON.parse(bytes.toString('utf8')) as { outputs: unknown[] }).outputs;
        expect(languages, name).toHaveLength(wanted.length);
        expect(languages.every((o) => typeof o.audioUrl === 'string' && o.audioUrl !== '')).toBe(true);
        if ((spec.to as string[]).length > 1) expect(languages.map((o) => o.language)).toEqual(spec.to);
        continue;
      }
      expect(got.get(name)?.equals(bytes), name).toBe(true);
    }

    // Enqueued again: nothing added to the queue, no task created (the tts jobs stream again, into a new directory).
    const queue = new Queue(queueName, { connection: { url: redis.url, maxRetriesPerRequest: null } });
    try {
      const before = await queue.getJobCounts();
      const createsBefore = proxy.posts.filter((p) => !p.path.startsWith('/tts-stream')).length;
      const rerun = await runCli(['batch', path, '--out', join(dir, 'again'), ...producerArgs.slice(4)], { env });
      expect(rerun.code, rerun.stderr).toBe(0);
      expect(await queue.getJobCounts()).toEqual(before);
      // Every job but the 60 tts jobs (streamed by the producer), and the 15 two-language dubs' 30 children.
      expect(before.completed).toBe(300 - 60 + 15 * 2);
      expect(proxy.posts.filter((p) => !p.path.startsWith('/tts-stream')).length).toBe(createsBefore);
      const again = await outputs(join(dir, 'again'));
      expect([...again.keys()]).toEqual([...got.keys()]);
      // A dub's result holds links signed at each read: the same outputs, in the same languages.
      const languagesOf = (bytes: Buffer): unknown =>
        (JSON.parse(bytes.toString('utf8')) as { outputs: Array<{ language: string }> }).outputs.map((o) => o.language);
      for (const [name, bytes] of got) {
        if (jobs.find((j) => `${j.id as string}.json` === name)?.kind === 'dub') expect(languagesOf(again.get(name)!), name).toEqual(languagesOf(bytes));
        else expect(again.get(name)?.equals(bytes), name).toBe(true);
      }
    } finally {
      await queue.close();
    }

    for (const worker of [third, fourth]) {
      worker.child.kill('SIGTERM');
      const [exitCode] = (await once(worker.child, 'exit')) as [number | null];
      expect(exitCode, worker.stderr()).toBe(143);
    }
  }, 300_000);
});

describe('rt-translate batch --queue, stopped', () => {
  it('exits 143 on SIGTERM, the jobs staying on the queue; run again, it writes what the workers did', async () => {
    const tag = 'stop';
    const queueName = 'rtt-test-stop';
    const jobs = Array.from({ length: 20 }, (_, i) => ({ id: `${tag}-${i}`, kind: 'translate-text', text: `Stop ${tag}-${i}.`, from: 'en-us', to: 'de-de' }));
    const path = await writeJobs('stop.jsonl', jobs);
    const outDir = join(dir, 'stopped');
    const args = ['batch', path, '--out', outDir, ...onQueue(queueName), '--no-progress'];
    const events = new QueueEvents(queueName, { connection: { url: redis.url, maxRetriesPerRequest: null } });
    try {
      await events.waitUntilReady();
      // No worker yet: the producer enqueues, then waits; stopped as soon as a job is on the queue.
      const producer = spawnCli(args, env);
      await once(events, 'waiting');
      producer.kill('SIGTERM');
      const [code] = (await once(producer, 'exit')) as [number | null];
      expect(code).toBe(143);

      const worker = await startWorker(queueName);
      const again = await runCli(args, { env });
      expect(again.code, again.stderr).toBe(0);
      const results = await resultsIn(outDir);
      expect(
        results
          .filter((r) => r.status === 'done')
          .map((r) => r.id)
          .sort(),
      ).toEqual(jobs.map((j) => j.id).sort());
      expect([...createsPerJob(proxy, tag).values()]).toEqual(jobs.map(() => 1));
      worker.child.kill('SIGTERM');
      expect((await once(worker.child, 'exit'))[0]).toBe(143);
    } finally {
      await events.close();
    }
  });
});

describe('enqueueBatch and runWorker', () => {
  it('leaves a job whose create answer was lost uncertain, and creates it again only when asked', async () => {
    const tag = 'lost';
    const queueName = 'rtt-test-lost';
    const path = await writeJobs('lost.jsonl', [job(0, tag), job(1, tag), job(2, tag)]);
    const outDir = join(dir, 'lost');
    const client = clientFor(emu, { baseUrl: proxy.baseUrl });
    const worker = await runWorker({ queue: redis.url, queueName, client, concurrency: 1 });
    const run = async (retryUncertain: boolean): Promise<BatchJobResult[]> => {
      const out: BatchJobResult[] = [];
      for await (const result of enqueueBatch({ jobs: path, outDir, client, queue: redis.url, queueName, retryUncertain })) out.push(result);
      return out;
    };
    try {
      // The service creates the task, then the connection drops before the answer.
      await control(emu, 'POST', 'faults', { dropAfterBytes: 0, count: 1, path: '/translate', method: 'POST' });
      const first = await run(false);
      expect(first.map((r) => r.status).sort()).toEqual(['done', 'done', 'uncertain']);
      const lost = first.find((r) => r.status === 'uncertain')!;
      expect(lost.error?.message).toContain('--retry-uncertain');

      const again = await run(false);
      expect(again.find((r) => r.id === lost.id)?.status).toBe('uncertain');
      expect(again.filter((r) => r.resumed === true)).toHaveLength(2);
      const before = createsPerJob(proxy, tag);

      const retried = await run(true);
      expect(retried.map((r) => r.status)).toEqual(['done', 'done', 'done']);
      expect(retried.filter((r) => r.resumed !== true).map((r) => r.id)).toEqual([lost.id]);
      const after = createsPerJob(proxy, tag);
      expect(after.get(lost.id!)).toBe((before.get(lost.id!) ?? 0) + 1);
      for (const r of first.filter((r) => r.status === 'done')) expect(after.get(r.id!), r.id).toBe(1);
    } finally {
      await control(emu, 'DELETE', 'faults');
      await worker.close();
      await client.close();
    }
  });
  it('passes a 429 on to every worker of the queue: the queue is rate limited for the wait the service named', async () => {
    const queueName = 'rtt-test-limit';
    const path = await writeJobs('limit.jsonl', [job(0, 'limit')]);
    let shared!: () => void;
    const passedOn = new Promise<void>((resolve) => (shared = resolve));
    let worker: QueueWorker | undefined;
    const rateLimiter = new RateLimiter({ onRefused: (ms) => void worker?.rateLimit(ms).then(shared) });
    const client = clientFor(emu, { baseUrl: proxy.baseUrl, rateLimiter });
    const queue = new Queue(queueName, { connection: { url: redis.url, maxRetriesPerRequest: null } });
    worker = await runWorker({ queue: redis.url, queueName, client });
    try {
      await control(emu, 'POST', 'faults', { status: 429, retryAfter: 3, count: 1, path: '/translate', method: 'POST' });
      const results = enqueueBatch({ jobs: path, outDir: join(dir, 'limit'), client, queue: redis.url, queueName });
      const first = results.next();
      await passedOn;
      const ttl = await queue.getRateLimitTtl();
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(3000);
      expect((await first).value).toMatchObject({ id: 'limit-0', status: 'done' });
      await results.return(undefined);
    } finally {
      await control(emu, 'DELETE', 'faults');
      await worker.close();
      await queue.close();
      await client.close();
    }
  });
});
