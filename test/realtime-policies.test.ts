/**
 * The realtime stream's two policies with plain numbers: the reconnect back-off and the ending
 * decision after end().
 */
import { describe, expect, it } from 'vitest';
import { decideEnding, type EndingDecision, type EndingFacts } from '../lib/realtime/ending-policy.js';
import { reconnectDelay, type ReconnectPolicy } from '../lib/realtime/reconnect-policy.js';

const POLICY: ReconnectPolicy = { maxAttempts: 5, initialDelayMs: 500, maxDelayMs: 4_000, giveUpAfterMs: 60_000, attemptTimeoutMs: 10_000 };

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

/** All sent; the service's latest response ended at 9 s; the fence behind the latest speech passed at 8 s. */
const BASE: EndingFacts = {
  now: 10_000,
  allSent: true,
  connected: true,
  paused: false,
  responseOpen: false,
  owedSpeechMs: 0,
  lastActivityAt: 9_000,
  fence: { sentAt: 7_990, receivedAt: 8_000 },
  quietPeriodMs: 3_000,
  responseStallTimeoutMs: 30_000,
  fenceTimeoutMs: 15_000,
};

describe('decideEnding', () => {
  it.each([
    // name, facts, decision at `now`
    ['nothing owed: the quiet period counts from the latest response', {}, { kind: 'wait', until: 12_000 }],
    ['... and ends the session once over', { now: 12_000 }, { kind: 'finish' }],
    [
      'the service read the latest speech after its latest response: quiet counts from that',
      { fence: { sentAt: 9_400, receivedAt: 9_500 } },
      { kind: 'wait', until: 12_500 },
    ],
    ['no speech and no response: quiet counts from when the service read all the input', { lastActivityAt: 0 }, { kind: 'wait', until: 11_000 }],
    ['a response open: up to the stall timeout of silence', { responseOpen: true }, { kind: 'wait', until: 39_000 }],
    ['... then given up', { responseOpen: true, now: 39_000 }, { kind: 'give-up', reason: 'response-stalled' }],
    ['speech sent after the latest response began: an answer 8 s later still comes', { owedSpeechMs: 1_200, now: 17_000 }, { kind: 'wait', until: 39_000 }],
    ['... and is given up after the stall timeout', { owedSpeechMs: 1_200, now: 39_000 }, { kind: 'give-up', reason: 'speech-unanswered' }],
    [
      'speech with no response at all yet: the stall timeout counts from when the service read it',
      { owedSpeechMs: 2_000, lastActivityAt: 0 },
      { kind: 'wait', until: 38_000 },
    ],
    [
      'the fence behind the latest speech not answered yet: wait for its pong',
      { fence: { sentAt: 9_990, receivedAt: undefined } },
      { kind: 'wait', until: 24_990 },
    ],
    [
      'a fence never answered counts as passed after fenceTimeoutMs',
      { now: 25_000, fence: { sentAt: 9_990, receivedAt: undefined } },
      { kind: 'wait', until: 27_990 },
    ],
    ['... and the quiet period then runs from there', { now: 27_990, fence: { sentAt: 9_990, receivedAt: undefined } }, { kind: 'finish' }],
  ] as Array<[string, Partial<EndingFacts>, EndingDecision]>)('%s', (_name, change, decision) => {
    expect(decideEnding({ ...BASE, ...change })).toEqual(decision);
  });

  it.each([
    ['audio still queued for the socket', { allSent: false }],
    ['no session (reconnecting)', { connected: false }],
    ['its own reader behind (the socket is paused)', { paused: true }],
  ])('decides nothing while %s: something else bounds that wait', (_name, change) => {
    expect(decideEnding({ ...BASE, now: 1_000_000, responseOpen: true, owedSpeechMs: 500, ...change })).toEqual({ kind: 'waiting' });
  });
});
