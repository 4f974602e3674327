/**
 * RealtimeTranslateStream lifecycle: destroy() and destroy(err) in every state, AbortSignal,
 * the ready timeout, pipeline() failure, and partial output kept across a fatal server error.
 * After every scenario: the stream emitted 'close', the server saw the connection end, and no
 * socket or timer is left (see `helpers/handles.ts`).
 *
 * Servers: the emulator for the service's behaviour (cold start, billing stop, responses), and
 * the scripted fake server for what the emulator does not do on purpose (a handshake that never
 * completes, a server that stops reading).
 */
import { readFileSync } from 'node:fs';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { WebSocket } from 'ws';
import { startEmulator, type EmulatorOptions, type RunningEmulator } from '../lib/emulator/server.js';
import { UtteranceSegmenter } from '../lib/emulator/vad.js';
import { RealtimeTranslateStream, type RealtimeTranslateOptions } from '../lib/realtime/realtime-translate-stream.js';
import { countHandles, expectNoLeakedHandles, handlesAbove, type HandleCounts } from './helpers/handles.js';
import { startFakeRealtimeServer, type FakePeer, type FakeRealtimeServer } from './helpers/fake-realtime-server.js';
import { emulatorUtterances } from './helpers/speech.js';

/* ------------------------------------------------------------------------------------------- */
/* Audio                                                                                       */

const KEY = 'lifecycle-test-key';
/** Bytes of PCM16 mono 24 kHz per millisecond. */
const MS = 48;
/** The stream's default end padding (800 ms of zeros). */
const END_PADDING = Buffer.alloc(800 * MS);

const FIXTURE = readFileSync(new URL('./fixtures/speech-en-24k.wav', import.meta.url)).subarray(44);
/** The fixture's voiced regions as the emulator's detector finds them (the json's `emulator`). */
type Region = { startSample: number; endSample: number };
const FIXTURE_INFO = JSON.parse(readFileSync(new URL('./fixtures/speech-en-24k.json', import.meta.url), 'utf8')) as {
  utterances: Array<{ emulator: Region }>;
};

/**
 * What the emulator returns for `sent` (everything the client sent, end padding included):
 * each utterance's voiced region, computed by the same segmenter the emulator runs; the last
 * one ended when the audio stops arriving. With `creditBytes`, only the utterances that ended
 * within the credited input (the one in progress at the billing stop is dropped).
 */
function expectedTranslation(sent: Buffer, creditBytes?: number): Buffer {
  const answered = creditBytes === undefined ? emulatorUtterances(sent) : new UtteranceSegmenter().push(sent.subarray(0, creditBytes));
  return Buffer.concat(answered.map((u) => u.audio));
}

/** The fixture's translation from its measured voiced regions (json), independent of the segmenter. */
function fixtureSlices(): Buffer {
  return Buffer.concat(FIXTURE_INFO.utterances.map(({ emulator: { startSample, endSample } }) => FIXTURE.subarray(startSample * 2, endSample * 2)));
}

/* ------------------------------------------------------------------------------------------- */
/* Servers, streams and cleanup                                                                */

const emulators: RunningEmulator[] = [];
const fakes: FakeRealtimeServer[] = [];
const streams: RealtimeTranslateStream[] = [];

afterEach(async () => {
  vi.useRealTimers();
  for (const stream of streams.splice(0)) stream.destroy();
  await Promise.all([...emulators.splice(0).map((e) => e.close()), ...fakes.splice(0).map((f) => f.close())]);
});

async function emulator(options: EmulatorOptions = {}): Promise<RunningEmulator> {
  const started = await startEmulator({ port: 0, apiKeys: [KEY], latencyMs: 0, ...options });
  emulators.push(started);
  return started;
}

async function fakeServer(options: { holdUpgrade?: boolean } = {}): Promise<FakeRealtimeServer> {
  const started = await startFakeRealtimeServer(options);
  fakes.push(started);
  return started;
}

/** Closes a server of this file and forgets it (so afterEach does not close it again). */
async function closeServer(server: RunningEmulator | FakeRealtimeServer): Promise<void> {
  const e = emulators.indexOf(server as RunningEmulator);
  if (e >= 0) emulators.splice(e, 1);
  const f = fakes.indexOf(server as FakeRealtimeServer);
  if (f >= 0) fakes.splice(f, 1);
  await server.close();
}

interface Watched {
  stream: RealtimeTranslateStream;
  /** Every 'error' the stream emitted, in order. */
  errors: Error[];
  /** Resolves on 'close'. */
  closed: Promise<void>;
  /** Output audio read so far (only when read with `collect`). */
  output: Buffer[];
}

function open(realtimeUrl: string, options: Partial<RealtimeTranslateOptions> = {}): Watched {
  const stream = new RealtimeTranslateStream({
    from: 'en-us',
    to: 'es-es',
    apiKey: KEY,
    realtimeUrl,
    quietPeriodMs: 300,
    ...options,
  });
  streams.push(stream);
  const errors: Error[] = [];
  stream.on('error', (error) => errors.push(error));
  const closed = new Promise<void>((resolve) => stream.once('close', () => resolve()));
  return { stream, errors, closed, output: [] };
}

/** Reads the stream in flowing mode into `w.output`. */
function collect(w: Watched): void {
  w.stream.on('data', (chunk: Buffer) => w.output.push(chunk));
}

/** Resolves on the stream's next `event`, rejects on 'close' before it. */
function next(stream: RealtimeTranslateStream, event: string): Promise<unknown[]> {
  return new Promise((resolve, reject) => {
    const onEvent = (...args: unknown[]): void => {
      stream.off('close', onClose);
      resolve(args);
    };
    const onClose = (): void => {
      stream.off(event, onEvent);
      reject(new Error(`The stream closed before '${event}' (errored: ${String(stream.errored)}).`));
    };
    stream.once(event, onEvent);
    stream.once('close', onClose);
  });
}

/** Resolves once `stream` emitted `event` `count` times (counting from now). */
function times(stream: RealtimeTranslateStream, event: string, count: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = 0;
    const onEvent = (): void => {
      if (++seen < count) return;
      stream.off(event, onEvent);
      stream.off('close', onClose);
      resolve();
    };
    const onClose = (): void => reject(new Error(`The stream closed after ${seen} of ${count} '${event}' events.`));
    stream.on(event, onEvent);
    stream.once('close', onClose);
  });
}

/** Polls `probe` until true; fails naming `what` after `limitMs` (a wait bound, not an assertion on time). */
async function until(probe: () => boolean, what: string, limitMs = 10_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`Gave up waiting for ${what}.`);
    await sleep(5);
  }
}

/**
 * After a stalled peer stopped reading: writes 9600-byte chunks (one append event each) until a
 * write returned false, its callback is still waiting, and the socket's send buffer is over its
 * bound. Returns what each write callback got, in order ('pending': not called yet).
 */
async function writeUntilHeldBack(w: Watched, maxSocketBufferBytes: number): Promise<Array<Error | null | undefined | 'pending'>> {
  const results: Array<Error | null | undefined | 'pending'> = [];
  const chunk = FIXTURE.subarray(48_000, 48_000 + 9600);
  let drained = true;
  w.stream.on('drain', () => {
    drained = true;
  });
  await until(() => {
    if (drained) {
      for (;;) {
        const index = results.push('pending') - 1;
        const more = w.stream.write(chunk, (error) => {
          results[index] = error;
        });
        if (!more) break;
      }
      drained = false;
    }
    return !drained && results.at(-1) === 'pending' && w.stream.stats.socketBufferedAmount > maxSocketBufferBytes;
  }, 'the writer to be held back by the stalled peer');
  return results;
}

/* ------------------------------------------------------------------------------------------- */
/* destroy() and destroy(err) in every state                                                   */

type Server = { kind: 'emulator'; emulator: RunningEmulator } | { kind: 'fake'; fake: FakeRealtimeServer; peer?: FakePeer };

interface Scenario {
  server: Server;
  w: Watched;
  /** Output expected when the stream completes before the destroy. */
  expectOutput?: Buffer;
  /** Results of the write callbacks of a writer held back at the destroy ('pending': not called). */
  writes?: Array<Error | null | undefined | 'pending'>;
}

/** Each state brings a stream to that state and returns it. */
const STATES: Record<string, () => Promise<Scenario>> = {
  async 'connecting (handshake not answered)'() {
    const fake = await fakeServer({ holdUpgrade: true });
    const w = open(fake.realtimeUrl);
    await fake.nextUpgradeRequest();
    expect(w.stream.sessionId).toBeUndefined();
    return { server: { kind: 'fake', fake }, w };
  },
  async 'connecting (connected, cold start: session.starting, no session.created)'() {
    const server = await emulator({ coldStartMs: 60_000 });
    const w = open(server.realtimeUrl);
    await next(w.stream, 'session.starting');
    expect(w.stream.sessionId).toBeUndefined();
    return { server: { kind: 'emulator', emulator: server }, w };
  },
  async 'active (responses streaming)'() {
    const server = await emulator();
    const w = open(server.realtimeUrl);
    collect(w);
    await next(w.stream, 'session.created');
    w.stream.write(FIXTURE);
    await next(w.stream, 'audio.done');
    expect(w.output.length).toBeGreaterThan(0);
    return { server: { kind: 'emulator', emulator: server }, w };
  },
  async 'writing under backpressure (stalled server)'() {
    const fake = await fakeServer();
    const w = open(fake.realtimeUrl, { maxSocketBufferBytes: 64 * 1024, maxAppendBytes: 9600, writableHighWaterMark: 16 * 1024 });
    const peer = await fake.acceptSession(w.stream);
    peer.pauseReading();
    const writes = await writeUntilHeldBack(w, 64 * 1024);
    expect(writes.slice(-2)).toEqual(['pending', 'pending']);
    return { server: { kind: 'fake', fake, peer }, w, writes };
  },
  async 'ending (after end(), waiting for the session to go quiet)'() {
    const server = await emulator();
    const w = open(server.realtimeUrl, { quietPeriodMs: 60_000 });
    collect(w);
    await next(w.stream, 'session.created');
    const three = times(w.stream, 'audio.done', 3);
    w.stream.end(FIXTURE);
    await three;
    // _final ran: the end padding went out after the input.
    await until(() => w.stream.stats.bytesSent === FIXTURE.length + END_PADDING.length, 'the end padding to be sent');
    expect(w.stream.writableEnded).toBe(true);
    expect(w.stream.writableFinished).toBe(false);
    return { server: { kind: 'emulator', emulator: server }, w };
  },
  async 'after it ended'() {
    const server = await emulator();
    const w = open(server.realtimeUrl);
    collect(w);
    w.stream.end(FIXTURE);
    await w.closed;
    const expected = expectedTranslation(Buffer.concat([FIXTURE, END_PADDING]));
    expect(expected.equals(fixtureSlices())).toBe(true);
    return { server: { kind: 'emulator', emulator: server }, w, expectOutput: expected };
  },
};

/** Waits until the server's end of the connection is closed too. */
async function serverSawEnd(server: Server, withServer: HandleCounts): Promise<void> {
  if (server.kind === 'fake') {
    // A stalled peer reads nothing, so it could not notice the close: let it read again.
    server.peer?.resumeReading();
    await server.fake.allClosed();
    expect(server.fake.openConnections).toBe(0);
    expect(server.fake.connections).toBe(1);
  }
  // Both ends of the loopback connection are sockets of this process: back at the count taken
  // while the server was listening, the server's end is closed as well.
  await expectNoLeakedHandles(withServer);
}

/** Reads every chunk with a pause after each (a slow consumer); resolves with the audio and the error it ended with. */
async function readSlowly(stream: AsyncIterable<unknown>, pauseMs: number): Promise<{ audio: Buffer; failure: (Error & { code?: string }) | undefined }> {
  const chunks: Buffer[] = [];
  let failure: (Error & { code?: string }) | undefined;
  try {
    for await (const chunk of stream) {
      chunks.push(chunk as Buffer);
      await sleep(pauseMs);
    }
  } catch (error) {
    failure = error as Error & { code?: string };
  }
  return { audio: Buffer.concat(chunks), failure };
}

describe('RealtimeTranslateStream: destroy() in every state', () => {
  const cases = Object.keys(STATES).flatMap((state) => [
    { state, how: 'destroy()', error: undefined as Error | undefined },
    { state, how: 'destroy(err)', error: new Error('the caller gave up') },
  ]);

  it.each(cases)('$how while $state: emits exactly that error (or none), closes, leaves no handle', async ({ state, error }) => {
    const baseline = countHandles();
    const { server, w, expectOutput, writes } = await STATES[state]!();
    const withServer = countHandles();
    const before = w.stream.destroyed;

    w.stream.destroy(error);
    await w.closed;

    expect(w.stream.destroyed).toBe(true);
    if (expectOutput) {
      // Already closed: destroy() is a no-op, whatever the error.
      expect(before).toBe(true);
      expect(w.errors).toEqual([]);
      expect(Buffer.concat(w.output).equals(expectOutput)).toBe(true);
    } else {
      expect(w.errors).toEqual(error ? [error] : []);
      if (error) expect(w.errors[0]).toBe(error);
    }
    if (writes) {
      // No write callback is left hanging: the writes not yet handed to the socket fail.
      expect(writes.filter((result) => result === 'pending')).toEqual([]);
      const last = writes.at(-1) as NodeJS.ErrnoException;
      if (error) expect(last).toBe(error);
      else expect(last.code).toBe('ERR_STREAM_DESTROYED');
    }
    await serverSawEnd(server, withServer);
    await closeServer(server.kind === 'fake' ? server.fake : server.emulator);
    await expectNoLeakedHandles(baseline);
  });
});

/* ------------------------------------------------------------------------------------------- */
/* AbortSignal                                                                                 */

function expectAborted(errors: Error[], reason: unknown): void {
  expect(errors).toHaveLength(1);
  const [error] = errors as [Error & { code?: string }];
  expect(error.name).toBe('AbortError');
  expect(error.code).toBe('RTT_ABORTED');
  expect(error.cause).toBe(reason);
}

describe('RealtimeTranslateStream: AbortSignal', () => {
  it('already aborted before construction: fails with RTT_ABORTED and never opens a connection', async () => {
    const baseline = countHandles();
    const fake = await fakeServer();
    const withServer = countHandles();
    const controller = new AbortController();
    const reason = new Error('user cancelled');
    controller.abort(reason);

    const w = open(fake.realtimeUrl, { signal: controller.signal });
    w.stream.write(FIXTURE);
    await w.closed;

    expectAborted(w.errors, reason);
    await expectNoLeakedHandles(withServer);
    expect(fake.connections).toBe(0);
    expect(fake.upgradeRequests).toBe(0);
    await closeServer(fake);
    await expectNoLeakedHandles(baseline);
  });

  const states: Record<string, (signal: AbortSignal) => Promise<{ w: Watched; server: Server }>> = {
    async 'connecting (handshake not answered)'(signal) {
      const fake = await fakeServer({ holdUpgrade: true });
      const w = open(fake.realtimeUrl, { signal });
      await fake.nextUpgradeRequest();
      return { w, server: { kind: 'fake', fake } };
    },
    async 'connecting (cold start)'(signal) {
      const server = await emulator({ coldStartMs: 60_000 });
      const w = open(server.realtimeUrl, { signal });
      await next(w.stream, 'session.starting');
      return { w, server: { kind: 'emulator', emulator: server } };
    },
    async active(signal) {
      const server = await emulator();
      const w = open(server.realtimeUrl, { signal });
      collect(w);
      await next(w.stream, 'session.created');
      w.stream.write(FIXTURE);
      await next(w.stream, 'audio.done');
      return { w, server: { kind: 'emulator', emulator: server } };
    },
    async 'ending (after end())'(signal) {
      const server = await emulator();
      const w = open(server.realtimeUrl, { signal, quietPeriodMs: 60_000 });
      collect(w);
      const three = times(w.stream, 'audio.done', 3);
      w.stream.end(FIXTURE);
      await three;
      await until(() => w.stream.stats.bytesSent === FIXTURE.length + END_PADDING.length, 'the end padding to be sent');
      return { w, server: { kind: 'emulator', emulator: server } };
    },
  };

  it.each(Object.keys(states))('aborted while %s: RTT_ABORTED AbortError, connection closed, no handle left', async (state) => {
    const baseline = countHandles();
    const controller = new AbortController();
    const { w, server } = await states[state]!(controller.signal);
    const withServer = countHandles();
    const reason = new Error(`stop while ${state}`);

    controller.abort(reason);
    await w.closed;

    expectAborted(w.errors, reason);
    await serverSawEnd(server, withServer);
    await closeServer(server.kind === 'fake' ? server.fake : server.emulator);
    await expectNoLeakedHandles(baseline);
  });
});

/* ------------------------------------------------------------------------------------------- */
/* Ready timeout and pipeline()                                                                */

describe('RealtimeTranslateStream: ready timeout during a cold start', () => {
  const READY_MS = 5_000;

  /** Starts a cold-starting emulator, with fake setTimeout from here on. */
  async function coldStart(): Promise<RunningEmulator> {
    const server = await emulator({ coldStartMs: 120_000 });
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    return server;
  }

  it('fails with RTT_TIMEOUT naming session.starting, and leaves nothing open', async () => {
    const baseline = countHandles();
    const server = await coldStart();
    const w = open(server.realtimeUrl, { readyTimeoutMs: READY_MS });
    await next(w.stream, 'session.starting');
    const withServer = countHandles();

    vi.advanceTimersByTime(READY_MS - 1);
    await new Promise((resolve) => setImmediate(resolve));
    expect(w.errors).toEqual([]);
    vi.advanceTimersByTime(1);
    vi.useRealTimers();
    await w.closed;

    expect(w.errors).toHaveLength(1);
    const error = w.errors[0] as Error & { code?: string; timeoutMs?: number };
    expect(error.code).toBe('RTT_TIMEOUT');
    expect(error.timeoutMs).toBe(READY_MS);
    expect(error.message).toMatch(/session\.starting/);
    expect(error.message).toContain(`${READY_MS} ms`);
    expect(w.stream.sessionId).toBeUndefined();
    await expectNoLeakedHandles(withServer);
    await closeServer(server);
    await expectNoLeakedHandles(baseline);
  });

  it('pipeline(source, stream, sink) rejects with the timeout error and destroys every part', async () => {
    const baseline = countHandles();
    const server = await coldStart();
    const w = open(server.realtimeUrl, { readyTimeoutMs: READY_MS });
    const source = Readable.from(
      (function* () {
        for (let at = 0; at < FIXTURE.length; at += 9600) yield FIXTURE.subarray(at, at + 9600);
      })(),
    );
    const received: Buffer[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        received.push(chunk);
        callback();
      },
    });
    const run = pipeline(source, w.stream, sink);
    const outcome = run.then(
      () => undefined,
      (error: unknown) => error,
    );
    await next(w.stream, 'session.starting');
    const withServer = countHandles();
    vi.advanceTimersByTime(READY_MS);
    vi.useRealTimers();

    const error = (await outcome) as Error & { code?: string };
    expect(error).toBeInstanceOf(Error);
    expect(error).toBe(w.errors[0]);
    expect(error.code).toBe('RTT_TIMEOUT');
    expect(error.message).toMatch(/session\.starting/);
    await w.closed;
    expect(source.destroyed).toBe(true);
    expect(sink.destroyed).toBe(true);
    expect(received).toEqual([]);
    await expectNoLeakedHandles(withServer);
    await closeServer(server);
    await expectNoLeakedHandles(baseline);
  });
});

/* ------------------------------------------------------------------------------------------- */
/* Partial output across a billing stop                                                        */

describe('RealtimeTranslateStream: output received before a fatal server error is never lost', () => {
  /** 6 s of credit: utterances 1 and 2 of the fixture end within it, utterance 3 starts after it. */
  const CREDIT_SECONDS = 6;
  const CREDIT_BYTES = CREDIT_SECONDS * 24_000 * 2;
  const SENT = Buffer.concat([FIXTURE, END_PADDING]);

  it('the expectation: two utterances fit in the credit', () => {
    const expected = expectedTranslation(SENT, CREDIT_BYTES);
    const slices = fixtureSlices();
    const [u1, u2] = FIXTURE_INFO.utterances.map((u) => u.emulator) as [Region, Region];
    const twoSlices = (u1.endSample - u1.startSample + (u2.endSample - u2.startSample)) * 2;
    expect(expected.length).toBe(twoSlices);
    expect(expected.equals(slices.subarray(0, twoSlices))).toBe(true);
  });

  /** How the consumer reads: each variant is slower than the session. */
  const consumers: Record<string, { options: Partial<RealtimeTranslateOptions>; endAfterStop: boolean }> = {
    'paused until the server has closed, then reads everything': { options: { readableHighWaterMark: 1024 * 1024 }, endAfterStop: false },
    'calls end() only after the server has closed, then reads': { options: { readableHighWaterMark: 1024 * 1024 }, endAfterStop: true },
  };

  it.each(Object.keys(consumers))('consumer %s: every byte, then RTT_BILLING', async (name) => {
    const { options, endAfterStop } = consumers[name]!;
    const baseline = countHandles();
    const server = await emulator({ creditSeconds: CREDIT_SECONDS });
    const withServer = countHandles();
    const w = open(server.realtimeUrl, options);
    w.stream.pause();
    await new Promise<void>((resolve, reject) => w.stream.write(FIXTURE, (error) => (error ? reject(error) : resolve())));
    if (!endAfterStop) w.stream.end();
    // The server stops the session and closes the connection, both ends, before any read.
    await expectNoLeakedHandles(withServer, { settleMs: 5000 });
    expect(w.errors).toEqual([]);
    if (endAfterStop) w.stream.end();

    const { audio, failure } = await readSlowly(w.stream, 2);
    await w.closed;

    const expected = expectedTranslation(SENT, CREDIT_BYTES);
    expect(audio.length).toBe(expected.length);
    expect(audio.equals(expected)).toBe(true);
    expect(failure?.code).toBe('RTT_BILLING');
    expect(failure?.message).toMatch(/credits/);
    await closeServer(server);
    await expectNoLeakedHandles(baseline);
  });

  it('consumer slower than the network (small readable buffer, socket paused): every byte, then RTT_BILLING', async () => {
    const baseline = countHandles();
    const server = await emulator({ creditSeconds: CREDIT_SECONDS });
    const w = open(server.realtimeUrl, { readableHighWaterMark: 16 * 1024 });
    w.stream.end(FIXTURE);
    // The reader stays away until the socket had to be paused for it.
    await until(() => w.stream.stats.paused, 'the socket to be paused for the reader');

    const { audio, failure } = await readSlowly(w.stream, 5);
    await w.closed;

    const expected = expectedTranslation(SENT, CREDIT_BYTES);
    expect(audio.length).toBe(expected.length);
    expect(audio.equals(expected)).toBe(true);
    expect(failure?.code).toBe('RTT_BILLING');
    await closeServer(server);
    await expectNoLeakedHandles(baseline);
  });
});

/* ------------------------------------------------------------------------------------------- */
/* The leak check itself                                                                       */

describe('leak check helper', () => {
  it('reports a socket, a listening server and a timer left open, and passes once they are closed', async () => {
    // Sockets of an earlier test may still be closing: start from none.
    await expectNoLeakedHandles({ ...countHandles(), TCPSocketWrap: 0, TCPServerWrap: 0 });
    const baseline = countHandles();
    // A timer is counted at once (checked synchronously: nothing else can start or end meanwhile).
    const beforeTimer = countHandles();
    const timer = setTimeout(() => {}, 60_000);
    expect(handlesAbove(beforeTimer)).toEqual({ Timeout: { baseline: beforeTimer.Timeout, now: beforeTimer.Timeout + 1 } });

    const fake = await fakeServer();
    const ws = new WebSocket(`${fake.realtimeUrl}/v1/realtime`);
    const peer = await fake.nextPeer();
    const failure = await expectNoLeakedHandles(baseline, { settleMs: 50 }).then(
      () => undefined,
      (error: Error) => error,
    );
    // Client and server end of the connection, and the listening socket.
    expect(failure?.message).toMatch(/TCPSocketWrap: 2 alive, 0 before/);
    expect(failure?.message).toMatch(/TCPServerWrap: 1 alive, 0 before/);

    clearTimeout(timer);
    ws.terminate();
    await peer.closed;
    await closeServer(fake);
    const after = await expectNoLeakedHandles(baseline);
    expect(after.TCPServerWrap).toBe(0);
    expect(after.TCPSocketWrap).toBe(0);
  });
});
