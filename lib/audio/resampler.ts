/**
 * Sample rate conversion for PCM16 LE, any channel count, between the rates in
 * `SUPPORTED_RATES` in either direction.
 *
 * Design: the ratio is reduced to `up / down` (L / M) by the gcd; one Kaiser-windowed sinc
 * low-pass at `L * inputRate` is split into L polyphase rows of K taps each, precomputed once
 * per rate pair and shared (read-only) by every resampler of that pair. Each output sample is
 * one K-tap dot product in Float64 over the input history, rounded to the nearest int16 at the
 * end (halves away from zero) and clipped to [-32768, 32767], so overshoot saturates.
 *
 * Response (the lower of the two rates sets the band, `nyquist = min(in, out) / 2`):
 * - passband flat to within 0.001 dB up to 0.8 x nyquist;
 * - stopband from nyquist up, attenuated by at least 100 dB (designed for 105 dB), so tones
 *   above the output Nyquist frequency do not alias and upsampling leaves no images;
 * - in between, the transition band (the -6 dB point is at 0.9 x nyquist).
 *
 * Delay policy: the filter's delay is compensated. Output sample `n` is the input signal at
 * time `n / outputRate` (a linear-phase filter centred on that instant), so output and input are
 * time-aligned and `inputFrames` in give `ceil(inputFrames * out / in)` frames out. To centre
 * the filter the resampler holds back about K/2 input frames (at most ~4 ms of audio at these
 * rates) until more input arrives; `flush` (end of stream) emits that tail, with silence
 * assumed after the end.
 *
 * Chunking: input may be cut anywhere (a sample frame cut in two is carried over); the output
 * bytes are identical for any chunking, because every output sample is computed from the same
 * inputs in the same order. Large chunks are processed in bounded pieces, so memory is bounded
 * by the filter length plus a 4096-frame working window.
 */
import { ValidationError } from '../errors.js';
import { SUPPORTED_RATES, validateRate, type SupportedRate } from './audio-format.js';
import { AudioTransform, EMPTY, PassThroughProcessor, toInt16, type AudioProcessor, type AudioTransformOptions } from './processor.js';

/** Lower edge of the transition band, as a fraction of the lower rate's Nyquist frequency. */
export const PASSBAND_EDGE = 0.8;
/** Start of the stopband, as a fraction of the lower rate's Nyquist frequency. */
export const STOPBAND_EDGE = 1.0;
/** Stopband attenuation the filters are designed for, in dB. */
export const DESIGN_ATTENUATION_DB = 105;

/** Input frames converted per inner pass; bounds the working buffer. */
const PIECE_FRAMES = 4096;

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
   * (j = K-1 .. 0), so it multiplies the K most recent input frames oldest first. Each row is
   * normalised to a DC gain of exactly 1.
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
 * The polyphase filter converting `inputRate` to `outputRate` (cached per pair). Exposed so
 * its response can be inspected; the tables must not be modified.
 */
export function designResampler(inputRate: number, outputRate: number): ResamplerDesign {
  validateRate(inputRate, 'inputRate');
  validateRate(outputRate, 'outputRate');
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
  for (let p = 0; p < up; p++) {
    let sum = 0;
    for (let j = 0; j < taps; j++) sum += proto[p + j * up]!;
    for (let j = 0; j < taps; j++) table[p * taps + (taps - 1 - j)] = proto[p + j * up]! / sum;
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

/** The resampling state for one stream. */
class ResampleProcessor implements AudioProcessor {
  private readonly channels: number;
  private readonly frameBytes: number;
  private readonly up: number;
  private readonly taps: number;
  private readonly table: Float64Array;
  /** Whole input frames to advance per output (`floor(down / up)`), and the phase step. */
  private readonly stepFrames: number;
  private readonly stepPhase: number;
  private readonly ratioUp: number;
  private readonly ratioDown: number;

  /** Partial frame carried between chunks. */
  private readonly carry: Buffer;
  private carried = 0;

  /** Input history, interleaved Float64 frames; frame 0 is the oldest kept. */
  private buf: Float64Array;
  private len = 0;
  /** Index in `buf` of the newest frame the next output needs, and that output's phase. */
  private pos: number;
  private phase: number;

  private inputFrames = 0;
  private outputFrames = 0;
  private ended = false;

  constructor(design: ResamplerDesign, channels: number) {
    this.channels = channels;
    this.frameBytes = 2 * channels;
    this.up = design.up;
    this.taps = design.tapsPerPhase;
    this.table = design.table;
    this.stepFrames = Math.floor(design.down / design.up);
    this.stepPhase = design.down % design.up;
    this.ratioUp = design.up;
    this.ratioDown = design.down;
    this.carry = Buffer.alloc(this.frameBytes);
    // K - 1 frames of silence stand for the time before the stream starts.
    this.len = this.taps - 1;
    this.buf = new Float64Array((this.len + PIECE_FRAMES) * channels);
    this.pos = this.len + Math.floor(design.delay / design.up);
    this.phase = design.delay % design.up;
  }

  process(chunk: Buffer): Buffer {
    if (this.ended) return EMPTY;
    const fb = this.frameBytes;
    const frames = Math.floor((this.carried + chunk.length) / fb);
    if (frames === 0) {
      chunk.copy(this.carry, this.carried);
      this.carried += chunk.length;
      return EMPTY;
    }
    const out = Buffer.allocUnsafe((Math.ceil((frames * this.ratioUp) / this.ratioDown) + 1) * fb);
    let o = 0;
    let i = 0;
    if (this.carried > 0) {
      i = fb - this.carried;
      chunk.copy(this.carry, this.carried, 0, i);
      this.carried = 0;
      o = this.run(this.carry, 0, 1, out, o);
    }
    const whole = Math.floor((chunk.length - i) / fb);
    for (let done = 0; done < whole; done += PIECE_FRAMES) {
      const n = Math.min(PIECE_FRAMES, whole - done);
      o = this.run(chunk, i + done * fb, n, out, o);
    }
    i += whole * fb;
    if (i < chunk.length) {
      chunk.copy(this.carry, 0, i);
      this.carried = chunk.length - i;
    }
    return o === out.length ? out : out.subarray(0, o);
  }

  flush(): Buffer {
    if (this.ended) return EMPTY;
    this.ended = true;
    this.carried = 0; // a partial frame holds no complete sample: dropped
    const expected = Math.ceil((this.inputFrames * this.ratioUp) / this.ratioDown);
    const remaining = expected - this.outputFrames;
    if (remaining <= 0) return EMPTY;
    const out = Buffer.allocUnsafe(remaining * this.frameBytes);
    let o = 0;
    while (this.outputFrames < expected) {
      this.append(null, 0, Math.min(PIECE_FRAMES, this.taps));
      o = this.produce(out, o, expected - this.outputFrames);
      this.compact();
    }
    return out;
  }

  /** Appends `frames` frames from `src` (or silence when `src` is null) and produces output. */
  private run(src: Buffer, offset: number, frames: number, out: Buffer, o: number): number {
    this.append(src, offset, frames);
    this.inputFrames += frames;
    const next = this.produce(out, o, Infinity);
    this.compact();
    return next;
  }

  private append(src: Buffer | null, offset: number, frames: number): void {
    const c = this.channels;
    const need = (this.len + frames) * c;
    if (need > this.buf.length) {
      const grown = new Float64Array(Math.max(need, this.buf.length * 2));
      grown.set(this.buf.subarray(0, this.len * c));
      this.buf = grown;
    }
    const buf = this.buf;
    let w = this.len * c;
    const end = w + frames * c;
    if (src === null) {
      buf.fill(0, w, end);
    } else {
      for (let s = offset; w < end; w++, s += 2) buf[w] = ((src[s]! | (src[s + 1]! << 8)) << 16) >> 16;
    }
    this.len += frames;
  }

  /** Computes outputs while their input is available, at most `limit`; returns the new offset. */
  private produce(out: Buffer, o: number, limit: number): number {
    const { buf, table, taps, channels: c, up, stepFrames, stepPhase } = this;
    const symmetric = up === 1 && taps % 2 === 1;
    const half = (taps - 1) >> 1;
    let { pos, phase } = this;
    const len = this.len;
    let produced = 0;
    while (pos < len && produced < limit) {
      const row = phase * taps;
      const first = (pos - taps + 1) * c;
      if (c === 1 && symmetric) {
        // One symmetric row (integer decimation): fold the mirrored taps, half the multiplies.
        let a0 = 0;
        let a1 = 0;
        let lo = first;
        let hi = first + taps - 1;
        let k = 0;
        for (; k + 1 < half; k += 2, lo += 2, hi -= 2) {
          a0 += (buf[lo]! + buf[hi]!) * table[k]!;
          a1 += (buf[lo + 1]! + buf[hi - 1]!) * table[k + 1]!;
        }
        for (; k < half; k++, lo++, hi--) a0 += (buf[lo]! + buf[hi]!) * table[k]!;
        const v = toInt16(a0 + a1 + buf[lo]! * table[half]!);
        out[o++] = v & 0xff;
        out[o++] = (v >> 8) & 0xff;
      } else if (c === 1) {
        // Four partial sums break the dependency chain of one accumulator; the order of the
        // additions is fixed, so results do not depend on chunking.
        let a0 = 0;
        let a1 = 0;
        let a2 = 0;
        let a3 = 0;
        let k = 0;
        for (; k + 3 < taps; k += 4) {
          a0 += buf[first + k]! * table[row + k]!;
          a1 += buf[first + k + 1]! * table[row + k + 1]!;
          a2 += buf[first + k + 2]! * table[row + k + 2]!;
          a3 += buf[first + k + 3]! * table[row + k + 3]!;
        }
        for (; k < taps; k++) a0 += buf[first + k]! * table[row + k]!;
        const v = toInt16(a0 + a1 + (a2 + a3));
        out[o++] = v & 0xff;
        out[o++] = (v >> 8) & 0xff;
      } else if (c === 2) {
        let l0 = 0;
        let l1 = 0;
        let r0 = 0;
        let r1 = 0;
        let k = 0;
        let s = first;
        for (; k + 1 < taps; k += 2, s += 4) {
          const h0 = table[row + k]!;
          const h1 = table[row + k + 1]!;
          l0 += buf[s]! * h0;
          r0 += buf[s + 1]! * h0;
          l1 += buf[s + 2]! * h1;
          r1 += buf[s + 3]! * h1;
        }
        if (k < taps) {
          const h = table[row + k]!;
          l0 += buf[s]! * h;
          r0 += buf[s + 1]! * h;
        }
        const l = toInt16(l0 + l1);
        const r = toInt16(r0 + r1);
        out[o++] = l & 0xff;
        out[o++] = (l >> 8) & 0xff;
        out[o++] = r & 0xff;
        out[o++] = (r >> 8) & 0xff;
      } else {
        for (let ch = 0; ch < c; ch++) {
          let acc = 0;
          for (let k = 0, s = first + ch; k < taps; k++, s += c) acc += buf[s]! * table[row + k]!;
          const v = toInt16(acc);
          out[o++] = v & 0xff;
          out[o++] = (v >> 8) & 0xff;
        }
      }
      produced++;
      pos += stepFrames;
      phase += stepPhase;
      if (phase >= up) {
        phase -= up;
        pos++;
      }
    }
    this.pos = pos;
    this.phase = phase;
    this.outputFrames += produced;
    return o;
  }

  /** Drops the frames no future output needs. */
  private compact(): void {
    const drop = Math.min(this.pos - this.taps + 1, this.len);
    if (drop <= 0) return;
    const c = this.channels;
    this.buf.copyWithin(0, drop * c, this.len * c);
    this.len -= drop;
    this.pos -= drop;
  }
}

function validateChannelCount(value: unknown): number {
  if (typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= 32) return value;
  throw new ValidationError('channels', 'an integer channel count from 1 to 32', String(value));
}

/** A PCM16 LE resampling processor (a pass-through when the rates are equal). */
export function createResampleProcessor(inputRate: number, outputRate: number, channels = 1): AudioProcessor {
  validateRate(inputRate, 'inputRate');
  validateRate(outputRate, 'outputRate');
  const c = validateChannelCount(channels);
  if (inputRate === outputRate) return new PassThroughProcessor();
  return new ResampleProcessor(designResampler(inputRate, outputRate), c);
}

export interface ResamplerOptions extends AudioTransformOptions {
  /** Input sample rate in Hz, one of `SUPPORTED_RATES`. */
  inputRate: number;
  /** Output sample rate in Hz, one of `SUPPORTED_RATES`. */
  outputRate: number;
  /** Interleaved channels per frame, 1 to 32; default 1. */
  channels?: number;
}

/**
 * Resamples PCM16 LE (see the module comment for the filter, the delay policy and chunking).
 * Throws a `ValidationError` naming the field for a rate outside `SUPPORTED_RATES`
 * ({@link SUPPORTED_RATES}) or a bad channel count.
 */
export class Resampler extends AudioTransform {
  readonly inputRate: SupportedRate;
  readonly outputRate: SupportedRate;
  readonly channels: number;

  constructor(options: ResamplerOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new ValidationError('options', 'an object { inputRate, outputRate, channels? }', String(options));
    }
    const inputRate = validateRate(options.inputRate, 'inputRate');
    const outputRate = validateRate(options.outputRate, 'outputRate');
    const channels = validateChannelCount(options.channels ?? 1);
    super(createResampleProcessor(inputRate, outputRate, channels), options);
    this.inputRate = inputRate;
    this.outputRate = outputRate;
    this.channels = channels;
  }
}

export { SUPPORTED_RATES };
