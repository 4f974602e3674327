/**
 * RealtimeTranslateStream against a service that misbehaves: drops (cut, close codes, in the
 * middle of an answer), half-open connections, refused handshakes, answers merged or late, a
 * key echoed back, in each phase of a session (connecting, active, ending, closing). Real
 * sockets on loopback; the emulator's fault switches, or the scripted fake server where the
 * emulator cannot play the part. Each case asserts the bytes (nothing accepted lost, output
 * byte-exact), the event order, the error class, and that nothing is left open.
 *
 * The emulator answers each utterance with its own voiced audio, so the expected output of the
 * speech fixture is its three voiced regions, in order, once each.
 */
import { APPEND_PIECE_BYTES } from '../lib/realtime/codec.js';
import type { Socket } from 'node:net';
import { Readable } from 'node:stream';
import { inspect } from 'node:util';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { AuthError, ConnectionError, RateLimitError, VoiceRejectedError } from '../lib/errors.js';
import { startEmulator, type EmulatorOptions, type RunningEmulator } from '../lib/emulator/server.js';
import { OUTPUT_PIECE_BYTES } from '../lib/emulator/realtime.js';
import { eventToRecord, type RealtimeEvent } from '../lib/realtime/realtime-events.js';
import { RealtimeTranslateStream, type RealtimeTranslateOptions } from '../lib/realtime/realtime-translate-stream.js';
import { countHandles, expectNoLeakedHandles, type HandleCounts } from './helpers/handles.js';
import { startFakeRealtimeServer, type FakePeer, type FakeRealtimeServer } from './helpers/fake-realtime-server.js';
import { recordEvents, runSession } from './helpers/realtime-session.js';
import { answerVariants, answersIn, emulatorUtterances, loadSpeechFixture, type FixtureUtterance } from './helpers/speech.js';

const KEY = 'faults-test-key-0123456789abcdef';
const fixture = loadSpeechFixture();
/** The emulator's answer to each utterance of the fixture: its voiced region, by the emulator's measurement. */
const ANSWERS = fixture.utterances.map(({ emulator: u }) => fixture.pcm.subarray(u.startSample * 2, u.endSample * 2));
const ALL = Buffer.concat(ANSWERS);
/**
 * Byte offsets where a speaker goes on after a pause: inside the pause before the second sentence,
 * and 200 ms into the third (the pause before it long enough for the emulator to close the second).
 */
const SECOND_STARTS = 84_480 * 2;
const THIRD_STARTS = (fixture.utterances[2]!.startSample + 4800) * 2;
/**
 * Every answer the emulator may give to each sentence: a session that starts with a replay
 * counts its 30 ms frames from the replay's start, which the client puts on its own 20 ms frames,
 * so the regions it answers may move by up to a frame (see `answerVariants`).
 */
const VARIANTS = answerVariants(fixture.pcm);

/**
 * The output is the three sentences' answers, in order, once each, byte for byte: the first as
 * the unbroken stream's, the others as the session that heard them answered them.
 */
function expectAllAnswers(output: Buffer): void {
  expect(answersIn(output, VARIANTS)).toEqual([0, expect.any(Number), expect.any(Number)]);
}
/** Bytes per millisecond of PCM16 mono 24 kHz. */
const MS = 48;

/**
 * What the emulator answers to `pcm` followed by the stream's end padding (800 ms of silence,
 * shorter than the emulator's 900 ms: the last utterance is ended once the audio stops).
 */
function expectedFor(pcm: Buffer): Buffer {
  return Buffer.concat(emulatorUtterances(Buffer.concat([pcm, Buffer.alloc(800 * MS)])).map((u) => u.audio));
}

const cleanups: Array<() => Promise<unknown> | unknown> = [];
/** Taken before each test: once its streams and servers are closed, nothing of it may stay open. */
let baseline: HandleCounts;
beforeEach(() => {
  baseline = countHandles();
});
afterEach(async () => {
  vi.useRealTimers();
  while (cleanups.length) await cleanups.pop()!();
  await expectNoLeakedHandles(baseline);
});

async function emulator(options: EmulatorOptions = {}): Promise<RunningEmulator> {
  const emu = await startEmulator({ apiKeys: [KEY], ...options });
  cleanups.push(() => emu.close());
  return emu;
}

async function fakeServer(): Promise<FakeRealtimeServer> {
  const fake = await startFakeRealtimeServer();
  cleanups.push(() => fake.close());
  return fake;
}

/** Fast reconnects for tests: the policy is tested alone in realtime-policies.test.ts. */
const QUICK = { initialDelayMs: 10, maxDelayMs: 40 };

function open(realtimeUrl: string, options: Partial<RealtimeTranslateOptions> = {}): RealtimeTranslateStream {
  const stream = new RealtimeTranslateStream({
    from: 'en-us',
    to: 'es-es',
    apiKey: KEY,
    realtimeUrl,
    quietPeriodMs: 300,
    reconnect: QUICK,
    ...options,
  });
  cleanups.push(() => {
    stream.destroy();
  });
  return stream;
}

/** Every event of `stream`, and their types. */
function watch(stream: RealtimeTranslateStream): { events: RealtimeEvent[] } {
  return { events: recordEvents(stream) };
}

const run = runSession;

/** Resolves at the `n`th emission of `event` (1-based). */
function nth(stream: RealtimeTranslateStream, event: string, n: number): Promise<void> {
  return new Promise((resolve) => {
    let seen = 0;
    const on = () => {
      if (++seen === n) {
        stream.off(event, on);
        resolve();
      }
    };
    stream.on(event, on);
  });
}

/** The fixture in 100 ms writes (what a file or a microphone gives). */
function pieces(pcm: Buffer = fixture.pcm, size = 4800): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0; at < pcm.length; at += size) out.push(pcm.subarray(at, at + size));
  return out;
}

/**
 * Resets the peer's connection the moment the client's close frame arrives (before the peer's
 * WebSocket can answer it): a drop in the middle of the closing handshake. Resolves true once done.
 * Arm it only when nothing but the close frame is still to come from the client.
 */
function resetOnCloseFrame(peer: FakePeer): Promise<boolean> {
  const socket = (peer.ws as unknown as { _socket: Socket })._socket;
  return new Promise((resolve) => {
    socket.prependListener('data', (chunk: Buffer) => {
      // FIN + opcode 8: a close frame (the client sends nothing else by then).
      if (chunk[0] === 0x88) {
        socket.resetAndDestroy();
        resolve(true);
      }
    });
  });
}

/** The first `max(1, floor(pieces / 2))` output pieces of an answer: what a mid-response drop lets through. */
function firstHalf(answer: Buffer): Buffer {
  const count = Math.ceil(answer.length / OUTPUT_PIECE_BYTES);
  return answer.subarray(0, Math.max(1, Math.floor(count / 2)) * OUTPUT_PIECE_BYTES);
}

/**
 * Watches for the key everywhere a caller can see it: the events as emitted (and their NDJSON
 * records and raw wire objects), the events as `events()` yields them, warnings and the error.
 */
function keyWatch(stream: RealtimeTranslateStream) {
  const events = recordEvents(stream);
  const pulled: RealtimeEvent[] = [];
  // The iterator ends with the stream's error, if any: the error is checked on its own.
  const iterating = (async () => {
    for await (const event of stream.events()) pulled.push(event);
  })().catch(() => undefined);
  return {
    events,
    async expectNoKey(s: RealtimeTranslateStream, error: Error | undefined): Promise<void> {
      await iterating;
      const messages = (list: RealtimeEvent[]) =>
        list.flatMap((e) => (e.type === 'warning' ? [e.warning.message] : e.type === 'reconnecting' ? [e.cause.message, inspect(e.cause)] : []));
      const everything = JSON.stringify([
        events.map(eventToRecord),
        pulled.map(eventToRecord),
        events.map((e) => ('raw' in e ? e.raw : null)),
        messages(events),
        messages(pulled),
        error ? [error.message, inspect(error, { depth: 5 })] : [],
      ]);
      expect(everything).toContain('[redacted]');
      const at = everything.indexOf(KEY);
      expect(at < 0 ? '' : everything.slice(Math.max(0, at - 300), at + 60)).toBe('');
      expect(pulled.map((e) => e.type)).toEqual(events.map((e) => e.type));
      expect(inspect(s, { depth: 5 })).not.toContain(KEY);
    },
  };
}

function summary(events: RealtimeEvent[]): string[] {
  return events.filter((e) => ['reconnecting', 'reconnected', 'session.created', 'response', 'ended'].includes(e.type)).map((e) => e.type);
}

/* ------------------------------------------------------------------------------------------- */

describe('a session that drops while active or ending', () => {
  it('a cut (1006) after every answer: each answer once, in order, byte-exact; one reconnect per drop; the readable side flows on', async () => {
    const emu = await emulator({ faults: { dropAfterResponses: 1 } });
    const stream = open(emu.realtimeUrl);
    const outcome = await run(stream, pieces());
    expect(outcome.error).toBeUndefined();
    expect(outcome.endedEarly).toBe(false);
    expectAllAnswers(outcome.output);
    expect(summary(outcome.events)).toEqual([
      'session.created',
      'response',
      'reconnecting',
      'session.created',
      'reconnected',
      'response',
      'reconnecting',
      'session.created',
      'reconnected',
      'response',
      'ended',
    ]);
    const reconnecting = outcome.events.filter((e) => e.type === 'reconnecting');
    for (const event of reconnecting) expect(event).toMatchObject({ attempt: 1, cause: { code: 'RTT_CONNECTION', closeCode: 1006 } });
    const reconnected = outcome.events.filter((e) => e.type === 'reconnected');
    expect(reconnected.every((e) => e.type === 'reconnected' && e.replayedMs > 0 && e.notReplayedMs === 0)).toBe(true);
    expect(stream.stats).toMatchObject({ reconnects: 2, responses: 3, ending: { complete: true } });
    expect(stream.stats.bytesReplayed).toBeGreaterThan(0);
  });

  it('sessions dropped every 300 ms (dropAfterMs) and reset (dropReset): still every answer, in order', async () => {
    const emu = await emulator({ faults: { dropAfterMs: 300, dropReset: true } });
    const input = Buffer.concat([fixture.pcm, fixture.pcm]);
    const stream = open(emu.realtimeUrl, { reconnect: { ...QUICK, maxAttempts: 20 } });
    // Written at 10x real time, so the session lives through several drops.
    async function* paced() {
      for (const piece of pieces(input)) {
        yield piece;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    }
    const outcome = await run(stream, paced());
    expect(outcome.error).toBeUndefined();
    expect(stream.stats.reconnects).toBeGreaterThan(0);
    // A reset may cut an answer short; it comes again in full. Every answer arrives, in order.
    const answers = outcome.events.flatMap((e) => (e.type === 'response' ? [e.timing.audioBytes] : []));
    expect(answers).toEqual(emulatorUtterances(Buffer.concat([input, Buffer.alloc(800 * MS)])).map((u) => u.audio.length));
  });

  it.each([1001, 1011, 1012, 1013])('a close with code %i reconnects the same way, the code in closeCode', async (code) => {
    const emu = await emulator({ faults: { dropAfterResponses: 1, dropCode: code } });
    const outcome = await run(open(emu.realtimeUrl), pieces());
    expect(outcome.error).toBeUndefined();
    expectAllAnswers(outcome.output);
    const causes = outcome.events.flatMap((e) => (e.type === 'reconnecting' ? [e.cause] : []));
    expect(causes).toHaveLength(2);
    for (const cause of causes) expect(cause).toMatchObject({ closeCode: code, status: undefined, retryable: true });
  });

  it('a drop in the middle of an answer: what arrived stays, and the answer comes again in full', async () => {
    const emu = await emulator({ faults: { dropAfterResponses: 1, dropMidResponse: true } });
    const outcome = await run(open(emu.realtimeUrl), pieces());
    expect(outcome.error).toBeUndefined();
    // The first session is cut in the middle of answer two, the second in the middle of answer
    // three: each is answered again in full by the next session.
    const [one, two, three] = VARIANTS as [Buffer[], Buffer[], Buffer[]];
    expect(answersIn(outcome.output, [[one[0]!], [firstHalf(two[0]!)], two, three.map(firstHalf), three])).toEqual([
      0,
      0,
      expect.any(Number),
      expect.any(Number),
      expect.any(Number),
    ]);
    // The interrupted answers are not counted as responses.
    expect(outcome.events.filter((e) => e.type === 'response')).toHaveLength(3);
  });

  it('a drop after end() (ending): the answers still owed arrive, and the session ends complete', async () => {
    const emu = await emulator({ faults: { dropAfterResponses: 1 } });
    const stream = open(emu.realtimeUrl);
    const events = watch(stream).events;
    const outcome = run(stream, [fixture.pcm], events);
    await nth(stream, 'reconnecting', 1);
    expect(stream.writableEnded).toBe(true);
    const result = await outcome;
    expect(result.error).toBeUndefined();
    expectAllAnswers(result.output);
    expect(stream.stats.ending).toEqual({ complete: true, reason: undefined, unansweredSpeechMs: 0 });
  });

  it('reconnect: false fails at the first drop, keeping what arrived, and says what may be unprocessed', async () => {
    const emu = await emulator({ faults: { dropAfterResponses: 1 } });
    const outcome = await run(open(emu.realtimeUrl, { reconnect: false }), pieces());
    expect(outcome.error).toBeInstanceOf(ConnectionError);
    expect(outcome.error).toMatchObject({ closeCode: 1006, retryable: true });
    expect(outcome.error!.unprocessedInputMs).toBeGreaterThan(0);
    expect(outcome.output.equals(ANSWERS[0]!)).toBe(true);
    expect(outcome.events.some((e) => e.type === 'reconnecting')).toBe(false);
  });

  it('a normal close (1000) in the middle of a session is the service ending it: not retried', async () => {
    const emu = await emulator();
    const stream = open(emu.realtimeUrl);
    const events = watch(stream).events;
    const input = new Readable({ read() {} });
    const outcome = run(stream, input, events);
    input.push(fixture.pcm.subarray(0, 84_480 * 2)); // the first sentence; the input stays open
    stream.once('response', () => emu.realtimeFaults.drop({ code: 1000 }));
    const result = await outcome;
    input.destroy();
    expect(result.error).toMatchObject({ code: 'RTT_CONNECTION', closeCode: 1000, retryable: false });
    expect(result.events.some((e) => e.type === 'reconnecting')).toBe(false);
    expect(result.output.equals(ANSWERS[0]!)).toBe(true);
  });
});

describe('half-open connections (the peer vanished without closing)', () => {
  const LIVENESS = { pingIntervalMs: 1000, livenessTimeoutMs: 3000 };

  /** Ticks liveness (fake setInterval) until the stream starts reconnecting. */
  async function tickUntilReconnecting(stream: RealtimeTranslateStream): Promise<number> {
    let ticks = 0;
    const reconnecting = nth(stream, 'reconnecting', 1);
    let done = false;
    void reconnecting.then(() => (done = true));
    while (!done) {
      vi.advanceTimersByTime(LIVENESS.pingIntervalMs);
      ticks += 1;
      await new Promise((resolve) => setImmediate(resolve));
      if (ticks > 10) throw new Error('liveness did not find the dead connection');
    }
    return ticks;
  }

  it.each(['active', 'ending'])('while %s: found dead after livenessTimeoutMs of silent periods, then the session resumes', async (phase) => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const emu = await emulator();
    const stream = open(emu.realtimeUrl, LIVENESS);
    const { events } = watch(stream);
    const output: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => output.push(chunk));
    const closed = new Promise<Error | null>((resolve) => stream.once('close', () => resolve(stream.errored)));
    const [first, rest] = [fixture.pcm.subarray(0, 84_480 * 2), fixture.pcm.subarray(84_480 * 2)];
    stream.write(first);
    await nth(stream, 'response', 1);
    emu.realtimeFaults.halfOpen();
    stream.write(rest);
    if (phase === 'ending') stream.end();
    const ticks = await tickUntilReconnecting(stream);
    if (phase === 'active') stream.end();
    expect(await closed).toBeNull();
    expectAllAnswers(Buffer.concat(output));
    // Dead after 3 silent periods of 1 s (the first may still count the last answer).
    expect(ticks).toBeGreaterThanOrEqual(3);
    expect(ticks).toBeLessThanOrEqual(4);
    const cause = events.find((e) => e.type === 'reconnecting');
    expect(cause?.type === 'reconnecting' && cause.cause.message).toMatch(/no sign of life for 3000 ms/);
  });

  it('a stalled event loop on our side is not a dead peer: liveness counts ping periods, not wall time', async () => {
    const emu = await emulator();
    const stream = open(emu.realtimeUrl, { pingIntervalMs: 20, livenessTimeoutMs: 60 });
    const events = watch(stream).events;
    const outcome = run(stream, pieces(), events);
    await nth(stream, 'response', 1);
    // Block the event loop for ten liveness timeouts.
    const until = Date.now() + 600;
    while (Date.now() < until) {
      // busy
    }
    const result = await outcome;
    expect(result.error).toBeUndefined();
    expect(result.output.equals(ALL)).toBe(true);
    expect(result.events.some((e) => e.type === 'reconnecting')).toBe(false);
  });
});

describe('refused handshakes while reconnecting', () => {
  /** The first session drops after its first answer (before the second is sent); `refuse` applies to the handshakes after it. */
  async function droppingOnce(refuse: (emu: RunningEmulator) => void, options: Partial<RealtimeTranslateOptions> = {}) {
    const emu = await emulator({ faults: { dropAfterResponses: 1 } });
    const stream = open(emu.realtimeUrl, options);
    const events = watch(stream).events;
    stream.once('session.created', () => refuse(emu));
    return { emu, stream, events };
  }

  it('503 with Retry-After: waits at least that long, then resumes', async () => {
    const { stream, events } = await droppingOnce((emu) => emu.realtimeFaults.refuseNextHandshakes(1, 503, 1));
    const result = await run(stream, pieces(), events);
    expect(result.error).toBeUndefined();
    expectAllAnswers(result.output);
    const attempts = result.events.flatMap((e) => (e.type === 'reconnecting' ? [e] : []));
    // The second session drops after its answer too: a new outage.
    expect(attempts.map((e) => e.attempt)).toEqual([1, 2, 1]);
    expect(attempts[1]!.cause).toMatchObject({ code: 'RTT_CONNECTION', status: 503 });
    expect(attempts[1]!.delayMs).toBeGreaterThanOrEqual(1000);
  });

  it('429: a RateLimitError with the wait asked for, honoured', async () => {
    const { stream, events } = await droppingOnce((emu) => emu.realtimeFaults.refuseNextHandshakes(1, 429, 1));
    const result = await run(stream, pieces(), events);
    expectAllAnswers(result.output);
    const second = result.events.flatMap((e) => (e.type === 'reconnecting' ? [e] : []))[1]!;
    expect(second.cause).toBeInstanceOf(RateLimitError);
    expect((second.cause as RateLimitError).retryAfterMs).toBe(1000);
    expect(second.delayMs).toBeGreaterThanOrEqual(1000);
  });

  it('401 is never retried: AuthError, what arrived kept, how much input may be unprocessed said', async () => {
    const { stream, events } = await droppingOnce((emu) => emu.realtimeFaults.refuseNextHandshakes(5, 401));
    const result = await run(stream, pieces(), events);
    expect(result.error).toBeInstanceOf(AuthError);
    expect(result.error!.message).toMatch(/while reconnecting\. Up to \d+\.\d s of input audio may not have been processed\./);
    expect(result.error!.unprocessedInputMs).toBeGreaterThan(0);
    expect(result.output.equals(ANSWERS[0]!)).toBe(true);
    expect(result.events.filter((e) => e.type === 'reconnecting')).toHaveLength(1);
  });

  it('gives up after maxAttempts, saying so and how much input may be unprocessed; nothing left open', async () => {
    const { stream, events } = await droppingOnce((emu) => emu.realtimeFaults.refuseNextHandshakes(100, 503), {
      reconnect: { ...QUICK, maxAttempts: 3 },
    });
    const result = await run(stream, pieces(), events);
    expect(result.error).toBeInstanceOf(ConnectionError);
    expect(result.error!.message).toMatch(/^Gave up reconnecting after 3 attempts in \d+ s \(reconnect\.maxAttempts\): /);
    expect(result.error!.unprocessedInputMs).toBeGreaterThanOrEqual((fixture.utterances[2]!.endSample - fixture.utterances[1]!.startSample) / 24);
    expect(result.events.filter((e) => e.type === 'reconnecting').map((e) => e.type === 'reconnecting' && e.attempt)).toEqual([1, 2, 3]);
    expect(result.output.equals(ANSWERS[0]!)).toBe(true);
  });

  it('a reconnect handshake left unanswered is abandoned after reconnect.attemptTimeoutMs, not the long first-session wait, and the next attempt resumes', async () => {
    // The first session may take 90 s to start (a cold start); a reconnect attempt only 500 ms.
    const { stream, events } = await droppingOnce((emu) => emu.realtimeFaults.stallNextHandshakes(1), {
      readyTimeoutMs: 90_000,
      reconnect: { ...QUICK, attemptTimeoutMs: 500 },
    });
    const result = await run(stream, pieces(), events);
    expect(result.error).toBeUndefined();
    expectAllAnswers(result.output);
    const attempts = result.events.flatMap((e) => (e.type === 'reconnecting' ? [e] : []));
    expect(attempts[1]!.cause).toMatchObject({ code: 'RTT_TIMEOUT' });
    expect(attempts[1]!.cause.message).toBe('No session.created within 500 ms of a reconnect attempt (reconnect.attemptTimeoutMs).');
  });

  it('a reconnect attempt to a service that says it is starting gets the long wait: a cold start after a drop still resumes', async () => {
    // Every session cold-starts for 800 ms; a reconnect attempt alone would be given up after 300 ms.
    const emu = await emulator({ coldStartMs: 800, faults: { dropAfterResponses: 1 } });
    const stream = open(emu.realtimeUrl, { reconnect: { ...QUICK, attemptTimeoutMs: 300 } });
    const events = watch(stream).events;
    const result = await run(stream, pieces(), events);
    expect(result.error).toBeUndefined();
    expectAllAnswers(result.output);
    expect(result.events.filter((e) => e.type === 'reconnecting').map((e) => e.type === 'reconnecting' && e.attempt)).toEqual([1, 1]);
    expect(stream.stats.reconnects).toBe(2);
  });

  it('a refused first handshake fails at once: there is no session to resume', async () => {
    const emu = await emulator({ faults: { refuseHandshakes: 1, refuseStatus: 503 } });
    const result = await run(open(emu.realtimeUrl), pieces());
    expect(result.error).toMatchObject({ code: 'RTT_CONNECTION', status: 503 });
    expect(result.events).toEqual([]);
  });
});

describe('a long outage with a live writer', () => {
  it('holds the writer at the replay bound (bounded memory), then delivers the answer to everything accepted', async () => {
    const BOUND_MS = 3_000;
    const emu = await emulator();
    const stream = open(emu.realtimeUrl, { reconnect: { ...QUICK, maxAttempts: 1000, maxReplayMs: BOUND_MS } });
    const { events } = watch(stream);
    const output: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => output.push(chunk));
    const closed = new Promise<Error | null>((resolve) => stream.once('close', () => resolve(stream.errored)));
    const first = fixture.pcm.subarray(0, 84_480 * 2); // the first sentence and the silence after it
    const rest = Buffer.concat([fixture.pcm.subarray(84_480 * 2), fixture.pcm, fixture.pcm]);
    stream.write(first);
    await nth(stream, 'response', 1);
    // The service goes away and refuses to come back while the writer goes on.
    emu.realtimeFaults.refuseNextHandshakes(1_000_000, 503);
    emu.realtimeFaults.drop();
    await nth(stream, 'reconnecting', 1);
    let mostKept = 0;
    let heldAt: number | undefined;
    for (const piece of pieces(rest)) {
      const ok = stream.write(piece);
      mostKept = Math.max(mostKept, stream.stats.replayBytes);
      if (ok) continue;
      if (heldAt === undefined && stream.state !== 'active') {
        // The writer is held: what it wrote is kept up to the bound. Let the service come back.
        heldAt = stream.stats.inputBytes;
        emu.realtimeFaults.refuseNextHandshakes(0);
      }
      await new Promise((resolve) => stream.once('drain', resolve));
    }
    stream.end();
    expect(await closed).toBeNull();
    expect(heldAt).toBeDefined();
    // Held well before the end of the input, with no more than the bound (plus one write, the
    // preroll before the unanswered speech, and at most one append queued for the next send)
    // kept in memory.
    expect(heldAt!).toBeLessThan(first.length + rest.length);
    expect(mostKept).toBeLessThanOrEqual(BOUND_MS * MS + 4800 + 300 * MS + APPEND_PIECE_BYTES);
    expect(stream.stats.inputBytes).toBe(first.length + rest.length);
    // Nine sentences (the fixture three times); those after the outage as the second session heard them.
    expect(answersIn(Buffer.concat(output), answerVariants(Buffer.concat([first, rest])))).toEqual([0, ...Array(8).fill(expect.any(Number))]);
    expect(events.filter((e) => e.type === 'reconnected')).toHaveLength(1);
  });
});

describe('ending that is fast and truthful', () => {
  it('several utterances answered as one response: ends within the quiet period after it, complete', async () => {
    const emu = await emulator({ faults: { mergeUtterances: 3 } });
    const stream = open(emu.realtimeUrl, { responseStallTimeoutMs: 60_000 });
    const events = watch(stream).events;
    const outcome = run(stream, [fixture.pcm], events);
    await nth(stream, 'response', 1);
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    // One quiet period after the merged answer: done (a count of answers would wait 60 s).
    vi.advanceTimersByTime(300);
    vi.useRealTimers();
    const result = await outcome;
    expect(result.error).toBeUndefined();
    expect(result.output.equals(ALL)).toBe(true);
    expect(result.events.filter((e) => e.type === 'warning')).toEqual([]);
    expect(stream.stats.ending).toEqual({ complete: true, reason: undefined, unansweredSpeechMs: 0 });
    const response = result.events.find((e) => e.type === 'response');
    expect(response?.type === 'response' && response.timing.segments).toBe(3);
  });

  it('the last sentence, sent after the second answer began, answered 8 s after the input ended, still arrives', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const emu = await emulator({ faults: { lateUtterances: { 3: 8_000 } } });
    const stream = open(emu.realtimeUrl);
    const events = watch(stream).events;
    // As from a microphone: the third sentence is spoken after the second answer has begun.
    const secondAnswered = nth(stream, 'transcript.done', 2);
    let spokenAll!: () => void;
    const allSpoken = new Promise<void>((resolve) => (spokenAll = resolve));
    async function* spoken() {
      yield fixture.pcm.subarray(0, THIRD_STARTS);
      await secondAnswered;
      yield fixture.pcm.subarray(THIRD_STARTS);
      spokenAll();
    }
    const outcome = run(stream, spoken(), events);
    await nth(stream, 'response', 2);
    await allSpoken;
    // Quiet periods go by, 300 ms at a time, until the third answer comes 8 s after the service
    // heard the sentence: the stream waits through all of them, because that sentence is owed.
    let third = false;
    void nth(stream, 'response', 1).then(() => (third = true));
    let waited = 0;
    while (!third) {
      expect(stream.readableEnded).toBe(false);
      vi.advanceTimersByTime(300);
      waited += 300;
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(waited).toBeGreaterThanOrEqual(8_000);
    vi.advanceTimersByTime(300);
    vi.useRealTimers();
    const result = await outcome;
    expect(result.error).toBeUndefined();
    expect(result.output.equals(ALL)).toBe(true);
    expect(stream.stats.ending?.complete).toBe(true);
    expect(result.events.filter((e) => e.type === 'warning')).toEqual([]);
  });

  it('a close by the service after end() while speech sent after its last answer began is unanswered is reported, not silent success', async () => {
    const fake = await fakeServer();
    const stream = open(fake.realtimeUrl, { reconnect: false });
    const events = watch(stream).events;
    const firstAnswered = nth(stream, 'response', 1);
    async function* spoken() {
      yield fixture.pcm.subarray(0, SECOND_STARTS);
      await firstAnswered;
      yield fixture.pcm.subarray(SECOND_STARTS);
    }
    const outcome = run(stream, spoken(), events);
    const peer = await fake.acceptSession(stream);
    await peer.waitForAudioBytes(SECOND_STARTS);
    peer.sendResponse(ANSWERS[0]!, 'one');
    await peer.waitForAudioBytes(fixture.pcm.length);
    peer.close(1000, 'done');
    const result = await outcome;
    expect(result.error).toBeUndefined();
    expect(result.output.equals(ANSWERS[0]!)).toBe(true);
    const warnings = result.events.flatMap((e) => (e.type === 'warning' ? [e.warning] : []));
    expect(warnings.map((w) => w.message)).toEqual(['The realtime service closed the session after end() while an answer was still owed.']);
    expect(stream.stats.ending).toMatchObject({ complete: false, reason: 'closed-by-service' });
    // The client counts the speech it is owed by its own detector (20 ms frames).
    const [, two, three] = fixture.utterances as [unknown, FixtureUtterance, FixtureUtterance];
    expect(stream.stats.ending!.unansweredSpeechMs).toBe(Math.round((two.endSample - two.startSample + three.endSample - three.startSample) / 24));
    expect(result.events.at(-1)).toMatchObject({ type: 'ended', complete: false });
  });

  it('a close by the service after one answer begun once it had everything is the end, complete: it owes nothing it has shown', async () => {
    const fake = await fakeServer();
    const stream = open(fake.realtimeUrl, { reconnect: false, quietPeriodMs: 60_000 });
    const events = watch(stream).events;
    const outcome = run(stream, [fixture.pcm], events);
    const peer = await fake.acceptSession(stream);
    await peer.waitForAudioBytes(fixture.pcm.length);
    peer.sendResponse(ANSWERS[0]!, 'all three, briefly'); // far shorter than the three sentences
    await nth(stream, 'response', 1);
    peer.close(1000, 'done');
    const result = await outcome;
    expect(result.error).toBeUndefined();
    expect(result.output.equals(ANSWERS[0]!)).toBe(true);
    expect(result.events.filter((e) => e.type === 'warning')).toEqual([]);
    expect(stream.stats.ending).toEqual({ complete: true, reason: undefined, unansweredSpeechMs: 0 });
  });

  it('a drop during our close handshake (closing) is the end we asked for: no reconnect, complete, the answer kept', async () => {
    const fake = await fakeServer();
    // No liveness pings: after its audio (and the fence behind the speech) the close frame is then
    // the only frame the client sends.
    const stream = open(fake.realtimeUrl, { pingIntervalMs: 60_000 });
    const events = watch(stream).events;
    const outcome = run(stream, [fixture.pcm.subarray(0, 84_480 * 2)], events);
    const peer = await fake.acceptSession(stream);
    // Armed once the input and the end padding have all arrived: the close frame is then the next
    // thing the client sends (a TCP chunk of masked audio could start with any byte).
    await peer.waitForAudioBytes(84_480 * 2 + 800 * MS);
    const cut = resetOnCloseFrame(peer);
    peer.sendResponse(ANSWERS[0]!, 'one');
    const result = await outcome;
    expect(await cut).toBe(true);
    expect(result.error).toBeUndefined();
    expect(result.output.equals(ANSWERS[0]!)).toBe(true);
    expect(summary(result.events)).toEqual(['session.created', 'response', 'ended']);
    expect(stream.stats).toMatchObject({ reconnects: 0, ending: { complete: true, reason: undefined, unansweredSpeechMs: 0 } });
    expect(fake.connections).toBe(1);
  });

  it('a drop after end(), everything sent and answered (ending, quiet period): the end, not an outage', async () => {
    const fake = await fakeServer();
    const stream = open(fake.realtimeUrl, { quietPeriodMs: 60_000, endPaddingMs: 200 });
    const events = watch(stream).events;
    const input = fixture.pcm.subarray(0, 84_480 * 2);
    const outcome = run(stream, [input], events);
    const peer = await fake.acceptSession(stream);
    await peer.waitForAudioBytes(input.length + 200 * MS);
    peer.sendResponse(ANSWERS[0]!, 'one');
    await nth(stream, 'response', 1);
    // The stream now waits out its (long) quiet period; the connection is cut meanwhile.
    peer.terminate();
    const result = await outcome;
    expect(result.error).toBeUndefined();
    expect(result.output.equals(ANSWERS[0]!)).toBe(true);
    expect(summary(result.events)).toEqual(['session.created', 'response', 'ended']);
    expect(stream.stats).toMatchObject({ reconnects: 0, ending: { complete: true, reason: undefined, unansweredSpeechMs: 0 } });
    expect(fake.connections).toBe(1);
  });

  it('a peer that never answers our close (closing) does not hold the stream: it ends complete', async () => {
    const fake = await fakeServer();
    const stream = open(fake.realtimeUrl);
    const outcome = run(stream, [Buffer.alloc(24_000)]);
    const peer = await fake.acceptSession(stream);
    await peer.waitForAudioBytes(24_000);
    peer.pauseReading();
    const result = await outcome;
    peer.resumeReading();
    expect(result.error).toBeUndefined();
    expect(stream.stats.ending?.complete).toBe(true);
  });
});

describe('events-only and audio-only consumers', () => {
  it('a caller that only iterates events() gets every event, audio included, with no deadlock', async () => {
    const emu = await emulator();
    const stream = open(emu.realtimeUrl, { readableHighWaterMark: 1024, maxQueuedEventBytes: 64 * 1024 });
    const audio: Buffer[] = [];
    const types: string[] = [];
    const iterating = (async () => {
      for await (const event of stream.events()) {
        types.push(event.type);
        if (event.type === 'audio.delta') audio.push(event.audio);
      }
    })();
    const closed = new Promise<Error | null>((resolve) => stream.once('close', () => resolve(stream.errored)));
    stream.end(Buffer.concat([fixture.pcm, fixture.pcm]));
    await iterating;
    // The stream ends and closes by itself: nothing was left for a reader.
    expect(await closed).toBeNull();
    expect(Buffer.concat(audio).equals(expectedFor(Buffer.concat([fixture.pcm, fixture.pcm])))).toBe(true);
    expect(types.filter((t) => t === 'response')).toHaveLength(6);
    expect(types.at(-1)).toBe('ended');
    // Nothing piled up in the readable side that nobody reads.
    expect(stream.readableLength).toBe(0);
  });

  it('a caller that only reads the audio never stalls on events it does not pull', async () => {
    const emu = await emulator();
    const outcome = await run(open(emu.realtimeUrl, { maxQueuedEvents: 1 }), [fixture.pcm, fixture.pcm]);
    expect(outcome.error).toBeUndefined();
    expect(outcome.output.equals(expectedFor(Buffer.concat([fixture.pcm, fixture.pcm])))).toBe(true);
  });
});

describe('output audio realigned to whole samples', () => {
  it('odd-sized deltas and binary frames come out as whole samples, byte-exact; an odd total is a warning', async () => {
    const fake = await fakeServer();
    const stream = open(fake.realtimeUrl);
    const events = watch(stream).events;
    const outcome = run(stream, [Buffer.alloc(24_000)], events);
    const peer = await fake.acceptSession(stream);
    await peer.waitForAudioBytes(24_000);
    const audio = Buffer.from(Array.from({ length: 40 }, (_, i) => (i * 37) & 0xff));
    peer.send({ type: 'conversation.item.input_audio_transcription.completed', transcript: 't' });
    peer.send({ type: 'response.audio.delta', delta: audio.subarray(0, 3).toString('base64') });
    peer.ws.send(audio.subarray(3, 8), { binary: true });
    peer.send({ type: 'response.audio.delta', delta: audio.subarray(8, 9).toString('base64') });
    peer.ws.send(audio.subarray(9, 40), { binary: true });
    peer.send({ type: 'response.audio.done' });
    const result = await outcome;
    expect(result.error).toBeUndefined();
    // 40 bytes in odd pieces: all of them, in order, every chunk whole samples.
    expect(result.output.equals(audio)).toBe(true);
    expect(result.events.filter((e) => e.type === 'audio.delta').every((e) => e.type === 'audio.delta' && e.audio.length % 2 === 0)).toBe(true);
    expect(result.events.some((e) => e.type === 'warning')).toBe(false);
  });

  it('a response whose audio has an odd total drops the last byte with a warning', async () => {
    const fake = await fakeServer();
    const stream = open(fake.realtimeUrl);
    const events = watch(stream).events;
    const outcome = run(stream, [Buffer.alloc(24_000)], events);
    const peer = await fake.acceptSession(stream);
    await peer.waitForAudioBytes(24_000);
    peer.sendResponse(Buffer.alloc(4801, 5), 'odd');
    const result = await outcome;
    expect(result.output.equals(Buffer.alloc(4800, 5))).toBe(true);
    const warnings = result.events.flatMap((e) => (e.type === 'warning' ? [e.warning] : []));
    expect(warnings.map((w) => w.code)).toEqual(['RTT_PROTOCOL']);
  });
});

describe('a service that echoes the key', () => {
  it('never lets the key into an event, a record, a message or inspect output', async () => {
    const emu = await emulator({ faults: { echoKey: true } });
    const stream = open(emu.realtimeUrl);
    const events = watch(stream).events;
    const pulled: RealtimeEvent[] = [];
    const iterating = (async () => {
      for await (const event of stream.events()) pulled.push(event);
    })();
    const outcome = await run(stream, pieces(), events);
    await iterating;
    expect(outcome.output.equals(ALL)).toBe(true);
    const created = events.find((e) => e.type === 'session.created');
    expect(created?.type === 'session.created' && created.session.raw.api_key).toBe('[redacted]');
    const everything = JSON.stringify([events.map(eventToRecord), pulled.map(eventToRecord), events.map((e) => ('raw' in e ? e.raw : null))]);
    expect(everything).toContain('[redacted]');
    expect(everything).not.toContain(KEY);
    expect(inspect(stream, { depth: 5 })).not.toContain(KEY);
  });

  it('while ending: echoed in session.updated, an error event, a transcript and a text: redacted in events, warnings and records', async () => {
    const fake = await fakeServer();
    const stream = open(fake.realtimeUrl);
    const seen = keyWatch(stream);
    const input = fixture.pcm.subarray(0, 84_480 * 2);
    const outcome = run(stream, [input], seen.events);
    const peer = await fake.acceptSession(stream);
    await peer.waitForAudioBytes(input.length);
    expect(stream.writableEnded).toBe(true);
    peer.send({ type: 'session.updated', session: { api_key: KEY, note: `configured for ${KEY}` } });
    peer.send({ type: 'error', error: { message: `Slow down, ${KEY}: this key is near its limit.`, code: 'rate_limit_warning' } });
    peer.sendResponse(ANSWERS[0]!, `translated for ${KEY}`);
    const result = await outcome;
    expect(result.error).toBeUndefined();
    expect(result.output.equals(ANSWERS[0]!)).toBe(true);
    // The error event was followed by more of the session: a warning, redacted.
    expect(result.warnings.map((w) => w.message)).toEqual([expect.stringContaining('Slow down, [redacted]')]);
    expect(result.transcripts).toEqual(['transcript of translated for [redacted]']);
    await seen.expectNoKey(stream, result.error);
  });

  it('while reconnecting: in a close reason, in the new session.created, and in the error that ends the reconnect', async () => {
    const fake = await fakeServer();
    const stream = open(fake.realtimeUrl);
    const seen = keyWatch(stream);
    const input = new Readable({ read() {} });
    const outcome = run(stream, input, seen.events);
    input.push(fixture.pcm.subarray(0, 84_480 * 2));
    const first = await fake.acceptSession(stream);
    await first.waitForAudioBytes(84_480 * 2);
    first.close(1011, `internal error for ${KEY}`);
    // The reconnect: a session that echoes the key, then drops the same way.
    const second = await fake.nextPeer();
    const update = (await second.waitForEvent('session.update')).session as Record<string, unknown>;
    second.sendSessionCreated({ ...update, api_key: KEY });
    await nth(stream, 'reconnected', 1);
    second.close(1011, `internal error for ${KEY}`);
    // The next reconnect is refused by an error event naming the key: never retried.
    const third = await fake.nextPeer();
    await third.waitForEvent('session.update');
    third.sendError(`Invalid API key ${KEY}.`, 401);
    const result = await outcome;
    input.destroy();
    expect(result.error).toBeInstanceOf(AuthError);
    expect(result.error!.message).toMatch(/Invalid API key \[redacted\].*while reconnecting/);
    const causes = result.events.flatMap((e) => (e.type === 'reconnecting' ? [e.cause.message] : []));
    expect(causes).toEqual([expect.stringContaining('internal error for [redacted]'), expect.stringContaining('internal error for [redacted]')]);
    const created = result.events.filter((e) => e.type === 'session.created');
    expect(created.map((e) => e.type === 'session.created' && e.session.raw.api_key)).toEqual([undefined, '[redacted]']);
    await seen.expectNoKey(stream, result.error);
  });

  it('an error message echoing the key (a rejected voice) reaches the caller redacted', async () => {
    const emu = await emulator({ faults: { echoKey: true } });
    const stream = open(emu.realtimeUrl, { voiceId: 999 });
    const outcome = await run(stream, pieces());
    expect(outcome.error).toBeInstanceOf(VoiceRejectedError);
    expect(outcome.error!.message).toContain('[redacted]');
    expect(`${outcome.error!.message} ${outcome.error!.serverMessage} ${inspect(outcome.error)}`).not.toContain(KEY);
  });
});

describe('latency per response', () => {
  it('times each response from the end of its speech; stats summarise them', async () => {
    const emu = await emulator({ latencyMs: 200 });
    const stream = open(emu.realtimeUrl);
    const outcome = await run(stream, pieces());
    const timings = outcome.events.flatMap((e) => (e.type === 'response' ? [e.timing] : []));
    expect(timings).toHaveLength(3);
    timings.forEach((timing, i) => {
      expect(timing.index).toBe(i + 1);
      expect(timing.segments).toBe(1);
      expect(timing.speechEndMediaMs).toBe(fixture.utterances[i]!.endSample / 24);
      expect(timing.firstAudioMs).toBeGreaterThanOrEqual(200);
      expect(timing.transcriptMs!).toBeLessThanOrEqual(timing.firstAudioMs!);
      expect(timing.doneMs!).toBeGreaterThanOrEqual(timing.firstAudioMs!);
      expect(timing.audioBytes).toBe(ANSWERS[i]!.length);
    });
    const { firstAudioMs } = stream.stats.latency;
    expect(firstAudioMs.count).toBe(3);
    expect(firstAudioMs.p50).toBeGreaterThanOrEqual(200);
    expect(firstAudioMs.max).toBe(Math.max(...timings.map((t) => t.firstAudioMs!)));
  });

  it('includes a reconnect gap: speech sent before a drop is timed from when it was first sent', async () => {
    const emu = await emulator({ faults: { dropAfterResponses: 1 } });
    const stream = open(emu.realtimeUrl);
    const events = watch(stream).events;
    stream.once('session.created', () => emu.realtimeFaults.refuseNextHandshakes(1, 503, 1));
    const outcome = await run(stream, pieces(), events);
    const timings = outcome.events.flatMap((e) => (e.type === 'response' ? [e.timing] : []));
    expect(timings).toHaveLength(3);
    // Answers two and three were sent before the drop: their latency holds the outage.
    expect(timings[1]!.firstAudioMs).toBeGreaterThanOrEqual(1000);
    expect(stream.stats.longestOutageMs).toBeGreaterThanOrEqual(1000);
  });
});
