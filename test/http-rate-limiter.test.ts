/**
 * The shared rate limiter (lib/http/rate-limiter.ts): one refusal pauses every request for the
 * wait the service named (or `pauseMs`), capped, and `onRefused` hears of it; `requestsPerSecond`
 * spaces requests; an abort ends a wait. Then through a client on the emulator: after one 429 with `Retry-After`, a
 * request another caller starts meanwhile is held until the wait is over.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AbortError, ValidationError } from '../lib/errors.js';
import { RateLimiter } from '../lib/http/rate-limiter.js';
import { clientFor, control, logged, sharedEmulator } from './http-test-helpers.js';

afterEach(() => {
  vi.useRealTimers();
});

/** Whether `promise` settled by now (after the microtasks queued so far). */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(
    () => (done = true),
    () => (done = true),
  );
  await vi.advanceTimersByTimeAsync(0);
  return done;
}

describe('RateLimiter', () => {
  it('lets requests through until the service refuses one, then holds every request for the wait it named', async () => {
    vi.useFakeTimers();
    const limiter = new RateLimiter({ now: Date.now });
    expect(await settled(limiter.admit())).toBe(true);
    limiter.refused(2000);
    expect(limiter.pauses).toBe(1);
    const first = limiter.admit();
    const second = limiter.admit();
    await vi.advanceTimersByTimeAsync(1999);
    expect(await settled(first)).toBe(false);
    expect(await settled(second)).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(await settled(first)).toBe(true);
    expect(await settled(second)).toBe(true);
  });

  it('pauses for pauseMs when the refusal names no wait, and never longer than maxPauseMs', async () => {
    vi.useFakeTimers();
    const limiter = new RateLimiter({ pauseMs: 300, maxPauseMs: 5000 });
    limiter.refused(undefined);
    expect(limiter.openAt - Date.now()).toBe(300);
    limiter.refused(3_600_000);
    expect(limiter.openAt - Date.now()).toBe(5000);
    // A shorter wait named later does not shorten the pause.
    limiter.refused(10);
    expect(limiter.openAt - Date.now()).toBe(5000);
    expect(limiter.pauses).toBe(2);
  });

  it.each([
    { name: 'a named wait', asked: 2000, told: [2000] },
    { name: 'no named wait (pauseMs)', asked: undefined, told: [500] },
    { name: 'a wait past maxPauseMs (capped)', asked: 90_000, told: [60_000] },
  ])('tells onRefused of each new pause: $name', ({ asked, told }) => {
    let clock = 1_000_000;
    const heard: number[] = [];
    const limiter = new RateLimiter({ now: () => clock, pauseMs: 500, maxPauseMs: 60_000, onRefused: (ms) => heard.push(ms) });
    limiter.refused(asked);
    // A refusal inside the pause already under way moves nothing: nobody is told again.
    clock += 100;
    limiter.refused(1);
    expect(heard).toEqual(told);
    expect(limiter.pauses).toBe(1);
  });

  it('spaces requests to requestsPerSecond', async () => {
    vi.useFakeTimers();
    const limiter = new RateLimiter({ requestsPerSecond: 4 });
    const admitted: number[] = [];
    const start = Date.now();
    const all = Promise.all(Array.from({ length: 5 }, () => limiter.admit().then(() => admitted.push(Date.now() - start))));
    await vi.advanceTimersByTimeAsync(2000);
    await all;
    expect(admitted).toEqual([0, 250, 500, 750, 1000]);
  });

  it('ends a wait on abort with an AbortError', async () => {
    vi.useFakeTimers();
    const limiter = new RateLimiter();
    limiter.refused(60_000);
    const controller = new AbortController();
    const waiting = limiter.admit(controller.signal).then(
      () => 'admitted',
      (error: unknown) => error,
    );
    controller.abort();
    expect(await waiting).toBeInstanceOf(AbortError);
  });

  it('checks its options', () => {
    expect(() => new RateLimiter({ requestsPerSecond: 0 })).toThrow(ValidationError);
    expect(() => new RateLimiter({ pauseMs: -1 })).toThrow(/pauseMs/);
  });
});

describe('a client with a rate limiter', () => {
  const shared = sharedEmulator();

  it('holds the requests of other callers while the service asked to wait', async () => {
    const emu = shared.emu;
    await control(emu, 'DELETE', 'requests');
    await control(emu, 'POST', 'faults', { status: 429, retryAfter: 1, count: 1, path: '/list-voices' });
    const limiter = new RateLimiter();
    let other: Promise<number> | undefined;
    const client = clientFor(emu, {
      rateLimiter: limiter,
      retry: { retries: 2, minDelayMs: 10, maxDelayMs: 5000 },
      // Another caller starts a request the moment the first is refused.
      onRetry: () => (other ??= client.voices.list().then(() => Date.now())),
    });
    try {
      await client.voices.list();
      expect(other).toBeDefined();
      const otherDone = await other!;
      expect(limiter.pauses).toBe(1);
      // The other request was sent only once the service's second was over.
      expect(otherDone).toBeGreaterThanOrEqual(limiter.openAt);
      const requests = await logged(emu, 'GET', '/list-voices');
      expect(requests.map((r) => r.status)).toEqual([429, 200, 200]);
    } finally {
      await client.close();
    }
  });
});
