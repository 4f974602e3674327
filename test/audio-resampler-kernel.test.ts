import { describe, expect, it } from 'vitest';
import { SUPPORTED_RATES, createResampleProcessor, designResampler, type ResampleKernel } from '../lib/audio/resampler.js';
import { createChannelProcessor } from '../lib/audio/channels.js';
import { createG711DecodeProcessor, createG711EncodeProcessor } from '../lib/audio/g711.js';
import { createConverter, fromServiceFormat, toServiceFormat } from '../lib/audio/convert.js';
import type { AudioDescription } from '../lib/audio/audio-format.js';
import { floatToPcm16 } from '../lib/audio/flac-decoder.js';
import { runChunked } from './helpers/streams.js';
import { tablesFor } from '../lib/audio/resample-processors.js';
import { TAP_SCALE } from '../lib/audio/resampler-design.js';
import { firKernel } from '../lib/audio/wasm/fir.js';

/** Deterministic wide-band PCM16: tones plus noise, every channel different. */
function program(rate: number, channels: number, frames: number, seed = 7): Buffer {
  const b = Buffer.alloc(frames * channels * 2);
  let s = seed;
  for (let n = 0; n < frames; n++) {
    for (let c = 0; c < channels; c++) {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      const v =
        11000 * Math.sin((2 * Math.PI * (310 + 170 * c) * n) / rate) + 7000 * Math.sin((2 * Math.PI * 0.47 * rate * n) / rate) + ((s >>> 16) - 32768) / 6;
      b.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(v))), (n * channels + c) * 2);
    }
  }
  return b;
}

function whole(rateIn: number, rateOut: number, channels: number, input: Buffer, kernel: ResampleKernel): Buffer {
  const p = createResampleProcessor(rateIn, rateOut, channels, { kernel });
  return Buffer.concat([p.process(input), p.flush()]);
}

function randomSizes(seed: number, max: number): () => number {
  let s = seed;
  return () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return 1 + ((s >>> 8) % max);
  };
}

const PAIRS: [number, number][] = [];
for (const a of SUPPORTED_RATES) for (const b of SUPPORTED_RATES) if (a !== b) PAIRS.push([a, b]);

describe('the WebAssembly kernel and the JavaScript loop compute the same exact sums', () => {
  it.each(PAIRS)("%i -> %i: the kernel's table holds every tap exactly, its tails in one int16 each, within the overflow bounds", (from, to) => {
    const design = designResampler(from, to);
    const tables = tablesFor(firKernel()!, design)!;
    const { kp, splitFrom, splitTo } = tables;
    const blocks = kp / 8;
    // Narrow blocks at both ends: the tails of every supported filter take one dot product.
    expect(splitFrom).toBeGreaterThan(0);
    expect(splitTo).toBeLessThan(blocks);
    const i16 = firKernel()!.i16;
    const K = design.tapsPerPhase;
    for (let p = 0; p < design.up; p++) {
      let hiSum = 0;
      let loSum = 0;
      for (let k = 0; k < kp; k++) {
        const j = k - (kp - K); // padding on the oldest side is zero taps
        const q = j < 0 ? 0 : Math.round(design.table[p * K + j]! * TAP_SCALE) + 0; // + 0: no -0
        const at = (tables.table >> 1) + p * 2 * kp + (k >> 3) * 16 + (k & 7);
        const hi = i16[at]!;
        const lo = i16[at + 8]!;
        const split = k >> 3 >= splitFrom && k >> 3 < splitTo;
        expect(split ? hi * 256 + lo : lo).toBe(q);
        if (split) expect(Math.abs(lo)).toBeLessThanOrEqual(128);
        else expect(hi).toBe(0);
        hiSum += Math.abs(hi);
        loSum += Math.abs(lo);
      }
      expect(hiSum).toBeLessThan(2 ** 16);
      expect(loSum).toBeLessThan(2 ** 16);
    }
  });

  it.each(PAIRS)('%i -> %i, mono and stereo: byte-identical output', (from, to) => {
    for (const channels of [1, 2]) {
      const input = program(from, channels, Math.round(from * 0.05) + 13, from + to + channels);
      const wasm = whole(from, to, channels, input, 'wasm');
      const js = whole(from, to, channels, input, 'js');
      expect(wasm.length).toBe(Math.ceil(((input.length / 2 / channels) * to) / from) * 2 * channels);
      expect(wasm.equals(js)).toBe(true);
    }
  });

  it.each([
    [48000, 24000],
    [8000, 24000],
    [24000, 8000],
    [24000, 48000],
    [44100, 8000],
    [22050, 48000],
  ])('%i -> %i: full-scale input shaped like the filter (the overflow worst case) matches too', (from, to) => {
    // Every input sample at +-32768 with the sign of the tap it meets: the largest sums the
    // integer lanes can see. Saturating output, same bytes from both implementations.
    const d = designResampler(from, to);
    const K = d.tapsPerPhase;
    const frames = 4 * K * d.up + 100;
    const input = Buffer.alloc(frames * 2);
    for (let i = 0; i < frames; i++) {
      const tap = d.table[((i * 7) % d.up) * K + (i % K)]!;
      input.writeInt16LE(tap >= 0 ? 32767 : -32768, i * 2);
    }
    const wasm = whole(from, to, 1, input, 'wasm');
    expect(wasm.equals(whole(from, to, 1, input, 'js'))).toBe(true);
    const samples = new Int16Array(wasm.buffer, wasm.byteOffset, wasm.length / 2);
    expect(samples.some((v) => v === 32767 || v === -32768)).toBe(true);
  });

  it.each(PAIRS)('%i -> %i, mixing down and up in the same pass: the bytes of separate mix and resample stages', (from, to) => {
    const stereo = program(from, 2, Math.round(from * 0.03) + 5, from * 3 + to);
    const separateDown = (() => {
      const mix = createChannelProcessor(2, 1);
      const rs = createResampleProcessor(from, to, 1, { kernel: 'js' });
      return Buffer.concat([rs.process(mix.process(stereo)), rs.flush()]);
    })();
    const mono = program(from, 1, Math.round(from * 0.03) + 5, from * 5 + to);
    const separateUp = (() => {
      const rs = createResampleProcessor(from, to, 1, { kernel: 'js' });
      const mix = createChannelProcessor(1, 2);
      return Buffer.concat([mix.process(rs.process(mono)), mix.process(rs.flush())]);
    })();
    for (const kernel of ['wasm', 'js'] as const) {
      const down = createResampleProcessor(from, to, 2, { kernel, mix: 'down' });
      expect(Buffer.concat([down.process(stereo), down.flush()]).equals(separateDown)).toBe(true);
      const up = createResampleProcessor(from, to, 1, { kernel, mix: 'up' });
      expect(Buffer.concat([up.process(mono), up.flush()]).equals(separateUp)).toBe(true);
    }
  });

  it.each([
    [8000, 24000, 'mulaw'],
    [8000, 16000, 'alaw'],
    [24000, 8000, 'mulaw'],
    [48000, 8000, 'alaw'],
    [16000, 44100, 'mulaw'],
  ] as const)('%i -> %i, %s decoded before and encoded after in the same pass: the bytes of separate stages', (from, to, law) => {
    for (const channels of [1, 2]) {
      const pcm = program(from, channels, Math.round(from * 0.04) + 3, from + channels);
      const coded = createG711EncodeProcessor(law).process(pcm);
      const separate = (() => {
        const dec = createG711DecodeProcessor(law);
        const rs = createResampleProcessor(from, to, channels, { kernel: 'js' });
        const enc = createG711EncodeProcessor(law);
        return Buffer.concat([enc.process(rs.process(dec.process(coded))), enc.process(rs.flush())]);
      })();
      for (const kernel of ['wasm', 'js'] as const) {
        const fused = createResampleProcessor(from, to, channels, { kernel, decode: law, encode: law });
        expect(Buffer.concat([fused.process(coded), fused.flush()]).equals(separate)).toBe(true);
      }
      if (channels === 1) continue;
      // Decoding then mixing down, and mixing up then encoding, in the same pass as well.
      const down = (() => {
        const dec = createG711DecodeProcessor(law);
        const mix = createChannelProcessor(2, 1);
        const rs = createResampleProcessor(from, to, 1, { kernel: 'js' });
        return Buffer.concat([rs.process(mix.process(dec.process(coded))), rs.flush()]);
      })();
      const mono = program(from, 1, Math.round(from * 0.04) + 3, from + 17);
      const up = (() => {
        const rs = createResampleProcessor(from, to, 1, { kernel: 'js' });
        const mix = createChannelProcessor(1, 2);
        const enc = createG711EncodeProcessor(law);
        return Buffer.concat([enc.process(mix.process(rs.process(mono))), enc.process(mix.process(rs.flush()))]);
      })();
      for (const kernel of ['wasm', 'js'] as const) {
        const d = createResampleProcessor(from, to, 2, { kernel, decode: law, mix: 'down' });
        expect(Buffer.concat([d.process(coded), d.flush()]).equals(down)).toBe(true);
        const u = createResampleProcessor(from, to, 1, { kernel, mix: 'up', encode: law });
        expect(Buffer.concat([u.process(mono), u.flush()]).equals(up)).toBe(true);
      }
    }
  });

  it('runs in this engine (Node 20 has WebAssembly SIMD)', () => {
    expect(() => createResampleProcessor(48000, 24000, 1, { kernel: 'wasm' })).not.toThrow();
  });
});

describe('the service conversions give the same bytes for any chunking', () => {
  const cases: [string, () => NodeJS.ReadWriteStream, AudioDescription, number][] = [
    ['48 kHz stereo -> 24 kHz mono', () => toServiceFormat({ rate: 48000, channels: 2 }), { rate: 48000, channels: 2 }, 3840],
    ['24 kHz mono -> 48 kHz stereo', () => fromServiceFormat({ rate: 48000, channels: 2 }), { rate: 24000, channels: 1 }, 960],
    ['8 kHz mu-law -> 24 kHz mono', () => toServiceFormat({ format: 'mulaw', rate: 8000, channels: 1 }), { format: 'mulaw', rate: 8000, channels: 1 }, 160],
    ['24 kHz mono -> 8 kHz mu-law', () => fromServiceFormat({ format: 'mulaw', rate: 8000, channels: 1 }), { rate: 24000, channels: 1 }, 960],
  ];

  describe.each(cases)('%s', (_name, make, source, frameBytes) => {
    // 0.7 s of input in the source's own format (mu-law made from PCM16 by the library's encoder).
    const pcm = program(source.rate, source.channels, Math.round(source.rate * 0.7), 99);
    const input =
      source.format === 'mulaw'
        ? (() => {
            const p = createConverter({ rate: 8000, channels: 1 }, { format: 'mulaw', rate: 8000, channels: 1 });
            const chunks: Buffer[] = [];
            p.on('data', (c: Buffer) => chunks.push(c));
            p.end(pcm);
            return Buffer.concat(chunks);
          })()
        : pcm;

    it.each([1, 2, 3, 4, 5])('random chunking #%i equals one block, and 20 ms frames equal it too', async (seed) => {
      const reference = await runChunked(make(), input, input.length);
      expect(reference.length).toBeGreaterThan(0);
      const random = await runChunked(make(), input, randomSizes(seed * 7919, seed % 2 ? 37 : 9000));
      expect(random.equals(reference)).toBe(true);
      const frames = await runChunked(make(), input, frameBytes);
      expect(frames.equals(reference)).toBe(true);
    });
  });
});

describe('float to int16 (the FLAC decoder output) in the kernel', () => {
  /** The rounding the decoder documents: x * 32767, halves away from zero, clipped; NaN is 0. */
  function reference(x: number): number {
    const v = x * 32767;
    if (v >= 32767) return 32767;
    if (v <= -32768) return -32768;
    return v >= 0 ? Math.floor(v + 0.5) : -Math.floor(0.5 - v) || 0;
  }

  it('every int16 value decoded by the FLAC scale, edges, halves and NaN, mono and stereo', () => {
    const values: number[] = [];
    for (let v = -32768; v <= 32767; v++) values.push(Math.fround(v / 32767));
    values.push(NaN, Infinity, -Infinity, 1.5, -1.5, 0.5 / 32767, -0.5 / 32767, 1.5 / 32767, -1.5 / 32767, -0, 32766.5 / 32767);
    for (const channels of [1, 2]) {
      const data = Array.from({ length: channels }, (_, c) => Float32Array.from(c === 0 ? values : [...values].reverse()));
      const pcm = floatToPcm16(data, values.length, 16);
      const got = new Int16Array(pcm.buffer, pcm.byteOffset, pcm.length / 2);
      let wrong = 0;
      for (let i = 0; i < values.length; i++) {
        for (let c = 0; c < channels; c++) if (got[i * channels + c] !== reference(data[c]![i]!)) wrong++;
      }
      expect(wrong).toBe(0);
    }
  });
});
