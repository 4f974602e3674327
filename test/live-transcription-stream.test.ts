/**
 * LiveTranscriptionStream against the emulator's live transcription endpoint (16 kHz PCM and a
 * phone call's 8 kHz mu-law, the last results flushed by CloseStream) and against the scripted
 * fake server for what the emulator does not do (keep-alives checked on the wire, a service that
 * never closes, a drop in the middle with the replay checked byte for byte, what a replay could
 * not cover, a give-up, an Error on a reconnect attempt, the keep-alive timer's life).
 */
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { inspect } from 'node:util';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ConfigError, ServerError, ValidationError, type RtTranslateError } from '../lib/errors.js';
import { startEmulator, type RunningEmulator } from '../lib/emulator/server.js';
import { fromServiceFormat } from '../lib/audio/convert.js';
import {
  LiveTranscriptionStream,
  type LiveTranscript,
  type LiveTranscriptionEvent,
  type LiveTranscriptionOptions,
} from '../lib/realtime/live-transcription-stream.js';
import type { ReconnectedInfo, ReconnectingInfo } from '../lib/realtime/realtime-events.js';
import { countHandles, expectNoLeakedHandles } from './helpers/handles.js';
import { startFakeRealtimeServer, type FakePeer, type FakeRealtimeServer } from './helpers/fake-realtime-server.js';
import { loadSpeechFixture } from './helpers/speech.js';
import { runChunked } from './helpers/streams.js';

const KEY = 'live-test-key-0123456789';
const fixture = loadSpeechFixture();

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  vi.useRealTimers();
  while (cleanups.length) await cleanups.pop()!();
});

async function emulator(): Promise<RunningEmulator> {
  const emu = await startEmulator({ apiKeys: [KEY] });
  cleanups.push(() => emu.close());
  return emu;
}

async function fakeServer(): Promise<FakeRealtimeServer> {
  const fake = await startFakeRealtimeServer();
  cleanups.push(() => fake.close());
  return fake;
}

function open(realtimeUrl: string, options: Partial<LiveTranscriptionOptions> = {}): LiveTranscriptionStream {
  const stream = new LiveTranscriptionStream({ apiKey: KEY, realtimeUrl, reconnect: { initialDelayMs: 5, maxDelayMs: 20 }, ...options });
  cleanups.push(() => {
    stream.destroy();
  });
  return stream;
}

/** Pipes `input` through the stream; resolves with the results it yielded, its events and its error. */
async function transcribe(stream: LiveTranscriptionStream, input: Iterable<Buffer>) {
  const results: LiveTranscript[] = [];
  const events: LiveTranscriptionEvent[] = [];
  stream.on('event', (event) => events.push(event));
  let error: RtTranslateError | undefined;
  try {
    await pipeline(
      Readable.from(input),
      stream,
      new Writable({
        objectMode: true,
        write(result: LiveTranscript, _encoding, callback) {
          results.push(result);
          callback();
        },
      }),
    );
  } catch (caught) {
    error = caught as RtTranslateError;
  }
  return { results, events, error };
}

function pieces(pcm: Buffer, size: number): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0; at < pcm.length; at += size) out.push(pcm.subarray(at, at + size));
  return out;
}

const seconds = (sample: number): number => sample / 24_000;

describe('LiveTranscriptionStream against the emulator', () => {
  it('16 kHz PCM: a final result per sentence, word timings on the stream timeline, the last one flushed by CloseStream', async () => {
    const baseline = countHandles();
    const emu = await emulator();
    const pcm16k = await runChunked(fromServiceFormat({ format: 's16le', rate: 16_000, channels: 1 }), fixture.pcm, 65_536);
    // Cut right after the third sentence: only CloseStream can end it.
    const input = pcm16k.subarray(0, Math.round(seconds(fixture.utterances[2]!.endSample + 2400) * 16_000) * 2);
    const stream = open(emu.realtimeUrl, { sampleRate: 16_000 });
    const { results, events, error } = await transcribe(stream, pieces(input, 3200));
    expect(error).toBeUndefined();
    expect(results.map((r) => r.isFinal)).toEqual([true, true, true]);
    results.forEach((result, i) => {
      const u = fixture.utterances[i]!;
      expect(result.start).toBeCloseTo(seconds(u.startSample), 1);
      expect(result.end).toBeCloseTo(seconds(u.endSample), 1);
      expect(result.words.length).toBeGreaterThan(0);
      expect(result.words[0]!.start).toBeCloseTo(result.start, 2);
      expect(result.words.at(-1)!.end).toBeCloseTo(result.end, 2);
    });
    expect(events.filter((e) => e.type === 'interim')).toHaveLength(3);
    expect(events[0]).toMatchObject({ type: 'ready' });
    expect(events.at(-1)).toMatchObject({ type: 'ended', complete: true });
    expect(stream.stats).toMatchObject({ finals: 3, interims: 3, reconnects: 0, inputBytes: input.length, bytesSent: input.length });
    await emu.close();
    await expectNoLeakedHandles(baseline);
  });

  it("a phone call's 8 kHz mu-law straight in; results: 'all' yields the interim results too", async () => {
    const emu = await emulator();
    const mulaw = await runChunked(fromServiceFormat({ format: 'mulaw', rate: 8000, channels: 1 }), fixture.pcm, 65_536);
    const stream = open(emu.realtimeUrl, { encoding: 'mulaw', results: 'all' });
    const { results, error } = await transcribe(stream, pieces(mulaw, 160));
    expect(error).toBeUndefined();
    expect(results.map((r) => r.isFinal)).toEqual([false, true, false, true, false, true]);
    expect(results.filter((r) => r.isFinal).map((r) => Math.round(r.start * 10))).toEqual(
      fixture.utterances.map((u) => Math.round(seconds(u.startSample) * 10)),
    );
  });

  it('an events()-only caller gets every result, and the stream ends by itself', async () => {
    const emu = await emulator();
    const stream = open(emu.realtimeUrl);
    const finals: string[] = [];
    const iterating = (async () => {
      for await (const event of stream.events()) if (event.type === 'final') finals.push(event.result.transcript);
    })();
    const closed = new Promise<Error | null>((resolve) => stream.once('close', () => resolve(stream.errored)));
    const pcm16k = await runChunked(fromServiceFormat({ format: 's16le', rate: 16_000, channels: 1 }), fixture.pcm, 65_536);
    stream.end(pcm16k);
    await iterating;
    expect(await closed).toBeNull();
    expect(finals).toHaveLength(3);
  });
});

describe('LiveTranscriptionStream against a scripted service', () => {
  const READY = { type: 'Ready', request_id: 'r-1' };
  const final = (start: number, duration: number, transcript: string) => ({
    type: 'Results',
    is_final: true,
    start,
    duration,
    channel: { alternatives: [{ transcript, confidence: 0.9, words: [{ word: transcript, start, end: start + duration, confidence: 0.9 }] }] },
  });

  async function session(
    options: Partial<LiveTranscriptionOptions> = {},
  ): Promise<{ stream: LiveTranscriptionStream; peer: FakePeer; fake: FakeRealtimeServer }> {
    const fake = await fakeServer();
    const stream = open(fake.realtimeUrl, options);
    stream.resume();
    const peer = await fake.nextPeer();
    const ready = new Promise((resolve) => stream.once('ready', resolve));
    peer.send(READY);
    await ready;
    return { stream, peer, fake };
  }

  it('sends KeepAlive while the caller is silent, and not while audio flows', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const { stream, peer } = await session({ keepAliveMs: 1000 });
    stream.write(Buffer.alloc(3200));
    await peer.waitForBinaryBytes(3200);
    vi.advanceTimersByTime(1000); // audio in this period: no KeepAlive
    vi.advanceTimersByTime(1000); // silent: KeepAlive
    const keepAlive = await peer.waitForEvent('KeepAlive');
    expect(keepAlive).toEqual({ type: 'KeepAlive' });
    expect(peer.events.filter((e) => e.type === 'KeepAlive')).toHaveLength(1);
    expect(stream.stats.keepAlives).toBe(1);
  });

  it('end() sends CloseStream after the last byte; a service that then neither answers nor closes is given up, incomplete', async () => {
    const { stream, peer } = await session({ finishTimeoutMs: 200 });
    const warnings: RtTranslateError[] = [];
    stream.on('warning', (w) => warnings.push(w));
    const closed = new Promise((resolve) => stream.once('close', resolve));
    stream.end(Buffer.alloc(6400));
    await peer.waitForEvent('CloseStream');
    expect(Buffer.concat(peer.binary).length).toBe(6400);
    await closed;
    expect(warnings.map((w) => w.code)).toEqual(['RTT_TIMEOUT']);
    expect(stream.stats.ending).toMatchObject({ complete: false, reason: 'response-stalled' });
  });

  it('a last result that arrived while the process was stalled past finishTimeoutMs is read, not given up on', async () => {
    const { stream, peer } = await session({ finishTimeoutMs: 300 });
    const warnings: RtTranslateError[] = [];
    stream.on('warning', (w) => warnings.push(w));
    const results: LiveTranscript[] = [];
    stream.on('final', (r) => results.push(r));
    const closed = new Promise((resolve) => stream.once('close', resolve));
    stream.end(Buffer.alloc(6400));
    await peer.waitForEvent('CloseStream');
    // The service answers 100 ms after CloseStream, from work it defers by a turn of the event
    // loop, then closes; this process is stalled for 600 ms first, past finishTimeoutMs.
    setTimeout(
      () =>
        setImmediate(() => {
          peer.send(final(0, 0.2, 'last words'));
          peer.close(1000);
        }),
      100,
    );
    const stalledUntil = Date.now() + 600;
    while (Date.now() < stalledUntil) {
      // A process busy elsewhere.
    }
    await closed;
    expect(results.map((r) => r.transcript)).toEqual(['last words']);
    expect(warnings).toEqual([]);
    expect(stream.stats.ending).toMatchObject({ complete: true });
  });

  it('a drop mid-session resumes from the end of the last final result, on one timeline', async () => {
    const { stream, peer, fake } = await session();
    const results: LiveTranscript[] = [];
    stream.on('final', (r) => results.push(r));
    // Two seconds of 16 kHz PCM whose bytes say where they are.
    const audio = Buffer.alloc(64_000);
    for (let i = 0; i < audio.length; i += 2) audio.writeUInt16LE((i / 2) & 0xffff, i);
    stream.write(audio);
    await peer.waitForBinaryBytes(audio.length);
    peer.send(final(0.2, 0.8, 'first'));
    await new Promise((resolve) => stream.once('final', resolve));
    peer.terminate();
    const second = await fake.nextPeer();
    const ready = new Promise((resolve) => stream.once('reconnected', resolve));
    second.send(READY);
    await ready;
    // Sent again: everything after 1.0 s, the end of the final result.
    const replayed = await second.waitForBinaryBytes(audio.length - 32_000);
    expect(replayed.equals(audio.subarray(32_000))).toBe(true);
    // The new session's 0.5 s is the stream's 1.5 s.
    second.send(final(0.5, 0.25, 'second'));
    await new Promise((resolve) => stream.once('final', resolve));
    expect(results.map((r) => [r.transcript, r.start, r.end])).toEqual([
      ['first', 0.2, 1],
      ['second', 1.5, 1.75],
    ]);
    expect(results[1]!.words[0]).toMatchObject({ start: 1.5, end: 1.75 });
    expect(stream.stats).toMatchObject({ reconnects: 1, bytesReplayed: 32_000 });
  });

  it('after a drop, audio no longer kept for a replay (past reconnect.maxReplayMs) is reported as not replayed', async () => {
    const { stream, peer, fake } = await session({ reconnect: { initialDelayMs: 5, maxDelayMs: 20, maxReplayMs: 500 } });
    // Two seconds of 16 kHz PCM, nothing answered: only the last half second is kept.
    const audio = Buffer.alloc(64_000);
    for (let i = 0; i < audio.length; i += 2) audio.writeUInt16LE((i / 2) & 0xffff, i);
    stream.write(audio);
    await peer.waitForBinaryBytes(audio.length);
    const reconnected = new Promise<ReconnectedInfo>((resolve) => stream.once('reconnected', resolve));
    peer.terminate();
    const second = await fake.nextPeer();
    second.send(READY);
    expect(await reconnected).toMatchObject({ sessionId: 'r-1', attempt: 1, replayedMs: 500, notReplayedMs: 1500 });
    const replayed = await second.waitForBinaryBytes(16_000);
    expect(replayed.equals(audio.subarray(48_000))).toBe(true);
    expect(stream.stats).toMatchObject({ reconnects: 1, bytesReplayed: 16_000 });
  });

  it('a lost session that reconnecting cannot bring back ends incomplete (gave-up): ended, then the error', async () => {
    const { stream, peer, fake } = await session({ reconnect: { maxAttempts: 1, initialDelayMs: 5, maxDelayMs: 20 } });
    const order: string[] = [];
    stream.on('ended', (info) => order.push(`ended ${info.reason}`));
    const failed = new Promise<RtTranslateError>((resolve) =>
      stream.once('error', (error) => {
        order.push('error');
        resolve(error as RtTranslateError);
      }),
    );
    stream.write(Buffer.alloc(32_000)); // one second, never answered
    await peer.waitForBinaryBytes(32_000);
    peer.terminate();
    (await fake.nextPeer()).terminate(); // the one attempt never becomes ready
    const error = await failed;
    expect(error.message).toMatch(/^Gave up reconnecting after 1 attempt in \d+ s \(reconnect\.maxAttempts\)/);
    expect(order).toEqual(['ended gave-up', 'error']);
    expect(stream.stats.ending).toEqual({ complete: false, reason: 'gave-up', unansweredSpeechMs: 1000 });
  });

  it('an Error on a reconnect attempt that a new session may cure is not fatal: the close after it is retried', async () => {
    const { stream, peer, fake } = await session();
    const reconnecting: ReconnectingInfo[] = [];
    stream.on('reconnecting', (info) => reconnecting.push(info));
    const failed = new Promise<never>((_resolve, reject) => stream.once('error', reject));
    peer.terminate();
    const second = await fake.nextPeer();
    second.send({ type: 'Error', code: '429', message: 'too many sessions, try again' });
    second.close(1013);
    const third = await Promise.race([fake.nextPeer(), failed]);
    const reconnected = new Promise<ReconnectedInfo>((resolve) => stream.once('reconnected', resolve));
    third.send(READY);
    expect(await reconnected).toMatchObject({ attempt: 2 });
    expect(reconnecting.map((r) => [r.attempt, r.cause.code])).toEqual([
      [1, 'RTT_CONNECTION'],
      [2, 'RTT_RATE_LIMIT'],
    ]);
    expect(stream.destroyed).toBe(false);
  });

  it('the keep-alive timer belongs to the ready session: none runs while reconnecting, none is left after the end', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const { stream, peer, fake } = await session({ keepAliveMs: 1000 });
    vi.advanceTimersByTime(1000);
    await peer.waitForEvent('KeepAlive');
    const reconnecting = new Promise((resolve) => stream.once('reconnecting', resolve));
    peer.terminate();
    await reconnecting;
    // No session is up: no keep-alive interval (and no connection's liveness) runs.
    expect(vi.getTimerCount()).toBe(0);
    const second = await fake.nextPeer();
    const reconnected = new Promise((resolve) => stream.once('reconnected', resolve));
    second.send(READY);
    await reconnected;
    vi.advanceTimersByTime(1000);
    await second.waitForEvent('KeepAlive');
    expect(stream.stats.keepAlives).toBe(2);
    const closed = new Promise((resolve) => stream.once('close', resolve));
    stream.end();
    await second.waitForEvent('CloseStream');
    second.close(1000);
    await closed;
    expect(stream.stats.ending).toMatchObject({ complete: true });
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a reader that stops reading pauses the socket; every result comes once it reads again', async () => {
    const fake = await fakeServer();
    const stream = open(fake.realtimeUrl, { readableHighWaterMark: 2 });
    const peer = await fake.nextPeer();
    peer.send(READY);
    await new Promise((resolve) => stream.once('ready', resolve));
    // More results than one read of the socket can hold (about 300 bytes each, 64 KiB a read):
    // however they are batched, the stream has to pause before taking them all.
    const sent = 1000;
    let finals = 0;
    const paused = new Promise<void>((resolve) => {
      stream.on('final', () => {
        finals += 1;
        if (stream.stats.paused) resolve();
      });
    });
    for (let i = 0; i < sent; i++) peer.send(final(i, 0.5, `result ${i}`));
    await paused;
    // Nothing reads: the stream stopped taking the service's messages well before all of them.
    expect(finals).toBeLessThan(sent);
    const results: string[] = [];
    for await (const result of stream as AsyncIterable<LiveTranscript>) {
      results.push(result.transcript);
      if (results.length === sent) break;
    }
    expect(results).toEqual(Array.from({ length: sent }, (_, i) => `result ${i}`));
    expect(stream.stats.paused).toBe(false);
  });

  it('a service that stops reading holds the writer (its callback waits), and abort then settles it', async () => {
    const baseline = countHandles();
    const fake = await fakeServer();
    const controller = new AbortController();
    const stream = open(fake.realtimeUrl, { maxSocketBufferBytes: 64 * 1024, signal: controller.signal });
    stream.resume();
    const peer = await fake.nextPeer();
    peer.send(READY);
    await new Promise((resolve) => stream.once('ready', resolve));
    peer.pauseReading();
    const failed = new Promise<Error>((resolve) => stream.once('error', resolve));
    // Write until a callback is held: the kernel's buffers fill, then the socket's, then ours.
    const chunk = Buffer.alloc(64 * 1024);
    let settled = 0;
    let held: Promise<Error | null | undefined> | undefined;
    for (let i = 0; i < 2_000 && held === undefined; i++) {
      let done = false;
      const callback = new Promise<Error | null | undefined>((resolve) =>
        stream.write(chunk, (error) => {
          done = true;
          settled += 1;
          resolve(error);
        }),
      );
      await new Promise((resolve) => setImmediate(resolve));
      if (!done) held = callback;
    }
    expect(held).toBeDefined();
    expect(settled).toBeGreaterThan(0);
    controller.abort();
    expect((await held)?.name).toBe('AbortError');
    expect((await failed).name).toBe('AbortError');
    expect(stream.destroyed).toBe(true);
    await fake.close();
    await expectNoLeakedHandles(baseline);
  });

  it('destroy() in the middle of a session closes the socket and leaves no handle behind', async () => {
    const baseline = countHandles();
    const fake = await fakeServer();
    const stream = open(fake.realtimeUrl);
    stream.resume();
    const peer = await fake.nextPeer();
    peer.send(READY);
    await new Promise((resolve) => stream.once('ready', resolve));
    stream.write(Buffer.alloc(3200));
    await peer.waitForBinaryBytes(3200);
    const closed = new Promise((resolve) => stream.once('close', resolve));
    stream.destroy();
    await closed;
    await fake.allClosed();
    await fake.close();
    await expectNoLeakedHandles(baseline);
  });

  it('an Error before Ready fails the stream with the service message; the key never shows', async () => {
    const fake = await fakeServer();
    const stream = open(fake.realtimeUrl);
    const failed = new Promise<RtTranslateError>((resolve) => stream.once('error', resolve));
    const peer = await fake.nextPeer();
    peer.send({ type: 'Error', code: 'INVALID_PARAMETERS', message: `bad sample rate for key ${KEY}` });
    const error = await failed;
    expect(error).toBeInstanceOf(ServerError);
    expect(error.message).toContain('bad sample rate');
    expect(`${error.message} ${error.serverMessage} ${inspect(stream)}`).not.toContain(KEY);
  });
});

describe('LiveTranscriptionStream options', () => {
  it.each([
    ['encoding', { encoding: 'opus' as never }],
    ['sampleRate', { sampleRate: 4000 }],
    ['channels', { channels: 0 }],
    ['language', { language: '!!' }],
    ['results', { results: 'some' as never }],
    ['keepAliveMs', { keepAliveMs: 1 }],
  ])('a bad %s is a ValidationError naming it, before any connection', (field, options) => {
    expect(() => new LiveTranscriptionStream({ apiKey: KEY, realtimeUrl: 'ws://127.0.0.1:9', ...options })).toThrow(
      expect.objectContaining({ code: 'RTT_VALIDATION', field }),
    );
  });

  it('no key is a ConfigError; plain ws:// off loopback is refused', () => {
    const env = process.env.RT_TRANSLATE_API_KEY;
    delete process.env.RT_TRANSLATE_API_KEY;
    try {
      expect(() => new LiveTranscriptionStream({ realtimeUrl: 'ws://127.0.0.1:9' })).toThrow(ConfigError);
    } finally {
      if (env !== undefined) process.env.RT_TRANSLATE_API_KEY = env;
    }
    expect(() => new LiveTranscriptionStream({ apiKey: KEY, realtimeUrl: 'ws://example.com' })).toThrow(expect.objectContaining({ field: 'realtimeUrl' }));
  });

  it('a key passed as the language is not quoted', () => {
    const error = (() => {
      try {
        new LiveTranscriptionStream({ apiKey: KEY, realtimeUrl: 'ws://127.0.0.1:9', language: KEY });
      } catch (caught) {
        return caught as ValidationError;
      }
      throw new Error('expected a failure');
    })();
    expect(error.message).not.toContain(KEY);
  });
});
