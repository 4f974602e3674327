/**
 * The batch queue's Redis address (lib/batch/queue-jobs.ts `parseQueueUrl`, and the `--queue` flag of
 * `rt-translate batch` and `rt-translate worker`), checked before anything connects: redis:// and
 * rediss:// only, plain text only to a loopback host unless allowed. And BullMQ stays unloaded
 * until a queue runs: importing `rt-translate/batch` or the command line never loads it. No Redis
 * server needed.
 */
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { ValidationError } from '../lib/errors.js';
import { parseQueueUrl } from '../lib/batch/queue-jobs.js';
import { runInProcess } from './helpers/cli.js';
import { caught } from './helpers/caught.js';

describe('parseQueueUrl', () => {
  it.each([
    { url: 'redis://127.0.0.1:6379', host: '127.0.0.1' },
    { url: 'redis://localhost:6380/2', host: 'localhost' },
    { url: 'redis://[::1]:6379', host: '[::1]' },
    { url: 'rediss://redis.example:6380', host: 'redis.example' },
  ])('accepts $url', ({ url, host }) => {
    expect(parseQueueUrl(url).hostname).toBe(host);
  });

  it.each([
    { url: 'not a url', says: 'a redis:// or rediss:// URL' },
    { url: 'http://127.0.0.1:6379', says: 'got http://' },
    { url: 'redis://redis.example:6379', says: 'rediss:// for redis.example' },
  ])('refuses $url', ({ url, says }) => {
    const error = caught(() => parseQueueUrl(url));
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).field).toBe('queue');
    expect((error as ValidationError).message).toContain(says);
  });

  it('never repeats a password written into a URL it cannot read', () => {
    const url = 'redis://:s3cret@redis example:6379';
    const error = caught(() => parseQueueUrl(url));
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).message).toContain(`text that is not a URL (${url.length} characters)`);
    expect((error as ValidationError).message).not.toContain('s3cret');
  });

  it('takes plain text to another host when allowed', () => {
    expect(parseQueueUrl('redis://redis.example:6379', { allowInsecure: true }).port).toBe('6379');
  });
});

describe('--queue', () => {
  it.each([
    { args: ['batch', 'jobs.jsonl', '--out', 'out', '--queue', 'redis://redis.example:6379'], says: 'rediss:// for redis.example' },
    { args: ['worker', '--queue', 'http://127.0.0.1:6379'], says: 'got http://' },
    { args: ['worker'], says: '--queue redis://HOST:PORT is required' },
    { args: ['batch', 'jobs.jsonl', '--out', 'out', '--queue-name', 'q'], says: '--queue-name goes with --queue' },
  ])('rt-translate $args.0: "$says", before any connection', async ({ args, says }) => {
    const run = await runInProcess(args, { env: { RT_TRANSLATE_API_KEY: 'test-key-0123456789' } });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(says);
  });
});

describe('loading', () => {
  const root = fileURLToPath(new URL('..', import.meta.url));
  // A resolve hook that refuses BullMQ and its Redis client, then the imports under test.
  const refusing = (imports: string): string => `
    import { register } from 'node:module';
    register('data:text/javascript,' + encodeURIComponent(
      'export async function resolve(s, c, next) { if (["bullmq", "ioredis"].includes(s.split("/")[0])) throw new Error("loaded " + s); return next(s, c); }'));
    ${imports}
    console.log('loaded without BullMQ');`;
  const run = (imports: string): Promise<string> =>
    promisify(execFile)(process.execPath, ['--input-type=module', '-e', refusing(imports)], { cwd: root }).then(
      ({ stdout }) => stdout.trim(),
      (error: { stderr: string }) => error.stderr,
    );

  it('rt-translate/batch and the command line load no BullMQ until a queue runs', async () => {
    expect(await run("await import('./dist/lib/batch/index.js'); await import('./dist/bin/main.js'); await import('./dist/bin/commands/worker.js');")).toBe(
      'loaded without BullMQ',
    );
  });

  it('(the hook refuses BullMQ itself)', async () => {
    expect(await run("await import('bullmq');")).toContain('loaded bullmq');
  });
});
