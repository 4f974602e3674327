/**
 * `finishCutAudioFile` and `FlacCutScanner` (lib/audio/cut-file.ts): WAV and FLAC files cut at
 * every kind of place are made valid as far as they go. Each result is checked by ffmpeg (the
 * dev dependency's binary, a decoder that shares nothing with the library): it decodes the file
 * without a complaint, to exactly the samples the header now announces, and those are the
 * original's first samples. FLAC sources: the library's encoder (256-sample blocks, so frame
 * numbers take several bytes) and ffmpeg's (its own block size and metadata blocks).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { FlacCutScanner, finishCutAudioFile } from '../lib/audio/cut-file.js';
import { encodeFlac } from '../lib/audio/flac-encoder.js';
import { wavHeader } from '../lib/emulator/http/audio.js';
import { loadSpeechFixture } from './helpers/speech.js';

const FFMPEG = (createRequire(import.meta.url)('@ffmpeg-installer/ffmpeg') as { path: string }).path;
const run = promisify(execFile);
const fixture = loadSpeechFixture();
/** Two seconds of speech: enough frames, quick to decode. */
const pcm = fixture.pcm.subarray(0, 96_000);

let dir: string;
let cases = 0;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-translate-cut-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function file(name: string, bytes: Buffer): Promise<string> {
  const path = join(dir, `${++cases}-${name}`);
  await writeFile(path, bytes);
  return path;
}

/** What ffmpeg makes of `path`: PCM16 LE mono, and what it complained about. */
async function ffmpegDecode(path: string): Promise<{ pcm: Buffer; complaints: string }> {
  const { stdout, stderr } = await run(FFMPEG, ['-v', 'error', '-i', path, '-f', 's16le', '-ac', '1', '-'], { encoding: 'buffer', maxBuffer: 64 << 20 });
  return { pcm: stdout, complaints: stderr.toString() };
}

/** STREAMINFO's total samples and MD5 (hex) of FLAC `bytes`. */
function streamInfo(bytes: Buffer): { totalSamples: number; md5: string } {
  return { totalSamples: (bytes[21]! & 0xf) * 2 ** 32 + bytes.readUInt32BE(22), md5: bytes.toString('hex', 26, 42) };
}

let ffmpegFlac: Buffer;
beforeAll(async () => {
  const source = await file('source.wav', fixture.wav.subarray(0, 44 + pcm.length));
  const out = join(dir, 'ffmpeg.flac');
  // The fixture's header claims all of it: ffmpeg reads what is there.
  await run(FFMPEG, ['-v', 'error', '-i', source, '-c:a', 'flac', '-y', out]);
  ffmpegFlac = await readFile(out);
});

describe('a FLAC file cut short: cut after its last whole frame, STREAMINFO telling what is left', () => {
  const sources = [
    { name: "the library's encoder, 256-sample blocks", flac: () => encodeFlac(pcm, { sampleRate: 24_000, channels: 1, blockSize: 256 }) },
    { name: "ffmpeg's encoder", flac: () => ffmpegFlac },
  ];
  // Where to cut, as a share of the file: early (after ffmpeg's 8 KiB of padding), in the middle, near the end.
  const cuts = [0.25, 0.5, 0.97];

  it.each(sources)("$name: cut anywhere, ffmpeg decodes exactly the samples announced, the original's first", async ({ flac }) => {
    const whole = flac();
    for (const share of cuts) {
      const cut = Math.floor(whole.length * share);
      const path = await file('cut.flac', whole.subarray(0, cut));
      const result = await finishCutAudioFile(path);
      const finished = await readFile(path);
      expect(finished.length).toBeLessThanOrEqual(cut);
      expect(finished.length).toBe(result!.bytes);
      // Cut where a frame starts in the original: a sync code follows.
      expect(whole[finished.length]).toBe(0xff);
      expect(whole[finished.length + 1]! & 0xfe).toBe(0xf8);
      const info = streamInfo(finished);
      expect(info.md5).toBe('0'.repeat(32));
      const decoded = await ffmpegDecode(path);
      expect(decoded.complaints).toBe('');
      expect(decoded.pcm.length).toBe(info.totalSamples * 2);
      expect(decoded.pcm.length).toBeGreaterThan(0);
      expect(decoded.pcm.equals(pcm.subarray(0, decoded.pcm.length))).toBe(true);
      expect(result).toEqual({ format: 'FLAC', seconds: info.totalSamples / 24_000, bytes: finished.length });
    }
  });

  it.each(sources)('$name: a whole file is left as it was but for the MD5, its samples all counted', async ({ flac }) => {
    const whole = flac();
    const path = await file('whole.flac', whole);
    const result = await finishCutAudioFile(path);
    const finished = await readFile(path);
    expect(finished.length).toBe(whole.length);
    expect(streamInfo(finished).totalSamples).toBe(pcm.length / 2);
    expect(result!.seconds).toBe(2);
    expect(finished.subarray(42).equals(whole.subarray(42))).toBe(true);
  });

  it('any chunking gives the same answer as the whole file at once', () => {
    const whole = encodeFlac(pcm, { sampleRate: 24_000, channels: 1, blockSize: 256 });
    const cut = whole.subarray(0, Math.floor(whole.length * 0.9));
    const once = new FlacCutScanner();
    once.push(cut);
    const expected = once.end()!;
    for (const size of [1, 7, 4096]) {
      const scanner = new FlacCutScanner();
      for (let at = 0; at < cut.length; at += size) scanner.push(cut.subarray(at, at + size));
      const result = scanner.end()!;
      expect({ keepBytes: result.keepBytes, samples: result.samples }).toEqual({ keepBytes: expected.keepBytes, samples: expected.samples });
    }
    // 256-sample frames: the samples kept are a whole number of them.
    expect(expected.samples % 256).toBe(0);
    expect(expected.samples).toBeGreaterThan(128 * 256);
  });

  it('cut inside its metadata: no audio (left as it is)', async () => {
    const path = await file('meta.flac', ffmpegFlac.subarray(0, 300));
    expect(await finishCutAudioFile(path)).toEqual({ format: 'FLAC', seconds: 0, bytes: 300 });
    expect((await readFile(path)).equals(ffmpegFlac.subarray(0, 300))).toBe(true);
  });
});

describe('a WAV file cut short: whole sample frames, the sizes of what it holds', () => {
  it('the fixture cut at an odd byte, its header claiming all 8.3 s: sizes patched, ffmpeg decodes the first samples', async () => {
    const cut = 44 + 48_001;
    const path = await file('cut.wav', fixture.wav.subarray(0, cut));
    const result = await finishCutAudioFile(path);
    const finished = await readFile(path);
    expect(finished.length).toBe(cut - 1);
    expect(finished.readUInt32LE(4)).toBe(finished.length - 8);
    expect(finished.readUInt32LE(40)).toBe(finished.length - 44);
    expect(result).toEqual({ format: 'WAV', seconds: 1, bytes: finished.length });
    const decoded = await ffmpegDecode(path);
    expect(decoded.complaints).toBe('');
    expect(decoded.pcm.equals(fixture.pcm.subarray(0, 48_000))).toBe(true);
  });

  it('a stereo WAV with a LIST chunk before its data, cut inside a sample frame: the data found after the chunk, cut to whole frames', async () => {
    const list = Buffer.concat([Buffer.from('LIST', 'latin1'), Buffer.alloc(4), Buffer.from('INFOISFT\x05\x00\x00\x00test\x00\x00', 'latin1')]);
    list.writeUInt32LE(list.length - 8, 4);
    const stereo = Buffer.alloc(24_000 * 4);
    for (let n = 0; n < 24_000; n++) {
      stereo.writeInt16LE(fixture.pcm.readInt16LE(2 * n), 4 * n);
      stereo.writeInt16LE(-fixture.pcm.readInt16LE(2 * n), 4 * n + 2);
    }
    // A header claiming ten times the data there is.
    const header = wavHeader(stereo.length * 10, 24_000, 2, 16);
    const whole = Buffer.concat([header.subarray(0, 36), list, header.subarray(36), stereo]);
    const dataOffset = 44 + list.length;
    const path = await file('list.wav', whole.subarray(0, dataOffset + 4000 + 3));
    const result = await finishCutAudioFile(path);
    const finished = await readFile(path);
    expect(finished.length).toBe(dataOffset + 4000);
    expect(finished.readUInt32LE(4)).toBe(finished.length - 8);
    expect(finished.readUInt32LE(dataOffset - 4)).toBe(4000);
    expect(result).toEqual({ format: 'WAV', seconds: 4000 / 96_000, bytes: finished.length });
    const { stdout } = await run(FFMPEG, ['-v', 'error', '-i', path, '-f', 's16le', '-'], { encoding: 'buffer' });
    expect(stdout.equals(stereo.subarray(0, 4000))).toBe(true);
  });

  it('a header without its data chunk: no audio; a file that is not WAV or FLAC: nothing said; both left as they are', async () => {
    const header = await file('header.wav', fixture.wav.subarray(0, 30));
    const text = await file('notes.txt', Buffer.from('not audio at all\n'));
    expect(await finishCutAudioFile(header)).toEqual({ format: 'WAV', seconds: 0, bytes: 30 });
    expect(await finishCutAudioFile(text)).toBeUndefined();
    expect((await readFile(header)).length).toBe(30);
    expect(await readFile(text, 'utf8')).toBe('not audio at all\n');
  });
});
