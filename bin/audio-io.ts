/**
 * The command's audio ends, composed from lib/audio parts:
 *
 * - input: what the bytes are (the `-f`/`--ar`/`--ac` flags, or the file's header), and the
 *   chain that turns them into the service format (PCM16 LE mono 24 kHz), optionally paced at
 *   real time;
 * - output: the service format converted to the layout asked for (`--out-format`,
 *   `--out-ar`, `--out-ac`), raw or in a WAV container.
 *
 * Every problem with the flags or the input (a bad value, conflicting flags, an unreadable or
 * unconvertible file, a foreign format without ffmpeg) is a `UsageError` or `ValidationError`
 * raised before the caller connects anywhere: the input chain is primed (its first audio read
 * and put back) before `openAudioInput` resolves.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { once } from 'node:events';
import { pipeline, finished } from 'node:stream/promises';
import { PassThrough, type Duplex, type Readable, type Writable } from 'node:stream';
import { ValidationError, UnsupportedError } from '../lib/errors.js';
import {
  SAMPLE_FORMATS,
  SERVICE_FORMAT,
  validateChannels,
  validateRate,
  type ResolvedAudioDescription,
  type SampleFormat,
} from '../lib/audio/audio-format.js';
import { fromServiceFormat, toServiceFormat } from '../lib/audio/convert.js';
import { WavFileWriter, WavReader, WavWriter, WavFormatError } from '../lib/audio/wav.js';
import { OggOpusDecoder } from '../lib/audio/ogg-opus.js';
import { FlacDecodeStream } from '../lib/audio/flac-stream.js';
import { FfmpegDecoder, findFfmpegOnPath } from '../lib/audio/ffmpeg.js';
import { Pacer } from '../lib/audio/pacer.js';
import { SNIFF_BYTES, isSniffResult, sniffAudio } from '../lib/audio/sniff.js';
import { UsageError } from './cli.js';

/** Containers the command reads itself, besides the raw sample formats. */
export const INPUT_CONTAINERS = ['wav', 'ogg', 'flac'] as const;
export type InputFormat = SampleFormat | (typeof INPUT_CONTAINERS)[number];
export const INPUT_FORMATS: readonly InputFormat[] = [...SAMPLE_FORMATS, ...INPUT_CONTAINERS];

export type OutputFormat = SampleFormat | 'wav';
export const OUTPUT_FORMATS: readonly OutputFormat[] = [...SAMPLE_FORMATS, 'wav'];

/** Sample formats a WAV output can hold (RIFF is little-endian: no s16be). */
const WAV_SAMPLE_FORMATS: readonly SampleFormat[] = ['s16le', 'f32le', 'mulaw', 'alaw'];

/** The input as described by the flags; undefined fields are found in the header or defaulted. */
export interface InputSpec {
  format?: InputFormat;
  rate?: number;
  channels?: number;
}

/** The output layout: raw samples or a WAV container around them. */
export interface OutputSpec {
  container: 'raw' | 'wav';
  desc: ResolvedAudioDescription;
}

function isRawFormat(format: InputFormat | undefined): format is SampleFormat {
  return format !== undefined && (SAMPLE_FORMATS as readonly string[]).includes(format);
}

/** A flag's value as a number when it is written as an integer, else the text (for the error). */
function numeric(value: string): number | string {
  return /^\d+$/.test(value) ? Number(value) : value;
}

/** Default rate of raw input: 8000 Hz for G.711 (telephony), the service's 24000 Hz otherwise. */
export function defaultRawRate(format: SampleFormat): number {
  return format === 'mulaw' || format === 'alaw' ? 8000 : SERVICE_FORMAT.rate;
}

/** Checks `-f`, `--ar`, `--ac`. */
export function parseInputSpec(flags: { format?: string; ar?: string; ac?: string }): InputSpec {
  let format: InputFormat | undefined;
  if (flags.format !== undefined) {
    if (!(INPUT_FORMATS as readonly string[]).includes(flags.format)) {
      throw new ValidationError(
        '-f',
        `one of ${INPUT_FORMATS.join(', ')} (other files are recognised by their header and decoded with ffmpeg: leave -f out)`,
        JSON.stringify(flags.format),
      );
    }
    format = flags.format as InputFormat;
  }
  const rate = flags.ar === undefined ? undefined : validateRate(numeric(flags.ar), '--ar');
  const channels = flags.ac === undefined ? undefined : validateChannels(numeric(flags.ac), '--ac');
  if (format !== undefined && !isRawFormat(format) && (rate !== undefined || channels !== undefined)) {
    throw new UsageError(
      `${rate !== undefined ? '--ar' : '--ac'} describes raw input (-f ${SAMPLE_FORMATS.join('|')}); ` +
        `a ${format} input's header gives its rate and channels: leave out --ar and --ac.`,
    );
  }
  return { format, rate, channels };
}

/** Checks `--out-format`, `--out-ar`, `--out-ac` against the output path and `--text-only`. */
export function parseOutputSpec(flags: {
  output?: string;
  outFormat?: string;
  outAr?: string;
  outAc?: string;
  textOnly: boolean;
}): OutputSpec {
  if (flags.textOnly) {
    const conflicting = [
      ['--out-format', flags.outFormat],
      ['--out-ar', flags.outAr],
      ['--out-ac', flags.outAc],
    ].find(([, value]) => value !== undefined);
    if (conflicting) throw new UsageError(`${conflicting[0]} has no effect with --text-only, which writes no audio.`);
  }
  let format: OutputFormat = 's16le';
  if (flags.outFormat !== undefined) {
    if (!(OUTPUT_FORMATS as readonly string[]).includes(flags.outFormat)) {
      throw new ValidationError('--out-format', `one of ${OUTPUT_FORMATS.join(', ')}`, JSON.stringify(flags.outFormat));
    }
    format = flags.outFormat as OutputFormat;
  }
  const rate = flags.outAr === undefined ? SERVICE_FORMAT.rate : validateRate(numeric(flags.outAr), '--out-ar');
  const channels = flags.outAc === undefined ? SERVICE_FORMAT.channels : validateChannels(numeric(flags.outAc), '--out-ac');
  const wavPath = flags.output !== undefined && flags.output !== '-' && flags.output.toLowerCase().endsWith('.wav');
  if (format === 'wav') return { container: 'wav', desc: { format: 's16le', rate, channels } };
  if (wavPath) {
    if (!WAV_SAMPLE_FORMATS.includes(format)) {
      throw new UsageError(
        `-o ${flags.output} writes a WAV file, which cannot hold --out-format ${format}; ` +
          `accepted with a .wav output: ${WAV_SAMPLE_FORMATS.join(', ')} (or a raw output path).`,
      );
    }
    return { container: 'wav', desc: { format, rate, channels } };
  }
  return { container: 'raw', desc: { format, rate, channels } };
}

/**
 * Reads up to `n` bytes from the start of `stream` without losing them. Resolves with those
 * bytes and the stream to read everything from, those bytes included: `stream` itself with the
 * bytes put back (`unshift`) while it has not ended, or, when the whole input was shorter than
 * `n` and `stream` has ended (an ended stream takes nothing back), a new stream of those bytes.
 */
export async function peek(stream: Readable, n: number): Promise<{ head: Buffer; stream: Readable }> {
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
  if (stream.readableEnded || stream.destroyed) {
    const rest = new PassThrough();
    rest.end(head);
    return { head: head.subarray(0, n), stream: rest };
  }
  if (head.length > 0) stream.unshift(head);
  return { head: head.subarray(0, n), stream };
}

interface Source {
  stream: Readable;
  label: string;
  /** The path, for a file (ffmpeg opens it itself). */
  path?: string;
}

async function openSource(path: string | undefined, stdin: Readable): Promise<Source> {
  if (path === undefined || path === '-') return { stream: stdin, label: 'standard input' };
  let handle;
  try {
    handle = await open(path, 'r');
  } catch (error) {
    throw new UsageError(`cannot read input ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  const info = await handle.stat();
  if (info.isDirectory()) {
    await handle.close();
    throw new UsageError(`cannot read input ${path}: it is a directory`);
  }
  return { stream: createReadStream(path, { fd: handle }), label: path, ...(info.isFile() ? { path } : {}) };
}

type InputKind = { kind: 'raw'; format: SampleFormat } | { kind: 'wav' | 'ogg' | 'flac' } | { kind: 'foreign'; name: string };

const KIND_NAMES = { wav: 'WAV', ogg: 'Ogg/Opus', flac: 'FLAC' } as const;

/** The input's kind from the flags or, without `-f`, from its first bytes. */
async function identify(source: Source, spec: InputSpec): Promise<InputKind> {
  if (isRawFormat(spec.format)) return { kind: 'raw', format: spec.format };
  if (spec.format !== undefined) return { kind: spec.format as 'wav' | 'ogg' | 'flac' };
  let want = SNIFF_BYTES;
  let head: Buffer;
  ({ head, stream: source.stream } = await peek(source.stream, want));
  if (head.length === 0) throw new UsageError(`no audio on ${source.label}.`);
  for (;;) {
    const result = sniffAudio(head, head.length < want);
    if (!isSniffResult(result)) {
      want = result.needBytes;
      ({ head, stream: source.stream } = await peek(source.stream, want));
      continue;
    }
    let kind: InputKind;
    if (result.kind === 'unknown') return { kind: 'raw', format: 's16le' };
    if (result.kind === 'foreign') kind = { kind: 'foreign', name: result.name };
    else kind = { kind: result.kind === 'ogg-opus' ? 'ogg' : result.kind };
    if (spec.rate !== undefined || spec.channels !== undefined) {
      throw new UsageError(
        `${spec.rate !== undefined ? '--ar' : '--ac'} describes raw input, but ${source.label} is ${result.name} ` +
          `(recognised by its header), whose rate and channels come from the file: leave out --ar and --ac, or force raw with -f.`,
      );
    }
    return kind;
  }
}

const HOW_TO_CONVERT = 'convert it first, e.g. ffmpeg -i IN -f s16le -ar 24000 -ac 1 - | rt-translate -f s16le --from ...';

/**
 * The input could not be read or decoded (exit status 2, like a usage error, whether it is found
 * before connecting or in the middle of a session).
 */
export class InputError extends UsageError {
  /** What failed underneath (a read error, a decoder's error). */
  override readonly cause: unknown;
  constructor(message: string, cause: unknown) {
    super(message);
    this.name = 'InputError';
    this.cause = cause;
  }
}

function kindName(kind: InputKind): string {
  return kind.kind === 'raw' ? `raw ${kind.format}` : kind.kind === 'foreign' ? kind.name : KIND_NAMES[kind.kind];
}

/** Describes a failure of the input chain: reading the source (`read`) or decoding it. */
function inputFailure(error: unknown, source: Source, kind: InputKind, read = false): InputError {
  const label = source.label;
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (read) return new InputError(`cannot read ${label}: ${typeof code === 'string' ? `${code} (${message.replace(/\.$/, '')})` : message.replace(/\.$/, '')}.`, error);
  let hint = '';
  if (kind.kind === 'foreign' && source.path === undefined) hint = ' (ffmpeg reads some files, e.g. an MP4 whose index is at its end, only from a file: pass it with -i FILE)';
  else if (error instanceof WavFormatError || error instanceof UnsupportedError) hint = ` (${HOW_TO_CONVERT})`;
  return new InputError(`cannot decode ${label} as ${kindName(kind)}: ${message.replace(/\.$/, '')}${hint}.`, error);
}

/** The input, as PCM16 LE mono 24 kHz. */
export interface AudioInput {
  /**
   * The audio. It ends normally when the input ends, and also when the input fails midway
   * (a read error, corrupt data): then it ends after everything decoded before the failure,
   * and `failure` says what happened.
   */
  stream: Readable;
  label: string;
  /** What decodes the input, e.g. `WAV`, `Ogg/Opus`, `raw s16le`, `ffmpeg`. */
  decoder: string;
  /** Set once the input has failed midway (the stream then ends early). */
  readonly failure: InputError | undefined;
  /** Stops reading (an endless input: a microphone, an open pipe) and releases every stage. */
  close(): void;
}

export interface AudioInputOptions {
  /** A file, or `-`/undefined for `stdin`. */
  path?: string;
  spec: InputSpec;
  /** Release the audio at real-time rate (`Pacer`). */
  realtime: boolean;
  stdin: Readable;
  /** Where to look for ffmpeg (`PATH`). */
  env: NodeJS.ProcessEnv;
}

/** A stage of the input chain that failed, and the error. */
interface ChainFailure {
  error: unknown;
  /** Index of the failed stream in the chain (0: the head). */
  stage: number;
}

interface InputChain {
  /** The chain's last stream, which never fails by itself (see `connectStages`). */
  outlet: Readable;
  readonly failure: ChainFailure | undefined;
  close(): void;
}

/**
 * Connects `head -> stages... -> outlet`. Unlike `pipeline()`, a failing stage does not
 * discard what was produced before the failure: the stages before it are destroyed (reading
 * stops), the output it had already produced is passed on, and the next stage is ended
 * normally, so it flushes (a resampler's tail, a pacer's queue). The outlet then ends as if
 * the input had been cut at that point, and `failure` records the error. Backpressure holds
 * between every two stages.
 */
function connectStages(head: Readable, stages: Duplex[]): InputChain {
  const outlet = new PassThrough();
  const all: Array<Readable | Duplex> = [head, ...stages, outlet];
  let failure: ChainFailure | undefined;
  const chain: InputChain = {
    outlet,
    get failure() {
      return failure;
    },
    close() {
      for (const s of [...all, chain.outlet]) if (!s.destroyed) s.destroy();
    },
  };
  for (let i = 0; i + 1 < all.length; i++) {
    const from = all[i]!;
    const to = all[i + 1] as Duplex;
    const onData = (chunk: Buffer) => {
      if (!to.write(chunk)) from.pause();
    };
    from.on('data', onData);
    to.on('drain', () => from.resume());
    from.once('end', () => {
      if (!to.destroyed && !to.writableEnded) to.end();
    });
    from.on('error', (error: Error) => {
      from.off('data', onData);
      failure ??= { error, stage: i };
      for (let j = 0; j < i; j++) if (!all[j]!.destroyed) all[j]!.destroy();
      if (to.destroyed || to.writableEnded) return;
      // A destroyed stream still gives what it had buffered to read(): pass it on, then end.
      for (let chunk = from.read() as Buffer | null; chunk !== null; chunk = from.read() as Buffer | null) to.write(chunk);
      to.end();
    });
  }
  return chain;
}

/** Waits for the chain's first audio; throws the failure (or "no audio") when there is none. */
async function prime(chain: InputChain, source: Source): Promise<void> {
  const { head, stream } = await peek(chain.outlet, 1);
  chain.outlet = stream;
  if (head.length > 0) return;
  if (chain.failure !== undefined) throw chain.failure;
  throw new UsageError(`no audio on ${source.label}.`);
}

function isChainFailure(value: unknown): value is ChainFailure {
  return typeof value === 'object' && value !== null && 'stage' in value && 'error' in value;
}

/** Formats WAV and FLAC inputs that the library cannot convert but ffmpeg may. */
function refusedFormat(kind: InputKind, error: unknown): boolean {
  return (kind.kind === 'wav' || kind.kind === 'flac') && error instanceof UnsupportedError;
}

/**
 * Opens the input and builds its chain to the service format:
 * raw -> `toServiceFormat`; WAV -> `WavReader`; Ogg/Opus -> `OggOpusDecoder` at 24 kHz mono;
 * FLAC -> `FlacDecodeStream`; anything else recognised -> `FfmpegDecoder` when ffmpeg is on
 * `PATH`; then `Pacer` with `realtime`. A WAV or FLAC file in a layout the library cannot
 * convert (24-bit, 8-bit, 32 kHz, 11.025 kHz, more than 2 channels...) is decoded by ffmpeg
 * instead when it is on `PATH` (and refused, saying what was found and accepted, when it is
 * not, or when the input is standard input, which cannot be read a second time). Resolves
 * once the first audio is available.
 */
export async function openAudioInput(options: AudioInputOptions): Promise<AudioInput> {
  const source = await openSource(options.path, options.stdin);
  let kind: InputKind;
  try {
    kind = await identify(source, options.spec);
  } catch (error) {
    source.stream.destroy();
    throw error;
  }
  const ffmpegPath = findFfmpegOnPath(options.env.PATH);
  const pacer = () => (options.realtime ? [new Pacer({ sampleRate: SERVICE_FORMAT.rate, channels: SERVICE_FORMAT.channels })] : []);

  let head: Readable = source.stream;
  const stages: Duplex[] = [];
  switch (kind.kind) {
    case 'raw': {
      const desc = {
        format: kind.format,
        rate: options.spec.rate ?? defaultRawRate(kind.format),
        channels: options.spec.channels ?? SERVICE_FORMAT.channels,
      };
      const converter = toServiceFormat(desc);
      if (converter.stages.length > 0) stages.push(converter);
      break;
    }
    case 'wav':
      stages.push(new WavReader({ to: SERVICE_FORMAT }));
      break;
    case 'ogg':
      stages.push(new OggOpusDecoder({ rate: SERVICE_FORMAT.rate, channels: SERVICE_FORMAT.channels }));
      break;
    case 'flac':
      stages.push(new FlacDecodeStream({ to: SERVICE_FORMAT }));
      break;
    case 'foreign': {
      if (ffmpegPath === undefined) {
        source.stream.destroy();
        throw new UsageError(
          `${source.label} is ${kind.name} (recognised by its header), which rt-translate does not decode itself; ` +
            `install ffmpeg (on PATH) and it is decoded through ffmpeg, or ${HOW_TO_CONVERT}. ` +
            `Read without ffmpeg: raw PCM (-f ${SAMPLE_FORMATS.join('|')}), WAV, Ogg/Opus, FLAC.`,
        );
      }
      if (source.path !== undefined) {
        // ffmpeg opens the file itself, so it can seek (an MP4 index at the end needs that).
        source.stream.destroy();
        head = new FfmpegDecoder({ inputPath: source.path, ffmpegPath, to: SERVICE_FORMAT });
      } else {
        stages.push(new FfmpegDecoder({ ffmpegPath, to: SERVICE_FORMAT }));
      }
      break;
    }
  }
  stages.push(...pacer());
  /** The head is the file or stdin (its failures are read errors), not ffmpeg reading the file. */
  let headIsSource = head === source.stream;
  let decoder = kind.kind === 'foreign' ? 'ffmpeg' : kindName(kind);
  let chain = connectStages(head, stages);
  let decodedKind = kind;
  try {
    await prime(chain, source);
  } catch (thrown) {
    chain.close();
    const failure = isChainFailure(thrown) ? thrown : undefined;
    const error = failure ? failure.error : thrown;
    if (!(refusedFormat(kind, error) && source.path !== undefined && ffmpegPath !== undefined)) {
      if (!failure) throw error instanceof UsageError ? error : inputFailure(error, source, kind);
      throw inputFailure(error, source, kind, failure.stage === 0 && headIsSource);
    }
    // A WAV or FLAC layout the library does not convert: ffmpeg reads the file instead.
    decodedKind = { kind: 'foreign', name: `${kindName(kind)} (through ffmpeg)` };
    decoder = 'ffmpeg';
    headIsSource = false;
    chain = connectStages(new FfmpegDecoder({ inputPath: source.path, ffmpegPath, to: SERVICE_FORMAT }), pacer());
    try {
      await prime(chain, source);
    } catch (again) {
      chain.close();
      if (isChainFailure(again)) throw inputFailure(again.error, source, decodedKind);
      throw again instanceof UsageError ? again : inputFailure(again, source, decodedKind);
    }
  }
  const running = chain;
  const fromSource = headIsSource;
  let reported: InputError | undefined;
  return {
    stream: running.outlet,
    label: source.label,
    decoder,
    get failure() {
      const failure = running.failure;
      if (failure === undefined) return undefined;
      reported ??= inputFailure(failure.error, source, decodedKind, failure.stage === 0 && fromSource);
      return reported;
    },
    close: () => running.close(),
  };
}

/** Where translated audio is written. */
export interface AudioSink {
  stream: Writable;
  /** Ends the sink and waits until everything is written (a WAV file's sizes included). */
  close(): Promise<void>;
}

/** A sink that drops everything (`--text-only`). */
export function discardSink(stream: Writable): AudioSink {
  return {
    stream,
    close: async () => {
      stream.end();
    },
  };
}

async function openFile(path: string): Promise<Writable> {
  const file = createWriteStream(path);
  await new Promise<void>((resolve, reject) => {
    file.once('open', () => resolve());
    file.once('error', (error: NodeJS.ErrnoException) => reject(new UsageError(`cannot write output ${path}: ${error.code ?? error.message}`)));
  });
  return file;
}

/** True for a path that is a regular file or does not exist yet (a WAV header can be rewritten). */
async function seekablePath(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return true;
  }
}

/**
 * Opens the output: the service format converted to `spec.desc` (`fromServiceFormat`), then
 * raw, or WAV (`WavFileWriter` with exact sizes for a file; `WavWriter` with placeholder sizes
 * on a pipe or stdout).
 */
export async function openAudioOutput(path: string | undefined, spec: OutputSpec, stdout: Writable): Promise<AudioSink> {
  const stages: Duplex[] = [];
  const converter = fromServiceFormat(spec.desc);
  if (converter.stages.length > 0) stages.push(converter);
  const toStdout = path === undefined || path === '-';
  let dest: Writable;
  if (toStdout) {
    if (spec.container === 'wav') stages.push(new WavWriter(spec.desc));
    dest = stdout;
  } else if (spec.container === 'wav' && (await seekablePath(path))) {
    // Fails here, before any connection, when the file cannot be created.
    const probe = await openFile(path);
    probe.end();
    await finished(probe);
    dest = new WavFileWriter(path, spec.desc);
  } else {
    if (spec.container === 'wav') stages.push(new WavWriter(spec.desc));
    dest = await openFile(path);
  }

  if (stages.length === 0) {
    return {
      stream: dest,
      close: async () => {
        if (toStdout) {
          if (dest.writableNeedDrain) await once(dest, 'drain');
          return;
        }
        dest.end();
        await finished(dest);
      },
    };
  }
  const done = pipeline([...stages, dest], { end: !toStdout });
  done.catch(() => undefined);
  const first = stages[0]!;
  return {
    stream: first,
    close: async () => {
      first.end();
      await done;
      if (toStdout && dest.writableNeedDrain) await once(dest, 'drain');
    },
  };
}
