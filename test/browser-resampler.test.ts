/**
 * The browser module's resampler (the code its worklets run), in Node: the same response as the
 * Node resampler by the same measurements and thresholds, the same PCM16 bytes, and output that
 * does not depend on how the input is cut into render quanta or how outputs are pulled.
 */
import { describe, expect, it } from 'vitest';
import { createResampleProcessor } from '../lib/audio/resampler.js';
import { StreamResampler, BROWSER_RATES } from '../lib/browser/resampler.js';
import { ValidationError } from '../lib/errors.js';
import { SKIP, WINDOW, defineQualityTests, tones } from './helpers/tone-analysis.js';

/** PCM16 samples as floats in [-1, 1), what an AudioWorklet gets from the microphone. */
function asFloats(pcm: Buffer): Float32Array {
  const out = new Float32Array(pcm.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = pcm.readInt16LE(i * 2) / 32768;
  return out;
}

/** Reads everything `r` owes, padding the input with silence (the filter's tail). */
function drain(r: StreamResampler, out: Int16Array | Float32Array, at: number): number {
  let n = at;
  const owed = n + r.owedFrames;
  while (n < owed) {
    const got = r.read(out, n, owed - n);
    n += got;
    if (got === 0) r.writeSilence(r.inputRate);
  }
  return n;
}

/** Capture: microphone floats at `from` in quanta of 128, PCM16 at `to` out. */
function capture(from: number, to: number, pcm: Buffer, quantum = 128): Int16Array {
  const input = asFloats(pcm);
  const r = new StreamResampler(from, to);
  const out = new Int16Array(Math.ceil((input.length * to) / from));
  let n = 0;
  for (let at = 0; at < input.length; at += quantum) {
    r.writeFloat(input, at, Math.min(input.length, at + quantum));
    n += r.read(out, n);
  }
  expect(drain(r, out, n)).toBe(out.length);
  return out;
}

/** Playback: PCM16 at `from` in, floats at `to` pulled 128 at a time, as the output worklet does. */
function playback(from: number, to: number, pcm: Buffer, piece = 960): Float32Array {
  const input = new Int16Array(pcm.buffer.slice(pcm.byteOffset, pcm.byteOffset + pcm.length));
  const r = new StreamResampler(from, to);
  const out = new Float32Array(Math.ceil((input.length * to) / from));
  let n = 0;
  let fed = 0;
  while (fed < input.length) {
    const want = Math.min(out.length, n + 128);
    while (n < want && fed < input.length) {
      n += r.read(out, n, want - n);
      if (n < want) {
        r.writeInt16(input, fed, Math.min(input.length, fed + piece));
        fed = Math.min(input.length, fed + piece);
      }
    }
  }
  expect(drain(r, out, n)).toBe(out.length);
  return out;
}

function analysed(samples: ArrayLike<number>, scale: number): Float64Array {
  const out = new Float64Array(WINDOW);
  for (let i = 0; i < WINDOW; i++) out[i] = samples[SKIP + i]! * scale;
  return out;
}

const inputFrames = (from: number, to: number): number => Math.ceil(((SKIP + WINDOW + 512) * from) / to);

// The microphone's usual rates to the service's, measured on the PCM16 the worklet sends.
defineQualityTests(
  [
    [44100, 24000],
    [48000, 24000],
    [16000, 24000],
  ],
  (from, to, parts) => analysed(capture(from, to, tones(from, inputFrames(from, to), parts)), 1),
  'the capture worklet: floats in, PCM16 out',
);

// The service's rate to the usual output rates, measured on the floats the worklet plays.
defineQualityTests(
  [
    [24000, 44100],
    [24000, 48000],
  ],
  (from, to, parts) => analysed(playback(from, to, tones(from, inputFrames(from, to), parts)), 32768),
  'the playback worklet: PCM16 in, floats out',
);

/** A deterministic mix of tones and noise at `rate`, `frames` long. */
function program(rate: number, frames: number): Buffer {
  const pcm = tones(rate, frames, [
    [440, 9000],
    [3150, 6000],
    [0.47 * rate, 3000],
  ]);
  let seed = 12345;
  for (let i = 0; i < frames; i++) {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    const v = pcm.readInt16LE(i * 2) + ((seed >>> 16) % 4001) - 2000;
    pcm.writeInt16LE(Math.max(-32768, Math.min(32767, v)), i * 2);
  }
  return pcm;
}

describe('the same filter and arithmetic as the Node resampler', () => {
  it.each([
    [44100, 24000],
    [48000, 24000],
    [16000, 24000],
    [22050, 24000],
    [24000, 44100],
    [24000, 48000],
  ])('%i -> %i: PCM16 out is byte for byte what createResampleProcessor gives', (from, to) => {
    const pcm = program(from, Math.round(from * 0.7) + 3);
    const node = createResampleProcessor(from, to, 1, { kernel: 'js' });
    const expected = Buffer.concat([node.process(pcm), node.flush()]);
    const got = capture(from, to, pcm);
    expect(got.length * 2).toBe(expected.length);
    expect(Buffer.from(got.buffer, got.byteOffset, got.byteLength).equals(expected)).toBe(true);
  });

  it('equal rates pass the samples through unchanged', () => {
    const pcm = program(24000, 5000);
    const got = capture(24000, 24000, pcm);
    expect(Buffer.from(got.buffer).equals(pcm)).toBe(true);
  });
});

describe('block-size independence', () => {
  /** Sizes from a seeded generator, 1 to `max`. */
  function sizes(seed: number, max: number): () => number {
    let s = seed;
    return () => {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      return 1 + (s % max);
    };
  }

  it.each([
    [44100, 24000],
    [48000, 24000],
    [16000, 24000],
    [24000, 44100],
  ])('%i -> %i: the same output for render quanta of 128, one block, and random writes and reads', (from, to) => {
    const pcm = program(from, Math.round(from * 0.5));
    const reference = capture(from, to, pcm, 128);
    expect(capture(from, to, pcm, pcm.length)).toEqual(reference);
    const input = asFloats(pcm);
    const r = new StreamResampler(from, to);
    const out = new Int16Array(reference.length);
    const write = sizes(7, 700);
    const pull = sizes(11, 300);
    let n = 0;
    for (let at = 0; at < input.length;) {
      const end = Math.min(input.length, at + write());
      r.writeFloat(input, at, end);
      at = end;
      for (let got = -1; got !== 0;) {
        got = r.read(out, n, Math.min(pull(), out.length - n));
        n += got;
      }
    }
    drain(r, out, n);
    expect(out).toEqual(reference);
  });

  it('reset forgets the input: a second run gives the first run`s output', () => {
    const pcm = program(48000, 4800);
    const r = new StreamResampler(48000, 24000);
    const first = new Int16Array(2400);
    r.writeFloat(asFloats(pcm));
    drain(r, first, r.read(first));
    r.reset();
    expect(r.inputFrames).toBe(0);
    const second = new Int16Array(2400);
    r.writeFloat(asFloats(pcm));
    drain(r, second, r.read(second));
    expect(second).toEqual(first);
  });
});

describe('rates', () => {
  it('takes the rates devices run at, and names the field for any other', () => {
    for (const rate of BROWSER_RATES) expect(new StreamResampler(rate, 24000).outputRate).toBe(24000);
    expect(() => new StreamResampler(44000, 24000)).toThrow(ValidationError);
    expect(() => new StreamResampler(44000, 24000)).toThrow(/inputRate.*one of 8000, 11025/);
    expect(() => new StreamResampler(24000, 0)).toThrow(/outputRate/);
  });
});
