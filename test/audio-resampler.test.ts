import { describe, expect, it } from 'vitest';
import { DESIGN_ATTENUATION_DB, Resampler, SUPPORTED_RATES, createResampleProcessor, designResampler } from '../lib/audio/resampler.js';
import { ValidationError } from '../lib/errors.js';
import { runChunked } from './helpers/streams.js';
import { SKIP, WINDOW, dB, defineQualityTests, tones, toSamples } from './helpers/tone-analysis.js';

/** Resamples `seconds`-worth of mono tones and returns the analysed output segment. */
function resampleTones(from: number, to: number, parts: [number, number][]): Float64Array {
  const inFrames = Math.ceil(((SKIP + WINDOW + 512) * from) / to);
  const p = createResampleProcessor(from, to, 1);
  const out = Buffer.concat([p.process(tones(from, inFrames, parts)), p.flush()]);
  return toSamples(out).subarray(SKIP, SKIP + WINDOW);
}

const PAIRS: [number, number][] = [];
for (const a of SUPPORTED_RATES) for (const b of SUPPORTED_RATES) if (a !== b) PAIRS.push([a, b]);

// ---------------------------------------------------------------------------------------------

describe('filter design', () => {
  it.each([
    [48000, 24000],
    [8000, 24000],
    [44100, 48000],
    [48000, 8000],
    [22050, 16000],
    [24000, 44100],
  ])('%i -> %i: passband flat within 0.001 dB to 0.8 x Nyquist, stopband >= 100 dB from Nyquist', (from, to) => {
    const d = designResampler(from, to);
    const L = d.up;
    const K = d.tapsPerPhase;
    const h = new Float64Array(L * K);
    for (let p = 0; p < L; p++) for (let j = 0; j < K; j++) h[p + j * L] = d.table[p * K + K - 1 - j]!;
    const high = from * L;
    const nyq = Math.min(from, to) / 2;
    const centre = d.delay;
    const gain = (f: number): number => {
      let re = 0;
      const w = (2 * Math.PI * f) / high;
      for (let n = 0; n < h.length; n++) re += h[n]! * Math.cos(w * (n - centre)); // linear phase: real
      return Math.abs(re) / L;
    };
    let passDev = 0;
    for (let i = 0; i <= 100; i++) passDev = Math.max(passDev, Math.abs(dB(gain((0.8 * nyq * i) / 100))));
    let stopPeak = 0;
    for (let i = 0; i <= 400; i++) stopPeak = Math.max(stopPeak, gain(nyq + ((high / 2 - nyq) * i) / 400));
    expect(passDev).toBeLessThan(0.001);
    expect(dB(stopPeak)).toBeLessThan(-100);
    expect(d.prototypeLength % 2).toBe(1);
    expect(d.delay).toBe((d.prototypeLength - 1) / 2);
  });

  it('is cached and shared per rate pair', () => {
    expect(designResampler(48000, 24000)).toBe(designResampler(48000, 24000));
    expect(DESIGN_ATTENUATION_DB).toBeGreaterThanOrEqual(100);
  });
});

defineQualityTests(PAIRS, resampleTones, 'PCM16 output');

describe('time alignment (filter delay compensated)', () => {
  it.each([
    [48000, 24000],
    [8000, 24000],
    [44100, 24000],
    [24000, 48000],
    [22050, 16000],
  ])('%i -> %i: output sample n is the input tone at time n / outputRate, within 2 LSB', (from, to) => {
    const f = 440;
    const frames = from / 10;
    const p = createResampleProcessor(from, to, 1);
    const out = toSamples(Buffer.concat([p.process(tones(from, frames, [[f, 20000]])), p.flush()]));
    expect(out.length).toBe(Math.ceil((frames * to) / from));
    let worst = 0;
    // Away from both ends, where the tone starts and stops abruptly.
    for (let n = 200; n < out.length - 200; n++) {
      const expected = 20000 * Math.sin((2 * Math.PI * f * n) / to + 0.3);
      worst = Math.max(worst, Math.abs(out[n]! - expected));
    }
    expect(worst).toBeLessThanOrEqual(2);
  });

  it('an impulse at input frame 960 peaks at output frame 480 (48 kHz -> 24 kHz)', () => {
    const input = Buffer.alloc(2000 * 2);
    input.writeInt16LE(30000, 960 * 2);
    const p = createResampleProcessor(48000, 24000, 1);
    const out = toSamples(Buffer.concat([p.process(input), p.flush()]));
    let at = 0;
    for (let i = 0; i < out.length; i++) if (out[i]! > out[at]!) at = i;
    expect(at).toBe(480);
  });
});

// ---------------------------------------------------------------------------------------------
// Streaming: chunking, state, tail
// ---------------------------------------------------------------------------------------------

const run = runChunked;

/** Deterministic wide-band test signal: tones plus pseudo-random noise, all channels differing. */
function program(rate: number, channels: number, frames: number): Buffer {
  const b = Buffer.alloc(frames * channels * 2);
  let s = 7;
  for (let n = 0; n < frames; n++) {
    for (let c = 0; c < channels; c++) {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      const noise = ((s >>> 16) - 32768) / 8;
      const v = 12000 * Math.sin((2 * Math.PI * (300 + 200 * c) * n) / rate) + 6000 * Math.sin((2 * Math.PI * 0.45 * rate * n) / rate) + noise;
      b.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(v))), (n * channels + c) * 2);
    }
  }
  return b;
}

function randomSizes(seed: number, max: number): (i: number) => number {
  let s = seed;
  return () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return 1 + ((s >>> 8) % max);
  };
}

const CHUNKINGS: [string, (frameBytes10ms: number) => (i: number) => number][] = [
  ['1 byte', () => () => 1],
  ['3 bytes', () => () => 3],
  ['7 bytes', () => () => 7],
  ['10 ms frames', (f) => () => f],
  ['random 1..5000 bytes', () => randomSizes(99, 5000)],
  ['1 MB blocks', () => () => 1 << 20],
];

describe.each([
  [48000, 24000, 2],
  [44100, 48000, 2],
  [8000, 24000, 1],
  [22050, 16000, 1],
  [24000, 44100, 1],
  [48000, 8000, 3],
])('chunking %i -> %i, %i channel(s)', (from, to, channels) => {
  const frames = Math.round(from * 0.25);
  const input = program(from, channels, frames);
  const reference = (() => {
    const p = createResampleProcessor(from, to, channels);
    return Buffer.concat([p.process(input), p.flush()]);
  })();

  it('one block gives ceil(frames * out / in) frames', () => {
    expect(reference.length).toBe(Math.ceil((frames * to) / from) * channels * 2);
  });

  it.each(CHUNKINGS)('%s give the same bytes as one block', async (_name, sizes) => {
    const out = await run(new Resampler({ inputRate: from, outputRate: to, channels }), input, sizes((from / 100) * channels * 2));
    expect(out.length).toBe(reference.length);
    expect(out.equals(reference)).toBe(true);
  });

  it('matches a direct (non-streaming) evaluation of the polyphase filter within 1 LSB', () => {
    const d = designResampler(from, to);
    const { up: L, down: M, tapsPerPhase: K, table } = d;
    const x = (i: number, c: number): number => (i < 0 || i >= frames ? 0 : input.readInt16LE((i * channels + c) * 2));
    const outFrames = reference.length / 2 / channels;
    let off = 0;
    for (let n = 0; n < outFrames; n += 7) {
      const t = n * M + d.delay;
      const i0 = Math.floor(t / L);
      const p = t - i0 * L;
      for (let c = 0; c < channels; c++) {
        let acc = 0;
        for (let j = 0; j < K; j++) acc += x(i0 - j, c) * table[p * K + (K - 1 - j)]!;
        const expected = Math.max(-32768, Math.min(32767, Math.round(acc)));
        const got = reference.readInt16LE((n * channels + c) * 2);
        expect(Math.abs(got - expected)).toBeLessThanOrEqual(1);
        if (got !== expected) off++;
      }
    }
    expect(off).toBeLessThan(outFrames / 100);
  });
});

describe('stream edges', () => {
  it('empty input gives empty output', async () => {
    const out = await run(new Resampler({ inputRate: 48000, outputRate: 24000 }), Buffer.alloc(0), () => 1);
    expect(out.length).toBe(0);
  });

  it('a single frame gives ceil(1 * out / in) frames', async () => {
    const up = await run(new Resampler({ inputRate: 8000, outputRate: 48000 }), Buffer.from([0x10, 0x00]), () => 1);
    expect(up.length).toBe(6 * 2);
    const down = await run(new Resampler({ inputRate: 48000, outputRate: 8000, channels: 2 }), Buffer.from([1, 0, 2, 0]), () => 1);
    expect(down.length).toBe(1 * 4);
  });

  it('a partial frame at the end is dropped (stereo, 3 trailing bytes)', async () => {
    const input = Buffer.concat([program(48000, 2, 480), Buffer.from([1, 2, 3])]);
    const out = await run(new Resampler({ inputRate: 48000, outputRate: 24000, channels: 2 }), input, () => 100);
    expect(out.length).toBe(240 * 4);
  });

  it('silence stays exact zero and a constant stays constant', async () => {
    const dc = Buffer.alloc(4800 * 2);
    for (let i = 0; i < 4800; i++) dc.writeInt16LE(-12345, i * 2);
    const out = toSamples(await run(new Resampler({ inputRate: 48000, outputRate: 44100 }), dc, () => 960));
    // Away from the edges (where the signal starts after silence and ends before silence).
    const middle = out.subarray(200, out.length - 200);
    expect(middle.every((v) => v === -12345)).toBe(true);
    const silent = toSamples(await run(new Resampler({ inputRate: 8000, outputRate: 22050 }), Buffer.alloc(1600), () => 160));
    expect(silent.every((v) => v === 0)).toBe(true);
  });

  it('equal rates pass bytes through', async () => {
    const input = program(24000, 1, 1000);
    const out = await run(new Resampler({ inputRate: 24000, outputRate: 24000 }), input, () => 333);
    expect(out.equals(input)).toBe(true);
  });

  it('a full-scale square wave clips to the int16 range instead of wrapping', async () => {
    const sq = Buffer.alloc(4800 * 2);
    for (let i = 0; i < 4800; i++) sq.writeInt16LE(Math.floor(i / 24) % 2 ? -32768 : 32767, i * 2);
    const out = toSamples(await run(new Resampler({ inputRate: 48000, outputRate: 24000 }), sq, () => 4096));
    // Gibbs overshoot exceeds full scale: it must saturate, never wrap to the other sign.
    expect(Math.max(...out)).toBe(32767);
    expect(Math.min(...out)).toBe(-32768);
    // On the plateaus (away from the edges) every sample keeps the input's sign.
    const wrong: number[] = [];
    for (let n = 100; n < out.length - 100; n++) {
      const i = 2 * n;
      if (i % 24 < 6 || i % 24 > 18) continue;
      const positive = Math.floor(i / 24) % 2 === 0;
      if (positive !== out[n]! > 0) wrong.push(n);
    }
    expect(wrong).toEqual([]);
  });
});

describe('options', () => {
  it.each([
    [{ inputRate: 32000, outputRate: 24000 }, 'inputRate', 'one of 8000, 16000, 22050, 24000, 44100, 48000'],
    [{ inputRate: 48000, outputRate: '24000' }, 'outputRate', 'one of 8000'],
    [{ inputRate: 48000, outputRate: 24000, channels: 0 }, 'channels', 'integer channel count'],
    [{ inputRate: 48000, outputRate: 24000, channels: 1.5 }, 'channels', 'integer channel count'],
  ])('%j is refused naming %s', (options, field, accepted) => {
    let error: unknown;
    try {
      new Resampler(options as never);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).field).toBe(field);
    expect((error as ValidationError).accepted).toContain(accepted);
  });
});
