/**
 * After `end()`: whether the realtime session is done, still owed an answer, or must be given up,
 * as a pure function of numbers (tested without sockets or timers; the stream only wires it to a
 * timer and to the events that change its facts).
 */

/** What the ending decision looks at (times in ms on one clock). */
export interface EndingFacts {
  now: number;
  /** All input, padding included, has been taken by the socket (nothing queued). */
  allSent: boolean;
  /** A session is up (not connecting or waiting to reconnect). */
  connected: boolean;
  /** The stream stopped reading the socket because its own reader is behind. */
  paused: boolean;
  /** A response has started and not completed. */
  responseOpen: boolean;
  /** Speech sent that no response has answered yet. */
  speechUnanswered: boolean;
  /** Last response activity, or when the last input was taken by the socket, whichever is later. */
  lastActivityAt: number;
  quietPeriodMs: number;
  responseStallTimeoutMs: number;
}

export type EndingDecision =
  /** Something else bounds the wait (sending, reconnecting, the stream's own reader). */
  | { kind: 'waiting' }
  /** Decide again at `until`. */
  | { kind: 'wait'; until: number }
  /** Nothing is owed and the service has been quiet: the session is complete. */
  | { kind: 'finish' }
  /** An answer is owed but nothing has come for `responseStallTimeoutMs`. */
  | { kind: 'give-up'; reason: 'response-stalled' | 'speech-unanswered' };

/**
 * After `end()`: while something is owed (a response open, speech unanswered) the session waits
 * up to `responseStallTimeoutMs` of inactivity; otherwise `quietPeriodMs` of quiet ends it. Only
 * response activity counts as activity, and the wait starts once all input has been sent.
 */
export function decideEnding(f: EndingFacts): EndingDecision {
  if (!f.connected || !f.allSent || f.paused) return { kind: 'waiting' };
  const owed = f.responseOpen || f.speechUnanswered;
  const until = f.lastActivityAt + (owed ? f.responseStallTimeoutMs : f.quietPeriodMs);
  if (f.now < until) return { kind: 'wait', until };
  if (!owed) return { kind: 'finish' };
  return { kind: 'give-up', reason: f.responseOpen ? 'response-stalled' : 'speech-unanswered' };
}
