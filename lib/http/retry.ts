/**
 * The retry policy of the HTTP client, on top of p-retry.
 *
 * What is retried depends on what the request does:
 *
 * - A **read** (`GET` and the bulk lookup `POST /audio-separation-results`) is retried after
 *   408, 429, any 5xx, a connection failure (refused, reset, closed mid-response) and a
 *   connect, headers or body timeout.
 * - A **creation** (a request that starts paid work or makes something: `POST /translated-tts`,
 *   `/tts`, `/project-setup`, `/audio-separation`, `/tts-stream`, and the creations of the
 *   other modules, `/story-setup`, `/stream` and `/v1/stream` among them) and a **deletion**
 *   (`DELETE /delete-voice/{id}`, `/dictionaries/...`, `/stream/{id}`) are retried only where
 *   the service surely did not act on them. A deletion is not idempotent in its answers:
 *   repeated after a lost response, it would be answered 403 or 404 for a voice that was in fact
 *   deleted. Both are retried only:
 *     1. the connection was never made (`NO_CONNECTION_CODES`: refused, an unknown host, no
 *        route to it) or a connect timeout, so no byte of the request was sent;
 *     2. 429: the rate limiter answers before any work starts;
 *     3. 503 **with** a `Retry-After` (or `X-RateLimit-Reset`) header: the service says it is
 *        unavailable and when to come back. A 503 without one may come from a proxy after the
 *        request reached the service, so it is not retried.
 *   Never after another 5xx, a reset or a timeout once the request may have been sent.
 *
 * Delays: when the service names a wait (`Retry-After` in seconds or as an HTTP date, or
 * `X-RateLimit-Reset` as seconds to wait or as a Unix time in seconds), that wait is used as
 * is; if it is longer than `maxDelayMs`, the request is not retried and the error (with its
 * `retryAfterMs`) is thrown. Otherwise the delay is exponential, `minDelayMs * factor^(n-1)`
 * capped at `maxDelayMs`, with "equal jitter": a random point in the upper half of that delay.
 * Caller aborts end the wait at once.
 *
 * A **status read of a task wait** is a read whose budget is the wait's deadline, not a count
 * (`statusReadDelay`): a wait of hours must not end on a minute of 429s. It is read again after
 * the failures a read is retried after, however many, for as long as `maxWaitMs` leaves time;
 * the service's wait is honoured as given (the deadline bounds it), otherwise the back-off
 * above grows to the polling interval at most. `retry: false` (or `retries: 0`) ends the wait
 * at the first failed read.
 */
import pRetry from 'p-retry';
import { AbortError, RateLimitError, RtTranslateError } from '../errors.js';
import { numberOption } from '../options.js';
import { HttpConnectionError, HttpStatusError, HttpTimeoutError } from './errors.js';

export interface RetryOptions {
  /** Retries after the first attempt. Default 2. */
  retries?: number;
  /** First back-off delay, ms. Default 1000. */
  minDelayMs?: number;
  /** Cap of every delay, ms; also the longest server-requested wait honoured. Default 60000. */
  maxDelayMs?: number;
  /** Growth of the back-off per retry. Default 2. */
  factor?: number;
}

/** `false` turns retries off; an object tunes them. */
export type RetrySetting = false | RetryOptions;

export const DEFAULT_RETRY: Required<RetryOptions> = Object.freeze({
  retries: 2,
  minDelayMs: 1000,
  maxDelayMs: 60_000,
  factor: 2,
});

/**
 * A read may be repeated freely; a creation costs credits and a deletion cannot be told apart
 * from a failure once repeated, so both are retried only where the service did not act (see
 * the module doc).
 */
export type RequestKind = 'read' | 'create' | 'delete';

export { parseRetryAfter, type HeaderBag } from '../retry-after.js';

/**
 * Error codes that mean no connection was ever made, so no byte of the request was sent: the
 * connection was refused, the host is unknown (or its name could not be looked up now), or no
 * route leads to it. The one list both the client (which marks these failures phase
 * `connect`) and the policy below (which repeats creations after them) use.
 */
export const NO_CONNECTION_CODES: ReadonlySet<string> = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL']);

/** True when `error` proves the service did not act on the request (see the module doc). */
export function serviceDidNotAct(error: unknown): boolean {
  if (error instanceof RateLimitError) return true;
  if (error instanceof HttpStatusError) return error.unavailable;
  if (error instanceof HttpConnectionError) return error.phase === 'connect' && NO_CONNECTION_CODES.has(error.syscall ?? '');
  if (error instanceof HttpTimeoutError) return error.phase === 'connect';
  return false;
}

/**
 * Whether the policy retries `error` for a request of `kind`. An error that says retrying cannot
 * help (`retryable: false`, for example a TLS certificate failure) is never retried.
 */
export function isRetryable(error: unknown, kind: RequestKind): boolean {
  if (!(error instanceof RtTranslateError) || !error.retryable) return false;
  if (kind !== 'read') return serviceDidNotAct(error);
  if (error instanceof RateLimitError) return true;
  if (error instanceof HttpStatusError) return error.retryable;
  if (error instanceof HttpConnectionError || error instanceof HttpTimeoutError) return true;
  return false;
}

/** The wait the service asked for with this failure (`Retry-After`, `X-RateLimit-Reset`), ms. */
export function askedDelay(error: unknown): number | undefined {
  return error instanceof RateLimitError || error instanceof HttpStatusError ? error.retryAfterMs : undefined;
}

/**
 * A status read of a task wait failed with `error`, the `failuresInARow`-th failure in a row:
 * the delay before the wait reads the status again, or undefined when the failure ends the wait
 * (a failure a read is not retried after, such as 401, 403, 404 or 422; or retries turned
 * off). No count bounds these retries: the wait's deadline does (see the module doc). The
 * service's wait is used, but never less than `minDelayMs`; otherwise the back-off, capped at
 * `capMs` (the wait's polling interval) and `maxDelayMs`.
 */
export function statusReadDelay(
  error: unknown,
  failuresInARow: number,
  policy: Required<RetryOptions> | false,
  capMs: number,
  random: number = Math.random(),
): number | undefined {
  if (policy === false || policy.retries === 0 || !isRetryable(error, 'read')) return undefined;
  const asked = askedDelay(error);
  // The service's wait, but never less than `minDelayMs`: nothing bounds the count of these
  // reads, so a `Retry-After: 0` (or a reset time already past) must not make them a busy loop.
  if (asked !== undefined) return Math.max(asked, policy.minDelayMs);
  return backoffDelay(failuresInARow, { ...policy, maxDelayMs: Math.min(policy.maxDelayMs, capMs) }, random);
}

/** Back-off before retry number `retry` (1-based), with equal jitter; `random` in [0, 1). */
export function backoffDelay(retry: number, options: Required<RetryOptions>, random: number = Math.random()): number {
  const base = Math.min(options.maxDelayMs, options.minDelayMs * options.factor ** Math.max(0, retry - 1));
  return Math.round(base / 2 + (base / 2) * random);
}

/** The retry options with defaults filled in, or `false`; a `ValidationError` naming the option for nonsense. */
export function resolveRetry(setting: RetrySetting | undefined): Required<RetryOptions> | false {
  if (setting === false) return false;
  const given: RetryOptions = setting ?? {};
  const merged = { ...DEFAULT_RETRY, ...given };
  for (const key of ['retries', 'minDelayMs', 'maxDelayMs', 'factor'] as const) {
    numberOption(given[key], `retry.${key}`, { min: 0, fallback: DEFAULT_RETRY[key] });
  }
  return merged;
}

function waitFor(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(new AbortError());
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(new AbortError());
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export interface RetryInfo {
  /** The failure that is being retried. */
  error: RtTranslateError;
  /** 1 for the first retry. */
  retry: number;
  /** Wait before it, ms. */
  delayMs: number;
}

export interface WithRetryOptions {
  kind: RequestKind;
  retry: RetrySetting | undefined;
  signal?: AbortSignal;
  /** Called before each wait; for logs and tests. */
  onRetry?: (info: RetryInfo) => void;
  /** Source of jitter in [0, 1); tests pass a constant. */
  random?: () => number;
  /** Asked before each retry: false when the request cannot be sent again (a one-shot upload already read). */
  canRetry?: () => boolean;
}

/**
 * Runs `attempt` under the policy. The error of the last attempt is thrown unchanged, so the
 * caller sees the typed error of what actually went wrong.
 */
export async function withRetry<T>(attempt: (attemptNumber: number) => Promise<T>, options: WithRetryOptions): Promise<T> {
  const policy = resolveRetry(options.retry);
  if (policy === false || policy.retries === 0) return attempt(1);
  const random = options.random ?? Math.random;
  try {
    return await pRetry(attempt, {
      retries: policy.retries,
      // p-retry's own delay is off: shouldRetry below waits, so the server's wait can be used.
      minTimeout: 0,
      maxTimeout: 0,
      signal: options.signal,
      shouldRetry: async ({ error, retriesConsumed }) => {
        if (!isRetryable(error, options.kind)) return false;
        if (options.canRetry && !options.canRetry()) return false;
        const asked = askedDelay(error);
        if (asked !== undefined && asked > policy.maxDelayMs) return false;
        const delayMs = asked ?? backoffDelay(retriesConsumed + 1, policy, random());
        options.onRetry?.({ error: error as RtTranslateError, retry: retriesConsumed + 1, delayMs });
        await waitFor(delayMs, options.signal);
        return true;
      },
    });
  } catch (error) {
    if (options.signal?.aborted && !(error instanceof RtTranslateError)) throw new AbortError(undefined, { cause: error });
    throw error;
  }
}
