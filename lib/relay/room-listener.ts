/**
 * One listener of a room: a browser's WebSocket that receives one language's translation and
 * sends nothing. What its language's session says is written to it as it comes (the audio as
 * binary PCM16 frames, the other events as the service's JSON); a listener whose socket holds
 * more than `maxBufferBytes` unsent is dropped (close 1013) rather than buffered for, so that it
 * never holds back the session or the other listeners. Anything it sends is refused: an `error`
 * event (403), then close 1008. A listener that stops answering pings is cut.
 */
import type { WebSocket } from 'ws';
import { encodeServerEvent } from '../realtime/codec.js';
import type { RealtimeLanguage } from '../realtime/languages.js';
import { RoomSocket } from './room-socket.js';

export interface RoomListenerOptions {
  maxBufferBytes: number;
  pingIntervalMs: number;
}

/** Why a listener was let go by the relay (counted in the relay's stats). */
export type ListenerDrop = 'sent' | 'slow' | 'unresponsive';

export class RoomListener {
  readonly lang: RealtimeLanguage;
  /** Resolves once its socket has closed. */
  readonly closed: Promise<void>;
  readonly #ws: WebSocket;
  readonly #socket: RoomSocket;
  readonly #o: RoomListenerOptions;
  readonly #dropped: (reason: ListenerDrop) => void;

  /** `gone` is called once, when the socket has closed; `dropped` when the relay lets it go. */
  constructor(
    ws: WebSocket,
    lang: RealtimeLanguage,
    options: RoomListenerOptions,
    gone: (listener: RoomListener) => void,
    dropped: (reason: ListenerDrop) => void,
  ) {
    this.#ws = ws;
    this.lang = lang;
    this.#o = options;
    this.#dropped = dropped;
    this.#socket = new RoomSocket(ws, options.pingIntervalMs, {
      message: this.#onMessage,
      unresponsive: () => dropped('unresponsive'),
      gone: () => gone(this),
    });
    this.closed = this.#socket.closed;
  }

  /** Bytes its socket holds unsent. */
  get bufferedBytes(): number {
    return this.#ws.bufferedAmount;
  }

  /** A frame of its language's session (or a notice of the room's); a listener too far behind is dropped instead. */
  send(data: Buffer | string, binary: boolean): void {
    const ws = this.#ws;
    if (this.#socket.closing || ws.readyState !== ws.OPEN) return;
    if (ws.bufferedAmount > this.#o.maxBufferBytes) {
      this.#dropped('slow');
      this.close(1013, `This listener fell more than ${this.#o.maxBufferBytes} bytes behind the translation and was dropped; reconnect to listen live.`);
      return;
    }
    ws.send(data, { binary });
  }

  /** A notice of the room's own (`room.*`). */
  notice(event: Record<string, unknown>): void {
    this.send(JSON.stringify(event), false);
  }

  /** Closes it (cut if it does not answer the close frame in time). */
  close(code: number, reason: string): void {
    this.#socket.close(code, reason);
  }

  /** A listener receives only: what it sends is refused, and it is closed. */
  readonly #onMessage = (): void => {
    if (this.#socket.closing) return;
    this.#dropped('sent');
    this.#ws.send(encodeServerEvent.error("A room listener receives only: it may not send audio or events. Connect as the room's speaker to send audio.", 403));
    this.close(1008, 'A room listener may not send.');
  };
}
