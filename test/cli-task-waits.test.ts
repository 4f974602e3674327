/**
 * The commands that wait for a task (`dub`, `translated-tts`, `task-status --wait`) when status
 * reads fail on the way: 429s (with `Retry-After`), 500s and resets no longer end the wait, the
 * failures are said on stderr, and the result is fetched (exit 0). A wait that ends without the
 * task's final status (a failure no retry fixes, its time limit) names the task and the command
 * that resumes it, and that command does. In-process against an emulator on loopback, whose
 * fault switches fail the status reads.
 */
import { describe, expect, it } from 'vitest';
import { mkdir, readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { synthesizeFlac } from '../lib/emulator/synth.js';
import { LocalizationClient } from '../lib/http/client.js';
import { HttpStatusError, TaskWaitTimeoutError } from '../lib/http/errors.js';
import type { CliIo } from '../bin/cli.js';
import { describeFailure } from '../bin/failures.js';
import { LiveStatus } from '../bin/status-line.js';
import { waitForRun } from '../bin/commands/task-waits.js';
import { runDub } from '../bin/commands/dub.js';
import { runTaskStatus } from '../bin/commands/task-status.js';
import { runTranslatedTts } from '../bin/commands/translated-tts.js';
import { runCommand, type CommandEntry, type CommandResult } from './helpers/cli-io.js';
import { startInProcessEmulator } from './helpers/cli.js';
import { sharedCliEmulator } from './http-test-helpers.js';

const KEY = 'sk-cli-task-waits-2b7e90c1d4';
const MEDIA = 'https://media.example.com/speech-en-24k.wav';
const ENTRIES: Record<string, CommandEntry> = { dub: runDub, 'translated-tts': runTranslatedTts, 'task-status': runTaskStatus };

const shared = sharedCliEmulator(KEY);
const control = shared.control;

/** `rt-translate ARGS --poll-ms 10` in-process, against the emulator (base URL and key from the environment). */
function cli(args: string[]): Promise<CommandResult> {
  const [name, ...rest] = args;
  return runCommand(ENTRIES[name!]!, [...rest, '--poll-ms', '10'], { env: shared.env });
}

/** The status reads the emulator saw for `prefix` (`/dub/ID`). */
async function statusReads(prefix: string): Promise<number> {
  const { requests } = (await control('GET', 'requests')) as { requests: Array<{ method: string; path: string }> };
  return requests.filter((r) => r.method === 'GET' && r.path === prefix).length;
}

function lines(text: string | Buffer): string[] {
  return text
    .toString()
    .split('\n')
    .filter((line) => line !== '');
}

/** A burst of failed status reads under `path`: 429s (no wait, then 1 s), 500s, resets. */
function flakyReads(path: string): unknown[] {
  return [
    { status: 429, retryAfter: 0, count: 2, path, method: 'GET' },
    { status: 429, retryAfter: 1, count: 1, path, method: 'GET' },
    { status: 500, count: 3, path, method: 'GET' },
    { dropAfterBytes: 0, count: 3, path, method: 'GET' },
  ];
}

const escape = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The stderr lines of a wait that survived `failed` failed status reads of `kind`. */
function survivedLines(kind: string, failed: number): unknown[] {
  return [
    expect.stringMatching(new RegExp(`^rt-translate: task ([0-9a-f-]{36}) \\(${kind}\\) created$`)),
    expect.stringMatching(
      /^rt-translate: task [0-9a-f-]{36}: reading its status failed \(GET \/[a-z-]+\/[0-9a-f-]{36} was rate limited \(429\)\. It asked to wait 0 ms\. Slow down or retry later \[RTT_RATE_LIMIT\]\); trying again in 1\.0 s, until the wait's limit$/,
    ),
    expect.stringMatching(new RegExp(`^rt-translate: task [0-9a-f-]{36}: status read again after ${failed} failed reads$`)),
    expect.stringMatching(/^rt-translate: task [0-9a-f-]{36}: run \d+$/),
  ];
}

describe('a wait survives failed status reads', () => {
  it('dub -o DIR: 429s (Retry-After 0 and 1), 500s and resets on consecutive reads; exit 0, the dubbed file written', async () => {
    await control('POST', 'faults', flakyReads('/dub/'));
    const out = join(shared.dir, 'dubbed');
    await mkdir(out);
    const started = Date.now();
    const result = await cli(['dub', '--url', MEDIA, '--from', 'en-us', '--to', 'es-es', '-o', out]);
    expect(result.code, result.stderr).toBe(0);
    expect(lines(result.stderr)).toEqual(survivedLines('dub', 9));
    const taskId = /task ([0-9a-f-]{36})/.exec(result.stderr)![1]!;
    const runId = Number(/run (\d+)/.exec(result.stderr)![1]);
    expect(lines(result.stdout)).toEqual([join(out, `dub-${runId}-es-es.flac`)]);
    expect(await readdir(out)).toEqual([`dub-${runId}-es-es.flac`]);
    // 9 failed reads, then PENDING and SUCCESS: each read reached the service once.
    expect(await statusReads(`/dub/${taskId}`)).toBe(11);
    // The one Retry-After of 1 s was honoured; the other waits are short (--poll-ms 10 caps the back-off).
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
  });

  it('translated-tts: the same burst; exit 0, the translation printed and the FLAC written', async () => {
    await control('POST', 'faults', flakyReads('/translated-tts/'));
    const out = join(shared.dir, 'flaky.flac');
    const result = await cli(['translated-tts', '--text', 'Good morning, dear listeners', '--from', 'en-us', '--to', 'es-es', '-o', out]);
    expect(result.code, result.stderr).toBe(0);
    expect(lines(result.stderr)).toEqual(survivedLines('translated-tts', 9));
    expect(result.stdout.toString()).toBe('[es-es] Good morning, dear listeners\n');
    expect((await readFile(out)).equals(synthesizeFlac('[es-es] Good morning, dear listeners', { sampleRate: 24_000 }))).toBe(true);
  });

  it('task-status --wait: the same burst; exit 0 with the SUCCESS status', async () => {
    const { task_id: taskId, run_id: runId } = (await control('POST', 'tasks', { kind: 'transcription', polls: 1 })) as { task_id: string; run_id: number };
    await control('POST', 'faults', flakyReads('/transcribe/'));
    const result = await cli(['task-status', 'transcription', taskId, '--wait']);
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout.toString())).toMatchObject({ status: 'SUCCESS', run_id: runId });
    expect(lines(result.stderr)).toEqual(survivedLines('transcription', 9).slice(1, 3));
    expect(await statusReads(`/transcribe/${taskId}`)).toBe(11);
  });
});

describe('a wait that ends without the final status names the task and how to resume it', () => {
  it('a task the service does not know (404): exit 1, and no line saying to resume it', async () => {
    const result = await cli(['task-status', 'transcription', '00000000-0000-4000-8000-000000000000', '--wait']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/404/);
    expect(result.stderr).not.toMatch(/may still be running|wait for it again/);
  });

  it('a 403 during the wait: exit 1, the command to resume on stderr, no output file; resuming fetches the result', async () => {
    await control('POST', 'faults', [
      { status: 500, count: 2, path: '/translated-tts/', method: 'GET' },
      { status: 403, count: 1, path: '/translated-tts/', method: 'GET' },
    ]);
    const out = join(shared.dir, 'resumed.flac');
    const text = 'See you tomorrow, dear listeners';
    const failed = await cli(['translated-tts', '--text', text, '--from', 'en-us', '--to', 'fr-fr', '-o', out]);
    expect(failed.code).toBe(1);
    const taskId = /task ([0-9a-f-]{36})/.exec(failed.stderr)![1]!;
    expect(lines(failed.stderr)).toEqual([
      `rt-translate: task ${taskId} (translated-tts) created`,
      expect.stringMatching(
        new RegExp(
          `^rt-translate: task ${taskId}: reading its status failed \\(GET /translated-tts/${taskId} failed with HTTP 500: Injected fault: 500 \\[RTT_HTTP\\]\\); trying again in 0\\.0 s, until the wait's limit$`,
        ),
      ),
      `rt-translate: task ${taskId} (translated-tts) may still be running, and the service bills it: wait for it again with ` +
        `\`rt-translate task-status translated-tts ${taskId} --wait\`, then fetch its result with --run RUN_ID`,
      expect.stringMatching(new RegExp(`^rt-translate: GET /translated-tts/${escape(taskId)} was refused with 403: .*\\[RTT_FORBIDDEN\\]$`)),
    ]);
    expect(failed.stdout.length).toBe(0);
    expect(await readdir(shared.dir)).not.toContain('resumed.flac');
    expect(await readdir(shared.dir)).not.toContain('resumed.flac.partial');

    // What the message says to do works.
    const waited = await cli(['task-status', 'translated-tts', taskId, '--wait']);
    expect(waited.code).toBe(0);
    const { run_id: runId } = JSON.parse(waited.stdout.toString()) as { run_id: number };
    const fetched = await cli(['translated-tts', '--run', String(runId), '-o', out]);
    expect(fetched.code).toBe(0);
    expect((await readFile(out)).equals(synthesizeFlac(`[fr-fr] ${text}`, { sampleRate: 24_000 }))).toBe(true);
  });

  it('its time limit passed during failed reads: the task id, the reads that failed, the last failure and the command to resume', async () => {
    const { task_id: taskId } = (await control('POST', 'tasks', { kind: 'dub', polls: 1000 })) as { task_id: string };
    await control('POST', 'faults', [{ status: 503, retryAfter: null, count: 100_000, path: '/dub/', method: 'GET' }]);
    const fast = { initialIntervalMs: 10, maxIntervalMs: 10, maxWaitMs: 300 };
    const client = new LocalizationClient({ baseUrl: shared.emu.baseUrl, apiKey: KEY, polling: { speech: fast, longMedia: fast } });
    let stderr = '';
    const io: CliIo = {
      stdin: Readable.from([]),
      stdout: new Writable({ write: (_c, _e, cb) => cb() }),
      stderr: new Writable({
        write(chunk: Buffer, _e, cb) {
          stderr += chunk.toString();
          cb();
        },
      }),
      env: {},
    };
    try {
      const progress = new LiveStatus(io.stderr, 'off');
      const error = await waitForRun(io, { client, emulator: undefined, signal: new AbortController().signal, progress }, 'dub', taskId).catch(
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(TaskWaitTimeoutError);
      const timeout = error as TaskWaitTimeoutError;
      expect(timeout.taskId).toBe(taskId);
      expect(timeout.failedReads).toBe(timeout.reads);
      // A run of failed reads, however many a loaded machine fits in 300 ms (every 10 ms on an idle one).
      expect(timeout.reads).toBeGreaterThanOrEqual(2);
      // The wait ends at its limit, not before (that it ends at all is the test finishing: the faults outlast any count).
      expect(timeout.waitedMs).toBeGreaterThanOrEqual(300);
      expect(timeout.lastFailure).toBeInstanceOf(HttpStatusError);
      expect(await statusReads(`/dub/${taskId}`)).toBe(timeout.reads);
      expect(lines(stderr)).toEqual([
        expect.stringMatching(
          new RegExp(
            `^rt-translate: task ${taskId}: reading its status failed \\(GET /dub/${taskId} failed with HTTP 503: Injected fault: 503 \\[RTT_HTTP\\]\\); trying again in 0\\.0 s, until the wait's limit$`,
          ),
        ),
        `rt-translate: task ${taskId} (dub) may still be running, and the service bills it: wait for it again with ` +
          `\`rt-translate task-status dub ${taskId} --wait\`, then fetch its result with --run RUN_ID`,
      ]);
      // What the command prints last, as the entry point does.
      expect(describeFailure(error)).toMatch(
        new RegExp(
          `^rt-translate: Task ${taskId}: none of its ${timeout.reads} status reads succeeded in ${timeout.waitedMs} ms \\(maxWaitMs 300\\); the last failed with: ` +
            `GET /dub/${taskId} failed with HTTP 503: Injected fault: 503\\. It may still finish: poll it again later with its task id, or raise maxWaitMs\\. \\[RTT_TIMEOUT\\]$`,
        ),
      );
      expect(stderr + describeFailure(error)).not.toContain(KEY);
    } finally {
      await client.close();
    }
  });
});

describe('against a running `rt-translate emulator`, a wait goes at its pace', () => {
  it('dub and task-status --wait read its 2 s task twice each: at once, then when the emulator said it would be done', async () => {
    // Its default task time, 2 s.
    const running = await startInProcessEmulator(['--api-key', KEY]);
    try {
      const env = { RT_TRANSLATE_BASE_URL: running.baseUrl, RT_TRANSLATE_API_KEY: KEY };
      const reads = async (taskId: string): Promise<number> => {
        const { requests } = (await (await fetch(`${running.baseUrl}/_emulator/requests`)).json()) as { requests: Array<{ method: string; path: string }> };
        return requests.filter((r) => r.method === 'GET' && r.path === `/dub/${taskId}`).length;
      };
      // No --poll-ms: the documented schedule would read a dub first after 15 s.
      const dubbed = await runCommand(runDub, ['--url', MEDIA, '--from', 'en-us', '--to', 'es-es'], { env });
      expect(dubbed.code, dubbed.stderr).toBe(0);
      expect(await reads(/task ([0-9a-f-]{36})/.exec(dubbed.stderr)![1]!)).toBe(2);

      const left = await runCommand(runDub, ['--url', MEDIA, '--from', 'en-us', '--to', 'es-es', '--no-wait'], { env });
      const { task_id: taskId } = JSON.parse(left.stdout.toString()) as { task_id: string };
      const waited = await runCommand(runTaskStatus, ['dub', taskId, '--wait'], { env });
      expect(waited.code, waited.stderr).toBe(0);
      expect(JSON.parse(waited.stdout.toString())).toMatchObject({ status: 'SUCCESS' });
      expect(await reads(taskId)).toBe(2);
    } finally {
      await running.stop();
    }
  });
});
