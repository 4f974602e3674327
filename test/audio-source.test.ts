/**
 * `openAudioSource`: any input as the service's PCM. Inputs of every size (down to one byte),
 * formats found by their header or described, the typed errors before any audio, a failure
 * midway that keeps the audio before it (both `onFailure` modes), `stop()`, and which ffmpeg
 * runs (`ffmpegPath`, `FFMPEG_PATH`, `PATH`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { once } from 'node:events';
import { pipeline } from 'node:stream/promises';
import { AudioSource, openAudioSource } from '../lib/audio/source.js';
import { encodeFlac } from '../lib/audio/flac-encoder.js';
import { findFfmpegOnPath } from '../lib/audio/ffmpeg.js';
import { AudioInputError, ConfigError, ValidationError } from '../lib/errors.js';
import { loadSpeechFixture } from './helpers/speech.js';
import { collector } from './helpers/streams.js';

const FFMPEG = (createRequire(import.meta.url)('@ffmpeg-installer/ffmpeg') as { path: string }).path;
const PATH_WITHOUT_FFMPEG = (process.env.PATH ?? '')
  .split(delimiter)
  .filter((dir) => dir !== '' && findFfmpegOnPath(dir) === undefined)
  .join(delimiter);
const fixture = loadSpeechFixture();
/** One second of the fixture's speech. */
const second = fixture.pcm.subarray(24_000 * 2, 48_000 * 2);

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-translate-source-'));
  await writeFile(path('speech.wav'), fixture.wav);
  execFileSync(FFMPEG, ['-hide_banner', '-loglevel', 'error', '-y', '-i', path('speech.wav'), path('speech.mp3')]);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function path(name: string): string {
  return join(dir, name);
}

async function readAll(source: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  await pipeline(source, collector(chunks));
  return Buffer.concat(chunks);
}

/** A stream that gives `data` in `size`-byte pieces, then ends (or fails with `error`). */
function chunks(data: Buffer, size: number, error?: Error): Readable {
  let offset = 0;
  return new Readable({
    read() {
      if (offset < data.length) {
        this.push(data.subarray(offset, offset + size));
        offset += size;
      } else if (error) this.destroy(error);
      else this.push(null);
    },
  });
}

function wav(data: Buffer, rate = 24_000, channels = 1): Buffer {
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'latin1');
  header.writeUInt32LE(36 + data.length, 4);
  header.write('WAVEfmt ', 8, 'latin1');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20);
  header.writeUInt16LE(channels, 22);
  header.writeUInt32LE(rate, 24);
  header.writeUInt32LE(rate * channels * 2, 28);
  header.writeUInt16LE(channels * 2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36, 'latin1');
  header.writeUInt32LE(data.length, 40);
  return Buffer.concat([header, data]);
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: Error) => error,
  );
}

describe.concurrent('openAudioSource: what comes out', () => {
  it.each([3, 10, 63, 64, 65])('%i bytes of raw PCM, as a stream or a file, come out unchanged', async (n) => {
    const bytes = second.subarray(0, n);
    await writeFile(path(`raw-${n}.pcm`), bytes);
    for (const input of [chunks(bytes, 7), path(`raw-${n}.pcm`)]) {
      const source = await openAudioSource(input);
      expect(source.decoder).toBe('raw s16le');
      expect((await readAll(source)).equals(bytes)).toBe(true);
    }
  });

  it('a WAV, in any chunking, gives its samples; a forced raw format reads the header as samples', async () => {
    const file = wav(second);
    for (const size of [45, 4096]) {
      const source = await openAudioSource(chunks(file, size));
      expect(source.decoder).toBe('WAV');
      expect((await readAll(source)).equals(second)).toBe(true);
    }
    const short = second.subarray(0, 4800);
    expect((await readAll(await openAudioSource(chunks(wav(short), 1)))).equals(short)).toBe(true);
    expect((await readAll(await openAudioSource(chunks(file, 512), { format: 's16le' }))).equals(file)).toBe(true);
  });

  it('raw input is converted as described (48 kHz stereo to 24 kHz mono)', async () => {
    const stereo = Buffer.alloc(second.length * 4);
    for (let i = 0; i < second.length / 2; i++) {
      const v = second.readInt16LE(i * 2);
      for (let k = 0; k < 4; k++) stereo.writeInt16LE(v, i * 8 + k * 2); // each sample twice, both channels
    }
    const out = await readAll(await openAudioSource(chunks(stereo, 1000), { format: 's16le', rate: 48_000, channels: 2 }));
    expect(Math.abs(out.length - second.length)).toBeLessThanOrEqual(4);
  });
});

describe.concurrent('openAudioSource: errors before any audio', () => {
  it('no audio at all: an empty stream, a WAV header without data, raw input shorter than one sample frame', async () => {
    await writeFile(path('one-byte.pcm'), second.subarray(0, 1));
    for (const [input, description, message] of [
      [chunks(Buffer.alloc(0), 1), {}, 'No audio in the call: it holds nothing.'],
      [chunks(wav(Buffer.alloc(0)), 10), {}, 'No audio in the call.'],
      [chunks(second.subarray(0, 1), 1), {}, 'No audio in the call: it holds 1 byte, less than one sample frame (2 bytes of s16le mono).'],
      [path('one-byte.pcm'), { format: 's16le' }, 'No audio in the call: it holds 1 byte, less than one sample frame (2 bytes of s16le mono).'],
      [
        chunks(second.subarray(0, 3), 1),
        { format: 's16le', channels: 2 },
        'No audio in the call: it holds 3 bytes, less than one sample frame (4 bytes of s16le stereo).',
      ],
    ] as const) {
      const error = await rejection(openAudioSource(input, description, { label: 'the call' }));
      expect(error).toBeInstanceOf(AudioInputError);
      expect(error).toMatchObject({ code: 'RTT_INPUT', reason: 'empty', label: 'the call', message });
    }
  });

  it('a missing file and a directory are open failures naming the path', async () => {
    const missing = await rejection(openAudioSource(path('missing.wav')));
    expect(missing).toMatchObject({ reason: 'open', message: `Cannot read ${path('missing.wav')}: ENOENT.` });
    const directory = await rejection(openAudioSource(dir));
    expect(directory).toMatchObject({ reason: 'open', message: `Cannot read ${dir}: it is a directory.` });
  });

  it('a bad description is a ValidationError naming the field, as the caller names it', async () => {
    const input = () => chunks(second, 100);
    expect(await rejection(openAudioSource(input(), { format: 'mp3' as never }))).toMatchObject({ field: 'format' });
    expect(await rejection(openAudioSource(input(), { rate: 12_345 }))).toMatchObject({ field: 'rate' });
    const renamed = await rejection(openAudioSource(input(), { channels: 3 }, { fieldNames: { channels: '--ac' } }));
    expect(renamed).toBeInstanceOf(ValidationError);
    expect(renamed.message).toBe('Invalid --ac: expected a channel count of 1 or 2 (got 3).');
    // A rate given for a WAV found by its header contradicts the header.
    const conflict = await rejection(openAudioSource(chunks(wav(second), 100), { rate: 48_000 }));
    expect(conflict).toMatchObject({ field: 'rate' });
    expect(conflict.message).toMatch(/the input stream, which is WAV \(recognised by its header\)/);
  });

  it('a recognised format that nothing here decodes (no ffmpeg): unsupported, naming it and how to fix it', async () => {
    const mp3 = Buffer.concat([Buffer.from('ID3'), Buffer.alloc(200)]);
    const error = await rejection(openAudioSource(chunks(mp3, 50), {}, { env: { PATH: PATH_WITHOUT_FFMPEG } }));
    expect(error).toMatchObject({ reason: 'unsupported' });
    expect(error.message).toMatch(/^the input stream is MP3 \(recognised by its header\).*install ffmpeg \(on PATH, or set FFMPEG_PATH\)/);
  });
});

describe.concurrent('openAudioSource: a failure midway keeps the audio before it', () => {
  const file = wav(second);
  const failure = Object.assign(new Error('input/output error'), { code: 'EIO' });

  it("onFailure 'error' (default): the reader gets every byte decoded before the failure, then the error", async () => {
    const source = await openAudioSource(chunks(file, 4000, failure), {}, { label: 'the microphone' });
    const out: Buffer[] = [];
    const error = await pipeline(source, collector(out)).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(AudioInputError);
    expect(error).toMatchObject({ reason: 'read', cause: failure, bytesBefore: second.length });
    expect((error as Error).message).toBe('Cannot read the microphone: EIO (input/output error).');
    expect(Buffer.concat(out).equals(second)).toBe(true);
  });

  it("onFailure 'end': the source ends there and 'failure' says why", async () => {
    const source = await openAudioSource(chunks(file, 4000, failure), {}, { onFailure: 'end' });
    expect((await readAll(source)).equals(second)).toBe(true);
    expect(source.failure).toMatchObject({ reason: 'read', bytesBefore: second.length });
  });

  it('paced at real time, a failing input still delivers what was decoded before the failure', async () => {
    // 1.5 s of speech in 0.25 s FLAC frames; the fifth frame corrupt.
    const flac = encodeFlac(fixture.pcm.subarray(0, 36_000 * 2), { sampleRate: 24_000, channels: 1, blockSize: 6000 });
    const corrupt = Buffer.from(flac);
    corrupt[Math.floor(flac.length * 0.7)]! ^= 0xff;
    const [paced, unpaced] = await Promise.all([
      openAudioSource(chunks(corrupt, 4096), {}, { onFailure: 'end', realtime: true }),
      openAudioSource(chunks(corrupt, 4096), {}, { onFailure: 'end' }),
    ]);
    const [pacedOut, unpacedOut] = await Promise.all([readAll(paced), readAll(unpaced)]);
    expect(paced.failure).toMatchObject({ reason: 'decode' });
    expect(unpacedOut.length).toBeGreaterThan(0);
    // The pacer sends whole 20 ms frames: the last one padded with silence.
    expect(pacedOut.subarray(0, unpacedOut.length).equals(unpacedOut)).toBe(true);
    expect(pacedOut.length - unpacedOut.length).toBeLessThan(960);
  });

  it('corrupt FLAC data: decoded audio before the bad frame, then a decode error', async () => {
    const flac = encodeFlac(fixture.pcm, { sampleRate: 24_000, channels: 1, blockSize: 4096 });
    const corrupt = Buffer.from(flac);
    corrupt[Math.floor(flac.length * 0.6)]! ^= 0xff;
    const source = await openAudioSource(chunks(corrupt, 8192), {}, { onFailure: 'end' });
    const out = await readAll(source);
    expect(source.decoder).toBe('FLAC');
    expect(source.failure).toMatchObject({ reason: 'decode' });
    expect(source.failure!.message).toMatch(/^Cannot decode the input stream as FLAC: /);
    expect(out.length).toBeGreaterThan(fixture.pcm.length * 0.3);
    expect(out.equals(fixture.pcm.subarray(0, out.length))).toBe(true);
  });
});

describe.concurrent('openAudioSource: stop() and destroy()', () => {
  it('stop() ends a source whose input stays open, after what it has produced, and releases the input', async () => {
    const input = new PassThrough();
    input.write(second);
    const source = await openAudioSource(input);
    const out: Buffer[] = [];
    const done = pipeline(source, collector(out));
    source.stop();
    await done;
    expect(input.destroyed).toBe(true);
    expect(Buffer.concat(out).equals(second.subarray(0, Buffer.concat(out).length))).toBe(true);
  });

  it('destroy() kills the ffmpeg it started and calls back once it has exited', async () => {
    // Nobody reads the source: ffmpeg blocks on its full output pipe, alive.
    const pidFile = path('ffmpeg.pid');
    const wrapper = path('ffmpeg-pid.sh');
    await writeFile(wrapper, `#!/bin/sh\necho $$ > '${pidFile}'\nexec '${FFMPEG}' "$@"\n`);
    await chmod(wrapper, 0o755);
    const source = await openAudioSource(path('speech.mp3'), {}, { ffmpegPath: wrapper });
    expect(source.decoder).toBe('ffmpeg');
    const pid = Number(await readFile(pidFile, 'utf8'));
    expect(process.kill(pid, 0)).toBe(true);
    source.destroy();
    await once(source, 'close');
    expect(() => process.kill(pid, 0)).toThrow(expect.objectContaining({ code: 'ESRCH' }));
  });
});

describe.concurrent('openAudioSource: which ffmpeg runs', () => {
  let mp3: string;
  let wrapper: string;
  let log: string;
  beforeAll(async () => {
    mp3 = path('speech.mp3');
    // A wrapper that records that it ran, then becomes the real ffmpeg.
    log = path('ran.txt');
    wrapper = path('ffmpeg-wrapper.sh');
    await writeFile(wrapper, `#!/bin/sh\necho ran >> '${log}'\nexec '${FFMPEG}' "$@"\n`);
    await chmod(wrapper, 0o755);
  });

  it('the ffmpegPath option, else FFMPEG_PATH, else PATH; each decodes the same audio', async () => {
    const byOption = await readAll(await openAudioSource(mp3, {}, { ffmpegPath: wrapper, env: { PATH: PATH_WITHOUT_FFMPEG } }));
    expect(await readFile(log, 'utf8')).toBe('ran\n');
    const byEnv = await readAll(await openAudioSource(mp3, {}, { env: { FFMPEG_PATH: wrapper, PATH: PATH_WITHOUT_FFMPEG } }));
    expect(await readFile(log, 'utf8')).toBe('ran\nran\n');
    const byPath = await readAll(await openAudioSource(mp3, {}, { env: { PATH: dirname(FFMPEG) } }));
    expect(await readFile(log, 'utf8')).toBe('ran\nran\n');
    expect(byOption.length).toBeGreaterThan(fixture.pcm.length * 0.9);
    expect(byEnv.equals(byOption)).toBe(true);
    expect(byPath.equals(byOption)).toBe(true);
  });

  it('FFMPEG_PATH or ffmpegPath naming something that cannot run is a ConfigError naming it', async () => {
    const byEnv = await rejection(openAudioSource(mp3, {}, { env: { FFMPEG_PATH: path('nothing-here'), PATH: dirname(FFMPEG) } }));
    expect(byEnv).toBeInstanceOf(ConfigError);
    expect(byEnv).toMatchObject({ field: 'FFMPEG_PATH' });
    expect(byEnv.message).toBe(
      `FFMPEG_PATH names ${path('nothing-here')}, which is not an executable file: name an ffmpeg executable, or leave it out to use ffmpeg on PATH.`,
    );
    const byOption = await rejection(openAudioSource(mp3, {}, { ffmpegPath: log }));
    expect(byOption).toMatchObject({ field: 'ffmpegPath' });
    // Inputs that do not need ffmpeg never look at it.
    const wavSource = await openAudioSource(path('speech.wav'), {}, { ffmpegPath: log });
    expect(wavSource).toBeInstanceOf(AudioSource);
    expect((await readAll(wavSource)).equals(fixture.pcm)).toBe(true);
  });
});
