/**
 * A rate limiter shared by every request of a client (`LocalizationClientOptions.rateLimiter`),
 * for work in bulk: when the service answers one request 429 (or 503) and says when to come
 * back (`Retry-After`, `X-RateLimit-Reset`), every request of the client waits until then, not
 * only the one that was refused; without a stated wait, a refusal pauses everyone for
 * `pauseMs`. Optionally it also spaces requests to at most `requestsPerSecond`.
 *
 * The client's own retries still happen (the refused request is sent again after its wait);
 * the limiter only keeps the other requests from walking into the same wall meanwhile.
 */
import { AbortError } from '../errors.js';
import { abortableDelay } from '../delay.js';
import { numberOption } from '../options.js';

export interface RateLimiterOptions {
  /** Requests sent per second at most, across the client. Default: no limit. */
  requestsPerSecond?: number;
  /** Pause after a refusal that names no wait, ms. Default 1000. */
  pauseMs?: number;
  /** Longest pause a refusal can impose, ms (a longer stated wait is capped). Default 300000. */
  maxPauseMs?: number;
  /** The clock, for tests. Default `Date.now`. */
  now?: () => number;
  /**
   * Told of each new pause and its length, ms: to pass it on to other processes (the batch queue's
   * workers pause every worker of the queue).
   */
  onRefused?: (waitMs: number) => void;
}

export class RateLimiter {
  readonly #spacingMs: number;
  readonly #pauseMs: number;
  readonly #maxPauseMs: number;
  readonly #now: () => number;
  readonly #onRefused: ((waitMs: number) => void) | undefined;
  /** No request before this time. */
  #openAt = 0;
  /** The next request slot under `requestsPerSecond`. */
  #nextSlot = 0;
  #pauses = 0;

  constructor(options: RateLimiterOptions = {}) {
    const perSecond = numberOption(options.requestsPerSecond, 'requestsPerSecond', { above: 0, fallback: Infinity, infinity: true });
    this.#spacingMs = perSecond === Infinity ? 0 : 1000 / perSecond;
    this.#pauseMs = numberOption(options.pauseMs, 'pauseMs', { min: 0, fallback: 1000 });
    this.#maxPauseMs = numberOption(options.maxPauseMs, 'maxPauseMs', { min: 0, fallback: 300_000 });
    this.#now = options.now ?? Date.now;
    this.#onRefused = options.onRefused;
  }

  /** Times the service refused a request and everyone paused. */
  get pauses(): number {
    return this.#pauses;
  }

  /** When requests may go again (ms since the epoch; in the past when they may now). */
  get openAt(): number {
    return this.#openAt;
  }

  /** Resolves when a request may be sent (at once when nothing holds it back). */
  async admit(signal?: AbortSignal): Promise<void> {
    for (;;) {
      if (signal?.aborted) throw new AbortError('Waiting for the rate limiter was aborted.');
      const now = this.#now();
      const slot = Math.max(now, this.#openAt, this.#nextSlot);
      if (slot <= now) {
        this.#nextSlot = now + this.#spacingMs;
        return;
      }
      // Sleep, then look again: a refusal meanwhile may have moved the gate further.
      await abortableDelay(slot - now, signal, 'Waiting for the rate limiter was aborted.');
    }
  }

  /** The service refused a request; `askedMs` is the wait it named, if any. */
  refused(askedMs: number | undefined): void {
    const wait = Math.min(askedMs ?? this.#pauseMs, this.#maxPauseMs);
    const until = this.#now() + wait;
    if (until > this.#openAt) {
      this.#openAt = until;
      this.#pauses += 1;
      this.#onRefused?.(wait);
    }
  }
}
