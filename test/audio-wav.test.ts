import ffmpegInstaller from '@ffmpeg-installer/ffmpeg';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toServiceFormat } from '../lib/audio/convert.js';
import { encodeMulaw } from '../lib/audio/g711.js';
import { WavFileWriter, WavFormatError, WavReader, WavWriter, wavDataLayout, type WavFormat } from '../lib/audio/wav.js';
import { UnsupportedError, ValidationError } from '../lib/errors.js';
import { collector, runChunked } from './helpers/streams.js';

const FFMPEG = ffmpegInstaller.path;

function source(input: Buffer, size: number): Readable {
  return Readable.from(
    (function* () {
      for (let i = 0; i < input.length; i += size) yield input.subarray(i, i + size);
    })(),
  );
}

const run = runChunked;

/** Runs ffmpeg with `args`, feeding `stdin`, and returns its stdout (rejects on a non-zero exit). */
function ffmpeg(args: string[], stdin: Buffer = Buffer.alloc(0)): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawn(FFMPEG, ['-hide_banner', '-loglevel', 'error', ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let err = '';
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(Buffer.concat(out)) : reject(new Error(`ffmpeg exited ${code}: ${err}`))));
    child.stdin.on('error', () => {});
    child.stdin.end(stdin);
  });
}

function tonePcm(rate: number, channels: number, frames: number): Buffer {
  const b = Buffer.alloc(frames * channels * 2);
  for (let n = 0; n < frames; n++) {
    for (let c = 0; c < channels; c++) b.writeInt16LE(Math.round(12000 * Math.sin((2 * Math.PI * (500 + 250 * c) * n) / rate)), (n * channels + c) * 2);
  }
  return b;
}

/** A WAV header written by hand, for formats the library does not write. */
function header(o: { format: number; channels: number; rate: number; bits: number; dataBytes: number; big?: boolean; extensibleSub?: number }): Buffer {
  const ext = o.extensibleSub !== undefined;
  const fmtSize = ext ? 40 : 16;
  const b = Buffer.alloc(12 + 8 + fmtSize + 8);
  const u32 = (v: number, at: number) => (o.big ? b.writeUInt32BE(v, at) : b.writeUInt32LE(v, at));
  const u16 = (v: number, at: number) => (o.big ? b.writeUInt16BE(v, at) : b.writeUInt16LE(v, at));
  b.write(o.big ? 'RIFX' : 'RIFF', 0, 'ascii');
  u32(4 + 8 + fmtSize + 8 + o.dataBytes, 4);
  b.write('WAVE', 8, 'ascii');
  b.write('fmt ', 12, 'ascii');
  u32(fmtSize, 16);
  u16(ext ? 0xfffe : o.format, 20);
  u16(o.channels, 22);
  u32(o.rate, 24);
  u32((o.rate * o.channels * o.bits) / 8, 28);
  u16((o.channels * o.bits) / 8, 32);
  u16(o.bits, 34);
  if (ext) {
    u16(22, 36); // cbSize
    u16(o.bits, 38); // valid bits
    u32(o.channels === 2 ? 3 : 4, 40); // channel mask
    u16(o.extensibleSub!, 44); // SubFormat GUID: code, then the fixed tail
    Buffer.from([0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71]).copy(b, 46);
  }
  b.write('data', 12 + 8 + fmtSize, 'ascii');
  u32(o.dataBytes, 12 + 8 + fmtSize + 4);
  return b;
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rtt-wav-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('WavWriter (destination of unknown length)', () => {
  const pcm = tonePcm(24000, 1, 2400);

  it('writes a 44-byte PCM header with placeholder sizes, then the data unchanged', async () => {
    const writer = new WavWriter({ rate: 24000, channels: 1 });
    let finalHeader: Buffer | undefined;
    writer.on('header', (h: Buffer) => (finalHeader = h));
    const out = await run(writer, pcm, 1000);
    expect(out.length).toBe(44 + pcm.length);
    expect(out.toString('ascii', 0, 4)).toBe('RIFF');
    expect(out.toString('ascii', 8, 16)).toBe('WAVEfmt ');
    expect(out.readUInt32LE(16)).toBe(16);
    expect(out.readUInt16LE(20)).toBe(1); // PCM
    expect(out.readUInt16LE(22)).toBe(1); // channels
    expect(out.readUInt32LE(24)).toBe(24000);
    expect(out.readUInt32LE(28)).toBe(48000); // byte rate
    expect(out.readUInt16LE(32)).toBe(2); // block align
    expect(out.readUInt16LE(34)).toBe(16);
    expect(out.toString('ascii', 36, 40)).toBe('data');
    expect(out.readUInt32LE(40)).toBe(4294967195); // placeholder: "to the end of the stream"
    expect(out.readUInt32LE(4)).toBe(4294967195 + 36);
    expect(out.subarray(44).equals(pcm)).toBe(true);
    await new Promise((r) => setImmediate(r));
    expect(finalHeader?.readUInt32LE(40)).toBe(pcm.length);
    expect(finalHeader?.readUInt32LE(4)).toBe(pcm.length + 36);
  });

  it('bytes already handed out never change when the final header is made', async () => {
    const writer = new WavWriter({ rate: 24000, channels: 1 });
    const headerEvent = new Promise<Buffer>((resolve) => writer.once('header', resolve));
    const chunks: Buffer[] = [];
    await pipeline(source(pcm, 1000), writer, collector(chunks));
    const final = await headerEvent;
    expect(final.readUInt32LE(40)).toBe(pcm.length);
    expect(chunks[0]!.readUInt32LE(40)).toBe(4294967195);
  });

  it('is read back by ffmpeg from a pipe to the same samples', async () => {
    const wavBytes = await run(new WavWriter({ rate: 24000, channels: 1 }), pcm, 4096);
    const decoded = await ffmpeg(['-f', 'wav', '-i', 'pipe:0', '-f', 's16le', 'pipe:1'], wavBytes);
    expect(decoded.equals(pcm)).toBe(true);
  });

  it('is read back by WavReader to the same samples', async () => {
    const wavBytes = await run(new WavWriter({ rate: 24000, channels: 1 }), pcm, 4096);
    const reader = new WavReader();
    const data = await run(reader, wavBytes, 777);
    expect(data.equals(pcm)).toBe(true);
    expect(reader.format).toMatchObject({ audioFormat: 1, channels: 1, sampleRate: 24000, bitDepth: 16, sampleFormat: 's16le' });
  });

  it.each([
    ['f32le', 3, 32],
    ['mulaw', 7, 8],
    ['alaw', 6, 8],
  ] as const)('writes %s as WAVE format %i, %i bits', async (format, code, bits) => {
    const out = await run(new WavWriter({ format, rate: 8000, channels: 2 }), Buffer.alloc(64), 64);
    expect(out.readUInt16LE(20)).toBe(code);
    expect(out.readUInt16LE(34)).toBe(bits);
    expect(out.readUInt16LE(32)).toBe((2 * bits) / 8);
  });

  it.each([
    [{ format: 's16be', rate: 8000, channels: 1 }, 'format'],
    [{ rate: 0, channels: 1 }, 'rate'],
    [{ rate: 8000, channels: 0 }, 'channels'],
  ])('refuses %j naming %s', (desc, field) => {
    expect(() => new WavWriter(desc as never)).toThrow(expect.objectContaining({ field, code: 'RTT_VALIDATION' }));
  });
});

describe('WavFileWriter (exact sizes)', () => {
  it.each([1, 333, 1 << 20])('writes exact RIFF and data sizes, chunks of %i bytes; ffmpeg and WavReader read it back', async (size) => {
    const pcm = tonePcm(48000, 2, 4800);
    const path = join(dir, `exact-${size}.wav`);
    await pipeline(source(pcm, size), new WavFileWriter(path, { rate: 48000, channels: 2 }));
    const file = await readFile(path);
    expect(file.length).toBe(44 + pcm.length);
    expect(file.readUInt32LE(4)).toBe(file.length - 8);
    expect(file.readUInt32LE(40)).toBe(pcm.length);
    expect(file.readUInt16LE(22)).toBe(2);
    expect(file.readUInt32LE(24)).toBe(48000);
    expect(file.subarray(44).equals(pcm)).toBe(true);
    expect((await ffmpeg(['-i', path, '-f', 's16le', 'pipe:1'])).equals(pcm)).toBe(true);
    expect((await run(new WavReader(), file, 4096)).equals(pcm)).toBe(true);
  });

  it('pads odd-length data with one byte, counted in the RIFF size only', async () => {
    const codes = Buffer.from(Array.from({ length: 801 }, (_, i) => encodeMulaw(Math.round(8000 * Math.sin(i / 3)))));
    const path = join(dir, 'odd.wav');
    await pipeline(source(codes, 100), new WavFileWriter(path, { format: 'mulaw', rate: 8000, channels: 1 }));
    const file = await readFile(path);
    expect(file.length).toBe(44 + 801 + 1);
    expect(file.readUInt32LE(40)).toBe(801);
    expect(file.readUInt32LE(4)).toBe(file.length - 8);
    expect(file.readUInt16LE(20)).toBe(7);
    const reader = new WavReader();
    expect((await run(reader, file, 64)).equals(codes)).toBe(true);
    expect(reader.format?.sampleFormat).toBe('mulaw');
  });

  it('an empty stream gives a valid header with zero sizes', async () => {
    const path = join(dir, 'empty.wav');
    await pipeline(source(Buffer.alloc(0), 1), new WavFileWriter(path, { rate: 16000, channels: 1 }));
    const file = await readFile(path);
    expect(file.length).toBe(44);
    expect(file.readUInt32LE(40)).toBe(0);
    expect(file.readUInt32LE(4)).toBe(36);
  });

  it('destroyed midway, it closes the file (the data so far behind a valid header) and closes itself', async () => {
    const path = join(dir, 'aborted.wav');
    const writer = new WavFileWriter(path, { rate: 16000, channels: 1 });
    await new Promise<void>((resolve) => writer.write(Buffer.alloc(3200, 1), () => resolve()));
    writer.destroy();
    await new Promise((resolve) => writer.once('close', resolve));
    const file = await readFile(path);
    expect(file.length).toBe(44 + 3200);
    // The package patches its header buffer in place at the end; whether that reached the file
    // before the header bytes were written depends on timing. Either size is a valid header.
    expect([4294967195, 3200]).toContain(file.readUInt32LE(40));
    expect(file.toString('ascii', 0, 4)).toBe('RIFF');
    expect(file.subarray(44).every((b) => b === 1)).toBe(true);
  });

  it('fails the pipeline with the file error when the directory does not exist', async () => {
    const path = join(dir, 'missing', 'x.wav');
    await expect(pipeline(source(Buffer.alloc(100), 10), new WavFileWriter(path, { rate: 16000, channels: 1 }))).rejects.toMatchObject({
      code: 'ENOENT',
    });
  });
});

describe('WavReader: format reporting and conversion', () => {
  it('reads a file written by ffmpeg (with a LIST chunk) and converts it to the service format', async () => {
    const path = join(dir, 'ffmpeg-44k1-stereo.wav');
    await ffmpeg(['-f', 'lavfi', '-i', 'sine=frequency=1000:sample_rate=44100:duration=0.5', '-ac', '2', '-c:a', 'pcm_s16le', '-y', path]);
    const file = await readFile(path);
    const raw = await run(new WavReader(), file, 1 << 20);
    expect(raw.length).toBe(22050 * 4);
    const formats: WavFormat[] = [];
    const reader = new WavReader({ to: { rate: 24000, channels: 1 } });
    reader.on('format', (f) => formats.push(f));
    const converted = await run(reader, file, 1000);
    expect(formats).toEqual([{ audioFormat: 1, channels: 2, sampleRate: 44100, bitDepth: 16, endianness: 'LE', sampleFormat: 's16le' }]);
    const direct = await run(toServiceFormat({ rate: 44100, channels: 2 }), raw, 1 << 20);
    expect(converted.equals(direct)).toBe(true);
    expect(converted.length).toBe(12000 * 2);
  });

  it.each([1, 7, 4096, 1 << 20])('conversion output is identical for chunks of %i bytes', async (size) => {
    const pcm = tonePcm(48000, 2, 2400);
    const file = Buffer.concat([header({ format: 1, channels: 2, rate: 48000, bits: 16, dataBytes: pcm.length }), pcm]);
    const out = await run(new WavReader({ to: { rate: 24000, channels: 1 } }), file, size);
    const direct = await run(toServiceFormat({ rate: 48000, channels: 2 }), pcm, 1 << 20);
    expect(out.equals(direct)).toBe(true);
  });

  it('converts IEEE float (format 3) to s16le', async () => {
    const f32 = Buffer.alloc(16);
    [0.5, -0.5, 1.5, -1].forEach((v, i) => f32.writeFloatLE(v, i * 4));
    const file = Buffer.concat([header({ format: 3, channels: 1, rate: 16000, bits: 32, dataBytes: 16 }), f32]);
    const reader = new WavReader({ to: { rate: 16000, channels: 1 } });
    const out = await run(reader, file, 5);
    expect([0, 2, 4, 6].map((i) => out.readInt16LE(i))).toEqual([16384, -16384, 32767, -32768]);
    expect(reader.format?.sampleFormat).toBe('f32le');
  });

  it('converts mu-law (format 7) 8 kHz to the service format', async () => {
    const codes = Buffer.from([0xff, 0x80, 0x00, 0x7f]);
    const file = Buffer.concat([header({ format: 7, channels: 1, rate: 8000, bits: 8, dataBytes: 4 }), codes]);
    const out = await run(new WavReader({ to: { rate: 8000, channels: 1 } }), file, 3);
    expect([0, 2, 4, 6].map((i) => out.readInt16LE(i))).toEqual([0, 32124, -32124, 0]);
  });

  it('reads big-endian RIFX 16-bit as s16be and converts it', async () => {
    const be = Buffer.alloc(8);
    [1000, -1000, 32767, -32768].forEach((v, i) => be.writeInt16BE(v, i * 2));
    const file = Buffer.concat([header({ format: 1, channels: 1, rate: 22050, bits: 16, dataBytes: 8, big: true }), be]);
    const reader = new WavReader({ to: { rate: 22050, channels: 1 } });
    const out = await run(reader, file, 3);
    expect([0, 2, 4, 6].map((i) => out.readInt16LE(i))).toEqual([1000, -1000, 32767, -32768]);
    expect(reader.format).toMatchObject({ endianness: 'BE', sampleFormat: 's16be' });
  });

  it('reads WAVE_FORMAT_EXTENSIBLE with a PCM SubFormat', async () => {
    const pcm = tonePcm(48000, 2, 10);
    const file = Buffer.concat([header({ format: 0, channels: 2, rate: 48000, bits: 16, dataBytes: pcm.length, extensibleSub: 1 }), pcm]);
    const reader = new WavReader({ to: { rate: 48000, channels: 2 } });
    const out = await run(reader, file, 9);
    expect(out.equals(pcm)).toBe(true);
    expect(reader.format).toMatchObject({ audioFormat: 0xfffe, subFormat: 1, sampleFormat: 's16le' });
  });

  it.each([
    ['24-bit PCM', { format: 1, channels: 1, rate: 48000, bits: 24 }, /format 1, 24-bit, 1 channel\(s\), 48000 Hz/],
    ['8-bit unsigned PCM', { format: 1, channels: 1, rate: 8000, bits: 8 }, /format 1, 8-bit/],
    ['ADPCM', { format: 2, channels: 1, rate: 8000, bits: 4 }, /format 2, 4-bit/],
    ['6 channels', { format: 1, channels: 6, rate: 48000, bits: 16 }, /6 channel\(s\)/],
    ['32 kHz', { format: 1, channels: 1, rate: 32000, bits: 16 }, /32000 Hz/],
  ])('refuses %s with a WavFormatError naming what was found and what is accepted', async (_name, fmt, found) => {
    const file = Buffer.concat([header({ ...fmt, dataBytes: 12 }), Buffer.alloc(12)]);
    const error = await run(new WavReader({ to: { rate: 24000, channels: 1 } }), file, 100).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(WavFormatError);
    expect(error).toBeInstanceOf(UnsupportedError);
    const e = error as WavFormatError;
    expect(e.code).toBe('RTT_UNSUPPORTED');
    expect(e.message).toMatch(found);
    expect(e.message).toContain('accepted: PCM 16-bit');
    expect(e.found).toMatchObject({ channels: fmt.channels, sampleRate: fmt.rate, bitDepth: fmt.bits });
  });

  it('without a target passes any format through and reports it', async () => {
    const data = Buffer.from([1, 2, 3, 4, 5, 6]);
    const file = Buffer.concat([header({ format: 1, channels: 2, rate: 96000, bits: 24, dataBytes: 6 }), data]);
    const reader = new WavReader();
    const out = await run(reader, file, 2);
    expect(out.equals(data)).toBe(true);
    expect(reader.format).toEqual({ audioFormat: 1, channels: 2, sampleRate: 96000, bitDepth: 24, endianness: 'LE', sampleFormat: undefined });
  });

  it.each([
    ['an Ogg stream', Buffer.from('OggS\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00', 'latin1')],
    ['an empty stream', Buffer.alloc(0)],
    ['a header cut short', header({ format: 1, channels: 1, rate: 8000, bits: 16, dataBytes: 0 }).subarray(0, 30)],
  ])('refuses %s with a ValidationError (field wav)', async (_name, bytes) => {
    const error = await run(new WavReader(), bytes, 7).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).field).toBe('wav');
  });

  it('refuses a bad target description before reading', () => {
    expect(() => new WavReader({ to: { rate: 12345, channels: 1 } })).toThrow(expect.objectContaining({ field: 'to.rate' }));
  });

  it('keeps backpressure: a slow reader holds the writer instead of buffering the whole file', async () => {
    const pcm = tonePcm(24000, 1, 24000 * 4); // 192 kB of data
    const file = Buffer.concat([header({ format: 1, channels: 1, rate: 24000, bits: 16, dataBytes: pcm.length }), pcm]);
    const reader = new WavReader({ readableHighWaterMark: 4096 });
    let accepted = 0;
    // Nobody reads yet: write() must report a full buffer long before the file is in.
    for (let i = 0; i < file.length; i += 4096) {
      if (!reader.write(file.subarray(i, i + 4096))) break;
      accepted += 4096;
    }
    expect(accepted).toBeLessThan(file.length / 2);
    const chunks: Buffer[] = [];
    const done = pipeline(reader, collector(chunks));
    for (let i = accepted + 4096; i < file.length; i += 4096) {
      if (!reader.write(file.subarray(i, i + 4096))) await new Promise((r) => reader.once('drain', r));
    }
    reader.end();
    await done;
    expect(Buffer.concat(chunks).equals(pcm)).toBe(true);
  });
});

describe('wavDataLayout: where the audio starts and its bytes per second', () => {
  /** A WAV of `rate` Hz, `channels` channels, s16le, written by ffmpeg (a LIST chunk before `data`). */
  async function ffmpegWav(rate: number, channels: number): Promise<Buffer> {
    return ffmpeg(['-f', 's16le', '-ar', String(rate), '-ac', String(channels), '-i', 'pipe:0', '-f', 'wav', 'pipe:1'], Buffer.alloc(rate * channels * 2));
  }

  it('reads the header our writer makes and the one ffmpeg makes, the latter with more chunks before data', async () => {
    const ours = await run(new WavWriter({ format: 's16le', rate: 24_000, channels: 1 }), Buffer.alloc(480), 7);
    expect(wavDataLayout(ours)).toEqual({ dataOffset: 44, byteRate: 48_000 });
    const theirs = await ffmpegWav(22_050, 2);
    const layout = wavDataLayout(theirs)!;
    expect(layout.byteRate).toBe(22_050 * 4);
    expect(theirs.length - layout.dataOffset).toBe(22_050 * 4);
    expect(theirs.toString('latin1', layout.dataOffset - 8, layout.dataOffset - 4)).toBe('data');
  });

  it('is undefined until the data chunk is reached, and for what is not a WAV', async () => {
    const header = await ffmpegWav(8000, 1);
    const { dataOffset } = wavDataLayout(header)!;
    for (const cut of [0, 11, 12, 30, dataOffset - 1]) expect(wavDataLayout(header.subarray(0, cut))).toBeUndefined();
    expect(wavDataLayout(header.subarray(0, dataOffset))).toEqual({ dataOffset, byteRate: 16_000 });
    expect(wavDataLayout(Buffer.from('fLaC\0\0\0\x22 and more bytes of a FLAC stream'))).toBeUndefined();
  });
});
