/**
 * A Twilio Media Stream's WebSocket run through a `TwilioMediaBridge`, with the bounds a server
 * open to the network needs, `bridgeTwilioSocket(ws, bridge)`:
 * - backpressure both ways, as for any stream of the library: the socket is paused while the
 *   bridge is behind, the bridge's output while the socket has more than `maxSocketBufferBytes`
 *   unsent, so nothing is ever buffered for a caller that does not read;
 * - a caller that stops reading is found and closed: a ping every `pingIntervalMs`, and one still
 *   unanswered at the next closes the call (unless the socket was paused meanwhile: then the pong
 *   may be waiting behind the caller's audio, which the bridge is holding back);
 * - the close says why: 1000 for a finished call, 1008 with `bridge.closeReason` when the bridge
 *   ended the call for the caller's conduct (no `start`, no media, lying timestamps; a caller that
 *   does not answer that close frame within 2 s is cut), 1011 for any other failure.
 * When the socket closes first (the caller hung up), outbound audio is discarded and the bridge's
 * input ends, so the session finishes cleanly.
 */
import type { EventEmitter } from 'node:events';
import type { RawData, WebSocket } from 'ws';
import { TimeoutError } from '../errors.js';
import { intOption } from '../options.js';
import { PeerPings } from './peer-pings.js';
import type { TwilioMediaBridge } from './twilio.js';
import type { TwilioOutboundMessage } from './twilio-messages.js';
import { twilioMessageJson } from './twilio-outbound.js';

export interface TwilioSocketOptions {
  /** Bytes the socket may buffer unsent before the bridge's output is paused. Default 256 KiB. */
  maxSocketBufferBytes?: number;
  /** A ping every this many ms; one unanswered at the next ping closes the call. Default 5000. */
  pingIntervalMs?: number;
}

/** Close code for a call ended because of the caller's conduct (WebSocket "policy violation"). */
const POLICY_CLOSE = 1008;
/** After a 1008 close frame, how long the caller has to answer it before the socket is cut. */
const CLOSE_GRACE_MS = 2000;

type SocketState =
  /** `pings` watches that the caller still reads. */
  | { status: 'bridged'; pings: PeerPings }
  /** The bridge has closed; `grace` cuts a socket whose caller does not answer our close frame. */
  | { status: 'done'; grace: NodeJS.Timeout | undefined };

function rawToBuffer(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

/**
 * Runs `bridge` over a Twilio Media Streams WebSocket (a `ws` server-side socket): each message
 * in is written to the bridge (the socket is paused while the bridge is behind), each message
 * out is sent as a text frame (the bridge is paused while the socket buffers more than
 * `maxSocketBufferBytes`). When the socket closes, outbound audio is discarded and the bridge's
 * input ends, so the session finishes cleanly; when the bridge is done, the socket is closed
 * (see the module comment for the codes). Resolves when the bridge has finished and closed;
 * rejects with its error, or with a `TimeoutError` when the caller stopped reading. Every
 * listener it added is removed by then, except the socket's `error` listener, which stays until
 * the socket has closed.
 *
 * @throws ValidationError for a bad option, before anything is wired.
 */
export function bridgeTwilioSocket(ws: WebSocket, bridge: TwilioMediaBridge, options: TwilioSocketOptions = {}): Promise<void> {
  return new TwilioSocketCall(ws, bridge, options).done;
}

class TwilioSocketCall {
  readonly done: Promise<void>;
  readonly #ws: WebSocket;
  readonly #bridge: TwilioMediaBridge;
  readonly #bound: number;
  readonly #pingIntervalMs: number;
  #state: SocketState;
  #resolve!: () => void;
  #reject!: (error: Error) => void;
  /** Every listener added for the call, in one list, so removing them cannot miss one. */
  #listeners: Array<[EventEmitter, string, (...args: any[]) => void]> = [];

  constructor(ws: WebSocket, bridge: TwilioMediaBridge, options: TwilioSocketOptions) {
    this.#bound = intOption(options.maxSocketBufferBytes, 'maxSocketBufferBytes', { min: 1, fallback: 256 * 1024 });
    this.#pingIntervalMs = intOption(options.pingIntervalMs, 'pingIntervalMs', { min: 1, fallback: 5000 });
    this.#ws = ws;
    this.#bridge = bridge;
    this.done = new Promise<void>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    // Stays until the socket has closed (an error may come while it closes); `ws` closes the
    // socket after an error, and the close listener ends the bridge's input.
    ws.on('error', this.#onSocketError);
    this.#state = this.#wire();
  }

  /** The one way the state changes: the old state's pings or timer stop unless the new one keeps them. */
  #set(next: SocketState): void {
    const previous = this.#state;
    if (previous.status === 'bridged' && (next.status !== 'bridged' || next.pings !== previous.pings)) previous.pings.stop();
    if (previous.status === 'done' && (next.status !== 'done' || next.grace !== previous.grace)) clearTimeout(previous.grace);
    this.#state = next;
  }

  #open(): boolean {
    return this.#ws.readyState === this.#ws.OPEN;
  }

  readonly #onSocketError = (): void => {
    // `ws` closes the socket after an error; the close listener ends the bridge's input.
  };

  /** Wires the socket and the bridge to each other; returns the state that holds the ping. */
  #wire(): SocketState {
    const ws = this.#ws;
    const bridge = this.#bridge;
    let sendPaused = false;
    // A translated piece of audio comes out as a burst of 20 ms messages: they are written to the
    // connection together (one system call instead of one per message) by corking its socket
    // until the burst is over. `ws` keeps the socket as `_socket`; without one, no corking.
    const socket = (ws as unknown as { _socket?: { cork?: unknown; uncork?: unknown } })._socket;
    const corkable = typeof socket?.cork === 'function' && typeof socket.uncork === 'function' ? (socket as { cork(): void; uncork(): void }) : undefined;
    let corked = false;
    const uncork = () => {
      corked = false;
      corkable?.uncork();
    };

    const onMessage = (data: RawData) => {
      if (bridge.destroyed || bridge.writableEnded) return;
      if (!bridge.write(rawToBuffer(data))) {
        ws.pause();
        if (this.#state.status === 'bridged') this.#state.pings.paused();
      }
    };
    const onDrain = () => ws.resume();
    const onSent = () => {
      if (sendPaused && ws.bufferedAmount <= this.#bound) {
        sendPaused = false;
        bridge.resume();
      }
    };
    const onData = (message: TwilioOutboundMessage | string) => {
      if (!this.#open()) return; // the call is gone: nothing to send to
      if (corkable && !corked) {
        corked = true;
        corkable.cork();
        process.nextTick(uncork);
      }
      ws.send(typeof message === 'string' ? message : twilioMessageJson(message), onSent);
      if (ws.bufferedAmount > this.#bound) {
        sendPaused = true;
        bridge.pause();
      }
    };
    const onEnd = () => {
      if (this.#open()) ws.close(1000, 'stream done');
    };
    const onSocketClose = () => {
      bridge.discardOutbound();
      if (sendPaused) {
        sendPaused = false;
        bridge.resume();
      }
      if (!bridge.destroyed && !bridge.writableEnded) bridge.end();
    };
    const onBridgeError = () => {
      // Reported through the promise (bridge.errored).
    };
    this.#listeners = [
      [ws, 'message', onMessage],
      [ws, 'close', onSocketClose],
      [bridge, 'drain', onDrain],
      [bridge, 'data', onData],
      [bridge, 'end', onEnd],
      [bridge, 'error', onBridgeError],
    ];
    for (const [emitter, event, listener] of this.#listeners) emitter.on(event, listener);
    bridge.once('close', this.#bridgeClosed);
    if (ws.readyState === ws.CLOSED || ws.readyState === ws.CLOSING) onSocketClose();
    return { status: 'bridged', pings: new PeerPings(ws, this.#pingIntervalMs, this.#stoppedReading) };
  }

  /** A ping went unanswered while the socket was not paused: the caller stopped reading. */
  readonly #stoppedReading = (): void => {
    const ms = this.#pingIntervalMs;
    this.#ws.terminate();
    this.#bridge.destroy(new TimeoutError(`The caller did not answer a ping within ${ms} ms (pingIntervalMs): it stopped reading; the call was closed.`, ms));
  };

  readonly #bridgeClosed = (): void => {
    for (const [emitter, event, listener] of this.#listeners) emitter.off(event, listener);
    this.#listeners = [];
    const ws = this.#ws;
    ws.resume();
    const error = this.#bridge.errored ?? undefined;
    const reason = this.#bridge.closeReason;
    if (!this.#open()) this.#set({ status: 'done', grace: undefined });
    else if (error === undefined) {
      this.#set({ status: 'done', grace: undefined });
      ws.close(1000, 'stream done');
    } else if (reason === undefined) {
      this.#set({ status: 'done', grace: undefined });
      ws.close(1011, 'bridge failed');
    } else {
      ws.close(POLICY_CLOSE, reason);
      this.#set({ status: 'done', grace: setTimeout(() => ws.terminate(), CLOSE_GRACE_MS) });
    }
    const released = () => {
      ws.off('error', this.#onSocketError);
      this.#set({ status: 'done', grace: undefined });
    };
    if (ws.readyState === ws.CLOSED) released();
    else ws.once('close', released);
    if (error) this.#reject(error);
    else this.#resolve();
  };
}
