/**
 * `openAudioSource`: any audio file or stream as the service's PCM (PCM16 LE mono 24 kHz), for
 * the CLI, bots and bridges alike. Raw PCM is described by the caller; WAV, Ogg/Opus and FLAC are
 * recognised by their first bytes and decoded by the library; any other container it recognises
 * (MP3, MP4, WebM, ...) goes through ffmpeg (`ffmpegPath`, `FFMPEG_PATH`, or `ffmpeg` on
 * `PATH`), as does a WAV or FLAC file in a layout the library does not convert. Decoders are
 * loaded only for the inputs that need them. What is found before the audio flows (the input
 * opened, its kind, the checks of raw input and of the description) is in `./source-input.ts`.
 *
 * Everything that can be found before the audio flows (an unreadable file, no audio at all, a
 * format nothing here decodes, input that is not audio (`rawWhen`), a description that
 * contradicts the header) rejects the returned promise. A failure midway (a read error, corrupt
 * data) keeps what was decoded before it: see `AudioSourceOptions.onFailure`. The policies are
 * detailed in the README ("Reading any audio").
 */
import { Readable, type Duplex } from 'node:stream';
import { AudioInputError, ConfigError, UnsupportedError, ValidationError } from '../errors.js';
import { SAMPLE_FORMATS, SERVICE_FORMAT } from './audio-format.js';
import { toServiceFormat } from './convert.js';
import {
  HOW_TO_CONVERT,
  RAW_WHEN,
  checkDescription,
  describeFailure,
  identify,
  insistOnRaw,
  kindName,
  openInput,
  type AudioSourceDescription,
  type FieldNames,
  type Input,
  type InputKind,
  type RawWhen,
} from './source-input.js';
import { describeReceived } from '../options.js';

export { SOURCE_CONTAINERS, SOURCE_FORMATS, type AudioSourceDescription, type RawWhen, type SourceContainer, type SourceFormat } from './source-input.js';

/** Containers `openAudioSource` decodes itself, besides the raw sample formats. */
export interface AudioSourceOptions {
  /** The ffmpeg executable for other formats. Default `FFMPEG_PATH`, else `ffmpeg` on `PATH`. */
  ffmpegPath?: string;
  /** Where `FFMPEG_PATH` and `PATH` are read. Default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Release the audio at real-time speed (a file played as if it were a microphone). */
  realtime?: boolean;
  /**
   * A failure midway, after some audio was decoded: `'error'` (default) destroys the source
   * with an `AudioInputError` once its reader has taken every byte decoded before the failure;
   * `'end'` ends it there, as if the input had been cut at that point, and sets `failure`
   * (for a consumer that must finish its work, such as a translation, before reporting).
   */
  onFailure?: 'error' | 'end';
  /** How messages name the input. Default: the path, or `the input stream`. */
  label?: string;
  /** How messages name the description's fields (a command line passes its flags). */
  fieldNames?: { format?: string; rate?: string; channels?: string };
  /**
   * Which input with no audio header (and no `format`) is read as raw s16le:
   * - `'anything'` (default): all of it;
   * - `'not-other'`: all but input that is evidently something else: text, JSON, an image, an
   *   archive, ... (`sniffOther` in `./headerless.ts`);
   * - `'plausible'`: only input that, besides, looks like PCM16 sound by the statistics of its
   *   first 64 KiB (`judgePcm16`; its module comment gives the rule and its risks).
   * What is refused rejects with an `AudioInputError` of reason `not-audio` saying what the input
   * looks like and that `format` forces raw input.
   */
  rawWhen?: RawWhen;
}

/* ----------------------------------------------------------------------------------------- */
/* The chain of stages                                                                       */

/** A stage of the chain that failed, and the error. */
interface ChainFailure {
  error: unknown;
  /** Index of the failed stream in the chain (0: the head). */
  stage: number;
}

/**
 * The service-format audio of an input: a Readable that owns the whole decoding chain (the file
 * or the stream it was given, decoders, ffmpeg, the pacer). Destroying it, or `stop()`, releases
 * all of it (an ffmpeg process is killed and reaped).
 */
export class AudioSource extends Readable {
  /** How messages name the input. */
  readonly label: string;
  /** What decodes it: `raw s16le`, `WAV`, `Ogg/Opus`, `FLAC`, or `ffmpeg`. */
  readonly decoder: string;
  readonly #links: Array<Readable | Duplex>;
  readonly #last: Readable;
  readonly #headIsInput: boolean;
  readonly #kind: InputKind;
  readonly #onFailure: 'error' | 'end';
  #chainFailure: ChainFailure | undefined;
  #failure: AudioInputError | undefined;
  #fatal: AudioInputError | undefined;
  #bytes = 0;
  #settleFirst: ((audio: boolean) => void) | undefined;
  readonly #first: Promise<boolean>;

  /** @internal Built by `openAudioSource`. */
  constructor(links: Array<Readable | Duplex>, init: { label: string; decoder: string; kind: InputKind; headIsInput: boolean; onFailure: 'error' | 'end' }) {
    super();
    this.label = init.label;
    this.decoder = init.decoder;
    this.#kind = init.kind;
    this.#headIsInput = init.headIsInput;
    this.#onFailure = init.onFailure;
    this.#links = links;
    this.#last = links.at(-1)!;
    this.#first = new Promise<boolean>((resolve) => (this.#settleFirst = resolve));
    this.#connect();
  }

  /** Bytes of service-format audio produced so far. */
  get bytes(): number {
    return this.#bytes;
  }

  /** The failure that ended the input early (with `onFailure: 'end'`), once it happened. */
  get failure(): AudioInputError | undefined {
    return this.#failure;
  }

  /**
   * Stops reading the input now (a microphone, an open pipe that stays quiet) and ends the
   * source after what it has already produced; audio still inside the decoders is dropped.
   */
  stop(): void {
    if (this.readableEnded || this.destroyed) return;
    this.#release();
    this.push(null);
  }

  /**
   * Links every stage to the next. Unlike `pipeline()`, a failing stage does not discard what
   * was produced before the failure: the stages before it are destroyed (reading stops), the
   * output it already produced is passed on, and the next stage is ended normally, so it
   * flushes (a resampler's tail, a pacer's queue). The source then ends as if the input had
   * been cut at that point. Backpressure holds between every two stages.
   */
  #connect(): void {
    const all = this.#links;
    for (let i = 0; i < all.length; i++) {
      const from = all[i]!;
      const last = i === all.length - 1;
      const to = last ? undefined : (all[i + 1] as Duplex);
      const forward = (chunk: Buffer): boolean => (to ? to.write(chunk) : this.#deliver(chunk));
      const finish = (): void => {
        if (to) {
          if (!to.destroyed && !to.writableEnded) to.end();
        } else this.#finish();
      };
      const onData = (chunk: Buffer) => {
        if (!forward(chunk)) from.pause();
      };
      from.on('data', onData);
      to?.on('drain', () => from.resume());
      from.once('end', finish);
      from.on('error', (error: Error) => {
        from.off('data', onData);
        this.#chainFailure ??= { error, stage: i };
        for (let j = 0; j < i; j++) if (!all[j]!.destroyed) all[j]!.destroy();
        if (to && (to.destroyed || to.writableEnded)) return;
        // A destroyed stream still gives what it had buffered to read(): pass it on, then end.
        for (let chunk = from.read() as Buffer | null; chunk !== null; chunk = from.read() as Buffer | null) forward(chunk);
        finish();
      });
    }
  }

  #deliver(chunk: Buffer): boolean {
    if (this.readableEnded || this.destroyed) return true;
    this.#bytes += chunk.length;
    this.#settleFirst?.(true);
    return this.push(chunk);
  }

  /** The chain has ended: normally, or after a failure whose output has all been passed on. */
  #finish(): void {
    if (this.readableEnded || this.destroyed) return;
    const failure = this.#chainFailure;
    if (failure === undefined || this.#bytes === 0) {
      this.#settleFirst?.(false);
      if (failure === undefined) this.push(null);
      return;
    }
    const error = this.#describe(failure);
    if (this.#onFailure === 'end') {
      this.#failure = error;
      this.push(null);
      return;
    }
    this.#fatal = error;
    this.#failWhenDrained();
  }

  /** Destroys the source with its failure once the reader has taken every byte before it. */
  #failWhenDrained(): void {
    const error = this.#fatal;
    if (!error || this.destroyed) return;
    if (this.readableLength === 0 || this.readableFlowing === null) {
      this.destroy(error);
      return;
    }
    // Let the next read() call _read again, where this check repeats.
    this.push(Buffer.alloc(0));
  }

  override _read(): void {
    if (this.#fatal) {
      this.#failWhenDrained();
      return;
    }
    this.#last.resume();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#settleFirst?.(false);
    this.#release().then(() => callback(error));
  }

  /** Destroys every stage and waits until each has closed (an ffmpeg process has exited). */
  #release(): Promise<void> {
    const closing = this.#links.map((stream) => {
      if (stream.closed) return Promise.resolve();
      const closed = new Promise<void>((resolve) => stream.once('close', () => resolve()));
      if (!stream.destroyed) stream.destroy();
      return closed;
    });
    return Promise.all(closing).then(() => undefined);
  }

  /**
   * Resolves once the first audio is out; rejects with the `AudioInputError` (the source then
   * destroyed) when the input ended or failed without any. `openAudioSource` resolves after it.
   */
  async ready(): Promise<this> {
    if (await this.#first) return this;
    const failure = this.#chainFailure;
    this.destroy();
    if (failure === undefined) throw new AudioInputError('empty', `No audio in ${this.label}.`, { label: this.label });
    throw this.#describe(failure);
  }

  /** The error reported for a chain failure: reading the input (stage 0) or decoding it. */
  #describe(failure: ChainFailure): AudioInputError {
    return describeFailure(failure.error, this.label, this.#kind, failure.stage === 0 && this.#headIsInput, this.#bytes);
  }
}

/**
 * The ffmpeg to run: the `ffmpegPath` option, else `FFMPEG_PATH`, else `ffmpeg` on `PATH`;
 * undefined when there is none. One that is named but cannot be run is a `ConfigError`.
 */
async function ffmpegFor(options: AudioSourceOptions): Promise<string | undefined> {
  const { ENV_FFMPEG_PATH, findFfmpeg, isExecutableFile } = await import('./ffmpeg.js');
  const path = options.ffmpegPath ?? findFfmpeg(options.env ?? process.env);
  if (path === undefined || isExecutableFile(path)) return path;
  const origin = options.ffmpegPath !== undefined ? 'ffmpegPath' : ENV_FFMPEG_PATH;
  throw new ConfigError(origin, `${origin} names ${path}, which is not an executable file: name an ffmpeg executable, or leave it out to use ffmpeg on PATH.`);
}

/** The decoding stages for `kind` (their modules loaded now), and the head when ffmpeg reads the file. */
async function stagesFor(
  kind: InputKind,
  desc: AudioSourceDescription,
  input: Input,
  ffmpeg: () => Promise<string | undefined>,
  names: FieldNames,
): Promise<{ head: Readable; stages: Duplex[] }> {
  switch (kind.kind) {
    case 'raw': {
      const converter = toServiceFormat({
        format: kind.format,
        rate: desc.rate ?? (kind.format === 'mulaw' || kind.format === 'alaw' ? 8000 : SERVICE_FORMAT.rate),
        channels: desc.channels ?? SERVICE_FORMAT.channels,
      });
      return { head: input.stream, stages: converter.stages.length > 0 ? [converter] : [] };
    }
    case 'wav': {
      const { WavReader } = await import('./wav.js');
      return { head: input.stream, stages: [new WavReader({ to: SERVICE_FORMAT })] };
    }
    case 'ogg': {
      const { OggOpusDecoder } = await import('./ogg-opus.js');
      return { head: input.stream, stages: [new OggOpusDecoder({ rate: SERVICE_FORMAT.rate, channels: SERVICE_FORMAT.channels })] };
    }
    case 'flac': {
      const { FlacDecodeStream } = await import('./flac-stream.js');
      return { head: input.stream, stages: [new FlacDecodeStream({ to: SERVICE_FORMAT })] };
    }
    case 'foreign': {
      const ffmpegPath = await ffmpeg();
      if (ffmpegPath === undefined) {
        throw new AudioInputError(
          'unsupported',
          `${input.label} is ${kind.name} (recognised by its header), which the library does not decode itself: install ffmpeg ` +
            `(on PATH, or set FFMPEG_PATH) and it is decoded through ffmpeg, or ${HOW_TO_CONVERT}. ` +
            `Read without ffmpeg: raw PCM (${SAMPLE_FORMATS.join(', ')}), WAV, Ogg/Opus, FLAC. ${insistOnRaw(names)}`,
          { label: input.label },
        );
      }
      const { FfmpegDecoder } = await import('./ffmpeg.js');
      if (input.path !== undefined) {
        // ffmpeg opens the file itself, so it can seek (an MP4 index at the end needs that).
        input.stream.destroy();
        return { head: new FfmpegDecoder({ inputPath: input.path, ffmpegPath }), stages: [] };
      }
      return { head: input.stream, stages: [new FfmpegDecoder({ ffmpegPath })] };
    }
  }
}

async function pacer(realtime: boolean | undefined): Promise<Duplex[]> {
  if (!realtime) return [];
  const { Pacer } = await import('./pacer.js');
  return [new Pacer({ sampleRate: SERVICE_FORMAT.rate, channels: SERVICE_FORMAT.channels })];
}

/**
 * Opens `input` (a file path, or a Readable of audio bytes that the source then owns) as the
 * service's PCM16 LE mono 24 kHz. Resolves once the first audio has been decoded; rejects with
 * a `ValidationError` for a bad description or one that contradicts the header, and with an
 * `AudioInputError` (`reason`: `open`, `empty`, `unsupported`, `not-audio`, `read`, `decode`) when the input
 * cannot be read or decoded.
 */
export async function openAudioSource(
  input: string | Readable,
  description: AudioSourceDescription = {},
  options: AudioSourceOptions = {},
): Promise<AudioSource> {
  const names: FieldNames = { format: 'format', rate: 'rate', channels: 'channels', ...options.fieldNames };
  const desc = checkDescription(description, names);
  const onFailure = options.onFailure ?? 'error';
  if (onFailure !== 'error' && onFailure !== 'end') throw new ValidationError('onFailure', "'error' or 'end'", describeReceived(onFailure));
  const rawWhen = options.rawWhen ?? 'anything';
  if (!RAW_WHEN.includes(rawWhen)) throw new ValidationError('rawWhen', RAW_WHEN.map((v) => `'${v}'`).join(', '), describeReceived(rawWhen));
  const opened = await openInput(input, options.label);
  let kind: InputKind;
  let plan: { head: Readable; stages: Duplex[] };
  try {
    kind = await identify(opened, desc, names, rawWhen);
    plan = await stagesFor(kind, desc, opened, () => ffmpegFor(options), names);
  } catch (error) {
    opened.stream.destroy();
    throw error;
  }
  const headIsInput = plan.head === opened.stream;
  const first = new AudioSource([plan.head, ...plan.stages, ...(await pacer(options.realtime))], {
    label: opened.label,
    decoder: kind.kind === 'foreign' ? 'ffmpeg' : kindName(kind),
    kind,
    headIsInput,
    onFailure,
  });
  let ffmpegPath: string | undefined;
  try {
    return await first.ready();
  } catch (error) {
    // A WAV or FLAC layout the library does not convert: ffmpeg reads the file instead.
    const refused = (kind.kind === 'wav' || kind.kind === 'flac') && error instanceof AudioInputError && error.cause instanceof UnsupportedError;
    if (!refused || opened.path === undefined) throw error;
    ffmpegPath = await ffmpegFor(options);
    if (ffmpegPath === undefined) throw error;
  }
  const { FfmpegDecoder } = await import('./ffmpeg.js');
  const viaFfmpeg: InputKind = { kind: 'foreign', name: `${kindName(kind)} (through ffmpeg)` };
  const second = new AudioSource([new FfmpegDecoder({ inputPath: opened.path, ffmpegPath }), ...(await pacer(options.realtime))], {
    label: opened.label,
    decoder: 'ffmpeg',
    kind: viaFfmpeg,
    headIsInput: false,
    onFailure,
  });
  return second.ready();
}
