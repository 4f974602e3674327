/**
 * The wait a refused request asks for, read from its headers: shared by the HTTP client and the
 * realtime handshake, so a 429 or 503 is honoured the same way on both transports.
 */

/** Header lookup tolerant of undici's `string | string[]` values. */
export type HeaderBag = Record<string, string | string[] | undefined>;

/** The first value of header `name` (lower case), or undefined. */
export function headerValue(headers: HeaderBag, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * The wait a response asks for, in ms, or undefined when it names none. `Retry-After` wins
 * over `X-RateLimit-Reset`. `X-RateLimit-Reset` above 10^9 is read as a Unix time in seconds,
 * otherwise as seconds to wait. Negative waits become 0.
 */
export function parseRetryAfter(headers: HeaderBag, now: number = Date.now()): number | undefined {
  const retryAfter = headerValue(headers, 'retry-after')?.trim();
  if (retryAfter) {
    if (/^\d+(\.\d+)?$/.test(retryAfter)) return Math.round(Number(retryAfter) * 1000);
    const date = Date.parse(retryAfter);
    if (!Number.isNaN(date)) return Math.max(0, date - now);
  }
  const reset = headerValue(headers, 'x-ratelimit-reset')?.trim();
  if (reset && /^\d+(\.\d+)?$/.test(reset)) {
    const value = Number(reset);
    if (value > 1e9) return Math.max(0, Math.round(value * 1000 - now));
    return Math.round(value * 1000);
  }
  return undefined;
}
