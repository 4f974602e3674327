/**
 * The replay side of reconnecting a realtime session, for every realtime stream of the library.
 * From a drop the link retries until the next session is up is one outage. When a session is
 * lost, the input is rewound to where the answers so far leave off (for translation, just before
 * the first speech the service has not answered; for live transcription, the end of the last
 * final result), and what is no longer kept is counted as not replayed; when the next session is
 * up, the outage gives the `reconnected` figures and the reconnect stats. Also: how much accepted
 * input the service may not have processed, for the error of a session that cannot go on.
 */
import type { RtTranslateError } from '../errors.js';
import type { AudioOutbox } from './audio-outbox.js';
import type { ReconnectedInfo } from './realtime-events.js';
import type { Recovery } from './session-link.js';

/** What the service has answered of the input (a `SpeechLedger`, or the end of the final results). */
export interface AnsweredInput {
  /** Every byte of input before this offset has been answered. */
  readonly frontier: number;
  /** Where a replay of what was sent up to `sent` starts, `prerollMs` before what is unanswered. */
  replayStart(sent: number, prerollMs: number): number;
  /** Where input must still be kept from for such a replay: never after `replayStart`, and cheap enough for every send. */
  keepStart(sent: number, prerollMs: number): number;
}

/** Input replayed before the first unanswered speech, so the service hears it begin, in ms. */
export const REPLAY_PREROLL_MS = 300;

/**
 * Input sent between two looks at what no replay needs, in ms: a live source sends every 20 ms,
 * and memory let go 100 ms later is not worth a look at every send.
 */
const FORGET_STEP_MS = 100;

export interface OutageStats {
  /** Sessions re-established after a drop. */
  reconnects: number;
  /** Time without a session after drops, in total and the longest, in ms. */
  outageMs: number;
  longestOutageMs: number;
  /** Input bytes sent again. */
  bytesReplayed: number;
}

export interface OutageReplayOptions {
  /** Input replayed before the first unanswered input, so the service hears it begin, in ms. */
  prerollMs: number;
  /** Input audio bytes per millisecond. */
  bytesPerMs: number;
}

export class OutageReplay {
  readonly #ledger: AnsweredInput;
  readonly #outbox: AudioOutbox;
  readonly #o: OutageReplayOptions;
  readonly #stats: OutageStats = { reconnects: 0, outageMs: 0, longestOutageMs: 0, bytesReplayed: 0 };
  /** What the current outage sends again. */
  #current: { bytes: number; notReplayedBytes: number } | undefined;
  /** Where `handed()` last looked; the next look is a step past it. */
  #lookedAt = 0;
  readonly #stepBytes: number;

  constructor(ledger: AnsweredInput, outbox: AudioOutbox, options: OutageReplayOptions) {
    this.#ledger = ledger;
    this.#outbox = outbox;
    this.#o = options;
    this.#stepBytes = FORGET_STEP_MS * options.bytesPerMs;
  }

  get stats(): OutageStats {
    return { ...this.#stats };
  }

  /** A drop is being retried and no session is up yet. */
  get active(): boolean {
    return this.#current !== undefined;
  }

  /** Forgets input no replay will need: before the preroll of the first speech unanswered at `sent`. */
  forgetAnswered(sent: number): void {
    this.#lookedAt = sent;
    this.#outbox.keepFrom(this.#ledger.keepStart(sent, this.#o.prerollMs));
  }

  /** Input up to `sent` was handed to the socket: `forgetAnswered` once per step of input sent. */
  handed(sent: number): void {
    if (sent - this.#lookedAt >= this.#stepBytes) this.forgetAnswered(sent);
  }

  /** The link retries a drop: an outage begins, or goes on. */
  begin(): void {
    this.#current ??= { bytes: 0, notReplayedBytes: 0 };
  }

  /** A session was lost: what it did not answer is sent again first, from just before it. */
  rewind(): void {
    const outbox = this.#outbox;
    const wanted = this.#ledger.replayStart(outbox.sent, this.#o.prerollMs);
    const notReplayedBytes = Math.max(0, Math.min(outbox.start, outbox.sent) - wanted);
    const bytes = outbox.rewind(wanted);
    this.#lookedAt = outbox.sent;
    const current = this.#current ?? { bytes: 0, notReplayedBytes: 0 };
    this.#current = { bytes: current.bytes + bytes, notReplayedBytes: current.notReplayedBytes + notReplayedBytes };
  }

  /** A session is up: the outage is over. Returns the `reconnected` figures when it followed a drop. */
  recovered(sessionId: string, recovery: Recovery | undefined): ReconnectedInfo | undefined {
    const replayed = this.#current ?? { bytes: 0, notReplayedBytes: 0 };
    this.#current = undefined;
    if (!recovery) return undefined;
    const stats = this.#stats;
    stats.reconnects += 1;
    stats.outageMs += recovery.gapMs;
    stats.longestOutageMs = Math.max(stats.longestOutageMs, recovery.gapMs);
    stats.bytesReplayed += replayed.bytes;
    return {
      sessionId,
      attempt: recovery.attempt,
      replayedMs: this.#ms(replayed.bytes),
      notReplayedMs: this.#ms(replayed.notReplayedBytes),
      outageMs: recovery.gapMs,
    };
  }

  /** Accepted input that no answer has covered yet, in ms. */
  unprocessedMs(): number {
    return this.#ms(this.#outbox.end - this.#ledger.frontier);
  }

  /** Adds to `error` (met `context`, e.g. ` while reconnecting`) how much input may not have been processed. */
  explain(error: RtTranslateError, context: string): RtTranslateError {
    const unprocessed = this.unprocessedMs();
    if (unprocessed > 0) {
      error.unprocessedInputMs = unprocessed;
      error.message = `${error.message.replace(/\.?$/, '')}${context}. Up to ${(unprocessed / 1000).toFixed(1)} s of input audio may not have been processed.`;
    }
    return error;
  }

  #ms(bytes: number): number {
    return Math.round(bytes / this.#o.bytesPerMs);
  }
}
