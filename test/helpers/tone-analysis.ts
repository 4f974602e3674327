/**
 * Measuring a resampler's output: test tones, their amplitude at one frequency and the
 * spectrum of a Kaiser-windowed segment, and the quality thresholds the resampler tests share.
 */
import { describe, expect, it } from 'vitest';

/** Amplitude of the test tones: -0.2 dBFS. */
export const A = 32000;
/** Output samples analysed; long enough that one bin is a few Hz and noise per bin is tiny. */
export const WINDOW = 16384;
/** Output samples skipped at the start (the filter's attack on an abrupt tone start). */
export const SKIP = 2048;

/** Sum of sines (frequency Hz, amplitude) sampled at `rate`, rounded to int16, `frames` long, mono. */
export function tones(rate: number, frames: number, parts: [number, number][]): Buffer {
  const b = Buffer.alloc(frames * 2);
  for (let n = 0; n < frames; n++) {
    let v = 0;
    for (const [f, a] of parts) v += a * Math.sin((2 * Math.PI * f * n) / rate + 0.3);
    b.writeInt16LE(Math.round(v), n * 2);
  }
  return b;
}

export function toSamples(b: Buffer, channels = 1, channel = 0): Float64Array {
  const frames = Math.floor(b.length / 2 / channels);
  const out = new Float64Array(frames);
  for (let i = 0; i < frames; i++) out[i] = b.readInt16LE((i * channels + channel) * 2);
  return out;
}

function besselI0(x: number): number {
  let term = 1;
  let sum = 1;
  for (let k = 1; k < 200; k++) {
    term *= (x * x) / 4 / (k * k);
    sum += term;
  }
  return sum;
}

/**
 * Kaiser window, beta 20: sidelobes far below -150 dB, so a full-scale tone does not leak into
 * a -90 dB measurement elsewhere, and the main lobe is so wide that a tone between bins loses
 * well under 0.1 dB (no scalloping concerns).
 */
const KAISER = (() => {
  const w = new Float64Array(WINDOW);
  const i0 = besselI0(20);
  for (let n = 0; n < WINDOW; n++) {
    const r = (2 * n) / (WINDOW - 1) - 1;
    w[n] = besselI0(20 * Math.sqrt(1 - r * r)) / i0;
  }
  return w;
})();
const KAISER_SUM = KAISER.reduce((a, b) => a + b, 0);

/** Amplitude (same units as the samples) of the component at exactly `freq` Hz. */
export function amplitudeAt(x: Float64Array, rate: number, freq: number): number {
  let re = 0;
  let im = 0;
  const w = (2 * Math.PI * freq) / rate;
  for (let n = 0; n < WINDOW; n++) {
    const v = x[n]! * KAISER[n]!;
    re += v * Math.cos(w * n);
    im -= v * Math.sin(w * n);
  }
  return (2 * Math.hypot(re, im)) / KAISER_SUM;
}

/** Amplitude spectrum (bins 0 .. WINDOW/2) of the windowed segment, by radix-2 FFT. */
export function spectrum(x: Float64Array): Float64Array {
  const n = WINDOW;
  const re = new Float64Array(n);
  const im = new Float64Array(n);
  for (let i = 0; i < n; i++) re[i] = x[i]! * KAISER[i]!;
  for (let i = 1, j = 0; i < n; i++) {
    let bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      [re[i], re[j]] = [re[j]!, re[i]!];
      [im[i], im[j]] = [im[j]!, im[i]!];
    }
  }
  for (let len = 2; len <= n; len <<= 1) {
    const ang = (-2 * Math.PI) / len;
    for (let i = 0; i < n; i += len) {
      for (let k = 0; k < len / 2; k++) {
        const wr = Math.cos(ang * k);
        const wi = Math.sin(ang * k);
        const a = i + k;
        const b = a + len / 2;
        const tr = re[b]! * wr - im[b]! * wi;
        const ti = re[b]! * wi + im[b]! * wr;
        re[b] = re[a]! - tr;
        im[b] = im[a]! - ti;
        re[a] = re[a]! + tr;
        im[a] = im[a]! + ti;
      }
    }
  }
  const out = new Float64Array(n / 2 + 1);
  for (let k = 0; k <= n / 2; k++) out[k] = (2 * Math.hypot(re[k]!, im[k]!)) / KAISER_SUM;
  return out;
}

export const dB = (ratio: number): number => 20 * Math.log10(ratio);

/** Largest spectral amplitude over bins whose frequency satisfies `where`. */
export function peakWhere(x: Float64Array, rate: number, where: (hz: number) => boolean): number {
  const s = spectrum(x);
  let peak = 0;
  for (let k = 0; k < s.length; k++) if (where((k * rate) / WINDOW) && s[k]! > peak) peak = s[k]!;
  return peak;
}

/** Where a tone at `f` Hz lands after sampling at `rate`. */
export function alias(f: number, rate: number): number {
  const r = f % rate;
  return r > rate / 2 ? rate - r : r;
}

/**
 * A resampler's response measured on its output, the thresholds every resampler of the library
 * meets: for each pair, tones in the passband keep their level within 0.1 dB with spurs below
 * -90 dB; when downsampling, tones above the output Nyquist frequency come out at least 90 dB
 * down (no aliases); when upsampling, no image above the input Nyquist frequency.
 */
export function defineQualityTests(
  pairs: [number, number][],
  resampleTones: (from: number, to: number, parts: [number, number][]) => Float64Array,
  measuredOn: string,
): void {
  describe.each(pairs)(`quality %i -> %i (measured on ${measuredOn})`, (from, to) => {
    const nyqOut = to / 2;
    const nyqMin = Math.min(from, to) / 2;
    const floor = A * 10 ** (-90 / 20);

    it.each([997, 0.8 * nyqMin])('a %f Hz tone keeps its level within 0.1 dB, spurs below -90 dB', (f) => {
      const y = resampleTones(from, to, [[f, A]]);
      expect(Math.abs(dB(amplitudeAt(y, to, f) / A))).toBeLessThan(0.1);
      const binHz = to / WINDOW;
      expect(dB(peakWhere(y, to, (hz) => Math.abs(hz - f) > 24 * binHz) / A)).toBeLessThan(-90);
    });

    if (to < from) {
      const nyqIn = from / 2;
      it.each([1.02 * nyqOut, (nyqOut + nyqIn) / 2, 0.98 * nyqIn])('a %f Hz tone above the output Nyquist comes out >= 90 dB down', (f) => {
        const y = resampleTones(from, to, [[f, A]]);
        expect(amplitudeAt(y, to, alias(f, to))).toBeLessThan(floor);
        expect(peakWhere(y, to, () => true)).toBeLessThan(floor);
      });
    } else {
      it.each([0.8 * nyqMin, 0.98 * nyqMin])('a %f Hz tone leaves no image above the input Nyquist (>= 90 dB down)', (f) => {
        const y = resampleTones(from, to, [[f, A]]);
        expect(amplitudeAt(y, to, from - f)).toBeLessThan(floor);
        expect(peakWhere(y, to, (hz) => hz > nyqMin * 1.0)).toBeLessThan(floor);
      });
    }
  });
}
