/**
 * The connection and reconnect manager of a realtime client: one session over a succession of
 * WebSocket connections. It opens a connection, waits (bounded by `readyTimeoutMs`; a reconnect
 * attempt by `reconnect.attemptTimeoutMs` unless the service says it is starting) for its owner
 * to say the session is ready, and when a connection drops it waits out the reconnect policy and
 * opens the next one, until the owner closes it or the policy gives up. What the protocol means
 * (what to send first, which message makes the session ready, what to send again) is the
 * owner's, so every realtime stream of the library shares this.
 *
 * An outage lasts from a drop until the new session proves itself (the owner reports progress,
 * or it stays up longer than the longest back-off): a service that accepts sessions and drops
 * them at once stays bounded by the policy's attempts and time. When the link fails while a lost
 * session has not come back, it says so (`gaveUp`): the owner does not repeat the policy's rules.
 */
import { ConnectionError, RtTranslateError, describeCause } from '../errors.js';
import { RealtimeConnection, type ConnectionEnd, type ConnectionOptions } from './connection.js';
import { reconnectDelay, type ReconnectPolicy } from './reconnect-policy.js';
import { errorForConnectionEnd } from './server-errors.js';
import { verdictTimer } from './verdict-timer.js';

export interface SessionLinkOptions {
  /** Where and how to connect (the handshake is bounded by `readyTimeoutMs`). */
  connection: Omit<ConnectionOptions, 'handshakeTimeoutMs'>;
  /** From connecting to the owner's `ready()`, in ms. */
  readyTimeoutMs: number;
  /** Undefined: a drop is the end of the session. */
  reconnect: ReconnectPolicy | undefined;
  /** Kept out of every message. */
  secret: string;
  /** While a session is ready, the owner's `keepAlive()` is called this often, in ms (undefined: never). */
  keepAliveMs?: number;
}

export interface LinkHandlers {
  /** A connection is open (attempt 0 is the first): send what the protocol sends first. */
  open(attempt: number): void;
  /** A message of the current connection. */
  message(data: Buffer, isBinary: boolean): void;
  /** The current connection's peer answered ping `id` (see `ping()`). */
  pong?(id: number): void;
  /** Every `keepAliveMs` while a session is ready (the timer lives in the `ready` state). */
  keepAlive?(): void;
  /** The error for a session that did not become ready within `waitedMs` (`reconnecting`: on a reconnect attempt). */
  readyTimeout(waitedMs: number, reconnecting: boolean): RtTranslateError;
  /**
   * The current connection ended unasked. Returns the error it means (`cause` is the link's
   * reading of the end; the owner may know better), or `'finished'` when the owner takes it as
   * the session's normal end (the link is then closed).
   */
  dropped(end: ConnectionEnd, cause: RtTranslateError, wasReady: boolean): RtTranslateError | 'finished';
  /**
   * Attempt `attempt` starts after `delayMs`. `sessionLost` when a ready session just dropped (what
   * it had not answered must be sent again), false when a reconnect attempt failed.
   */
  reconnecting(attempt: number, delayMs: number, cause: RtTranslateError, sessionLost: boolean): void;
  /**
   * The session is over with `error` (not retryable, no reconnect, the policy gave up, or the
   * owner's `fail()`); `whileReconnecting` when a reconnect attempt met it. `gaveUp` when a ready
   * session had been lost and reconnecting did not bring it back (the session ended incomplete).
   */
  failed(error: RtTranslateError, whileReconnecting: boolean, gaveUp: boolean): void;
  /** A `close()` completed. */
  closed(): void;
}

type Timer = NodeJS.Timeout;

/** How much longer than the ready timer the socket's own handshake timeout waits. */
const HANDSHAKE_BACKSTOP_MS = 1000;

/** Where the link is. Each state owns its timers; `#setState` clears them. */
type LinkState =
  /** `startedAt` and `budgetMs` (what the outage has left): when the service says it is starting, the wait grows to `readyTimeoutMs`. */
  | { status: 'connecting'; connection: RealtimeConnection; attempt: number; readyTimer: Timer; startedAt: number; budgetMs: number; coldStart: boolean }
  | { status: 'ready'; connection: RealtimeConnection; settleTimer: Timer | undefined; keepAliveTimer: Timer | undefined }
  | { status: 'waiting'; attempt: number; timer: Timer }
  | { status: 'closing'; connection: RealtimeConnection }
  | { status: 'closed' };

export type LinkStatus = LinkState['status'];

/** What `ready()` reports when the session came back after a drop. */
export interface Recovery {
  /** Attempts it took since the outage began. */
  attempt: number;
  /** From the drop to this session, in ms. */
  gapMs: number;
}

export class SessionLink {
  readonly #options: SessionLinkOptions;
  readonly #handlers: LinkHandlers;
  readonly #pauses = new Set<string>();
  #state: LinkState = { status: 'closed' };
  /**
   * The state's connection, kept beside it: the send path reads it for every message, and a
   * field is cheaper to read than a property that only some states of the union have.
   */
  #connection: RealtimeConnection | undefined;
  /**
   * The state's status, kept beside it for the same reason: a property read on objects of five
   * shapes is a megamorphic lookup, paid by every send and every message.
   */
  #status: LinkStatus = 'closed';
  #outage: { startedAt: number; attempts: number; gapStartedAt: number } | undefined;
  /** The newest connection, so teardown can wait for its socket. */
  #last: RealtimeConnection | undefined;

  constructor(options: SessionLinkOptions, handlers: LinkHandlers) {
    this.#options = options;
    this.#handlers = handlers;
  }

  get status(): LinkStatus {
    return this.#status;
  }

  /** Bytes given to `send()` that the socket has not taken yet (0 without a connection). */
  get bufferedAmount(): number {
    return this.#connection?.bufferedAmount ?? 0;
  }

  /** Whether reads are paused for any reason. */
  get paused(): boolean {
    return this.#pauses.size > 0;
  }

  /** A ready session was lost and is not back yet: waiting for a reconnect attempt, or making one. */
  get recovering(): boolean {
    const state = this.#state;
    return state.status === 'waiting' || (state.status === 'connecting' && state.attempt > 0);
  }

  /** Opens the first connection. */
  start(): void {
    this.#connect(0);
  }

  /** Sends on the current connection; false (no callback) when there is none open. */
  send(data: string | Buffer, callback?: (error?: Error) => void, binary = typeof data !== 'string'): boolean {
    return this.#connection !== undefined && this.#connection.send(data, callback, binary);
  }

  /** Pings on the current connection behind what was sent (see `RealtimeConnection.ping`); undefined when there is none open. */
  ping(): number | undefined {
    return 'connection' in this.#state ? this.#state.connection.ping() : undefined;
  }

  /** Stops reading for `reason`, on this connection and the ones after it, until `resume(reason)`. */
  pause(reason: string): void {
    this.#pauses.add(reason);
    if ('connection' in this.#state) this.#state.connection.pause(reason);
  }

  resume(reason: string): void {
    this.#pauses.delete(reason);
    if ('connection' in this.#state) this.#state.connection.resume(reason);
  }

  /**
   * The service says the session is starting (a cold start): a reconnect attempt, bounded by
   * `reconnect.attemptTimeoutMs`, now gets `readyTimeoutMs` (within the outage's budget).
   */
  starting(): void {
    const state = this.#state;
    if (state.status !== 'connecting' || state.attempt === 0 || state.coldStart) return;
    const waitMs = Math.max(1, Math.min(this.#options.readyTimeoutMs, state.budgetMs));
    const readyTimer = this.#readyTimer(state.attempt, waitMs, waitMs - (Date.now() - state.startedAt));
    this.#setState({ ...state, readyTimer, coldStart: true });
  }

  /** The owner's protocol says the session is ready. Reports the recovery when it follows a drop. */
  ready(): Recovery | undefined {
    const state = this.#state;
    if (state.status !== 'connecting') return undefined;
    const outage = this.#outage;
    const settleMs = this.#options.reconnect?.maxDelayMs ?? 0;
    const settleTimer = outage ? setTimeout(() => (this.#outage = undefined), settleMs) : undefined;
    this.#setState({ status: 'ready', connection: state.connection, settleTimer, keepAliveTimer: this.#keepAliveTimer() });
    if (!outage) return undefined;
    outage.attempts = state.attempt;
    return { attempt: state.attempt, gapMs: Date.now() - outage.gapStartedAt };
  }

  /** The session made progress (it answered): a drop from now on is a new outage. */
  progress(): void {
    this.#outage = undefined;
  }

  /** Closes the session gracefully; `closed()` follows once the peer answered (or after `graceMs`). */
  close(graceMs = 2000): void {
    const state = this.#state;
    if (!('connection' in state) || state.status === 'closing') return;
    this.#setState({ status: 'closing', connection: state.connection });
    state.connection.close(1000, 'done', graceMs);
  }

  /** Ends everything now (a failure or a destroy). */
  shutdown(): void {
    this.#last?.terminate();
    this.#setState({ status: 'closed' });
  }

  /**
   * The owner's protocol found that the session cannot go on (the service refused it before it
   * started): ends everything now and reports `failed`, a give-up if a lost session was being
   * brought back.
   */
  fail(error: RtTranslateError): void {
    const recovering = this.recovering;
    this.#last?.terminate();
    this.#fail(error, recovering, recovering);
  }

  /** Resolves once the newest connection's socket has closed. */
  whenClosed(): Promise<void> {
    return this.#last?.closed ?? Promise.resolve();
  }

  #setState(next: LinkState): void {
    const previous = this.#state;
    if (previous.status === 'connecting') clearTimeout(previous.readyTimer);
    if (previous.status === 'ready') {
      clearTimeout(previous.settleTimer);
      clearInterval(previous.keepAliveTimer);
    }
    if (previous.status === 'waiting') clearTimeout(previous.timer);
    const kept = 'connection' in next ? next.connection : undefined;
    if ('connection' in previous && previous.connection !== kept) previous.connection.close(1000, '', 1000);
    this.#state = next;
    this.#status = next.status;
    this.#connection = kept;
  }

  /** Whether `connection` is the current state's (the fields beside the state always match it). */
  #current(connection: RealtimeConnection): boolean {
    return this.#connection === connection;
  }

  #connect(attempt: number): void {
    const { connection: options, readyTimeoutMs, reconnect, secret } = this.#options;
    // A reconnect attempt may not outlast the outage's budget, and, unless the service says it is
    // starting, gets only `attemptTimeoutMs`: a stalled handshake must leave room for the next.
    const budgetMs = this.#outage && reconnect ? reconnect.giveUpAfterMs - (Date.now() - this.#outage.startedAt) : Infinity;
    const attemptMs = attempt > 0 && reconnect ? reconnect.attemptTimeoutMs : Infinity;
    const waitMs = Math.max(1, Math.min(readyTimeoutMs, attemptMs, budgetMs));
    let connection: RealtimeConnection;
    try {
      connection = new RealtimeConnection(
        // The ready timer bounds the attempt; the socket's own bound on the upgrade is a backstop
        // behind it (the timer's verdict waits for pending I/O first, see verdict-timer.ts).
        { ...options, handshakeTimeoutMs: waitMs + HANDSHAKE_BACKSTOP_MS },
        {
          open: () => this.#current(connection) && this.#handlers.open(attempt),
          message: (data, isBinary) => this.#current(connection) && this.#handlers.message(data, isBinary),
          pong: (id) => this.#current(connection) && this.#handlers.pong?.(id),
          end: (end) => this.#onEnd(connection, end),
        },
      );
    } catch (error) {
      this.#fail(new ConnectionError(`Cannot open the realtime connection: ${describeCause(error, secret)}`), attempt > 0, attempt > 0);
      return;
    }
    for (const reason of this.#pauses) connection.pause(reason);
    this.#last = connection;
    this.#setState({
      status: 'connecting',
      connection,
      attempt,
      readyTimer: this.#readyTimer(attempt, waitMs),
      startedAt: Date.now(),
      budgetMs,
      coldStart: false,
    });
  }

  #keepAliveTimer(): Timer | undefined {
    const { keepAliveMs } = this.#options;
    if (keepAliveMs === undefined || !this.#handlers.keepAlive) return undefined;
    const timer = setInterval(() => this.#handlers.keepAlive?.(), keepAliveMs);
    timer.unref();
    return timer;
  }

  /** The timer that gives up on attempt `attempt` after `waitMs` (`remainingMs` of which are left). */
  #readyTimer(attempt: number, waitMs: number, remainingMs = waitMs): Timer {
    const current = (timer: Timer): boolean => this.#state.status === 'connecting' && this.#state.readyTimer === timer;
    return verdictTimer(Math.max(1, remainingMs), current, () => {
      const error = this.#handlers.readyTimeout(waitMs, attempt > 0);
      if (attempt === 0) this.#fail(error);
      else this.#retry(error, attempt + 1);
    });
  }

  #onEnd(connection: RealtimeConnection, end: ConnectionEnd): void {
    if (!this.#current(connection)) return;
    const state = this.#state;
    if (state.status === 'closing') {
      this.#setState({ status: 'closed' });
      this.#handlers.closed();
      return;
    }
    const wasReady = state.status === 'ready';
    const verdict = this.#handlers.dropped(end, errorForConnectionEnd(end, this.#options.secret, wasReady), wasReady);
    if (verdict === 'finished') {
      this.#setState({ status: 'closed' });
      return;
    }
    const retryAfterMs = end.kind === 'refused' ? end.retryAfterMs : undefined;
    if (state.status === 'connecting' && state.attempt > 0) {
      this.#retry(verdict, state.attempt + 1, retryAfterMs);
    } else if (wasReady && this.#options.reconnect && verdict.retryable) {
      // A drop soon after a reconnect continues the same outage: its attempts and time still count.
      const now = Date.now();
      const previous = this.#outage;
      this.#outage = { startedAt: previous?.startedAt ?? now, attempts: previous?.attempts ?? 0, gapStartedAt: now };
      this.#retry(verdict, this.#outage.attempts + 1, retryAfterMs, true);
    } else {
      this.#fail(verdict);
    }
  }

  /** Waits before attempt `attempt`, or gives up: every caller is bringing a lost session back. */
  #retry(cause: RtTranslateError, attempt: number, retryAfterMs?: number, sessionLost = false): void {
    const policy = this.#options.reconnect;
    const outage = this.#outage;
    if (!policy || !outage || !cause.retryable) {
      this.#fail(cause, outage !== undefined, true);
      return;
    }
    const elapsed = Date.now() - outage.startedAt;
    const asked = retryAfterMs ?? (cause as { retryAfterMs?: number }).retryAfterMs;
    const decision = reconnectDelay(policy, attempt, elapsed, asked);
    if (!decision.retry) {
      const tried = attempt - 1;
      this.#fail(
        new ConnectionError(
          `Gave up reconnecting after ${tried} attempt${tried === 1 ? '' : 's'} in ${Math.round(elapsed / 1000)} s ` +
            `(${decision.reason === 'attempts' ? 'reconnect.maxAttempts' : 'reconnect.giveUpAfterMs'}): ${cause.message}`,
          { cause, status: cause.status, closeCode: cause.closeCode },
        ),
        false,
        true,
      );
      return;
    }
    this.#setState({ status: 'waiting', attempt, timer: setTimeout(() => this.#connect(attempt), decision.delayMs) });
    this.#handlers.reconnecting(attempt, decision.delayMs, cause, sessionLost);
  }

  #fail(error: RtTranslateError, whileReconnecting = false, gaveUp = false): void {
    this.#setState({ status: 'closed' });
    this.#handlers.failed(error, whileReconnecting, gaveUp);
  }
}
