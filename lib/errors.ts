/**
 * Every failure the library reports is an `RtTranslateError` with a stable `code`, a
 * `retryable` hint, and, where the service said something, its status and message.
 *
 * Messages say what happened and what to do. None of them ever contains the API key: the key
 * is never passed to a constructor here, and `redactSecret` scrubs text that came from
 * elsewhere (a server reason, a socket error) before it becomes part of a message.
 */

export type RtTranslateErrorCode =
  | 'RTT_VALIDATION'
  | 'RTT_CONFIG'
  | 'RTT_AUTH'
  | 'RTT_FORBIDDEN'
  | 'RTT_RATE_LIMIT'
  | 'RTT_BILLING'
  | 'RTT_VOICE_REJECTED'
  | 'RTT_SERVER'
  | 'RTT_HTTP'
  | 'RTT_PROTOCOL'
  | 'RTT_CONNECTION'
  | 'RTT_TIMEOUT'
  | 'RTT_ABORTED'
  | 'RTT_TASK_FAILED'
  | 'RTT_TASK_TIMEOUT'
  | 'RTT_INTEGRITY'
  | 'RTT_UNSUPPORTED'
  | 'RTT_USAGE'
  | 'RTT_INPUT';

export interface RtTranslateErrorOptions {
  cause?: unknown;
  retryable?: boolean;
  /** HTTP status (of a request or of a refused WebSocket handshake), or the `code` of a realtime `error` event. */
  status?: number;
  /** The WebSocket close code, when a realtime connection closed. */
  closeCode?: number;
  /** What the service said, verbatim (after secret redaction). */
  serverMessage?: string;
  /** Realtime: input audio accepted that may not have been processed when the session failed, in ms. */
  unprocessedInputMs?: number;
}

export class RtTranslateError extends Error {
  readonly code: RtTranslateErrorCode;
  readonly retryable: boolean;
  readonly status: number | undefined;
  readonly closeCode: number | undefined;
  readonly serverMessage: string | undefined;
  /** Realtime: input audio accepted that may not have been processed when the session failed, in ms. */
  unprocessedInputMs: number | undefined;

  constructor(code: RtTranslateErrorCode, message: string, options: RtTranslateErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.retryable = options.retryable ?? false;
    this.status = options.status;
    this.closeCode = options.closeCode;
    this.serverMessage = options.serverMessage;
    this.unprocessedInputMs = options.unprocessedInputMs;
  }
}

/** Bad input from the caller, found before any network traffic. */
export class ValidationError extends RtTranslateError {
  /** The option or field at fault, as a dotted path (`session.voice.voice_id`). */
  readonly field: string;
  /** What the field accepts, in words. */
  readonly accepted: string;
  /**
   * What it got, as the message shows it (`describeReceived`: a long string by its length only,
   * so a key pasted into the wrong field stays out); undefined when the message shows nothing.
   */
  readonly received: string | undefined;

  constructor(field: string, accepted: string, received?: string, options: RtTranslateErrorOptions = {}) {
    const got = received === undefined ? '' : ` (got ${received})`;
    super('RTT_VALIDATION', `Invalid ${field}: expected ${accepted}${got}.`, options);
    this.field = field;
    this.accepted = accepted;
    this.received = received;
  }
}

/** Configuration that cannot work: no API key, an unsafe URL, a malformed address. */
export class ConfigError extends RtTranslateError {
  readonly field: string;
  constructor(field: string, message: string, options: RtTranslateErrorOptions = {}) {
    super('RTT_CONFIG', message, options);
    this.field = field;
  }
}

/** The service refused the credentials (HTTP 401, or a realtime auth error). */
export class AuthError extends RtTranslateError {
  constructor(message: string, options: RtTranslateErrorOptions = {}) {
    super('RTT_AUTH', message, options);
  }
}

/** The credentials are valid but lack permission for the resource (HTTP 403). */
export class ForbiddenError extends RtTranslateError {
  constructor(message: string, options: RtTranslateErrorOptions = {}) {
    super('RTT_FORBIDDEN', message, options);
  }
}

/**
 * Out of credits, whatever the transport: a realtime session stopped for billing, an HTTP 402, a
 * task that ended PAYMENT_REQUIRED (subclasses add the transport's details). Not retryable: add
 * credits first.
 */
export class BillingError extends RtTranslateError {
  constructor(message: string, options: RtTranslateErrorOptions = {}) {
    super('RTT_BILLING', message, { ...options, retryable: false });
  }
}

/**
 * Too many requests, whatever the transport: an HTTP 429 or a refused realtime handshake with
 * 429. `retryAfterMs` is the wait the service asked for, when it said.
 */
export class RateLimitError extends RtTranslateError {
  readonly retryAfterMs: number | undefined;
  constructor(message: string, options: RtTranslateErrorOptions & { retryAfterMs?: number } = {}) {
    super('RTT_RATE_LIMIT', message, { status: 429, ...options, retryable: true });
    this.retryAfterMs = options.retryAfterMs;
  }
}

/** The realtime service rejected the requested voice. */
export class VoiceRejectedError extends RtTranslateError {
  constructor(message: string, options: RtTranslateErrorOptions = {}) {
    super('RTT_VOICE_REJECTED', message, options);
  }
}

/** The service reported a failure that fits none of the classes above. */
export class ServerError extends RtTranslateError {
  constructor(message: string, options: RtTranslateErrorOptions = {}) {
    super('RTT_SERVER', message, options);
  }
}

/** The peer broke the wire protocol (malformed event, unexpected frame). */
export class ProtocolError extends RtTranslateError {
  constructor(message: string, options: RtTranslateErrorOptions = {}) {
    super('RTT_PROTOCOL', message, options);
  }
}

/** The connection could not be made or was lost. */
export class ConnectionError extends RtTranslateError {
  constructor(message: string, options: RtTranslateErrorOptions = {}) {
    super('RTT_CONNECTION', message, { retryable: true, ...options });
  }
}

/** A configured time limit passed. */
export class TimeoutError extends RtTranslateError {
  /** The limit that passed, in milliseconds. */
  readonly timeoutMs: number;
  constructor(message: string, timeoutMs: number, options: RtTranslateErrorOptions = {}) {
    super('RTT_TIMEOUT', message, { retryable: true, ...options });
    this.timeoutMs = timeoutMs;
  }
}

/** The caller aborted the operation through an AbortSignal. */
export class AbortError extends RtTranslateError {
  constructor(message = 'The operation was aborted.', options: RtTranslateErrorOptions = {}) {
    super('RTT_ABORTED', message, options);
  }
}

/** A check on received data failed (a checksum, a length). */
export class IntegrityError extends RtTranslateError {
  constructor(message: string, options: RtTranslateErrorOptions = {}) {
    super('RTT_INTEGRITY', message, options);
  }
}

/** The runtime lacks something optional the caller asked for (a codec, a binary). */
export class UnsupportedError extends RtTranslateError {
  constructor(message: string, options: RtTranslateErrorOptions = {}) {
    super('RTT_UNSUPPORTED', message, options);
  }
}

/**
 * A method was called in a state that does not allow it (a decoder used after its end, a codec
 * after it was closed): a mistake in the calling code, never retryable.
 */
export class UsageError extends RtTranslateError {
  constructor(message: string, options: RtTranslateErrorOptions = {}) {
    super('RTT_USAGE', message, { ...options, retryable: false });
  }
}

/** Why an audio input could not be used. */
export type AudioInputFailure =
  /** The file could not be opened (missing, a directory, no permission). */
  | 'open'
  /** It holds no audio at all. */
  | 'empty'
  /** Its format is recognised but nothing available decodes it (no ffmpeg). */
  | 'unsupported'
  /** It has no audio header and is evidently not raw PCM either (text, an image, ...): see `rawWhen`. */
  | 'not-audio'
  /** Reading it failed. */
  | 'read'
  /** Its data could not be decoded (corrupt, truncated, a layout that cannot be converted). */
  | 'decode';

/** An audio input (a file or a stream) could not be read or decoded; `cause` says what failed underneath. */
export class AudioInputError extends RtTranslateError {
  readonly reason: AudioInputFailure;
  /** How the input is named in the message (its path, `standard input`, ...). */
  readonly label: string;
  /** Bytes of audio the input had produced before the failure (0 before any). */
  readonly bytesBefore: number;
  constructor(reason: AudioInputFailure, message: string, options: RtTranslateErrorOptions & { label: string; bytesBefore?: number }) {
    super('RTT_INPUT', message, options);
    this.reason = reason;
    this.label = options.label;
    this.bytesBefore = options.bytesBefore ?? 0;
  }
}

/**
 * A jobs file of batch mode could not be opened or read (missing, a directory, a read error of
 * the file or of the stream it came from); `cause` says what failed underneath. Lines that were
 * read but hold no usable job are not errors: the reader reports them one by one.
 */
export class JobFileError extends RtTranslateError {
  /** How the input is named in the message: its path, or `the jobs stream`. */
  readonly label: string;
  constructor(message: string, options: RtTranslateErrorOptions & { label: string }) {
    super('RTT_INPUT', message, options);
    this.label = options.label;
  }
}

/**
 * Replaces every occurrence of `secret` in `text`. Used on anything that did not originate in
 * this library (server reasons, socket errors, URLs) before it is put into a message.
 */
export function redactSecret(text: string, secret: string | undefined): string {
  if (!secret || secret.length < 4) return text;
  return text.split(secret).join('[redacted]');
}

/** The message of an unknown thrown value, redacted. */
export function describeCause(cause: unknown, secret?: string): string {
  const text = cause instanceof Error ? cause.message : String(cause);
  return redactSecret(text, secret);
}
