/**
 * Relay tokens as pure functions: minted and verified with explicit clocks and secrets, so each
 * verdict (valid, expired at the exact millisecond, tampered claims or signature, another
 * relay's secret, malformed) is checked without sockets or timers.
 */
import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../lib/errors.js';
import { DEFAULT_TOKEN_TTL_MS, MAX_TOKEN_TTL_MS, mintToken, resolveTokenSecret, verifyToken } from '../lib/relay/relay-tokens.js';

const SECRET = Buffer.from('a-relay-secret-of-at-least-32-bytes!!');
const OTHER = Buffer.from('another-relay-secret-of-32-bytes-or-more');
const NOW = 1_700_000_000_000;

/** The claims of a token, decoded (what a browser holding it can read). */
function claimsOf(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;
}

describe('minting and verifying', () => {
  it('a token is valid until its expiry, to the millisecond, and says its sessions and a random id', () => {
    const token = mintToken(SECRET, { ttlMs: 60_000, maxSessions: 2 }, 100, NOW);
    expect(token).toMatch(/^rtt1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
    const verdict = verifyToken(SECRET, token, NOW + 59_999);
    expect(verdict).toEqual({ valid: true, claims: { id: expect.stringMatching(/^[A-Za-z0-9_-]{16}$/), expiresAt: NOW + 60_000, maxSessions: 2 } });
    expect(verifyToken(SECRET, token, NOW + 60_000)).toEqual({ valid: false, reason: 'expired' });
    const other = mintToken(SECRET, { ttlMs: 60_000, maxSessions: 2 }, 100, NOW);
    expect(verifyToken(SECRET, other, NOW)).toMatchObject({ valid: true });
    expect(claimsOf(other).i).not.toBe(claimsOf(token).i);
  });

  it('defaults: ten minutes, and no maxSessions of its own (the relay decides)', () => {
    const token = mintToken(SECRET, {}, 100, NOW);
    expect(DEFAULT_TOKEN_TTL_MS).toBe(600_000);
    expect(verifyToken(SECRET, token, NOW)).toMatchObject({ valid: true, claims: { expiresAt: NOW + 600_000, maxSessions: undefined } });
  });

  it('carries nothing but its id, expiry and sessions (no secret, nothing about the service)', () => {
    const token = mintToken(SECRET, { ttlMs: 1000, maxSessions: 3 }, 100, NOW);
    expect(Object.keys(claimsOf(token)).sort()).toEqual(['e', 'i', 'm']);
    expect(token).not.toContain(SECRET.toString('base64url'));
  });

  it('another relay secret: refused as a bad signature', () => {
    const token = mintToken(OTHER, {}, 100, NOW);
    expect(verifyToken(SECRET, token, NOW)).toEqual({ valid: false, reason: 'signature' });
  });

  it('tampered claims (a later expiry, more sessions) with the old signature: refused', () => {
    const token = mintToken(SECRET, { ttlMs: 1000, maxSessions: 1 }, 100, NOW);
    const [prefix, , signature] = token.split('.');
    const forged = Buffer.from(JSON.stringify({ ...claimsOf(token), e: NOW + 10 * MAX_TOKEN_TTL_MS, m: 1000 })).toString('base64url');
    expect(verifyToken(SECRET, `${prefix}.${forged}.${signature}`, NOW)).toEqual({ valid: false, reason: 'signature' });
  });

  it('a tampered signature: refused; so is one a single character off', () => {
    const token = mintToken(SECRET, {}, 100, NOW);
    const last = token.at(-1) === 'A' ? 'B' : 'A';
    expect(verifyToken(SECRET, token.slice(0, -1) + last, NOW)).toEqual({ valid: false, reason: 'signature' });
  });

  it('the same signature spelled another way (the unused bits of its last character): refused', () => {
    const token = mintToken(SECRET, {}, 100, NOW);
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const twin = alphabet[alphabet.indexOf(token.at(-1)!) ^ 1]!; // differs only in a bit no byte uses
    const respelled = token.slice(0, -1) + twin;
    expect(Buffer.from(respelled.split('.')[2]!, 'base64url').equals(Buffer.from(token.split('.')[2]!, 'base64url'))).toBe(true);
    expect(verifyToken(SECRET, respelled, NOW)).toEqual({ valid: false, reason: 'signature' });
  });

  it('claims signed with the secret but not in the token shape of this version: malformed', () => {
    const claims = Buffer.from('{"i":"x","e":"later"}').toString('base64url');
    const signature = createHmac('sha256', SECRET).update(`rtt1.${claims}`).digest('base64url');
    expect(verifyToken(SECRET, `rtt1.${claims}.${signature}`, NOW)).toEqual({ valid: false, reason: 'malformed' });
  });

  it.for([
    ['empty', ''],
    ['another version', 'rtt2.abc.' + 'A'.repeat(43)],
    ['two parts', 'rtt1.abc'],
    ['not base64url', 'rtt1.a+b/c.' + 'A'.repeat(43)],
    ['a short signature', 'rtt1.abc.' + 'A'.repeat(42)],
    ['too long', 'rtt1.' + 'a'.repeat(600) + '.' + 'A'.repeat(43)],
  ] as const)('%s: malformed', ([, token]) => {
    expect(verifyToken(SECRET, token, NOW)).toEqual({ valid: false, reason: 'malformed' });
  });
});

describe('bounds and the secret', () => {
  it.for([
    ['ttlMs', { ttlMs: 0 }, 'Invalid ttlMs: expected an integer from 1 to 86400000 (got 0).'],
    ['ttlMs', { ttlMs: MAX_TOKEN_TTL_MS + 1 }, 'Invalid ttlMs: expected an integer from 1 to 86400000 (got 86400001).'],
    ['maxSessions', { maxSessions: 0 }, 'Invalid maxSessions: expected an integer from 1 to 100 (got 0).'],
    ['maxSessions', { maxSessions: 101 }, 'Invalid maxSessions: expected an integer from 1 to 100 (got 101).'],
    ['maxSessions', { maxSessions: 1.5 }, 'Invalid maxSessions: expected an integer from 1 to 100 (got 1.5).'],
  ] as const)('%s out of bounds: %j', ([field, options, message]) => {
    const error = (() => {
      try {
        mintToken(SECRET, options, 100, NOW);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(ValidationError);
    expect(error).toMatchObject({ field, message });
  });

  it('a secret shorter than 32 bytes is refused without being quoted', () => {
    const short = 'short-secret-xyz';
    expect(() => resolveTokenSecret(short)).toThrow(ValidationError);
    expect(() => resolveTokenSecret(short)).toThrow('Invalid secret: expected a string or Buffer of at least 32 bytes (e.g. randomBytes(32)) (got 16 bytes).');
    expect(() => resolveTokenSecret(12345)).toThrow('(got number).');
  });

  it("without a secret, one random secret for the process: two relays accept each other's tokens", () => {
    const a = resolveTokenSecret(undefined);
    const b = resolveTokenSecret(undefined);
    expect(a.length).toBe(32);
    expect(b).toBe(a);
    expect(verifyToken(b, mintToken(a, {}, 1, NOW), NOW)).toMatchObject({ valid: true });
  });
});

describe("a room's token", () => {
  it('says its room and role (r, p) and verifies with them; a token without them has no room', () => {
    const token = mintToken(SECRET, { ttlMs: 1000, room: 'keynote-2', role: 'listener', maxSessions: 300 }, 500, NOW);
    expect(claimsOf(token)).toMatchObject({ r: 'keynote-2', p: 'l', m: 300 });
    expect(verifyToken(SECRET, token, NOW)).toMatchObject({ valid: true, claims: { room: { id: 'keynote-2', role: 'listener' }, maxSessions: 300 } });
    const speaker = mintToken(SECRET, { room: 'keynote-2', role: 'speaker' }, 500, NOW);
    expect(verifyToken(SECRET, speaker, NOW)).toMatchObject({ valid: true, claims: { room: { id: 'keynote-2', role: 'speaker' } } });
    const plain = verifyToken(SECRET, mintToken(SECRET, {}, 100, NOW), NOW);
    expect(plain.valid && plain.claims.room).toBeUndefined();
  });

  it.for([
    [{ room: 'keynote' }, 'role'],
    [{ role: 'speaker' }, 'room'],
    [{ room: 'a b', role: 'listener' }, 'room'],
    [{ room: 'x'.repeat(65), role: 'listener' }, 'room'],
    [{ room: 'keynote', role: 'host' }, 'role'],
  ] as const)('%o: a ValidationError naming %s', ([options, field]) => {
    let caught: unknown;
    try {
      mintToken(SECRET, options as never, 100, NOW);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ValidationError);
    expect((caught as ValidationError).field).toBe(field);
  });

  it('claims of a room that are not well formed, even signed: malformed', () => {
    const signed = (claims: Record<string, unknown>): string => {
      const body = `rtt1.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
      return `${body}.${createHmac('sha256', SECRET).update(body).digest('base64url')}`;
    };
    expect(verifyToken(SECRET, signed({ i: 'x', e: NOW + 1000, r: 'room' }), NOW)).toEqual({ valid: false, reason: 'malformed' });
    expect(verifyToken(SECRET, signed({ i: 'x', e: NOW + 1000, r: 'a b', p: 'l' }), NOW)).toEqual({ valid: false, reason: 'malformed' });
    expect(verifyToken(SECRET, signed({ i: 'x', e: NOW + 1000, r: 'room', p: 's' }), NOW)).toMatchObject({ valid: true });
  });
});
