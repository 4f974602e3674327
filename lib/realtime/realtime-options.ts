/**
 * The options of the realtime streams (the connection options they share, then
 * `RealtimeTranslateStream`'s own), checked and resolved once, before any connection:
 * every bad value is a `ValidationError` or `ConfigError` naming the option, and no message
 * quotes the API key, even one passed in the wrong option.
 */
import { ConfigError, RtTranslateError, ValidationError, redactSecret } from '../errors.js';
import { ENV_API_KEY, ENV_REALTIME_URL, REALTIME_PATH, resolveApiKey, resolveRealtimeEndpoint } from '../config.js';
import { describeReceived, intOption, numberOption } from '../options.js';
import {
  APPEND_PIECE_BYTES,
  MAX_APPEND_AUDIO_BYTES,
  REALTIME_BYTES_PER_FRAME,
  encodeSessionUpdate,
  normalizeModalities,
  type OutputModality,
  type SessionConfig,
} from './codec.js';
import { normalizeRealtimeLanguage, type RealtimeLanguage } from './languages.js';
import type { OpenUnion } from '../language-tags.js';
import type { ReconnectPolicy } from './reconnect-policy.js';
import type { SessionLinkOptions } from './session-link.js';

/** Largest message accepted from the realtime translation service, in bytes. */
export const MAX_SERVER_MESSAGE_BYTES = 16 * 1024 * 1024;

/** What to do when the connection drops mid-session. */
export interface ReconnectOptions {
  /** Attempts after one drop before giving up. Default 8. */
  maxAttempts?: number;
  /** Wait before the first attempt, doubled for each further one (with jitter), in ms. Default 500. */
  initialDelayMs?: number;
  /** Longest wait between attempts (a longer `Retry-After` is honoured), in ms. Default 10 000. */
  maxDelayMs?: number;
  /** Give up once the outage would last longer than this, in ms. Default 60 000. */
  giveUpAfterMs?: number;
  /**
   * Time a reconnect attempt may take from connecting to a ready session, in ms (at most
   * `readyTimeoutMs`). A stalled handshake is abandoned after it and the next attempt made, so an
   * outage always has room for several. When the service says it is starting (a cold start), the
   * attempt gets `readyTimeoutMs`, within the outage's budget. Default 10 000.
   */
  attemptTimeoutMs?: number;
  /**
   * Input audio kept for replay after a drop, and held while reconnecting (a writer then waits
   * when it is full), in ms. Default 30 000.
   */
  maxReplayMs?: number;
}

/** What every realtime stream of the library takes to reach the service and survive the network. */
export interface RealtimeConnectionOptions {
  /** API key; default `RT_TRANSLATE_API_KEY`. Sent in the `x-api-key` handshake header. */
  apiKey?: string;
  /** Realtime host (`wss://...`); the endpoint's path is appended. Default `RT_TRANSLATE_REALTIME_URL`. */
  realtimeUrl?: string;
  /** Allow plain-text `ws://` to a host that is not loopback. Off by default. */
  allowInsecure?: boolean;
  /** Extra handshake headers (never `x-api-key`: use `apiKey`). */
  headers?: Record<string, string>;
  /** Aborts the session: the stream is destroyed with an `AbortError`. */
  signal?: AbortSignal;
  /** Time allowed from connecting to a ready session, in ms. */
  readyTimeoutMs?: number;
  /** Reconnect after a drop, replaying unanswered audio: on by default; `false` turns it off. */
  reconnect?: boolean | ReconnectOptions;
  /** WebSocket ping interval of an open connection, in ms. Default 5000. */
  pingIntervalMs?: number;
  /** No sign of life for this long means the connection is dead, in ms. Default 15 000. */
  livenessTimeoutMs?: number;
  /** Bound on the socket's send buffer before a write waits, in bytes. Default 1 MiB. */
  maxSocketBufferBytes?: number;
  /** Events an `events()` consumer may fall behind by before the socket is paused. Default 512. */
  maxQueuedEvents?: number;
  /** Audio bytes queued for an `events()` consumer before the socket is paused. Default 4 MiB. */
  maxQueuedEventBytes?: number;
}

export interface RealtimeTranslateOptions extends RealtimeConnectionOptions {
  /** Source language tag, one of the 14 realtime tags (`REALTIME_LANGUAGES`, case-insensitive). */
  from: OpenUnion<RealtimeLanguage>;
  /** Target language tag, one of the 14 realtime tags (`REALTIME_LANGUAGES`, case-insensitive). */
  to: OpenUnion<RealtimeLanguage>;
  /** Use this cloned voice (owned by the key's workspace). Default: the target language's built-in voice. */
  voiceId?: number;
  /** `['text', 'audio']` (default), `['text']` or `['audio']`. */
  outputModalities?: readonly OutputModality[];
  /** Beta model selector, passed through as `?model=`. */
  model?: string;
  /** Beta mode selector, passed through as `?mode=`. */
  mode?: string;
  /**
   * Send the key as `auth.api_key` in the first `session.update` instead of the `x-api-key`
   * handshake header. Only for environments that cannot set handshake headers.
   */
  sendKeyInSessionUpdate?: boolean;
  /** Time allowed from connecting to `session.created`, in ms. Default 90 000 (cold starts). */
  readyTimeoutMs?: number;
  /** Silence appended on `end()` so voice detection closes the last utterance, in ms. Default 800. */
  endPaddingMs?: number;
  /**
   * After `end()`: quiet time after the service's last answer (or after it showed it had read the
   * last speech) that means the session is done, in ms. Default 3000. Longer than the pauses of a
   * service between its answers to input it already has.
   */
  quietPeriodMs?: number;
  /**
   * After `end()`: how long an owed answer (a response left open, speech sent after the service's
   * last response began) may stay silent before the stream gives up on it, in ms. Default 30 000.
   */
  responseStallTimeoutMs?: number;
  /** Largest audio payload of one append event, in bytes (even, at most 256 KiB). Default `APPEND_PIECE_BYTES` (64 KiB): larger appends fall off V8's fast path. */
  maxAppendBytes?: number;
  /** Level above which sent audio counts as speech (the ending's evidence of what is owed), in dBFS. Default -40. */
  speechThresholdDbfs?: number;
  /** Silence that closes a stretch of sent speech, in ms. Default 600. */
  speechSilenceMs?: number;
  /** Readable side buffer, in bytes. Default 256 KiB. */
  readableHighWaterMark?: number;
  /** Writable side buffer, in bytes. Default 64 KiB. */
  writableHighWaterMark?: number;
}

export interface ResolvedReconnect extends ReconnectPolicy {
  maxReplayMs: number;
}

/** The connection options, checked and resolved. */
export interface ResolvedConnectionOptions {
  apiKey: string;
  url: URL;
  /** Handshake headers, `x-api-key` included unless the key goes in the first message. */
  headers: Record<string, string>;
  signal: AbortSignal | undefined;
  readyTimeoutMs: number;
  pingIntervalMs: number;
  livenessTimeoutMs: number;
  maxSocketBufferBytes: number;
  maxQueuedEvents: number;
  maxQueuedEventBytes: number;
  /** Undefined when reconnecting is off. */
  reconnect: ResolvedReconnect | undefined;
}

export interface ResolvedRealtimeOptions extends ResolvedConnectionOptions {
  session: SessionConfig;
  /** The first `session.update`, encoded (it may hold the key: never log it). */
  sessionUpdate: string;
  modalities: readonly OutputModality[];
  endPaddingMs: number;
  quietPeriodMs: number;
  responseStallTimeoutMs: number;
  maxAppendBytes: number;
  speechThresholdDbfs: number;
  speechSilenceMs: number;
  readableHighWaterMark: number;
  writableHighWaterMark: number;
}

function resolveReconnect(value: unknown): ResolvedReconnect | undefined {
  if (value === false) return undefined;
  if (value !== undefined && value !== true && (value === null || typeof value !== 'object' || Array.isArray(value))) {
    throw new ValidationError('reconnect', 'true, false or an object of reconnect options', describeReceived(value));
  }
  const r = (typeof value === 'object' ? value : {}) as ReconnectOptions;
  return {
    maxAttempts: intOption(r.maxAttempts, 'reconnect.maxAttempts', { min: 1, max: 1000, fallback: 8 }),
    initialDelayMs: intOption(r.initialDelayMs, 'reconnect.initialDelayMs', { min: 0, fallback: 500 }),
    maxDelayMs: intOption(r.maxDelayMs, 'reconnect.maxDelayMs', { min: 0, fallback: 10_000 }),
    giveUpAfterMs: intOption(r.giveUpAfterMs, 'reconnect.giveUpAfterMs', { min: 0, fallback: 60_000 }),
    attemptTimeoutMs: intOption(r.attemptTimeoutMs, 'reconnect.attemptTimeoutMs', { min: 1, fallback: 10_000 }),
    maxReplayMs: intOption(r.maxReplayMs, 'reconnect.maxReplayMs', { min: 0, max: 600_000, fallback: 30_000 }),
  };
}

/** Where to connect: the endpoint `path` on the realtime host, with `query`. */
export interface EndpointSpec {
  path: string;
  query?: Record<string, string | undefined>;
  /** The key goes in the first message instead of the `x-api-key` header. */
  keyInFirstMessage?: boolean;
  /** The default of `readyTimeoutMs`. */
  readyTimeoutMs: number;
}

/** What the session link of a stream with these options is given; `maxPayload`: the largest message accepted. */
export function linkOptions(o: ResolvedConnectionOptions, maxPayload: number, textOnly: boolean): SessionLinkOptions {
  const { url, headers, pingIntervalMs, livenessTimeoutMs } = o;
  return {
    connection: { url, headers, maxPayload, pingIntervalMs, livenessTimeoutMs, textOnly },
    readyTimeoutMs: o.readyTimeoutMs,
    reconnect: o.reconnect,
    secret: o.apiKey,
  };
}

/** Checks and resolves the connection options (the key already resolved). */
export function resolveConnectionOptions(options: RealtimeConnectionOptions, apiKey: string, endpoint: EndpointSpec): ResolvedConnectionOptions {
  const url = resolveRealtimeEndpoint(options.realtimeUrl, endpoint.path, {
    allowInsecure: options.allowInsecure === true,
    query: endpoint.query ?? {},
  });
  if (url === undefined) {
    throw new ConfigError('realtimeUrl', `No realtime URL: pass realtimeUrl or set ${ENV_REALTIME_URL}.`);
  }
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(options.headers ?? {})) {
    if (name.toLowerCase() === 'x-api-key') {
      throw new ValidationError('headers', 'extra handshake headers other than x-api-key (pass the key as apiKey)');
    }
    headers[name] = value;
  }
  if (!endpoint.keyInFirstMessage) headers['x-api-key'] = apiKey;
  if (options.signal !== undefined && !(options.signal instanceof AbortSignal)) {
    throw new ValidationError('signal', 'an AbortSignal', describeReceived(options.signal));
  }
  const pingIntervalMs = intOption(options.pingIntervalMs, 'pingIntervalMs', { min: 1, fallback: 5_000 });
  return {
    apiKey,
    url,
    headers,
    signal: options.signal,
    readyTimeoutMs: intOption(options.readyTimeoutMs, 'readyTimeoutMs', { min: 1, fallback: endpoint.readyTimeoutMs }),
    pingIntervalMs,
    livenessTimeoutMs: intOption(options.livenessTimeoutMs, 'livenessTimeoutMs', { min: pingIntervalMs, fallback: Math.max(15_000, pingIntervalMs) }),
    maxSocketBufferBytes: intOption(options.maxSocketBufferBytes, 'maxSocketBufferBytes', { min: 0, fallback: 1024 * 1024 }),
    maxQueuedEvents: intOption(options.maxQueuedEvents, 'maxQueuedEvents', { min: 1, fallback: 512 }),
    maxQueuedEventBytes: intOption(options.maxQueuedEventBytes, 'maxQueuedEventBytes', { min: 1, fallback: 4 * 1024 * 1024 }),
    reconnect: resolveReconnect(options.reconnect),
  };
}

/**
 * Resolves the API key, then runs `resolve` with it; whatever `resolve` throws is redacted, so
 * no message quotes the key, even one passed in the wrong option. `what` describes the options
 * object for the error when it is not one.
 */
export function withApiKey<T>(options: RealtimeConnectionOptions | null | undefined, what: string, resolve: (apiKey: string) => T): T {
  if (options === null || typeof options !== 'object') {
    throw new ValidationError('options', what, describeReceived(options));
  }
  const apiKey = resolveApiKey(options.apiKey);
  if (apiKey === undefined) {
    throw new ConfigError('apiKey', `No API key: pass apiKey or set ${ENV_API_KEY}.`);
  }
  try {
    return resolve(apiKey);
  } catch (error) {
    if (error instanceof RtTranslateError) error.message = redactSecret(error.message, apiKey);
    throw error;
  }
}

function resolveChecked(options: RealtimeTranslateOptions, apiKey: string): ResolvedRealtimeOptions {
  if (options.voiceId !== undefined && (!Number.isSafeInteger(options.voiceId) || options.voiceId < 1)) {
    throw new ValidationError('voiceId', 'the id of a cloned voice (positive integer)', describeReceived(options.voiceId));
  }
  // Checked under the stream's option names, then put in wire form.
  const session: SessionConfig = {
    source_language: normalizeRealtimeLanguage(options.from, 'from'),
    target_language: normalizeRealtimeLanguage(options.to, 'to'),
  };
  if (options.outputModalities !== undefined) session.output_modalities = normalizeModalities(options.outputModalities, 'outputModalities');
  if (options.voiceId !== undefined) session.voice = { type: 'cloned', voice_id: options.voiceId };
  const maxAppendBytes = intOption(options.maxAppendBytes, 'maxAppendBytes', {
    min: REALTIME_BYTES_PER_FRAME,
    max: MAX_APPEND_AUDIO_BYTES,
    fallback: APPEND_PIECE_BYTES,
  });
  if (maxAppendBytes % REALTIME_BYTES_PER_FRAME !== 0) {
    throw new ValidationError('maxAppendBytes', `an even number of bytes from 2 to ${MAX_APPEND_AUDIO_BYTES}`, describeReceived(maxAppendBytes));
  }
  const keyInFirstMessage = options.sendKeyInSessionUpdate === true;
  const connection = resolveConnectionOptions(options, apiKey, {
    path: REALTIME_PATH,
    query: { model: options.model, mode: options.mode },
    keyInFirstMessage,
    readyTimeoutMs: 90_000,
  });
  return {
    ...connection,
    session,
    sessionUpdate: encodeSessionUpdate(session, keyInFirstMessage ? { authApiKey: apiKey } : {}),
    modalities: session.output_modalities ?? ['text', 'audio'],
    endPaddingMs: intOption(options.endPaddingMs, 'endPaddingMs', { min: 0, fallback: 800 }),
    quietPeriodMs: intOption(options.quietPeriodMs, 'quietPeriodMs', { min: 1, fallback: 3_000 }),
    responseStallTimeoutMs: intOption(options.responseStallTimeoutMs, 'responseStallTimeoutMs', { min: 1, fallback: 30_000 }),
    maxAppendBytes,
    speechThresholdDbfs: numberOption(options.speechThresholdDbfs, 'speechThresholdDbfs', { max: 0, fallback: -40 }),
    speechSilenceMs: intOption(options.speechSilenceMs, 'speechSilenceMs', { min: 1, fallback: 600 }),
    readableHighWaterMark: intOption(options.readableHighWaterMark, 'readableHighWaterMark', { min: 1, fallback: 256 * 1024 }),
    writableHighWaterMark: intOption(options.writableHighWaterMark, 'writableHighWaterMark', { min: 1, fallback: 64 * 1024 }),
  };
}

/**
 * Checks every option and resolves the key, URL and session configuration. Throws
 * `ValidationError` or `ConfigError` naming the option; never a message with the key in it.
 */
export function resolveRealtimeOptions(options: RealtimeTranslateOptions): ResolvedRealtimeOptions {
  return withApiKey(options, 'an object with from and to', (apiKey) => resolveChecked(options, apiKey));
}
