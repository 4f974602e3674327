/**
 * The Twilio bridge's translator: a `RealtimeTranslateStream` that connects only once `open()`
 * is called, so that a phone call's realtime session (which the service bills) can wait for the
 * call's `start` instead of opening when the WebSocket connects.
 *
 * The stream object exists from the bridge's construction (its events can be listened to, its
 * stats read); what waits is `_construct`, where every realtime stream connects: its callback is
 * kept until `open()`, and writes wait meanwhile, as they do for any stream under construction.
 * `destroy()` before `open()` ends the construction without connecting, so `_destroy` runs and
 * `close` follows at once; a destroyed stream never connects. `open()` on an opened or destroyed
 * stream does nothing.
 */
import { RealtimeTranslateStream } from '../realtime/realtime-translate-stream.js';

type ConstructCallback = (error?: Error | null) => void;

export class DeferredTranslateStream extends RealtimeTranslateStream {
  #opened = false;
  /** `_construct`'s callback, kept until `open()` (or `destroy()`). */
  #construct: ConstructCallback | undefined;

  /** `open()` has been called: the session is being (or has been) opened. */
  get opened(): boolean {
    return this.#opened;
  }

  /** Connects: the session opens now (or as soon as Node constructs the stream). */
  open(): void {
    if (this.#opened || this.destroyed) return;
    this.#opened = true;
    const callback = this.#construct;
    this.#construct = undefined;
    if (callback !== undefined) super._construct(callback);
  }

  override _construct(callback: ConstructCallback): void {
    if (this.destroyed) callback();
    else if (this.#opened) super._construct(callback);
    else this.#construct = callback;
  }

  override destroy(error?: Error): this {
    const callback = this.#construct;
    this.#construct = undefined;
    super.destroy(error);
    // Nothing connected: construction ends, so Node runs `_destroy` (it waits for construction).
    callback?.();
    return this;
  }
}
