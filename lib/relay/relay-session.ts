/**
 * One browser on the relay: its WebSocket, from the upgrade until both it and the session it
 * opened upstream have closed.
 *
 * - Until its first message the connection holds no upstream connection; the first message
 *   must be a `session.update` within `firstMessageTimeoutMs` (a connection admitted without a
 *   credential must carry its token there, in `auth.api_key`), else an `error` event and a close
 *   (1008). Only then is the service connected, with the relay's key.
 * - Each frame is read by `readClientFrame`: one over a limit gets the service's `error` event
 *   and goes no further. The rest goes upstream in order, one frame at a time: while a frame
 *   waits (the service's socket full, a session not up yet, or, for a refused one, its `error`
 *   still unread in the browser's socket), the browser's socket is paused.
 * - What the service sends is written to the browser; while the browser's socket holds more than
 *   `maxClientBufferBytes` unsent, the service's socket is paused. A browser that does not answer
 *   a ping by the next one (and was not paused by the relay meanwhile) is cut.
 * - The session ends when either side does: a browser that leaves closes the upstream session;
 *   an upstream session that ends (or fails, after the reconnects allowed) closes the browser,
 *   after an `error` event saying why unless the service's own was passed on already.
 */
import type { RawData, WebSocket } from 'ws';
import { RtTranslateError } from '../errors.js';
import { PeerPings } from '../integrations/peer-pings.js';
import { encodeServerEvent } from '../realtime/codec.js';
import { readClientFrame } from './client-frames.js';
import type { ResolvedRelayOptions } from './relay-options.js';
import { RelayUpstream, type UpstreamEnd } from './relay-upstream.js';
import { closeReason, scrubText } from './scrub.js';

/** Why the relay refused or closed a connection (the keys of `RelayStats.refused`). */
export type RelayRefusal =
  /** The page's origin is not allowed (HTTP 403). */
  | 'origin'
  /** No valid credential: no token, a token that is not valid, `authorize` said no (401, or an error event). */
  | 'unauthorized'
  /** The token has expired (401, or an error event). */
  | 'expired'
  /** `authorize` threw, gave something else than a boolean or a grant, or did not answer in time (503). */
  | 'authorize'
  /** `maxSessions` reached (429, or 1013 after the upgrade). */
  | 'maxSessions'
  /** The token's sessions at once reached (429, or 1013 after the upgrade). */
  | 'maxSessionsPerToken'
  /** The sessions at once of an `authorize` grant's key reached (429). */
  | 'maxSessionsPerKey'
  /** `maxPendingConnections` reached (429). */
  | 'maxPendingConnections'
  /** No first message within `firstMessageTimeoutMs` (1008). */
  | 'firstMessage'
  /** A first message that is not a `session.update` (1008). */
  | 'protocol'
  /** A browser that stopped answering pings (cut). */
  | 'unresponsive'
  /** The relay is closing (503). */
  | 'closing'
  /** A room: `rooms.maxRooms` reached (429). */
  | 'maxRooms'
  /** A room: its `rooms.maxListenersPerRoom` reached (429). */
  | 'maxListenersPerRoom'
  /** A room: a listener's language would be one more than `rooms.maxLanguagesPerRoom` (429, or an error event). */
  | 'maxLanguagesPerRoom'
  /** A room: a second speaker while one talks, or its talk is finishing (409). */
  | 'speakerPresent'
  /** A room: a listener's language is not one the speaker offers (403, or an error event). */
  | 'language'
  /** A room: a listener sent something (an error event, then 1008). */
  | 'listenerSent'
  /** A room: a listener fell further behind than `rooms.maxListenerBufferBytes` (1013). */
  | 'slowListener';

/** What a session needs of its relay. */
export interface RelaySessionContext {
  options: ResolvedRelayOptions;
  upstreamUrl: URL;
  /**
   * A connection admitted without a credential presented `token` in its first `session.update`:
   * its slots are taken, or the refusal comes back.
   */
  admitLate(token: string | undefined): { refusal: RelayRefusal; message: string; code: number } | undefined;
  refused(reason: RelayRefusal): void;
  /** A client event was refused with an `error` event. */
  refusedEvent(): void;
}

/** A reply of the relay's own waiting for the browser to read what it was sent: `timer` cuts the browser if it does not. */
interface Drain {
  done: () => void;
  timer: NodeJS.Timeout;
}

type SessionState =
  /** Upgraded; the first `session.update` is due before `timer`. */
  | { status: 'awaiting'; timer: NodeJS.Timeout }
  | { status: 'relaying'; upstream: RelayUpstream; pings: PeerPings; drain: Drain | undefined }
  /** A close frame was sent to the browser; `grace` cuts it if it does not answer. */
  | { status: 'closing'; grace: NodeJS.Timeout }
  | { status: 'closed' };

/** After our close frame, how long a browser has to answer it before its socket is cut. */
const CLOSE_GRACE_MS = 2000;

function rawToBuffer(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

export class RelaySession {
  /** Resolves once the browser's socket and the upstream connection have both closed. */
  readonly closed: Promise<void>;
  readonly #ws: WebSocket;
  readonly #ctx: RelaySessionContext;
  #state: SessionState;
  /** Frames that came while one was waiting (the socket's current read; bounded by it). */
  readonly #inbound: Array<[Buffer, boolean]> = [];
  #blocked = false;
  /** The service's socket is paused because the browser's holds too much. */
  #sendPaused = false;
  /** Whether a credential still has to come in the first `session.update`. */
  #pending: boolean;
  #resolveClosed!: () => void;
  #upstream: RelayUpstream | undefined;

  constructor(ws: WebSocket, ctx: RelaySessionContext, pending: boolean) {
    this.#ws = ws;
    this.#ctx = ctx;
    this.#pending = pending;
    this.closed = new Promise((resolve) => (this.#resolveClosed = resolve));
    const ms = ctx.options.firstMessageTimeoutMs;
    this.#state = { status: 'awaiting', timer: setTimeout(() => this.#refuse('firstMessage', `No session.update within ${ms} ms of connecting.`, 408), ms) };
    ws.on('message', this.#onMessage);
    ws.on('error', () => {
      // `ws` closes the socket after an error; the close listener ends the session.
    });
    ws.once('close', this.#onClose);
  }

  /** Whether an upstream session is open or opening (not yet over). */
  get relaying(): boolean {
    return this.#state.status === 'relaying';
  }

  /** Bytes held for the session: both sockets' unsent bytes, the input kept upstream, frames waiting their turn. */
  get bufferedBytes(): number {
    let waiting = 0;
    for (const [data] of this.#inbound) waiting += data.length;
    return (this.#upstream?.bufferedBytes ?? 0) + this.#ws.bufferedAmount + waiting;
  }

  /** The browser's socket is paused: a frame of it waits for the service (or the session's start). */
  get inputPaused(): boolean {
    return this.#blocked && this.#ws.isPaused;
  }

  /** Upstream sessions re-established after a drop. */
  get reconnects(): number {
    return this.#upstream?.reconnects ?? 0;
  }

  /** Closes the session (the relay is closing): the browser with 1001, the upstream session gracefully. */
  shutdown(): Promise<void> {
    this.#closeBrowser(1001, 'relay closing');
    return this.closed;
  }

  /** The one way the state changes: the old state's timer and pings stop unless the new one keeps them. */
  #set(next: SessionState): void {
    const previous = this.#state;
    if (previous.status === 'awaiting') clearTimeout(previous.timer);
    if (previous.status === 'relaying' && next.status !== 'relaying') {
      previous.pings.stop();
      if (previous.drain) clearTimeout(previous.drain.timer);
    }
    if (previous.status === 'closing' && next.status !== 'closing') clearTimeout(previous.grace);
    this.#state = next;
  }

  /* ------------------------------------------------------------------ browser to service */

  readonly #onMessage = (data: RawData, isBinary: boolean): void => {
    const status = this.#state.status;
    if (status === 'closing' || status === 'closed') return;
    const frame = rawToBuffer(data);
    if (this.#blocked || this.#inbound.length > 0) this.#inbound.push([frame, isBinary]);
    else this.#handle(frame, isBinary);
  };

  #handle(data: Buffer, isBinary: boolean): void {
    const state = this.#state;
    const frame = readClientFrame(data, isBinary);
    if (state.status === 'awaiting') {
      if (frame.kind === 'session.update') this.#open(frame.text, frame.token, frame.audio);
      else if (frame.kind === 'refused') this.#refuse('protocol', `${frame.message} The first event must be session.update.`, frame.code);
      else
        this.#refuse(
          'protocol',
          `The first event must be session.update (got ${frame.kind === 'audio' ? 'audio' : JSON.stringify(frame.type.slice(0, 64))}).`,
          400,
        );
      return;
    }
    if (state.status !== 'relaying') return;
    const upstream = state.upstream;
    switch (frame.kind) {
      case 'refused':
        this.#ctx.refusedEvent();
        this.#wait((done) => this.#reply(state, encodeServerEvent.error(frame.message, frame.code), done));
        return;
      case 'audio':
        this.#wait((done) => upstream.audio(frame.pcm, done));
        return;
      case 'session.update':
        this.#wait((done) => upstream.event(frame.text, true, done));
        return;
      case 'event':
        this.#wait((done) => upstream.event(frame.text, false, done));
        return;
    }
  }

  /** The first `session.update`: the late credential checked, then the service connected. */
  #open(text: string, token: string | undefined, audio: boolean): void {
    if (this.#pending) {
      const refusal = this.#ctx.admitLate(token);
      if (refusal) {
        this.#refuse(refusal.refusal, refusal.message, refusal.code);
        return;
      }
      this.#pending = false;
    }
    const upstream = new RelayUpstream(
      this.#ctx.options.connection,
      this.#ctx.upstreamUrl,
      { text, audio },
      {
        forward: (data, isBinary) => this.#send(data, isBinary),
        notice: (event) => this.#send(JSON.stringify(event), false),
        ended: (end) => this.#upstreamEnded(end),
      },
    );
    this.#upstream = upstream;
    const pings = new PeerPings(this.#ws, this.#ctx.options.clientPingIntervalMs, this.#stoppedReading);
    this.#set({ status: 'relaying', upstream, pings, drain: undefined });
    upstream.start();
  }

  /**
   * Runs `start`, which calls `done` once the frame it took is on its way: until then the
   * browser's socket is paused and its further frames wait, in order.
   */
  #wait(start: (done: () => void) => void): void {
    let settled = false;
    let synchronous = true;
    this.#blocked = true;
    start(() => {
      if (settled) return;
      settled = true;
      this.#blocked = false;
      if (!synchronous) this.#drainInbound();
    });
    synchronous = false;
    if (this.#blocked && !this.#ws.isPaused) {
      this.#ws.pause();
      if (this.#state.status === 'relaying') this.#state.pings.paused();
    }
  }

  #drainInbound(): void {
    while (!this.#blocked && this.#inbound.length > 0 && this.#state.status === 'relaying') {
      const [data, isBinary] = this.#inbound.shift()!;
      this.#handle(data, isBinary);
    }
    if (!this.#blocked && this.#ws.isPaused && this.#state.status === 'relaying') this.#ws.resume();
  }

  /* ------------------------------------------------------------------ service to browser */

  #send(data: Buffer | string, isBinary: boolean): void {
    const ws = this.#ws;
    if (ws.readyState !== ws.OPEN) return;
    ws.send(data, { binary: isBinary }, this.#onSent);
    if (!this.#sendPaused && ws.bufferedAmount > this.#ctx.options.maxClientBufferBytes) {
      this.#sendPaused = true;
      this.#upstream?.pause('client');
    }
  }

  /**
   * A reply of the relay's own (a refused event's `error`): `done` once the browser's socket is
   * back under `maxClientBufferBytes`, so a browser that sends what is refused and reads nothing
   * stops being read instead of piling replies up here. One that leaves them unread for two
   * ping intervals is cut, as one that stops answering pings is.
   */
  #reply(state: Extract<SessionState, { status: 'relaying' }>, text: string, done: () => void): void {
    this.#send(text, false);
    if (this.#ws.bufferedAmount <= this.#ctx.options.maxClientBufferBytes) {
      done();
      return;
    }
    state.drain = { done, timer: setTimeout(this.#stoppedReading, 2 * this.#ctx.options.clientPingIntervalMs) };
  }

  readonly #onSent = (): void => {
    if (this.#ws.bufferedAmount > this.#ctx.options.maxClientBufferBytes) return;
    if (this.#sendPaused) {
      this.#sendPaused = false;
      this.#upstream?.resume('client');
    }
    const state = this.#state;
    if (state.status === 'relaying' && state.drain) {
      const { done, timer } = state.drain;
      clearTimeout(timer);
      state.drain = undefined;
      done();
    }
  };

  /* ------------------------------------------------------------------ endings */

  /** Refuses the connection after its upgrade: the service's `error` event, then a close (1013 for a cap, else 1008). */
  #refuse(reason: RelayRefusal, message: string, code: number): void {
    this.#ctx.refused(reason);
    this.#send(encodeServerEvent.error(message, code), false);
    this.#closeBrowser(code === 429 ? 1013 : 1008, message);
  }

  #upstreamEnded(end: UpstreamEnd): void {
    const { error } = end;
    if (error && !end.forwarded) this.#send(encodeServerEvent.error(this.#message(error), error.status), false);
    this.#closeBrowser(end.code, end.reason);
  }

  /** What the browser is told of a failure: the library's message, the key scrubbed. */
  #message(error: RtTranslateError): string {
    return scrubText(error.message, this.#ctx.options.connection.apiKey);
  }

  /** Sends the browser a close frame (cutting it if it does not answer), and closes the upstream session. */
  #closeBrowser(code: number, reason: string): void {
    const state = this.#state;
    if (state.status === 'closing' || state.status === 'closed') return;
    this.#set({ status: 'closing', grace: setTimeout(() => this.#ws.terminate(), CLOSE_GRACE_MS) });
    this.#upstream?.close();
    this.#inbound.length = 0;
    this.#ws.resume();
    if (this.#ws.readyState === this.#ws.OPEN) this.#ws.close(code, closeReason(scrubText(reason, this.#ctx.options.connection.apiKey)));
  }

  readonly #stoppedReading = (): void => {
    this.#ctx.refused('unresponsive');
    this.#ws.terminate();
  };

  readonly #onClose = (): void => {
    this.#ws.off('message', this.#onMessage);
    this.#inbound.length = 0;
    const upstream = this.#upstream;
    upstream?.close();
    this.#set({ status: 'closed' });
    void (upstream?.whenClosed() ?? Promise.resolve()).then(() => this.#resolveClosed());
  };
}
