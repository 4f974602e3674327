/**
 * Audio descriptions shared by the conversion transforms: sample formats, the rates the
 * resampler handles, and validation that names the field and what it accepts.
 */
import { ValidationError } from '../errors.js';
import { describeReceived } from '../options.js';

/**
 * Sample encodings the transforms read and write.
 * - `s16le` / `s16be`: signed 16-bit integers, little / big endian (the library's stream format
 *   is `s16le`).
 * - `f32le`: 32-bit IEEE float, little endian, nominal range [-1, 1].
 * - `mulaw` / `alaw`: 8-bit ITU-T G.711 codes.
 */
export type SampleFormat = 's16le' | 's16be' | 'f32le' | 'mulaw' | 'alaw';

export const SAMPLE_FORMATS: readonly SampleFormat[] = ['s16le', 's16be', 'f32le', 'mulaw', 'alaw'];

/** Sample rates (Hz) the resampler converts between, in any direction. */
export const SUPPORTED_RATES = [8000, 16000, 22050, 24000, 44100, 48000] as const;

export type SupportedRate = (typeof SUPPORTED_RATES)[number];

/** Channel counts the channel mixer handles. */
export const SUPPORTED_CHANNELS = [1, 2] as const;

/** A PCM stream's layout. Samples of all channels are interleaved frame by frame. */
export interface AudioDescription {
  /** Sample encoding; default `s16le`. */
  format?: SampleFormat;
  /** Frames per second (Hz), one of {@link SUPPORTED_RATES}. */
  rate: number;
  /** Channels per frame: 1 or 2. */
  channels: number;
}

/** A description with every field present. */
export type ResolvedAudioDescription = Required<AudioDescription>;

/** What the realtime service speaks both ways: PCM16 LE, mono, 24 kHz. */
export const SERVICE_FORMAT: Readonly<ResolvedAudioDescription> = Object.freeze({
  format: 's16le',
  rate: 24000,
  channels: 1,
});

/** Bytes one sample of `format` occupies. */
export function bytesPerSample(format: SampleFormat): number {
  switch (format) {
    case 's16le':
    case 's16be':
      return 2;
    case 'f32le':
      return 4;
    case 'mulaw':
    case 'alaw':
      return 1;
  }
}

/** The byte pattern of digital silence in `format` (G.711 has no zero code). */
export function silenceByte(format: SampleFormat): number {
  if (format === 'mulaw') return 0xff;
  if (format === 'alaw') return 0xd5;
  return 0;
}

/** Throws a `ValidationError` for `field` unless `value` is one of `SAMPLE_FORMATS`. */
export function validateSampleFormat(value: unknown, field: string, accepted: readonly SampleFormat[] = SAMPLE_FORMATS): SampleFormat {
  if (typeof value === 'string' && (accepted as readonly string[]).includes(value)) return value as SampleFormat;
  throw new ValidationError(field, `one of ${accepted.join(', ')}`, describeReceived(value));
}

/** Throws a `ValidationError` for `field` unless `value` is one of `SUPPORTED_RATES`. */
export function validateRate(value: unknown, field: string): SupportedRate {
  if (typeof value === 'number' && (SUPPORTED_RATES as readonly number[]).includes(value)) return value as SupportedRate;
  throw new ValidationError(field, `a sample rate in Hz, one of ${SUPPORTED_RATES.join(', ')}`, describeReceived(value));
}

/** Throws a `ValidationError` for `field` unless `value` is 1 or 2. */
export function validateChannels(value: unknown, field: string): 1 | 2 {
  if (value === 1 || value === 2) return value;
  throw new ValidationError(field, 'a channel count of 1 or 2', describeReceived(value));
}

/**
 * Checks a description and fills in the default format. `field` prefixes the field names in
 * errors (`from` gives `from.rate`). The input object is not modified.
 */
export function resolveDescription(desc: unknown, field: string): ResolvedAudioDescription {
  if (typeof desc !== 'object' || desc === null) {
    throw new ValidationError(field === '' ? 'description' : field, 'an object { format?, rate, channels }', describeReceived(desc));
  }
  const d = desc as Record<string, unknown>;
  const prefix = field === '' ? '' : `${field}.`;
  return {
    format: d.format === undefined ? 's16le' : validateSampleFormat(d.format, `${prefix}format`),
    rate: validateRate(d.rate, `${prefix}rate`),
    channels: validateChannels(d.channels, `${prefix}channels`),
  };
}
