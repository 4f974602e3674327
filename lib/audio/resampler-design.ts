/**
 * The resampler's filter design, with no dependency: one Kaiser-windowed sinc low-pass per rate
 * pair, split into polyphase rows of integer taps (see `resampler.ts` for the response it
 * guarantees). Shared by the Node resampler and the browser module's worklet, so both filter
 * with the same coefficients; `toInt16` is the library's one rounding of a sample to PCM16.
 */

/** Lower edge of the transition band, as a fraction of the lower rate's Nyquist frequency. */
export const PASSBAND_EDGE = 0.8;
/** Start of the stopband, as a fraction of the lower rate's Nyquist frequency. */
export const STOPBAND_EDGE = 1.0;
/** Stopband attenuation the filters are designed for, in dB. */
export const DESIGN_ATTENUATION_DB = 105;

/** Taps are integers times 2^-TAP_BITS. */
export const TAP_BITS = 22;
export const TAP_SCALE = 2 ** TAP_BITS;

/** A polyphase filter for one rate pair. Immutable and shared. */
export interface ResamplerDesign {
  readonly inputRate: number;
  readonly outputRate: number;
  /** Interpolation factor L = outputRate / gcd. */
  readonly up: number;
  /** Decimation factor M = inputRate / gcd. */
  readonly down: number;
  /** Taps per polyphase row (K); the prototype filter has at most `up * K` taps. */
  readonly tapsPerPhase: number;
  /** Length of the prototype filter (odd, so its centre falls on a sample). */
  readonly prototypeLength: number;
  /** Filter delay in samples at `up * inputRate`: `(prototypeLength - 1) / 2`. */
  readonly delay: number;
  /** Kaiser window shape parameter. */
  readonly beta: number;
  /** -6 dB cut-off in Hz. */
  readonly cutoffHz: number;
  /**
   * The polyphase table: row `p` (0 <= p < up) holds K taps `h[p + j * up]` in reverse order
   * (j = K-1 .. 0), so it multiplies the K most recent input frames oldest first. Every tap is
   * an integer times 2^-22 and each row sums to exactly 1 (a DC gain of exactly 1).
   */
  readonly table: Float64Array;
}

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

/** Modified Bessel function of the first kind, order 0, by its power series. */
function besselI0(x: number): number {
  const q = (x * x) / 4;
  let term = 1;
  let sum = 1;
  for (let k = 1; k < 500; k++) {
    term *= q / (k * k);
    sum += term;
    if (term < sum * 1e-17) break;
  }
  return sum;
}

const designs = new Map<string, ResamplerDesign>();

/**
 * The polyphase filter converting `inputRate` to `outputRate` (positive integers, in Hz; the
 * callers check them), cached per pair. The tables must not be modified.
 */
export function designPolyphase(inputRate: number, outputRate: number): ResamplerDesign {
  const key = `${inputRate}:${outputRate}`;
  const cached = designs.get(key);
  if (cached) return cached;

  const g = gcd(inputRate, outputRate);
  const up = outputRate / g;
  const down = inputRate / g;
  const highRate = inputRate * up; // the rate the prototype filter runs at
  const nyquist = Math.min(inputRate, outputRate) / 2;
  const transition = ((STOPBAND_EDGE - PASSBAND_EDGE) * nyquist) / highRate; // cycles per sample
  const cutoff = (((PASSBAND_EDGE + STOPBAND_EDGE) / 2) * nyquist) / highRate;
  const a = DESIGN_ATTENUATION_DB;
  const beta = 0.1102 * (a - 8.7);
  // Kaiser's estimate of the length for attenuation `a` over this transition width.
  const needed = Math.ceil((a - 7.95) / (2.285 * 2 * Math.PI * transition)) + 1;
  let taps = Math.ceil(needed / up);
  if (taps * up - ((taps * up) % 2 === 0 ? 1 : 0) < needed) taps++;
  const length = (taps * up) % 2 === 0 ? taps * up - 1 : taps * up;
  const centre = (length - 1) / 2;

  const proto = new Float64Array(taps * up);
  const i0Beta = besselI0(beta);
  for (let n = 0; n < length; n++) {
    const x = n - centre;
    const arg = 2 * cutoff * x;
    const sinc = x === 0 ? 1 : Math.sin(Math.PI * arg) / (Math.PI * arg);
    const r = x / centre;
    const window = besselI0(beta * Math.sqrt(Math.max(0, 1 - r * r))) / i0Beta;
    proto[n] = 2 * cutoff * sinc * window;
  }

  const table = new Float64Array(up * taps);
  const middle = (taps - 1) >> 1;
  for (let p = 0; p < up; p++) {
    let sum = 0;
    for (let j = 0; j < taps; j++) sum += proto[p + j * up]!;
    // Quantise to integers scaled by 2^-22 and put the rounding residue on the largest tap, so
    // the row sums to exactly 1 (the centre tap when the row is symmetric, which keeps it so).
    const row = p * taps;
    let total = 0;
    let largest = 0;
    for (let j = 0; j < taps; j++) {
      const q = Math.round((proto[p + j * up]! / sum) * TAP_SCALE);
      table[row + (taps - 1 - j)] = q;
      total += q;
      if (Math.abs(q) > Math.abs(table[row + largest]!)) largest = taps - 1 - j;
    }
    if (up === 1 && taps % 2 === 1) largest = middle;
    table[row + largest] = table[row + largest]! + (TAP_SCALE - total);
    for (let j = 0; j < taps; j++) table[row + j] = table[row + j]! / TAP_SCALE;
  }

  const design: ResamplerDesign = Object.freeze({
    inputRate,
    outputRate,
    up,
    down,
    tapsPerPhase: taps,
    prototypeLength: length,
    delay: centre,
    beta,
    cutoffHz: cutoff * highRate,
    table,
  });
  designs.set(key, design);
  return design;
}

/**
 * Rounds to the nearest integer (halves away from zero, so the mapping is symmetric about 0)
 * and clips to the int16 range [-32768, 32767]. NaN becomes 0.
 */
export function toInt16(x: number): number {
  if (x >= 32767) return 32767;
  if (x <= -32768) return -32768;
  if (x >= 0) return Math.floor(x + 0.5);
  if (x < 0) return -Math.floor(0.5 - x);
  return 0;
}
