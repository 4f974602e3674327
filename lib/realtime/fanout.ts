/**
 * `RealtimeFanout`: one speaker, several languages. A Writable of PCM16 LE mono 24 kHz (any
 * chunking) whose input goes to one `RealtimeTranslateStream` per target language, each with
 * its own session, voice, reconnects and replay; each target's translated audio is a Readable
 * of its own (`target(lang).output`), its events come tagged with its language (`event`, and one
 * `events()` iterator over all), and `stats` has each target's figures (latency per language).
 *
 * Backpressure: a write is given to every running target and its callback waits until each
 * one's sending side has room (the stream's own bounds: the socket's buffer, the replay held
 * while reconnecting, the writable buffer while connecting). A target that keeps the writer
 * waiting for `maxLagMs` while another takes the input is stopped with a `TimeoutError`; a
 * target whose reader is behind pauses only its own socket. A target that fails (a rejected
 * voice, a language the service refuses, a lost session) ends on its own, its error in its
 * `target.done` event and in `stats`; the others go on. Targets join (`addTarget`, from the
 * next input on) and leave (`removeTarget`, or destroy its output) while the input flows.
 * `end()` ends every target's input; the fan-out finishes once every target is over. Memory is
 * each target's own bounds, whatever the length of the input.
 */
import { Writable } from 'node:stream';
import { inspect } from 'node:util';
import { FrameCutter } from '../audio/frames.js';
import { SharedFrameLevels } from '../audio/level.js';
import { AbortError, TimeoutError, ValidationError, type RtTranslateError } from '../errors.js';
import { REALTIME_BYTES_PER_FRAME } from './codec.js';
import type { StreamCallback } from './duplex-lifecycle.js';
import { EventFanout } from './event-queue.js';
import { fanoutEventWeight, type FanoutEvent, type RealtimeFanoutEvents, type RealtimeFanoutStats } from './fanout-events.js';
import {
  duplicateTarget,
  resolveFanoutOptions,
  resolveTarget,
  tooManyTargets,
  type FanoutTargetSpec,
  type RealtimeFanoutOptions,
  type ResolvedFanoutOptions,
  type ResolvedTarget,
} from './fanout-options.js';
import { TargetSession, type FanoutTarget, type TargetHooks } from './fanout-target.js';
import { normalizeRealtimeLanguage, type RealtimeLanguage } from './languages.js';
import { withEvents } from '../typed-events.js';

export type { FanoutTargetOptions, FanoutTargetSpec, RealtimeFanoutOptions } from './fanout-options.js';
export { MAX_FANOUT_TARGETS } from './fanout-options.js';
export type { FanoutTarget } from './fanout-target.js';
export {
  fanoutEventToRecord,
  type FanoutEvent,
  type FanoutOutcome,
  type FanoutTargetEvent,
  type FanoutTargetStats,
  type FanoutTargetStatus,
  type RealtimeFanoutEvents,
  type RealtimeFanoutStats,
  type TargetAddedInfo,
  type TargetDoneInfo,
} from './fanout-events.js';

/** Where the writable side is: each state keeps its pending callback. */
type FanoutState =
  | { status: 'open' }
  /**
   * A write waits for the targets it was given to (`fed`) to have room; `clock`: the lag clock
   * runs for it (another target took it).
   */
  | { status: 'waiting'; callback: StreamCallback; fed: readonly TargetSession[]; since: number; clock: boolean }
  /** After `_final`: its callback waits until every target is over. */
  | { status: 'ending'; callback: StreamCallback }
  | { status: 'closed' };

export class RealtimeFanout extends withEvents<RealtimeFanoutEvents>()(Writable) {
  readonly #o: ResolvedFanoutOptions;
  /** Every target running, and the last of each language that is over, in the order they joined. */
  readonly #targets = new Map<RealtimeLanguage, TargetSession>();
  /** The targets taking input (a new array on each change, so a loop over it is never disturbed). */
  #live: readonly TargetSession[] = [];
  /** The targets the current write is given to. */
  #fed: readonly TargetSession[] = [];
  readonly #cutter = new FrameCutter(REALTIME_BYTES_PER_FRAME);
  /** The input's frame levels, measured once per piece for all the sessions it is written to. */
  readonly #levels = new SharedFrameLevels();
  readonly #events: EventFanout<FanoutEvent>;
  readonly #hooks: TargetHooks;
  #state: FanoutState = { status: 'open' };
  /**
   * The lag clock's one timer, re-armed (`refresh`) for each held write it runs for, rather than a
   * timer made and cleared per write; when it fires for a write that is no longer held, nothing
   * happens. Unref'd: a held write's targets keep the process alive with their sockets.
   */
  #lagTimer: NodeJS.Timeout | undefined;
  /** `events()` consumers are behind: every target holds its socket back. */
  #held = false;
  #inputBytes = 0;
  #writeWaitMs = 0;
  #lagged = 0;
  readonly #onAbort: (() => void) | undefined;

  constructor(options: RealtimeFanoutOptions) {
    const o = resolveFanoutOptions(options);
    super({ highWaterMark: o.writableHighWaterMark, decodeStrings: true, objectMode: false });
    this.#o = o;
    this.#events = new EventFanout<FanoutEvent>({ count: o.maxQueuedEvents, bytes: o.maxQueuedEventBytes, weigh: fanoutEventWeight }, (full) =>
      this.#pressure(full),
    );
    this.#hooks = {
      event: (target, event) => {
        // Tagged only when someone listens (a fan-out nobody asks for events costs nothing more).
        if (this.#events.subscribers > 0 || this.listenerCount('event') > 0) this.#publish({ ...event, lang: target.lang });
      },
      drained: () => this.#checkWait(),
      changed: () => this.#changed(),
      settled: (_target, info) => {
        this.#publish({ type: 'target.done', ...info });
        this.#changed();
      },
      levels: this.#levels,
    };
    const signal = o.signal;
    if (signal) {
      this.#onAbort = () => this.destroy(new AbortError('The realtime fan-out was aborted.', { cause: signal.reason }));
      if (signal.aborted) process.nextTick(this.#onAbort);
      else signal.addEventListener('abort', this.#onAbort, { once: true });
    }
    const started = o.targets.map((target) => this.#start(target));
    // Announced once the caller has had the chance to listen.
    process.nextTick(() => {
      for (const target of started) this.#announce(target);
    });
  }

  /** The source language. */
  get from(): RealtimeLanguage {
    return this.#o.from;
  }

  /** Every target running, and the last of each language that is over, in the order they joined. */
  get targets(): FanoutTarget[] {
    return [...this.#targets.values()];
  }

  /** The target of `lang` (running, or the last one that is over). */
  target(lang: string): FanoutTarget | undefined {
    return this.#targets.get(lang.toLowerCase() as RealtimeLanguage);
  }

  /**
   * Starts a target (a language tag or `{ lang, voiceId }`); its input starts with the next
   * write. Throws a `ValidationError` when it is invalid, its language is already running,
   * `maxTargets` are running, or the input has ended.
   */
  addTarget(spec: FanoutTargetSpec): FanoutTarget {
    if (this.destroyed || this.writableEnded) {
      throw new ValidationError('addTarget', 'a fan-out whose input is still open', this.destroyed ? 'a destroyed one' : 'one whose input has ended');
    }
    const target = resolveTarget(spec, 'target', this.#o.voiceId);
    if (this.#targets.get(target.lang)?.over === false) throw duplicateTarget('target', target.lang);
    const running = [...this.#targets.values()].filter((t) => !t.over).length;
    if (running >= this.#o.maxTargets) throw tooManyTargets('target', this.#o.maxTargets, running + 1);
    const session = this.#start(target);
    this.#announce(session);
    return session;
  }

  /**
   * Ends the input of the target of `lang`: its session translates what it was sent, then ends
   * (its outcome `removed`). To stop it at once, destroy its `output`. False when no target of
   * `lang` takes input.
   */
  removeTarget(lang: string): boolean {
    const target = this.#targets.get(normalizeRealtimeLanguage(lang, 'lang'));
    if (!target?.live) return false;
    target.endInput(true);
    return true;
  }

  /**
   * Every event of every target, tagged with its `lang`, and the fan-out's own, in order per
   * target. Ends when the fan-out closes. A consumer that falls behind holds the targets'
   * sockets back (each through its stream's own bound).
   */
  events(): AsyncIterableIterator<FanoutEvent> {
    return this.#events.subscribe();
  }

  get stats(): RealtimeFanoutStats {
    const waiting = this.#state.status === 'waiting' ? performance.now() - this.#state.since : 0;
    return {
      inputBytes: this.#inputBytes,
      writeWaitMs: this.#writeWaitMs + waiting,
      lagged: this.#lagged,
      targets: [...this.#targets.values()].map((t) => t.stats),
    };
  }

  /* ------------------------------------------------------------------ the stream callbacks */

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: StreamCallback): void {
    const fed = (this.#fed = this.#live);
    // Whole samples with nothing pending (a writer's usual chunk) go as they are.
    if (this.#cutter.pendingBytes === 0 && chunk.length % REALTIME_BYTES_PER_FRAME === 0) this.#feed(chunk, 0, chunk.length / REALTIME_BYTES_PER_FRAME);
    else this.#cutter.cut(chunk, this.#feed);
    for (const target of fed) {
      if (!target.needsDrain) continue;
      this.#set({ status: 'waiting', callback, fed, since: performance.now(), clock: false });
      this.#checkWait();
      return;
    }
    callback();
  }

  override _final(callback: StreamCallback): void {
    if (this.#cutter.pendingBytes > 0) {
      this.#cutter.clear();
      this.#publish({
        type: 'warning',
        lang: undefined,
        warning: new ValidationError('input', 'whole PCM16 samples (an even number of bytes)', 'a trailing odd byte, dropped'),
      });
    }
    this.#set({ status: 'ending', callback });
    for (const target of this.#live) target.endInput(false);
    this.#checkEnd();
  }

  override _destroy(error: Error | null, callback: StreamCallback): void {
    if (this.#onAbort) this.#o.signal?.removeEventListener('abort', this.#onAbort);
    clearTimeout(this.#lagTimer);
    const state = this.#state;
    this.#set({ status: 'closed' });
    // A held write learns of the failure (as the realtime streams' held writes do).
    if (state.status === 'waiting') state.callback(error);
    const reason = error === null ? undefined : (error as RtTranslateError);
    for (const target of this.#targets.values()) target.stop(reason);
    void Promise.all([...this.#targets.values()].map((t) => t.done())).then(() => {
      this.#events.end(error ?? undefined);
      callback(error);
    });
  }

  /** Whole samples of the input, for every target the current write is given to. */
  readonly #feed = (buf: Buffer, offset: number, frames: number): void => {
    const audio = buf.subarray(offset, offset + frames * REALTIME_BYTES_PER_FRAME);
    this.#inputBytes += audio.length;
    // One pass: sessions that take the piece now measure its levels once between them.
    const levels = this.#levels;
    levels.open();
    try {
      for (const target of this.#fed) target.write(audio);
    } finally {
      levels.close();
    }
  };

  /* ------------------------------------------------------------------ targets */

  #start(target: ResolvedTarget): TargetSession {
    const session = new TargetSession(this.#o.stream, target, this.#inputBytes, this.#o.readableHighWaterMark, this.#hooks);
    if (this.#held) session.hold(true);
    this.#targets.delete(target.lang);
    this.#targets.set(target.lang, session);
    this.#live = [...this.#live, session];
    return session;
  }

  #announce(target: TargetSession): void {
    if (target.over) return;
    this.#publish({ type: 'target.added', lang: target.lang, voiceId: target.voiceId, inputOffset: target.inputOffset });
  }

  /** A target took input, stopped taking it, or is over. */
  #changed(): void {
    if (this.#live.some((t) => !t.live)) this.#live = this.#live.filter((t) => t.live);
    this.#checkWait();
    this.#checkEnd();
  }

  /** The one way the state changes. */
  #set(next: FanoutState): void {
    this.#state = next;
  }

  /** Starts the lag clock for the held write: `maxLagMs` from now. */
  #startClock(): void {
    if (this.#lagTimer) this.#lagTimer.refresh();
    else this.#lagTimer = setTimeout(() => this.#lagClock(), this.#o.maxLagMs).unref();
  }

  /** A held write goes on once every target it was given to has room; the lag clock runs while one is ahead. */
  #checkWait(): void {
    const state = this.#state;
    if (state.status !== 'waiting') return;
    let behind = 0;
    let ahead = 0;
    for (const t of state.fed) {
      if (!t.live) continue;
      if (t.needsDrain) behind++;
      else ahead++;
    }
    if (behind === 0) {
      this.#writeWaitMs += performance.now() - state.since;
      this.#set({ status: 'open' });
      state.callback();
      return;
    }
    if (ahead > 0 && !state.clock) {
      this.#set({ ...state, clock: true });
      this.#startClock();
    }
  }

  /** `maxLagMs` passed with the write held: the targets still behind are stopped, if another is ahead. */
  #lagClock(): void {
    const state = this.#state;
    if (state.status !== 'waiting' || !state.clock) return;
    const fed = state.fed.filter((t) => t.live);
    const behind = fed.filter((t) => t.needsDrain);
    if (behind.length === fed.length) {
      // Every target is behind now: none is held back by another; the clock starts again.
      this.#startClock();
      return;
    }
    this.#set({ ...state, clock: false });
    const ms = this.#o.maxLagMs;
    for (const target of behind) {
      this.#lagged++;
      target.stop(
        new TimeoutError(
          `The ${target.lang} target kept the input waiting for more than ${ms} ms while other targets took it: it was stopped, the others go on. ` +
            'Its service or network is slower than the others; raise maxLagMs to wait longer.',
          ms,
        ),
      );
    }
  }

  /** After `end()`: done once every target is over. */
  #checkEnd(): void {
    const state = this.#state;
    if (state.status !== 'ending') return;
    for (const t of this.#targets.values()) if (!t.over) return;
    this.#set({ status: 'closed' });
    state.callback();
  }

  /* ------------------------------------------------------------------ events */

  #publish(event: FanoutEvent): void {
    this.emit('event', event);
    this.#events.push(event);
    switch (event.type) {
      case 'target.added':
      case 'target.done': {
        const { type, ...info } = event;
        this.emit(type, info);
        break;
      }
      case 'warning':
        if (event.lang === undefined) this.emit('warning', event.warning);
        break;
    }
  }

  /** `events()` consumers fell behind (`full`), or caught up: every target holds its socket back meanwhile. */
  #pressure(full: boolean): void {
    this.#held = full;
    for (const target of this.#targets.values()) target.hold(full);
  }

  [inspect.custom](): string {
    const targets = [...this.#targets.values()].map((t) => `'${t.lang}' (${t.status})`).join(', ');
    return `RealtimeFanout { from: '${this.#o.from}', targets: [${targets}], inputBytes: ${this.#inputBytes} }`;
  }
}

// Typed events: `on('target.done', (info) => ...)` and friends.
