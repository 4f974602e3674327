/**
 * What a resumable download does after an attempt failed: a pure function of the failure, the
 * attempts in a row that brought no new byte, and the policy. `ResumableDownload` builds the
 * failure and the typed error; this decides, and the tests check it with tables.
 *
 * - Another attempt: after 408, 429 and 5xx (reason `status`), a failed connection (`connect`),
 *   a body cut short (`interrupted`), a timeout (`timeout`). The wait is the server's
 *   (`Retry-After`, `X-RateLimit-Reset`), at most 60 s; otherwise `retry.ts`'s back-off from
 *   `retryDelayMs`, doubling up to 5 s, with equal jitter.
 * - 403 (`expired`, no wait): from a URL the first one redirected to, the first one is asked
 *   again (it redirects anew); from a presigned URL with `refreshUrl`, a fresh URL is asked for.
 *   From an interface address (`urlKind: 'api'`) or without `refreshUrl`, it is final.
 * - Final at once: any other status, and a failure that says retrying cannot help (a TLS
 *   certificate). Final too once `maxAttempts` attempts in a row failed.
 */
import { AbortError, type RtTranslateError } from '../errors.js';
import { HttpTimeoutError } from './errors.js';
import { backoffDelay } from './retry.js';

/** Why a download makes another attempt. */
export type RetryReason = 'interrupted' | 'timeout' | 'expired' | 'status' | 'connect';

/** An attempt that failed, as the policy sees it. */
export type AttemptFailure =
  /** An answer with another status than 200 or 206 (a 416 that completes the file is no failure). */
  | { kind: 'status'; status: number; retryAfterMs: number | undefined; redirected: boolean }
  /** No answer (`request`), or a body cut short (`body`), with the typed error. */
  | { kind: 'network'; during: 'request' | 'body'; error: RtTranslateError };

export interface DownloadPolicy {
  urlKind: 'presigned' | 'api';
  /** A `refreshUrl` was given. */
  canRefresh: boolean;
  /** Attempts in a row without a new byte before giving up. */
  maxAttempts: number;
  /** First back-off, ms. */
  retryDelayMs: number;
}

export type DownloadDecision =
  | { action: 'fail' }
  /** `refresh`: ask `refreshUrl` for a fresh URL, then go on. */
  | { action: 'retry' | 'refresh'; reason: RetryReason; delayMs: number };

/** Cap of the back-off, ms. */
export const MAX_BACKOFF_MS = 5_000;
/** Cap of a wait the server asks for, ms. */
export const MAX_RETRY_AFTER_MS = 60_000;

const FAIL: DownloadDecision = Object.freeze({ action: 'fail' });

/** What kind of retry a failure calls for, before counting; undefined when it is final. */
export function classifyFailure(
  failure: AttemptFailure,
  policy: Pick<DownloadPolicy, 'urlKind' | 'canRefresh'>,
): { action: 'retry' | 'refresh'; reason: RetryReason; retryAfterMs?: number } | undefined {
  if (failure.kind === 'network') {
    const { error } = failure;
    if (!error.retryable && !(error instanceof AbortError)) return undefined;
    if (error instanceof HttpTimeoutError) return { action: 'retry', reason: 'timeout' };
    return { action: 'retry', reason: failure.during === 'request' ? 'connect' : 'interrupted' };
  }
  const { status } = failure;
  if (status === 403) {
    if (failure.redirected) return { action: 'retry', reason: 'expired' };
    return policy.urlKind === 'api' || !policy.canRefresh ? undefined : { action: 'refresh', reason: 'expired' };
  }
  if (status === 408 || status === 429 || status >= 500) {
    const asked = failure.retryAfterMs;
    return asked === undefined
      ? { action: 'retry', reason: 'status' }
      : { action: 'retry', reason: 'status', retryAfterMs: Math.min(Math.max(0, asked), MAX_RETRY_AFTER_MS) };
  }
  return undefined;
}

/**
 * The decision after the `failuresInARow`-th failed attempt in a row (1 for the first; an
 * attempt that brought new bytes starts the count again). `random` in [0, 1) is the jitter.
 */
export function decideAfterFailure(failure: AttemptFailure, failuresInARow: number, policy: DownloadPolicy, random: number): DownloadDecision {
  const kind = classifyFailure(failure, policy);
  if (kind === undefined || failuresInARow >= policy.maxAttempts) return FAIL;
  const backoff = { retries: policy.maxAttempts, minDelayMs: policy.retryDelayMs, maxDelayMs: MAX_BACKOFF_MS, factor: 2 };
  const delayMs = kind.reason === 'expired' ? 0 : (kind.retryAfterMs ?? backoffDelay(failuresInARow, backoff, random));
  return { action: kind.action, reason: kind.reason, delayMs };
}
