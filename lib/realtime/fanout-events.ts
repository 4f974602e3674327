/**
 * What `RealtimeFanout` tells its caller: every event of every target's session, tagged with
 * the target's language (`lang`), and the fan-out's own (`target.added`, `target.done`, a
 * `warning` about the input); the figures of each target and of the whole; and the same events
 * as JSON-safe records for a log line.
 */
import type { RtTranslateError } from '../errors.js';
import type { RealtimeLanguage } from './languages.js';
import { errorRecord, eventToRecord, eventWeight, type EndedInfo, type RealtimeEvent, type RealtimeStats } from './realtime-events.js';

/**
 * Where a target is: its session `connecting`, `active` or `reconnecting` while it takes input;
 * `finishing` once its input has ended (the last answers are awaited); then `ended`, `failed`
 * (its error in `error`) or `removed` (it left before its session ended).
 */
export type FanoutTargetStatus = 'connecting' | 'active' | 'reconnecting' | 'finishing' | 'ended' | 'failed' | 'removed';

/**
 * How a target's part ended: `complete` (every answer owed arrived), `incomplete` (the session
 * ended without some: see `ending`), `failed` (a fatal error: see `error`; the other targets go
 * on), `removed` (it left early: `removeTarget` or its output destroyed).
 */
export type FanoutOutcome = 'complete' | 'incomplete' | 'failed' | 'removed';

/** `target.added`: a target's session is starting; its input begins here. */
export interface TargetAddedInfo {
  lang: RealtimeLanguage;
  voiceId: number | undefined;
  /** Input bytes the fan-out had taken before this target joined (its input starts after them). */
  inputOffset: number;
}

/** `target.done`: a target is over; its output has ended (or ends once read). */
export interface TargetDoneInfo {
  lang: RealtimeLanguage;
  outcome: FanoutOutcome;
  /** How its session ended, when it did (also after a removal, when the session finished). */
  ending: EndedInfo | undefined;
  /** Why it failed (`outcome` 'failed'). */
  error: RtTranslateError | undefined;
}

/** An event of one target's session, as `RealtimeTranslateStream.events()` yields it, with the target's language. */
export type FanoutTargetEvent = RealtimeEvent & { lang: RealtimeLanguage };

/** Every event of a fan-out, as `events()` yields it. */
export type FanoutEvent =
  | FanoutTargetEvent
  | ({ type: 'target.added' } & TargetAddedInfo)
  | ({ type: 'target.done' } & TargetDoneInfo)
  /** About the input itself, not one target (a trailing odd byte at the end). */
  | { type: 'warning'; lang: undefined; warning: RtTranslateError };

/** A target's figures: its session's (`RealtimeStats`), where it is, and how it ended. */
export interface FanoutTargetStats extends RealtimeStats {
  lang: RealtimeLanguage;
  voiceId: number | undefined;
  status: FanoutTargetStatus;
  /** Input bytes the fan-out had taken before this target joined. */
  inputOffset: number;
  /** Input given to this target that its session has not taken yet (its writable buffer), in bytes. */
  inputWaiting: number;
  /** Once it is over. */
  outcome: FanoutOutcome | undefined;
  error: RtTranslateError | undefined;
}

/** The fan-out's figures: the input, the writer's waits, and each target's (latency per language). */
export interface RealtimeFanoutStats {
  /** Input audio accepted from the writer, in bytes (whole samples). */
  inputBytes: number;
  /** Time the writer spent waiting for the slowest target's sending side, in ms. */
  writeWaitMs: number;
  /** Targets stopped because they kept the writer waiting longer than `maxLagMs`. */
  lagged: number;
  /** Every target still running, and the last one of each language that is over, in the order they joined. */
  targets: FanoutTargetStats[];
}

/** Listener arguments of the fan-out's events. */
export interface RealtimeFanoutEvents {
  /** Every event, as `events()` yields it. */
  event: [event: FanoutEvent];
  'target.added': [info: TargetAddedInfo];
  'target.done': [info: TargetDoneInfo];
  /** A warning about the input (a target's own warnings come as `event`, tagged). */
  warning: [warning: RtTranslateError];
}

/** What an event holds in memory while queued for an `events()` consumer, in bytes. */
export function fanoutEventWeight(event: FanoutEvent): number {
  return event.type === 'audio.delta' ? eventWeight(event) : 0;
}

/**
 * The event as a JSON-safe record for a log line (see `eventToRecord`), with its `lang`; the
 * fan-out's own events with their errors as code and message.
 */
export function fanoutEventToRecord(event: FanoutEvent): Record<string, unknown> {
  switch (event.type) {
    case 'target.added':
      return { ...event };
    case 'target.done': {
      const { error, ...rest } = event;
      return { ...rest, error: error === undefined ? undefined : errorRecord(error) };
    }
    default:
      if (event.lang === undefined) return { type: event.type, lang: undefined, warning: errorRecord(event.warning) };
      return { ...eventToRecord(event), lang: event.lang };
  }
}
