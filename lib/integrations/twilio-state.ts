/**
 * Where a `TwilioMediaBridge` is: its input (`InboundState`, with the timers each place owns)
 * and its translated side (`OutputState`, which ends on its own schedule). The bridge changes
 * each through one setter; `timersOf` names the timers a setter clears. And its warning budget:
 * how many of each kind a caller can make it emit; and its counts, reported as `stats`.
 */
import type { TimelineStep } from './media-timeline.js';
import { TWILIO_SAMPLE_RATE } from './twilio-messages.js';
import type { TwilioBridgeStats, TwilioWarningKind } from './twilio-options.js';
/**
 * Where the call's input is. `timer` is the start timeout (`startTimeoutMs`); `idle` the media
 * timeout (`mediaTimeoutMs`), counted from the last accepted frame (set again for the rest of the
 * period when it fires after newer media); `hold` a frame waiting for the
 * clock (`maxAheadMs`), its write's callback held meanwhile; `waiting` a write's callback
 * waiting for the translator's `drain`. Changed only through `#set`, which clears the timers the
 * new state does not keep.
 */
export type InboundState =
  | { status: 'awaiting-start'; timer: NodeJS.Timeout }
  | { status: 'live'; idle: NodeJS.Timeout; startedAt: number; hold: NodeJS.Timeout | undefined; waiting: boolean }
  /** `stop`, or the end of the writable side: no more input, no timers. */
  | { status: 'ended' }
  | { status: 'closed' };

/**
 * Where the translated side (translator -> `TwilioOutbound` -> the readable side) is. It ends on
 * its own schedule, before or after the input, so it is a state of its own, changed only through
 * `#setOutput`, which settles a `_final` callback the new state does not carry (unless the bridge
 * is destroyed: Node no longer waits for it then).
 */
export type OutputState =
  /** `finalCallback`: the input has ended and `_final` waits for the last response. */
  | { status: 'translating'; finalCallback: StreamCallback | undefined }
  /** The last response has gone out: the readable side has ended. */
  | { status: 'done' }
  /** The input ended before `start` (`openSession: 'start'`): no session was opened, none is ended. */
  | { status: 'skipped' }
  | { status: 'closed' };

export type StreamCallback = (error?: Error | null) => void;

export function timersOf(state: InboundState): Array<NodeJS.Timeout | undefined> {
  switch (state.status) {
    case 'awaiting-start':
      return [state.timer];
    case 'live':
      return [state.idle, state.hold];
    default:
      return [];
  }
}

/**
 * Warnings of each kind: emitted up to `maxPerKind` (at most one `media-size`, which a caller
 * could repeat on every frame), the rest only counted, so a misbehaving caller cannot flood the
 * application's logs; `stats.suppressedWarnings` reports those.
 */
export class WarningBudget {
  readonly #maxPerKind: number;
  /** Warnings of each kind so far, emitted or not. */
  readonly #counts: Partial<Record<TwilioWarningKind, number>> = {};

  constructor(maxPerKind: number) {
    this.#maxPerKind = maxPerKind;
  }

  /** Counts one warning of `kind`; true when it is within its kind's limit (to be emitted). */
  take(kind: TwilioWarningKind): boolean {
    const count = (this.#counts[kind] ?? 0) + 1;
    this.#counts[kind] = count;
    return count <= this.#limit(kind);
  }

  /** Warnings counted beyond their kind's limit, by kind. */
  suppressed(): Partial<Record<TwilioWarningKind, number>> {
    const out: Partial<Record<TwilioWarningKind, number>> = {};
    for (const [kind, count] of Object.entries(this.#counts) as Array<[TwilioWarningKind, number]>) {
      const over = count - this.#limit(kind);
      if (over > 0) out[kind] = over;
    }
    return out;
  }

  #limit(kind: TwilioWarningKind): number {
    return kind === 'media-size' ? Math.min(1, this.#maxPerKind) : this.#maxPerKind;
  }
}

/** mu-law bytes (samples) per millisecond. */
const SAMPLES_PER_MS = TWILIO_SAMPLE_RATE / 1000;

/** What a bridge counts as the call goes, audio in samples; `stats` reports it with audio in ms. */
export class BridgeCounts {
  mediaMessages = 0;
  receivedSamples = 0;
  insertedSamples = 0;
  cutSamples = 0;
  responses = 0;
  marksPlayed = 0;
  clears = 0;
  warnings = 0;
  refusedFrames = 0;

  /** One accepted `media` message of `samples`, placed on the call's timeline by `step`. */
  media(samples: number, step: TimelineStep): void {
    this.mediaMessages += 1;
    this.receivedSamples += samples;
    this.insertedSamples += step.fillSamples;
    this.cutSamples += step.cutSamples;
  }

  /** The counts as `TwilioMediaBridge.stats` reports them, with what the outbound side and the warning budget count. */
  stats(outboundFrames: number, suppressedWarnings: TwilioBridgeStats['suppressedWarnings']): TwilioBridgeStats {
    return {
      mediaMessages: this.mediaMessages,
      receivedMs: this.receivedSamples / SAMPLES_PER_MS,
      insertedSilenceMs: this.insertedSamples / SAMPLES_PER_MS,
      cutGapMs: this.cutSamples / SAMPLES_PER_MS,
      outboundFrames,
      responses: this.responses,
      marksPlayed: this.marksPlayed,
      clears: this.clears,
      warnings: this.warnings,
      refusedFrames: this.refusedFrames,
      suppressedWarnings,
    };
  }
}
