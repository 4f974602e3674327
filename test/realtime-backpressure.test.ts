/**
 * RealtimeTranslateStream backpressure, both ways, measured: while each scenario runs, the
 * stream's own figures (`readableLength`, `writableLength`, `stats.socketBufferedAmount`,
 * `stats.paused`) are sampled after every write, every write callback and every event-loop turn
 * that delivered server events, and their maxima are checked against the configured bounds.
 *
 * - Slow reader: the socket is paused, the server stops reading, the writer is held back; once
 *   the reader reads, the output is byte-identical to what the emulator computes.
 * - Slow server: the send buffer stays under its bound, the writable buffer under its high-water
 *   mark, and the process's live memory does not grow with the megabytes offered. The stalled
 *   scripted server makes this deterministic; against the emulator's throttled reading the
 *   kernel's socket buffers (several MB on loopback) absorb most of the backlog, so that run
 *   mainly checks the bounds and the exact translation end to end.
 * - Chunks bigger than one append event (64 KiB, as a file stream reads): the same bound.
 * - Slow `events()` consumer: the socket is paused once `maxQueuedEvents` is exceeded; pulling
 *   resumes it and every event arrives.
 * - A reader or events() consumer that is behind after `end()` loses nothing to the end-of-session
 *   timers: the silence it causes is not the service's.
 *
 * Bounds and their margins (why each bound is what it is):
 * - `socketBufferedAmount <= maxSocketBufferBytes + one append event`: an append event is sent
 *   only while the buffer is at or under the bound, so at most one event's JSON plus a WebSocket
 *   frame header (at most 14 bytes) can go over it, whatever the size of the written chunks.
 * - `writableLength <= writableHighWaterMark + one chunk`: the producer honours `write() === false`.
 * - `readableLength <= readableHighWaterMark + one audio piece + one socket read`: the socket is
 *   paused when `push()` returns false, but `ws` still emits every message already in the
 *   socket read being parsed (a read is at most 64 KiB), so up to one read's worth of audio can
 *   arrive after the pause, besides the piece that crossed the mark.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startEmulator, type EmulatorOptions, type RunningEmulator } from '../lib/emulator/server.js';
import { UtteranceSegmenter } from '../lib/emulator/vad.js';
import { APPEND_PIECE_BYTES, encodeAudioAppend } from '../lib/realtime/codec.js';
import type { RealtimeEvent } from '../lib/realtime/realtime-events.js';
import { RealtimeTranslateStream, type RealtimeTranslateOptions } from '../lib/realtime/realtime-translate-stream.js';
import { startFakeRealtimeServer, type FakeRealtimeServer } from './helpers/fake-realtime-server.js';
import { countHandles, expectNoLeakedHandles } from './helpers/handles.js';
import { emulatorUtterances } from './helpers/speech.js';

/* ------------------------------------------------------------------------------------------- */
/* Audio                                                                                       */

const KEY = 'backpressure-test-key';
/** Bytes of PCM16 mono 24 kHz per millisecond. */
const MS = 48;
/** The stream's default end padding: 800 ms of zeros. */
const END_PADDING = Buffer.alloc(800 * MS);
/** The emulator's output audio piece (400 ms). */
const OUTPUT_PIECE = 19_200;
/** Most bytes one socket read delivers (libuv reads into 64 KiB buffers). */
const SOCKET_READ = 64 * 1024;
/** Largest WebSocket frame header of a client frame (8-byte length + 4-byte mask + 2). */
const FRAME_HEADER = 14;

const FIXTURE = readFileSync(new URL('./fixtures/speech-en-24k.wav', import.meta.url)).subarray(44);

/**
 * Speech-like input without copies: the fixture again and again, in chunks of at most `chunk`
 * bytes (every chunk a view of the fixture), until `limitBytes`.
 */
function* repeatedSpeech(chunk: number, limitBytes = Number.POSITIVE_INFINITY): Generator<Buffer> {
  let total = 0;
  for (;;) {
    for (let at = 0; at < FIXTURE.length; at += chunk) {
      const piece = FIXTURE.subarray(at, Math.min(FIXTURE.length, at + chunk));
      if (total + piece.length > limitBytes) return;
      total += piece.length;
      yield piece;
    }
  }
}

/** Computes the emulator's answer as the input goes: each utterance's voiced region. */
class ExpectedTranslation {
  readonly #segmenter = new UtteranceSegmenter();
  readonly #audio: Buffer[] = [];
  feed(pcm: Buffer): void {
    for (const utterance of this.#segmenter.push(pcm)) this.#audio.push(utterance.audio);
  }
  /** The audio stopped arriving: the emulator ends the utterance in progress (its idle rule). */
  end(): void {
    for (const utterance of this.#segmenter.end()) this.#audio.push(utterance.audio);
  }
  get bytes(): Buffer {
    return Buffer.concat(this.#audio);
  }
}

/** Distinct non-silent audio for the scripted server's responses (`seed` tells them apart). */
function tone(ms: number, seed: number): Buffer {
  const out = Buffer.alloc(ms * MS);
  for (let i = 0; i < out.length / 2; i++) out.writeInt16LE(Math.round(8000 * Math.sin((i * (seed + 3)) / 11)), i * 2);
  return out;
}

/* ------------------------------------------------------------------------------------------- */
/* Measuring                                                                                   */

interface Maxima {
  readableLength: number;
  writableLength: number;
  socketBufferedAmount: number;
}

/** Samples the stream's own buffer figures and keeps their maxima. */
class Figures {
  readonly max: Maxima = { readableLength: 0, writableLength: 0, socketBufferedAmount: 0 };
  samples = 0;
  #scheduled = false;

  constructor(readonly stream: RealtimeTranslateStream) {
    // After each event-loop turn that delivered server events (a socket read's worth).
    stream.on('event', () => {
      if (this.#scheduled) return;
      this.#scheduled = true;
      setImmediate(() => {
        this.#scheduled = false;
        this.sample();
      });
    });
  }

  sample(): void {
    const { stream } = this;
    this.samples += 1;
    this.max.readableLength = Math.max(this.max.readableLength, stream.readableLength);
    this.max.writableLength = Math.max(this.max.writableLength, stream.writableLength);
    this.max.socketBufferedAmount = Math.max(this.max.socketBufferedAmount, stream.stats.socketBufferedAmount);
  }
}

/** A producer that honours backpressure: write() until false, then wait for 'drain'. */
class Producer {
  /** Bytes passed to write(). */
  offered = 0;
  /** Bytes whose write callback has run. */
  accepted = 0;
  /** write() calls that returned false. */
  refused = 0;
  /** True while waiting for 'drain' after write() returned false. */
  waiting = false;
  /** Resolves once end() has been called (after the input ran out or stop()). */
  readonly done: Promise<void>;
  /** True once end() has been called. */
  finished = false;
  readonly errors: Error[] = [];
  #stopped = false;
  #wake: (() => void) | undefined;

  constructor(
    readonly stream: RealtimeTranslateStream,
    chunks: Iterable<Buffer>,
    figures: Figures,
    onWrite: (chunk: Buffer) => void = () => {},
  ) {
    stream.on('drain', () => this.#wake?.());
    this.done = (async () => {
      for (const chunk of chunks) {
        if (this.#stopped) break;
        this.offered += chunk.length;
        onWrite(chunk);
        const more = stream.write(chunk, (error) => {
          if (error) this.errors.push(error);
          else this.accepted += chunk.length;
          figures.sample();
        });
        figures.sample();
        if (!more) {
          this.refused += 1;
          this.waiting = true;
          await new Promise<void>((resolve) => {
            this.#wake = resolve;
          });
          this.waiting = false;
        }
      }
      this.finished = true;
      stream.end();
    })();
  }

  /** Ends the input after the write in progress. */
  stop(): void {
    this.#stopped = true;
  }
}

/**
 * Live memory, in bytes: after two full collections (V8 frees array buffers of the first one
 * while sweeping concurrently; the second collection waits for that sweep to finish).
 */
setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;
function liveMemory(): { arrayBuffers: number; heapUsed: number } {
  collectGarbage();
  collectGarbage();
  const { arrayBuffers, heapUsed } = process.memoryUsage();
  return { arrayBuffers, heapUsed };
}

/* ------------------------------------------------------------------------------------------- */
/* Servers, streams, waiting                                                                   */

const emulators: RunningEmulator[] = [];
const fakes: FakeRealtimeServer[] = [];
const streams: RealtimeTranslateStream[] = [];

/** Closes every server started by the current test. */
async function closeAll(): Promise<void> {
  await Promise.all([...emulators.splice(0).map((e) => e.close()), ...fakes.splice(0).map((f) => f.close())]);
}

afterEach(async () => {
  vi.useRealTimers();
  for (const stream of streams.splice(0)) stream.destroy();
  await closeAll();
});

async function emulator(options: EmulatorOptions = {}): Promise<RunningEmulator> {
  const started = await startEmulator({ port: 0, apiKeys: [KEY], latencyMs: 0, ...options });
  emulators.push(started);
  return started;
}

async function fakeServer(): Promise<FakeRealtimeServer> {
  const started = await startFakeRealtimeServer();
  fakes.push(started);
  return started;
}

function open(realtimeUrl: string, options: Partial<RealtimeTranslateOptions> = {}): RealtimeTranslateStream {
  const stream = new RealtimeTranslateStream({ from: 'en-us', to: 'es-es', apiKey: KEY, realtimeUrl, quietPeriodMs: 300, ...options });
  streams.push(stream);
  stream.on('error', () => {
    // Asserted through `closedWith`.
  });
  return stream;
}

/** Resolves with the stream's error (or undefined) once it has closed. */
function closedWith(stream: RealtimeTranslateStream): Promise<Error | null> {
  return new Promise((resolve) => stream.once('close', () => resolve(stream.errored)));
}

/** Polls `probe` until true; fails naming `what` after `limitMs` (a bound on the wait, not an assertion on time). */
async function until(probe: () => boolean, what: string, limitMs = 15_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`Gave up waiting for ${what}.`);
    await sleep(5);
  }
}

/**
 * Waits until `held()` is true and `progress()` has not changed for `polls` polls in a row (the
 * whole chain has come to rest), or fails after `limitMs`.
 */
async function untilAtRest(progress: () => number, held: () => boolean, what: string, polls = 15, limitMs = 15_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  let last = -1;
  let still = 0;
  for (;;) {
    const now = progress();
    still = held() && now === last ? still + 1 : 0;
    last = now;
    if (still >= polls) return;
    if (Date.now() > deadline) throw new Error(`Gave up waiting for ${what} (progress ${now}).`);
    await sleep(20);
  }
}

/** The largest append event's JSON for `maxAppendBytes` of audio, in bytes. */
function appendEventBytes(maxAppendBytes: number): number {
  return encodeAudioAppend(Buffer.alloc(maxAppendBytes)).length + FRAME_HEADER;
}

/* ------------------------------------------------------------------------------------------- */
/* 1. Slow reader                                                                              */

describe('RealtimeTranslateStream backpressure: a slow reader', () => {
  const READABLE_HWM = 16 * 1024;
  const WRITABLE_HWM = 16 * 1024;
  const MAX_SOCKET_BUFFER = 64 * 1024;
  const APPEND = 9600;
  /** The test gives up (fails) if the producer got this far without being held back. */
  const RUNAWAY_BYTES = 64 * 1024 * 1024;

  it.each(['json', 'binary'] as const)('pauses the socket, holds the writer back, then delivers every byte (%s audio frames)', async (audioFrames) => {
    const baseline = countHandles();
    const server = await emulator({ audioFrames, sendBufferLimitBytes: 64 * 1024 });
    const stream = open(server.realtimeUrl, {
      readableHighWaterMark: READABLE_HWM,
      writableHighWaterMark: WRITABLE_HWM,
      maxSocketBufferBytes: MAX_SOCKET_BUFFER,
      maxAppendBytes: APPEND,
    });
    const closed = closedWith(stream);
    const figures = new Figures(stream);
    const expected = new ExpectedTranslation();
    // The reader stays away: nothing reads the readable side yet.
    const producer = new Producer(stream, repeatedSpeech(APPEND, RUNAWAY_BYTES), figures, (chunk) => expected.feed(chunk));

    await untilAtRest(
      () => producer.accepted + stream.stats.bytesReceived,
      () => producer.waiting && stream.stats.paused,
      'the writer to be held back while nothing reads',
    );
    figures.sample();
    const held = { offered: producer.offered, accepted: producer.accepted, received: stream.stats.bytesReceived };
    // The socket is paused for the reader; write() said false and a write callback waits.
    expect(stream.stats.paused).toBe(true);
    expect(producer.refused).toBeGreaterThan(0);
    expect(producer.waiting).toBe(true);
    expect(producer.offered - producer.accepted).toBeGreaterThan(0);
    // write() said false at the high-water mark and 'drain' is still owed. How much of that is
    // still queued (one append or two) depends on how far the stream had taken the queue when
    // the socket filled, so the bound is "not emptied", not the high-water mark.
    expect(stream.writableNeedDrain).toBe(true);
    expect(stream.writableLength).toBeGreaterThan(0);
    expect(producer.offered).toBeLessThan(RUNAWAY_BYTES);
    // Nothing was read: all that was received is still buffered, and that is bounded.
    expect(stream.readableLength).toBe(held.received);
    expect(held.received).toBeLessThanOrEqual(READABLE_HWM + OUTPUT_PIECE + SOCKET_READ);
    expect(held.received).toBeGreaterThan(0);

    // Now the reader reads; the producer adds a few seconds more and ends.
    const output: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => output.push(chunk));
    await until(() => producer.accepted > held.accepted + 5 * 48_000, 'the writer to move again');
    producer.stop();
    await producer.done;
    expect(await closed).toBeNull();
    expected.feed(END_PADDING);
    expected.end();

    const got = Buffer.concat(output);
    const want = expected.bytes;
    expect(got.length).toBe(want.length);
    expect(got.equals(want)).toBe(true);
    expect(stream.stats.bytesSent).toBe(producer.offered + END_PADDING.length);
    expect(producer.errors).toEqual([]);

    // The figures never went over their bounds, before or after the reader came.
    expect(figures.samples).toBeGreaterThan(100);
    expect(figures.max.readableLength).toBeLessThanOrEqual(READABLE_HWM + OUTPUT_PIECE + SOCKET_READ);
    expect(figures.max.writableLength).toBeLessThanOrEqual(WRITABLE_HWM + APPEND);
    expect(figures.max.socketBufferedAmount).toBeLessThanOrEqual(MAX_SOCKET_BUFFER + appendEventBytes(APPEND));

    await closeAll();
    await expectNoLeakedHandles(baseline);
  });
});

/* ------------------------------------------------------------------------------------------- */
/* 2. Slow server                                                                              */

describe('RealtimeTranslateStream backpressure: a slow server', () => {
  const WRITABLE_HWM = 16 * 1024;
  const MAX_SOCKET_BUFFER = 64 * 1024;
  const APPEND = 9600;

  it('a server that stops reading: send buffer and writable buffer stay bounded, live memory does not grow with 24 MB offered', async () => {
    const OFFERED = 24 * 1024 * 1024;
    const baseline = countHandles();
    const fake = await fakeServer();
    const stream = open(fake.realtimeUrl, {
      writableHighWaterMark: WRITABLE_HWM,
      maxSocketBufferBytes: MAX_SOCKET_BUFFER,
      maxAppendBytes: APPEND,
    });
    const closed = closedWith(stream);
    stream.resume(); // the readable side must end for 'close'; this server sends no audio
    const peer = await fake.acceptSession(stream);
    peer.pauseReading();

    const figures = new Figures(stream);
    const digest = createHash('sha256');
    const before = liveMemory();
    const producer = new Producer(stream, repeatedSpeech(APPEND, OFFERED), figures, (chunk) => digest.update(chunk));

    // Stalled: the kernel's buffers fill, then the stream's own, then the writer waits.
    await untilAtRest(
      () => producer.accepted,
      () => producer.waiting,
      'the writer to be held back by the stalled server',
    );
    const held = { offered: producer.offered, accepted: producer.accepted, buffered: stream.stats.socketBufferedAmount };
    const atRest = liveMemory();
    expect(held.buffered).toBeGreaterThan(MAX_SOCKET_BUFFER);
    expect(held.offered - held.accepted).toBeGreaterThan(0);
    expect(held.offered).toBeLessThan(OFFERED / 2);
    expect(peer.audioBytes).toBe(0);

    // The server reads again: the rest flows; live memory is checked every 2 MB on the way.
    const growth: number[] = [atRest.arrayBuffers - before.arrayBuffers];
    peer.resumeReading();
    let nextCheck = held.accepted + 2 * 1024 * 1024;
    await until(() => {
      if (producer.accepted >= nextCheck) {
        nextCheck += 2 * 1024 * 1024;
        growth.push(liveMemory().arrayBuffers - before.arrayBuffers);
      }
      return producer.finished && producer.accepted === producer.offered;
    }, 'every chunk to be accepted');
    await producer.done;
    const offered = producer.offered;
    expect(offered).toBeGreaterThan(OFFERED - APPEND);
    // The service closes the session once it has everything (the end padding included).
    await peer.waitForAudioBytes(offered + END_PADDING.length);
    peer.close(1000);
    expect(await closed).toBeNull();
    await peer.closed;
    digest.update(END_PADDING);

    // Every byte reached the server, in order.
    expect(peer.audioBytes).toBe(offered + END_PADDING.length);
    expect(peer.audioDigest()).toBe(digest.digest('hex'));
    expect(stream.stats.bytesSent).toBe(offered + END_PADDING.length);
    expect(producer.errors).toEqual([]);
    // Live memory does not follow the 24 MB. The stream holds at most ~100 KB here (send buffer
    // bound + one event + writable buffer) and ~150 KB is measured; 2 MiB leaves room for the
    // peer's read buffers and allocator slack, and is 12x below what buffering the input would take.
    expect(growth.length).toBeGreaterThan(5);
    expect(Math.max(...growth)).toBeLessThan(2 * 1024 * 1024);
    expect(atRest.heapUsed - before.heapUsed).toBeLessThan(2 * 1024 * 1024);
    // The stream's own buffers stayed within their bounds all along (the end padding included).
    expect(figures.max.writableLength).toBeLessThanOrEqual(WRITABLE_HWM + APPEND);
    expect(figures.max.socketBufferedAmount).toBeLessThanOrEqual(MAX_SOCKET_BUFFER + appendEventBytes(APPEND));

    await closeAll();
    await expectNoLeakedHandles(baseline);
  });

  it('against the emulator reading 4 MB/s: buffers stay bounded and the translation is exact', async () => {
    const OFFERED = 8 * 1024 * 1024;
    const baseline = countHandles();
    const server = await emulator({ inputBytesPerSecond: 4_000_000 });
    const stream = open(server.realtimeUrl, {
      writableHighWaterMark: WRITABLE_HWM,
      maxSocketBufferBytes: MAX_SOCKET_BUFFER,
      maxAppendBytes: APPEND,
    });
    const closed = closedWith(stream);
    const figures = new Figures(stream);
    const expected = new ExpectedTranslation();
    const output: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => output.push(chunk));
    const producer = new Producer(stream, repeatedSpeech(APPEND, OFFERED), figures, (chunk) => expected.feed(chunk));
    await producer.done;
    expect(await closed).toBeNull();
    expected.feed(END_PADDING);
    expected.end();

    expect(producer.offered).toBeGreaterThan(OFFERED - APPEND);
    expect(stream.stats.bytesSent).toBe(producer.offered + END_PADDING.length);
    expect(Buffer.concat(output).equals(expected.bytes)).toBe(true);
    expect(figures.max.socketBufferedAmount).toBeLessThanOrEqual(MAX_SOCKET_BUFFER + appendEventBytes(APPEND));
    expect(figures.max.writableLength).toBeLessThanOrEqual(WRITABLE_HWM + APPEND);
    await closeAll();
    await expectNoLeakedHandles(baseline);
  });
});

/* ------------------------------------------------------------------------------------------- */
/* 3. Slow events() consumer                                                                   */

/** The most consecutive events whose wire form fits in one socket read, plus one straddling it. */
function mostEventsPerRead(events: RealtimeEvent[]): number {
  const sizes = events.map((e) => ('raw' in e && e.raw ? JSON.stringify(e.raw).length : e.type === 'audio.delta' ? e.audio.length : 0) + 10);
  let most = 0;
  let from = 0;
  let total = 0;
  for (let to = 0; to < sizes.length; to++) {
    total += sizes[to]!;
    while (total > SOCKET_READ) total -= sizes[from++]!;
    most = Math.max(most, to - from + 1);
  }
  return most + 1;
}

describe('RealtimeTranslateStream backpressure: a slow events() consumer', () => {
  const MAX_QUEUED = 16;

  it('pauses the socket once maxQueuedEvents is exceeded, keeps the queue bounded, and resumes when pulled', async () => {
    const baseline = countHandles();
    const server = await emulator();
    const stream = open(server.realtimeUrl, { maxQueuedEvents: MAX_QUEUED });
    const closed = closedWith(stream);
    const output: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => output.push(chunk));
    await new Promise((resolve) => stream.once('session.created', resolve));

    const iterator = stream.events();
    const emitted: RealtimeEvent[] = [];
    const pulled: RealtimeEvent[] = [];
    let mostQueued = 0;
    stream.on('event', (event: RealtimeEvent) => {
      emitted.push(event);
      mostQueued = Math.max(mostQueued, emitted.length - pulled.length);
    });
    const input = Buffer.concat([FIXTURE, FIXTURE, FIXTURE, FIXTURE]);
    const expected = new ExpectedTranslation();
    expected.feed(input);
    expected.feed(END_PADDING);
    expected.end();
    const utterances = emulatorUtterances(Buffer.concat([input, END_PADDING]));
    const beforeEnd = new UtteranceSegmenter().push(input).length;
    // transcript, 7 text deltas, text done, the audio pieces, audio done, the response's timing; then ended
    const allEvents = utterances.reduce((n, u) => n + 11 + Math.ceil(u.audio.length / OUTPUT_PIECE), 0) + 1;
    stream.write(input);

    // Nobody pulls: the queue fills past its bound and the socket is paused.
    await untilAtRest(
      () => emitted.length,
      () => stream.stats.paused,
      'the socket to be paused for the events() consumer',
    );
    const queuedAtRest = emitted.length;
    expect(stream.stats.paused).toBe(true);
    expect(queuedAtRest).toBeGreaterThan(MAX_QUEUED);
    expect(queuedAtRest).toBeLessThan(allEvents);

    // Pulling drains the queue and resumes the socket.
    const pulling = (async () => {
      for await (const event of iterator) pulled.push(event);
    })();
    await until(() => !stream.stats.paused && pulled.length >= queuedAtRest, 'the socket to resume after pulling');
    await until(() => stream.stats.responses === beforeEnd, 'the responses before end()');
    stream.end();
    await pulling;
    expect(await closed).toBeNull();

    expect(pulled.length).toBe(emitted.length);
    expect(pulled.every((event, i) => event === emitted[i])).toBe(true);
    expect(pulled.length).toBe(allEvents);
    const pulledAudio = Buffer.concat(pulled.flatMap((e) => (e.type === 'audio.delta' ? [e.audio] : [])));
    expect(pulledAudio.equals(expected.bytes)).toBe(true);
    expect(Buffer.concat(output).equals(expected.bytes)).toBe(true);
    // The queue never held more than its bound plus what one socket read brought after the pause.
    expect(mostQueued).toBeLessThanOrEqual(MAX_QUEUED + mostEventsPerRead(emitted));
    await closeAll();
    await expectNoLeakedHandles(baseline);
  });
});

/* ------------------------------------------------------------------------------------------- */
/* 4. Big chunks                                                                               */

describe('RealtimeTranslateStream backpressure: chunks larger than one append event', () => {
  const MAX_SOCKET_BUFFER = 64 * 1024;
  const APPEND = 9600;
  /** What fs.createReadStream hands over. */
  const CHUNK = 64 * 1024;

  it.each([
    // Appends below APPEND_BYTES_FROM leave as strings.
    ['64 KiB writes in 9600-byte appends (strings)', APPEND, MAX_SOCKET_BUFFER],
    // Appends from APPEND_BYTES_FROM leave as the bytes of their text frame, written into memory
    // that holds another frame once the socket is done with it: with the server stalled, several
    // frames wait in the socket while later ones are written.
    ['64 KiB writes in 64 KiB appends (bytes, frame memory reused)', CHUNK, 8 * CHUNK],
  ])('%s to a stalled server: the send buffer stays within its bound plus one append event, and every byte arrives in order', async (_name, append, bound) => {
    const baseline = countHandles();
    const fake = await fakeServer();
    const stream = open(fake.realtimeUrl, { maxSocketBufferBytes: bound, maxAppendBytes: append });
    const closed = closedWith(stream);
    stream.resume();
    const peer = await fake.acceptSession(stream);
    peer.pauseReading();

    const figures = new Figures(stream);
    const digest = createHash('sha256');
    const producer = new Producer(stream, repeatedSpeech(CHUNK, 16 * 1024 * 1024), figures, (chunk) => digest.update(chunk));
    await untilAtRest(
      () => producer.accepted,
      () => producer.waiting,
      'the writer to be held back by the stalled server',
    );
    figures.sample();
    const held = { buffered: stream.stats.socketBufferedAmount, max: { ...figures.max } };
    peer.resumeReading();
    await producer.done;
    await peer.waitForAudioBytes(producer.offered + END_PADDING.length);
    peer.close(1000);
    expect(await closed).toBeNull();
    digest.update(END_PADDING);

    expect(producer.offered).toBeGreaterThan(16 * 1024 * 1024 - CHUNK);
    expect(peer.audioDigest()).toBe(digest.digest('hex'));
    expect(held.buffered).toBeGreaterThan(bound);
    expect(held.max.socketBufferedAmount).toBeLessThanOrEqual(bound + appendEventBytes(append));
    expect(figures.max.socketBufferedAmount).toBeLessThanOrEqual(bound + appendEventBytes(append));
    await closeAll();
    await expectNoLeakedHandles(baseline);
  });
});

/* ------------------------------------------------------------------------------------------- */
/* 5. Behind after end()                                                                       */

describe('RealtimeTranslateStream backpressure: a consumer still behind after end()', () => {
  const QUIET_MS = 300;

  /** A fake server session with fake setTimeout, past end(): the peer has the input and the padding. */
  /**
   * The fixture's first two utterances (the third starts at sample 150240): the scripted server
   * answers twice, so the stream owes nothing once both answers are in.
   */
  const TWO_UTTERANCES = FIXTURE.subarray(0, 140_000 * 2);

  async function endedSession(options: Partial<RealtimeTranslateOptions>) {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const fake = await fakeServer();
    const stream = open(fake.realtimeUrl, { quietPeriodMs: QUIET_MS, ...options });
    const closed = closedWith(stream);
    const warnings: Array<Error & { code?: string }> = [];
    stream.on('warning', (warning: Error) => warnings.push(warning));
    const emitted: RealtimeEvent[] = [];
    stream.on('event', (event: RealtimeEvent) => emitted.push(event));
    const peer = await fake.acceptSession(stream);
    stream.end(TWO_UTTERANCES);
    await peer.waitForAudioBytes(TWO_UTTERANCES.length + END_PADDING.length);
    return { stream, closed, warnings, emitted, peer };
  }

  /** Lets the session go quiet after the last response, then waits for the close. */
  async function finish(stream: RealtimeTranslateStream, closed: Promise<Error | null>, audioDone: () => number): Promise<Error | null> {
    await until(() => audioDone() === 2 || stream.readableEnded || stream.destroyed, 'the second response');
    vi.advanceTimersByTime(QUIET_MS + 1);
    vi.useRealTimers();
    return closed;
  }

  it('an events() consumer behind for longer than quietPeriodMs: the session waits and every event arrives', async () => {
    const { stream, closed, warnings, emitted, peer } = await endedSession({ maxQueuedEvents: 4 });
    const output: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => output.push(chunk));
    const iterator = stream.events();
    emitted.length = 0; // from here on, what the iterator gets
    const one = tone(400, 1);
    const two = tone(1200, 2);

    // Response one is six events: the fifth (audio done, with the response's timing) goes over maxQueuedEvents.
    peer.sendResponse(one, 'one');
    await until(() => stream.stats.paused && emitted.length === 6, 'the socket to be paused for the events() consumer');
    expect(emitted.at(-1)?.type).toBe('response');
    peer.sendResponse(two, 'two');
    await until(() => peer.bufferedAmount === 0, 'response two to reach the socket');
    // The consumer stays behind for ten quiet periods: silence the stream itself caused.
    vi.advanceTimersByTime(10 * QUIET_MS);

    const pulled: RealtimeEvent[] = [];
    const pulling = (async () => {
      for await (const event of iterator) pulled.push(event);
    })();
    const error = await finish(stream, closed, () => emitted.filter((e) => e.type === 'audio.done').length);
    await pulling;

    expect(error).toBeNull();
    expect(warnings).toEqual([]);
    const types = ['transcript.done', 'text.delta', 'text.done', 'audio.delta', 'audio.done', 'response'];
    expect(pulled.map((e) => e.type)).toEqual([...types, ...types.slice(0, 3), 'audio.delta', 'audio.delta', 'audio.delta', 'audio.done', 'response', 'ended']);
    expect(Buffer.concat(output).equals(Buffer.concat([one, two]))).toBe(true);
  });

  it('a reader behind for longer than responseStallTimeoutMs: the session waits and every byte arrives', async () => {
    const STALL_MS = 5_000;
    const { stream, closed, warnings, emitted, peer } = await endedSession({
      readableHighWaterMark: 16 * 1024,
      responseStallTimeoutMs: STALL_MS,
    });
    const one = tone(2000, 1);
    const two = tone(1200, 2);

    // Response one's first audio piece fills the readable buffer: the socket is paused mid-response.
    peer.sendResponse(one, 'one');
    peer.sendResponse(two, 'two');
    await until(() => stream.stats.paused, 'the socket to be paused for the reader');
    await until(() => peer.bufferedAmount === 0, 'both responses to reach the socket');
    // The reader stays away for three stall timeouts: silence the stream itself caused.
    vi.advanceTimersByTime(3 * STALL_MS);

    const output: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => output.push(chunk));
    const error = await finish(stream, closed, () => emitted.filter((e) => e.type === 'audio.done').length);

    expect(error).toBeNull();
    expect(warnings.map((w) => w.code)).toEqual([]);
    expect(Buffer.concat(output).length).toBe(one.length + two.length);
    expect(Buffer.concat(output).equals(Buffer.concat([one, two]))).toBe(true);
  });
});

/* ------------------------------------------------------------------------------------------- */
/* 6. Many small writes                                                                        */

describe('RealtimeTranslateStream: many small writes in a row', () => {
  it('leave as appends of up to maxAppendBytes, byte for byte; a lone frame still leaves at once', async () => {
    const fake = await fakeServer();
    const stream = open(fake.realtimeUrl);
    stream.resume();
    const peer = await fake.acceptSession(stream);

    const audio = Buffer.alloc(4 * APPEND_PIECE_BYTES);
    for (let i = 0; i < audio.length; i += 2) audio.writeInt16LE(((i * 37) % 20_000) - 10_000, i);
    for (let at = 0; at < audio.length; at += 1024) stream.write(audio.subarray(at, at + 1024));
    await peer.waitForAudioBytes(audio.length);
    expect(peer.audioBytes).toBe(audio.length);
    expect(peer.appendEvents).toBe(4);
    expect(peer.audioDigest()).toBe(createHash('sha256').update(audio).digest('hex'));

    // A microphone's 20 ms frame, written on its own, is not held back for company.
    stream.write(audio.subarray(0, 960));
    await peer.waitForAudioBytes(audio.length + 960);
    expect(peer.appendEvents).toBe(5);
  });
});
