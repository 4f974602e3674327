/**
 * `RealtimeTranslateStream`: a Duplex over the realtime speech-to-speech WebSocket.
 *
 * Writable side: PCM16 LE mono 24 kHz, any chunking. Readable side: the translated PCM16 LE
 * mono 24 kHz. Transcripts, translated text and session state are typed events, and every
 * server event is also available through `events()` for `for await` callers.
 *
 * Lifecycle: connect in `_construct` (so writes wait), send `session.update`, wait for
 * `session.created` (tolerating `session.starting` during a cold start), then stream. On
 * `end()` a little silence is appended so the service's voice detection closes the last
 * utterance, and the stream waits until the last response has completed and the session has
 * been quiet for `quietPeriodMs` before it closes the socket and ends the readable side.
 *
 * Backpressure both ways: a write's callback waits while the socket's send buffer is over
 * `maxSocketBufferBytes`; when the reader (or an `events()` consumer) falls behind, the socket
 * is paused, so TCP holds the service back. Memory stays bounded whatever the speeds.
 */
import { Duplex, type DuplexOptions } from 'node:stream';
import { inspect } from 'node:util';
import WebSocket from 'ws';
import type { IncomingMessage } from 'node:http';
import {
  AbortError,
  AuthError,
  BillingError,
  ConnectionError,
  ForbiddenError,
  RtTranslateError,
  ServerError,
  TimeoutError,
  ValidationError,
  VoiceRejectedError,
  describeCause,
  redactSecret,
} from '../errors.js';
import { ConfigError } from '../errors.js';
import { resolveApiKey, resolveRealtimeUrl, ENV_API_KEY, ENV_REALTIME_URL } from '../config.js';
import {
  MAX_APPEND_AUDIO_BYTES,
  REALTIME_BYTES_PER_FRAME,
  REALTIME_SAMPLE_RATE,
  decodeBinaryAudio,
  decodeServerEvent,
  encodeAudioAppend,
  encodeSessionUpdate,
  normalizeSessionConfig,
  type OutputModality,
  type ServerEvent,
  type SessionConfig,
  type SessionInfo,
} from './codec.js';
import { EventFanout } from './event-queue.js';
import { SpeechSegmentCounter } from '../audio/vad.js';

export interface RealtimeTranslateOptions {
  /** Source language tag, one of the 14 realtime tags (case-insensitive). */
  from: string;
  /** Target language tag, one of the 14 realtime tags (case-insensitive). */
  to: string;
  /** Use this cloned voice (owned by the key's workspace). Default: the target language's built-in voice. */
  voiceId?: number;
  /** `['text', 'audio']` (default), `['text']` or `['audio']`. */
  outputModalities?: readonly OutputModality[];
  /** API key; default `RT_TRANSLATE_API_KEY`. */
  apiKey?: string;
  /** Realtime host (`wss://...`); `/v1/realtime` is appended. Default `RT_TRANSLATE_REALTIME_URL`. */
  realtimeUrl?: string;
  /** Beta model selector, passed through as `?model=`. */
  model?: string;
  /** Beta mode selector, passed through as `?mode=`. */
  mode?: string;
  /**
   * Send the key as `auth.api_key` in the first `session.update` instead of the `x-api-key`
   * handshake header. Only for environments that cannot set handshake headers.
   */
  sendKeyInSessionUpdate?: boolean;
  /** Allow plain-text `ws://` to a host that is not loopback. Off by default. */
  allowInsecure?: boolean;
  /** Time allowed from connecting to `session.created`, in ms. Default 90 000 (cold starts). */
  readyTimeoutMs?: number;
  /** Silence appended on `end()` so voice detection closes the last utterance, in ms. Default 800. */
  endPaddingMs?: number;
  /** After `end()`: quiet time with no response open that means the session is done, in ms. Default 3000. */
  quietPeriodMs?: number;
  /** After `end()`: how long an open response may stay silent before the stream gives up on it, in ms. Default 30 000. */
  responseStallTimeoutMs?: number;
  /** Bound on the socket's send buffer before a write waits, in bytes. Default 1 MiB. */
  maxSocketBufferBytes?: number;
  /** Largest audio payload of one append event, in bytes (even, at most 256 KiB). Default 256 KiB. */
  maxAppendBytes?: number;
  /** Events an `events()` consumer may fall behind by before the socket is paused. Default 512. */
  maxQueuedEvents?: number;
  /** Audio bytes queued for an `events()` consumer before the socket is paused. Default 4 MiB. */
  maxQueuedEventBytes?: number;
  /**
   * Level above which sent audio counts as speech the service owes an answer to, in dBFS
   * (see "Ending" in the README). Default -40, the usual voice-detection threshold.
   */
  speechThresholdDbfs?: number;
  /** Silence that ends a segment of sent speech, in ms. Default 600 (the service's utterance gap). */
  speechSilenceMs?: number;
  /** Aborts the session: the stream is destroyed with an `AbortError`. */
  signal?: AbortSignal;
  /** Readable side buffer, in bytes. Default 256 KiB. */
  readableHighWaterMark?: number;
  /** Writable side buffer, in bytes. Default 64 KiB. */
  writableHighWaterMark?: number;
  /** Extra handshake headers (never `x-api-key`: use `apiKey`). */
  headers?: Record<string, string>;
}

export type SessionStartedInfo = SessionInfo & { id: string };

/** Counters and gauges, for progress lines and tests. */
export interface RealtimeStats {
  /** Input audio bytes sent in append events (padding included). */
  bytesSent: number;
  /** Translated audio bytes received. */
  bytesReceived: number;
  /** Bytes queued in the WebSocket that the kernel has not taken yet. */
  socketBufferedAmount: number;
  /** Responses completed so far. */
  responses: number;
  /** Whether the socket is paused because a reader is behind. */
  paused: boolean;
}

export interface RealtimeTranslateEvents {
  /** `session.starting`: the service is booting a model (cold start). */
  starting: [];
  /** `session.created`: the session is active; `info.id` is its durable identifier. */
  session: [info: SessionStartedInfo];
  /** `session.updated`: the active configuration. */
  'session.updated': [info: SessionInfo];
  /** Completed transcript of an input utterance. */
  transcript: [text: string];
  /** Partial transcript (newer servers). */
  'transcript.delta': [delta: string];
  /** Additive translated text of the current response. */
  'text.delta': [delta: string];
  /** Final translated text of a response. */
  'text.done': [text: string];
  /** The current translated audio response is complete. */
  'audio.done': [];
  /** A non-fatal problem: a server error while the session stays open, a dropped half sample. */
  warning: [warning: RtTranslateError];
  /** Every server event as decoded (also available through `events()`). */
  'server-event': [event: ServerEvent];
}

const DEFAULTS = {
  readyTimeoutMs: 90_000,
  endPaddingMs: 800,
  quietPeriodMs: 3_000,
  responseStallTimeoutMs: 30_000,
  maxSocketBufferBytes: 1024 * 1024,
  maxAppendBytes: MAX_APPEND_AUDIO_BYTES,
  maxQueuedEvents: 512,
  maxQueuedEventBytes: 4 * 1024 * 1024,
  speechSilenceMs: 600,
  readableHighWaterMark: 256 * 1024,
  writableHighWaterMark: 64 * 1024,
};

/** `closing`: the session is done and the close handshake is under way; audio still arriving is kept. */
type Phase = 'connecting' | 'active' | 'ending' | 'closing' | 'closed';

/** Server events that show a response is being worked on (keep-alives and session events do not). */
const RESPONSE_ACTIVITY = new Set<ServerEvent['type']>([
  'transcript.delta',
  'transcript.completed',
  'text.delta',
  'text.done',
  'audio.delta',
  'audio.done',
  'error',
]);

/**
 * A server `error` while the session is open is a warning unless the service closes the
 * connection right after it (then it is the fatal cause). This is how long the stream waits to
 * tell the two apart, unless another event arrives first.
 */
const ERROR_CLOSE_GRACE_MS = 250;

/** Drops one trailing period, so a server message can end a sentence of ours. */
function sentence(text: string): string {
  return text.replace(/\.\s*$/, '');
}

function positiveInt(value: unknown, field: string, fallback: number, min = 0): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
    throw new ValidationError(field, `an integer >= ${min}`, String(value));
  }
  return value;
}

/** What an event holds in memory while queued for an `events()` consumer, in bytes (audio counts). */
function eventBytes(event: ServerEvent): number {
  if (event.type !== 'audio.delta') return 0;
  const raw = event.raw ? (typeof event.raw.delta === 'string' ? event.raw.delta.length : typeof event.raw.audio === 'string' ? event.raw.audio.length : 0) : 0;
  return event.audio.length + raw;
}

/** Maps a fatal realtime `error` event to the error class a caller can act on. */
export function classifyServerError(message: string, code: number | string | undefined, secret?: string): RtTranslateError {
  const verbatim = redactSecret(message, secret);
  const text = sentence(verbatim);
  const numeric = typeof code === 'number' ? code : Number.parseInt(String(code ?? ''), 10);
  const options = { serverMessage: verbatim, ...(Number.isFinite(numeric) ? { status: numeric } : {}) };
  // A status code decides first; then the wording, the voice before the key, since a rejected
  // voice is usually explained in terms of the key that does not own it.
  if (numeric === 401) return new AuthError(`The realtime service refused the credentials: ${text}.`, options);
  if (numeric === 402) return new BillingError(`The realtime service stopped the session for billing: ${text}.`, options);
  if (/\bvoice\b/i.test(text)) {
    return new VoiceRejectedError(`The realtime service rejected the voice: ${text}.`, options);
  }
  if (/\b(credit|billing|balance|payment|quota)/i.test(text)) {
    return new BillingError(`The realtime service stopped the session for billing: ${text}.`, options);
  }
  if (/\b(api[ _-]?key|unauthori[sz]ed|authenticat)/i.test(text)) {
    return new AuthError(`The realtime service refused the credentials: ${text}.`, options);
  }
  if (numeric === 403) return new ForbiddenError(`The realtime service refused access: ${text}.`, options);
  return new ServerError(`The realtime service reported an error: ${text}.`, options);
}

export class RealtimeTranslateStream extends Duplex {
  readonly #apiKey: string;
  readonly #url: URL;
  readonly #session: SessionConfig;
  readonly #modalities: readonly OutputModality[];
  readonly #keyInSessionUpdate: boolean;
  readonly #headers: Record<string, string>;
  readonly #opts: typeof DEFAULTS;
  readonly #signal: AbortSignal | undefined;
  readonly #fanout: EventFanout<ServerEvent>;

  #ws: WebSocket | undefined;
  #phase: Phase = 'connecting';
  #constructCallback: ((error?: Error | null) => void) | undefined;
  #finalCallback: ((error?: Error | null) => void) | undefined;
  #readyTimer: NodeJS.Timeout | undefined;
  #quietTimer: NodeJS.Timeout | undefined;
  #carry: Buffer | undefined;
  #sessionInfo: SessionStartedInfo | undefined;
  #sawStarting = false;
  #responseOpen = false;
  /**
   * Speech segments in the audio sent, against responses started: while the service owes
   * answers, the wait after end() is bounded by responseStallTimeoutMs of inactivity instead of
   * the quiet period, so a slow service never loses the last translations.
   */
  readonly #speech: SpeechSegmentCounter;
  #responsesStarted = 0;
  #sendStallTimer: NodeJS.Timeout | undefined;
  /** The session ended normally: everything was delivered and the socket is closed. */
  #completed = false;
  #pendingWarning: { error: RtTranslateError; timer: NodeJS.Timeout } | undefined;
  #textSoFar = '';
  /** A server error that was the last event seen: if the socket closes now, it is the cause. */
  #lastErrorIfLast: RtTranslateError | undefined;
  #fatal: RtTranslateError | undefined;
  #readerBehind = false;
  #eventsBehind = false;
  #paused = false;
  /** The write waiting for the socket to take its audio (settled by _destroy). */
  #heldWrite: { callback: (error?: Error | null) => void } | undefined;
  #onAbort: (() => void) | undefined;
  #stats = { bytesSent: 0, bytesReceived: 0, responses: 0 };

  constructor(options: RealtimeTranslateOptions) {
    if (options === null || typeof options !== 'object') {
      throw new ValidationError('options', 'an object with from and to');
    }
    const opts = {
      readyTimeoutMs: positiveInt(options.readyTimeoutMs, 'readyTimeoutMs', DEFAULTS.readyTimeoutMs, 1),
      endPaddingMs: positiveInt(options.endPaddingMs, 'endPaddingMs', DEFAULTS.endPaddingMs),
      quietPeriodMs: positiveInt(options.quietPeriodMs, 'quietPeriodMs', DEFAULTS.quietPeriodMs, 1),
      responseStallTimeoutMs: positiveInt(options.responseStallTimeoutMs, 'responseStallTimeoutMs', DEFAULTS.responseStallTimeoutMs, 1),
      maxSocketBufferBytes: positiveInt(options.maxSocketBufferBytes, 'maxSocketBufferBytes', DEFAULTS.maxSocketBufferBytes),
      maxAppendBytes: positiveInt(options.maxAppendBytes, 'maxAppendBytes', DEFAULTS.maxAppendBytes, REALTIME_BYTES_PER_FRAME),
      maxQueuedEvents: positiveInt(options.maxQueuedEvents, 'maxQueuedEvents', DEFAULTS.maxQueuedEvents, 1),
      maxQueuedEventBytes: positiveInt(options.maxQueuedEventBytes, 'maxQueuedEventBytes', DEFAULTS.maxQueuedEventBytes, 1),
      speechSilenceMs: positiveInt(options.speechSilenceMs, 'speechSilenceMs', DEFAULTS.speechSilenceMs, 1),
      readableHighWaterMark: positiveInt(options.readableHighWaterMark, 'readableHighWaterMark', DEFAULTS.readableHighWaterMark, 1),
      writableHighWaterMark: positiveInt(options.writableHighWaterMark, 'writableHighWaterMark', DEFAULTS.writableHighWaterMark, 1),
    };
    const speechThresholdDbfs = options.speechThresholdDbfs ?? -40;
    if (typeof speechThresholdDbfs !== 'number' || !Number.isFinite(speechThresholdDbfs) || speechThresholdDbfs > 0) {
      throw new ValidationError('speechThresholdDbfs', 'a number of dBFS, at most 0', String(speechThresholdDbfs));
    }
    if (opts.maxAppendBytes > MAX_APPEND_AUDIO_BYTES || opts.maxAppendBytes % REALTIME_BYTES_PER_FRAME !== 0) {
      throw new ValidationError('maxAppendBytes', `an even number of bytes from 2 to ${MAX_APPEND_AUDIO_BYTES}`, String(opts.maxAppendBytes));
    }
    if (options.voiceId !== undefined && (!Number.isSafeInteger(options.voiceId) || options.voiceId < 1)) {
      throw new ValidationError('voiceId', 'the id of a cloned voice (positive integer)', String(options.voiceId));
    }
    const session = normalizeSessionConfig({
      source_language: options.from,
      target_language: options.to,
      ...(options.outputModalities !== undefined ? { output_modalities: options.outputModalities } : {}),
      ...(options.voiceId !== undefined ? { voice: { type: 'cloned', voice_id: options.voiceId } } : {}),
    });
    const apiKey = resolveApiKey(options.apiKey);
    if (apiKey === undefined) {
      throw new ConfigError('apiKey', `No API key: pass apiKey or set ${ENV_API_KEY}.`);
    }
    const url = resolveRealtimeUrl(options.realtimeUrl, {
      allowInsecure: options.allowInsecure === true,
      query: { model: options.model, mode: options.mode },
    });
    if (url === undefined) {
      throw new ConfigError('realtimeUrl', `No realtime URL: pass realtimeUrl or set ${ENV_REALTIME_URL}.`);
    }
    for (const name of Object.keys(options.headers ?? {})) {
      if (name.toLowerCase() === 'x-api-key') {
        throw new ValidationError('headers', 'extra handshake headers other than x-api-key (pass the key as apiKey)');
      }
    }
    if (options.signal !== undefined && !(options.signal instanceof AbortSignal)) {
      throw new ValidationError('signal', 'an AbortSignal');
    }

    const duplexOptions: DuplexOptions = {
      readableHighWaterMark: opts.readableHighWaterMark,
      writableHighWaterMark: opts.writableHighWaterMark,
      allowHalfOpen: true,
      decodeStrings: true,
      objectMode: false,
    };
    super(duplexOptions);
    this.#opts = opts;
    this.#apiKey = apiKey;
    this.#url = url;
    this.#session = session;
    this.#modalities = session.output_modalities ?? ['text', 'audio'];
    this.#keyInSessionUpdate = options.sendKeyInSessionUpdate === true;
    this.#headers = { ...options.headers };
    this.#signal = options.signal;
    this.#speech = new SpeechSegmentCounter({ thresholdDbfs: speechThresholdDbfs, silenceMs: opts.speechSilenceMs });
    this.#fanout = new EventFanout<ServerEvent>(
      { count: opts.maxQueuedEvents, bytes: opts.maxQueuedEventBytes, weigh: eventBytes },
      (full) => {
        this.#eventsBehind = full;
        this.#updateFlow();
      },
    );
    if (this.#signal) {
      this.#onAbort = () => {
        // A session that has already delivered everything is complete, not aborted.
        if (this.#completed) return;
        this.destroy(new AbortError('The realtime session was aborted.', { cause: this.#signal?.reason }));
      };
      this.#signal.addEventListener('abort', this.#onAbort, { once: true });
    }
  }

  /** The active session's info (with `id`) once `session.created` has arrived. */
  get session(): SessionStartedInfo | undefined {
    return this.#sessionInfo;
  }

  /** The session's durable identifier, once known. */
  get sessionId(): string | undefined {
    return this.#sessionInfo?.id;
  }

  get stats(): RealtimeStats {
    return {
      ...this.#stats,
      socketBufferedAmount: this.#ws?.bufferedAmount ?? 0,
      paused: this.#paused,
    };
  }

  /** Every server event, in order, for `for await`. Ends when the stream closes; throws its error. */
  events(): AsyncIterableIterator<ServerEvent> {
    return this.#fanout.subscribe();
  }

  /* ------------------------------------------------------------------ construction */

  override _construct(callback: (error?: Error | null) => void): void {
    if (this.#signal?.aborted) {
      callback(new AbortError('The realtime session was aborted before it started.', { cause: this.#signal.reason }));
      return;
    }
    this.#constructCallback = callback;
    const headers: Record<string, string> = { ...this.#headers };
    if (!this.#keyInSessionUpdate) headers['x-api-key'] = this.#apiKey;
    let ws: WebSocket;
    try {
      ws = new WebSocket(this.#url, {
        headers,
        perMessageDeflate: false,
        handshakeTimeout: this.#opts.readyTimeoutMs,
        maxPayload: 16 * 1024 * 1024,
      });
    } catch (error) {
      this.#settleConstruct(new ConnectionError(`Cannot open the realtime connection: ${describeCause(error, this.#apiKey)}`));
      return;
    }
    ws.binaryType = 'nodebuffer';
    this.#ws = ws;
    this.#readyTimer = setTimeout(() => {
      const hint = this.#sawStarting
        ? ' The service sent session.starting: the model is still booting; raise readyTimeoutMs.'
        : '';
      this.#fail(new TimeoutError(`No session.created within ${this.#opts.readyTimeoutMs} ms.${hint}`, this.#opts.readyTimeoutMs));
    }, this.#opts.readyTimeoutMs);

    ws.on('unexpected-response', (_req, res) => this.#onHandshakeRefused(res));
    ws.on('open', () => this.#onOpen());
    ws.on('message', (data, isBinary) => this.#onMessage(data as Buffer, isBinary));
    ws.on('error', (error) => {
      if (this.#phase === 'closed') return;
      this.#fail(this.#lastErrorIfLast ?? new ConnectionError(`Realtime connection failed: ${describeCause(error, this.#apiKey)}`));
    });
    ws.on('close', (code, reason) => this.#onClose(code, reason.toString('utf8')));
  }

  #settleConstruct(error?: Error): void {
    const callback = this.#constructCallback;
    if (!callback) return;
    this.#constructCallback = undefined;
    clearTimeout(this.#readyTimer);
    callback(error ?? null);
  }

  #onHandshakeRefused(res: IncomingMessage): void {
    const status = res.statusCode ?? 0;
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (chunk: Buffer) => {
      if (size < 4096) chunks.push(chunk);
      size += chunk.length;
    });
    const finish = () => {
      let detail = '';
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { error?: unknown };
        if (typeof body.error === 'string') detail = `: ${sentence(redactSecret(body.error, this.#apiKey))}`;
      } catch {
        // not JSON: the status says enough
      }
      const options = { status, ...(detail ? { serverMessage: detail.slice(2) } : {}) };
      let error: RtTranslateError;
      if (status === 401) error = new AuthError(`The realtime service refused the API key (HTTP 401)${detail}.`, options);
      else if (status === 403) error = new ForbiddenError(`The realtime service refused access (HTTP 403)${detail}.`, options);
      else error = new ConnectionError(`The realtime handshake was refused with HTTP ${status}${detail}.`, { ...options, retryable: status >= 500 || status === 429 });
      this.#fail(error);
      res.destroy();
    };
    res.once('end', finish);
    res.once('error', finish);
  }

  #onOpen(): void {
    try {
      const message = encodeSessionUpdate(this.#session, this.#keyInSessionUpdate ? { authApiKey: this.#apiKey } : {});
      this.#ws?.send(message);
    } catch (error) {
      this.#fail(error instanceof RtTranslateError ? error : new ConnectionError(describeCause(error, this.#apiKey)));
    }
  }

  /* ------------------------------------------------------------------ incoming */

  #onMessage(data: Buffer, isBinary: boolean): void {
    if (this.#phase === 'closed' || this.#fatal) return;
    let event: ServerEvent;
    if (isBinary) {
      event = decodeBinaryAudio(data);
    } else {
      try {
        event = decodeServerEvent(data.toString('utf8'));
      } catch (error) {
        this.#warn(error as RtTranslateError);
        return;
      }
    }
    this.#lastErrorIfLast = undefined;
    this.#flushPendingWarning();
    this.emit('server-event', event);
    this.#fanout.push(event);
    this.#handle(event);
    if (this.#phase === 'ending' && RESPONSE_ACTIVITY.has(event.type)) this.#armQuietTimer();
  }

  #handle(event: ServerEvent): void {
    switch (event.type) {
      case 'session.starting':
        this.#sawStarting = true;
        this.emit('starting');
        return;
      case 'session.created': {
        if (this.#sessionInfo) return;
        const id = typeof event.session.id === 'string' ? event.session.id : '';
        this.#sessionInfo = { ...event.session, id };
        this.#phase = 'active';
        this.emit('session', this.#sessionInfo);
        this.#settleConstruct();
        return;
      }
      case 'session.updated':
        this.emit('session.updated', event.session);
        return;
      case 'transcript.delta':
        this.emit('transcript.delta', event.delta);
        return;
      case 'transcript.completed':
        this.#openResponse();
        this.emit('transcript', event.transcript);
        return;
      case 'text.delta':
        this.#openResponse();
        this.#textSoFar += event.delta;
        this.emit('text.delta', event.delta);
        return;
      case 'text.done': {
        const text = event.text ?? this.#textSoFar;
        this.#textSoFar = '';
        if (!this.#modalities.includes('audio')) this.#completeResponse();
        this.emit('text.done', text);
        return;
      }
      case 'audio.delta':
        this.#openResponse();
        this.#stats.bytesReceived += event.audio.length;
        if (this.readableEnded || this.destroyed) return;
        if (!this.push(event.audio)) {
          this.#readerBehind = true;
          this.#updateFlow();
        }
        return;
      case 'audio.done':
        this.#completeResponse();
        this.emit('audio.done');
        return;
      case 'error': {
        const error = classifyServerError(event.message, event.code, this.#apiKey);
        if (!this.#sessionInfo) {
          this.#fail(error);
          return;
        }
        this.#lastErrorIfLast = error;
        this.#flushPendingWarning();
        this.#pendingWarning = {
          error,
          timer: setTimeout(() => this.#flushPendingWarning(), ERROR_CLOSE_GRACE_MS),
        };
        return;
      }
      case 'unknown':
        return;
    }
  }

  #openResponse(): void {
    if (this.#responseOpen) return;
    this.#responseOpen = true;
    this.#responsesStarted++;
  }

  #flushPendingWarning(): void {
    const pending = this.#pendingWarning;
    if (!pending) return;
    this.#pendingWarning = undefined;
    clearTimeout(pending.timer);
    this.#warn(pending.error);
  }

  /** Forgets a pending warning that turned out to be the fatal cause. */
  #dropPendingWarning(): void {
    if (this.#pendingWarning) clearTimeout(this.#pendingWarning.timer);
    this.#pendingWarning = undefined;
  }

  #completeResponse(): void {
    this.#responseOpen = false;
    this.#stats.responses++;
  }

  #warn(warning: RtTranslateError): void {
    this.emit('warning', warning);
  }

  /** Pauses the socket while the reader or an events() consumer is behind; resumes otherwise. */
  #updateFlow(): void {
    const ws = this.#ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) return;
    const shouldPause = this.#readerBehind || this.#eventsBehind;
    if (shouldPause && !this.#paused) {
      ws.pause();
      this.#paused = true;
    } else if (!shouldPause && this.#paused) {
      ws.resume();
      this.#paused = false;
      if (this.#phase === 'ending') this.#armQuietTimer();
    }
  }

  override _read(): void {
    if (this.#fatal) {
      this.#failWhenDrained();
      return;
    }
    if (this.#readerBehind) {
      this.#readerBehind = false;
      this.#updateFlow();
    }
  }

  /* ------------------------------------------------------------------ outgoing */

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    if (this.#fatal || this.#phase !== 'active') {
      // The session is failing: the error reaches the caller through destroy(), which settles
      // this held write.
      this.#heldWrite = { callback };
      return;
    }
    let data = chunk;
    if (this.#carry) {
      data = Buffer.concat([this.#carry, chunk]);
      this.#carry = undefined;
    }
    const aligned = data.length - (data.length % REALTIME_BYTES_PER_FRAME);
    if (aligned < data.length) this.#carry = Buffer.from(data.subarray(aligned));
    const pcm = data.subarray(0, aligned);
    this.#speech.push(pcm);
    this.#sendAudio(pcm, callback);
  }

  /**
   * Sends `pcm` in append events of at most maxAppendBytes, each only while the socket's send
   * buffer is at or under maxSocketBufferBytes (else once the socket took the previous one), and
   * calls back once the last one is sent and the buffer is under the bound again.
   */
  #sendAudio(pcm: Buffer, callback: (error?: Error | null) => void): void {
    const ws = this.#ws;
    const held = { callback };
    this.#heldWrite = held;
    if (!ws || ws.readyState !== WebSocket.OPEN) {
      // The service is closing the session: its close (with the cause it gave, such as a
      // billing stop) fails the stream and settles this write.
      return;
    }
    const max = this.#opts.maxAppendBytes;
    let offset = 0;
    const sendMore = (): void => {
      while (offset < pcm.length) {
        const piece = pcm.subarray(offset, Math.min(offset + max, pcm.length));
        offset += piece.length;
        let waiting = false;
        ws.send(encodeAudioAppend(piece), { binary: false }, (error?: Error) => {
          // A failed send means the socket is going down: its close reports the cause.
          if (error) return;
          // Settled meanwhile by _destroy, or not the piece we wait for.
          if (waiting && this.#heldWrite === held) sendMore();
        });
        this.#stats.bytesSent += piece.length;
        if (ws.bufferedAmount > this.#opts.maxSocketBufferBytes) {
          waiting = true;
          return;
        }
      }
      this.#heldWrite = undefined;
      callback();
    };
    sendMore();
  }

  override _final(callback: (error?: Error | null) => void): void {
    if (this.#fatal) {
      // The stream is destroyed with the error once the reader has drained what arrived.
      this.#failWhenDrained();
      return;
    }
    if (this.#phase !== 'active') {
      callback(new ConnectionError('The realtime session is not active.'));
      return;
    }
    if (this.#carry) {
      this.#warn(
        new ValidationError('input', 'whole PCM16 samples (an even number of bytes)', 'a trailing odd byte, dropped'),
      );
      this.#carry = undefined;
    }
    this.#phase = 'ending';
    this.#finalCallback = callback;
    const padding = Buffer.alloc(
      Math.round((this.#opts.endPaddingMs * REALTIME_SAMPLE_RATE) / 1000) * REALTIME_BYTES_PER_FRAME,
    );
    this.#speech.push(padding);
    // A service that stops reading our audio after end() must not hold the stream forever.
    const stall = this.#opts.responseStallTimeoutMs;
    this.#sendStallTimer = setTimeout(() => {
      this.#fail(new TimeoutError(`The realtime service took none of the audio for ${stall} ms after end().`, stall));
    }, stall);
    this.#sendAudio(padding, () => {
      clearTimeout(this.#sendStallTimer);
      this.#armQuietTimer();
    });
  }

  /**
   * After end(): the session is done once no response is open, no speech sent is still
   * unanswered, and nothing has arrived for quietPeriodMs. While a response is open or speech is
   * unanswered, the wait is bounded by responseStallTimeoutMs of silence instead (a response
   * that keeps streaming keeps the stream alive), then given up with a warning.
   */
  #armQuietTimer(): void {
    clearTimeout(this.#quietTimer);
    // While the socket is paused for a slow consumer, the silence is ours: wait for the resume.
    if (this.#phase !== 'ending' || this.#paused) return;
    const owed = this.#responseOpen || this.#speech.segments > this.#responsesStarted;
    const delay = owed ? this.#opts.responseStallTimeoutMs : this.#opts.quietPeriodMs;
    this.#quietTimer = setTimeout(() => {
      if (this.#responseOpen) {
        this.#warn(new TimeoutError(`The last response sent nothing for ${delay} ms after end(); closing without the rest of it.`, delay));
      } else if (owed) {
        const missing = this.#speech.segments - this.#responsesStarted;
        this.#warn(
          new TimeoutError(
            `No answer to the last ${missing === 1 ? 'segment' : `${missing} segments`} of speech within ${delay} ms after end(); closing without it.`,
            delay,
          ),
        );
      }
      this.#finishSession();
    }, delay);
  }

  #finishSession(): void {
    this.#flushPendingWarning();
    this.#phase = 'closing';
    clearTimeout(this.#quietTimer);
    const done = () => {
      if (this.#fatal) return;
      this.#phase = 'closed';
      this.#completed = true;
      this.#fanout.end();
      if (!this.readableEnded) this.push(null);
      const callback = this.#finalCallback;
      this.#finalCallback = undefined;
      callback?.();
    };
    const ws = this.#ws;
    if (!ws || ws.readyState === WebSocket.CLOSED) {
      done();
      return;
    }
    ws.once('close', done);
    if (this.#paused) {
      this.#paused = false;
      ws.resume();
    }
    ws.close(1000, 'done');
    // A peer that never answers the close frame must not keep the stream open.
    const guard = setTimeout(() => ws.terminate(), 2000);
    ws.once('close', () => clearTimeout(guard));
  }

  #onClose(code: number, reason: string): void {
    clearTimeout(this.#readyTimer);
    clearTimeout(this.#quietTimer);
    clearTimeout(this.#sendStallTimer);
    if (this.#phase === 'closed' || this.#phase === 'closing') return;
    if (this.#phase === 'ending' && !this.#lastErrorIfLast && (code === 1000 || code === 1005)) {
      // The service ended the session after our end(): everything has arrived.
      this.#finishSession();
      return;
    }
    const cause =
      this.#lastErrorIfLast ??
      new ConnectionError(
        `The realtime service closed the connection (code ${code}${reason ? `: ${redactSecret(reason, this.#apiKey)}` : ''})` +
          (this.#sessionInfo ? '.' : ' before the session started.'),
        { status: code },
      );
    this.#fail(cause);
  }

  /* ------------------------------------------------------------------ failure and teardown */

  /**
   * A fatal error. Before the session started it fails construction; afterwards the socket is
   * closed and the stream is destroyed once the reader has taken every byte already received,
   * so partial output is never lost.
   */
  #fail(error: RtTranslateError): void {
    if (this.#fatal || this.destroyed) return;
    this.#fatal = error;
    if (this.#pendingWarning?.error === error) this.#dropPendingWarning();
    else this.#flushPendingWarning();
    clearTimeout(this.#readyTimer);
    clearTimeout(this.#quietTimer);
    clearTimeout(this.#sendStallTimer);
    const wasActive = this.#phase !== 'connecting';
    this.#phase = 'closed';
    this.#closeSocket();
    if (!wasActive && this.#constructCallback) {
      this.#settleConstruct(error);
      return;
    }
    const final = this.#finalCallback;
    this.#finalCallback = undefined;
    if (final && this.readableLength === 0) {
      final(error);
      return;
    }
    this.#failWhenDrained();
  }

  #failWhenDrained(): void {
    const error = this.#fatal;
    if (!error || this.destroyed) return;
    if (this.readableLength === 0 || this.readableFlowing === null || this.readableEnded) {
      this.destroy(error);
      return;
    }
    // Let the next read() call _read again, where this check repeats.
    this.push(Buffer.alloc(0));
  }

  #closeSocket(): void {
    const ws = this.#ws;
    if (!ws || ws.readyState === WebSocket.CLOSED) return;
    if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
    else {
      if (this.#paused) ws.resume();
      ws.close(1000);
      const guard = setTimeout(() => ws.terminate(), 1000);
      ws.once('close', () => clearTimeout(guard));
    }
  }

  override destroy(error?: Error): this {
    super.destroy(error);
    // Node defers _destroy until construction ends: end a pending connection now.
    if (this.#constructCallback) {
      this.#phase = 'closed';
      this.#closeSocket();
      this.#settleConstruct(error);
    }
    return this;
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#phase = 'closed';
    const held = this.#heldWrite;
    this.#heldWrite = undefined;
    held?.callback(error);
    this.#dropPendingWarning();
    clearTimeout(this.#readyTimer);
    clearTimeout(this.#quietTimer);
    clearTimeout(this.#sendStallTimer);
    if (this.#signal && this.#onAbort) this.#signal.removeEventListener('abort', this.#onAbort);
    this.#fanout.end(error ?? undefined);
    const ws = this.#ws;
    if (!ws || ws.readyState === WebSocket.CLOSED) {
      callback(error);
      return;
    }
    ws.once('close', () => callback(error));
    ws.terminate();
  }

  [inspect.custom](): string {
    return `RealtimeTranslateStream { url: '${this.#url.origin}${this.#url.pathname}', ` +
      `from: '${this.#session.source_language}', to: '${this.#session.target_language}', ` +
      `phase: '${this.#phase}', sessionId: ${this.sessionId ? `'${this.sessionId}'` : 'undefined'} }`;
  }
}

// Typed events: `on('transcript', (text) => ...)` and friends.
export interface RealtimeTranslateStream {
  on<E extends keyof RealtimeTranslateEvents>(event: E, listener: (...args: RealtimeTranslateEvents[E]) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
  once<E extends keyof RealtimeTranslateEvents>(event: E, listener: (...args: RealtimeTranslateEvents[E]) => void): this;
  once(event: string | symbol, listener: (...args: any[]) => void): this;
  off<E extends keyof RealtimeTranslateEvents>(event: E, listener: (...args: RealtimeTranslateEvents[E]) => void): this;
  off(event: string | symbol, listener: (...args: any[]) => void): this;
  emit<E extends keyof RealtimeTranslateEvents>(event: E, ...args: RealtimeTranslateEvents[E]): boolean;
  emit(event: string | symbol, ...args: any[]): boolean;
}
