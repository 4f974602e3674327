/**
 * What a realtime failure means: the class a caller acts on, and whether a new session may cure
 * it (the reconnect follows `retryable`). Pure functions over the service's words and codes.
 */
import { describe, expect, it } from 'vitest';
import { AuthError, BillingError, ConnectionError, ForbiddenError, RateLimitError, ServerError, VoiceRejectedError } from '../lib/errors.js';
import { classifyServerError, errorForConnectionEnd } from '../lib/realtime/server-errors.js';

const KEY = 'sk-live-0123456789abcdef';

describe('classifyServerError', () => {
  it.each([
    ['a 401 code', 'nope', 401, AuthError],
    ['a 402 code', 'stopped', 402, BillingError],
    ['a 429 code', 'slow down', 429, RateLimitError],
    ['a 403 code', 'not allowed', 403, ForbiddenError],
    ['billing words', 'Session stopped: the account has no credits left.', undefined, BillingError],
    ['voice words', 'Voice 5001 is not a cloned voice owned by this API key.', 403, VoiceRejectedError],
    ['key words', 'Invalid API key in auth.api_key.', undefined, AuthError],
    ['anything else', 'Something broke.', 500, ServerError],
  ])('%s gives its class', (_name, message, code, type) => {
    const error = classifyServerError(message, code, KEY);
    expect(error).toBeInstanceOf(type);
    expect(error.serverMessage).toBe(message);
  });

  it('never retries credentials, billing, voices; retries a generic failure only when the close says "try again"', () => {
    for (const [message, code] of [
      ['Invalid API key.', 401],
      ['no credits', 402],
      ['bad voice', 403],
    ] as const) {
      expect(classifyServerError(message, code, KEY, 1011).retryable).toBe(false);
    }
    expect(classifyServerError('overloaded', 500, KEY, 1013)).toMatchObject({ retryable: true, closeCode: 1013, status: 500 });
    expect(classifyServerError('overloaded', 500, KEY, 1008).retryable).toBe(false);
    expect(classifyServerError('overloaded', 500, KEY).retryable).toBe(false);
  });

  it('redacts the key when the service echoes it', () => {
    const error = classifyServerError(`Invalid API key ${KEY}.`, 401, KEY);
    expect(error.message).not.toContain(KEY);
    expect(error.serverMessage).toBe('Invalid API key [redacted].');
  });
});

describe('errorForConnectionEnd', () => {
  const refused = (status: number, body = '', retryAfterMs?: number) => errorForConnectionEnd({ kind: 'refused', status, retryAfterMs, body }, KEY, false);

  it.each([
    [401, AuthError, false],
    [403, ForbiddenError, false],
    [402, BillingError, false],
    [429, RateLimitError, true],
    [500, ConnectionError, true],
    [503, ConnectionError, true],
    [404, ConnectionError, false],
  ])('a handshake refused with %i gives its class and retryable', (status, type, retryable) => {
    const error = refused(status, JSON.stringify({ error: `refused, key ${KEY}`, status }));
    expect(error).toBeInstanceOf(type);
    expect(error).toMatchObject({ status, retryable });
    expect(error.message).not.toContain(KEY);
    expect(error.message).toContain(`HTTP ${status}`);
  });

  it('a 429 handshake is the same RateLimitError as an HTTP 429, with the wait asked for', () => {
    const error = refused(429, '{"error":"Too many sessions"}', 5_000);
    expect(error).toBeInstanceOf(RateLimitError);
    expect((error as RateLimitError).retryAfterMs).toBe(5_000);
    expect(error.code).toBe('RTT_RATE_LIMIT');
  });

  it.each([
    [1006, true],
    [1001, true],
    [1011, true],
    [1012, true],
    [1013, true],
    [1000, false],
    [1008, false],
  ])('a close with code %i is retryable %s, the code in closeCode (not status)', (code, retryable) => {
    const error = errorForConnectionEnd({ kind: 'closed', code, reason: `bye ${KEY}`, error: undefined }, KEY, true);
    expect(error).toBeInstanceOf(ConnectionError);
    expect(error).toMatchObject({ closeCode: code, status: undefined, retryable });
    expect(error.message).not.toContain(KEY);
  });

  it('a cut socket is retryable; a certificate problem is not', () => {
    const reset = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
    expect(errorForConnectionEnd({ kind: 'closed', code: 1006, reason: '', error: reset }, KEY, true).retryable).toBe(true);
    const cert = Object.assign(new Error('self-signed certificate'), { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' });
    expect(errorForConnectionEnd({ kind: 'closed', code: 1006, reason: '', error: cert }, KEY, true).retryable).toBe(false);
  });

  it('a dead connection says how long it was silent, and may be retried', () => {
    const error = errorForConnectionEnd({ kind: 'dead', silentMs: 15_004 }, KEY, true);
    expect(error).toBeInstanceOf(ConnectionError);
    expect(error.retryable).toBe(true);
    expect(error.message).toMatch(/no sign of life for 15004 ms/);
  });
});
