/**
 * The realtime command's audio flags and its output end:
 *
 * - input: `-f`/`--ar`/`--ac` as an `AudioSourceDescription` for `openAudioSource` (lib/audio),
 *   which does the reading and decoding;
 * - output: the service format converted to the layout asked for (`--out-format`, `--out-ar`,
 *   `--out-ac`), raw or in a WAV container, on a file or standard output. A file is written as
 *   `OUT.partial` (`./output-file.ts`) and `settle` names it: `OUT` once the session ended
 *   (completely or not), or it stays `OUT.partial` after a failure or an interruption when
 *   audio arrived (a WAV there with the sizes of what it holds).
 *
 * Every problem with the flags is a `UsageError` or a `ValidationError` naming the flag, found
 * before the command connects anywhere.
 */
import { createWriteStream } from 'node:fs';
import { extname } from 'node:path';
import { pipeline, finished } from 'node:stream/promises';
import type { Duplex, Writable } from 'node:stream';
import {
  ValidationError,
  WavFileWriter,
  WavWriter,
  fromServiceFormat,
  openAudioSource,
  type ResolvedAudioDescription,
  type SampleFormat,
  type AudioSource,
  type AudioSourceDescription,
  type SourceFormat,
} from '../lib/index.js';
import { SAMPLE_FORMATS, SERVICE_FORMAT, bytesPerSample, validateChannels, validateRate } from '../lib/dsp.js';
import { UsageError, checkOutputName, type CliIo } from './cli.js';
import { checkInputFile, fileError } from './file-errors.js';
import { keptLine, openOutputFile, type OutputContent, type OutputFile } from './output-file.js';

/** How the source's messages name its description: by the flags. */
export const INPUT_FLAGS = { format: '-f', rate: '--ar', channels: '--ac' } as const;

export type OutputFormat = SampleFormat | 'wav';
export const OUTPUT_FORMATS: readonly OutputFormat[] = [...SAMPLE_FORMATS, 'wav'];

/** Sample formats a WAV output can hold (RIFF is little-endian: no s16be). */
const WAV_SAMPLE_FORMATS: readonly SampleFormat[] = ['s16le', 'f32le', 'mulaw', 'alaw'];

/** Output names the realtime command writes: a WAV file, or raw samples (as `--out-format` says). */
const OUTPUT_EXTENSIONS = ['.wav', '.pcm', '.raw', '.s16le', '.s16be', '.f32le', '.mulaw', '.ulaw', '.ul', '.alaw', '.al'];

/** The output layout: raw samples or a WAV container around them. */
export interface OutputSpec {
  container: 'raw' | 'wav';
  desc: ResolvedAudioDescription;
}

/** A flag's value as a number when it is written as an integer, else the text (for the error). */
function numeric(value: string): number | string {
  return /^\d+$/.test(value) ? Number(value) : value;
}

/** `-f`, `--ar`, `--ac` as the source's description (checked by `openAudioSource`, naming the flags). */
export function inputDescription(flags: { format?: string; ar?: string; ac?: string }): AudioSourceDescription {
  return {
    ...(flags.format !== undefined ? { format: flags.format as SourceFormat } : {}),
    ...(flags.ar !== undefined ? { rate: numeric(flags.ar) as number } : {}),
    ...(flags.ac !== undefined ? { channels: numeric(flags.ac) as number } : {}),
  };
}

/** Checks `--out-format`, `--out-ar`, `--out-ac` against the output path and `--text-only`. */
export function parseOutputSpec(flags: { output?: string; outFormat?: string; outAr?: string; outAc?: string; textOnly: boolean }): OutputSpec {
  if (flags.textOnly) {
    const conflicting = [
      ['--out-format', flags.outFormat],
      ['--out-ar', flags.outAr],
      ['--out-ac', flags.outAc],
    ].find(([, value]) => value !== undefined);
    if (conflicting) throw new UsageError(`${conflicting[0]} has no effect with --text-only, which writes no audio.`);
  }
  if (!flags.textOnly) checkOutputName(flags.output, OUTPUT_EXTENSIONS, 'rt-translate writes WAV or raw samples (--out-format)');
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

/** How the writing into a sink ended. */
export type SinkOutcome = 'complete' | 'failed' | 'interrupted';

/** Where translated audio is written. */
export interface AudioSink {
  /** Writes `chunk`, waiting while the destination is behind; rejects once it has failed. */
  write(chunk: Buffer): Promise<void>;
  /** Ends the sink and waits until everything is written (a WAV file's sizes included). */
  close(): Promise<void>;
  /**
   * Closes the sink, then names a file output: after `complete`, `OUT.partial` is renamed to
   * `OUT`; after `failed` or `interrupted`, the file is kept as `OUT.partial` when audio was
   * written (made valid as far as it goes), removed when none was. Returns the stderr line that
   * says what was kept, if anything was.
   */
  settle(outcome: SinkOutcome): Promise<string | undefined>;
}

/** Writes a chunk, waiting for drain; fails if the stream fails or closes meanwhile. */
export async function writeAll(stream: Writable, chunk: Buffer | string): Promise<void> {
  if (stream.destroyed) throw stream.errored ?? new Error('the output was closed');
  if (stream.write(chunk)) return;
  await new Promise<void>((resolve, reject) => {
    const done = (error?: Error | null) => {
      stream.off('drain', onDrain);
      stream.off('error', onError);
      stream.off('close', onClose);
      if (error) reject(error);
      else resolve();
    };
    const onDrain = () => done();
    const onError = (error: Error) => done(error);
    const onClose = () => done(stream.errored ?? new Error('the output was closed'));
    stream.on('drain', onDrain);
    stream.on('error', onError);
    stream.on('close', onClose);
  });
}

/**
 * A sink on `head` (a file, standard output, or the first of a chain of stages), whose end is
 * `end()`: writes wait for drain, and the destination's first failure is kept (so an error that
 * arrives while nobody is waiting, such as `EPIPE` on standard output, is never unhandled) and
 * reported by every later call. `file` is the output file when there is one (see `settle`).
 */
function sinkOn(head: Writable, watch: Writable[], end: () => Promise<void>, file?: { output: OutputFile; content: OutputContent }): AudioSink {
  let failure: Error | undefined;
  let written = 0;
  let closed: Promise<void> | undefined;
  for (const stream of watch) stream.on('error', (error: Error) => (failure ??= error));
  const close = (): Promise<void> =>
    (closed ??= (async () => {
      if (failure) throw failure;
      await end();
      if (failure) throw failure;
    })());
  return {
    async write(chunk) {
      if (failure) throw failure;
      // Counted once handed over: a chunk the stream took is written, even after a failure.
      if (!head.destroyed) written += chunk.length;
      await writeAll(head, chunk);
    },
    close,
    async settle(outcome) {
      const ended = await close().then(
        () => true,
        () => false,
      );
      if (!file) return undefined;
      if (outcome === 'complete' && ended) {
        await file.output.commit();
        return undefined;
      }
      const kept = await file.output.abandon(written > 0, file.content);
      return kept && keptLine(file.output, kept, outcome === 'interrupted');
    },
  };
}

/** A sink that drops everything (`--text-only`). */
export function discardSink(): AudioSink {
  return { write: async () => undefined, close: async () => undefined, settle: async () => undefined };
}

/** Opens `output.path` for writing; a failure is the `FileError` of `flag`. */
export async function openWriteStream(path: string, use: { flag: string; path: string }): Promise<Writable> {
  const file = createWriteStream(path);
  await new Promise<void>((resolve, reject) => {
    file.once('open', () => resolve());
    file.once('error', (error: NodeJS.ErrnoException) => void fileError(error, { ...use, role: 'output' }, path).then(reject));
  });
  return file;
}

/**
 * Opens the output: the service format converted to `spec.desc` (`fromServiceFormat`), then
 * raw, or WAV (`WavFileWriter` with exact sizes for a file; `WavWriter` with placeholder sizes
 * on a pipe, a device or stdout). `path` is the `-o` path as given, or undefined for standard
 * output; with `createDirs` its missing directories are created. A regular file is written as
 * `PATH.partial` until `settle` names it. Standard output is never ended: the command's other
 * text may still follow on it.
 */
export async function openAudioOutput(io: CliIo, path: string | undefined, spec: OutputSpec, createDirs = false): Promise<AudioSink> {
  const stages: Duplex[] = [];
  const converter = fromServiceFormat(spec.desc);
  if (converter.stages.length > 0) stages.push(converter);
  const stdout = io.stdout;
  const toStdout = path === undefined;
  const output = toStdout ? undefined : await openOutputFile(io, path, { createDirs });
  const use = { flag: '-o', path: path ?? '-' };
  let dest: Writable;
  if (output === undefined) {
    if (spec.container === 'wav') stages.push(new WavWriter(spec.desc));
    dest = stdout;
  } else if (spec.container === 'wav' && !output.direct) {
    // Fails here, before any connection, when the file cannot be created.
    const probe = await openWriteStream(output.path, use);
    probe.end();
    await finished(probe);
    dest = new WavFileWriter(output.path, spec.desc);
  } else {
    if (spec.container === 'wav') stages.push(new WavWriter(spec.desc));
    dest = await openWriteStream(output.path, use);
  }
  const { format, rate, channels } = spec.desc;
  const content: OutputContent = spec.container === 'wav' ? { kind: 'file' } : { kind: 'pcm', bytesPerSecond: bytesPerSample(format) * rate * channels };
  const file = output === undefined ? undefined : { output, content };

  // Standard output is not ended, but what was written to it must be out: an empty write
  // returns once it has drained.
  const settled = async () => {
    if (toStdout && dest.writableNeedDrain && !dest.destroyed) await writeAll(dest, '');
  };
  if (stages.length === 0) {
    return sinkOn(
      dest,
      [dest],
      async () => {
        if (toStdout) return settled();
        dest.end();
        await finished(dest);
      },
      file,
    );
  }
  const done = pipeline([...stages, dest], { end: !toStdout });
  done.catch(() => undefined);
  const first = stages[0]!;
  return sinkOn(
    first,
    [first, dest],
    async () => {
      first.end();
      await done;
      await settled();
    },
    file,
  );
}

/** Writes every chunk of `chunks` into `sink` with its backpressure, then closes it, also after a failure. */
export async function writeInto(sink: AudioSink, chunks: AsyncIterable<Buffer>, afterEach?: (chunk: Buffer) => Promise<void> | void): Promise<void> {
  let failure: unknown;
  try {
    for await (const chunk of chunks) {
      await sink.write(chunk);
      await afterEach?.(chunk);
    }
  } catch (error) {
    failure = error;
  }
  try {
    await sink.close();
  } catch (error) {
    failure ??= error;
  }
  if (failure !== undefined) throw failure;
}

/**
 * The input of a realtime command: `-i PATH` (or standard input, which must not be a terminal),
 * described by `-f`/`--ar`/`--ac` or recognised by its header, paced with `--realtime`. An input
 * that fails midway ends after what it decoded (`failure` says why).
 */
export async function openCommandInput(
  values: { input?: string; format?: string; ar?: string; ac?: string; realtime?: boolean },
  io: CliIo,
): Promise<AudioSource> {
  const inputPath = values.input === undefined || values.input === '-' ? undefined : values.input;
  if (inputPath === undefined && io.stdin.isTTY === true) {
    throw new UsageError('no audio to read: standard input is a terminal; pass -i PATH, or pipe the audio in.');
  }
  const absolute = inputPath === undefined ? undefined : await checkInputFile(io, inputPath, '-i');
  return openAudioSource(absolute ?? io.stdin, inputDescription(values), {
    label: inputPath ?? 'standard input',
    realtime: values.realtime === true,
    env: io.env,
    onFailure: 'end',
    fieldNames: INPUT_FLAGS,
    rawWhen: rawWhen(inputPath),
  });
}

/** Names of input files that say they hold raw samples. */
const RAW_INPUT_EXTENSIONS = ['.pcm', '.raw', '.s16le'];

/**
 * Which headerless input (no `-f`, no header recognised) is read as raw s16le: from standard
 * input (a pipe from a recorder or ffmpeg) or a file named as raw samples, anything that is not
 * evidently something else (text, an image, ...); from any other file, only bytes that also
 * look like PCM16 sound (`rawWhen` of `openAudioSource`).
 */
function rawWhen(inputPath: string | undefined): 'not-other' | 'plausible' {
  if (inputPath === undefined || RAW_INPUT_EXTENSIONS.includes(extname(inputPath).toLowerCase())) return 'not-other';
  return 'plausible';
}
