/**
 * The flow control of one realtime session of the emulator over its WebSocket.
 *
 * Reading is paused for one or more reasons at once (the throttle of a deliberately slow server,
 * a client that reads its answers slowly, a half-open fault) and resumes only when the last one
 * goes. Every frame given to the socket is counted until it is written, so that a dropped
 * session cuts its connection only once what it sent has been flushed; a send buffer above
 * `sendBufferLimitBytes` stops reading the client's input until it drains again.
 *
 * The session keeps its states and their timers (the throttle's timer belongs to the active
 * state): this class holds the reasons, the counts and the socket calls, and tells the session
 * through its hooks when reading stops or resumes and when the last frame has been written.
 */
import type { WebSocket } from 'ws';

export type PauseReason = 'throttle' | 'backpressure' | 'half-open';

export interface SessionFlowHooks {
  /** Whether the session has closed: reading is then neither paused nor resumed for a reason. */
  closed(): boolean;
  /** Reading has stopped (the idle time counts only while reading). */
  paused(): void;
  /** Reading has resumed: the last reason went. */
  resumed(): void;
  /** Every frame given to the socket so far has been written. */
  flushed(): void;
}

export class SessionFlow {
  readonly #ws: WebSocket;
  readonly #sendBufferLimitBytes: number;
  readonly #hooks: SessionFlowHooks;
  readonly #pauses = new Set<PauseReason>();
  #peakBuffered = 0;
  #unflushed = 0;

  constructor(ws: WebSocket, sendBufferLimitBytes: number, hooks: SessionFlowHooks) {
    this.#ws = ws;
    this.#sendBufferLimitBytes = sendBufferLimitBytes;
    this.#hooks = hooks;
  }

  /** No reason to pause holds: the client's input is read. */
  get reading(): boolean {
    return this.#pauses.size === 0;
  }

  /** The largest send buffer seen after a send. */
  get peakBuffered(): number {
    return this.#peakBuffered;
  }

  /** Frames given to the socket and not yet written. */
  get unflushed(): number {
    return this.#unflushed;
  }

  /** Stops reading for `reason`. */
  pause(reason: PauseReason): void {
    if (this.#hooks.closed()) return;
    this.#pauses.add(reason);
    this.#ws.pause();
    this.#hooks.paused();
  }

  /** `reason` no longer holds; reading resumes when it was the last one. */
  resume(reason: PauseReason): void {
    if (!this.#pauses.delete(reason) || this.#pauses.size > 0 || this.#hooks.closed()) return;
    this.#ws.resume();
    this.#hooks.resumed();
  }

  /** Drops every reason and reads again: a closing session must see the client's close frame. */
  resumeAll(): void {
    if (this.#pauses.size === 0) return;
    this.#pauses.clear();
    this.#ws.resume();
  }

  /** Sends a frame while the socket is open; a client that reads slowly stops the reading of its input. */
  send(frame: string | Buffer): void {
    if (this.#ws.readyState !== this.#ws.OPEN) return;
    this.#unflushed += 1;
    this.#ws.send(frame, { binary: typeof frame !== 'string' }, this.#onSent);
    this.#peakBuffered = Math.max(this.#peakBuffered, this.#ws.bufferedAmount);
    if (this.#ws.bufferedAmount > this.#sendBufferLimitBytes) this.pause('backpressure');
  }

  /** After each write completes: the hook once all is flushed; reading resumes once the send buffer is back under its bound. */
  readonly #onSent = (): void => {
    this.#unflushed -= 1;
    if (this.#unflushed === 0) this.#hooks.flushed();
    if (this.#pauses.has('backpressure') && this.#ws.bufferedAmount <= this.#sendBufferLimitBytes) this.resume('backpressure');
  };
}
