/**
 * `TtsStreamReadable`: the audio of `POST /tts-stream` as a Readable, byte for byte as it
 * arrives.
 *
 * - The request is validated in the constructor (text 3 to 3000 characters, a locale tag, a
 *   voice id, an output format of the service's list) and sent in `_construct`, so nothing is
 *   read before the answer's headers are in. Then `'response'` fires with `contentType` and
 *   `creditsRequired` (from `X-Credits-Required`), also readable as properties.
 * - Backpressure reaches the socket: the response body is read only while `push()` accepts, so
 *   a slow consumer leaves the bytes in the kernel and the service's send window.
 * - `idleTimeoutMs` (default 30 s): while the consumer wants data and the service sends none for
 *   that long, the stream fails with `HttpTimeoutError` (phase `body`). A slow consumer never
 *   trips it.
 * - `destroy()` (or the `signal` option) aborts the request and closes the connection.
 * - PCM formats (`pcm_s16le`, `pcm_s16be`: 2 bytes; `pcm_s32*`, `pcm_f32*`: 4 bytes) are
 *   re-aligned: every chunk holds whole samples, an odd byte is carried to the next chunk. A
 *   body that ends inside a sample (a cut-short stream) leaves a trailing partial sample:
 *   with `trailingPartialSample: 'drop'` (the default) those bytes are discarded, counted in
 *   `droppedBytes` and reported by a `'warning'` event carrying an `IntegrityError`; with
 *   `'error'` the stream fails with that error instead. Other formats (wav, flac, mp3, adts)
 *   pass through untouched. With no format the service answers its default, mp3.
 * - A creation: the request costs credits, so it is retried only where the service did not act
 *   (see `retry.ts`), and never once bytes have been received.
 */
import { Readable, type ReadableOptions } from 'node:stream';
import { AbortError, IntegrityError, ValidationError } from '../errors.js';
import type { HttpRequester, RequestSpec } from './requester.js';
import { HttpTimeoutError } from './errors.js';
import type { RetrySetting } from './retry.js';
import { DEFAULT_VOICE_ID, ttsStreamSchema, type OutputFormat } from './schemas.js';
import { validate } from './validation.js';
import type { Language } from './endpoints.js';
import { withEvents } from '../typed-events.js';

/** The body of `POST /tts-stream`. */
export interface TtsStreamRequest {
  /** 3 to 3000 characters. */
  text: string;
  /** Locale tag, e.g. `en-us`. */
  language: Language;
  /** Default 147320. */
  voiceId?: number;
  /** `auto`, `mars-pro`, `mars-flash`, `mars-instruct`, `mars-8`, ... */
  speechModel?: string;
  outputConfiguration?: {
    format?: OutputFormat;
    sampleRate?: number;
    /** Seconds. */
    duration?: number;
    applyEnhancement?: boolean;
  };
  voiceSettings?: {
    enhanceReferenceAudioQuality?: boolean | null;
    maintainSourceAccent?: boolean | null;
    applyRefLoudnessNorm?: boolean | null;
  } | null;
  /** MARS-8 models only. */
  inferenceOptions?: {
    /** 0 to 1. */
    stability?: number | null;
    /** 0.01 to 4. */
    temperature?: number | null;
    /** 1 to 1000. */
    inferenceSteps?: number | null;
    /** 0 to 1. */
    speakerSimilarity?: number | null;
    localizeSpeakerWeight?: number | null;
    acousticQualityBoost?: boolean | null;
  } | null;
  userInstructions?: string | null;
  enhanceNamedEntitiesPronunciation?: boolean;
}

export interface TtsStreamReadableOptions extends Pick<ReadableOptions, 'highWaterMark'> {
  // highWaterMark: bytes buffered before the socket is paused. Default 64 KiB.
  signal?: AbortSignal;
  /** Time until the response headers, ms. Default: the client's. */
  headersTimeoutMs?: number;
  /** Longest silence of the body while data is wanted, ms; 0 disables. Default 30000. */
  idleTimeoutMs?: number;
  /** What to do with a partial sample at the end of a PCM body. Default `drop`. */
  trailingPartialSample?: 'drop' | 'error';
  /** Retry policy of the request (before any byte arrives). Default: the client's. */
  retry?: RetrySetting;
}

/** What `'response'` carries. */
export interface TtsStreamResponseInfo {
  statusCode: number;
  contentType: string | undefined;
  creditsRequired: number | undefined;
}

const DEFAULT_IDLE_TIMEOUT_MS = 30_000;
/** Bytes buffered before the body is paused; matches undici's body buffer. */
const DEFAULT_HIGH_WATER_MARK = 64 * 1024;
const EMPTY = Buffer.alloc(0);

/** Bytes per sample of a PCM format; 1 (no alignment) for container and compressed formats. */
export function sampleBytesOf(format: OutputFormat | undefined): number {
  if (format === 'pcm_s16le' || format === 'pcm_s16be') return 2;
  if (format === 'pcm_s32le' || format === 'pcm_s32be' || format === 'pcm_f32le' || format === 'pcm_f32be') return 4;
  return 1;
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** The events of `TtsStreamReadable`, beside its base stream's: each event's listener arguments. */
export interface TtsStreamReadableEvents {
  /** The answer's status and headers, before the first audio byte. */
  response: [info: TtsStreamResponseInfo];
  /** A body cut short inside a sample left a partial sample, dropped (`trailingPartialSample: 'drop'`). */
  warning: [warning: IntegrityError];
}

export class TtsStreamReadable extends withEvents<TtsStreamReadableEvents>()(Readable) {
  /** The answer's `Content-Type`, once `'response'` has fired. */
  contentType: string | undefined;
  /** `X-Credits-Required` of the answer, once `'response'` has fired. */
  creditsRequired: number | undefined;
  statusCode: number | undefined;
  /** The requested output format (undefined: the service default, mp3). */
  readonly format: OutputFormat | undefined;
  /** Alignment unit of the output, bytes. */
  readonly sampleBytes: number;
  /** Bytes of a trailing partial sample that were dropped. */
  droppedBytes = 0;

  readonly #client: HttpRequester;
  readonly #spec: RequestSpec;
  readonly #controller = new AbortController();
  readonly #idleTimeoutMs: number;
  readonly #trailing: 'drop' | 'error';
  readonly #userSignal: AbortSignal | undefined;
  #onUserAbort: (() => void) | undefined;
  #body: Readable | undefined;
  #wanting = false;
  #carry: Buffer = EMPTY;
  #idleTimer: NodeJS.Timeout | undefined;
  #ended = false;

  constructor(client: HttpRequester, request: TtsStreamRequest, options: TtsStreamReadableOptions = {}) {
    // Everything is checked before super(): once the Readable exists, _construct is already
    // scheduled and would run on a half-built object if the constructor threw afterwards.
    const json = validate<Record<string, unknown> & { output_configuration?: { format?: OutputFormat } }>(ttsStreamSchema, {
      voiceId: DEFAULT_VOICE_ID,
      ...request,
    });
    const idle = options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
    if (typeof idle !== 'number' || !Number.isFinite(idle) || idle < 0) {
      throw new ValidationError('idleTimeoutMs', 'a number of milliseconds >= 0', String(idle));
    }
    if (options.trailingPartialSample !== undefined && options.trailingPartialSample !== 'drop' && options.trailingPartialSample !== 'error') {
      throw new ValidationError('trailingPartialSample', "'drop' or 'error'", String(options.trailingPartialSample));
    }
    super({ highWaterMark: options.highWaterMark ?? DEFAULT_HIGH_WATER_MARK });
    this.#client = client;
    this.#idleTimeoutMs = idle;
    this.#trailing = options.trailingPartialSample ?? 'drop';
    this.format = json.output_configuration?.format;
    this.sampleBytes = sampleBytesOf(this.format);
    this.#userSignal = options.signal;
    this.#spec = {
      method: 'POST',
      path: '/tts-stream',
      json,
      kind: 'create',
      accept: '*/*',
      signal: this.#controller.signal,
      headersTimeoutMs: options.headersTimeoutMs,
      // The idle timer below watches the body; it knows when the consumer is the slow one.
      bodyTimeoutMs: 0,
      retry: options.retry,
    };
    if (options.signal) {
      if (options.signal.aborted) {
        this.#controller.abort();
      } else {
        this.#onUserAbort = () => this.destroy(new AbortError('The TTS stream was aborted.'));
        options.signal.addEventListener('abort', this.#onUserAbort, { once: true });
      }
    }
  }

  override _construct(callback: (error?: Error | null) => void): void {
    if (this.#userSignal?.aborted) {
      callback(new AbortError('The TTS stream was aborted.'));
      return;
    }
    this.#client.requestStream(this.#spec).then(
      (response) => {
        if (this.destroyed) {
          response.body.destroy();
          callback();
          return;
        }
        this.#body = response.body;
        this.statusCode = response.statusCode;
        this.contentType = headerValue(response.headers['content-type']);
        const credits = Number(headerValue(response.headers['x-credits-required']));
        this.creditsRequired = headerValue(response.headers['x-credits-required']) !== undefined && Number.isFinite(credits) ? credits : undefined;
        // Flowing with pause/resume: chunks are handed on as they arrive (no concatenation),
        // and a paused body stops reading the socket.
        response.body.on('data', this.#onData);
        response.body.pause();
        response.body.on('end', this.#onEnd);
        response.body.on('error', this.#onBodyError);
        this.emit('response', { statusCode: response.statusCode, contentType: this.contentType, creditsRequired: this.creditsRequired });
        callback();
      },
      // After destroy() the request's abort error is a consequence, not a failure.
      (error: unknown) => callback(this.destroyed ? null : (error as Error)),
    );
  }

  /**
   * Node runs `_destroy` only once `_construct` has finished; a stream destroyed while still
   * waiting for the answer's headers aborts the request now instead.
   */
  override destroy(error?: Error): this {
    if (!this.#body) this.#controller.abort();
    return super.destroy(error);
  }

  readonly #onData = (chunk: Buffer): void => {
    if (this.#ended || this.destroyed) return;
    if (!this.#pushAligned(chunk)) {
      this.#wanting = false;
      this.#body?.pause();
    }
    this.#armIdle();
  };

  readonly #onEnd = (): void => this.#finish();

  readonly #onBodyError = (error: Error): void => {
    this.destroy(this.#client.bodyError(error, this.#spec) as Error);
  };

  override _read(): void {
    this.#wanting = true;
    this.#body?.resume();
    this.#armIdle();
  }

  /** Pushes whole samples of `chunk`; keeps a partial sample for the next chunk. */
  #pushAligned(chunk: Buffer): boolean {
    const width = this.sampleBytes;
    if (width === 1) return this.push(chunk);
    let ok = true;
    let offset = 0;
    if (this.#carry.length > 0) {
      const need = width - this.#carry.length;
      if (chunk.length < need) {
        this.#carry = Buffer.concat([this.#carry, chunk]);
        return true;
      }
      ok = this.push(Buffer.concat([this.#carry, chunk.subarray(0, need)]));
      offset = need;
      this.#carry = EMPTY;
    }
    const rest = chunk.length - offset;
    const aligned = rest - (rest % width);
    if (aligned > 0) ok = this.push(chunk.subarray(offset, offset + aligned)) && ok;
    // A copy, so a kept tail does not pin the whole network chunk.
    if (aligned < rest) this.#carry = Buffer.from(chunk.subarray(offset + aligned));
    return ok;
  }

  #armIdle(): void {
    if (this.#idleTimer) clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
    if (!this.#wanting || this.#ended || this.#idleTimeoutMs === 0) return;
    this.#idleTimer = setTimeout(() => {
      this.#idleTimer = undefined;
      const path = this.#client.urlFor('/tts-stream').pathname;
      this.destroy(new HttpTimeoutError('body', this.#idleTimeoutMs, { method: 'POST', path }));
    }, this.#idleTimeoutMs);
  }

  #finish(): void {
    if (this.#ended || this.destroyed) return;
    // Whatever is still buffered in the body was delivered before 'end'.
    this.#ended = true;
    if (this.#idleTimer) clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
    if (this.#carry.length > 0) {
      const warning = new IntegrityError(
        `The ${this.format} stream ended inside a sample: ${this.#carry.length} trailing byte(s) of a ` +
          `${this.sampleBytes}-byte sample ${this.#trailing === 'drop' ? 'were dropped' : 'remain'}; the audio was probably cut short.`,
      );
      this.droppedBytes = this.#carry.length;
      this.#carry = EMPTY;
      if (this.#trailing === 'error') {
        this.destroy(warning);
        return;
      }
      this.emit('warning', warning);
    }
    this.push(null);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    if (this.#idleTimer) clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
    if (this.#onUserAbort) this.#userSignal?.removeEventListener('abort', this.#onUserAbort);
    this.#controller.abort();
    const body = this.#body;
    this.#body = undefined;
    if (body) {
      // The body's own abort error is a consequence of this destroy, not a new failure.
      body.off('data', this.#onData);
      body.off('end', this.#onEnd);
      body.off('error', this.#onBodyError);
      body.on('error', () => {});
    }
    if (body && !body.destroyed) {
      body.once('close', () => callback(error));
      body.destroy();
      return;
    }
    callback(error);
  }
}
