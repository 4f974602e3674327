/**
 * When to try again after a realtime connection dropped: exponential back-off with jitter,
 * bounded in attempts and in outage time, honouring a wait the service asked for. A pure
 * function of numbers, tested without sockets or timers.
 */

export interface ReconnectPolicy {
  /** Attempts after one drop before giving up. */
  maxAttempts: number;
  /** Wait before the first attempt (before jitter), doubled for each further attempt. */
  initialDelayMs: number;
  /** Longest wait between attempts (before `Retry-After`). */
  maxDelayMs: number;
  /** Give up once the outage would last longer than this. */
  giveUpAfterMs: number;
  /**
   * Time a reconnect attempt may take to a ready session (at most the first connection's ready
   * timeout), unless the service says it is starting (a cold start): a handshake that stalls is
   * abandoned and tried again within the outage's budget, instead of using it all up.
   */
  attemptTimeoutMs: number;
}

export type ReconnectDecision = { retry: true; delayMs: number } | { retry: false; reason: 'attempts' | 'time' };

/**
 * The wait before attempt `attempt` (1 for the first after a drop): exponential back-off with
 * equal jitter (half fixed, half random), at least the `retryAfterMs` the service asked for, and
 * never past `giveUpAfterMs` of outage.
 */
export function reconnectDelay(
  policy: ReconnectPolicy,
  attempt: number,
  outageMs: number,
  retryAfterMs: number | undefined,
  random: () => number = Math.random,
): ReconnectDecision {
  if (attempt > policy.maxAttempts) return { retry: false, reason: 'attempts' };
  const base = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** (attempt - 1));
  const jittered = Math.round(base / 2 + random() * (base / 2));
  const delayMs = Math.max(jittered, retryAfterMs ?? 0);
  if (outageMs + delayMs > policy.giveUpAfterMs) return { retry: false, reason: 'time' };
  return { retry: true, delayMs };
}
