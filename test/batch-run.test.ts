/**
 * Batches against the emulator (lib/batch/run-batch.ts and `rt-translate batch`), through a proxy
 * that keeps every POST so that the creates of each job can be counted:
 * - 1,000 jobs of four kinds through 429s, 503s, 500s on status reads and slow answers: every job
 *   done, created once, its files written, one results line each, everyone paused by the 429s;
 * - a bad line reported with its number while the others run; `--strict` starting nothing;
 * - a create whose answer is lost: `uncertain`, not created again until asked;
 * - the command SIGKILLed at several points, then run again: jobs done are not redone, tasks
 *   created are waited for, not created again, and the files equal those of a run never killed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { once } from 'node:events';
import { watch } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningEmulator } from '../lib/emulator/server.js';
import { RtTranslateError } from '../lib/errors.js';
import { RateLimiter } from '../lib/http/rate-limiter.js';
import { runBatch, type BatchJobResult } from '../lib/batch/run-batch.js';
import { startCountingProxy, type CountingProxy } from './helpers/counting-proxy.js';
import { createsPerJob as createsOf, mixedJob, outputs, resultsIn } from './helpers/batch-outputs.js';
import { KEY, clientFor, control, emulator } from './http-test-helpers.js';
import { runCli, runInProcess, spawnCli } from './helpers/cli.js';

let emu: RunningEmulator;
let proxy: CountingProxy;
let dir: string;

beforeAll(async () => {
  emu = await emulator();
  proxy = await startCountingProxy(emu.baseUrl);
  dir = await mkdtemp(join(tmpdir(), 'rtt-batch-'));
});
afterAll(async () => {
  await proxy?.close();
  await emu?.close();
  await rm(dir, { recursive: true, force: true });
});

/** The i-th job of a mixed batch; `tag` keeps the texts of different tests apart. */
function job(i: number, tag: string): Record<string, unknown> {
  return mixedJob(i, tag);
}

async function writeJobs(name: string, jobs: Array<Record<string, unknown>>, extra: string[] = []): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, [...jobs.map((j) => JSON.stringify(j)), ...extra].join('\n') + '\n');
  return path;
}

/** Creates the service answered with a 2xx, per job id (each create's body names its job). */
function createsPerJob(tag: string): Map<string, number> {
  return createsOf(proxy, tag);
}

async function collect(results: AsyncIterable<BatchJobResult>): Promise<BatchJobResult[]> {
  const out: BatchJobResult[] = [];
  for await (const result of results) out.push(result);
  return out;
}

describe('runBatch', () => {
  it('runs 1,000 jobs through 429s, 5xx and slow answers: each created once, every file written', async () => {
    const jobs = Array.from({ length: 1000 }, (_, i) => job(i, 'big'));
    const path = await writeJobs('big.jsonl', jobs);
    const outDir = join(dir, 'big');
    await control(emu, 'POST', 'faults', { status: 429, retryAfter: 0, count: 40, path: '/translate', method: 'POST' });
    await control(emu, 'POST', 'faults', { status: 503, retryAfter: 0, count: 20, path: '/translated-tts', method: 'POST' });
    await control(emu, 'POST', 'faults', { status: 500, count: 40, path: '/translate/', method: 'GET' });
    await control(emu, 'POST', 'faults', { status: 429, retryAfter: 0, count: 20, path: '/tts-stream', method: 'POST' });
    await control(emu, 'POST', 'faults', { stallMs: 300, count: 30, path: '/transcribe/', method: 'GET' });
    const limiter = new RateLimiter({ pauseMs: 5 });
    const client = clientFor(emu, { baseUrl: proxy.baseUrl, rateLimiter: limiter, retry: { retries: 100, minDelayMs: 1, maxDelayMs: 50 } });
    try {
      let plan;
      const results = await collect(runBatch({ jobs: path, outDir, client, concurrency: 16 }, (p) => (plan = p)));
      expect(plan).toEqual({ jobs: 1000, invalid: 0 });
      const notDone = results.filter((r) => r.status !== 'done');
      expect(notDone).toEqual([]);
      expect(results).toHaveLength(1000);
      expect(new Set(results.map((r) => r.id)).size).toBe(1000);
      const creates = createsPerJob('big');
      expect(creates.size).toBe(1000);
      expect([...creates.values()].every((n) => n === 1)).toBe(true);
      expect(limiter.pauses).toBeGreaterThan(0);

      const written = await outputs(outDir);
      expect(written.size).toBe(1000 + 200);
      for (const r of results) for (const file of r.files!) expect(written.has(file), file).toBe(true);
      const translation = JSON.parse(written.get('big-0.json')!.toString('utf8')) as { texts: string[] };
      expect(translation.texts).toHaveLength(1);
      expect(written.get('big-5.wav')!.subarray(0, 4).toString('latin1')).toBe('RIFF');
      expect(written.get('big-7.flac')!.subarray(0, 4).toString('latin1')).toBe('fLaC');
      expect(written.get('big-9.srt')!.toString('utf8')).toMatch(/^1\n\d\d:\d\d:\d\d,\d{3} --> /);
      const lines = (await readFile(join(outDir, 'results.jsonl'), 'utf8')).trimEnd().split('\n');
      expect(lines.map((line) => (JSON.parse(line) as BatchJobResult).id).sort()).toEqual(results.map((r) => r.id).sort());
    } finally {
      await control(emu, 'DELETE', 'faults');
      await client.close();
    }
  }, 120_000);

  it('reports a bad line by its number and runs the rest; strict starts nothing', async () => {
    const good = [job(0, 'lines'), job(1, 'lines')];
    const path = await writeJobs(
      'lines.jsonl',
      [good[0]!, { id: 'lines-x', kind: 'tts', language: 'en-us' }, good[1]!],
      ['{not json', JSON.stringify(good[0])],
    );
    const client = clientFor(emu, { baseUrl: proxy.baseUrl });
    try {
      const strict = await collect(runBatch({ jobs: path, outDir: join(dir, 'strict'), client, strict: true }));
      expect(strict.map((r) => [r.line, r.status, r.error?.field])).toEqual([
        [2, 'invalid', 'text'],
        [4, 'invalid', undefined],
        [5, 'invalid', 'id'],
      ]);
      expect(createsPerJob('lines').size).toBe(0);

      const results = await collect(runBatch({ jobs: path, outDir: join(dir, 'lenient'), client }));
      const byLine = new Map(results.map((r) => [r.line, r]));
      expect(byLine.get(1)?.status).toBe('done');
      expect(byLine.get(3)?.status).toBe('done');
      expect(byLine.get(2)).toMatchObject({ status: 'invalid', id: 'lines-x', error: { field: 'text' } });
      expect(byLine.get(4)?.status).toBe('invalid');
      expect(byLine.get(5)?.error?.message).toContain('first at line 1');
      expect([...createsPerJob('lines').values()]).toEqual([1, 1]);
    } finally {
      await client.close();
    }
  });

  it('fails with a typed error, before any create, when results.jsonl cannot be written', async () => {
    const path = await writeJobs('unwritable.jsonl', [job(0, 'unwritable')]);
    const outDir = join(dir, 'unwritable');
    await mkdir(join(outDir, 'results.jsonl'), { recursive: true });
    const client = clientFor(emu, { baseUrl: proxy.baseUrl });
    try {
      const error = await collect(runBatch({ jobs: path, outDir, client })).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(RtTranslateError);
      expect((error as Error).message).toContain('results.jsonl');
      expect(createsPerJob('unwritable').size).toBe(0);
      expect(await readdir(outDir)).not.toContain('journal.lock');
    } finally {
      await client.close();
    }
  });

  it('leaves a job whose create answer was lost uncertain, and creates it again only when asked', async () => {
    const path = await writeJobs('lost.jsonl', [job(0, 'lost'), job(1, 'lost')]);
    const outDir = join(dir, 'lost');
    const client = clientFor(emu, { baseUrl: proxy.baseUrl });
    try {
      // The service creates the task, then the connection drops before the answer.
      await control(emu, 'POST', 'faults', { dropAfterBytes: 0, count: 1, path: '/translate', method: 'POST' });
      const first = await collect(runBatch({ jobs: path, outDir, client, concurrency: 1 }));
      expect(first.map((r) => r.status).sort()).toEqual(['done', 'uncertain']);
      const lost = first.find((r) => r.status === 'uncertain')!;

      const again = await collect(runBatch({ jobs: path, outDir, client }));
      expect(again.find((r) => r.id === lost.id)?.status).toBe('uncertain');
      expect(again.find((r) => r.id !== lost.id)).toMatchObject({ status: 'done', resumed: true });
      const before = createsPerJob('lost');

      const retried = await collect(runBatch({ jobs: path, outDir, client, retryUncertain: true }));
      expect(retried.map((r) => r.status)).toEqual(['done', 'done']);
      const after = createsPerJob('lost');
      expect(after.get(lost.id!)).toBe((before.get(lost.id!) ?? 0) + 1);
      expect(after.get(first.find((r) => r.status === 'done')!.id!)).toBe(1);
    } finally {
      await control(emu, 'DELETE', 'faults');
      await client.close();
    }
  });

  it('fails a job whose task the service no longer knows (404), instead of leaving it pending forever; ids differing in case are one id', async () => {
    const path = await writeJobs('gone.jsonl', [job(0, 'gone'), { ...job(10, 'gone'), id: 'GONE-0' }]);
    const client = clientFor(emu, { baseUrl: proxy.baseUrl });
    try {
      await control(emu, 'POST', 'faults', { status: 404, count: 1, path: '/translate/', method: 'GET' });
      const results = await collect(runBatch({ jobs: path, outDir: join(dir, 'gone'), client }));
      expect(results.map((r) => [r.line, r.status])).toEqual([
        [2, 'invalid'],
        [1, 'failed'],
      ]);
      expect(results[0]!.error?.message).toContain('ids that differ only in case count as the same');
      expect(results[1]).toMatchObject({ error: { code: 'RTT_HTTP' } });
      expect(results[1]!.taskId).toBeDefined();
      // Journaled as failed: the next run reports it without waiting again.
      const again = await collect(runBatch({ jobs: path, outDir: join(dir, 'gone'), client }));
      expect(again.find((r) => r.line === 1)).toMatchObject({ status: 'failed', taskId: results[1]!.taskId });
    } finally {
      await control(emu, 'DELETE', 'faults');
      await client.close();
    }
  });

  it('uploads the file a transcribe job names, once, and writes its transcript', async () => {
    // The upload's file name names the job, so that its create can be counted.
    await writeFile(join(dir, 'upload-0.wav'), await readFile(new URL('./fixtures/speech-en-24k.wav', import.meta.url)));
    const path = await writeJobs('upload.jsonl', [{ id: 'upload-0', kind: 'transcribe', input: 'upload-0.wav', language: 'en-us', format: 'vtt' }]);
    const client = clientFor(emu, { baseUrl: proxy.baseUrl });
    try {
      const [result] = await collect(runBatch({ jobs: path, outDir: join(dir, 'upload'), client }));
      expect(result).toMatchObject({ status: 'done', files: ['upload-0.vtt'] });
      expect((await readFile(join(dir, 'upload', 'upload-0.vtt'), 'utf8')).startsWith('WEBVTT')).toBe(true);
      expect([...createsPerJob('upload').values()]).toEqual([1]);
    } finally {
      await client.close();
    }
  });

  it('settles the jobs in flight when the caller stops early; the next run resumes them without creating again', async () => {
    const path = await writeJobs(
      'early.jsonl',
      Array.from({ length: 24 }, (_, i) => job(i * 10, 'early')),
    );
    const outDir = join(dir, 'early');
    const client = clientFor(emu, { baseUrl: proxy.baseUrl });
    try {
      let seen = 0;
      for await (const result of runBatch({ jobs: path, outDir, client, concurrency: 6 })) {
        expect(result.status).toBe('done');
        if (++seen === 1) break;
      }
      const journal = (await readFile(join(outDir, 'journal.jsonl'), 'utf8')).trimEnd().split('\n').slice(1);
      // Nothing is left half-written: every job started reached 'created' (or 'done') in the journal.
      const last = new Map(journal.map((line) => JSON.parse(line) as { id: string; state: string }).map((entry) => [entry.id, entry.state]));
      expect([...last.values()].every((state) => state === 'created' || state === 'done')).toBe(true);
      expect(last.size).toBeGreaterThan(1);

      const rest = await collect(runBatch({ jobs: path, outDir, client }));
      expect(rest.every((r) => r.status === 'done')).toBe(true);
      expect(rest.filter((r) => r.resumed === true).length).toBeGreaterThanOrEqual(1);
      const creates = createsPerJob('early');
      expect(creates.size).toBe(24);
      expect([...creates.values()].every((n) => n === 1)).toBe(true);
    } finally {
      await client.close();
    }
  });
});

describe('rt-translate batch', () => {
  const env = { RT_TRANSLATE_API_KEY: KEY };

  it('says what it did: a progress line on a terminal, a summary, exit 3 when a job is not done, 2 for --strict', async () => {
    const path = await writeJobs('said.jsonl', [job(0, 'said'), { id: 'said-x', kind: 'tts', language: 'en-us' }, job(1, 'said')]);
    const args = ['batch', path, '--base-url', emu.baseUrl, '--allow-insecure', '--poll-ms', '10'];
    const run = await runInProcess([...args, '--out', join(dir, 'said')], { env, stderrTTY: true });
    expect(run.code).toBe(3);
    expect(run.stderr).toMatch(/batch: \d\/3 done · \d running · \d not done/);
    expect(run.stderr).toContain('rt-translate: job said-x (line 2): invalid: Invalid text: expected a value (tts jobs need text)');
    expect(run.stderr).toContain(`rt-translate: batch of 3 job(s): 2 done, 1 invalid; results in ${join(dir, 'said')}/results.jsonl`);
    const strict = await runInProcess([...args, '--out', join(dir, 'said-strict'), '--strict'], { env });
    expect(strict.code).toBe(2);
    expect(strict.stderr).toContain('batch of 3 job(s): nothing started, 1 invalid (--strict)');
    const usage = await runInProcess(['batch', path], { env });
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('--out DIR is required');
  });

  it('stops on SIGTERM with every job journaled (exit 143); run again, it finishes them without creating again', async () => {
    const path = await writeJobs(
      'term.jsonl',
      Array.from({ length: 12 }, (_, i) => job(i * 10, 'term')),
    );
    const args = [
      'batch',
      path,
      '--out',
      join(dir, 'term'),
      '--base-url',
      proxy.baseUrl,
      '--allow-insecure',
      '--concurrency',
      '4',
      '--poll-ms',
      '10',
      '--no-progress',
    ];
    // Status reads hang, so the jobs are waiting when the signal comes.
    await control(emu, 'POST', 'faults', { stallMs: 60_000, count: 4, path: '/translate/', method: 'GET' });
    await mkdir(join(dir, 'term'));
    // Watching starts before the command does, so no change of the journal is missed.
    const watcher = watch(join(dir, 'term'));
    try {
      const child = spawnCli(args, env);
      let stderr = '';
      child.stderr!.setEncoding('utf8').on('data', (text: string) => (stderr += text));
      // Once four tasks are journaled as created, their waits are under way: then the signal.
      const journal = join(dir, 'term', 'journal.jsonl');
      const created = async (): Promise<number> => ((await readFile(journal, 'utf8').catch(() => '')).match(/"state":"created"/g) ?? []).length;
      await new Promise<void>((resolve, reject) => {
        const check = (): void => void created().then((n) => n >= 4 && resolve(), reject);
        watcher.on('change', check);
        check();
      });
      child.kill('SIGTERM');
      const [code] = (await once(child, 'exit')) as [number | null];
      expect(code, stderr).toBe(143);
      expect(stderr).toMatch(/batch of 12 job\(s\): \d+ done, .*pending/);
    } finally {
      watcher.close();
      await control(emu, 'DELETE', 'faults');
    }
    const again = await runCli(args, { env });
    expect(again.code, again.stderr).toBe(0);
    const creates = createsPerJob('term');
    expect(creates.size).toBe(12);
    expect([...creates.values()].every((n) => n === 1)).toBe(true);
  });

  it('survives SIGKILLs: run again, it never creates a job twice and writes what a run never killed writes', async () => {
    const jobs = Array.from({ length: 300 }, (_, i) => job(i, 'kill'));
    const path = await writeJobs('kill.jsonl', jobs);
    const killedDir = join(dir, 'killed');
    const args = ['batch', path, '--out', killedDir, '--base-url', proxy.baseUrl, '--allow-insecure', '--concurrency', '8', '--poll-ms', '10', '--no-progress'];
    // Killed after the 1st, the 120th and the 250th create the service answered: mid-create, mid-run, near the end.
    const uncertain = new Set<string>();
    for (const killAt of [1, 120, 250]) {
      const child = spawnCli(args, env);
      let stderr = '';
      child.stderr!.setEncoding('utf8').on('data', (text: string) => (stderr += text));
      const answered = (): number => [...createsPerJob('kill').values()].reduce((a, b) => a + b, 0);
      const onPost = (): void => {
        if (answered() >= killAt && child.exitCode === null) child.kill('SIGKILL');
      };
      proxy.on('post', onPost);
      const [, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
      proxy.off('post', onPost);
      expect(signal, stderr).toBe('SIGKILL');
    }
    // Run to the end, then once more creating again what the kills left uncertain.
    const rest = await runCli(args, { env });
    const results = await resultsIn(killedDir);
    for (const r of results) if (r.status === 'uncertain') uncertain.add(r.id!);
    expect(results.filter((r) => r.status !== 'done' && r.status !== 'uncertain')).toEqual([]);
    expect(rest.code).toBe(uncertain.size > 0 ? 3 : 0);
    if (uncertain.size > 0) expect((await runCli([...args, '--retry-uncertain'], { env })).code).toBe(0);

    // Each job created once; a job the kill left uncertain at most twice, by the explicit choice.
    const creates = createsPerJob('kill');
    expect(creates.size).toBe(300);
    for (const [id, n] of creates) expect(n, id).toBe(uncertain.has(id) ? Math.min(n, 2) : 1);

    // The same jobs in a run never killed write the same bytes.
    const cleanDir = join(dir, 'clean');
    const clean = await runCli(['batch', path, '--out', cleanDir, '--base-url', emu.baseUrl, '--allow-insecure', '--poll-ms', '10', '--no-progress'], { env });
    expect(clean.code).toBe(0);
    const expected = await outputs(cleanDir);
    const got = await outputs(killedDir);
    expect([...got.keys()]).toEqual([...expected.keys()]);
    for (const [name, bytes] of expected) expect(got.get(name)?.equals(bytes), name).toBe(true);
  }, 180_000);
});
