/**
 * After `end()`: whether the realtime session is done, still owed an answer, or must be given up,
 * as a pure function of numbers (tested without sockets or timers; the stream only wires it to a
 * timer and to the events that change its facts).
 *
 * What decides is what the service has shown, not how the stream's own detector would segment
 * the speech: a response still open is owed; speech sent after the service's latest response
 * began cannot have been heard by it, so its answer is owed too. Anything else the service has
 * had, and the session ends once it has been quiet for the quiet period, counted from its latest
 * response or from when it showed it had read the latest speech (all the input, when there was
 * no speech), whichever is later.
 */

/** A ping behind some input: its pong shows the service has read that input. */
export interface InputFence {
  sentAt: number;
  /** When the pong came (undefined while awaited). */
  receivedAt: number | undefined;
}

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
  /** Speech owed an answer for certain: sent after the service's latest response began, in ms. */
  owedSpeechMs: number;
  /** The service's latest response activity (0: none). */
  lastActivityAt: number;
  /** The fence behind the latest speech sent, or behind all the input when there was no speech. */
  fence: InputFence | undefined;
  quietPeriodMs: number;
  responseStallTimeoutMs: number;
  /** A fence not answered within this time counts as passed then (a service that ignores pings). */
  fenceTimeoutMs: number;
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
 * Once all input is sent: the wait counts from the service's latest response activity or from
 * when it showed it had read the latest speech (the fence's pong), whichever is later. While an
 * answer is owed (a response open, speech sent after the latest response began) it lasts up to
 * `responseStallTimeoutMs`, then the answer is given up; otherwise `quietPeriodMs` of quiet ends
 * the session, complete.
 */
export function decideEnding(f: EndingFacts): EndingDecision {
  if (!f.connected || !f.allSent || f.paused) return { kind: 'waiting' };
  let heardAt = 0;
  if (f.fence) {
    heardAt = f.fence.receivedAt ?? f.fence.sentAt + f.fenceTimeoutMs;
    if (f.fence.receivedAt === undefined && f.now < heardAt) return { kind: 'wait', until: heardAt };
  }
  const owed = f.responseOpen || f.owedSpeechMs > 0;
  const until = Math.max(f.lastActivityAt, heardAt) + (owed ? f.responseStallTimeoutMs : f.quietPeriodMs);
  if (f.now < until) return { kind: 'wait', until };
  if (!owed) return { kind: 'finish' };
  return { kind: 'give-up', reason: f.responseOpen ? 'response-stalled' : 'speech-unanswered' };
}
