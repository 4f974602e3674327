/**
 * Sample rate conversion for PCM16 LE, any channel count, between the rates in
 * `SUPPORTED_RATES` in either direction.
 *
 * Design: the ratio is reduced to `up / down` (L / M) by the gcd; one Kaiser-windowed sinc
 * low-pass at `L * inputRate` is split into L polyphase rows of K taps each, precomputed once
 * per rate pair and shared (read-only) by every resampler of that pair. The taps are integers
 * scaled by 2^-22 (each row sums to exactly 1), so each output sample, a K-tap dot product
 * over the input history, is computed exactly, then rounded to the nearest int16 (halves away
 * from zero) and clipped to [-32768, 32767], so overshoot saturates. The dot products run in a
 * WebAssembly SIMD kernel (`wasm/resample.c`) where the engine has one, else in JavaScript:
 * both compute the same exact sums, so the bytes out do not depend on which one ran.
 *
 * Response (the lower of the two rates sets the band, `nyquist = min(in, out) / 2`): passband
 * flat to within 0.001 dB up to 0.8 x nyquist; stopband from nyquist up, attenuated by at least
 * 100 dB (designed for 105 dB), so tones above the output Nyquist frequency do not alias and
 * upsampling leaves no images; in between, the transition band (-6 dB at 0.9 x nyquist).
 *
 * Delay policy: the filter's delay is compensated. Output sample `n` is the input signal at
 * time `n / outputRate`, so output and input are time-aligned and `inputFrames` in give
 * `ceil(inputFrames * out / in)` frames out. The resampler holds back about K/2 input frames
 * (at most ~4 ms of audio) until more input arrives; `flush` emits that tail, with silence
 * assumed after the end.
 *
 * Chunking: input may be cut anywhere (a sample frame cut in two is carried over); the output
 * bytes are identical for any chunking, because every output sample is the same exact sum.
 * Large chunks are processed in pieces of 4096 frames, so memory is bounded.
 */
import { UnsupportedError, ValidationError } from '../errors.js';
import { SUPPORTED_RATES, validateRate, type SupportedRate } from './audio-format.js';
import { AudioTransform, PassThroughProcessor, type AudioProcessor, type AudioTransformOptions } from './processor.js';
import { designPolyphase, type ResamplerDesign } from './resampler-design.js';
import { firKernel } from './wasm/fir.js';
import { describeReceived, intOption } from '../options.js';
import { KernelResampleProcessor, ScriptResampleProcessor, tablesFor, type ResampleOptions } from './resample-processors.js';

export type { ResampleKernel, ResampleOptions } from './resample-processors.js';

/**
 * The polyphase filter converting `inputRate` to `outputRate`, two of `SUPPORTED_RATES`
 * (cached per pair). Exposed so its response can be inspected; the tables must not be modified.
 */
export function designResampler(inputRate: number, outputRate: number): ResamplerDesign {
  return designPolyphase(validateRate(inputRate, 'inputRate'), validateRate(outputRate, 'outputRate'));
}

function validateChannelCount(value: unknown): number {
  return intOption(value, 'channels', { min: 1, max: 32, accepted: 'an integer channel count from 1 to 32' });
}

/**
 * A PCM16 LE resampling processor (a pass-through when the rates are equal and nothing is
 * folded in). `options.kernel` picks the implementation (both give the same bytes); `'wasm'`
 * throws where it cannot run. `options.mix`, `decode` and `encode` fold those stages into the
 * same pass (see `ResampleOptions`); `channels` is then the input's (2 for `mix: 'down'`, 1 for
 * `'up'`).
 */
export function createResampleProcessor(inputRate: number, outputRate: number, channels = 1, options: ResampleOptions = {}): AudioProcessor {
  validateRate(inputRate, 'inputRate');
  validateRate(outputRate, 'outputRate');
  const c = validateChannelCount(channels);
  const { kernel = 'auto', mix = 'none', decode, encode } = options;
  if (mix !== 'none' && c !== (mix === 'down' ? 2 : 1)) {
    throw new ValidationError('channels', mix === 'down' ? '2 to mix down' : '1 to mix up', describeReceived(channels));
  }
  if (inputRate === outputRate) {
    if (mix !== 'none' || decode || encode)
      throw new ValidationError('outputRate', 'a rate other than the input rate when stages are folded in', describeReceived(outputRate));
    return new PassThroughProcessor();
  }
  const design = designResampler(inputRate, outputRate);
  const wasm = kernel === 'js' ? undefined : firKernel();
  const tables = wasm && tablesFor(wasm, design);
  if (wasm && tables) return new KernelResampleProcessor(design, c, options, wasm, tables);
  if (kernel === 'wasm') throw new UnsupportedError('The WebAssembly resampling kernel cannot run in this engine.');
  return new ScriptResampleProcessor(design, c, options);
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
      throw new ValidationError('options', 'an object { inputRate, outputRate, channels? }', describeReceived(options));
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
export { PASSBAND_EDGE, STOPBAND_EDGE, DESIGN_ATTENUATION_DB, type ResamplerDesign } from './resampler-design.js';
