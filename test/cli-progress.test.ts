/**
 * Progress of the long commands on stderr: the texts (pure functions of numbers), the line in its
 * three modes (redrawn in place on a terminal, plain lines at a bounded rate with `--progress`
 * elsewhere, nothing), and each command that runs long, in process against an emulator on
 * loopback: TTS, translated TTS, task waits (dub, transcription, voice design, task-status
 * --wait), uploads (transcription, cloning), downloads (dub -o, separate-results) and the
 * realtime command, on a fake terminal, with `--progress` on a pipe, and with neither (nothing).
 */
import { statSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { UsageError } from '../bin/cli.js';
import { LiveStatus, PROGRESS_LINE_MS, progressMode, type ProgressMode } from '../bin/status-line.js';
import { byteText, elapsedText, transferText, waitText, type WaitProgress } from '../bin/commands/transfers.js';
import { loadSpeechFixture } from './helpers/speech.js';
import { permanentLines, runInProcess, statusTexts, type InProcessOptions } from './helpers/cli.js';
import { KEY, VOICE_DESCRIPTION, control, logged, sharedEmulator } from './http-test-helpers.js';
const env = sharedEmulator();
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-translate-progress-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/* ----------------------------------------------------------------------------------------- */
/* Texts                                                                                     */

describe('progress texts', () => {
  it.each([
    [0, '0 B'],
    [999, '999 B'],
    [1000, '1.0 kB'],
    [12_345_678, '12.3 MB'],
    [72_744_188, '72.7 MB'],
    [1_204_000_000, '1.20 GB'],
  ])('byteText(%d) = %s', (bytes, text) => {
    expect(byteText(bytes)).toBe(text);
  });

  it.each([
    [0, '0 s'],
    [59_999, '59 s'],
    [60_000, '1 min 00 s'],
    [185_000, '3 min 05 s'],
    [3_725_000, '1 h 02 min'],
  ])('elapsedText(%d) = %s', (ms, text) => {
    expect(elapsedText(ms)).toBe(text);
  });

  const wait = (over: Partial<WaitProgress>): WaitProgress => ({
    kind: 'dub',
    status: undefined,
    failedReads: 0,
    nextCheckAt: 15_000,
    now: 0,
    start: 0,
    ...over,
  });
  it.each([
    ['before the first read', wait({}), 'waiting for the dub task (submitted, first check in 15 s), 0 s'],
    ['pending', wait({ status: 'PENDING', nextCheckAt: 16_000, now: 12_200 }), 'waiting for the dub task (status PENDING, next check in 4 s), 12 s'],
    [
      'a read failed',
      wait({ status: 'PENDING', failedReads: 1, nextCheckAt: 3000, now: 2000 }),
      'waiting for the dub task (status PENDING, 1 status read failed, next check in 1 s), 2 s',
    ],
    [
      'failed before any status',
      wait({ failedReads: 2, nextCheckAt: 9000, now: 5000 }),
      'waiting for the dub task (submitted, 2 status reads failed, next check in 4 s), 5 s',
    ],
    ['a check under way', wait({ status: 'PENDING', nextCheckAt: 5000, now: 5100 }), 'waiting for the dub task (status PENDING, checking now), 5 s'],
    [
      'final',
      wait({ kind: 'translated-tts', status: 'SUCCESS', nextCheckAt: undefined, now: 61_000 }),
      'waiting for the translated-tts task (status SUCCESS), 1 min 01 s',
    ],
  ])('waitText: %s', (_name, progress, text) => {
    expect(waitText(progress)).toBe(text);
  });

  it.each([
    ['before the first byte', { what: 'receiving the audio', bytes: undefined, elapsedMs: 3400 }, 'receiving the audio: waiting for the service, 3 s'],
    ['bytes alone', { what: 'uploading talk.wav', bytes: 2_100_000, elapsedMs: 9000 }, 'uploading talk.wav: 2.1 MB, 9 s'],
    ['bytes of a total', { what: 'uploading talk.wav', bytes: 2_100_000, totalBytes: 3_400_000, elapsedMs: 9000 }, 'uploading talk.wav: 2.1 MB of 3.4 MB, 9 s'],
    [
      'seconds of audio',
      { what: 'receiving the audio', bytes: 2_160_000, audioSeconds: 45, elapsedMs: 9000 },
      'receiving the audio: 2.2 MB, 45.0 s of audio, 9 s',
    ],
    [
      'seconds of audio of a total',
      { what: 'receiving the audio', bytes: 2_160_000, audioSeconds: 45, totalAudioSeconds: 1800, elapsedMs: 9000 },
      'receiving the audio: 2.2 MB, 45.0 s of 30 min 00 s of audio, 9 s',
    ],
    [
      'a FLAC: its length in all',
      { what: 'downloading audio of run 7', bytes: 12_300_000, totalBytes: 72_700_000, totalAudioSeconds: 1800, elapsedMs: 14_000 },
      'downloading audio of run 7: 12.3 MB of 72.7 MB, 30 min 00 s of audio in all, 14 s',
    ],
  ])('transferText: %s', (_name, progress, text) => {
    expect(transferText(progress)).toBe(text);
  });
});

/* ----------------------------------------------------------------------------------------- */
/* The line                                                                                  */

describe('progressMode: the flags and the terminal', () => {
  it.each([
    [true, {}, 'redraw'],
    [false, {}, 'off'],
    [true, { progress: true }, 'redraw'],
    [false, { progress: true }, 'lines'],
    [true, { 'no-progress': true }, 'off'],
    [false, { 'no-progress': true }, 'off'],
  ] as const)('terminal %s, flags %j: %s', (isTTY, flags, mode) => {
    expect(progressMode(flags, Object.assign(new Writable(), { isTTY }))).toBe(mode);
  });

  it('both flags at once are a usage error', () => {
    expect(() => progressMode({ progress: true, 'no-progress': true }, new Writable())).toThrow(new UsageError('give --progress or --no-progress, not both.'));
  });
});

describe('LiveStatus', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  function fakeStderr(isTTY: boolean, columns = 80): { stream: Writable & { isTTY: boolean; columns: number }; written: () => string } {
    let text = '';
    const stream = Object.assign(
      new Writable({
        decodeStrings: false,
        write(chunk: string, _encoding, callback) {
          text += chunk;
          callback();
        },
      }),
      { isTTY, columns },
    );
    return { stream, written: () => text };
  }

  function started(mode: ProgressMode, isTTY: boolean, columns?: number) {
    vi.useFakeTimers();
    const { stream, written } = fakeStderr(isTTY, columns);
    const status = new LiveStatus(stream, mode);
    let n = 0;
    status.show(() => `step one, tick ${n++}, a text long enough to be cut on a narrow terminal`);
    return { status, written };
  }

  it('redraw: drawn at once, redrawn every 250 ms and on refresh, cut to the width; permanent lines above it; cleared at the end', () => {
    const { status, written } = started('redraw', true, 30);
    expect(written()).toBe('\r\x1b[Kstep one, tick 0, a text lon…');
    vi.advanceTimersByTime(250);
    status.refresh();
    status.print('rt-translate: a line of its own');
    status.stop('rt-translate: done');
    expect(written().split('\r\x1b[K')).toEqual([
      '',
      'step one, tick 0, a text lon…',
      'step one, tick 1, a text lon…',
      'step one, tick 2, a text lon…',
      'rt-translate: a line of its own\n',
      'step one, tick 2, a text lon…',
      'rt-translate: done\n',
    ]);
    vi.advanceTimersByTime(1000);
    expect(written().endsWith('rt-translate: done\n')).toBe(true);
  });

  it(`lines: one line when a step starts, then one every ${PROGRESS_LINE_MS / 1000} s at most, refresh or not; never a carriage return`, () => {
    const { status, written } = started('lines', false);
    const lines = () =>
      written()
        .split('\n')
        .filter((line) => line !== '');
    expect(lines()).toEqual(['step one, tick 0, a text long enough to be cut on a narrow terminal']);
    status.refresh();
    vi.advanceTimersByTime(PROGRESS_LINE_MS - 1);
    expect(lines()).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(lines()).toHaveLength(2);
    // A new step is said at once, and the next line of it comes a whole interval later.
    vi.advanceTimersByTime(PROGRESS_LINE_MS - 10);
    status.show(() => 'step two');
    vi.advanceTimersByTime(PROGRESS_LINE_MS - 1);
    expect(lines().slice(2)).toEqual(['step two']);
    vi.advanceTimersByTime(1);
    status.stop('rt-translate: done');
    expect(lines().slice(2)).toEqual(['step two', 'step two', 'rt-translate: done']);
    expect(written()).not.toContain('\r');
  });

  it('off: nothing, not even the summary', () => {
    const { status, written } = started('off', true);
    vi.advanceTimersByTime(PROGRESS_LINE_MS * 3);
    status.refresh();
    status.stop('rt-translate: done');
    expect(written()).toBe('');
  });
});

/* ----------------------------------------------------------------------------------------- */
/* Commands                                                                                  */

function lines(stderr: string): string[] {
  return stderr.split('\n').filter((line) => line !== '');
}

/** `rt-translate ARGS` against the shared emulator (its key in the environment). */
function cli(args: string[], options: InProcessOptions = {}) {
  return runInProcess(args, { ...options, env: { RT_TRANSLATE_BASE_URL: env.emu.baseUrl, RT_TRANSLATE_API_KEY: KEY, ...options.env } });
}

const TEXT = 'Good morning, and welcome to the news at nine.';

/**
 * The first line of the wait for a task of `kind` polled every 10 ms: its first check is due
 * within the second (or, on a machine slow enough, already under way).
 */
function firstWait(kind: string): RegExp {
  return new RegExp(`^waiting for the ${kind} task \\(submitted, (first check in 1 s|checking now)\\), \\d+ s$`);
}

describe('tts: bytes and seconds of audio as they arrive', () => {
  it('on a terminal: a line within its width, the seconds of the WAV so far; a summary at the end', async () => {
    const out = join(dir, 'tty.wav');
    const result = await cli(['tts', '--text', TEXT, '--language', 'en-us', '-o', out], { stderrTTY: true, columns: 60 });
    expect(result.code).toBe(0);
    const texts = statusTexts(result.stderr);
    expect(texts[0]).toBe('receiving the audio: waiting for the service, 0 s');
    expect(texts.some((text) => /^receiving the audio: [\d.]+ kB, \d+\.\d s of audio, \d+ s$/.test(text))).toBe(true);
    for (const text of texts) expect(text.length).toBeLessThanOrEqual(59);
    const [summary] = permanentLines(result.stderr);
    const bytes = statSync(out).size;
    expect(summary).toMatch(
      new RegExp(`^rt-translate: received the audio into ${out.replaceAll('.', '\\.')} \\([\\d.]+ kB, \\d+\\.\\d s of audio\\) in \\d+ s$`),
    );
    expect(summary).toContain(byteText(bytes));
  });

  it('--progress on a pipe: plain lines, the step and the summary; no carriage return', async () => {
    const result = await cli(['tts', '--text', TEXT, '--language', 'en-us', '-o', join(dir, 'pipe.wav'), '--progress']);
    expect(result.code).toBe(0);
    expect(result.stderr).not.toContain('\r');
    const said = lines(result.stderr);
    expect(said[0]).toBe('receiving the audio: waiting for the service, 0 s');
    expect(said.at(-1)).toMatch(/^rt-translate: received the audio into .*pipe\.wav \([\d.]+ kB, \d+\.\d s of audio\) in \d+ s$/);
  });

  it('nothing on a pipe without --progress, nor on a terminal with --no-progress', async () => {
    const [pipe, quiet] = await Promise.all([
      cli(['tts', '--text', TEXT, '--language', 'en-us', '-o', join(dir, 'silent.wav')]),
      cli(['tts', '--text', TEXT, '--language', 'en-us', '-o', join(dir, 'quiet.wav'), '--no-progress'], { stderrTTY: true }),
    ]);
    expect([pipe.code, quiet.code]).toEqual([0, 0]);
    expect(pipe.stderr).toBe('');
    expect(quiet.stderr).toBe('');
  });

  it('--progress with --no-progress: a usage error before any request', async () => {
    await control(env.emu, 'DELETE', 'requests');
    const result = await cli(['tts', '--text', TEXT, '--language', 'en-us', '-o', join(dir, 'never.wav'), '--progress', '--no-progress']);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe('rt-translate: give --progress or --no-progress, not both.\n');
    expect(await logged(env.emu, 'POST', '/tts-stream')).toEqual([]);
  });
});

describe('translated-tts: the wait, then the download', () => {
  it('on a terminal: what it waits for, its status and the next check; then the FLAC of its whole length', async () => {
    const result = await cli(['translated-tts', '--text', TEXT, '--from', 'en-us', '--to', 'es-es', '-o', join(dir, 'tt.flac'), '--poll-ms', '10'], {
      stderrTTY: true,
      columns: 200,
    });
    expect(result.code).toBe(0);
    const texts = statusTexts(result.stderr);
    expect(texts[0]).toMatch(firstWait('translated-tts'));
    expect(texts).toContainEqual(expect.stringMatching(/^waiting for the translated-tts task \(status PENDING, next check in 1 s\), \d+ s$/));
    expect(texts).toContainEqual(expect.stringMatching(/^receiving the audio of run \d+: [\d.]+ kB of [\d.]+ kB, \d+\.\d s of audio in all, \d+ s$/));
    const permanent = permanentLines(result.stderr);
    expect(permanent[0]).toMatch(/^rt-translate: task [0-9a-f-]{36} \(translated-tts\) created$/);
    expect(permanent[1]).toMatch(/^rt-translate: task [0-9a-f-]{36}: run \d+$/);
    expect(permanent.at(-1)).toMatch(/^rt-translate: received the audio of run \d+ into .*tt\.flac \([\d.]+ kB, \d+\.\d s of audio\) in \d+ s$/);
  });

  it('a terminal that reports 0 columns gets the line cut to 80, not to "…"', async () => {
    const result = await cli(['translated-tts', '--text', TEXT, '--from', 'en-us', '--to', 'es-es', '-o', join(dir, 'zero.flac'), '--poll-ms', '10'], {
      stderrTTY: true,
      columns: 0,
    });
    expect(result.code).toBe(0);
    const texts = statusTexts(result.stderr);
    expect(texts.length).toBeGreaterThan(1);
    for (const text of texts) {
      expect(text).not.toBe('…');
      expect(text.length).toBeLessThanOrEqual(79);
    }
  });

  it('--decode: seconds of audio so far (the PCM), on a pipe with --progress', async () => {
    const result = await cli([
      'translated-tts',
      '--text',
      TEXT,
      '--from',
      'en-us',
      '--to',
      'es-es',
      '-o',
      join(dir, 'tt.wav'),
      '--decode',
      '--poll-ms',
      '10',
      '--progress',
    ]);
    expect(result.code).toBe(0);
    expect(result.stderr).not.toContain('\r');
    const said = lines(result.stderr);
    expect(said).toContainEqual(expect.stringMatching(firstWait('translated-tts')));
    expect(said).toContainEqual(
      'receiving the audio of run ' + /run (\d+)$/.exec(said.find((l) => / run \d+$/.test(l))!)![1] + ': waiting for the service, 0 s',
    );
    expect(said.at(-1)).toMatch(/^rt-translate: received the audio of run \d+ into .*tt\.wav \([\d.]+ kB, \d+\.\d s of audio\) in \d+ s$/);
  });

  it('nothing but the task lines on a pipe without --progress', async () => {
    const result = await cli(['translated-tts', '--text', TEXT, '--from', 'en-us', '--to', 'es-es', '-o', join(dir, 'plain.flac'), '--poll-ms', '10']);
    expect(result.code).toBe(0);
    const said = lines(result.stderr);
    expect(said).toHaveLength(2);
    expect(said[0]).toMatch(/^rt-translate: task [0-9a-f-]{36} \(translated-tts\) created$/);
    expect(said[1]).toMatch(/^rt-translate: task [0-9a-f-]{36}: run \d+$/);
  });
});

describe('other waits, uploads and downloads', () => {
  it('dub -o DIR --progress: the wait for the dub task, then each download with its size', async () => {
    const out = join(dir, 'dub');
    await mkdir(out);
    const result = await cli([
      'dub',
      '--url',
      'https://media.example.com/talk.wav',
      '--from',
      'en-us',
      '--to',
      'es-es',
      '-o',
      out,
      '--poll-ms',
      '10',
      '--progress',
    ]);
    expect(result.code).toBe(0);
    const said = lines(result.stderr);
    expect(said).toContainEqual(expect.stringMatching(firstWait('dub')));
    const downloads = said.filter((line) => line.startsWith('downloading '));
    expect(downloads.length).toBeGreaterThan(0);
    expect(downloads[0]).toMatch(/^downloading (audio|video) of run \d+: waiting for the service, 0 s$/);
    expect(said).toContainEqual(expect.stringMatching(/^rt-translate: downloaded audio of run \d+ \([\d.]+ kB(, \d+\.\d s of audio)?\) in \d+ s$/));
  });

  it('transcribe -i FILE on a terminal: the upload of the file, bytes of its whole, then the wait', async () => {
    const path = join(dir, 'speech.wav');
    await writeFile(path, loadSpeechFixture().wav);
    const result = await cli(['transcribe', '-i', path, '--language', 'en-us', '-o', join(dir, 'speech.json'), '--poll-ms', '10'], {
      stderrTTY: true,
      columns: 200,
    });
    expect(result.code).toBe(0);
    const texts = statusTexts(result.stderr);
    expect(texts[0]).toBe('uploading speech.wav: 0 B, 0 s');
    expect(texts).toContainEqual(expect.stringMatching(/^uploading speech\.wav: [\d.]+ kB of [\d.]+ kB, \d+ s$/));
    expect(texts).toContainEqual(expect.stringMatching(firstWait('transcription')));
    expect(permanentLines(result.stderr)[0]).toMatch(/^rt-translate: uploaded speech\.wav \([\d.]+ kB\) in \d+ s$/);
  });

  it('voices create --file --progress: the upload and its summary, then the voice on stdout', async () => {
    const path = join(dir, 'voice.wav');
    await writeFile(path, loadSpeechFixture().wav);
    const result = await cli(['voices', 'create', '--name', 'Mine', '--gender', '2', '--file', path, '--progress']);
    expect(result.code).toBe(0);
    const said = lines(result.stderr);
    // The step's line, then (on a machine slow enough, more of it every 5 s) its summary.
    expect(said[0]).toBe('uploading voice.wav: 0 B, 0 s');
    expect(said.slice(1, -1).every((line) => line.startsWith('uploading voice.wav: '))).toBe(true);
    expect(said.at(-1)).toMatch(/^rt-translate: uploaded voice\.wav \([\d.]+ kB\) in \d+ s$/);
    expect(result.stdout.toString()).toMatch(/^created voice \d+\n$/);
  });

  it('voices design and translate-text --progress: the wait for their tasks', async () => {
    const [design, text] = await Promise.all([
      cli(['voices', 'design', '--text', 'Hello there.', '--description', VOICE_DESCRIPTION, '--poll-ms', '10', '--progress']),
      cli(['translate-text', '--from', 'en-us', '--to', 'es-es', 'Good morning', '--poll-ms', '10', '--progress']),
    ]);
    expect([design.code, text.code]).toEqual([0, 0]);
    expect(lines(design.stderr)).toContainEqual(expect.stringMatching(firstWait('text-to-voice')));
    expect(lines(text.stderr)).toContainEqual(expect.stringMatching(firstWait('translation')));
  });

  it('task-status --wait --progress: the wait for a task made earlier', async () => {
    const task = (await control(env.emu, 'POST', 'tasks', { kind: 'dub', apiKey: KEY, polls: 2 })) as { task_id: string };
    const result = await cli(['task-status', 'dub', task.task_id, '--wait', '--poll-ms', '10', '--progress']);
    expect(result.code).toBe(0);
    const said = lines(result.stderr);
    expect(said[0]).toMatch(firstWait('dub'));
    expect(said.every((line) => line.startsWith('waiting for the dub task ('))).toBe(true);
    expect(JSON.parse(result.stdout.toString())).toMatchObject({ status: 'SUCCESS' });
  });

  it('separate-results --progress: each track downloaded, of its size and length', async () => {
    const runs = await Promise.all(
      [0, 1].map(() => control(env.emu, 'POST', 'tasks', { kind: 'audio-separation', apiKey: KEY, taskMs: 0 }) as Promise<{ run_id: number }>),
    );
    const out = join(dir, 'separated');
    await mkdir(out);
    const result = await cli(['separate-results', ...runs.map((r) => String(r.run_id)), '-o', out, '--progress']);
    expect(result.code).toBe(0);
    const said = lines(result.stderr);
    for (const { run_id: run } of runs) {
      for (const track of ['foreground', 'background']) {
        expect(said).toContain(`downloading run ${run} ${track}: waiting for the service, 0 s`);
        expect(said).toContainEqual(
          expect.stringMatching(new RegExp(`^rt-translate: downloaded run ${run} ${track} \\([\\d.]+ kB, \\d+\\.\\d s of audio\\) in \\d+ s$`)),
        );
      }
    }
  });
});

describe('the realtime command: the same flags', () => {
  const speech = loadSpeechFixture().pcm.subarray(0, 24_000 * 2 * 4);

  it('--progress on a pipe: each phase as a plain line; --no-progress on a terminal: only the transcripts and the summary', async () => {
    const args = ['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '300', '--text-only', '--emulator'];
    const [pipe, quiet] = await Promise.all([
      runInProcess([...args, '--progress'], { stdin: speech }),
      runInProcess([...args, '--no-progress'], { stdin: speech, stderrTTY: true }),
    ]);
    expect([pipe.code, quiet.code]).toEqual([0, 0]);
    expect(pipe.stderr).not.toContain('\r');
    const said = lines(pipe.stderr);
    expect(said).toContain('connecting: 0 s');
    expect(said).toContainEqual(expect.stringMatching(/^input done: sent \d+\.\d s; waiting for the last translations: \d+ responses?, \d+ s$/));
    expect(quiet.stderr).not.toContain('\r');
    expect(lines(quiet.stderr).filter((line) => !line.startsWith('transcript ') && !line.startsWith('translation '))).toEqual([
      expect.stringMatching(/^rt-translate: using the embedded emulator/),
      expect.stringMatching(/^rt-translate: sent \d+\.\d s of audio, \d+ responses? \(text only\)\.$/),
    ]);
  });
});
