/**
 * SIGINT or SIGTERM in the middle of a command that writes a file: the file is kept as
 * `OUT.partial` (never `OUT`), valid as far as it goes (a WAV's sizes are those of the data it
 * holds, a FLAC ends after its last whole frame with STREAMINFO saying so), and the last line on
 * stderr says how much it holds; exit 130 for SIGINT, 143 for SIGTERM.
 *
 * The emulator's fault switch `stallAfterBytes` holds a stream or a download after some bytes;
 * the test waits until they are in the file (watching its directory), then sends the signal:
 * in process through the runner's signals, and once to a real process. Each file is checked by
 * parsing its header against its length, and WAV and FLAC files by ffmpeg (the dev dependency's
 * binary), which must decode them without a complaint to exactly the samples announced.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { readFileSync, statSync, watch, type FSWatcher } from 'node:fs';
import { createRequire } from 'node:module';
import { mkdir, readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { collect, killAllChildren, spawnCli, startInProcess, type CliResult } from './helpers/cli.js';
import { expectedTranslation, loadSpeechFixture } from './helpers/speech.js';
import { waitFor } from './helpers/wait-for.js';
import { sharedCliEmulator } from './http-test-helpers.js';

const FFMPEG = (createRequire(import.meta.url)('@ffmpeg-installer/ffmpeg') as { path: string }).path;
const KEY = 'sk-cli-interrupt-4f1d8a2c6e';
const TEXT = 'A long announcement for everyone waiting at the gate: the flight to Madrid now boards at gate twelve, and the flight to Lisbon at gate four.';
/** Held for longer than any test: only the signal ends the command. */
const STALL_MS = 600_000;
const fixture = loadSpeechFixture();
const shared = sharedCliEmulator(KEY);

afterAll(() => killAllChildren());

let cases = 0;
async function caseDir(): Promise<string> {
  const path = join(shared.dir, `case-${++cases}`);
  await mkdir(path);
  return path;
}

function lines(text: string): string[] {
  return text.split('\n').filter((line) => line !== '');
}

/** Resolves once the file at `path` holds at least `bytes` bytes (or `test` holds for its text), watching its directory. */
async function fileReaches(path: string, bytes: number, test?: (text: string) => boolean): Promise<void> {
  const dir = join(path, '..');
  const watcher: FSWatcher = watch(dir);
  try {
    await waitFor(
      () => {
        const size = statSync(path, { throwIfNoEntry: false })?.size ?? 0;
        if (size < bytes) return false;
        return test === undefined || test(readFileSync(path, 'utf8'));
      },
      { onEvent: [watcher, 'change', 'rename'] },
    );
  } finally {
    watcher.close();
  }
}

/** What ffmpeg makes of `path`: PCM16 LE, and what it complained about. */
async function ffmpegDecode(path: string): Promise<{ pcm: Buffer; complaints: string }> {
  const { stdout, stderr } = await promisify(execFile)(FFMPEG, ['-v', 'error', '-i', path, '-f', 's16le', '-'], { encoding: 'buffer', maxBuffer: 64 << 20 });
  return { pcm: stdout, complaints: stderr.toString() };
}

/** Checks a PCM16 WAV file's sizes against its length; returns its seconds. */
function checkWav(wav: Buffer): number {
  expect(wav.toString('latin1', 0, 4)).toBe('RIFF');
  expect(wav.readUInt32LE(4)).toBe(wav.length - 8);
  expect(wav.toString('latin1', 36, 40)).toBe('data');
  const data = wav.readUInt32LE(40);
  expect(data).toBe(wav.length - 44);
  const blockAlign = wav.readUInt16LE(32);
  expect(data % blockAlign).toBe(0);
  return data / wav.readUInt32LE(28);
}

/** Checks a FLAC file: ffmpeg decodes exactly STREAMINFO's samples; returns its seconds. */
async function checkFlac(path: string): Promise<number> {
  const flac = await readFile(path);
  expect(flac.toString('latin1', 0, 4)).toBe('fLaC');
  const rate = (flac[18]! << 12) | (flac[19]! << 4) | (flac[20]! >> 4);
  const channels = ((flac[20]! >> 1) & 7) + 1;
  const total = (flac[21]! & 0xf) * 2 ** 32 + flac.readUInt32BE(22);
  expect(flac.toString('hex', 26, 42)).toBe('0'.repeat(32));
  const decoded = await ffmpegDecode(path);
  expect(decoded.complaints).toBe('');
  expect(decoded.pcm.length).toBe(total * 2 * channels);
  expect(total).toBeGreaterThan(0);
  return total / rate;
}

/**
 * Runs HTTP command `args` (writing `-o DIR/name`) in process against the shared emulator, whose
 * answer on `path` stalls after `bytes` bytes; once they are in `name.partial`, sends `signal`.
 */
async function interruptMidway(
  args: string[],
  name: string,
  stall: { path: string; bytes: number },
  signal: 'SIGINT' | 'SIGTERM',
): Promise<{ result: CliResult; out: string; target: string }> {
  const out = await caseDir();
  const target = join(out, name);
  await shared.control('POST', 'faults', { stallAfterBytes: stall.bytes, stallMs: STALL_MS, path: stall.path });
  const run = startInProcess([...args, '-o', target], { env: shared.env });
  run.stdin.end();
  await fileReaches(`${target}.partial`, stall.bytes);
  run.signal(signal);
  const result = await run.result;
  expect(await readdir(out)).toEqual([`${name}.partial`]);
  return { result, out, target };
}

const TTS = ['tts', '--text', TEXT, '--language', 'en-us'];

describe('an HTTP command interrupted midway: OUT.partial valid as far as it goes, its length said', () => {
  it('tts -o out.wav, SIGINT: the WAV the service streams, its header claiming all of it, gets the sizes of what arrived (exit 130)', async () => {
    // An odd count: the last sample is cut in two.
    const { result, target } = await interruptMidway(TTS, 'out.wav', { path: '/tts-stream', bytes: 30_001 }, 'SIGINT');
    expect(result.code).toBe(130);
    const wav = await readFile(`${target}.partial`);
    expect(wav.length).toBe(30_000);
    const seconds = checkWav(wav);
    expect(lines(result.stderr).at(-1)).toBe(`rt-translate: interrupted: ${target}.partial holds the first ${seconds.toFixed(1)} s of audio`);
    const decoded = await ffmpegDecode(`${target}.partial`);
    expect(decoded.complaints).toBe('');
    expect(decoded.pcm.equals(wav.subarray(44))).toBe(true);
  });

  it.each([
    { name: 'tts -o out.flac, SIGTERM', args: TTS, stall: { path: '/tts-stream', bytes: 20_000 }, signal: 'SIGTERM' as const, code: 143 },
    {
      name: 'translated-tts -o out.flac, SIGINT during the download',
      args: ['translated-tts', '--text', TEXT, '--from', 'en-us', '--to', 'es-es', '--poll-ms', '10'],
      stall: { path: '/tts-result/', bytes: 12_000 },
      signal: 'SIGINT' as const,
      code: 130,
    },
  ])('$name: the FLAC ends after its last whole frame, STREAMINFO says how many samples (exit $code)', async ({ args, stall, signal, code }) => {
    const { result, target } = await interruptMidway(args, 'out.flac', stall, signal);
    expect(result.code).toBe(code);
    expect((await readFile(`${target}.partial`)).length).toBeLessThanOrEqual(stall.bytes);
    const seconds = await checkFlac(`${target}.partial`);
    expect(lines(result.stderr).at(-1)).toBe(`rt-translate: interrupted: ${target}.partial holds the first ${seconds.toFixed(1)} s of audio`);
  });

  it('dub -o DIR, SIGINT during a download: DIR holds NAME.partial, a valid FLAC, and no NAME (exit 130)', async () => {
    const out = await caseDir();
    await shared.control('POST', 'faults', { stallAfterBytes: 20_000, stallMs: STALL_MS, path: '/_files/' });
    // The run is announced on stderr before its files are downloaded.
    let said = '';
    let announced: (runId: string) => void = () => undefined;
    const running = new Promise<string>((resolve) => (announced = resolve));
    const run = startInProcess(['dub', '--url', 'https://media.example.com/talk.mp4', '--from', 'en-us', '--to', 'es-es', '--poll-ms', '10', '-o', out], {
      env: shared.env,
      onStderr: (text) => {
        said += text;
        const found = /: run (\d+)/.exec(said)?.[1];
        if (found) announced(found);
      },
    });
    run.stdin.end();
    const runId = await running;
    const partial = join(out, `dub-${runId}-es-es.flac.partial`);
    await fileReaches(partial, 20_000);
    run.signal('SIGINT');
    const result = await run.result;
    expect(result.code).toBe(130);
    expect(await readdir(out)).toEqual([`dub-${runId}-es-es.flac.partial`]);
    const seconds = await checkFlac(partial);
    expect(lines(result.stderr).at(-1)).toBe(`rt-translate: interrupted: ${partial} holds the first ${seconds.toFixed(1)} s of audio`);
  });

  it('tts -o out.wav as a process, a real SIGTERM: exit status 143, the same valid WAV', async () => {
    const out = await caseDir();
    const target = join(out, 'out.wav');
    await shared.control('POST', 'faults', { stallAfterBytes: 30_000, stallMs: STALL_MS, path: '/tts-stream' });
    const child = spawnCli(['tts', '--text', TEXT, '--language', 'en-us', '-o', target], shared.env);
    child.stdin?.end();
    const ended: Promise<CliResult> = collect(child);
    await fileReaches(`${target}.partial`, 30_000);
    child.kill('SIGTERM');
    const result = await ended;
    expect(result.signal).toBeNull();
    expect(result.code).toBe(143);
    const seconds = checkWav(await readFile(`${target}.partial`));
    expect(lines(result.stderr).at(-1)).toBe(`rt-translate: interrupted: ${target}.partial holds the first ${seconds.toFixed(1)} s of audio`);
    expect(await readdir(out)).toEqual(['out.wav.partial']);
  });
});

describe('the realtime command and listen, aborted: OUT.partial with what arrived', () => {
  /** The first utterance and the silence after it; stdin then stays open, as a microphone's would. */
  const firstPart = fixture.pcm.subarray(0, 84_480 * 2);
  const firstAnswer = expectedTranslation(firstPart, fixture.utterances.slice(0, 1));

  it.each([
    { name: 'a second SIGINT', signals: ['SIGINT', 'SIGINT'] as const, code: 130 },
    { name: 'SIGTERM', signals: ['SIGTERM'] as const, code: 143 },
  ])('translate -o out.wav, $name after the first translation: a WAV with exact sizes of it (exit $code)', async ({ signals, code }) => {
    const out = await caseDir();
    const target = join(out, 'out.wav');
    let said = '';
    let translated: () => void = () => undefined;
    const heard = new Promise<void>((resolve) => (translated = resolve));
    const run = startInProcess(['--from', 'en-us', '--to', 'es-es', '-o', target], {
      onStderr: (text) => {
        said += text;
        if (/translation \(es-es\)/.test(said)) translated();
      },
    });
    run.stdin.write(firstPart);
    await heard;
    // The audio of the translation follows its text: wait until it is all in the file.
    await fileReaches(`${target}.partial`, 44 + firstAnswer.length);
    for (const signal of signals) run.signal(signal);
    const result = await run.result;
    expect(result.code).toBe(code);
    expect(await readdir(out)).toEqual(['out.wav.partial']);
    const wav = await readFile(`${target}.partial`);
    const seconds = checkWav(wav);
    expect(wav.subarray(44).equals(firstAnswer)).toBe(true);
    expect(lines(result.stderr).at(-1)).toBe(`rt-translate: interrupted: ${target}.partial holds the first ${seconds.toFixed(1)} s of audio`);
  });

  it('listen -o out.txt, SIGTERM after the first line: out.txt.partial holds it, and says so (exit 143)', async () => {
    const out = await caseDir();
    const target = join(out, 'out.txt');
    const run = startInProcess(['listen', '-o', target]);
    run.stdin.write(firstPart);
    await fileReaches(`${target}.partial`, 1, (text) => text.endsWith('\n'));
    run.signal('SIGTERM');
    const result = await run.result;
    expect(result.code).toBe(143);
    expect(await readdir(out)).toEqual(['out.txt.partial']);
    expect(lines(await readFile(`${target}.partial`, 'utf8'))).toEqual([expect.stringMatching(/^\[0\.\d\d-\d\.\d\d\] .+/)]);
    expect(lines(result.stderr).at(-1)).toBe(`rt-translate: interrupted: ${target}.partial holds the first line`);
  });
});
