/**
 * One target of a `RealtimeFanout`: a `RealtimeTranslateStream` of its own (its own session,
 * reconnects and replay of its own input), the Readable its caller reads the translated audio
 * from, and its events, tagged with its language, handed to the fan-out one at a time (so a
 * fan-out consumer that is behind holds this target's socket back through the stream's own
 * bound). The fan-out writes the input into it and ends or stops it; everything else is the
 * stream's. When its session is over (ended, failed, or stopped) the fan-out is told once, with
 * how it went, and the target keeps only its figures.
 */
import { Readable } from 'node:stream';
import { RtTranslateError } from '../errors.js';
import type { FanoutEvent, FanoutOutcome, FanoutTargetStats, FanoutTargetStatus, TargetDoneInfo } from './fanout-events.js';
import type { ResolvedTarget } from './fanout-options.js';
import type { RealtimeLanguage } from './languages.js';
import type { RealtimeEvent, RealtimeStats } from './realtime-events.js';
import type { RealtimeTranslateOptions } from './realtime-options.js';
import { RealtimeTranslateStream } from './realtime-translate-stream.js';

/** A target of a fan-out, as its caller sees it. */
export interface FanoutTarget {
  readonly lang: RealtimeLanguage;
  readonly voiceId: number | undefined;
  /**
   * The translated audio, PCM16 LE mono 24 kHz. Read it (a reader that is behind pauses this
   * target's socket only), or destroy it to remove the target at once. It ends when the target
   * is over, also after a failure (the error is in `error`, `stats` and the `target.done` event).
   * Audio that arrives before anything reads it goes to `events()` only.
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
  /** One of its events, tagged, or its `target.done`. */
  publish(event: FanoutEvent): void;
  /** While the fan-out's `events()` consumers are behind: resolves when they have caught up. */
  gate(): Promise<void> | undefined;
  /** Its sending side has room again, or it no longer takes input. */
  changed(): void;
  /** It is over. */
  settled(target: TargetSession): void;
}

/** The Readable of a target's audio: takes from the stream only once something reads it. */
class TargetOutput extends Readable {
  #source: Readable | undefined;
  #attached = false;
  /** The reader wants more (since `_read`, until `push()` says stop): only then is the stream read. */
  #wanted = false;
  readonly #abandoned: () => void;

  constructor(source: Readable, highWaterMark: number, abandoned: () => void) {
    super({ highWaterMark });
    this.#source = source;
    this.#abandoned = abandoned;
  }

  override _read(): void {
    const source = this.#source;
    if (!source) return;
    this.#wanted = true;
    if (!this.#attached) {
      this.#attached = true;
      // Paused mode: the stream pushes what it receives to us (not only to events()).
      source.on('readable', this.#pull);
      source.once('end', this.#finish);
      source.once('close', this.#finish);
      if (source.readableEnded || source.destroyed) return this.#finish();
    }
    this.#pull();
  }

  readonly #pull = (): void => {
    const source = this.#source;
    // Read only what is wanted: what stays in the stream holds its socket back.
    if (!source || !this.#wanted) return;
    for (let chunk: Buffer | null; (chunk = source.read() as Buffer | null) !== null; ) {
      if (!this.push(chunk)) {
        this.#wanted = false;
        return;
      }
    }
  };

  readonly #finish = (): void => {
    if (!this.#detach()) return;
    this.push(null);
  };

  #detach(): boolean {
    const source = this.#source;
    if (!source) return false;
    this.#source = undefined;
    source.off('readable', this.#pull);
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
  readonly #events: AsyncIterableIterator<RealtimeEvent>;
  /** `live`: takes input; `finishing`: its input ended or it was stopped; `over`: its session is over. */
  #phase: 'live' | 'finishing' | 'over' = 'live';
  /** It left early (removed, its output destroyed, the fan-out destroyed). */
  #removed = false;
  #error: RtTranslateError | undefined;
  #final: { stats: RealtimeStats; sessionId: string | undefined; info: TargetDoneInfo } | undefined;
  readonly #done: Promise<TargetDoneInfo>;
  #resolveDone!: (info: TargetDoneInfo) => void;

  constructor(options: Omit<RealtimeTranslateOptions, 'to' | 'voiceId'>, target: ResolvedTarget, inputOffset: number, readableHighWaterMark: number, hooks: TargetHooks) {
    this.lang = target.lang;
    this.voiceId = target.voiceId;
    this.inputOffset = inputOffset;
    this.#hooks = hooks;
    const stream = new RealtimeTranslateStream({ ...options, to: target.lang, ...(target.voiceId === undefined ? {} : { voiceId: target.voiceId }) });
    this.#stream = stream;
    // Subscribed before anything can happen; its end (or error) is the target's end.
    this.#events = stream.events();
    stream.on('error', () => {}); // reaches us through the iterator
    stream.on('drain', () => hooks.changed());
    this.output = new TargetOutput(stream, readableHighWaterMark, () => this.stop());
    this.#done = new Promise((resolve) => (this.#resolveDone = resolve));
    void this.#pump();
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
    return { ...stats, lang: this.lang, voiceId: this.voiceId, status: this.status, inputOffset: this.inputOffset, inputWaiting, outcome: this.outcome, error: this.#error };
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

  /** Hands every event of the session to the fan-out, waiting while its consumers are behind. */
  async #pump(): Promise<void> {
    try {
      for (;;) {
        const next = await this.#events.next();
        if (next.done) break;
        this.#hooks.publish({ ...next.value, lang: this.lang });
        const gate = this.#hooks.gate();
        if (gate) await gate;
      }
    } catch (error) {
      this.#error ??= error instanceof RtTranslateError ? error : new RtTranslateError('RTT_CONNECTION', String(error), { cause: error });
    }
    this.#settle();
  }

  #settle(): void {
    const stream = this.#stream!;
    const stats = stream.stats;
    const ending = stats.ending;
    const outcome: FanoutOutcome = this.#error ? 'failed' : this.#removed || !ending ? 'removed' : ending.complete ? 'complete' : 'incomplete';
    const info: TargetDoneInfo = { lang: this.lang, outcome, ending, error: this.#error };
    this.#final = { stats, sessionId: stream.sessionId, info };
    const wasLive = this.#phase === 'live';
    this.#phase = 'over';
    this.#stream = undefined;
    if (wasLive) this.#hooks.changed();
    this.#hooks.publish({ type: 'target.done', ...info });
    this.#hooks.settled(this);
    this.#resolveDone(info);
  }
}
