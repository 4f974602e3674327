/**
 * What a realtime failure means for the caller: the error class, and whether a new session may
 * cure it (`retryable`, which is what the stream's reconnect follows). Covers the service's
 * `error` events, a refused handshake and the ways a connection ends. Text that came from the
 * service passes through `redactSecret` before it is part of a message.
 */
import {
  AuthError,
  BillingError,
  ConnectionError,
  ForbiddenError,
  RateLimitError,
  RtTranslateError,
  ServerError,
  TimeoutError,
  VoiceRejectedError,
  describeCause,
  redactSecret,
} from '../errors.js';
import type { ConnectionEnd } from './connection.js';

/** Close codes after which a new session may well succeed: going away, abnormal, server error, restart, try later. */
export const RETRYABLE_CLOSE_CODES: ReadonlySet<number> = new Set([1001, 1006, 1011, 1012, 1013]);

/** Socket errors that are about a certificate or protocol: the same again on every attempt. */
const PERMANENT_SOCKET_ERROR = /CERT|SELF_SIGNED|TLS|SSL|EPROTO|ERR_INVALID_URL/i;

/** Drops one trailing period, so a server message can end a sentence of ours. */
function sentence(text: string): string {
  return text.replace(/\.\s*$/, '');
}

/** Maps a realtime `error` event to the error class a caller can act on. */
export function classifyServerError(message: string, code: number | string | undefined, secret?: string, closeCode?: number): RtTranslateError {
  const verbatim = redactSecret(message, secret);
  const text = sentence(verbatim);
  const numeric = typeof code === 'number' ? code : Number.parseInt(String(code ?? ''), 10);
  const options = {
    serverMessage: verbatim,
    ...(Number.isFinite(numeric) ? { status: numeric } : {}),
    ...(closeCode !== undefined ? { closeCode } : {}),
  };
  // A status code decides first; then the wording, the voice before the key, since a rejected
  // voice is usually explained in terms of the key that does not own it.
  if (numeric === 401) return new AuthError(`The realtime service refused the credentials: ${text}.`, options);
  if (numeric === 402) return new BillingError(`The realtime service stopped the session for billing: ${text}.`, options);
  if (numeric === 429) return new RateLimitError(`The realtime service is rate limiting this key: ${text}.`, options);
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
  // A generic failure that came with a close meaning "try again" may be cured by a new session.
  const retryable = closeCode !== undefined && RETRYABLE_CLOSE_CODES.has(closeCode);
  return new ServerError(`The realtime service reported an error: ${text}.`, { ...options, retryable });
}

/** The `error` field of a refused handshake's JSON body, redacted, if there is one. */
function refusalDetail(body: string, secret: string | undefined): string {
  try {
    const parsed = JSON.parse(body) as { error?: unknown };
    if (typeof parsed.error === 'string') return sentence(redactSecret(parsed.error, secret));
  } catch {
    // not JSON: the status says enough
  }
  return '';
}

/**
 * The error for a connection that ended without the stream asking: a refused handshake by its
 * status, a close by its code, a cut socket by its error, a dead connection. `started` says
 * whether a session had been established on it (the wording differs).
 */
export function errorForConnectionEnd(end: ConnectionEnd, secret: string | undefined, started: boolean): RtTranslateError {
  switch (end.kind) {
    case 'refused': {
      const { status, retryAfterMs } = end;
      const detail = refusalDetail(end.body, secret);
      const said = detail ? `: ${detail}` : '';
      const options = { status, ...(detail ? { serverMessage: detail } : {}) };
      if (status === 401) return new AuthError(`The realtime service refused the API key (HTTP 401)${said}.`, options);
      if (status === 403) return new ForbiddenError(`The realtime service refused access (HTTP 403)${said}.`, options);
      if (status === 402) return new BillingError(`The realtime service refused the session: out of credits (HTTP 402)${said}.`, options);
      if (status === 429) {
        const wait = retryAfterMs === undefined ? '' : ` It asked to wait ${retryAfterMs} ms.`;
        return new RateLimitError(`The realtime handshake was refused with HTTP 429 (rate limited)${said}.${wait}`, { ...options, retryAfterMs });
      }
      const wait = retryAfterMs === undefined ? '' : ` It asked to wait ${retryAfterMs} ms.`;
      return new ConnectionError(`The realtime handshake was refused with HTTP ${status}${said}.${wait}`, {
        ...options,
        retryable: status >= 500 || status === 408,
      });
    }
    case 'dead':
      return new ConnectionError(
        `The realtime connection showed no sign of life for ${end.silentMs} ms (no pong, nothing received, nothing taken ` +
          'from the send buffer): it is considered dead.',
      );
    case 'closed': {
      const { code, reason, error } = end;
      if (error) {
        const permanent = PERMANENT_SOCKET_ERROR.test(`${(error as NodeJS.ErrnoException).code ?? ''} ${error.message}`);
        return new ConnectionError(`Realtime connection failed: ${describeCause(error, secret)}.`, {
          closeCode: code,
          retryable: !permanent,
          cause: error,
        });
      }
      const said = reason ? `: ${redactSecret(reason, secret)}` : '';
      return new ConnectionError(`The realtime service closed the connection (code ${code}${said})${started ? '' : ' before the session started'}.`, {
        closeCode: code,
        retryable: RETRYABLE_CLOSE_CODES.has(code),
      });
    }
  }
}

/**
 * The error for a translation session with no `session.created` within `waitedMs`
 * (`reconnecting`: of a reconnect attempt; `sawStarting`: the service said it was booting).
 */
export function sessionReadyTimeout(waitedMs: number, reconnecting: boolean, sawStarting: boolean): TimeoutError {
  if (sawStarting) {
    return new TimeoutError(
      `No session.created within ${waitedMs} ms. The service sent session.starting: the model is still booting; raise readyTimeoutMs.`,
      waitedMs,
    );
  }
  return new TimeoutError(`No session.created within ${waitedMs} ms${reconnecting ? ' of a reconnect attempt (reconnect.attemptTimeoutMs)' : ''}.`, waitedMs);
}

/** A server error followed by a close within this time is the cause of the close (else a warning). */
export const ERROR_CLOSE_GRACE_MS = 250;

/**
 * A service `error` event whose meaning depends on what follows: if the service closes the
 * connection right after it, it is the cause of the close (fatal); if the session goes on (another
 * event, or `graceMs` pass), it was a warning.
 */
export class PendingServerError {
  readonly #warn: (error: RtTranslateError) => void;
  readonly #secret: string;
  #pending: { message: string; code: number | string | undefined; error: RtTranslateError; timer: NodeJS.Timeout } | undefined;

  constructor(secret: string, warn: (error: RtTranslateError) => void) {
    this.#secret = secret;
    this.#warn = warn;
  }

  /** An error event arrived (a pending one before it was a warning). Returns its classification. */
  note(message: string, code: number | string | undefined): RtTranslateError {
    this.settle();
    const error = classifyServerError(message, code, this.#secret);
    this.#pending = { message, code, error, timer: setTimeout(() => this.settle(), ERROR_CLOSE_GRACE_MS) };
    return error;
  }

  /** The session went on: a pending error was a warning. */
  settle(): void {
    const pending = this.#pending;
    if (!pending) return;
    this.#pending = undefined;
    clearTimeout(pending.timer);
    this.#warn(pending.error);
  }

  /** The connection closed (with `closeCode`): a pending error is its cause, classified with the code. */
  takeAsCause(closeCode: number | undefined): RtTranslateError | undefined {
    const pending = this.#pending;
    if (!pending) return undefined;
    this.#pending = undefined;
    clearTimeout(pending.timer);
    return classifyServerError(pending.message, pending.code, this.#secret, closeCode);
  }

  /** Forgets a pending error without a warning (the stream is failing with it, or torn down). */
  discard(): void {
    if (this.#pending) clearTimeout(this.#pending.timer);
    this.#pending = undefined;
  }
}
