/**
 * The relay's options, checked and resolved once, before the relay attaches: every bad value is
 * a `ValidationError` or `ConfigError` naming the option and what it accepts, and no message
 * quotes the service key or the token secret. The upstream connection's options (key, URL,
 * reconnect, liveness) are the realtime streams' own, resolved by their checker.
 */
import type { IncomingMessage, Server as HttpServer } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import { ValidationError } from '../errors.js';
import { REALTIME_PATH } from '../config.js';
import { describeReceived, intOption } from '../options.js';
import { resolveConnectionOptions, withApiKey, type RealtimeConnectionOptions, type ResolvedConnectionOptions } from '../realtime/realtime-options.js';
import { MAX_FANOUT_TARGETS } from '../realtime/fanout-options.js';
import { resolveTokenSecret } from './relay-tokens.js';

/** What `authorize` may grant besides `true`: a cap on the sessions counted under `key`. */
export interface RelayGrant {
  /** Sessions at once under `key`. Default: `maxSessionsPerToken`. */
  maxSessions?: number;
  /**
   * Whom the session is counted for (a user id, say). Default: the connection's token when it
   * has one, else the caller's address.
   */
  key?: string;
}

/**
 * The application's own check of a handshake (its session cookie, say): `false` refuses it
 * (HTTP 401), `true` or a grant admits it, with or without a token.
 */
export type RelayAuthorize = (request: IncomingMessage) => boolean | RelayGrant | Promise<boolean | RelayGrant>;

/** What the relay takes of the realtime streams' connection options (the upstream side). */
export type RelayConnectionOptions = Pick<
  RealtimeConnectionOptions,
  'apiKey' | 'realtimeUrl' | 'allowInsecure' | 'headers' | 'readyTimeoutMs' | 'reconnect' | 'pingIntervalMs' | 'livenessTimeoutMs' | 'maxSocketBufferBytes'
>;

/**
 * Rooms: one speaker, many listeners, one upstream session per language someone listens to
 * (see `createRealtimeRelay`). Off unless given.
 */
export interface RelayRoomsOptions {
  /** Path of the rooms' WebSocket. Default `/v1/rooms`. */
  path?: string;
  /** Rooms at once (a room lives while its speaker or a listener is connected). Default 10. */
  maxRooms?: number;
  /** Listener connections at once in one room (one per language a page listens to). Default 500. */
  maxListenersPerRoom?: number;
  /** Languages translated at once in one room, one upstream session each (1 to 64). Default 8. */
  maxLanguagesPerRoom?: number;
  /**
   * How long a language's session is kept once its last listener has left, in ms (a listener
   * reloading the page finds it still running). Default 0: closed at once.
   */
  keepLanguageMs?: number;
  /**
   * Bytes a listener's socket may hold unsent: a listener further behind is dropped (close
   * 1013), so that it never holds back the session or the other listeners. Default 1 MiB
   * (about 20 s of audio).
   */
  maxListenerBufferBytes?: number;
  /** How long a listener may wait for a speaker (before the talk, between talks), in ms. Default 600 000. */
  listenerWaitMs?: number;
  /**
   * How long a language's session may keep the speaker waiting while the others take the audio,
   * in ms: past it that language is stopped (its listeners get an error), the others go on.
   * Default 15 000.
   */
  maxLagMs?: number;
}

export interface ResolvedRoomsOptions {
  path: string;
  maxRooms: number;
  maxListenersPerRoom: number;
  maxLanguagesPerRoom: number;
  keepLanguageMs: number;
  maxListenerBufferBytes: number;
  listenerWaitMs: number;
  maxLagMs: number;
}

export interface RealtimeRelayOptions extends RelayConnectionOptions {
  /** Rooms: a speaker's audio translated into the languages its listeners pick, one session per language. Off by default. */
  rooms?: boolean | RelayRoomsOptions;
  /** The HTTP(S) server whose upgrades on `path` the relay takes (Express: `app.listen()`'s value; Fastify: `fastify.server`). */
  server: HttpServer | HttpsServer;
  /** Path of the relay's WebSocket. Default `/v1/realtime`, the service's own. */
  path?: string;
  /** HMAC key of the tokens, at least 32 bytes. Default: random per process (tokens die with it). */
  secret?: string | Buffer;
  /** Origins whose pages may connect, or `'*'`. Default: the page's own host, and loopback pages. */
  allowedOrigins?: readonly string[] | '*';
  /** The application's own check of each handshake (see `RelayAuthorize`). */
  authorize?: RelayAuthorize;
  /** Accept a connection without a credential and read a token from its first `session.update`'s `auth.api_key`. Default true. */
  tokenInSessionUpdate?: boolean;
  /** Sessions at once through the relay. Default 100. */
  maxSessions?: number;
  /** Sessions at once per token that does not say its own `maxSessions`. Default 1. */
  maxSessionsPerToken?: number;
  /** Connections at once waiting for a token in their first `session.update`. Default 50. */
  maxPendingConnections?: number;
  /** Time a connection has for its first `session.update`, in ms. Default 10 000 (the service's own). */
  firstMessageTimeoutMs?: number;
  /** Ping interval towards the browser; one unanswered at the next closes the session, in ms. Default 10 000. */
  clientPingIntervalMs?: number;
  /** Bytes the browser's socket may hold unsent before the relay stops reading the service. Default 1 MiB. */
  maxClientBufferBytes?: number;
}

export interface ResolvedRelayOptions {
  server: HttpServer | HttpsServer;
  path: string;
  /** The upstream connection (URL without the browser's query, headers with the key). */
  connection: ResolvedConnectionOptions;
  /** The upstream options as the realtime streams take them (a room's sessions are a `RealtimeFanout`'s). */
  upstream: RelayConnectionOptions & { apiKey: string };
  /** Undefined: no rooms. */
  rooms: ResolvedRoomsOptions | undefined;
  secret: Buffer;
  /** `'*'`, or the origins allowed; undefined: same host and loopback. */
  allowedOrigins: '*' | ReadonlySet<string> | undefined;
  authorize: RelayAuthorize | undefined;
  tokenInSessionUpdate: boolean;
  maxSessions: number;
  maxSessionsPerToken: number;
  maxPendingConnections: number;
  firstMessageTimeoutMs: number;
  clientPingIntervalMs: number;
  maxClientBufferBytes: number;
}

function resolveServer(server: unknown): HttpServer | HttpsServer {
  const emitter = server as { on?: unknown; off?: unknown; listenerCount?: unknown } | null | undefined;
  if (
    emitter === null ||
    typeof emitter !== 'object' ||
    typeof emitter.on !== 'function' ||
    typeof emitter.off !== 'function' ||
    typeof emitter.listenerCount !== 'function'
  ) {
    throw new ValidationError(
      'server',
      'an http.Server or https.Server (Express: the value of app.listen(); Fastify: fastify.server)',
      describeReceived(server),
    );
  }
  return server as HttpServer;
}

function resolvePath(path: unknown, field = 'path'): string {
  if (path === undefined) return REALTIME_PATH;
  if (typeof path !== 'string' || !/^\/[^?#\s]*$/.test(path)) {
    throw new ValidationError(field, "a URL path starting with '/' (no query)", describeReceived(path));
  }
  return path.length > 1 ? path.replace(/\/+$/, '') : path;
}

/** An allowed origin as browsers send it: scheme, host and port (the default port left out), lowercase. */
function resolveOrigin(value: unknown, field: string): string {
  const accepted = "an origin such as 'https://app.example.com' (scheme, host and port only)";
  if (typeof value !== 'string') throw new ValidationError(field, accepted, describeReceived(value));
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ValidationError(field, accepted, describeReceived(value));
  }
  if (
    (url.protocol !== 'https:' && url.protocol !== 'http:') ||
    url.username ||
    url.password ||
    url.search ||
    url.hash ||
    (url.pathname !== '/' && url.pathname !== '')
  ) {
    throw new ValidationError(field, accepted, describeReceived(value));
  }
  return url.origin;
}

function resolveOrigins(value: unknown): ResolvedRelayOptions['allowedOrigins'] {
  if (value === undefined) return undefined;
  if (value === '*') return '*';
  if (!Array.isArray(value))
    throw new ValidationError('allowedOrigins', "'*' or an array of origins such as 'https://app.example.com'", describeReceived(value));
  return new Set(value.map((origin, i) => resolveOrigin(origin, `allowedOrigins[${i}]`)));
}

function resolveRooms(value: unknown, relayPath: string): ResolvedRoomsOptions | undefined {
  if (value === undefined || value === false) return undefined;
  if (value !== true && (value === null || typeof value !== 'object' || Array.isArray(value))) {
    throw new ValidationError('rooms', 'true, or an object of room options (path, maxRooms, maxListenersPerRoom, ...)', describeReceived(value));
  }
  const o = (value === true ? {} : value) as RelayRoomsOptions;
  const path = o.path === undefined ? '/v1/rooms' : resolvePath(o.path, 'rooms.path');
  if (path === relayPath) throw new ValidationError('rooms.path', `a path other than the relay's own (${relayPath})`, JSON.stringify(path));
  return {
    path,
    maxRooms: intOption(o.maxRooms, 'rooms.maxRooms', { min: 1, max: 100_000, fallback: 10 }),
    maxListenersPerRoom: intOption(o.maxListenersPerRoom, 'rooms.maxListenersPerRoom', { min: 1, max: 1_000_000, fallback: 500 }),
    maxLanguagesPerRoom: intOption(o.maxLanguagesPerRoom, 'rooms.maxLanguagesPerRoom', { min: 1, max: MAX_FANOUT_TARGETS, fallback: 8 }),
    keepLanguageMs: intOption(o.keepLanguageMs, 'rooms.keepLanguageMs', { min: 0, max: 3_600_000, fallback: 0 }),
    maxListenerBufferBytes: intOption(o.maxListenerBufferBytes, 'rooms.maxListenerBufferBytes', { min: 1024, fallback: 1024 * 1024 }),
    listenerWaitMs: intOption(o.listenerWaitMs, 'rooms.listenerWaitMs', { min: 1, max: 86_400_000, fallback: 600_000 }),
    maxLagMs: intOption(o.maxLagMs, 'rooms.maxLagMs', { min: 1, fallback: 15_000 }),
  };
}

/**
 * Checks every option and resolves the key, the upstream URL and the secret. Throws
 * `ValidationError` or `ConfigError` naming the option; never a message with the key in it.
 */
export function resolveRelayOptions(options: RealtimeRelayOptions): ResolvedRelayOptions {
  return withApiKey(options, 'an object with server', (apiKey) => {
    const server = resolveServer(options.server);
    if (options.authorize !== undefined && typeof options.authorize !== 'function') {
      throw new ValidationError(
        'authorize',
        'a function (request) => boolean | { maxSessions?, key? } | a promise of one',
        describeReceived(options.authorize),
      );
    }
    if (options.tokenInSessionUpdate !== undefined && typeof options.tokenInSessionUpdate !== 'boolean') {
      throw new ValidationError('tokenInSessionUpdate', 'true or false', describeReceived(options.tokenInSessionUpdate));
    }
    const maxSessions = intOption(options.maxSessions, 'maxSessions', { min: 1, max: 100_000, fallback: 100 });
    const path = resolvePath(options.path);
    const { realtimeUrl, allowInsecure, headers, readyTimeoutMs, reconnect, pingIntervalMs, livenessTimeoutMs, maxSocketBufferBytes } = options;
    return {
      server,
      path,
      connection: resolveConnectionOptions(options, apiKey, { path: REALTIME_PATH, readyTimeoutMs: 90_000 }),
      upstream: {
        apiKey,
        realtimeUrl,
        allowInsecure,
        headers,
        readyTimeoutMs: readyTimeoutMs ?? 90_000,
        reconnect,
        pingIntervalMs,
        livenessTimeoutMs,
        maxSocketBufferBytes,
      },
      rooms: resolveRooms(options.rooms, path),
      secret: resolveTokenSecret(options.secret),
      allowedOrigins: resolveOrigins(options.allowedOrigins),
      authorize: options.authorize,
      tokenInSessionUpdate: options.tokenInSessionUpdate ?? true,
      maxSessions,
      maxSessionsPerToken: intOption(options.maxSessionsPerToken, 'maxSessionsPerToken', { min: 1, max: maxSessions, fallback: 1 }),
      maxPendingConnections: intOption(options.maxPendingConnections, 'maxPendingConnections', { min: 0, max: 100_000, fallback: 50 }),
      firstMessageTimeoutMs: intOption(options.firstMessageTimeoutMs, 'firstMessageTimeoutMs', { min: 1, fallback: 10_000 }),
      clientPingIntervalMs: intOption(options.clientPingIntervalMs, 'clientPingIntervalMs', { min: 1, fallback: 10_000 }),
      maxClientBufferBytes: intOption(options.maxClientBufferBytes, 'maxClientBufferBytes', { min: 1, fallback: 1024 * 1024 }),
    };
  });
}
