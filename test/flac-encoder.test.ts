import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { FLACDecoder } from '@wasm-audio-decoders/flac';
import { describe, expect, it } from 'vitest';
import { encodeFlac, flacCrc16, flacCrc8, FLAC_HEADER_BYTES } from '../lib/audio/flac-encoder.js';
import { FlacPcmDecoder, floatToPcm16, hasKnownMd5, parseFlacStreamInfo } from '../lib/audio/flac-decoder.js';
import { IntegrityError, ProtocolError, ValidationError } from '../lib/errors.js';
import { separateTracks, synthesizeFlac, synthesizeSpeechPcm } from '../lib/emulator/synth.js';

const require = createRequire(import.meta.url);
const ffmpegPath = require.resolve('@ffmpeg-installer/linux-x64/ffmpeg');

/** Decodes with the real ffmpeg; returns PCM16 LE and whatever ffmpeg complained about. */
function ffmpegDecode(flac: Buffer): Promise<{ pcm: Buffer; stderr: string; code: number | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(ffmpegPath, ['-v', 'error', '-f', 'flac', '-i', 'pipe:0', '-f', 's16le', 'pipe:1']);
    const out: Buffer[] = [];
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ pcm: Buffer.concat(out), stderr, code }));
    child.stdin.on('error', () => undefined);
    child.stdin.end(flac);
  });
}

/** Decodes with `@wasm-audio-decoders/flac` in one call, converted with the library's float conversion. */
async function wasmDecode(flac: Buffer): Promise<Buffer> {
  const decoder = new FLACDecoder();
  await decoder.ready;
  try {
    const decoded = await decoder.decodeFile(flac);
    expect(decoded.errors).toEqual([]);
    return floatToPcm16(decoded.channelData, decoded.samplesDecoded, decoded.bitDepth);
  } finally {
    decoder.free();
  }
}

/** A deterministic sequence in [0, 1). */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 4294967296;
  };
}

function pcmFrom(samples: number, channels: number, value: (i: number, c: number) => number): Buffer {
  const out = Buffer.alloc(samples * channels * 2);
  for (let i = 0; i < samples; i++) {
    for (let c = 0; c < channels; c++) out.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(value(i, c)))), (i * channels + c) * 2);
  }
  return out;
}

const random = lcg(7);
const cases: Array<{ name: string; channels: 1 | 2; sampleRate: number; pcm: Buffer }> = [
  { name: 'mono speech, 24 kHz', channels: 1, sampleRate: 24000, pcm: synthesizeSpeechPcm('Hello there, how are you today?', { sampleRate: 24000 }) },
  {
    name: 'stereo correlated, 48 kHz, odd length',
    channels: 2,
    sampleRate: 48000,
    pcm: pcmFrom(4096 * 5 + 1234, 2, (i, c) => 9000 * Math.sin((2 * Math.PI * 330 * i) / 48000) + (c ? 400 * Math.sin(i / 37) : 0)),
  },
  {
    name: 'stereo independent noise (verbatim fallback)',
    channels: 2,
    sampleRate: 44100,
    pcm: pcmFrom(9000, 2, () => Math.floor(random() * 65536) - 32768),
  },
  { name: 'silence, stereo', channels: 2, sampleRate: 16000, pcm: Buffer.alloc(4096 * 3 * 4) },
  {
    name: 'full scale square, mono',
    channels: 1,
    sampleRate: 8000,
    pcm: pcmFrom(10000, 1, (i) => (Math.floor(i / 50) % 2 ? 32767 : -32768)),
  },
  {
    name: 'every 16-bit value, mono, unusual rate',
    channels: 1,
    sampleRate: 12345,
    pcm: pcmFrom(65536, 1, (i) => i - 32768),
  },
  { name: 'one sample', channels: 1, sampleRate: 22050, pcm: pcmFrom(1, 1, () => -12345) },
  { name: 'shorter than a block, stereo', channels: 2, sampleRate: 32000, pcm: pcmFrom(1001, 2, (i, c) => (c ? -i * 30 : i * 30)) },
];

describe('encodeFlac', () => {
  for (const { name, channels, sampleRate, pcm } of cases) {
    describe(name, () => {
      const flac = encodeFlac(pcm, { sampleRate, channels });
      const samples = pcm.length / (2 * channels);

      it('decodes byte-identical with ffmpeg, without complaint', async () => {
        const { pcm: decoded, stderr, code } = await ffmpegDecode(flac);
        expect(code).toBe(0);
        expect(stderr).toBe('');
        expect(decoded.equals(pcm)).toBe(true);
      });

      it('decodes byte-identical with the WebAssembly decoder', async () => {
        expect((await wasmDecode(flac)).equals(pcm)).toBe(true);
      });

      it('writes correct STREAMINFO', () => {
        expect(flac.subarray(0, 4).toString('latin1')).toBe('fLaC');
        const info = parseFlacStreamInfo(flac)!;
        expect(info).toMatchObject({ minBlockSize: 4096, maxBlockSize: 4096, sampleRate, channels, bitsPerSample: 16, totalSamples: samples });
        expect(info.md5).toBe(createHash('md5').update(pcm).digest('hex'));
        const frames = Math.ceil(samples / 4096);
        expect(info.minFrameSize).toBeGreaterThan(0);
        expect(info.maxFrameSize).toBeGreaterThanOrEqual(info.minFrameSize);
        expect(flac.length - FLAC_HEADER_BYTES).toBeGreaterThanOrEqual(frames * info.minFrameSize);
        expect(flac.length - FLAC_HEADER_BYTES).toBeLessThanOrEqual(frames * info.maxFrameSize);
      });

      it('is deterministic', () => {
        expect(encodeFlac(pcm, { sampleRate, channels }).equals(flac)).toBe(true);
      });
    });
  }

  it('frames carry a valid header CRC-8, frame number and CRC-16', () => {
    const pcm = cases[0]!.pcm;
    const flac = encodeFlac(pcm, { sampleRate: 24000, channels: 1 });
    const info = parseFlacStreamInfo(flac)!;
    // With one frame, the frame spans the rest of the file.
    const single = encodeFlac(pcm.subarray(0, 2 * 3000), { sampleRate: 24000, channels: 1 });
    const frame = single.subarray(FLAC_HEADER_BYTES);
    expect(parseFlacStreamInfo(single)!.maxFrameSize).toBe(frame.length);
    expect(frame.readUInt16BE(0)).toBe(0xfff8);
    // Header: sync(2) codes(2) frame number 0 (1) block size - 1 in 16 bits (2) CRC-8 (1).
    expect(frame[4]).toBe(0);
    expect(frame.readUInt16BE(5)).toBe(2999);
    expect(frame[7]).toBe(flacCrc8(frame, 0, 7));
    expect(frame.readUInt16BE(frame.length - 2)).toBe(flacCrc16(frame, 0, frame.length - 2));
    expect(info.totalSamples).toBe(pcm.length / 2);
  });

  it('codes frame numbers past 127 in the extended UTF-8 form', async () => {
    const pcm = pcmFrom(16 * 300, 1, (i) => ((i * 7) % 1000) - 500);
    const flac = encodeFlac(pcm, { sampleRate: 8000, channels: 1, blockSize: 16 });
    const { pcm: decoded, stderr } = await ffmpegDecode(flac);
    expect(stderr).toBe('');
    expect(decoded.equals(pcm)).toBe(true);
  });

  it('compresses speech-like audio well below its raw size', () => {
    const flac = encodeFlac(cases[0]!.pcm, { sampleRate: 24000, channels: 1 });
    expect(flac.length / cases[0]!.pcm.length).toBeLessThan(0.6);
  });

  it('rejects bad input, naming the field', () => {
    const bad = (f: () => unknown): ValidationError => {
      try {
        f();
      } catch (err) {
        return err as ValidationError;
      }
      throw new Error('expected a ValidationError');
    };
    expect(bad(() => encodeFlac(Buffer.alloc(4), { sampleRate: 48000, channels: 3 as 1 }))).toMatchObject({ code: 'RTT_VALIDATION', field: 'channels' });
    expect(bad(() => encodeFlac(Buffer.alloc(4), { sampleRate: 0, channels: 1 }))).toMatchObject({ field: 'sampleRate' });
    expect(bad(() => encodeFlac(Buffer.alloc(6), { sampleRate: 48000, channels: 2 }))).toMatchObject({ field: 'pcm' });
    expect(bad(() => encodeFlac(Buffer.alloc(4), { sampleRate: 48000, channels: 1, blockSize: 8 }))).toMatchObject({ field: 'blockSize' });
  });
});

describe('FlacPcmDecoder', () => {
  const pcm = pcmFrom(20000, 2, (i, c) => 12000 * Math.sin(i / (c ? 9 : 13)));
  const flac = encodeFlac(pcm, { sampleRate: 48000, channels: 2 });

  for (const chunkSize of [1, 7, 4096, 1 << 20]) {
    it(`decodes chunks of ${chunkSize} bytes to the original PCM and verifies it`, async () => {
      const decoder = new FlacPcmDecoder();
      const out: Buffer[] = [];
      try {
        // One-byte chunks are slow through the decoder: feed those only through the header and first frame.
        const data = chunkSize === 1 ? flac.subarray(0, 200) : flac;
        for (let o = 0; o < data.length; o += chunkSize) out.push(await decoder.decode(data.subarray(o, o + chunkSize)));
        if (chunkSize === 1) out.push(await decoder.decode(flac.subarray(200)));
        out.push(await decoder.end());
        decoder.verify();
      } finally {
        await decoder.close();
      }
      expect(Buffer.concat(out).equals(pcm)).toBe(true);
      expect(decoder.samplesDecoded).toBe(20000);
      expect(decoder.streamInfo).toMatchObject({ channels: 2, sampleRate: 48000, totalSamples: 20000 });
    });
  }

  it('keeps a final frame of 13 bytes (a short silent tail)', async () => {
    const tail = Buffer.concat([pcmFrom(4096 * 2, 1, (i) => 5000 * Math.sin(i / 5)), Buffer.alloc(1000 * 2)]);
    const encoded = encodeFlac(tail, { sampleRate: 24000, channels: 1 });
    expect(parseFlacStreamInfo(encoded)!.minFrameSize).toBe(13);
    const decoder = new FlacPcmDecoder();
    const out = Buffer.concat([await decoder.decode(encoded), await decoder.end()]);
    await decoder.close();
    decoder.verify();
    expect(decoder.samplesDecoded).toBe(4096 * 2 + 1000);
    expect(out.equals(tail)).toBe(true);
  });

  it('fails with IntegrityError when the STREAMINFO MD5 does not match', async () => {
    const corrupt = Buffer.from(flac);
    corrupt[30] = corrupt[30]! ^ 0x01;
    const decoder = new FlacPcmDecoder();
    const out = Buffer.concat([await decoder.decode(corrupt), await decoder.end()]);
    await decoder.close();
    expect(out.equals(pcm)).toBe(true);
    expect(() => decoder.verify()).toThrow(IntegrityError);
    expect(() => decoder.verify()).toThrow(/MD5/);
  });

  it('skips the MD5 check when STREAMINFO says the MD5 is unknown (all zeros)', async () => {
    const unknown = Buffer.from(flac);
    unknown.fill(0, 26, 42);
    expect(hasKnownMd5(parseFlacStreamInfo(unknown)!)).toBe(false);
    const decoder = new FlacPcmDecoder();
    const out = Buffer.concat([await decoder.decode(unknown), await decoder.end()]);
    await decoder.close();
    expect(out.equals(pcm)).toBe(true);
    expect(() => decoder.verify()).not.toThrow();
    const corrupt = Buffer.from(unknown);
    corrupt[100] = corrupt[100]! ^ 0x10;
    const other = new FlacPcmDecoder();
    await other.decode(corrupt);
    await other.end();
    await other.close();
    // With no MD5 to compare, a damaged frame is still caught by the sample count.
    expect(() => other.verify()).toThrow(IntegrityError);
  });

  it('fails with IntegrityError on a truncated stream', async () => {
    const decoder = new FlacPcmDecoder();
    await decoder.decode(flac.subarray(0, flac.length - 3000));
    await decoder.end();
    await decoder.close();
    expect(() => decoder.verify()).toThrow(IntegrityError);
    expect(() => decoder.verify()).toThrow(/20000/);
  });

  it('importing and running the WebAssembly decoder installs no process-wide handler or global', async () => {
    const script = `
      const events = ['uncaughtException', 'unhandledRejection', 'exit', 'beforeExit', 'warning', 'SIGINT', 'SIGTERM'];
      const count = () => events.map((e) => process.listenerCount(e)).join(',');
      const before = count();
      const globals = new Set(Object.getOwnPropertyNames(globalThis));
      const { FLACDecoder } = await import('@wasm-audio-decoders/flac');
      const decoder = new FLACDecoder();
      await decoder.ready;
      decoder.free();
      const added = Object.getOwnPropertyNames(globalThis).filter((g) => !globals.has(g));
      console.log(JSON.stringify({ same: before === count(), added }));
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { cwd: process.cwd() });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const [code] = (await once(child, 'close')) as [number];
    expect(code).toBe(0);
    expect(JSON.parse(out)).toEqual({ same: true, added: [] });
  });

  it('decodes a 24-bit FLAC made by ffmpeg exactly (MD5 verified) and outputs its top 16 bits', async () => {
    const samples = 10_000;
    const values = Array.from({ length: samples }, (_, i) => (i === 0 ? -8388608 : i === 1 ? 8388607 : Math.round(6e6 * Math.sin(i / 7))));
    const s32 = Buffer.alloc(samples * 4);
    values.forEach((v, i) => s32.writeInt32LE(v * 256, i * 4));
    // To a file: ffmpeg fills STREAMINFO (MD5, total) in by seeking back, which a pipe cannot.
    const dir = await mkdtemp(join(tmpdir(), 'rtt-flac-'));
    let flac24: Buffer;
    try {
      const file = join(dir, 'x24.flac');
      const args = ['-v', 'error', '-f', 's32le', '-ar', '48000', '-ac', '1', '-i', 'pipe:0', '-c:a', 'flac', '-sample_fmt', 's32', file];
      const child = spawn(ffmpegPath, args);
      child.stdin.end(s32);
      const [code] = (await once(child, 'close')) as [number];
      expect(code).toBe(0);
      flac24 = await readFile(file);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    const info = parseFlacStreamInfo(flac24)!;
    expect(info.bitsPerSample).toBe(24);
    expect(hasKnownMd5(info)).toBe(true);
    const decoder = new FlacPcmDecoder();
    const out = Buffer.concat([await decoder.decode(flac24), await decoder.end()]);
    await decoder.close();
    decoder.verify();
    expect(out.length).toBe(samples * 2);
    expect(values.every((v, i) => out.readInt16LE(i * 2) === v >> 8)).toBe(true);
  });

  it('rejects data that is not FLAC with ProtocolError', async () => {
    const decoder = new FlacPcmDecoder();
    const err = await decoder.decode(Buffer.from('RIFF....WAVEfmt ')).catch((e: unknown) => e);
    await decoder.close();
    expect(err).toBeInstanceOf(ProtocolError);
  });
});

describe('synth', () => {
  it('gives the same audio for the same text and a length that follows the text', () => {
    const a = synthesizeSpeechPcm('Bonjour tout le monde', { sampleRate: 24000 });
    expect(a.equals(synthesizeSpeechPcm('Bonjour tout le monde', { sampleRate: 24000 }))).toBe(true);
    expect(a.equals(synthesizeSpeechPcm('Bonjour tout le monde', { sampleRate: 24000, seed: 1 }))).toBe(false);
    expect(a.length).toBe(2 * Math.round(21 * 0.06 * 24000));
    expect(synthesizeSpeechPcm('Hi', { sampleRate: 16000 }).length).toBe(2 * 8000);
    let peak = 0;
    for (let i = 0; i < a.length; i += 2) peak = Math.max(peak, Math.abs(a.readInt16LE(i)));
    expect(peak).toBeGreaterThan(3000);
  });

  it('encodes speech and separated tracks as FLAC that decodes back', async () => {
    const flac = synthesizeFlac('A short sentence.', { sampleRate: 22050 });
    expect((await wasmDecode(flac)).equals(synthesizeSpeechPcm('A short sentence.', { sampleRate: 22050 }))).toBe(true);
    const tracks = separateTracks('upload.wav', { sampleRate: 44100, channels: 2, durationMs: 1500 });
    const fg = parseFlacStreamInfo(tracks.foreground)!;
    const bg = parseFlacStreamInfo(tracks.background)!;
    expect(fg).toMatchObject({ channels: 2, sampleRate: 44100, totalSamples: 66150 });
    expect(bg).toMatchObject({ channels: 2, sampleRate: 44100, totalSamples: 66150 });
    expect(fg.md5).not.toBe(bg.md5);
    const { pcm, stderr } = await ffmpegDecode(tracks.background);
    expect(stderr).toBe('');
    expect(createHash('md5').update(pcm).digest('hex')).toBe(bg.md5);
  });
});
