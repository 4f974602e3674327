/**
 * Conversion chains between any described PCM stream and the service format (PCM16 LE, mono,
 * 24 kHz), built from the format, channel and rate transforms.
 *
 * The chain runs as one Transform: its stages are synchronous processors called in turn on each
 * chunk, so a chain costs one stream hop rather than one per stage (and needs no
 * `stream.compose`). The stage order keeps the work small and the precision high:
 * decode to s16le -> downmix (2 -> 1) -> resample -> upmix (1 -> 2) -> encode. When the rate
 * changes, G.711 decoding and encoding and the channel mix run inside the resampler's own pass
 * (the same bytes, without a buffer per stage).
 */
import { SERVICE_FORMAT, resolveDescription, type AudioDescription, type ResolvedAudioDescription } from './audio-format.js';
import { createChannelProcessor } from './channels.js';
import { createG711DecodeProcessor, createG711EncodeProcessor, type G711Law } from './g711.js';
import { AudioTransform, ChainProcessor, PassThroughProcessor, type AudioProcessor, type AudioTransformOptions } from './processor.js';
import { createResampleProcessor, type ResampleOptions } from './resampler.js';
import { createSampleFormatProcessor } from './sample-format.js';

/** A conversion's processors and a readable name for each stage (for logs and tests). */
export interface ConversionPlan {
  readonly from: ResolvedAudioDescription;
  readonly to: ResolvedAudioDescription;
  /** Stage names in order, e.g. `['decode mulaw', 'resample 8000->24000']`; empty when none. */
  readonly stages: readonly string[];
  readonly processor: AudioProcessor;
}

/**
 * Plans the conversion from one validated description to another. Both must already be
 * resolved (see `resolveDescription`).
 */
export function planConversion(from: ResolvedAudioDescription, to: ResolvedAudioDescription): ConversionPlan {
  const stages: string[] = [];
  const processors: AudioProcessor[] = [];
  const add = (name: string, p: AudioProcessor): void => {
    stages.push(name);
    processors.push(p);
  };
  const g711 = (format: string): format is G711Law => format === 'mulaw' || format === 'alaw';
  const fromChannels = from.channels as 1 | 2;
  const toChannels = to.channels as 1 | 2;

  if (from.rate !== to.rate) {
    // The resampler's own pass also decodes G.711 (1), mixes (2, 4) and encodes G.711 (5):
    // one pass and one buffer instead of one per stage, the same bytes.
    const options: ResampleOptions = {};
    const names: string[] = [];
    if (g711(from.format)) {
      options.decode = from.format;
      names.push(`decode ${from.format}`);
    } else if (from.format !== 's16le') {
      add(`format ${from.format}->s16le`, createSampleFormatProcessor(from.format, 's16le'));
    }
    if (fromChannels > toChannels) {
      options.mix = 'down';
      names.push(`downmix ${fromChannels}->${toChannels}`);
    }
    names.push(`resample ${from.rate}->${to.rate}`);
    if (fromChannels < toChannels) {
      options.mix = 'up';
      names.push(`upmix ${fromChannels}->${toChannels}`);
    }
    if (g711(to.format)) {
      options.encode = to.format;
      names.push(`encode ${to.format}`);
    }
    stages.push(...names);
    processors.push(createResampleProcessor(from.rate, to.rate, fromChannels, options));
    if (!g711(to.format) && to.format !== 's16le') add(`format s16le->${to.format}`, createSampleFormatProcessor('s16le', to.format));
  } else {
    // 1. To s16le, the format the mixer works in.
    if (g711(from.format)) add(`decode ${from.format}`, createG711DecodeProcessor(from.format));
    else if (from.format !== 's16le') add(`format ${from.format}->s16le`, createSampleFormatProcessor(from.format, 's16le'));
    // 2. Channels.
    if (fromChannels !== toChannels)
      add(`${fromChannels > toChannels ? 'down' : 'up'}mix ${fromChannels}->${toChannels}`, createChannelProcessor(fromChannels, toChannels));
    // 3. To the target format.
    if (g711(to.format)) add(`encode ${to.format}`, createG711EncodeProcessor(to.format));
    else if (to.format !== 's16le') add(`format s16le->${to.format}`, createSampleFormatProcessor('s16le', to.format));
  }

  const processor = processors.length === 0 ? new PassThroughProcessor() : processors.length === 1 ? processors[0]! : new ChainProcessor(processors);
  return { from, to, stages, processor };
}

/** A Transform converting one described stream into another. */
export class AudioConverter extends AudioTransform {
  readonly from: ResolvedAudioDescription;
  readonly to: ResolvedAudioDescription;
  /** The stages this converter runs, in order (empty: bytes pass through unchanged). */
  readonly stages: readonly string[];

  constructor(plan: ConversionPlan, options: AudioTransformOptions = {}) {
    super(plan.processor, options);
    this.from = plan.from;
    this.to = plan.to;
    this.stages = plan.stages;
  }
}

/**
 * A Transform converting a stream described by `from` into one described by `to`. Formats:
 * `s16le` (default), `s16be`, `f32le`, `mulaw`, `alaw`; rates: `SUPPORTED_RATES`; channels: 1
 * or 2. Throws a `ValidationError` naming the field (`from.rate`, `to.format`, ...) and the
 * accepted values. Any chunking in; output as described by each stage's module.
 */
export function createConverter(from: AudioDescription, to: AudioDescription, options: AudioTransformOptions = {}): AudioConverter {
  return new AudioConverter(planConversion(resolveDescription(from, 'from'), resolveDescription(to, 'to')), options);
}

/**
 * A Transform from the described stream to the service format (s16le, 24000 Hz, mono), e.g.
 * `toServiceFormat({ rate: 48000, channels: 2 })` for Discord PCM or
 * `toServiceFormat({ format: 'mulaw', rate: 8000, channels: 1 })` for a phone call. Errors name
 * the field without prefix (`rate`, `channels`, `format`).
 */
export function toServiceFormat(desc: AudioDescription, options: AudioTransformOptions = {}): AudioConverter {
  return new AudioConverter(planConversion(resolveDescription(desc, ''), { ...SERVICE_FORMAT }), options);
}

/** A Transform from the service format (s16le, 24000 Hz, mono) to the described stream. */
export function fromServiceFormat(desc: AudioDescription, options: AudioTransformOptions = {}): AudioConverter {
  return new AudioConverter(planConversion({ ...SERVICE_FORMAT }, resolveDescription(desc, '')), options);
}
