/**
 * Channel mixing for PCM16 LE between mono and stereo.
 *
 * - 2 -> 1: the average `(L + R) / 2`, rounded to nearest with halves to even (no bias over a
 *   long signal). The average of two int16 values always fits in int16, so nothing clips.
 * - 1 -> 2: the sample is duplicated into both channels (no gain change).
 * - N -> N: pass-through.
 */
import { validateChannels } from './audio-format.js';
import { AudioTransform, FrameProcessor, PassThroughProcessor, type AudioProcessor, type AudioTransformOptions } from './processor.js';

/** Average of two int16 samples, rounded to nearest, halves to even. */
export function averageInt16(a: number, b: number): number {
  const sum = a + b;
  const half = sum >> 1; // floor
  // An odd sum lies halfway between `half` and `half + 1`: pick the even one.
  return (sum & 1) !== 0 && (half & 1) !== 0 ? half + 1 : half;
}

class DownmixProcessor extends FrameProcessor {
  constructor() {
    super(4, 2);
  }
  protected convert(src: Buffer, srcOffset: number, frames: number, dst: Buffer, dstOffset: number): void {
    let s = srcOffset;
    let d = dstOffset;
    for (let f = 0; f < frames; f++, s += 4, d += 2) {
      const l = ((src[s]! | (src[s + 1]! << 8)) << 16) >> 16;
      const r = ((src[s + 2]! | (src[s + 3]! << 8)) << 16) >> 16;
      const v = averageInt16(l, r);
      dst[d] = v & 0xff;
      dst[d + 1] = (v >> 8) & 0xff;
    }
  }
}

class UpmixProcessor extends FrameProcessor {
  constructor() {
    super(2, 4);
  }
  protected convert(src: Buffer, srcOffset: number, frames: number, dst: Buffer, dstOffset: number): void {
    let s = srcOffset;
    let d = dstOffset;
    for (let f = 0; f < frames; f++, s += 2, d += 4) {
      const lo = src[s]!;
      const hi = src[s + 1]!;
      dst[d] = lo;
      dst[d + 1] = hi;
      dst[d + 2] = lo;
      dst[d + 3] = hi;
    }
  }
}

/** The PCM16 LE processor mixing `from` channels to `to` channels (1 or 2 each). */
export function createChannelProcessor(from: 1 | 2, to: 1 | 2): AudioProcessor {
  if (from === to) return new PassThroughProcessor();
  return from === 2 ? new DownmixProcessor() : new UpmixProcessor();
}

export interface ChannelMixOptions extends AudioTransformOptions {
  /** Input channels, 1 or 2. */
  from: number;
  /** Output channels, 1 or 2. */
  to: number;
}

/**
 * Mixes PCM16 LE between mono and stereo (see the module comment for the rules). Any chunking
 * in; a frame cut between chunks is carried over; a partial frame left at the end is dropped.
 */
export class ChannelMixTransform extends AudioTransform {
  readonly from: 1 | 2;
  readonly to: 1 | 2;

  constructor(options: ChannelMixOptions) {
    const from = validateChannels(options?.from, 'from');
    const to = validateChannels(options.to, 'to');
    super(createChannelProcessor(from, to), options);
    this.from = from;
    this.to = to;
  }
}
