/**
 * Keeps the timeline of a timestamped audio source real: a source that skips frames (Twilio
 * sends no `media` for audio it lost, and its timestamps jump over the hole) would otherwise
 * compress time, and a voice-activity detector downstream would hear speech and silence closer
 * together than they were.
 *
 * Policy, in samples of the source's rate, counted from the stream's start (timestamp 0):
 * - the timeline's position is every sample fed so far plus every sample of silence inserted,
 *   except after a cut gap (below), where it is rebased on the source's clock;
 * - a frame stamped `t` ms is due at sample `round(t * rate / 1000)`. When that is at least
 *   `toleranceMs` past the position, the difference is a gap: silence is inserted up to the
 *   frame's start, at most `maxFillMs` of it (a longer gap is cut to that bound, so one message
 *   can never make the bridge allocate or send more than `maxFillMs` of audio);
 * - after a cut gap the position jumps to the frame's due sample plus the frame (the cut part
 *   is skipped, not owed): the frames that follow it are on time again, and the cut is counted
 *   once, in that frame's `cutSamples`;
 * - differences under `toleranceMs` are jitter and ignored; a frame stamped earlier than the
 *   position (a late or repeated timestamp) is taken as is: audio is never dropped or reordered;
 * - a frame with no timestamp follows the previous one.
 *
 * Bound by the clock: given the source's elapsed wall time (`next(t, n, elapsedMs)`), the audio
 * handed out (frames fed plus silence inserted) may run at most `maxAheadMs` ahead of it. A step
 * that would go further says how long to wait (`waitMs`) before feeding it: the caller holds the
 * frame until then, so a source faster than real time (a burst, or a timestamp far ahead) is
 * slowed to the clock and can never make the bridge send more audio than the call has lasted.
 */
import { ValidationError } from '../errors.js';

export interface MediaTimelineOptions {
  /** Samples per second of the source (Hz). */
  sampleRate: number;
  /** Longest silence inserted for one gap, in ms (0 turns gap filling off). Default 1000. */
  maxFillMs?: number;
  /** Timestamp differences below this are jitter, not gaps, in ms. Default 10. */
  toleranceMs?: number;
  /** With `elapsedMs`: how far the audio handed out may run ahead of the clock, in ms. Default 1000. */
  maxAheadMs?: number;
}

/** What to do before feeding one frame. */
export interface TimelineStep {
  /** Samples of silence to insert before the frame. */
  fillSamples: number;
  /** Samples of the gap that were not filled because of `maxFillMs`. */
  cutSamples: number;
  /**
   * Present when `elapsedMs` was given: ms to wait before feeding the step (silence and frame),
   * so that the audio handed out stays within `maxAheadMs` of the clock; 0 when it may go now.
   */
  waitMs?: number;
}

export const DEFAULT_MAX_FILL_MS = 1000;
export const DEFAULT_GAP_TOLERANCE_MS = 10;
export const DEFAULT_MAX_AHEAD_MS = 1000;

function nonNegative(field: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new ValidationError(field, 'a number of milliseconds, 0 or more', String(value));
  }
  return value;
}

/** Tracks a source's position and finds the gaps to fill; see the module comment. */
export class MediaTimeline {
  readonly sampleRate: number;
  readonly maxFillSamples: number;
  readonly toleranceSamples: number;
  readonly maxAheadMs: number;
  #position = 0;
  /** Samples handed out: frames fed and silence inserted. */
  #handedOut = 0;

  constructor(options: MediaTimelineOptions) {
    const rate = options?.sampleRate;
    if (typeof rate !== 'number' || !Number.isInteger(rate) || rate <= 0) {
      throw new ValidationError('sampleRate', 'a positive integer sample rate in Hz', String(rate));
    }
    this.sampleRate = rate;
    this.maxFillSamples = Math.round((nonNegative('maxFillMs', options.maxFillMs, DEFAULT_MAX_FILL_MS) * rate) / 1000);
    this.toleranceSamples = Math.max(1, Math.round((nonNegative('toleranceMs', options.toleranceMs, DEFAULT_GAP_TOLERANCE_MS) * rate) / 1000));
    this.maxAheadMs = nonNegative('maxAheadMs', options.maxAheadMs, DEFAULT_MAX_AHEAD_MS);
  }

  /** The timeline's position, in samples: fed, inserted, and skipped by cut gaps. */
  get position(): number {
    return this.#position;
  }

  /** Samples handed out so far: frames fed and silence inserted (what the service is sent). */
  get handedOut(): number {
    return this.#handedOut;
  }

  /**
   * Accounts for a frame of `samples` samples stamped `timestampMs` (or unstamped), and says how
   * much silence goes before it. The caller inserts `fillSamples` of silence, then the frame;
   * with `elapsedMs` (the source's wall time so far), after waiting `waitMs`.
   */
  next(timestampMs: number | undefined, samples: number, elapsedMs?: number): TimelineStep {
    let fill = 0;
    let cut = 0;
    let start = this.#position;
    if (timestampMs !== undefined) {
      const due = Math.round((timestampMs * this.sampleRate) / 1000);
      const gap = due - this.#position;
      if (gap >= this.toleranceSamples) {
        fill = Math.min(gap, this.maxFillSamples);
        cut = gap - fill;
        // The frame starts where it is due: after a cut gap that rebases the timeline on the
        // source's clock (otherwise every following frame would look late by the cut and get
        // silence of its own).
        start = due;
      }
    }
    this.#position = start + samples;
    this.#handedOut += fill + samples;
    if (elapsedMs === undefined) return { fillSamples: fill, cutSamples: cut };
    const allowed = ((elapsedMs + this.maxAheadMs) * this.sampleRate) / 1000;
    const over = this.#handedOut - allowed;
    return { fillSamples: fill, cutSamples: cut, waitMs: over > 0 ? Math.ceil((over * 1000) / this.sampleRate) : 0 };
  }
}
