/**
 * ITU-T G.711 mu-law and A-law, on 16-bit linear samples.
 *
 * G.711 defines both laws on a uniform sign-magnitude scale (14 bits for mu-law, 13 for A-law)
 * by 8 segments of 16 equal steps each, the step doubling from one segment to the next. Here the
 * decision and reconstruction values of the standard are scaled to the int16 grid (x4 for
 * mu-law, x8 for A-law): each code decodes to the midpoint of its interval, so encoding then
 * decoding an int16 `x` is off by at most half a step:
 *
 * - mu-law: segment `s` (0..7) has steps of `2^(s+3)`; error <= `2^(s+2)` (4 near zero, 512 in
 *   the top segment) for |x| <= 32635; beyond that the coder overloads and the decoded value is
 *   the largest one, ±32124.
 * - A-law: segments 0 and 1 have steps of 16, segment `s >= 2` steps of `2^(s+3)`; error <= 8
 *   near zero and <= 512 everywhere (largest decoded value ±32256).
 *
 * Code words are those on the line: mu-law inverts all bits of (sign, segment, step) with the
 * sign bit set for positive values, so 0xFF is +0 and 0x80 is +32124; A-law sets the sign bit
 * for positive values and inverts the even bits (XOR 0x55), so 0xD5 is +8. Signs are symmetric:
 * `encode(-x)` differs from `encode(x)` only in the sign bit.
 */
import { ValidationError } from '../errors.js';
import { describeReceived } from '../options.js';
import { AudioTransform, FrameProcessor, type AudioProcessor, type AudioTransformOptions } from './processor.js';

/** Which G.711 law. */
export type G711Law = 'mulaw' | 'alaw';

// mu-law: the magnitude plus a bias of 33 (x4 on the int16 grid) puts segment s in
// [2^(s+7), 2^(s+8)), so the segment is found from the top bit and the step from the next 4.
const MULAW_BIAS = 132;
/** Largest magnitude the mu-law coder represents without overload (8159 x 4, minus rounding). */
const MULAW_CLIP = 32635;

/** Encodes one int16 sample (rounded, clipped to the coder's range; NaN as 0) as a mu-law code word. */
export function encodeMulaw(sample: number): number {
  let x = Math.round(sample) || 0; // NaN counts as 0
  const sign = x < 0 ? 0x00 : 0x80;
  if (x < 0) x = -x;
  if (x > MULAW_CLIP) x = MULAW_CLIP;
  const v = x + MULAW_BIAS; // 132 .. 32767
  const segment = 31 - Math.clz32(v) - 7; // 0 .. 7
  const step = (v >> (segment + 3)) & 0x0f;
  return sign | (~((segment << 4) | step) & 0x7f);
}

function decodeMulawValue(code: number): number {
  const bits = ~code & 0x7f;
  const segment = bits >> 4;
  const step = bits & 0x0f;
  const magnitude = (((step << 3) + MULAW_BIAS) << segment) - MULAW_BIAS;
  return code & 0x80 ? magnitude : -magnitude;
}

/** Encodes one int16 sample (rounded, clipped to the int16 range; NaN as 0) as an A-law code word. */
export function encodeAlaw(sample: number): number {
  let x = Math.round(sample) || 0; // NaN counts as 0
  const sign = x < 0 ? 0x00 : 0x80;
  if (x < 0) x = -x;
  if (x > 32767) x = 32767;
  let segment: number;
  let step: number;
  if (x < 256) {
    segment = 0;
    step = x >> 4;
  } else {
    segment = 31 - Math.clz32(x) - 7; // 1 .. 7: x in [2^(s+7), 2^(s+8))
    step = (x >> (segment + 3)) & 0x0f;
  }
  return (sign | (segment << 4) | step) ^ 0x55;
}

function decodeAlawValue(code: number): number {
  const bits = code ^ 0x55;
  const segment = (bits >> 4) & 0x07;
  const step = bits & 0x0f;
  const magnitude = segment === 0 ? (step << 4) + 8 : ((step << 4) + 264) << (segment - 1);
  return bits & 0x80 ? magnitude : -magnitude;
}

function table(decode: (code: number) => number): Int16Array {
  const t = new Int16Array(256);
  for (let c = 0; c < 256; c++) t[c] = decode(c);
  return t;
}

/** int16 value of every mu-law code word, indexed by code. */
export const MULAW_DECODE_TABLE: Readonly<Int16Array> = table(decodeMulawValue);
/** int16 value of every A-law code word, indexed by code. */
export const ALAW_DECODE_TABLE: Readonly<Int16Array> = table(decodeAlawValue);

/** Decodes one mu-law code word (0..255) to int16. */
export function decodeMulaw(code: number): number {
  return MULAW_DECODE_TABLE[code & 0xff]!;
}

/** Decodes one A-law code word (0..255) to int16. */
export function decodeAlaw(code: number): number {
  return ALAW_DECODE_TABLE[code & 0xff]!;
}

class G711DecodeProcessor extends FrameProcessor {
  readonly #table: Readonly<Int16Array>;
  constructor(law: G711Law) {
    super(1, 2);
    this.#table = law === 'mulaw' ? MULAW_DECODE_TABLE : ALAW_DECODE_TABLE;
  }
  protected convert(src: Buffer, srcOffset: number, frames: number, dst: Buffer, dstOffset: number): void {
    const t = this.#table;
    let d = dstOffset;
    for (let s = srcOffset, end = srcOffset + frames; s < end; s++, d += 2) {
      const v = t[src[s]!]!;
      dst[d] = v & 0xff;
      dst[d + 1] = (v >> 8) & 0xff;
    }
  }
}

class G711EncodeProcessor extends FrameProcessor {
  readonly #encode: (sample: number) => number;
  constructor(law: G711Law) {
    super(2, 1);
    this.#encode = law === 'mulaw' ? encodeMulaw : encodeAlaw;
  }
  protected convert(src: Buffer, srcOffset: number, frames: number, dst: Buffer, dstOffset: number): void {
    const encode = this.#encode;
    let s = srcOffset;
    for (let d = dstOffset, end = dstOffset + frames; d < end; d++, s += 2) {
      dst[d] = encode(((src[s]! | (src[s + 1]! << 8)) << 16) >> 16);
    }
  }
}

/** Processor decoding G.711 bytes to PCM16 LE. */
export function createG711DecodeProcessor(law: G711Law): AudioProcessor {
  return new G711DecodeProcessor(law);
}

/** Processor encoding PCM16 LE to G.711 bytes. */
export function createG711EncodeProcessor(law: G711Law): AudioProcessor {
  return new G711EncodeProcessor(law);
}

function checkLaw(law: unknown): G711Law {
  if (law === 'mulaw' || law === 'alaw') return law;
  throw new ValidationError('law', 'one of mulaw, alaw', describeReceived(law));
}

export interface G711Options extends AudioTransformOptions {
  /** `mulaw` or `alaw`. */
  law: G711Law;
}

/** Decodes a stream of G.711 code words (one byte per sample) to PCM16 LE. */
export class G711Decoder extends AudioTransform {
  readonly law: G711Law;
  constructor(options: G711Options) {
    const law = checkLaw(options?.law);
    super(createG711DecodeProcessor(law), options);
    this.law = law;
  }
}

/**
 * Encodes PCM16 LE to G.711 code words (one byte per sample). A sample cut between chunks is
 * carried over; a lone byte left at the end is dropped.
 */
export class G711Encoder extends AudioTransform {
  readonly law: G711Law;
  constructor(options: G711Options) {
    const law = checkLaw(options?.law);
    super(createG711EncodeProcessor(law), options);
    this.law = law;
  }
}
