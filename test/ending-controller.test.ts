/**
 * EndingController with fake timers and plain facts: the ending policy wired to one timer in the
 * lifecycle's `ending` state, and what it decides (complete, stalled, unanswered, closed by the
 * service). No sockets: the session's facts are fields the test sets.
 */
import { Duplex } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { RtTranslateError } from '../lib/errors.js';
import { DuplexLifecycle } from '../lib/realtime/duplex-lifecycle.js';
import { EndingController, type EndingWait } from '../lib/realtime/ending-controller.js';
import type { InputFence } from '../lib/realtime/ending-policy.js';
import { SpeechLedger } from '../lib/realtime/speech-ledger.js';
import { speechThenSilence } from './helpers/speech.js';

beforeEach(() => {
  vi.useFakeTimers({ now: 1_000_000 });
});
afterEach(() => {
  vi.useRealTimers();
});

const BYTES_PER_MS = 48;

/**
 * Lets a verdict whose timer has fired be given: it waits two turns of the event loop for pending
 * I/O (`verdict-timer.ts`), and fake timers count each immediate set while timers run as 1 ms.
 */
function turns(): void {
  vi.advanceTimersByTime(2);
}

function controller() {
  const host = new Duplex({
    read() {},
    write(_c, _e, cb) {
      cb();
    },
  });
  const life = new DuplexLifecycle<EndingWait>(host, { signal: undefined, name: 'test session', shutdown: () => undefined });
  const ledger = new SpeechLedger();
  // The service read everything at once, unless a test says otherwise.
  const facts: { ready: boolean; paused: boolean; drained: boolean; fence: InputFence } = {
    ready: true,
    paused: false,
    drained: true,
    fence: { sentAt: Date.now(), receivedAt: Date.now() },
  };
  const warnings: RtTranslateError[] = [];
  let closes = 0;
  const ending = new EndingController({
    life,
    ledger,
    quietPeriodMs: 300,
    responseStallTimeoutMs: 2000,
    fenceTimeoutMs: 5000,
    bytesPerMs: BYTES_PER_MS,
    ready: () => facts.ready,
    paused: () => facts.paused,
    drained: () => facts.drained,
    inputFence: () => facts.fence,
    warn: (w) => warnings.push(w),
    close: () => closes++,
  });
  const finals: Array<Error | null | undefined> = [];
  return { life, ledger, facts, warnings, ending, finals, closes: () => closes, begin: () => ending.begin((e) => finals.push(e)) };
}

describe('EndingController', () => {
  it('before end() nothing is decided and no timer runs', () => {
    const c = controller();
    c.ending.evaluate();
    c.ending.activity(Date.now());
    expect(c.life.state.status).toBe('open');
    expect(vi.getTimerCount()).toBe(0);
  });

  it('with nothing owed, the session is complete after the quiet period; its one timer is re-armed by activity', () => {
    const c = controller();
    c.begin();
    c.ending.evaluate();
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(200);
    c.ending.activity(Date.now());
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(299);
    expect(c.closes()).toBe(0);
    vi.advanceTimersByTime(1);
    turns();
    expect(c.closes()).toBe(1);
    expect(c.life.state).toMatchObject({ status: 'closing', ending: { complete: true, reason: undefined, unansweredSpeechMs: 0 } });
    expect(vi.getTimerCount()).toBe(0);
    expect(c.warnings).toEqual([]);
  });

  it('while input is still being sent, reconnecting or the reader is behind, it waits without a timer', () => {
    const c = controller();
    c.begin();
    for (const fact of ['drained', 'ready'] as const) {
      c.facts[fact] = false;
      c.ending.evaluate();
      expect(vi.getTimerCount()).toBe(0);
      c.facts[fact] = true;
    }
    c.facts.paused = true;
    c.ending.evaluate();
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(10_000);
    expect(c.closes()).toBe(0);
  });

  it('speech never answered is given up after responseStallTimeoutMs from when the service read it, with a warning and how much', () => {
    const c = controller();
    const pcm = speechThenSilence();
    c.ledger.accept(pcm);
    c.ledger.recordSent(pcm.length, Date.now());
    c.facts.fence = { sentAt: Date.now(), receivedAt: undefined };
    c.begin();
    c.ending.evaluate();
    vi.advanceTimersByTime(4_000);
    expect(c.closes()).toBe(0); // its fence has not come back: the service may not have read the speech
    c.facts.fence = { sentAt: Date.now() - 4_000, receivedAt: Date.now() };
    c.ending.evaluate();
    vi.advanceTimersByTime(1999);
    expect(c.closes()).toBe(0);
    vi.advanceTimersByTime(1);
    turns();
    expect(c.warnings.map((w) => w.message)).toEqual(['The service did not answer 1.0 s of speech within 2000 ms after end(); closing without it.']);
    expect(c.life.ending).toEqual({ complete: false, reason: 'speech-unanswered', unansweredSpeechMs: 1000 });
  });

  it('speech sent after the latest response began is owed, and the warning says so', () => {
    const c = controller();
    const pcm = speechThenSilence();
    c.ledger.responseActivity('transcript', Date.now(), 0);
    c.ledger.responseCompleted(Date.now(), true);
    c.ledger.accept(pcm);
    c.begin();
    c.ending.evaluate();
    vi.advanceTimersByTime(2000);
    turns();
    expect(c.warnings.map((w) => w.message)).toEqual([
      'The service did not answer 1.0 s of speech sent after its last response began within 2000 ms after end(); closing without it.',
    ]);
  });

  it('speech the service began answering after it was sent is not owed, however many utterances the stream counted', () => {
    const c = controller();
    const two = Buffer.concat([speechThenSilence(), speechThenSilence()]);
    c.ledger.accept(two);
    c.ledger.recordSent(two.length, Date.now());
    c.facts.fence = { sentAt: Date.now(), receivedAt: Date.now() };
    c.begin();
    c.ending.evaluate();
    // One short answer for both utterances, begun once both were sent.
    c.ledger.responseActivity('audio', Date.now(), two.length, 4800);
    c.ending.activity(Date.now());
    c.ledger.responseCompleted(Date.now(), true);
    c.ending.activity(Date.now());
    vi.advanceTimersByTime(299);
    expect(c.closes()).toBe(0);
    vi.advanceTimersByTime(1);
    turns();
    expect(c.closes()).toBe(1);
    expect(c.life.ending).toEqual({ complete: true, reason: undefined, unansweredSpeechMs: 0 });
    expect(c.warnings).toEqual([]);
  });

  it('a reconnect suspends the wait: its timer is cleared with the state change', () => {
    const c = controller();
    c.begin();
    c.ending.evaluate();
    expect(vi.getTimerCount()).toBe(1);
    c.ending.suspend(true);
    expect(vi.getTimerCount()).toBe(0);
    expect(c.life.state).toMatchObject({ status: 'ending', allSentAt: undefined, timer: undefined });
  });

  it('giving up reconnecting decides an incomplete ending, before end() or after', () => {
    const c = controller();
    expect(c.ending.gaveUp()).toEqual({ complete: false, reason: 'gave-up', unansweredSpeechMs: 0 });
    expect(c.life.state).toMatchObject({ status: 'closing', finalCallback: undefined, ending: { reason: 'gave-up' } });
    const ended = controller();
    ended.begin();
    ended.ending.evaluate();
    ended.ending.gaveUp();
    expect(ended.life.ending).toMatchObject({ reason: 'gave-up' });
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a normal close by the service ends the session only after end(): complete, or closed-by-service with a warning', () => {
    const c = controller();
    expect(c.ending.closedByService(1000)).toBe(false);
    c.ledger.responseActivity('transcript', Date.now(), 0);
    c.begin();
    expect(c.ending.closedByService(1000)).toBe(true);
    expect(c.life.ending).toMatchObject({ complete: false, reason: 'closed-by-service' });
    expect(c.warnings.map((w) => w.code)).toEqual(['RTT_CONNECTION']);

    const clean = controller();
    clean.begin();
    expect(clean.ending.closedByService(1005)).toBe(true);
    expect(clean.life.ending).toEqual({ complete: true, reason: undefined, unansweredSpeechMs: 0 });
    expect(clean.warnings).toEqual([]);
  });

  it('a drop after end() is the end only once everything was sent and nothing is owed', () => {
    const before = controller();
    expect(before.ending.droppedWithNothingOwed()).toBe(false); // not ending: an outage

    const unsent = controller();
    unsent.facts.drained = false;
    unsent.begin();
    unsent.ending.evaluate();
    expect(unsent.ending.droppedWithNothingOwed()).toBe(false); // input still to send again

    const owed = controller();
    owed.begin();
    owed.ending.evaluate();
    owed.ledger.responseActivity('transcript', Date.now(), 0); // an answer in progress
    expect(owed.ending.droppedWithNothingOwed()).toBe(false);

    const done = controller();
    done.begin();
    done.ending.evaluate();
    expect(done.ending.droppedWithNothingOwed()).toBe(true);
    expect(done.life.ending).toEqual({ complete: true, reason: undefined, unansweredSpeechMs: 0 });
    expect(done.warnings).toEqual([]);
  });
});
