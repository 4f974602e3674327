/**
 * The built command (`dist/bin/rt-translate.js`) as real processes, for what only a process
 * shows: exit statuses as the shell sees them, signals from the OS, pipes that close, and two
 * processes talking (the command and `rt-translate emulator`). Every other case runs in process
 * (cli.test.ts, cli-formats.test.ts).
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { startEmulator, type RunningEmulator } from '../lib/emulator/server.js';
import { expectedTranslation, loadSpeechFixture } from './helpers/speech.js';
import { collect, killAllChildren, runCli, spawnCli, startCliEmulator, type CliResult } from './helpers/cli.js';

const KEY = 'sk-cli-smoke-3b9d0e51f2a84c67';
const fixture = loadSpeechFixture();
const expected = expectedTranslation(fixture.pcm, fixture.utterances);
/** The first utterance and the silence after it. */
const firstPart = fixture.pcm.subarray(0, 84_480 * 2);

const servers: RunningEmulator[] = [];
afterAll(async () => {
  await killAllChildren();
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

function lines(text: string): string[] {
  return text.split('\n').filter((line) => line !== '');
}

/** Collects a child's output; `seen(text)` resolves once its stderr contains `text`. */
function watch(child: ChildProcess): { ended: Promise<CliResult>; seen(text: string): Promise<void> } {
  let stderr = '';
  const waiting: Array<{ text: string; resolve: () => void }> = [];
  const ended = collect(child, (text) => {
    stderr += text;
    for (const w of waiting.filter((w) => stderr.includes(w.text))) {
      waiting.splice(waiting.indexOf(w), 1);
      w.resolve();
    }
  });
  return {
    ended,
    seen: (text) => (stderr.includes(text) ? Promise.resolve() : new Promise<void>((resolve) => waiting.push({ text, resolve }))),
  };
}

describe.concurrent('rt-translate as a process', () => {
  it('translates stdin to stdout through `rt-translate emulator`, another process; both exit 0', async () => {
    const emulator = await startCliEmulator(['--api-key', KEY]);
    const result = await runCli(['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '500', '--realtime-url', emulator.realtimeUrl], {
      stdin: fixture.pcm,
      env: { RT_TRANSLATE_API_KEY: KEY },
    });
    expect(result.code).toBe(0);
    expect(result.stdout.equals(expected)).toBe(true);
    expect(lines(result.stderr).at(-1)).toMatch(/^rt-translate: sent 8\.3 s of audio, received \d+\.\d s in 3 responses\.$/);
    expect(result.stderr).not.toContain(KEY);
    const ended = await emulator.stop('SIGTERM');
    expect(ended.signal).toBeNull();
    expect(ended.code).toBe(0);
  });

  it('a first SIGINT closes an open, quiet input and lets the session finish: exit 0 with the translation', async () => {
    const child = spawnCli(['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '500']);
    const run = watch(child);
    child.stdin!.write(firstPart); // and stdin stays open
    await run.seen('translation (es-es)');
    child.kill('SIGINT');
    const result = await run.ended;
    expect(result.signal).toBeNull();
    expect(result.code).toBe(0);
    expect(result.stdout.equals(expectedTranslation(firstPart, fixture.utterances.slice(0, 1)))).toBe(true);
    expect(result.stderr).toContain('rt-translate: stopping: the input is closed');
  });

  it('a second SIGINT aborts (exit 130), even while the service is still starting', async () => {
    const emulator = await startEmulator({ apiKeys: [KEY], coldStartMs: 600_000 });
    servers.push(emulator);
    const child = spawnCli(['--from', 'en-us', '--to', 'es-es', '--realtime-url', emulator.realtimeUrl], { RT_TRANSLATE_API_KEY: KEY });
    const run = watch(child);
    child.stdin!.write(firstPart);
    await run.seen('the service is starting');
    child.kill('SIGINT');
    await run.seen('rt-translate: stopping');
    child.kill('SIGINT');
    const result = await run.ended;
    expect(result.code).toBe(130);
    expect(lines(result.stderr).at(-1)).toBe('rt-translate: interrupted');
  });

  it('a reader that goes away (a closed stdout pipe) ends the command quietly with status 0', async () => {
    const child = spawnCli(['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '500']);
    child.stdout!.once('data', () => child.stdout!.destroy()); // as `| head -c 1` does
    const run = watch(child);
    child.stdin!.end(fixture.pcm);
    const result = await run.ended;
    expect(result.code).toBe(0);
    expect(result.stderr).not.toMatch(/EPIPE|error/i);
  });

  it('an HTTP command whose reader has gone (stdout closed before it writes) ends quietly with status 0', async () => {
    const child = spawnCli(['languages']);
    child.stdout!.destroy(); // as `| true` does: nothing will ever read
    const result = await watch(child).ended;
    expect(result.code).toBe(0);
    expect(result.stderr).not.toMatch(/EPIPE|error/i);
  });

  it('usage errors exit 2, --version exits 0', async () => {
    const [bogus, version] = await Promise.all([runCli(['--from', 'en-us', '--to', 'es-es', '--bogus']), runCli(['--version'])]);
    expect(bogus.code).toBe(2);
    expect(bogus.stderr).toBe("rt-translate: Unknown option '--bogus'. See rt-translate --help.\n");
    expect(version.code).toBe(0);
    expect(version.stdout.toString()).toMatch(/^\d+\.\d+\.\d+\n$/);
  });
});
