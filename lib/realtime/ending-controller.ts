/**
 * After `end()`, when a realtime translation session is over: the pure ending policy
 * (`ending-policy.ts`) wired to one timer, which lives in the stream's `ending` state (so the
 * lifecycle's setter clears it on any change), and the three ways a session ends: quiet with
 * nothing owed, given up on an answer that does not come, or closed by the service; and the
 * ending of a session whose reconnecting gave up. What is owed is what the service has shown it
 * owes (a response left open, speech sent after its latest response began), never the stream's
 * own count of utterances. What it decides goes into the lifecycle (`decide()`, or with the
 * failure), where `stats.ending` and `ended` read it.
 */
import { ConnectionError, TimeoutError, type RtTranslateError } from '../errors.js';
import type { DuplexLifecycle, StreamCallback } from './duplex-lifecycle.js';
import { decideEnding, type InputFence } from './ending-policy.js';
import type { EndedInfo } from './realtime-events.js';
import type { SpeechLedger } from './speech-ledger.js';
import { verdictTimer } from './verdict-timer.js';

/** What the `ending` state keeps: when all input was last seen taken by the socket. */
export interface EndingWait {
  allSentAt: number | undefined;
}

export interface EndingContext {
  life: DuplexLifecycle<EndingWait>;
  ledger: SpeechLedger;
  quietPeriodMs: number;
  responseStallTimeoutMs: number;
  /** A fence the service does not answer within this time counts as passed then. */
  fenceTimeoutMs: number;
  /** Input audio bytes per millisecond. */
  bytesPerMs: number;
  /** A session is up (not connecting, reconnecting or closing). */
  ready(): boolean;
  /** The stream stopped reading the socket because its own reader is behind. */
  paused(): boolean;
  /** All input, padding included, has been taken by the socket. */
  drained(): boolean;
  /** The fence behind the latest speech sent on this connection, or behind all the input when there was no speech (one is put there if missing). */
  inputFence(): InputFence | undefined;
  warn(warning: RtTranslateError): void;
  /** The session is over: close the connection (the stream ends once it has closed). */
  close(): void;
}

export class EndingController {
  readonly #c: EndingContext;
  /** The service's last response activity (or the end of our own pause). */
  #lastActivityAt = 0;

  constructor(context: EndingContext) {
    this.#c = context;
  }

  /** `_final`: the input has ended; its callback waits for the session's end. */
  begin(finalCallback: StreamCallback): void {
    this.#c.life.set({ status: 'ending', finalCallback, timer: undefined, allSentAt: undefined });
  }

  /** Response activity at `now` (the quiet period starts again). */
  activity(now: number): void {
    this.#lastActivityAt = now;
    this.evaluate();
  }

  /**
   * After end(): asks the ending policy, and acts or re-arms its one timer. `reached` is the
   * deadline a firing timer was set for: a timer that fired means its time has passed.
   */
  evaluate(reached = 0): void {
    const c = this.#c;
    const state = c.life.stateIn('ending');
    if (!state) return;
    if (!c.ready()) {
      c.life.set({ ...state, timer: undefined });
      return;
    }
    const now = Math.max(Date.now(), reached);
    const allSent = c.drained();
    const allSentAt = allSent ? (state.allSentAt ?? now) : state.allSentAt;
    const decision = decideEnding({
      now,
      allSent,
      connected: true,
      paused: c.paused(),
      responseOpen: c.ledger.responseOpen,
      owedSpeechMs: this.#owedSpeechMs(),
      lastActivityAt: this.#lastActivityAt,
      fence: allSent ? c.inputFence() : undefined,
      quietPeriodMs: c.quietPeriodMs,
      responseStallTimeoutMs: c.responseStallTimeoutMs,
      fenceTimeoutMs: c.fenceTimeoutMs,
    });
    const timer =
      decision.kind === 'wait'
        ? verdictTimer(
            decision.until - now,
            (t) => this.#c.life.state.status === 'ending' && this.#c.life.state.timer === t,
            () => this.evaluate(decision.until),
          )
        : undefined;
    c.life.set({ ...state, allSentAt, timer });
    if (decision.kind === 'finish') this.#finish(undefined);
    if (decision.kind !== 'give-up') return;
    const waited = c.responseStallTimeoutMs;
    const speech = `${(this.#owedSpeechMs() / 1000).toFixed(1)} s of speech`;
    const after = c.ledger.answeredInSession ? ' sent after its last response began' : '';
    c.warn(
      new TimeoutError(
        decision.reason === 'response-stalled'
          ? `The last response sent nothing for ${waited} ms after end(); closing without the rest of it.`
          : `The service did not answer ${speech}${after} within ${waited} ms after end(); closing without it.`,
        waited,
      ),
    );
    this.#finish(decision.reason);
  }

  /** A reconnect is scheduled: no waiting meanwhile; a lost session's input is sent again. */
  suspend(sessionLost: boolean): void {
    const life = this.#c.life;
    const state = life.state;
    if (state.status === 'ending') life.set({ ...state, timer: undefined, allSentAt: sessionLost ? undefined : state.allSentAt });
  }

  /**
   * The service closed the session normally. After end() that is the session's end: complete,
   * unless an answer was still owed (then a warning). Returns false before end().
   */
  closedByService(closeCode: number): boolean {
    const { life } = this.#c;
    if (life.state.status !== 'ending') return false;
    const owed = this.#owed();
    if (owed) {
      this.#c.warn(new ConnectionError('The realtime service closed the session after end() while an answer was still owed.', { closeCode, retryable: false }));
    }
    life.decide(this.#ended(owed ? 'closed-by-service' : undefined));
    return true;
  }

  /**
   * The connection dropped after end() with every byte sent and nothing owed: a new session
   * would have nothing to answer, so this is the session's end, complete. Returns false when a
   * reconnect is still needed: input unsent, a response cut, or speech past the answered
   * frontier (a lost session's answers never come, so here the stream's own estimate of what is
   * answered decides, and a replay may rather repeat an answer than lose one).
   */
  droppedWithNothingOwed(): boolean {
    const { life, ledger } = this.#c;
    const state = life.state;
    if (state.status !== 'ending' || state.allSentAt === undefined) return false;
    if (ledger.responseOpen || ledger.speechPastFrontier > 0) return false;
    life.decide(this.#ended(undefined));
    return true;
  }

  /** The stream gave up reconnecting: the session ended incomplete (its failure follows). */
  gaveUp(): EndedInfo {
    const ending = this.#ended('gave-up');
    this.#c.life.decide(ending);
    return ending;
  }

  /** An answer is owed for certain: a response is open, or speech was sent after the latest one began. */
  #owed(): boolean {
    return this.#c.ledger.responseOpen || this.#c.ledger.speechSinceLastResponse > 0;
  }

  #owedSpeechMs(): number {
    return Math.round(this.#c.ledger.speechSinceLastResponse / this.#c.bytesPerMs);
  }

  #ended(reason: EndedInfo['reason']): EndedInfo {
    return { complete: reason === undefined, reason, unansweredSpeechMs: this.#owedSpeechMs() };
  }

  /** The session is done (`reason` says what was left owed, if anything): decided, then closed. */
  #finish(reason: EndedInfo['reason']): void {
    this.#c.life.decide(this.#ended(reason));
    this.#c.close();
  }
}
