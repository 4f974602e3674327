/**
 * What the relay reads from a handshake before it upgrades, as pure functions of the request:
 * whether the page's origin may connect, the token it carries (a subprotocol, a header, the query),
 * the subprotocol to answer with, and the upstream URL (the service's, with the beta selectors
 * the browser asked for and nothing else of its query).
 */
import type { IncomingMessage } from 'node:http';
import { isLoopbackHost } from '../config.js';
import { normalizeRealtimeLanguage } from '../realtime/languages.js';
import type { RelayGrant } from './relay-options.js';
import type { SpeakerSetup } from './relay-room.js';
import { RELAY_SUBPROTOCOL, TOKEN_SUBPROTOCOL_PREFIX } from './subprotocols.js';

export { RELAY_SUBPROTOCOL, TOKEN_SUBPROTOCOL_PREFIX };
/** Query parameters passed on to the service (its beta model and mode selectors). */
const PASSED_QUERY = ['model', 'mode'] as const;

/** The subprotocols a handshake offers, in order. */
export function offeredSubprotocols(request: IncomingMessage): string[] {
  const header = request.headers['sec-websocket-protocol'];
  if (typeof header !== 'string') return [];
  return header
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '');
}

/**
 * The token a handshake carries: in a token subprotocol, in the `x-api-key` header (where a
 * server-side client of the service puts its key), or as `?token=`, in that order.
 */
export function handshakeToken(request: IncomingMessage, url: URL): string | undefined {
  const offered = offeredSubprotocols(request).find((p) => p.startsWith(TOKEN_SUBPROTOCOL_PREFIX));
  if (offered !== undefined) return offered.slice(TOKEN_SUBPROTOCOL_PREFIX.length);
  const header = request.headers['x-api-key'];
  if (typeof header === 'string') return header;
  return url.searchParams.get('token') ?? undefined;
}

/**
 * The subprotocol to answer with: `rt-translate` when offered, else the token's own (a browser
 * that offers subprotocols fails a handshake answered with none of them); none when neither was
 * offered.
 */
export function chooseSubprotocol(offered: ReadonlySet<string>): string | false {
  if (offered.has(RELAY_SUBPROTOCOL)) return RELAY_SUBPROTOCOL;
  for (const protocol of offered) if (protocol.startsWith(TOKEN_SUBPROTOCOL_PREFIX)) return protocol;
  return false;
}

/**
 * Whether a page from `origin` may connect. No `Origin` header: not a browser (browsers always
 * send it on a WebSocket handshake), so nothing for this check to protect; the credential
 * decides. `'*'`: any. A list: its origins only. By default: a page served by the same host
 * (`Host` header), or from a loopback host (development).
 */
export function originAllowed(origin: string | undefined, host: string | undefined, allowed: '*' | ReadonlySet<string> | undefined): boolean {
  if (origin === undefined || allowed === '*') return true;
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false; // `null` (a sandboxed frame, a file) and anything else that is not an origin
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return false;
  if (allowed !== undefined) return allowed.has(url.origin);
  return (host !== undefined && url.host === host.toLowerCase()) || isLoopbackHost(url.hostname);
}

/** The service's endpoint with the browser's `model` and `mode` (nothing else of its query: the token stays here). */
export function upstreamUrl(base: URL, requested: URL): URL {
  const url = new URL(base);
  for (const name of PASSED_QUERY) {
    const value = requested.searchParams.get(name);
    if (value !== null) url.searchParams.set(name, value);
  }
  return url;
}

/** An `authorize` answer that is a grant: caps of 1 or more, a key of at most 256 characters. */
export function isGrant(value: unknown): value is RelayGrant {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const { maxSessions, key } = value as RelayGrant;
  return (
    (maxSessions === undefined || (Number.isSafeInteger(maxSessions) && maxSessions >= 1)) &&
    (key === undefined || (typeof key === 'string' && key.length <= 256))
  );
}

/** A speaker's handshake query: `from`, and optionally the `languages` it offers, `model` and `mode`. */
export function speakerSetup(query: URLSearchParams): SpeakerSetup {
  const from = normalizeRealtimeLanguage(query.get('from') ?? undefined, 'from');
  const offered = query.get('languages');
  const languages = offered === null ? undefined : new Set(offered.split(',').map((tag, i) => normalizeRealtimeLanguage(tag.trim(), `languages[${i}]`)));
  return { from, languages, model: query.get('model') ?? undefined, mode: query.get('mode') ?? undefined };
}
