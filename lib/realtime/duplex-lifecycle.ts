/**
 * The life of a realtime Duplex, as one discriminated union changed through one setter: from
 * `_construct` (its callback pending until the session is ready) through `_final` (its callback
 * pending until the session has ended) to closed, or failed on the way. Each state carries its
 * own timer and pending callback; the setter clears the old state's timer and settles the old
 * state's callback (with the new state's error, if any) unless the new state carries them on or
 * the stream is destroyed, then reports the change to `stateChange` (`@discordjs/voice`'s
 * `AudioPlayer` pattern). A fatal error reaches the caller only once the reader has taken what
 * already arrived. The abort signal is watched here too. Every realtime stream shares this.
 */
import type { Duplex } from 'node:stream';
import { AbortError, type RtTranslateError } from '../errors.js';
import type { EndedInfo } from './realtime-events.js';

/** An ending with nothing owed. */
export const COMPLETE: EndedInfo = { complete: true, reason: undefined, unansweredSpeechMs: 0 };

export type StreamCallback = (error?: Error | null) => void;

/** Where the stream is. `Ending` is what the stream keeps while it waits for the session to end. */
export type LifecycleState<Ending extends object = object> =
  /** Connecting: `_construct`'s callback waits for the first ready session. */
  | { status: 'starting'; constructCallback: StreamCallback }
  | { status: 'open' }
  /** After `_final`: its callback waits for the session's end; `timer` bounds the wait. */
  | ({ status: 'ending'; finalCallback: StreamCallback; timer: NodeJS.Timeout | undefined } & Ending)
  /** How it ended is decided; the connection is closing (or, when given up, the failure follows). */
  | { status: 'closing'; finalCallback: StreamCallback | undefined; ending: EndedInfo }
  /** A fatal error, delivered once the reader has drained; `_final`'s callback waits with it. */
  | { status: 'failed'; error: RtTranslateError; finalCallback: StreamCallback | undefined; ending: EndedInfo | undefined }
  | { status: 'closed'; ending: EndedInfo | undefined; error: Error | null };

export interface LifecycleOptions<Ending extends object> {
  /** What to abort with when the caller's signal fires (`AbortError` messages name the stream). */
  signal: AbortSignal | undefined;
  /** The stream's name in messages, e.g. `realtime session`. */
  name: string;
  /** Ends the connection at once (a failure, an early destroy). */
  shutdown(): void;
  /** After a failure, while the reader has not drained: makes its next `read()` call `_read` again. */
  nudgeRead?(): void;
  /** Told of every change of state. */
  stateChange?(previous: LifecycleState<Ending>, next: LifecycleState<Ending>): void;
}

function pendingCallback(state: LifecycleState<object>): StreamCallback | undefined {
  switch (state.status) {
    case 'starting':
      return state.constructCallback;
    case 'ending':
    case 'closing':
    case 'failed':
      return state.finalCallback;
    default:
      return undefined;
  }
}

export class DuplexLifecycle<Ending extends object = object> {
  readonly #stream: Duplex;
  readonly #o: LifecycleOptions<Ending>;
  #state: LifecycleState<Ending> = { status: 'open' };
  /**
   * The state's status, kept beside it: the write path and every send completion ask for it,
   * and a property read on objects of six shapes is a megamorphic lookup.
   */
  #status: LifecycleState['status'] = 'open';
  readonly #onAbort: (() => void) | undefined;

  constructor(stream: Duplex, options: LifecycleOptions<Ending>) {
    this.#stream = stream;
    this.#o = options;
    const signal = options.signal;
    if (signal) {
      this.#onAbort = () => {
        // A session that has already delivered everything is complete, not aborted.
        if (this.ending) return;
        stream.destroy(new AbortError(`The ${options.name} was aborted.`, { cause: signal.reason }));
      };
      signal.addEventListener('abort', this.#onAbort, { once: true });
    }
  }

  get state(): LifecycleState<Ending> {
    return this.#state;
  }

  /**
   * The state when its status is `status`, else undefined: the check reads the field kept beside
   * the state, so a caller on a hot path (every write, send completion and message) pays no
   * read of the state itself unless it is the one asked for.
   */
  stateIn<S extends LifecycleState['status']>(status: S): (LifecycleState<Ending> & { status: S }) | undefined {
    return this.#status === status ? (this.#state as LifecycleState<Ending> & { status: S }) : undefined;
  }

  /** The fatal error, once there is one. */
  get error(): RtTranslateError | undefined {
    return this.stateIn('failed')?.error;
  }

  /** The stream has failed or closed: nothing more can happen to it. */
  get over(): boolean {
    const status = this.#status;
    return status === 'failed' || status === 'closed' || this.#stream.destroyed;
  }

  /** How the session ended, once that is decided. */
  get ending(): EndedInfo | undefined {
    const state = this.#state;
    return state.status === 'closing' || state.status === 'closed' || state.status === 'failed' ? state.ending : undefined;
  }

  /** The one way the state changes: the old state's timer is cleared and its callback settled. */
  set(next: LifecycleState<Ending>): void {
    const previous = this.#state;
    this.#state = next;
    this.#status = next.status;
    const timer = 'timer' in previous ? previous.timer : undefined;
    if (timer && timer !== ('timer' in next ? next.timer : undefined)) clearTimeout(timer);
    const callback = pendingCallback(previous);
    // Node waits for `_construct`'s callback even when destroyed, but no longer for `_final`'s.
    const awaited = previous.status === 'starting' || !this.#stream.destroyed;
    if (callback && callback !== pendingCallback(next) && awaited) {
      callback(next.status === 'failed' || next.status === 'closed' ? next.error : null);
    }
    this.#o.stateChange?.(previous, next);
  }

  /** `_construct`: waits for `opened()`, unless the signal has already fired. */
  construct(callback: StreamCallback, connect: () => void): void {
    const signal = this.#o.signal;
    if (signal?.aborted) {
      const error = new AbortError(`The ${this.#o.name} was aborted before it started.`, { cause: signal.reason });
      this.set({ status: 'failed', error, finalCallback: undefined, ending: undefined });
      callback(error);
      return;
    }
    this.set({ status: 'starting', constructCallback: callback });
    connect();
  }

  /** The first session is ready: construction succeeds. */
  opened(): void {
    if (this.#state.status === 'starting') this.set({ status: 'open' });
  }

  /** How the session ended is known: the connection is closing, or a failure follows. */
  decide(ending: EndedInfo): void {
    const state = this.#state;
    if (state.status === 'ending') this.set({ status: 'closing', finalCallback: state.finalCallback, ending });
    if (state.status === 'open') this.set({ status: 'closing', finalCallback: undefined, ending });
  }

  /**
   * The session is over (complete unless `decide()` said otherwise): `announce` publishes the
   * ending, the readable side ends and `_final`'s callback is settled.
   */
  close(announce: (ending: EndedInfo) => void): void {
    const status = this.#state.status;
    if (status === 'closed' || status === 'failed') return;
    // A copy: `stats.ending` hands it to the caller, who may change it.
    const ending = this.ending ?? { ...COMPLETE };
    announce(ending);
    const s = this.#stream;
    if (!s.readableEnded) s.push(null);
    // Nothing was left for a reader (events-only, or text only): let the readable side end now.
    if (s.readableFlowing === null && s.readableLength === 0) s.resume();
    this.set({ status: 'closed', ending, error: null });
  }

  /**
   * A fatal error. Before the first session it fails construction; afterwards the stream is
   * destroyed once the reader has taken every byte already received. An ending decided just
   * before (the stream gave up on the session) is kept.
   */
  fail(error: RtTranslateError): void {
    if (this.over) return;
    const state = this.#state;
    this.#o.shutdown();
    const pending = state.status === 'ending' || state.status === 'closing' ? state.finalCallback : undefined;
    // With nothing left for the reader, `_final`'s callback takes the error now (it destroys the stream).
    this.set({ status: 'failed', error, finalCallback: this.#stream.readableLength === 0 ? undefined : pending, ending: this.ending });
    if (state.status !== 'starting' && (!pending || this.#stream.readableLength > 0)) this.failWhenDrained();
  }

  /**
   * After a failure: destroys the stream with its error once the reader has drained (or when
   * nothing reads it; `_read` checks again). Returns false when there is no failure.
   */
  failWhenDrained(): boolean {
    const error = this.error;
    if (!error) return false;
    if (this.#stream.destroyed) return true;
    const s = this.#stream;
    if (s.readableLength === 0 || s.readableFlowing === null || s.readableEnded) s.destroy(error);
    else this.#o.nudgeRead?.();
    return true;
  }

  /** From `destroy()`: Node defers `_destroy` until construction ends, so end a pending connection now. */
  destroying(error: Error | undefined): void {
    if (this.#state.status !== 'starting') return;
    this.#o.shutdown();
    this.set({ status: 'closed', ending: undefined, error: error ?? null });
  }

  /** From `_destroy`: whatever was pending is settled, the signal is no longer watched. */
  destroyed(error: Error | null): void {
    if (this.#o.signal && this.#onAbort) this.#o.signal.removeEventListener('abort', this.#onAbort);
    if (this.#state.status !== 'closed') this.set({ status: 'closed', ending: this.ending, error });
  }
}
