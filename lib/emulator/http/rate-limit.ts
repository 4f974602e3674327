/**
 * Per-key rate limiting for the emulator: a token bucket per API key refilled at `perSecond`
 * tokens a second, holding at most `max(1, perSecond)` tokens (so a rate below 1 still lets one
 * request through, then one every `1 / perSecond` seconds). A request takes one token; with
 * none left it is refused with the wait until the next token.
 */

export interface RateDecision {
  allowed: boolean;
  /** When refused: seconds until a token is available (at least 1, as `Retry-After` wants). */
  retryAfterS: number;
  remaining: number;
}

export interface RateLimiter {
  take(key: string): RateDecision;
}

export function createRateLimiter(perSecond: number, now: () => number): RateLimiter {
  const capacity = Math.max(1, perSecond);
  const buckets = new Map<string, { tokens: number; at: number }>();
  return {
    take(key) {
      const t = now();
      const bucket = buckets.get(key) ?? { tokens: capacity, at: t };
      bucket.tokens = Math.min(capacity, bucket.tokens + ((t - bucket.at) / 1000) * perSecond);
      bucket.at = t;
      buckets.set(key, bucket);
      if (bucket.tokens >= 1) {
        bucket.tokens -= 1;
        return { allowed: true, retryAfterS: 0, remaining: Math.floor(bucket.tokens) };
      }
      const waitS = (1 - bucket.tokens) / perSecond;
      return { allowed: false, retryAfterS: Math.max(1, Math.ceil(waitS)), remaining: 0 };
    },
  };
}
