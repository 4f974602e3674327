/**
 * Sample format conversion among `s16le`, `s16be` and `f32le`.
 *
 * Scaling is symmetric, one factor both ways: int16 `v` becomes float `v / 32768`, float `x`
 * becomes int16 `round(x * 32768)` clipped to [-32768, 32767]. So every int16 survives the trip
 * to float and back unchanged, -1.0 maps to -32768, +1.0 clips to 32767, anything beyond
 * [-1, 1] clips, and NaN becomes 0. Rounding is to nearest, halves away from zero.
 */
import type { SampleFormat } from './audio-format.js';
import { validateSampleFormat } from './audio-format.js';
import { AudioTransform, FrameProcessor, PassThroughProcessor, toInt16, type AudioProcessor, type AudioTransformOptions } from './processor.js';

/** The PCM formats this module converts between. */
export type PcmSampleFormat = Extract<SampleFormat, 's16le' | 's16be' | 'f32le'>;

export const PCM_SAMPLE_FORMATS: readonly PcmSampleFormat[] = ['s16le', 's16be', 'f32le'];

/** int16 to float in [-1, 1): `v / 32768`. */
export function int16ToFloat(v: number): number {
  return v / 32768;
}

/** Float to int16: `round(x * 32768)`, clipped to [-32768, 32767]; NaN gives 0. */
export function floatToInt16(x: number): number {
  return toInt16(x * 32768);
}

const PCM_BYTES: Record<PcmSampleFormat, number> = { s16le: 2, s16be: 2, f32le: 4 };

class SampleFormatProcessor extends FrameProcessor {
  readonly #from: PcmSampleFormat;
  readonly #to: PcmSampleFormat;

  constructor(from: PcmSampleFormat, to: PcmSampleFormat) {
    super(PCM_BYTES[from], PCM_BYTES[to]);
    this.#from = from;
    this.#to = to;
  }

  protected convert(src: Buffer, srcOffset: number, frames: number, dst: Buffer, dstOffset: number): void {
    const from = this.#from;
    const to = this.#to;
    let s = srcOffset;
    let d = dstOffset;
    const end = srcOffset + frames * this.inFrameBytes;
    if (from !== 'f32le' && to !== 'f32le') {
      // s16le <-> s16be: swap the two bytes of each sample.
      for (; s < end; s += 2, d += 2) {
        dst[d] = src[s + 1]!;
        dst[d + 1] = src[s]!;
      }
    } else if (to === 'f32le') {
      const little = from === 's16le';
      for (; s < end; s += 2, d += 4) {
        dst.writeFloatLE((little ? src.readInt16LE(s) : src.readInt16BE(s)) / 32768, d);
      }
    } else {
      const little = to === 's16le';
      for (; s < end; s += 4, d += 2) {
        const v = toInt16(src.readFloatLE(s) * 32768);
        if (little) dst.writeInt16LE(v, d);
        else dst.writeInt16BE(v, d);
      }
    }
  }
}

/** The processor converting `from` to `to` (a pass-through when they are equal). */
export function createSampleFormatProcessor(from: PcmSampleFormat, to: PcmSampleFormat): AudioProcessor {
  return from === to ? new PassThroughProcessor() : new SampleFormatProcessor(from, to);
}

export interface SampleFormatOptions extends AudioTransformOptions {
  /** Input encoding: `s16le`, `s16be` or `f32le`. */
  from: PcmSampleFormat;
  /** Output encoding: `s16le`, `s16be` or `f32le`. */
  to: PcmSampleFormat;
}

/**
 * Converts a stream of samples between `s16le`, `s16be` and `f32le` (see the module comment for
 * scaling and clipping). Any chunking in; a sample cut between chunks is carried over; a partial
 * sample left at the end is dropped. Channel layout is untouched.
 */
export class SampleFormatTransform extends AudioTransform {
  readonly from: PcmSampleFormat;
  readonly to: PcmSampleFormat;

  constructor(options: SampleFormatOptions) {
    const from = validateSampleFormat(options?.from, 'from', PCM_SAMPLE_FORMATS) as PcmSampleFormat;
    const to = validateSampleFormat(options.to, 'to', PCM_SAMPLE_FORMATS) as PcmSampleFormat;
    super(createSampleFormatProcessor(from, to), options);
    this.from = from;
    this.to = to;
  }
}
