/**
 * The realtime stream's two policies with plain numbers: the reconnect back-off and the ending
 * decision after end().
 */
import { describe, expect, it } from 'vitest';
import { decideEnding, type EndingFacts } from '../lib/realtime/ending-policy.js';
import { reconnectDelay, type ReconnectPolicy } from '../lib/realtime/reconnect-policy.js';

const POLICY: ReconnectPolicy = { maxAttempts: 5, initialDelayMs: 500, maxDelayMs: 4_000, giveUpAfterMs: 60_000 };

describe('reconnectDelay', () => {
  it.each([
    [1, 0, 250],
    [1, 1, 500],
    [2, 0, 500],
    [2, 1, 1000],
    [3, 0.5, 1500],
    [4, 1, 4000],
    [5, 0, 2000],
    [5, 1, 4000],
  ])('attempt %i with random %d waits %i ms: doubling, capped at maxDelayMs, half of it jitter', (attempt, random, expected) => {
    expect(reconnectDelay(POLICY, attempt, 0, undefined, () => random)).toEqual({ retry: true, delayMs: expected });
  });

  it('gives up after maxAttempts', () => {
    expect(reconnectDelay(POLICY, 6, 0, undefined, () => 0)).toEqual({ retry: false, reason: 'attempts' });
  });

  it('gives up when the wait would take the outage past giveUpAfterMs', () => {
    expect(reconnectDelay(POLICY, 2, 59_000, undefined, () => 0)).toEqual({ retry: true, delayMs: 500 });
    expect(reconnectDelay(POLICY, 2, 59_600, undefined, () => 0)).toEqual({ retry: false, reason: 'time' });
  });

  it('waits at least what the service asked for (Retry-After), beyond maxDelayMs', () => {
    expect(reconnectDelay(POLICY, 1, 0, 7_000, () => 0)).toEqual({ retry: true, delayMs: 7_000 });
    expect(reconnectDelay(POLICY, 4, 0, 100, () => 1)).toEqual({ retry: true, delayMs: 4_000 });
  });

  it('gives up at once when the service asks for a wait longer than the outage may last', () => {
    expect(reconnectDelay(POLICY, 1, 0, 120_000, () => 0)).toEqual({ retry: false, reason: 'time' });
  });
});

const BASE: EndingFacts = {
  now: 10_000,
  allSent: true,
  connected: true,
  paused: false,
  responseOpen: false,
  speechUnanswered: false,
  lastActivityAt: 9_000,
  quietPeriodMs: 3_000,
  responseStallTimeoutMs: 30_000,
};

describe('decideEnding', () => {
  it('with nothing owed, waits out the quiet period from the last activity, then finishes', () => {
    expect(decideEnding(BASE)).toEqual({ kind: 'wait', until: 12_000 });
    expect(decideEnding({ ...BASE, now: 11_999 })).toEqual({ kind: 'wait', until: 12_000 });
    expect(decideEnding({ ...BASE, now: 12_000 })).toEqual({ kind: 'finish' });
  });

  it('with an open response, waits up to the stall timeout of inactivity, then gives up on it', () => {
    const facts = { ...BASE, responseOpen: true };
    expect(decideEnding({ ...facts, now: 38_999 })).toEqual({ kind: 'wait', until: 39_000 });
    expect(decideEnding({ ...facts, now: 39_000 })).toEqual({ kind: 'give-up', reason: 'response-stalled' });
  });

  it('with speech unanswered, waits up to the stall timeout (a late answer 8 s after the input still arrives)', () => {
    const facts = { ...BASE, speechUnanswered: true, lastActivityAt: 10_000 };
    expect(decideEnding({ ...facts, now: 18_000 })).toEqual({ kind: 'wait', until: 40_000 });
    expect(decideEnding({ ...facts, now: 40_000 })).toEqual({ kind: 'give-up', reason: 'speech-unanswered' });
  });

  it.each([
    ['audio still queued for the socket', { allSent: false }],
    ['no session (reconnecting)', { connected: false }],
    ['its own reader behind (the socket is paused)', { paused: true }],
  ])('decides nothing while %s: something else bounds that wait', (_name, change) => {
    expect(decideEnding({ ...BASE, now: 1_000_000, responseOpen: true, ...change })).toEqual({ kind: 'waiting' });
  });
});
