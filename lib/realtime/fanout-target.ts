/**
 * One target of a `RealtimeFanout`: a `RealtimeTranslateStream` of its own (its own session,
 * reconnects and replay of its own input), the Readable its caller reads the translated audio
 * from, and its events, handed to the fan-out as they happen. When the fan-out's `events()`
 * consumers are behind, `hold()` subscribes an iterator that nobody reads, so the stream's own
 * bound on a consumer that is behind pauses its socket. The fan-out writes the input into it
 * and ends or stops it; everything else is the stream's. When its session is over (ended,
 * failed, or stopped) the fan-out is told once, with how it went, and the target keeps only its
 * figures.
 */
import { Readable } from 'node:stream';
import type { SharedFrameLevels } from '../audio/level.js';
import { RtTranslateError } from '../errors.js';
import type { FanoutOutcome, FanoutTargetStats, FanoutTargetStatus, TargetDoneInfo } from './fanout-events.js';
import type { ResolvedTarget } from './fanout-options.js';
import type { RealtimeLanguage } from './languages.js';
import type { EndedInfo, RealtimeEvent, RealtimeStats } from './realtime-events.js';
import type { RealtimeTranslateOptions } from './realtime-options.js';
import { RealtimeTranslateStream, shareInputLevels } from './realtime-translate-stream.js';

/** A target of a fan-out, as its caller sees it. */
export interface FanoutTarget {
  readonly lang: RealtimeLanguage;
  readonly voiceId: number | undefined;
  /**
   * The translated audio, PCM16 LE mono 24 kHz. Read it from the start (a reader that is behind,
   * or none, pauses this target's socket only), or destroy it to remove the target at once. It
   * ends when the target is over, also after a failure (the error is in `error`, `stats` and the
   * `target.done` event).
   */
  readonly output: Readable;
  readonly status: FanoutTargetStatus;
  /** The current session's id, once known. */
  readonly sessionId: string | undefined;
  readonly stats: FanoutTargetStats;
  /** How its part ended, once it has. */
  readonly outcome: FanoutOutcome | undefined;
  readonly error: RtTranslateError | undefined;
  /** Resolves once the target is over (never rejects). */
  done(): Promise<TargetDoneInfo>;
}

/** What a target needs from its fan-out. */
export interface TargetHooks {
  /** One of its session's events. */
  event(target: TargetSession, event: RealtimeEvent): void;
  /** Its sending side has room again. */
  drained(): void;
  /** It no longer takes input. */
  changed(): void;
  /** It is over (`info` is what its `target.done` says). */
  settled(target: TargetSession, info: TargetDoneInfo): void;
  /** The input's frame levels, measured once per piece for every session it is written to. */
  readonly levels: SharedFrameLevels;
}

/**
 * The Readable of a target's audio: takes the stream's data once something reads it, and pauses
 * the stream when its own reader is behind (so the stream's buffer fills and its socket pauses).
 */
class TargetOutput extends Readable {
  #source: Readable | undefined;
  #attached = false;
  readonly #abandoned: () => void;

  constructor(source: Readable, highWaterMark: number, abandoned: () => void) {
    super({ highWaterMark });
    this.#source = source;
    this.#abandoned = abandoned;
  }

  override _read(): void {
    const source = this.#source;
    if (!source) return;
    if (!this.#attached) {
      this.#attached = true;
      source.on('data', this.#take);
      source.once('end', this.#finish);
      source.once('close', this.#finish);
      if (source.readableEnded || source.destroyed) return this.#finish();
      source.resume();
    } else if (source.isPaused()) {
      source.resume();
    }
  }

  readonly #take = (chunk: Buffer): void => {
    if (!this.push(chunk)) this.#source?.pause();
  };

  readonly #finish = (): void => {
    if (!this.#detach()) return;
    this.push(null);
  };

  #detach(): boolean {
    const source = this.#source;
    if (!source) return false;
    this.#source = undefined;
    source.off('data', this.#take);
    source.off('end', this.#finish);
    source.off('close', this.#finish);
    return true;
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    if (this.#detach()) this.#abandoned();
    callback(error);
  }
}

export class TargetSession implements FanoutTarget {
  readonly lang: RealtimeLanguage;
  readonly voiceId: number | undefined;
  /** Input bytes the fan-out had taken before this target joined. */
  readonly inputOffset: number;
  readonly output: Readable;
  readonly #hooks: TargetHooks;
  /** Released once the target is over (its figures are kept in `#final`). */
  #stream: RealtimeTranslateStream | undefined;
  /** While the fan-out's consumers are behind: an iterator of the stream's that nobody reads. */
  #held: AsyncIterableIterator<RealtimeEvent> | undefined;
  /** `live`: takes input; `finishing`: its input ended or it was stopped; `over`: its session is over. */
  #phase: 'live' | 'finishing' | 'over' = 'live';
  /** It left early (removed, its output destroyed, the fan-out destroyed). */
  #removed = false;
  #error: RtTranslateError | undefined;
  /** How its session ended, as its `ended` event said. */
  #ending: EndedInfo | undefined;
  #final: { stats: RealtimeStats; sessionId: string | undefined; info: TargetDoneInfo } | undefined;
  readonly #done: Promise<TargetDoneInfo>;
  #resolveDone!: (info: TargetDoneInfo) => void;

  constructor(
    options: Omit<RealtimeTranslateOptions, 'to' | 'voiceId'>,
    target: ResolvedTarget,
    inputOffset: number,
    readableHighWaterMark: number,
    hooks: TargetHooks,
  ) {
    this.lang = target.lang;
    this.voiceId = target.voiceId;
    this.inputOffset = inputOffset;
    this.#hooks = hooks;
    const stream = new RealtimeTranslateStream({ ...options, to: target.lang, ...(target.voiceId === undefined ? {} : { voiceId: target.voiceId }) });
    this.#stream = stream;
    shareInputLevels(stream, hooks.levels);
    stream.on('event', (event: RealtimeEvent) => hooks.event(this, event));
    stream.on('drain', () => hooks.drained());
    // The session is over: its end (unless reconnecting gave up: the error follows), its error,
    // or its close (stopped without one).
    stream.on('ended', (info: EndedInfo) => {
      this.#ending = info;
      if (info.reason !== 'gave-up') this.#settle();
    });
    stream.on('error', (error: Error) => {
      this.#error ??= error instanceof RtTranslateError ? error : new RtTranslateError('RTT_CONNECTION', error.message, { cause: error });
      this.#settle();
    });
    stream.on('close', () => this.#settle());
    this.output = new TargetOutput(stream, readableHighWaterMark, () => this.stop());
    this.#done = new Promise((resolve) => (this.#resolveDone = resolve));
  }

  /** The fan-out's consumers are behind (`on`), or have caught up. */
  hold(on: boolean): void {
    if (on && !this.#held && this.#stream) this.#held = this.#stream.events();
    if (!on && this.#held) {
      void this.#held.return?.();
      this.#held = undefined;
    }
  }

  /** Takes input. */
  get live(): boolean {
    return this.#phase === 'live';
  }

  get over(): boolean {
    return this.#phase === 'over';
  }

  /** Its sending side is full: the writer waits for it. */
  get needsDrain(): boolean {
    return this.#stream?.writableNeedDrain === true;
  }

  get status(): FanoutTargetStatus {
    if (this.#final) {
      const outcome = this.#final.info.outcome;
      return outcome === 'failed' ? 'failed' : outcome === 'removed' ? 'removed' : 'ended';
    }
    const state = this.#stream?.state;
    if (this.#phase === 'finishing' || state === undefined || state === 'closing' || state === 'closed') return 'finishing';
    return state;
  }

  get sessionId(): string | undefined {
    return this.#final ? this.#final.sessionId : this.#stream?.sessionId;
  }

  get outcome(): FanoutOutcome | undefined {
    return this.#final?.info.outcome;
  }

  get error(): RtTranslateError | undefined {
    return this.#error;
  }

  get stats(): FanoutTargetStats {
    const stats = this.#final?.stats ?? this.#stream!.stats;
    const inputWaiting = this.#stream?.writableLength ?? 0;
    return {
      ...stats,
      lang: this.lang,
      voiceId: this.voiceId,
      status: this.status,
      inputOffset: this.inputOffset,
      inputWaiting,
      outcome: this.outcome,
      error: this.#error,
    };
  }

  done(): Promise<TargetDoneInfo> {
    return this.#done;
  }

  /** Input for this target (whole samples); the fan-out checks `needsDrain` after. */
  write(audio: Buffer): void {
    this.#stream!.write(audio);
  }

  /** Its input ends: the session translates what it was sent, then ends. `removed`: it leaves early. */
  endInput(removed: boolean): void {
    if (this.#phase !== 'live') return;
    this.#phase = 'finishing';
    if (removed) this.#removed = true;
    this.#stream!.end();
    this.#hooks.changed();
  }

  /** Stops it at once: with `error` it failed (it lagged, the fan-out was aborted); without, it was removed. */
  stop(error?: RtTranslateError): void {
    if (this.#phase === 'over') return;
    const wasLive = this.#phase === 'live';
    this.#phase = 'finishing';
    if (error) this.#error ??= error;
    else this.#removed = true;
    this.#stream!.destroy(error);
    if (wasLive) this.#hooks.changed();
  }

  #settle(): void {
    const stream = this.#stream;
    if (!stream) return;
    this.hold(false);
    // While `ended` is emitted the stream's own figures do not have it yet.
    const ending = this.#ending ?? stream.stats.ending;
    const stats = { ...stream.stats, ending };
    const outcome: FanoutOutcome = this.#error ? 'failed' : this.#removed || !ending ? 'removed' : ending.complete ? 'complete' : 'incomplete';
    const info: TargetDoneInfo = { lang: this.lang, outcome, ending, error: this.#error };
    this.#final = { stats, sessionId: stream.sessionId, info };
    const wasLive = this.#phase === 'live';
    this.#phase = 'over';
    this.#stream = undefined;
    if (wasLive) this.#hooks.changed();
    this.#hooks.settled(this, info);
    this.#resolveDone(info);
  }
}
