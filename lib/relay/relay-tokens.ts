/**
 * Relay tokens: short-lived permissions, handed to a browser, to open realtime sessions through
 * a relay that holds the service key. A token is `rtt1.<claims>.<signature>`: the claims are
 * base64url JSON (`i`, a random id; `e`, the expiry in epoch ms; `m`, the sessions it may hold at
 * once, when it says; `r` and `p`, the room and the role in it, for a room's token), the signature is base64url HMAC-SHA256 of `rtt1.<claims>` under the
 * relay's secret. Every character is one a WebSocket subprotocol may hold, so a token travels
 * in the query, in a subprotocol or in `auth.api_key`.
 *
 * Nothing is stored when a token is minted: verifying is a signature check (constant time)
 * and a clock comparison. A token cannot be revoked before it expires; keep them short.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { ValidationError } from '../errors.js';
import { describeReceived, intOption } from '../options.js';

/** The version prefix of every token. */
export const TOKEN_PREFIX = 'rtt1';
/** Longest `ttlMs` a token may be minted with: one day. */
export const MAX_TOKEN_TTL_MS = 24 * 60 * 60 * 1000;
/** The `ttlMs` of a token minted without one: ten minutes. */
export const DEFAULT_TOKEN_TTL_MS = 10 * 60 * 1000;
/** Shortest secret accepted, in bytes (HMAC-SHA256's block of entropy). */
export const MIN_SECRET_BYTES = 32;
/** Longer strings are not tokens of ours: refused before any hashing. */
const MAX_TOKEN_LENGTH = 512;
const TOKEN_SHAPE = /^rtt1\.([A-Za-z0-9_-]{1,400})\.([A-Za-z0-9_-]{43})$/;

/** A role in a room: the one `speaker` who sends audio, or a `listener` who receives one language. */
export type RoomRole = 'speaker' | 'listener';

/** Longest room id, in characters. */
export const MAX_ROOM_ID_LENGTH = 64;
const ROOM_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** Whether `value` is a room id: 1 to 64 letters, digits, `-` or `_`. */
export function isRoomId(value: unknown): value is string {
  return typeof value === 'string' && ROOM_ID.test(value);
}

export interface MintTokenOptions {
  /** How long the token opens sessions, in ms (1 to one day). Default 10 minutes. */
  ttlMs?: number;
  /**
   * Sessions the token may hold at once, up to the relay's `maxSessions`. For a listener's
   * token: its listener connections at once (one per language a page listens to; a link shared
   * by an audience needs as many as the audience), up to `rooms.maxListenersPerRoom`. Default:
   * the relay's `maxSessionsPerToken`.
   */
  maxSessions?: number;
  /**
   * A room's token: it opens connections to that room only (`rooms` path), never a session of
   * its own. 1 to 64 letters, digits, `-` or `_`. Needs `role`.
   */
  room?: string;
  /** The role a room's token admits: `speaker` (sends audio) or `listener` (receives). Needs `room`. */
  role?: RoomRole;
}

/** What a valid token says. */
export interface TokenClaims {
  /** The token's random id: its live sessions are counted under it. */
  id: string;
  /** Epoch ms after which it opens nothing. */
  expiresAt: number;
  /** Sessions it may hold at once, when it says. */
  maxSessions: number | undefined;
  /** A room's token: the room and the role it admits there. */
  room: { id: string; role: RoomRole } | undefined;
}

export type TokenVerdict = { valid: true; claims: TokenClaims } | { valid: false; reason: 'malformed' | 'signature' | 'expired' };

/** The process's secret for relays given none: tokens signed with it die with the process. */
let processSecret: Buffer | undefined;

/** Checks a relay's `secret` option: a string or bytes of at least 32 bytes; absent, the process's random secret. */
export function resolveTokenSecret(secret: unknown): Buffer {
  if (secret === undefined) return (processSecret ??= randomBytes(MIN_SECRET_BYTES));
  const bytes = typeof secret === 'string' ? Buffer.from(secret, 'utf8') : Buffer.isBuffer(secret) ? Buffer.from(secret) : undefined;
  if (bytes === undefined || bytes.length < MIN_SECRET_BYTES) {
    // Described by its length, never quoted: it is a secret, even when too short for one.
    const got = bytes !== undefined ? `${bytes.length} bytes` : typeof secret === 'object' && secret !== null ? 'an object' : typeof secret;
    throw new ValidationError('secret', `a string or Buffer of at least ${MIN_SECRET_BYTES} bytes (e.g. randomBytes(32))`, got);
  }
  return bytes;
}

function sign(secret: Buffer, signed: string): Buffer {
  return createHmac('sha256', secret).update(signed).digest();
}

/** Mints a token valid for `ttlMs` from `now`; `maxSessionsBound` is the most `maxSessions` may say. */
export function mintToken(secret: Buffer, options: MintTokenOptions, maxSessionsBound: number, now = Date.now()): string {
  if (options === null || typeof options !== 'object')
    throw new ValidationError('mintToken options', 'an object with ttlMs and maxSessions, both optional', describeReceived(options));
  const ttlMs = intOption(options.ttlMs, 'ttlMs', { min: 1, max: MAX_TOKEN_TTL_MS, fallback: DEFAULT_TOKEN_TTL_MS });
  const claims: { i: string; e: number; m?: number; r?: string; p?: 's' | 'l' } = { i: randomBytes(12).toString('base64url'), e: now + ttlMs };
  if (options.maxSessions !== undefined) claims.m = intOption(options.maxSessions, 'maxSessions', { min: 1, max: maxSessionsBound, fallback: 1 });
  if (options.room !== undefined || options.role !== undefined) {
    if (!isRoomId(options.room)) throw new ValidationError('room', 'a room id of 1 to 64 letters, digits, - or _ (with role)', describeReceived(options.room));
    if (options.role !== 'speaker' && options.role !== 'listener')
      throw new ValidationError('role', "'speaker' or 'listener' (with room)", describeReceived(options.role));
    claims.r = options.room;
    claims.p = options.role === 'speaker' ? 's' : 'l';
  }
  const signed = `${TOKEN_PREFIX}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
  return `${signed}.${sign(secret, signed).toString('base64url')}`;
}

/** Checks `token` against `secret` at `now`: its shape, its signature (in constant time), then its expiry. */
export function verifyToken(secret: Buffer, token: string, now = Date.now()): TokenVerdict {
  if (typeof token !== 'string' || token.length > MAX_TOKEN_LENGTH) return { valid: false, reason: 'malformed' };
  const shape = TOKEN_SHAPE.exec(token);
  if (!shape) return { valid: false, reason: 'malformed' };
  // The signature's text is compared, not its decoded bytes: base64url's last character carries
  // unused bits, so several spellings decode alike, and only the minted one is the token.
  const expected = Buffer.from(sign(secret, `${TOKEN_PREFIX}.${shape[1]}`).toString('base64url'));
  const given = Buffer.from(shape[2]!);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { valid: false, reason: 'signature' };
  let parsed: { i?: unknown; e?: unknown; m?: unknown; r?: unknown; p?: unknown };
  try {
    parsed = JSON.parse(Buffer.from(shape[1]!, 'base64url').toString('utf8')) as typeof parsed;
  } catch {
    return { valid: false, reason: 'malformed' };
  }
  const { i, e, m, r, p } = parsed ?? {};
  if (typeof i !== 'string' || typeof e !== 'number' || (m !== undefined && (!Number.isSafeInteger(m) || (m as number) < 1))) {
    return { valid: false, reason: 'malformed' };
  }
  const roomClaimed = r !== undefined || p !== undefined;
  if (roomClaimed && (!isRoomId(r) || (p !== 's' && p !== 'l'))) return { valid: false, reason: 'malformed' };
  if (now >= e) return { valid: false, reason: 'expired' };
  const room = roomClaimed ? { id: r as string, role: (p === 's' ? 'speaker' : 'listener') as RoomRole } : undefined;
  return { valid: true, claims: { id: i, expiresAt: e, maxSessions: m as number | undefined, room } };
}
