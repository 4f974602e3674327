/**
 * Input that is not audio is refused (exit 2) before any connection, by every command that reads
 * audio: the realtime command and `listen` (which decode it), `transcribe -i` and `voices create
 * --file` (which upload it). The message says what the input looks like and, for the decoding
 * commands, how to insist that it is raw PCM (`-f s16le`). Headerless input is taken as raw PCM
 * on standard input, from a file named `.pcm`/`.raw`, or when its bytes look like sound.
 *
 * Real files: text, JSON, the README, a PNG made with zlib, an MP4 made by the dev dependency's
 * ffmpeg (then read with no ffmpeg on PATH), random bytes, 1 byte, nothing, the speech fixture
 * as WAV and as raw PCM. In-process runs; the refusals against a listener that counts
 * connections, the accepted inputs against the embedded emulator.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';
import { findFfmpegOnPath } from '../lib/audio/ffmpeg.js';
import { expectedTranslation, loadSpeechFixture } from './helpers/speech.js';
import { pngImage } from './helpers/png.js';
import { runInProcess, startConnectionCounter, type CliResult, type ConnectionCounter } from './helpers/cli.js';

const FFMPEG = (createRequire(import.meta.url)('@ffmpeg-installer/ffmpeg') as { path: string }).path;
/** PATH without any directory holding an ffmpeg. */
const PATH_WITHOUT_FFMPEG = (process.env.PATH ?? '')
  .split(delimiter)
  .filter((dir) => dir !== '' && findFfmpegOnPath(dir) === undefined)
  .join(delimiter);
const KEY = 'sk-cli-not-audio-5e0b7c19d2';
const fixture = loadSpeechFixture();
/** The first utterance and the silence after it. */
const speech = fixture.pcm.subarray(0, 84_480 * 2);

let dir: string;
let counter: ConnectionCounter;
const files: Record<string, string> = {};

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-translate-not-audio-'));
  counter = await startConnectionCounter();
  const write = async (name: string, bytes: Buffer | string): Promise<void> => {
    files[name] = join(dir, name);
    await writeFile(files[name]!, bytes);
  };
  await write('notes.txt', 'Meeting notes\n- translate the keynote\n- check the Spanish voice\n');
  await write('data.json', '{"segments":[{"startMs":0,"endMs":1200,"text":"Hello"}]}\n');
  await write('README.md', await readFile(new URL('../README.md', import.meta.url)));
  await write('picture.png', pngImage());
  await write('random.bin', randomBytes(65_536));
  await write('one-byte.bin', Buffer.from([0x42]));
  await write('empty.bin', Buffer.alloc(0));
  await write('speech.wav', fixture.wav);
  await write('speech.pcm', speech);
  await write('speech-take-3', speech);
  const mp4 = join(dir, 'speech.mp4');
  await promisify(execFile)(FFMPEG, ['-v', 'error', '-i', files['speech.wav']!, '-c:a', 'aac', '-y', mp4]);
  files['speech.mp4'] = mp4;
});

afterAll(async () => {
  await counter?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

function lines(text: string): string[] {
  return text.split('\n').filter((line) => line !== '');
}

const INSIST = 'If it is raw PCM after all, say so with -f s16le (or s16be, f32le, mulaw, alaw).';

/** Refusals of the decoding commands: the input, and what the message says it looks like. */
const refused: Array<{ name: string; file: string; says: (path: string) => string }> = [
  {
    name: 'a text file',
    file: 'notes.txt',
    says: (p) => `${p} looks like text, not audio: it has no audio header (WAV, Ogg/Opus, FLAC, MP3, MP4, WebM, ...). ${INSIST}`,
  },
  { name: 'a JSON file', file: 'data.json', says: (p) => `${p} looks like JSON, not audio: ` },
  { name: 'the README', file: 'README.md', says: (p) => `${p} looks like text, not audio: ` },
  { name: 'a PNG image', file: 'picture.png', says: (p) => `${p} looks like a PNG image, not audio: ` },
  {
    name: 'random bytes',
    file: 'random.bin',
    says: (p) =>
      `${p} does not look like audio: it has no audio header (WAV, Ogg/Opus, FLAC, MP3, MP4, WebM, ...), and its bytes do not look like raw PCM16 sound either (unknown binary data: `,
  },
  {
    name: 'an MP4 without ffmpeg on PATH',
    file: 'speech.mp4',
    says: (p) => `${p} is MP4/M4A/MOV (recognised by its header), which the library does not decode itself: install ffmpeg`,
  },
  { name: 'a file of 1 byte', file: 'one-byte.bin', says: (p) => `No audio in ${p}: it holds 1 byte, less than one sample frame (2 bytes of s16le mono).` },
  { name: 'an empty file', file: 'empty.bin', says: (p) => `No audio in ${p}: it holds nothing.` },
];

/** `rt-translate ARGS` against the counting listener, with no ffmpeg on PATH. */
function refusedRun(args: string[], stdin?: Buffer): Promise<CliResult> {
  return runInProcess([...args, '--realtime-url', counter.url, '--api-key', KEY], { env: { PATH: PATH_WITHOUT_FFMPEG }, ...(stdin ? { stdin } : {}) });
}

function expectRefused(result: CliResult, message: string): void {
  expect(result.code).toBe(2);
  expect(result.stdout.length).toBe(0);
  expect(lines(result.stderr)).toHaveLength(1);
  expect(result.stderr.startsWith(`rt-translate: ${message}`)).toBe(true);
  expect(result.stderr).toMatch(/\[RTT_INPUT\]\n$/);
  expect(counter.connections).toBe(0);
  expect(result.stderr).not.toContain(KEY);
}

describe.concurrent('the realtime command and listen refuse input that is not audio (exit 2, no connection)', () => {
  it.each(refused)('translate -i: $name', async ({ file, says }) => {
    const result = await refusedRun(['--from', 'en-us', '--to', 'es-es', '-i', files[file]!, '-o', join(dir, `never-${file}.wav`)]);
    expectRefused(result, says(files[file]!));
    // How to insist, for everything but input with no audio at all.
    if (!file.endsWith('.bin') || file === 'random.bin') expect(result.stderr).toContain(INSIST);
    else expect(result.stderr).not.toContain(INSIST);
  });

  it.each(refused)('listen -i: $name', async ({ file, says }) => {
    expectRefused(await refusedRun(['listen', '-i', files[file]!]), says(files[file]!));
  });

  it('text or a PNG on standard input', async () => {
    const [text, picture] = await Promise.all([
      refusedRun(['--from', 'en-us', '--to', 'es-es'], await readFile(files['notes.txt']!)),
      refusedRun(['listen'], await readFile(files['picture.png']!)),
    ]);
    expectRefused(text, 'standard input looks like text, not audio: ');
    expectRefused(picture, 'standard input looks like a PNG image, not audio: ');
  });

  it('a text file named .pcm is refused too: the name does not make text sound', async () => {
    const named = join(dir, 'notes.pcm');
    await writeFile(named, await readFile(files['notes.txt']!));
    expectRefused(await refusedRun(['--from', 'en-us', '--to', 'es-es', '-i', named, '--text-only']), `${named} looks like text, not audio: `);
  });
});

describe.concurrent('audio and raw PCM are read (exit 0, against the embedded emulator)', () => {
  const answer = expectedTranslation(speech, fixture.utterances.slice(0, 1));

  it.each([
    { name: 'the fixture as WAV', input: 'speech.wav', expected: expectedTranslation(fixture.pcm, fixture.utterances) },
    { name: 'raw PCM in a .pcm file', input: 'speech.pcm', expected: answer },
    { name: 'raw PCM in a file without an extension (its bytes look like sound)', input: 'speech-take-3', expected: answer },
  ])('$name', async ({ input, expected }) => {
    const result = await runInProcess(['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '300', '-i', files[input]!]);
    expect(result.stderr).not.toMatch(/RTT_INPUT/);
    expect(result.code).toBe(0);
    expect(result.stdout.equals(expected)).toBe(true);
  });

  it('raw PCM on standard input', async () => {
    const result = await runInProcess(['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '300'], { stdin: speech });
    expect(result.code).toBe(0);
    expect(result.stdout.equals(answer)).toBe(true);
  });

  it('-f s16le insists: random bytes and a text file are sent as raw PCM', async () => {
    const [noise, text] = await Promise.all([
      runInProcess(['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '300', '--text-only', '-f', 's16le', '-i', files['random.bin']!]),
      runInProcess(['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '300', '--text-only', '-f', 's16le', '-i', files['notes.txt']!]),
    ]);
    expect(noise.code).toBe(0);
    expect(noise.stderr).toMatch(/sent 1\.4 s of audio/);
    expect(text.code).toBe(0);
    expect(text.stderr).not.toMatch(/RTT_INPUT/);
  });

  it('-f s16le with a file of 1 byte: still no audio, less than one sample frame', async () => {
    const result = await refusedRun(['--from', 'en-us', '--to', 'es-es', '-f', 's16le', '-i', files['one-byte.bin']!]);
    expectRefused(result, `No audio in ${files['one-byte.bin']}: it holds 1 byte, less than one sample frame (2 bytes of s16le mono).`);
  });
});

describe.concurrent('uploads (transcribe -i, voices create --file) must be media files (exit 2, no request)', () => {
  /** The HTTP commands against the counting listener: any request would be a connection. */
  function uploadRun(args: string[], stdin?: Buffer): Promise<CliResult> {
    return runInProcess([...args, '--base-url', counter.url.replace('ws:', 'http:'), '--api-key', KEY], stdin ? { stdin } : {});
  }
  const TRANSCRIBED = 'audio or video files (WAV, MP3, FLAC, AAC, Ogg, MP4, WebM, ...)';
  const CLONED = 'WAV, MP3, FLAC or AAC audio';

  it.each([
    { file: 'notes.txt', looks: 'looks like text' },
    { file: 'data.json', looks: 'looks like JSON' },
    { file: 'picture.png', looks: 'looks like a PNG image' },
    { file: 'random.bin', looks: 'has no media header (unknown binary data, or raw samples without a header)' },
    { file: 'speech.pcm', looks: 'has no media header (unknown binary data, or raw samples without a header)' },
  ])('$file', async ({ file, looks }) => {
    const [transcribe, clone] = await Promise.all([
      uploadRun(['transcribe', '--language', 'en-us', '-i', files[file]!]),
      uploadRun(['voices', 'create', '--name', 'Me', '--gender', '1', '--file', files[file]!]),
    ]);
    expect(transcribe.code).toBe(2);
    expect(transcribe.stderr).toBe(
      `rt-translate: -i ${files[file]} ${looks}, not a recording the service can read: it takes ${TRANSCRIBED}. Convert it first, e.g. ffmpeg -i IN OUT.wav. [RTT_INPUT]\n`,
    );
    expect(clone.code).toBe(2);
    expect(clone.stderr).toBe(
      `rt-translate: --file ${files[file]} ${looks}, not a recording the service can read: it takes ${CLONED}. Convert it first, e.g. ffmpeg -i IN OUT.wav. [RTT_INPUT]\n`,
    );
    expect(counter.connections).toBe(0);
  });

  it('an empty file, and text on standard input (-i -)', async () => {
    const [empty, stdin] = await Promise.all([
      uploadRun(['transcribe', '--language', 'en-us', '-i', files['empty.bin']!]),
      uploadRun(['transcribe', '--language', 'en-us', '-i', '-'], await readFile(files['notes.txt']!)),
    ]);
    expect(empty.code).toBe(2);
    expect(empty.stderr).toBe(`rt-translate: -i ${files['empty.bin']} is empty: there is no recording to upload. [RTT_INPUT]\n`);
    expect(stdin.code).toBe(2);
    expect(stdin.stderr).toMatch(/^rt-translate: -i - \(standard input\) looks like text, not a recording the service can read: /);
    expect(counter.connections).toBe(0);
  });

  it('a WAV and an MP4 are uploaded (the service decodes them: no ffmpeg needed), also a WAV on standard input', async () => {
    const [wav, mp4, stdin, clone] = await Promise.all([
      runInProcess(['transcribe', '--language', 'en-us', '-i', files['speech.wav']!, '--poll-ms', '10'], { env: { PATH: PATH_WITHOUT_FFMPEG } }),
      runInProcess(['transcribe', '--language', 'en-us', '-i', files['speech.mp4']!, '--poll-ms', '10'], { env: { PATH: PATH_WITHOUT_FFMPEG } }),
      runInProcess(['transcribe', '--language', 'en-us', '-i', '-', '--poll-ms', '10'], { stdin: fixture.wav }),
      runInProcess(['voices', 'create', '--name', 'Me', '--gender', '1', '--file', files['speech.wav']!]),
    ]);
    for (const result of [wav, mp4, stdin]) {
      expect(result.code).toBe(0);
      expect(JSON.parse(result.stdout.toString()).segments.length).toBeGreaterThan(0);
    }
    expect(clone.code).toBe(0);
    expect(clone.stdout.toString()).toMatch(/^created voice \d+\n$/);
  });
});
