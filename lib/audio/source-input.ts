/**
 * What `openAudioSource` (`./source.ts`) knows before any audio flows: the input opened (a file
 * or a stream, its first bytes peeked and put back), its kind recognised from the description or
 * its header, raw input checked (`rawWhen`: no audio, not audio), the description checked, and a
 * failure of the input or its decoding described in the user's words. Everything here rejects
 * before the audio is read; `./source.ts` builds the decoding chain on what it finds.
 */
import { createReadStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { resolve } from 'node:path';
import { Readable } from 'node:stream';
import { AudioInputError, RtTranslateError, UnsupportedError, ValidationError } from '../errors.js';
import { SAMPLE_FORMATS, SERVICE_FORMAT, bytesPerSample, validateChannels, validateRate, type SampleFormat } from './audio-format.js';
import { SNIFF_BYTES, isSniffResult, sniffAudio } from './sniff.js';
import { OTHER_SNIFF_BYTES, PCM16_JUDGED_BYTES, judgePcm16, sniffOther } from './headerless.js';
import { describeReceived } from '../options.js';

export const SOURCE_CONTAINERS = ['wav', 'ogg', 'flac'] as const;
export type SourceContainer = (typeof SOURCE_CONTAINERS)[number];
/** What `AudioSourceDescription.format` accepts. */
export type SourceFormat = SampleFormat | SourceContainer;
export const SOURCE_FORMATS: readonly SourceFormat[] = [...SAMPLE_FORMATS, ...SOURCE_CONTAINERS];

/** What the caller knows about the input; every field is optional. */
export interface AudioSourceDescription {
  /**
   * Forces the format (no header is looked for): a raw sample format, or a container the
   * library reads. Default: recognised by the first bytes; unrecognised bytes are raw s16le.
   */
  format?: SourceFormat;
  /** Rate of raw input, Hz: default 24000, or 8000 for `mulaw`/`alaw`. Raw input only. */
  rate?: number;
  /** Channels of raw input: 1 (default) or 2. Raw input only. */
  channels?: number;
}

/** Which input with no audio header is read as raw PCM (see `AudioSourceOptions.rawWhen`). */
export type RawWhen = 'anything' | 'not-other' | 'plausible';

/** What decodes an input. */
export type InputKind = { kind: 'raw'; format: SampleFormat } | { kind: SourceContainer } | { kind: 'foreign'; name: string };

const KIND_NAMES: Record<SourceContainer, string> = { wav: 'WAV', ogg: 'Ogg/Opus', flac: 'FLAC' };

export function kindName(kind: InputKind): string {
  return kind.kind === 'raw' ? `raw ${kind.format}` : kind.kind === 'foreign' ? kind.name : KIND_NAMES[kind.kind];
}

export const HOW_TO_CONVERT = 'convert it to raw PCM first, e.g. ffmpeg -i IN -f s16le -ar 24000 -ac 1 OUT.pcm';

/** How to have input read as raw PCM whatever its bytes, in the words of `names`. */
export function insistOnRaw(names: FieldNames): string {
  return `If it is raw PCM after all, say so with ${names.format} s16le (or ${SAMPLE_FORMATS.filter((f) => f !== 's16le').join(', ')}).`;
}

/** Bytes of one sample frame of raw input. */
function frameBytes(format: SampleFormat, channels: number | undefined): number {
  return bytesPerSample(format) * (channels ?? SERVICE_FORMAT.channels);
}

/** Describes a failure of the chain: reading the input (`read`) or decoding it. */
export function describeFailure(error: unknown, label: string, kind: InputKind, read: boolean, bytesBefore: number): AudioInputError {
  const message = (error instanceof Error ? error.message : String(error)).replace(/\.$/, '');
  const cause = { cause: error, label, bytesBefore };
  if (read) {
    const code = (error as NodeJS.ErrnoException | undefined)?.code;
    return new AudioInputError('read', `Cannot read ${label}: ${typeof code === 'string' ? `${code} (${message})` : message}.`, cause);
  }
  let hint = '';
  if (kind.kind === 'foreign') hint = ' (ffmpeg reads some files, e.g. an MP4 whose index is at its end, only from a file: give its path)';
  else if (error instanceof UnsupportedError) hint = ` (${HOW_TO_CONVERT})`;
  return new AudioInputError('decode', `Cannot decode ${label} as ${kindName(kind)}: ${message}${hint}.`, cause);
}

/* ----------------------------------------------------------------------------------------- */
/* Opening                                                                                   */

/**
 * Reads up to `n` bytes from the start of `stream` without losing them. Resolves with those
 * bytes and the stream to read everything from, those bytes included: `stream` itself with the
 * bytes put back (`unshift`) while it has not ended, or, when the whole input was shorter than
 * `n` and `stream` has ended (an ended stream takes nothing back), a new stream of those bytes.
 */
export async function peekStart(stream: Readable, n: number): Promise<{ head: Buffer; stream: Readable }> {
  const chunks: Buffer[] = [];
  let length = 0;
  while (length < n) {
    const chunk = stream.read() as Buffer | null;
    if (chunk !== null) {
      chunks.push(chunk);
      length += chunk.length;
      continue;
    }
    if (stream.readableEnded) break;
    if (stream.destroyed) {
      if (stream.errored) throw stream.errored;
      break;
    }
    const more = await new Promise<boolean>((resolve, reject) => {
      const done = (value: boolean, error?: Error) => {
        stream.off('readable', onReadable);
        stream.off('end', onEnd);
        stream.off('error', onError);
        stream.off('close', onClose);
        if (error) reject(error);
        else resolve(value);
      };
      const onReadable = () => done(true);
      const onEnd = () => done(false);
      const onError = (error: Error) => done(false, error);
      const onClose = () => done(false, stream.errored ?? undefined);
      stream.on('readable', onReadable);
      stream.on('end', onEnd);
      stream.on('error', onError);
      stream.on('close', onClose);
    });
    if (!more) break;
  }
  const head = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
  if (stream.readableEnded || stream.destroyed) return { head: head.subarray(0, n), stream: Readable.from([head], { objectMode: false }) };
  if (head.length > 0) stream.unshift(head);
  return { head: head.subarray(0, n), stream };
}

export interface Input {
  stream: Readable;
  label: string;
  /** The absolute path, for a regular file (ffmpeg opens it itself, and can seek). */
  path?: string;
}

export async function openInput(input: string | Readable, label: string | undefined): Promise<Input> {
  if (typeof input !== 'string') {
    if (!(input instanceof Readable) && typeof (input as { pipe?: unknown } | null)?.pipe !== 'function') {
      throw new ValidationError('input', 'a file path or a Readable of audio bytes', typeof input);
    }
    return { stream: input, label: label ?? 'the input stream' };
  }
  if (input === '') throw new ValidationError('input', 'a file path or a Readable of audio bytes', '""');
  const name = label ?? input;
  const path = resolve(input);
  let handle;
  try {
    handle = await open(path, 'r');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new AudioInputError('open', `Cannot read ${name}: ${code ?? (error as Error).message}.`, { cause: error, label: name });
  }
  const info = await handle.stat();
  if (info.isDirectory()) {
    await handle.close();
    throw new AudioInputError('open', `Cannot read ${name}: it is a directory.`, { label: name });
  }
  return { stream: createReadStream(path, { fd: handle }), label: name, ...(info.isFile() ? { path } : {}) };
}

export interface FieldNames {
  format: string;
  rate: string;
  channels: string;
}

/** The input's kind from the description or, without a format, from its first bytes. */
export async function identify(input: Input, desc: AudioSourceDescription, names: FieldNames, rawWhen: RawWhen): Promise<InputKind> {
  try {
    const kind = await sniffKind(input, desc, names);
    if (kind.kind === 'raw') await checkRaw(input, kind.format, desc, names, desc.format === undefined ? rawWhen : 'anything');
    return kind;
  } catch (error) {
    if (error instanceof RtTranslateError) throw error;
    throw describeFailure(error, input.label, { kind: 'raw', format: 's16le' }, true, 0);
  }
}

export const RAW_WHEN: readonly RawWhen[] = ['anything', 'not-other', 'plausible'];

/**
 * Checks input about to be read as raw `format`: input shorter than one sample frame holds no
 * audio; with `rawWhen` other than `anything`, input that is evidently not raw PCM is refused.
 */
async function checkRaw(input: Input, format: SampleFormat, desc: AudioSourceDescription, names: FieldNames, rawWhen: RawWhen): Promise<void> {
  const want = rawWhen === 'plausible' ? PCM16_JUDGED_BYTES : rawWhen === 'not-other' ? OTHER_SNIFF_BYTES : frameBytes(format, desc.channels);
  let head: Buffer;
  ({ head, stream: input.stream } = await peekStart(input.stream, want));
  const complete = head.length < want;
  const frame = frameBytes(format, desc.channels);
  if (complete && head.length < frame) {
    const size = head.length === 0 ? 'nothing' : `${head.length} ${head.length === 1 ? 'byte' : 'bytes'}, less than one sample frame`;
    const layout = `${frame} bytes of ${format} ${(desc.channels ?? SERVICE_FORMAT.channels) === 2 ? 'stereo' : 'mono'}`;
    throw new AudioInputError('empty', `No audio in ${input.label}: it holds ${size}${head.length === 0 ? '' : ` (${layout})`}.`, { label: input.label });
  }
  if (rawWhen === 'anything') return;
  const headerless = 'it has no audio header (WAV, Ogg/Opus, FLAC, MP3, MP4, WebM, ...)';
  const other = sniffOther(head, complete);
  if (other !== undefined) {
    throw new AudioInputError('not-audio', `${input.label} looks like ${other}, not audio: ${headerless}. ${insistOnRaw(names)}`, { label: input.label });
  }
  if (rawWhen !== 'plausible') return;
  const judged = judgePcm16(head);
  if (judged.plausible) return;
  throw new AudioInputError(
    'not-audio',
    `${input.label} does not look like audio: ${headerless}, and its bytes do not look like raw PCM16 sound either ` +
      `(unknown binary data: its samples change at random, correlation ${judged.correlation.toFixed(2)}, at ${judged.levelDbfs.toFixed(0)} dBFS). ` +
      insistOnRaw(names),
    { label: input.label },
  );
}

async function sniffKind(input: Input, desc: AudioSourceDescription, names: FieldNames): Promise<InputKind> {
  const format = desc.format;
  if (format !== undefined)
    return (SAMPLE_FORMATS as readonly string[]).includes(format) ? { kind: 'raw', format: format as SampleFormat } : { kind: format as SourceContainer };
  let want = SNIFF_BYTES;
  let head: Buffer;
  ({ head, stream: input.stream } = await peekStart(input.stream, want));
  if (head.length === 0) throw new AudioInputError('empty', `No audio in ${input.label}: it holds nothing.`, { label: input.label });
  for (;;) {
    const result = sniffAudio(head, head.length < want);
    if (!isSniffResult(result)) {
      want = result.needBytes;
      ({ head, stream: input.stream } = await peekStart(input.stream, want));
      continue;
    }
    if (result.kind === 'unknown') return { kind: 'raw', format: 's16le' };
    if (desc.rate !== undefined || desc.channels !== undefined) {
      const field = desc.rate !== undefined ? names.rate : names.channels;
      throw new ValidationError(
        field,
        `nothing for ${input.label}, which is ${result.name} (recognised by its header): its rate and channels come from the file ` +
          `(${names.rate} and ${names.channels} describe raw input; force raw input with ${names.format})`,
        describeReceived(desc.rate ?? desc.channels),
      );
    }
    return result.kind === 'foreign' ? { kind: 'foreign', name: result.name } : { kind: result.kind === 'ogg-opus' ? 'ogg' : result.kind };
  }
}

/** Checks a description before anything is opened. */
export function checkDescription(desc: AudioSourceDescription, names: FieldNames): AudioSourceDescription {
  if (desc === null || typeof desc !== 'object') throw new ValidationError('description', 'an object with format, rate, channels', typeof desc);
  const { format } = desc;
  if (format !== undefined && !(SOURCE_FORMATS as readonly string[]).includes(format)) {
    throw new ValidationError(
      names.format,
      `one of ${SOURCE_FORMATS.join(', ')} (other files are recognised by their header and decoded with ffmpeg: leave ${names.format} out)`,
      describeReceived(format),
    );
  }
  const rate = desc.rate === undefined ? undefined : validateRate(desc.rate, names.rate);
  const channels = desc.channels === undefined ? undefined : validateChannels(desc.channels, names.channels);
  if (format !== undefined && !(SAMPLE_FORMATS as readonly string[]).includes(format) && (rate !== undefined || channels !== undefined)) {
    const field = rate !== undefined ? names.rate : names.channels;
    throw new ValidationError(
      field,
      `nothing for ${format} input, whose header gives its rate and channels (${names.rate} and ${names.channels} describe raw input: ${SAMPLE_FORMATS.join(', ')})`,
      describeReceived(rate ?? channels),
    );
  }
  return { format, rate, channels };
}
