/**
 * `createRealtimeRelay`: the realtime service for browsers, through the application's own
 * server. A page cannot hold the service key, so it connects to the relay instead, with a
 * short-lived token the application minted for it (`relay.mintToken()`), or with the
 * application's own authorization (`authorize`); the relay opens the session upstream with the
 * key and passes the protocol through both ways, unchanged but for the credential.
 *
 * The handshake is judged before the upgrade, in this order: the path (other paths are left to
 * the server's other listeners), the page's origin (403), the token in a subprotocol or the
 * query (401 when it is not valid or has expired), `authorize` (401 when it says no, 503 when it
 * fails), then the caps (429). A connection without a credential is upgraded only when tokens
 * may come in the first `session.update`, and counts against `maxPendingConnections` until then.
 * Nothing is connected upstream for a connection that is refused. The rest is `RelaySession`.
 *
 * With `rooms`, a second path (`/v1/rooms`) takes a room's speaker and its listeners, each with a
 * room's token (`mintToken({ room, role })`) or `authorize`; judged in the same order, then the
 * role's parameters (400), a second speaker (409), a language not offered (403) and the rooms'
 * caps (429). The rest is `RelayRoom`: one upstream session per language listened to.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { SlotCounter, type SlotClaim } from '../integrations/slot-counter.js';
import { MAX_CLIENT_EVENT_BYTES } from '../realtime/codec.js';
import { refuseUpgrade } from '../realtime/handshake-refusal.js';
import { chooseSubprotocol, handshakeToken, isGrant, originAllowed, speakerSetup, upstreamUrl } from './relay-admission.js';
import { PENDING, SESSIONS, capMessage, capReason, sessionClaims, tokenRefusal } from './relay-caps.js';
import { resolveRelayOptions, type RealtimeRelayOptions, type RelayGrant, type ResolvedRelayOptions, type ResolvedRoomsOptions } from './relay-options.js';
import { RelaySession, type RelayRefusal, type RelaySessionContext } from './relay-session.js';
import { isRoomId, mintToken, verifyToken, type MintTokenOptions, type TokenClaims } from './relay-tokens.js';
import { RelayRoom, type SpeakerSetup } from './relay-room.js';
import type { RoomListener } from './room-listener.js';
import type { RoomSpeaker } from './room-speaker.js';
import { ValidationError } from '../errors.js';
import { normalizeRealtimeLanguage, type RealtimeLanguage } from '../realtime/languages.js';

/**
 * Largest frame read from a browser. Events over the service's 1 MiB limit are read up to this
 * size and answered with an `error` event (what the service itself would answer); a larger
 * frame closes the connection (1009) without being read.
 */
export const MAX_CLIENT_FRAME_BYTES = 2 * MAX_CLIENT_EVENT_BYTES;

export interface RelayStats {
  /** Browser connections holding a session slot (admitted by a token or `authorize`), before their first message or relayed. */
  sessions: number;
  /** Connections waiting for a token in their first `session.update`. */
  pending: number;
  /** Sessions with an upstream connection open or opening. */
  upstream: number;
  /** Sessions whose browser the relay has stopped reading, because the service (or the session's start) is behind. */
  clientsPaused: number;
  /** Upstream sessions re-established after a drop, in all. */
  reconnects: number;
  /**
   * Bytes the relay holds for its sessions now: what the sockets both ways have not sent yet,
   * input audio kept to send or for a replay, frames waiting their turn.
   */
  bufferedBytes: number;
  /** Client events refused with an `error` event (over a limit, not JSON), in all. */
  refusedEvents: number;
  /** Connections refused at the handshake or closed by the relay, by reason, in all. */
  refused: Record<RelayRefusal, number>;
  /** Rooms, when the relay has them. */
  rooms: RelayRoomStats | undefined;
}

/** The relay's rooms now. */
export interface RelayRoomStats {
  rooms: number;
  /** Speakers connected. */
  speakers: number;
  /** Listener connections (one per language a page listens to). */
  listeners: number;
  /** Upstream sessions running, one per language of a room. */
  languages: number;
}

const REFUSALS: readonly RelayRefusal[] = [
  'origin',
  'unauthorized',
  'expired',
  'authorize',
  'maxSessions',
  'maxSessionsPerToken',
  'maxSessionsPerKey',
  'maxPendingConnections',
  'firstMessage',
  'protocol',
  'unresponsive',
  'closing',
  'maxRooms',
  'maxListenersPerRoom',
  'maxLanguagesPerRoom',
  'speakerPresent',
  'language',
  'listenerSent',
  'slowListener',
];

/** An `authorize` that has not answered by then refuses the handshake (503). */
type AuthorizeOutcome = { grant: RelayGrant | false } | { failed: true };

export class RealtimeRelay {
  readonly #o: ResolvedRelayOptions;
  readonly #wss: WebSocketServer;
  readonly #slots = new SlotCounter();
  readonly #sessions = new Set<RelaySession>();
  readonly #rooms = new Map<string, RelayRoom>();
  /** Rooms closing after the relay's `close()`. */
  readonly #roomsClosing: Array<Promise<void>> = [];
  /** Sockets whose handshake waits on `authorize`. */
  readonly #handshaking = new Set<Duplex>();
  readonly #refused = Object.fromEntries(REFUSALS.map((reason) => [reason, 0])) as Record<RelayRefusal, number>;
  #refusedEvents = 0;
  /** Reconnects of sessions that have ended. */
  #pastReconnects = 0;
  #closing: Promise<void> | undefined;

  constructor(options: RealtimeRelayOptions) {
    this.#o = resolveRelayOptions(options);
    this.#wss = new WebSocketServer({
      noServer: true,
      clientTracking: false,
      perMessageDeflate: false,
      maxPayload: MAX_CLIENT_FRAME_BYTES,
      handleProtocols: (protocols) => chooseSubprotocol(protocols),
    });
    this.#o.server.on('upgrade', this.#onUpgrade);
  }

  /** The path the relay answers on. */
  get path(): string {
    return this.#o.path;
  }

  /** The path of the rooms, when the relay has them. */
  get roomsPath(): string | undefined {
    return this.#o.rooms?.path;
  }

  get stats(): RelayStats {
    let upstream = 0;
    let reconnects = this.#pastReconnects;
    let bufferedBytes = 0;
    let clientsPaused = 0;
    for (const session of this.#sessions) {
      if (session.relaying) upstream += 1;
      if (session.inputPaused) clientsPaused += 1;
      reconnects += session.reconnects;
      bufferedBytes += session.bufferedBytes;
    }
    let rooms: RelayRoomStats | undefined;
    if (this.#o.rooms) {
      rooms = { rooms: this.#rooms.size, speakers: 0, listeners: 0, languages: 0 };
      for (const room of this.#rooms.values()) {
        if (room.speakerConnected) rooms.speakers += 1;
        if (room.speakerPaused) clientsPaused += 1;
        rooms.listeners += room.listeners;
        rooms.languages += room.languages;
        upstream += room.languages;
        reconnects += room.reconnects;
        bufferedBytes += room.bufferedBytes;
      }
    }
    return {
      sessions: this.#slots.count(SESSIONS),
      pending: this.#slots.count(PENDING),
      upstream,
      clientsPaused,
      reconnects,
      bufferedBytes,
      refusedEvents: this.#refusedEvents,
      refused: { ...this.#refused },
      rooms,
    };
  }

  /**
   * A token for one browser: it opens sessions through this relay (or any relay with the same
   * `secret`) until `ttlMs` has passed, at most `maxSessions` at once. Mint one per signed-in
   * user and page load, behind the application's own login. With `room` and `role`, it opens
   * connections to that room in that role only (a speaker's or a listener's), never a session.
   *
   * @throws ValidationError for a `ttlMs` or `maxSessions` out of bounds, or a bad `room` or `role`.
   */
  mintToken(options: MintTokenOptions = {}): string {
    // A listener's token may be shared by a whole audience: its cap is bounded by the room's.
    const listenerBound = options?.role === 'listener' && this.#o.rooms ? this.#o.rooms.maxListenersPerRoom : undefined;
    return mintToken(this.#o.secret, options, listenerBound ?? this.#o.maxSessions);
  }

  /** Closes every session (browsers get 1001) and detaches from the server. Resolves once all are closed. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#o.server.off('upgrade', this.#onUpgrade);
      for (const socket of this.#handshaking) socket.destroy();
      await Promise.all([...this.#sessions].map((session) => session.shutdown()));
      await Promise.all([...[...this.#rooms.values()].map((room) => room.shutdown()), ...this.#roomsClosing]);
      this.#rooms.clear();
      await new Promise<void>((resolve) => this.#wss.close(() => resolve()));
    })();
    return this.#closing;
  }

  readonly #onUpgrade = (request: IncomingMessage, socket: Duplex, head: Buffer): void => {
    const url = new URL(request.url ?? '/', 'http://relay');
    const path = url.pathname.length > 1 ? url.pathname.replace(/\/+$/, '') : url.pathname;
    const rooms = this.#o.rooms;
    if (rooms && path === rooms.path) {
      this.#admitRoom(request, socket, head, url, rooms).catch(() => socket.destroy());
      return;
    }
    if (path !== this.#o.path) {
      // Another listener's path; when there is none, nobody else would ever answer.
      if (this.#o.server.listenerCount('upgrade') === 1) refuseUpgrade(socket, 404, 'No WebSocket endpoint at this path.');
      return;
    }
    this.#admit(request, socket, head, url).catch(() => socket.destroy());
  };

  #refuse(socket: Duplex, reason: RelayRefusal, status: number, message: string): void {
    this.#refused[reason] += 1;
    refuseUpgrade(socket, status, message);
  }

  /**
   * What every handshake passes first, sessions and rooms alike: the relay is open, the origin
   * is allowed, a presented token is valid. The token's claims (undefined when none was
   * presented), or null once the socket has been refused.
   */
  #checkHandshake(request: IncomingMessage, socket: Duplex, url: URL): TokenClaims | undefined | null {
    if (this.#closing) {
      this.#refuse(socket, 'closing', 503, 'The relay is shutting down.');
      return null;
    }
    if (!originAllowed(request.headers.origin, request.headers.host, this.#o.allowedOrigins)) {
      this.#refuse(socket, 'origin', 403, "This page's origin may not connect to the relay.");
      return null;
    }
    const presented = handshakeToken(request, url);
    if (presented === undefined) return undefined;
    const verdict = verifyToken(this.#o.secret, presented);
    if (verdict.valid) return verdict.claims;
    const { refusal, message, code } = tokenRefusal(verdict.reason);
    this.#refuse(socket, refusal, code, message);
    return null;
  }

  async #admit(request: IncomingMessage, socket: Duplex, head: Buffer, url: URL): Promise<void> {
    const o = this.#o;
    const token = this.#checkHandshake(request, socket, url);
    if (token === null) return;
    if (token?.room)
      return this.#refuse(socket, 'unauthorized', 401, "This token is a room's: it connects to the room's path only, not to a session of its own.");
    const grant = await this.#granted(request, socket);
    if (grant === null) return;
    const pending = token === undefined && grant === undefined;
    if (pending && !o.tokenInSessionUpdate) {
      return this.#refuse(socket, 'unauthorized', 401, 'No relay token: pass it as ?token= or in the subprotocol rt-translate.token.<token>.');
    }
    const holder = {
      claims: pending ? [[PENDING, o.maxPendingConnections] as const] : sessionClaims(this.#o, token, grant, request.socket.remoteAddress ?? ''),
    };
    const full = this.#slots.take(holder.claims);
    if (full !== undefined) {
      const reason = capReason(full);
      return this.#refuse(socket, reason, 429, capMessage(reason, this.#o));
    }
    let released = false;
    const release = (): void => {
      if (!released) this.#slots.release(holder.claims);
      released = true;
    };
    // Until the upgrade completes, the slots go with the socket (`ws` may refuse a bad handshake itself).
    socket.once('close', release);
    this.#wss.handleUpgrade(request, socket, head, (ws: WebSocket) => {
      socket.off('close', release);
      if (this.#closing) {
        ws.terminate();
        release();
        return;
      }
      const context: RelaySessionContext = {
        options: o,
        upstreamUrl: upstreamUrl(o.connection.url, url),
        admitLate: (late) => {
          const admitted = this.#admitLate(late, holder.claims);
          if ('claims' in admitted) holder.claims = admitted.claims;
          return 'claims' in admitted ? undefined : admitted;
        },
        refused: (reason) => (this.#refused[reason] += 1),
        refusedEvent: () => (this.#refusedEvents += 1),
      };
      const session = new RelaySession(ws, context, pending);
      this.#sessions.add(session);
      void session.closed.then(() => {
        this.#sessions.delete(session);
        this.#pastReconnects += session.reconnects;
        release();
      });
    });
    return undefined;
  }

  /**
   * A room's handshake: the origin, the credential (a room's token, or `authorize` with the room
   * and role in the query), the role's parameters, then the caps; all before the upgrade.
   */
  async #admitRoom(request: IncomingMessage, socket: Duplex, head: Buffer, url: URL, rooms: ResolvedRoomsOptions): Promise<void> {
    const token = this.#checkHandshake(request, socket, url);
    if (token === null) return;
    const query = url.searchParams;
    if (token !== undefined) {
      const claimed = token.room;
      if (!claimed)
        return this.#refuse(socket, 'unauthorized', 401, 'This token opens sessions, not rooms: the application mints a room token with { room, role }.');
      if (query.has('room') && query.get('room') !== claimed.id) return this.#refuse(socket, 'unauthorized', 403, 'This token is for another room.');
      if (query.has('role') && query.get('role') !== claimed.role)
        return this.#refuse(socket, 'unauthorized', 403, `This token admits a ${claimed.role} only.`);
    }
    const grant = await this.#granted(request, socket);
    if (grant === null) return;
    if (token === undefined && grant === undefined) {
      return this.#refuse(socket, 'unauthorized', 401, 'No room token: pass it as ?token= or in the subprotocol rt-translate.token.<token>.');
    }
    const roomId = token?.room?.id ?? query.get('room');
    const role = token?.room?.role ?? query.get('role');
    if (!isRoomId(roomId)) return this.#refuse(socket, 'protocol', 400, 'room: a room id of 1 to 64 letters, digits, - or _ is needed (?room=).');
    if (role !== 'speaker' && role !== 'listener') return this.#refuse(socket, 'protocol', 400, "role: 'speaker' or 'listener' is needed (?role=).");
    let speaker: SpeakerSetup | undefined;
    let lang: RealtimeLanguage | undefined;
    try {
      if (role === 'listener') lang = normalizeRealtimeLanguage(query.get('lang') ?? undefined, 'lang');
      else speaker = speakerSetup(query);
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      return this.#refuse(socket, 'protocol', 400, error.message);
    }
    const existing = this.#rooms.get(roomId);
    if (!existing && this.#rooms.size >= rooms.maxRooms)
      return this.#refuse(socket, 'maxRooms', 429, `The relay has its most rooms at once (${rooms.maxRooms}); try again later.`);
    if (speaker && existing?.speaking)
      return this.#refuse(socket, 'speakerPresent', 409, 'This room has a speaker already (or its last talk is still finishing).');
    if (lang && existing) {
      const refusal = existing.listenerRefusal(lang);
      if (refusal) return this.#refuse(socket, refusal.reason, refusal.status, refusal.message);
    }
    const claims: SlotClaim[] = sessionClaims(this.#o, token, grant, request.socket.remoteAddress ?? '').filter(([key]) => key !== SESSIONS);
    if (lang) claims.push([`room ${roomId}`, rooms.maxListenersPerRoom]);
    const full = this.#slots.take(claims);
    if (full !== undefined) {
      const reason = full.startsWith('room ') ? 'maxListenersPerRoom' : capReason(full);
      const message =
        reason === 'maxListenersPerRoom'
          ? `This room has its most listeners at once (${rooms.maxListenersPerRoom}); try again later.`
          : capMessage(reason, this.#o);
      return this.#refuse(socket, reason, 429, message);
    }
    let released = false;
    const release = (): void => {
      if (!released) this.#slots.release(claims);
      released = true;
    };
    socket.once('close', release);
    this.#wss.handleUpgrade(request, socket, head, (ws: WebSocket) => {
      socket.off('close', release);
      let room = this.#rooms.get(roomId);
      // The room may have changed while the upgrade completed.
      if (this.#closing || (speaker && room?.speaking) || (!room && this.#rooms.size >= rooms.maxRooms)) {
        ws.terminate();
        release();
        return;
      }
      if (!room) {
        room = this.#newRoom(roomId, rooms);
        this.#rooms.set(roomId, room);
      }
      let connection: RoomSpeaker | RoomListener;
      try {
        connection = speaker ? room.addSpeaker(ws, speaker) : room.addListener(ws, lang!);
      } catch (error) {
        // A fault of the relay's own: the browser is told, the slots given back.
        ws.close(1011, `The relay could not join this room: ${error instanceof Error ? error.message : String(error)}`.slice(0, 120));
        release();
        return;
      }
      void connection.closed.then(release);
    });
    return undefined;
  }

  #newRoom(id: string, rooms: ResolvedRoomsOptions): RelayRoom {
    return new RelayRoom(id, {
      options: this.#o,
      rooms,
      dropped: (reason) => (this.#refused[reason === 'sent' ? 'listenerSent' : reason === 'slow' ? 'slowListener' : 'unresponsive'] += 1),
      refusedEvent: () => (this.#refusedEvents += 1),
      unresponsive: () => (this.#refused.unresponsive += 1),
      emptied: (room) => {
        if (this.#rooms.get(room.id) === room) this.#rooms.delete(room.id);
      },
    });
  }

  /** What `authorize` grants (undefined without `authorize`), or null once the handshake is refused for it or gone. */
  async #granted(request: IncomingMessage, socket: Duplex): Promise<RelayGrant | undefined | null> {
    if (!this.#o.authorize) return undefined;
    const outcome = await this.#authorize(request, socket);
    if (socket.destroyed) return null;
    if (this.#closing) this.#refuse(socket, 'closing', 503, 'The relay is shutting down.');
    else if ('failed' in outcome) this.#refuse(socket, 'authorize', 503, 'Authorization is unavailable; try again later.');
    else if (outcome.grant === false) this.#refuse(socket, 'unauthorized', 401, 'Not authorized to use the relay.');
    else return outcome.grant;
    return null;
  }

  /** `authorize`'s answer, bounded by `firstMessageTimeoutMs` and the socket; a throw, a wrong value or no answer in time is a failure. */
  async #authorize(request: IncomingMessage, socket: Duplex): Promise<AuthorizeOutcome> {
    this.#handshaking.add(socket);
    let timer: NodeJS.Timeout | undefined;
    let gone: (() => void) | undefined;
    try {
      const answer = await Promise.race([
        Promise.resolve().then(() => this.#o.authorize!(request)),
        new Promise<'late'>((resolve) => {
          timer = setTimeout(() => resolve('late'), this.#o.firstMessageTimeoutMs);
          // A caller that leaves (or a relay that closes) needs no answer.
          gone = () => resolve('late');
          socket.once('close', gone);
        }),
      ]);
      if (answer === true) return { grant: {} };
      if (answer === false) return { grant: false };
      return isGrant(answer) ? { grant: answer } : { failed: true };
    } catch {
      return { failed: true };
    } finally {
      clearTimeout(timer);
      if (gone) socket.off('close', gone);
      this.#handshaking.delete(socket);
    }
  }

  /** A pending connection's token, from its first `session.update`: verified, then its slots taken instead of the pending one. */
  #admitLate(
    token: string | undefined,
    pendingClaims: readonly SlotClaim[],
  ): { claims: SlotClaim[] } | { refusal: RelayRefusal; message: string; code: number } {
    if (token === undefined) {
      return { refusal: 'unauthorized', message: 'No relay token: send it in auth.api_key of the first session.update.', code: 401 };
    }
    const verdict = verifyToken(this.#o.secret, token);
    if (!verdict.valid) return tokenRefusal(verdict.reason);
    const claims = sessionClaims(this.#o, verdict.claims, undefined, '');
    const full = this.#slots.take(claims);
    if (full !== undefined) {
      const reason = capReason(full);
      return { refusal: reason, message: capMessage(reason, this.#o), code: 429 };
    }
    this.#slots.release(pendingClaims);
    return { claims };
  }
}

/**
 * Attaches a relay to `options.server`: browsers connect on `path` (default `/v1/realtime`) and
 * speak the service's realtime protocol, with a token from `relay.mintToken()` instead of the key.
 *
 * @throws ValidationError or ConfigError for a bad option (naming it), before anything attaches.
 */
export function createRealtimeRelay(options: RealtimeRelayOptions): RealtimeRelay {
  return new RealtimeRelay(options);
}
