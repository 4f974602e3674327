/**
 * How a RealtimeTranslateStream session ends, and how a service's errors reach the caller, in
 * the situations where a simpler rule loses output or hangs:
 * - a service slower than the quiet period, or that reads more slowly than we send;
 * - keep-alive events after end();
 * - a billing stop while the caller is still writing;
 * - server errors that leave the session open, responses that stall, a normal close by the
 *   service, a service that stops reading after end(), an abort after the session completed.
 */
import { once } from 'node:events';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setImmediate as tick } from 'node:timers/promises';
import { startEmulator, type EmulatorOptions, type RunningEmulator } from '../lib/emulator/server.js';
import { RealtimeTranslateStream, type RealtimeTranslateOptions } from '../lib/realtime/realtime-translate-stream.js';
import type { RtTranslateError } from '../lib/errors.js';
import { startFakeRealtimeServer, type FakePeer, type FakeRealtimeServer } from './helpers/fake-realtime-server.js';
import { recordEvents, runSession } from './helpers/realtime-session.js';
import { chunked, expectedTranslation, loadSpeechFixture, speechThenSilence } from './helpers/speech.js';
import { waitFor } from './helpers/wait-for.js';

const KEY = 'ending-test-key-0123';
const fixture = loadSpeechFixture();
/** The fixture's first two utterances and the silence after the second (the third starts at sample 150240). */
const TWO = fixture.pcm.subarray(0, 140_000 * 2);
const TWO_EXPECTED = expectedTranslation(TWO, fixture.utterances.slice(0, 2));
/** The first utterance's answer, the head of `TWO_EXPECTED`. */
const ONE_ANSWER_BYTES = expectedTranslation(TWO, fixture.utterances.slice(0, 1)).length;

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  vi.useRealTimers();
  while (cleanups.length) await cleanups.pop()!();
});

async function emulator(options: EmulatorOptions = {}): Promise<RunningEmulator> {
  const emu = await startEmulator({ apiKeys: [KEY], ...options });
  cleanups.push(() => emu.close());
  return emu;
}

async function fakeServer(options: { autoPong?: boolean } = {}): Promise<FakeRealtimeServer> {
  const fake = await startFakeRealtimeServer(options);
  cleanups.push(() => fake.close());
  return fake;
}

function open(realtimeUrl: string, options: Partial<RealtimeTranslateOptions> = {}): RealtimeTranslateStream {
  const stream = new RealtimeTranslateStream({ from: 'en-us', to: 'es-es', apiKey: KEY, realtimeUrl, quietPeriodMs: 300, ...options });
  cleanups.push(() => {
    stream.destroy();
  });
  return stream;
}

/** Runs the session; `audio` is what the readable side gave. */
async function run(stream: RealtimeTranslateStream, input: Iterable<Buffer> | AsyncIterable<Buffer>) {
  const outcome = await runSession(stream, input);
  return { ...outcome, audio: outcome.output };
}

/** A scripted session: the peer has seen session.update and answered session.created. */
async function scripted(
  options: Partial<RealtimeTranslateOptions> = {},
  server: { autoPong?: boolean } = {},
): Promise<{ stream: RealtimeTranslateStream; peer: FakePeer }> {
  const fake = await fakeServer(server);
  const stream = open(fake.realtimeUrl, options);
  const peer = await fake.acceptSession(stream);
  return { stream, peer };
}

describe('after end(), the stream waits for every answer it is owed', () => {
  it('a service that reads at twice real time answers the second utterance after the quiet period: nothing is lost', async () => {
    // Response one arrives at about 1.6 s, response two at about 2.8 s: more than the quiet
    // period apart. The stream counted two segments of speech, so it waits for the second.
    const emu = await emulator({ inputBytesPerSecond: 96_000 });
    const outcome = await run(open(emu.realtimeUrl), chunked(TWO, [4800]));
    expect(outcome.error).toBeUndefined();
    expect(outcome.transcripts).toHaveLength(2);
    expect(outcome.audio.equals(TWO_EXPECTED)).toBe(true);
    expect(outcome.warnings).toEqual([]);
  });

  it('speech sent after the first answer began is waited for past the quiet period; without speech detection (0 dBFS) it cannot be', async () => {
    // Scripted so the order is certain, not a race with the clock: two services answer the first
    // utterance, then hear the second, and hold its answer back. The stream that finds speech is
    // answered first; the blind one (which finds none) then ends after its quiet period, so the
    // finding stream has waited at least as long, and is still waiting when the second answer comes.
    const [answerOne, answerTwo] = [TWO_EXPECTED.subarray(0, ONE_ANSWER_BYTES), TWO_EXPECTED.subarray(ONE_ANSWER_BYTES)];
    const [first, second] = [TWO.subarray(0, 80_000 * 2), TWO.subarray(80_000 * 2)]; // utterance one and 0.7 s of silence; the rest
    const options = { endPaddingMs: 800, responseStallTimeoutMs: 60_000 };
    async function speak(script: { stream: RealtimeTranslateStream; peer: FakePeer }) {
      const answered = once(script.stream, 'response');
      async function* spoken() {
        yield first;
        await answered;
        yield second;
      }
      const session = run(script.stream, spoken());
      await script.peer.waitForAudioBytes(first.length);
      script.peer.sendResponse(answerOne, 'one');
      await script.peer.waitForAudioBytes(TWO.length + 800 * 48); // the rest and the end padding
      return { session };
    }
    const finding = await scripted(options);
    const findingRun = (await speak(finding)).session;
    const blind = await scripted({ ...options, speechThresholdDbfs: 0 });
    const lost = await (await speak(blind)).session;
    await blind.peer.closed;
    blind.peer.sendResponse(answerTwo, 'two'); // too late: the session is over
    expect(lost.error).toBeUndefined();
    expect(lost.transcripts).toEqual(['transcript of one']);
    expect(lost.audio.equals(answerOne)).toBe(true);
    // It believes it got everything: it found no speech to be owed.
    expect(blind.stream.stats.ending).toEqual({ complete: true, reason: undefined, unansweredSpeechMs: 0 });
    expect(lost.warnings).toEqual([]);

    expect(finding.stream.state).toBe('active');
    expect(finding.peer.isClosed).toBe(false);
    finding.peer.sendResponse(answerTwo, 'two');
    const saved = await findingRun;
    expect(saved.error).toBeUndefined();
    expect(saved.transcripts).toEqual(['transcript of one', 'transcript of two']);
    expect(saved.audio.equals(TWO_EXPECTED)).toBe(true);
    expect(finding.stream.stats.ending).toMatchObject({ complete: true });
  });

  it('one short answer to two utterances, begun once both were sent: the session ends one quiet period after it, complete', async () => {
    const { stream, peer } = await scripted({ responseStallTimeoutMs: 60_000 });
    const session = run(stream, chunked(TWO, [4800]));
    await peer.waitForAudioBytes(TWO.length + 800 * 48);
    const short = TWO_EXPECTED.subarray(0, ONE_ANSWER_BYTES / 2); // a terse translation of both
    peer.sendResponse(short, 'one and two');
    const outcome = await session;
    expect(outcome.error).toBeUndefined();
    expect(outcome.audio.equals(short)).toBe(true);
    expect(outcome.warnings).toEqual([]);
    expect(stream.stats.ending).toEqual({ complete: true, reason: undefined, unansweredSpeechMs: 0 });
  });

  it('a process busy past the quiet period reads what the service sent meanwhile before it calls the session quiet', async () => {
    const { stream, peer } = await scripted({ responseStallTimeoutMs: 60_000 });
    const session = run(stream, chunked(TWO, [4800]));
    await peer.waitForAudioBytes(TWO.length + 800 * 48);
    await peer.waitForPingAfter(TWO.length); // the fence behind the speech: its pong goes out before the answer
    const [answerOne, answerTwo] = [TWO_EXPECTED.subarray(0, ONE_ANSWER_BYTES), TWO_EXPECTED.subarray(ONE_ANSWER_BYTES)];
    const first = once(stream, 'response');
    peer.sendResponse(answerOne, 'one');
    await first;
    // The quiet period (300 ms) now runs from the first answer: nothing is owed for certain (it
    // began once all the speech was sent). The service answers again 100 ms later, from a timer
    // whose work is deferred by a turn of the event loop (as the emulator's own idle rule is),
    // but this process is stalled for longer than the quiet period before it can read the
    // answer, so both timers have expired when the event loop turns again.
    let decidedBeforeTwo: unknown = 'not seen';
    stream.once('response', () => (decidedBeforeTwo = stream.stats.ending));
    setTimeout(() => setImmediate(() => peer.sendResponse(answerTwo, 'two')), 100);
    const stalledUntil = Date.now() + 600;
    while (Date.now() < stalledUntil) {
      // A process busy elsewhere (a long collection, a CPU-bound neighbour).
    }
    const outcome = await session;
    expect(outcome.error).toBeUndefined();
    expect(outcome.transcripts).toEqual(['transcript of one', 'transcript of two']);
    expect(outcome.audio.equals(TWO_EXPECTED)).toBe(true);
    // The session was still open when the second answer was read: it was not judged by the stall.
    expect(decidedBeforeTwo).toBeUndefined();
    expect(stream.stats.ending).toEqual({ complete: true, reason: undefined, unansweredSpeechMs: 0 });
  });

  it('an answer slower than the quiet period, to speech written before the previous answer arrived, still arrives', async () => {
    const emu = await emulator({ latencyMs: 1200 });
    const stream = open(emu.realtimeUrl);
    const first = TWO.subarray(0, 80_000 * 2); // utterance one and 0.7 s of silence
    const second = TWO.subarray(80_000 * 2);
    async function* input() {
      yield first;
      yield second; // sent before the first answer (1.2 s later) arrives
    }
    const outcome = await run(stream, input());
    expect(outcome.transcripts).toHaveLength(2);
    expect(outcome.audio.equals(TWO_EXPECTED)).toBe(true);
  });

  it('keep-alive events after end() do not keep the session open', { timeout: 10_000 }, async () => {
    const { stream, peer } = await scripted();
    const keepalive = setInterval(() => peer.send({ type: 'keepalive' }), 100);
    cleanups.push(() => clearInterval(keepalive));
    const outcome = await run(stream, [Buffer.alloc(24_000)]);
    expect(outcome.error).toBeUndefined();
    expect(outcome.audio.length).toBe(0);
  });

  it('an open response that goes silent is given up after responseStallTimeoutMs with a warning, keeping what arrived', async () => {
    const { stream, peer } = await scripted({ responseStallTimeoutMs: 400 });
    const ending = run(stream, [Buffer.alloc(24_000)]);
    await peer.waitForAudioBytes(24_000);
    peer.send({ type: 'conversation.item.input_audio_transcription.completed', transcript: 'hello' });
    peer.sendAudio(Buffer.alloc(4800, 1));
    const outcome = await ending;
    expect(outcome.error).toBeUndefined();
    expect(outcome.audio.equals(Buffer.alloc(4800, 1))).toBe(true);
    expect(outcome.warnings.map((w) => w.code)).toEqual(['RTT_TIMEOUT']);
    expect(outcome.warnings[0]!.message).toMatch(/last response sent nothing for 400 ms/);
    expect(stream.stats.ending).toMatchObject({ complete: false, reason: 'response-stalled' });
    expect(outcome.events.at(-1)).toMatchObject({ type: 'ended', complete: false, reason: 'response-stalled' });
  });

  it('a lost connection that reconnecting cannot restore ends the session incomplete (gave-up): ended, then the error', async () => {
    const { stream, peer } = await scripted({ readyTimeoutMs: 200, reconnect: { maxAttempts: 2, initialDelayMs: 10, maxDelayMs: 40 } });
    const order: string[] = [];
    stream.on('ended', () => order.push(`ended ${stream.stats.ending?.reason}`));
    stream.on('error', () => order.push('error'));
    const iterated = (async () => {
      const types: string[] = [];
      try {
        for await (const event of stream.events()) types.push(event.type);
      } catch (error) {
        return { types, error };
      }
      return { types, error: undefined };
    })();
    const speech = fixture.pcm.subarray(0, 80_000 * 2); // the first utterance and some silence
    const ending = run(stream, [speech]);
    await peer.waitForAudioBytes(speech.length);
    // The new sessions never start (no session.created): each attempt times out, then it gives up.
    peer.terminate();
    const outcome = await ending;
    expect(outcome.error).toMatchObject({ code: 'RTT_CONNECTION' });
    expect(outcome.error!.message).toMatch(/^Gave up reconnecting after 2 attempts/);
    expect(order).toEqual(['ended gave-up', 'error']);
    expect(stream.stats.ending).toMatchObject({ complete: false, reason: 'gave-up' });
    expect(stream.stats.ending!.unansweredSpeechMs).toBeGreaterThan(1000);
    expect(outcome.events.at(-1)).toEqual({ type: 'ended', ...stream.stats.ending });
    const { types, error } = await iterated;
    expect(types.at(-1)).toBe('ended');
    expect(error).toBe(outcome.error);
  });

  it('the service closing normally after end() ends the stream without an error', async () => {
    const { stream, peer } = await scripted({ quietPeriodMs: 60_000 });
    const ending = run(stream, [Buffer.alloc(24_000)]);
    await peer.waitForAudioBytes(24_000);
    const answered = once(stream, 'audio.done');
    peer.sendResponse(Buffer.alloc(9600, 2), 'done');
    await answered; // the close comes after a whole response, as a service's would
    peer.close(1000, 'bye');
    const outcome = await ending;
    expect(outcome.error).toBeUndefined();
    expect(outcome.audio.equals(Buffer.alloc(9600, 2))).toBe(true);
  });

  it('without end padding, a last append still in the socket at end() is waited for until the socket has written it', async () => {
    // Appends that go out on an idle socket report no completion; the last one here could not be
    // written at once (the service had stopped reading), and nothing is sent after it.
    const { stream, peer } = await scripted({ endPaddingMs: 0, quietPeriodMs: 200, maxAppendBytes: 9600 }, { autoPong: true });
    let bufferedAtEnd = 0;
    const final = stream._final.bind(stream);
    stream._final = (callback) => {
      bufferedAtEnd = stream.stats.socketBufferedAmount;
      final(callback);
      setImmediate(() => peer.resumeReading());
    };
    const events = recordEvents(stream);
    stream.resume();
    peer.pauseReading();
    const piece = Buffer.alloc(9600);
    while (stream.stats.socketBufferedAmount === 0) stream.write(piece);
    stream.end();
    await once(stream, 'close');
    expect(bufferedAtEnd).toBeGreaterThan(0);
    expect(events.filter((e) => e.type === 'warning')).toEqual([]);
    expect(stream.stats.ending).toMatchObject({ complete: true, reason: undefined });
    expect(stream.stats.bytesSent).toBe(stream.stats.inputBytes);
  });

  it('a service that stops reading after end() is a dead connection, found by liveness instead of hanging', async () => {
    const { stream, peer } = await scripted({ maxSocketBufferBytes: 16 * 1024, reconnect: false, pingIntervalMs: 50, livenessTimeoutMs: 200 });
    peer.pauseReading();
    // Fill the kernel's buffers until the socket starts holding data itself.
    const piece = Buffer.alloc(4800);
    for (let i = 0; i < 10_000 && stream.stats.socketBufferedAmount === 0; i++) {
      await new Promise<void>((resolve, reject) => stream.write(piece, (e) => (e ? reject(e) : resolve())));
    }
    expect(stream.stats.socketBufferedAmount).toBeGreaterThan(0);
    const closed = new Promise<Error | null>((resolve) => stream.once('close', () => resolve(stream.errored)));
    stream.on('error', () => undefined);
    stream.resume();
    stream.end();
    const error = (await closed) as RtTranslateError;
    expect(error.code).toBe('RTT_CONNECTION');
    expect(error.message).toMatch(/no sign of life for \d+ ms/);
    // Everything written after the last answer (there was none) may be unprocessed, and it says so.
    expect(error.unprocessedInputMs).toBeGreaterThan(0);
    expect(error.message).toMatch(/s of input audio may not have been processed/);
  });
});

describe('the quiet period counts from what the service has shown it has read', () => {
  /**
   * Advances the fake clock 100 ms at a time, letting sockets work between steps, until `done()`
   * or `limitMs` have gone by; returns the time advanced.
   */
  async function advanceUntil(done: () => boolean, limitMs = Infinity): Promise<number> {
    let advanced = 0;
    while (!done() && advanced < limitMs) {
      vi.advanceTimersByTime(100);
      advanced += 100;
      await tick();
    }
    return advanced;
  }

  // No liveness pings within these tests: every ping the peer sees is a fence.
  const QUIET = { quietPeriodMs: 300, pingIntervalMs: 60_000, livenessTimeoutMs: 60_000 };

  it('a ping goes behind each stretch of speech once silence has closed it, and behind nothing else', async () => {
    const { stream, peer } = await scripted(QUIET);
    const speech = speechThenSilence(); // 1 s of speech, 1 s of silence
    const input = Buffer.concat([Buffer.alloc(48_000), speech, speech]);
    const outcome = run(stream, chunked(input, [4800])); // 100 ms writes, as a microphone gives
    await peer.waitForAudioBytes(input.length + 800 * 48);
    peer.sendResponse(Buffer.alloc(4800, 1), 'both');
    expect((await outcome).error).toBeUndefined();
    // Each fence follows its speech's end (at 2 s and 4 s of input) and the 600 ms of silence
    // that closed it.
    const closedAt = [96_000, 192_000].map((end) => end + 600 * 48);
    expect(peer.pings).toHaveLength(2);
    expect(peer.pings[0]!.afterAudioBytes).toBeGreaterThanOrEqual(closedAt[0]!);
    expect(peer.pings[0]!.afterAudioBytes).toBeLessThan(192_000);
    expect(peer.pings[1]!.afterAudioBytes).toBeGreaterThanOrEqual(closedAt[1]!);
    expect(peer.pings.map((p) => p.payload.readUInt32BE(0))).toEqual([1, 2]);
  });

  it('a service that has not yet shown it read the speech is waited for, then one quiet period from its pong', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
    const { stream, peer } = await scripted(QUIET, { autoPong: false });
    const pcm = speechThenSilence();
    const outcome = run(stream, chunked(pcm, [4800]));
    await peer.waitForAudioBytes(pcm.length + 800 * 48);
    const fence = await peer.waitForPingAfter(48_000);
    // An answer to everything, begun once it was all sent: nothing is owed.
    const answered = once(stream, 'response');
    peer.sendResponse(Buffer.alloc(4800, 2), 'all');
    await answered;
    let ended = false;
    stream.once('ended', () => (ended = true));
    // Ten seconds on, the service has still not shown it read the speech: the stream waits.
    expect(await advanceUntil(() => ended, 10_000)).toBe(10_000);
    expect(ended).toBe(false);
    peer.pong(fence);
    const afterPong = await advanceUntil(() => ended);
    expect(afterPong).toBeGreaterThanOrEqual(300);
    expect(afterPong).toBeLessThan(2_000);
    vi.useRealTimers();
    const result = await outcome;
    expect(result.error).toBeUndefined();
    expect(stream.stats.ending).toEqual({ complete: true, reason: undefined, unansweredSpeechMs: 0 });
  });
  it('a service that never answers pings is not waited for forever: its fence counts as passed after livenessTimeoutMs', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
    const { stream, peer } = await scripted(QUIET, { autoPong: false });
    const pcm = speechThenSilence();
    const outcome = run(stream, chunked(pcm, [4800]));
    await peer.waitForAudioBytes(pcm.length + 800 * 48);
    await peer.waitForPingAfter(48_000);
    const answered = once(stream, 'response');
    peer.sendResponse(Buffer.alloc(4800, 3), 'all');
    await answered;
    let ended = false;
    stream.once('ended', () => (ended = true));
    const waited = await advanceUntil(() => ended);
    expect(waited).toBeGreaterThanOrEqual(60_000);
    expect(waited).toBeLessThan(62_000);
    vi.useRealTimers();
    const result = await outcome;
    expect(result.error).toBeUndefined();
    expect(stream.stats.ending).toMatchObject({ complete: true });
  });
});

describe('service errors reach the caller with their cause', () => {
  it('a billing stop while the caller keeps writing is a BillingError, and every write is settled', async () => {
    const emu = await emulator({ creditSeconds: 3 });
    const stream = open(emu.realtimeUrl);
    let written = 0;
    let handed = 0;
    let settled = 0;
    async function* endless() {
      for (let i = 0; i < 2000; i++) {
        written++;
        yield fixture.pcm.subarray((i % 80) * 4800, (i % 80) * 4800 + 4800);
        await tick();
      }
    }
    const source = Readable.from(endless());
    const counting = new Writable({
      write(chunk: Buffer, _e, cb) {
        // Hand each chunk to the translator and count its callback.
        handed++;
        stream.write(chunk, () => settled++);
        cb();
      },
    });
    stream.resume();
    const failed = new Promise<RtTranslateError>((resolve) => stream.once('error', resolve));
    // 'error' and 'close' are emitted in the same tick: listen for both up front.
    const closed = new Promise((resolve) => stream.once('close', resolve));
    void pipeline(source, counting).catch(() => undefined);
    const error = await failed;
    source.destroy();
    await closed;
    expect(error.code).toBe('RTT_BILLING');
    expect(error.serverMessage).toMatch(/credit/i);
    expect(written).toBeLessThan(2000);
    // Every write handed to the stream got its callback (with or without an error).
    await tick();
    await tick();
    expect(handed).toBeGreaterThan(0);
    expect(settled).toBe(handed);
  });

  it('an error event while the session stays open is a warning, and the session goes on', async () => {
    const { stream, peer } = await scripted({ quietPeriodMs: 2000 });
    const ending = run(stream, [Buffer.alloc(24_000)]);
    await peer.waitForAudioBytes(24_000);
    const warned = once(stream, 'warning');
    peer.sendError('input_audio_buffer.commit is not supported', 400);
    await warned; // the grace period in which a close would have made it fatal is over
    peer.sendResponse(Buffer.alloc(4800, 3), 'after the warning');
    const outcome = await ending;
    expect(outcome.error).toBeUndefined();
    expect(outcome.warnings.map((w) => [w.code, w.serverMessage])).toEqual([['RTT_SERVER', 'input_audio_buffer.commit is not supported']]);
    expect(outcome.audio.equals(Buffer.alloc(4800, 3))).toBe(true);
  });

  it('an abort after the session has completed does not turn it into a failure', async () => {
    const emu = await emulator();
    const controller = new AbortController();
    const stream = open(emu.realtimeUrl, { signal: controller.signal });
    stream.once('end', () => controller.abort());
    const outcome = await run(stream, chunked(TWO, [4800]));
    await new Promise((resolve) => (stream.closed ? resolve(undefined) : stream.once('close', resolve)));
    expect(outcome.error).toBeUndefined();
    expect(stream.errored).toBeNull();
    expect(outcome.audio.equals(TWO_EXPECTED)).toBe(true);
  });

  it('an events() consumer that falls behind by audio bytes pauses the socket, and pulling later gets everything', async () => {
    const emu = await emulator();
    const stream = open(emu.realtimeUrl, { maxQueuedEventBytes: 32 * 1024, maxQueuedEvents: 100_000 });
    const iterator = stream.events();
    const pausedSeen = waitFor(() => stream.stats.paused, { onEvent: [stream, 'event'] });
    const outcome = run(stream, chunked(TWO, [4800]));
    await pausedSeen;
    let audioBytes = 0;
    for await (const event of iterator) if (event.type === 'audio.delta') audioBytes += event.audio.length;
    const result = await outcome;
    expect(result.error).toBeUndefined();
    expect(audioBytes).toBe(TWO_EXPECTED.length);
  });
});
