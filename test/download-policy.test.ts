/**
 * `decideAfterFailure`: what a resumable download does after a failed attempt, as tables of
 * failures and the decisions they get.
 */
import { describe, expect, it } from 'vitest';
import { AbortError, ProtocolError, type RtTranslateError } from '../lib/errors.js';
import {
  MAX_BACKOFF_MS,
  MAX_RETRY_AFTER_MS,
  decideAfterFailure,
  type AttemptFailure,
  type DownloadDecision,
  type DownloadPolicy,
} from '../lib/http/download-policy.js';
import { HttpConnectionError, HttpTimeoutError, HttpTlsError } from '../lib/http/errors.js';

const info = { method: 'GET', path: '/f.flac' };
const presigned: DownloadPolicy = { urlKind: 'presigned', canRefresh: true, maxAttempts: 5, retryDelayMs: 0 };
const status = (code: number, redirected = false, retryAfterMs?: number): AttemptFailure => ({ kind: 'status', status: code, retryAfterMs, redirected });
const network = (error: RtTranslateError, during: 'request' | 'body'): AttemptFailure => ({ kind: 'network', during, error });
const retry = (reason: string, delayMs = 0): DownloadDecision => ({ action: 'retry', reason, delayMs }) as DownloadDecision;
const fail: DownloadDecision = { action: 'fail' };

describe('decideAfterFailure', () => {
  describe('by status', () => {
    it.each([
      ['403 from a redirect target', status(403, true), presigned, retry('expired')],
      ['403 from a redirect target of an api URL', status(403, true), { ...presigned, urlKind: 'api' }, retry('expired')],
      ['403 from a presigned URL with refreshUrl', status(403), presigned, { action: 'refresh', reason: 'expired', delayMs: 0 }],
      ['403 from a presigned URL without refreshUrl', status(403), { ...presigned, canRefresh: false }, fail],
      ['403 from an api URL, refreshUrl or not', status(403), { ...presigned, urlKind: 'api' }, fail],
      ['408', status(408), presigned, retry('status')],
      ['429', status(429), presigned, retry('status')],
      ['500', status(500), presigned, retry('status')],
      ['503', status(503), presigned, retry('status')],
      ['503 with Retry-After 1500 ms', status(503, false, 1500), presigned, retry('status', 1500)],
      ['429 with a wait of a day (capped)', status(429, false, 86_400_000), presigned, retry('status', MAX_RETRY_AFTER_MS)],
      ['503 with a wait already past', status(503, false, -200), presigned, retry('status', 0)],
      ['401', status(401), presigned, fail],
      ['404', status(404), presigned, fail],
      ['416 that does not complete the file', status(416), presigned, fail],
      ['422', status(422), presigned, fail],
      ['304', status(304), presigned, fail],
    ] as const)('%s', (_name, failure, policy, decision) => {
      expect(decideAfterFailure(failure, 1, policy, 0.5)).toEqual(decision);
    });
  });

  describe('by network failure', () => {
    const reset = new HttpConnectionError('exchange', 'UND_ERR_SOCKET', 'other side closed', info);
    const refused = new HttpConnectionError('connect', 'ECONNREFUSED', 'connect ECONNREFUSED', info);
    it.each([
      ['a refused connection', network(refused, 'request'), retry('connect')],
      ['a reset before the answer', network(reset, 'request'), retry('connect')],
      ['a body cut short', network(reset, 'body'), retry('interrupted')],
      ['a headers timeout', network(new HttpTimeoutError('headers', 60_000, info), 'request'), retry('timeout')],
      ['a stalled body', network(new HttpTimeoutError('body', 30_000, info), 'body'), retry('timeout')],
      ['an abort of the attempt', network(new AbortError('GET /f.flac was aborted.'), 'body'), retry('interrupted')],
      ['an untrusted certificate', network(new HttpTlsError('DEPTH_ZERO_SELF_SIGNED_CERT', 'self-signed', info), 'request'), fail],
      ['a protocol failure', network(new ProtocolError('garbled'), 'body'), fail],
    ] as const)('%s', (_name, failure, decision) => {
      expect(decideAfterFailure(failure, 1, presigned, 0.5)).toEqual(decision);
    });
  });

  describe('by the count of failures in a row', () => {
    it.each([
      [1, 1, 'fail'],
      [1, 2, 'retry'],
      [4, 5, 'retry'],
      [5, 5, 'fail'],
      [6, 5, 'fail'],
    ] as const)('failure %i of maxAttempts %i: %s', (failures, maxAttempts, action) => {
      expect(decideAfterFailure(status(503), failures, { ...presigned, maxAttempts }, 0.5).action).toBe(action);
    });

    it('a refresh counts like any retry', () => {
      expect(decideAfterFailure(status(403), 3, { ...presigned, maxAttempts: 3 }, 0.5)).toEqual(fail);
    });
  });

  describe('the back-off: retryDelayMs doubling, capped at 5 s, a random point in the upper half', () => {
    it.each([
      // retryDelayMs, failures in a row, random, delay
      [250, 1, 0, 125],
      [250, 1, 0.5, 188],
      [250, 1, 0.999, 250],
      [250, 2, 0, 250],
      [250, 3, 0.5, 750],
      [250, 10, 0, MAX_BACKOFF_MS / 2],
      [250, 10, 0.999, 4998],
      [7000, 1, 0.999, 4998],
      [0, 4, 0.7, 0],
    ] as const)('retryDelayMs %i, failure %i, random %d: %i ms', (retryDelayMs, failures, random, delayMs) => {
      const decision = decideAfterFailure(
        network(new HttpConnectionError('exchange', 'ECONNRESET', 'reset', info), 'body'),
        failures,
        { ...presigned, retryDelayMs, maxAttempts: 20 },
        random,
      );
      expect(decision).toEqual(retry('interrupted', delayMs));
    });

    it('the server named wait wins over the back-off', () => {
      expect(decideAfterFailure(status(429, false, 2000), 3, { ...presigned, retryDelayMs: 250 }, 0)).toEqual(retry('status', 2000));
    });

    it('an expired URL is asked again at once', () => {
      expect(decideAfterFailure(status(403, true), 3, { ...presigned, retryDelayMs: 250 }, 0.9)).toEqual(retry('expired', 0));
    });
  });
});
