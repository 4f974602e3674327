/**
 * Whether the peer of a server-side WebSocket still reads: a ping every `intervalMs`, and one
 * still unanswered at the next means the peer stopped reading, unless this side paused the
 * socket meanwhile (the pong may then wait, unread, behind the peer's own data that this side
 * is holding back). Each server socket of the library that stands for a session the service
 * bills (a Twilio call, a browser on the relay) watches its peer this way, so a peer that
 * vanished without closing, or stopped reading, cannot hold the session.
 */
import type { WebSocket } from 'ws';

export class PeerPings {
  readonly #ws: WebSocket;
  readonly #silent: () => void;
  readonly #timer: NodeJS.Timeout;
  #awaitingPong = false;
  /** This side paused the socket since the last ping (its pong may wait behind the peer's data). */
  #pausedSincePing = false;

  /** Starts pinging `ws` every `intervalMs`; `silent` is called once, when a ping went unanswered. */
  constructor(ws: WebSocket, intervalMs: number, silent: () => void) {
    this.#ws = ws;
    this.#silent = silent;
    ws.on('pong', this.#onPong);
    this.#timer = setInterval(this.#tick, intervalMs);
  }

  /** This side paused reading the socket: a pong due now is excused. */
  paused(): void {
    this.#pausedSincePing = true;
  }

  /** Stops pinging (and listening for pongs). */
  stop(): void {
    clearInterval(this.#timer);
    this.#ws.off('pong', this.#onPong);
  }

  readonly #onPong = (): void => {
    this.#awaitingPong = false;
  };

  readonly #tick = (): void => {
    const ws = this.#ws;
    if (ws.readyState !== ws.OPEN) return;
    const excused = this.#pausedSincePing || ws.isPaused;
    if (this.#awaitingPong && !excused) {
      this.stop();
      this.#silent();
      return;
    }
    this.#awaitingPong = true;
    this.#pausedSincePing = ws.isPaused;
    ws.ping();
  };
}
