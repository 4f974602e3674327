/**
 * What a room's speaker and its listeners do alike with their browser's WebSocket: pings that
 * cut a peer that stops answering, a close frame with a bounded wait for the answer (then the
 * socket is cut), and one cleanup once the socket has closed. The role decides what a message
 * means and when the peer is let go.
 */
import type { RawData, WebSocket } from 'ws';
import { PeerPings } from '../integrations/peer-pings.js';
import { closeReason } from './scrub.js';

/** After our close frame, how long a peer has to answer it before its socket is cut. */
const CLOSE_GRACE_MS = 2000;

export interface RoomSocketHooks {
  message(data: RawData, isBinary: boolean): void;
  /** It stopped answering pings (the socket is cut after this). */
  unresponsive(): void;
  /** Its socket closed; called once. */
  gone(): void;
}

export class RoomSocket {
  readonly ws: WebSocket;
  /** Resolves once the socket has closed. */
  readonly closed: Promise<void>;
  readonly pings: PeerPings;
  #grace: NodeJS.Timeout | undefined;
  #closing = false;

  constructor(ws: WebSocket, pingIntervalMs: number, hooks: RoomSocketHooks) {
    this.ws = ws;
    this.pings = new PeerPings(ws, pingIntervalMs, () => {
      if (this.#closing) return;
      hooks.unresponsive();
      this.cut();
    });
    ws.on('error', () => {
      // `ws` closes the socket after an error; the close listener below follows.
    });
    ws.on('message', hooks.message);
    this.closed = new Promise((resolve) =>
      ws.once('close', () => {
        this.pings.stop();
        clearTimeout(this.#grace);
        ws.off('message', hooks.message);
        hooks.gone();
        resolve();
      }),
    );
  }

  /** True once it is being closed or cut: nothing more is sent or read. */
  get closing(): boolean {
    return this.#closing;
  }

  /** Closes it (cut if it does not answer the close frame in time). */
  close(code: number, reason: string): void {
    if (this.#closing) return;
    this.#closing = true;
    const ws = this.ws;
    this.pings.stop();
    // A paused socket would never read the answer to the close frame.
    ws.resume();
    this.#grace = setTimeout(() => ws.terminate(), CLOSE_GRACE_MS);
    if (ws.readyState === ws.OPEN) ws.close(code, closeReason(reason));
    else ws.terminate();
  }

  /** Cuts it at once. */
  cut(): void {
    this.#closing = true;
    this.pings.stop();
    this.ws.terminate();
  }
}
