/**
 * The Twilio bridge against callers that are not Twilio, played over real sockets on loopback:
 * the example's bridge server (`examples/twilio-bridge.ts`) in front of the emulator, and `ws`
 * clients that connect and never start, start and go silent, stop reading, open more calls than
 * the caps allow, send oversized or too many frames, lie about timestamps, or flood malformed
 * messages. Each test asserts the figures the abuse was measured by: the sessions open on the
 * service (`emulator.realtimeSessions()`), the audio it received (`audioBytes`), the lines the
 * server logged, and when and how each connection was closed.
 *
 * Long waits (the 10 s bounds) run on fake timers (`setTimeout`, `setInterval`, `performance`,
 * `Date`); the sockets stay real, so between steps the tests wait for what the sockets deliver.
 */
import { EventEmitter } from 'node:events';
import { setImmediate as turn } from 'node:timers/promises';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { WebSocket } from 'ws';
import { createResampleProcessor } from '../lib/audio/resampler.js';
import { ProtocolError, TimeoutError } from '../lib/errors.js';
import { startEmulator, type RunningEmulator } from '../lib/emulator/server.js';
import type { TwilioMediaBridgeOptions } from '../lib/integrations/twilio.js';
import { startTwilioBridgeServer, type RunningTwilioBridgeServer, type TwilioBridgeServerOptions, type TwilioCall } from '../examples/twilio-bridge.js';
import { FakeTwilio, STREAM_SID } from './helpers/fake-twilio.js';
import { waitFor } from './helpers/wait-for.js';

const KEY = 'twilio-abuse-test-key-0123456789';
/** 20 ms of mu-law silence (the emulator hears no speech in it, so it answers nothing). */
const SILENT_FRAME = Buffer.alloc(160, 0xff);
/** Service-format bytes (PCM16 24 kHz) per ms. */
const SERVICE_BYTES_PER_MS = 48;
/** The translator's end padding, added when a call ends properly. */
const END_PADDING_BYTES = 800 * SERVICE_BYTES_PER_MS;

const closers: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  vi.useRealTimers();
  for (const close of closers.splice(0).reverse()) await close();
});

/** Fake clocks for the long bounds; sockets, `setImmediate` and `nextTick` stay real. */
function fakeClock(): void {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'performance', 'Date'] });
}

/**
 * Resolves once `predicate` holds, checked after each turn of the event loop (what the sockets
 * deliver arrives between turns); fails after 10 s of real time with what it waited for.
 */
async function until(predicate: () => boolean, what: string): Promise<void> {
  const deadline = process.hrtime.bigint() + 10_000_000_000n;
  while (!predicate()) {
    if (process.hrtime.bigint() > deadline) throw new Error(`Still waiting for ${what}.`);
    await turn();
  }
}

/** The service-format bytes the bridge sends for `frames` 20 ms frames, in whole appends of 100 ms. */
function appendedBytes(frames: Buffer[]): number {
  const pcm = createResampleProcessor(8000, 24_000, 1, { decode: 'mulaw' }).process(Buffer.concat(frames));
  return Math.floor(pcm.length / 4800) * 4800;
}

interface Setup {
  emulator: RunningEmulator;
  server: RunningTwilioBridgeServer;
  calls: TwilioCall[];
  /** Every line the server logged, in order. */
  lines: string[];
  /** Emits `line` for each line logged. */
  logged: EventEmitter;
  /** Bytes of audio received by each open session of the service. */
  serviceAudio(): number[];
  connect(localAddress?: string): Promise<Caller>;
}

/** A `ws` client as Twilio's side, with its close code and reason. */
interface Caller extends FakeTwilio {
  ended: Promise<{ code: number; reason: string }>;
}

async function setup(bridge: Partial<TwilioMediaBridgeOptions> = {}, server: Partial<TwilioBridgeServerOptions> = {}): Promise<Setup> {
  const emulator = await startEmulator({ port: 0, apiKeys: [KEY], latencyMs: 0 });
  closers.push(() => emulator.close());
  const calls: TwilioCall[] = [];
  const lines: string[] = [];
  const logged = new EventEmitter();
  const running = await startTwilioBridgeServer({
    bridge: { from: 'en-us', to: 'es-es', apiKey: KEY, realtimeUrl: emulator.realtimeUrl, quietPeriodMs: 200, ...bridge },
    onCall: (call) => {
      call.done.catch(() => undefined);
      calls.push(call);
    },
    log: (_level, line) => {
      lines.push(line);
      logged.emit('line', line);
    },
    ...server,
  });
  closers.push(() => running.close());
  return {
    emulator,
    server: running,
    calls,
    lines,
    logged,
    serviceAudio: () => emulator.realtimeSessions().map((s) => s.audioBytes),
    async connect() {
      const client = (await FakeTwilio.connect(running.url)) as Caller;
      client.ended = new Promise((resolve) => client.ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
      closers.push(async () => client.ws.terminate());
      return client;
    },
  };
}

/** Waits until `count` lines have been logged. */
function linesLogged(s: Setup, count: number): Promise<true> {
  return waitFor(() => s.lines.length >= count, { onEvent: [s.logged, 'line'] });
}

/** A `media` message of the inbound track. */
function media(frame: Buffer, timestamp?: number): unknown {
  return {
    event: 'media',
    streamSid: STREAM_SID,
    media: { track: 'inbound', payload: frame.toString('base64'), ...(timestamp === undefined ? {} : { timestamp: String(timestamp) }) },
  };
}

/* ------------------------------------------------------------------------------------------- */

describe('a caller who does nothing holds nothing', () => {
  it('20 connections that never send "start": no session ever opened; all closed at 10 s (1008), said in two lines', async () => {
    fakeClock();
    const s = await setup({}, { maxCallsPerAddress: 20 });
    const callers = [];
    for (let i = 0; i < 20; i++) {
      const caller = await s.connect();
      caller.send({ event: 'connected', protocol: 'Call', version: '1.0.0' });
      callers.push(caller);
    }
    await until(() => s.calls.length === 20, '20 calls');
    expect(s.emulator.realtimeSessions()).toEqual([]);

    await vi.advanceTimersByTimeAsync(9_999);
    expect(s.calls.every((call) => !call.bridge.destroyed)).toBe(true);
    expect(s.emulator.realtimeSessions()).toEqual([]);
    expect(s.lines).toEqual([]);

    await vi.advanceTimersByTimeAsync(1);
    const ends = await Promise.all(callers.map((caller) => caller.ended));
    expect(ends).toEqual(Array.from({ length: 20 }, () => ({ code: 1008, reason: 'no start within 10000 ms' })));
    // The first is said at once; the other 19 come within 10 s of it, so they are counted, and
    // said when the next such line is due (here, when the server closes).
    await linesLogged(s, 1);
    expect(s.lines).toEqual(['1 connection(s) closed without a call since the last such line, the last from 127.0.0.1 (no start within 10000 ms)']);
    for (const { bridge, done } of s.calls) {
      await expect(done).rejects.toBeInstanceOf(TimeoutError);
      // The translator was made, never connected.
      expect(bridge.translator.sessionId).toBeUndefined();
      expect(bridge.translator.stats.bytesSent).toBe(0);
      expect(bridge.translator.destroyed).toBe(true);
    }
    expect(s.emulator.realtimeSessions()).toEqual([]);
    await s.server.close();
    expect(s.lines).toEqual([
      '1 connection(s) closed without a call since the last such line, the last from 127.0.0.1 (no start within 10000 ms)',
      '19 connection(s) closed without a call since the last such line',
    ]);
  });

  it('"start" and then nothing: its one session is held 10 s, then the call is closed (1008) and the session freed', async () => {
    fakeClock();
    const s = await setup();
    const caller = await s.connect();
    caller.open();
    await until(() => s.calls.length === 1, 'the call');
    const { bridge, done } = s.calls[0]!;
    await until(() => bridge.translator.sessionId !== undefined, 'the session');
    expect(s.emulator.realtimeSessions()).toHaveLength(1);

    await vi.advanceTimersByTimeAsync(9_999);
    expect(bridge.destroyed).toBe(false);
    expect(s.emulator.realtimeSessions()).toHaveLength(1);

    await vi.advanceTimersByTimeAsync(1);
    expect(await caller.ended).toEqual({ code: 1008, reason: 'no media for 10000 ms' });
    await expect(done).rejects.toThrow('No media from the call for 10000 ms (mediaTimeoutMs); the call was closed.');
    await until(() => s.emulator.realtimeSessions().length === 0, 'the session to close');
    await linesLogged(s, 2);
    expect(s.lines).toEqual([
      `call "CA00000000000000000000000000000001": stream "${STREAM_SID}" started`,
      'call "CA00000000000000000000000000000001": closed (no media for 10000 ms) after 10.0 s; 0.0 s of audio sent, 0 frames received, 0 refused, 0 warnings',
    ]);
  });

  it('a caller that stops reading is closed at the second ping (10 s) and its session freed; one that reads stays', async () => {
    fakeClock();
    const s = await setup();
    const reader = await s.connect();
    const deaf = await s.connect();
    reader.open();
    deaf.open();
    await until(() => s.calls.length === 2 && s.calls.every((c) => c.bridge.translator.sessionId !== undefined), 'two sessions');
    const [readerCall, deafCall] = s.calls as [TwilioCall, TwilioCall];
    // The deaf caller reads nothing more (its kernel keeps our pings), but goes on sending.
    (deaf.ws as unknown as { _socket: { pause(): void } })._socket.pause();
    let sent = 0;
    for (let t = 0; t < 10_000; t += 100) {
      for (const caller of deafCall.bridge.destroyed ? [reader] : [reader, deaf]) {
        for (let k = sent; k < sent + 5; k++) caller.send(media(SILENT_FRAME, k * 20));
      }
      sent += 5;
      await until(
        () => readerCall.bridge.stats.mediaMessages === sent && (deafCall.bridge.destroyed || deafCall.bridge.stats.mediaMessages === sent),
        `${sent} frames`,
      );
      expect(deafCall.bridge.destroyed).toBe(false); // still open at 9.9 s
      await vi.advanceTimersByTimeAsync(100);
    }
    await expect(deafCall.done).rejects.toThrow('The caller did not answer a ping within 5000 ms (pingIntervalMs): it stopped reading; the call was closed.');
    await until(() => s.emulator.realtimeSessions().length === 1, 'the deaf call session to close');
    expect(readerCall.bridge.destroyed).toBe(false);
    expect(deafCall.bridge.stats.mediaMessages).toBe(500);
    await linesLogged(s, 3);
    expect(s.lines.at(-1)).toBe(
      'call "CA00000000000000000000000000000001": failed (The caller did not answer a ping within 5000 ms (pingIntervalMs): it stopped reading; ' +
        'the call was closed.) after 10.0 s; 10.0 s of audio sent, 500 frames received, 0 refused, 0 warnings',
    );
  });
});

describe('caps on concurrent calls', () => {
  /** Connects from `localAddress`; resolves with the open socket or the HTTP status that refused it. */
  function dial(url: string, localAddress: string): Promise<WebSocket | number> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, { localAddress });
      closers.push(async () => ws.terminate());
      ws.once('open', () => resolve(ws));
      ws.once('unexpected-response', (_req, res) => {
        resolve(res.statusCode!);
        res.resume();
      });
      ws.once('error', reject);
    });
  }

  it('by default 10 from one address (the 11th gets 429) and 50 in all (the 51st gets 503); a slot freed is taken again', async () => {
    const s = await setup();
    const url = s.server.url;
    const first: WebSocket[] = [];
    for (let i = 0; i < 10; i++) first.push((await dial(url, '127.0.0.1')) as WebSocket);
    expect(first.every((ws) => ws instanceof WebSocket)).toBe(true);
    expect(await dial(url, '127.0.0.1')).toBe(429);
    for (const address of ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5']) {
      for (let i = 0; i < 10; i++) expect(await dial(url, address)).toBeInstanceOf(WebSocket);
    }
    expect(s.calls).toHaveLength(50);
    expect(await dial(url, '127.0.0.6')).toBe(503);
    expect(s.calls).toHaveLength(50);
    // Nobody started: no session for any of them.
    expect(s.emulator.realtimeSessions()).toEqual([]);
    // Refusals: one line for the first, the second within 10 s only counted.
    expect(s.lines).toEqual(['refused 1 connection(s) since the last such line, the last from 127.0.0.1 (maxCallsPerAddress reached)']);

    // One hangs up: once the server has seen it go, its address may call again.
    first[0]!.close();
    await s.calls[0]!.done;
    await linesLogged(s, 2);
    const again = await dial(url, '127.0.0.1');
    expect(again).toBeInstanceOf(WebSocket);
    expect(await dial(url, '127.0.0.1')).toBe(503); // 50 again
    await s.server.close();
    expect(s.lines.filter((line) => line.startsWith('refused'))).toEqual([
      'refused 1 connection(s) since the last such line, the last from 127.0.0.1 (maxCallsPerAddress reached)',
      'refused 2 connection(s) since the last such line',
    ]);
  });

  it('a call that hangs up keeps its slot until its session has ended: hanging up and calling again cannot pile up sessions', async () => {
    // The session goes on after the hang-up: it waits a quiet period (here 2 s) for the last answer.
    const s = await setup({ quietPeriodMs: 2000 }, { maxCallsPerAddress: 1 });
    const caller = await s.connect();
    caller.open();
    await until(() => s.calls[0]?.bridge.translator.sessionId !== undefined, 'the session');
    caller.media(0, 100); // 2 s of the caller's speech
    caller.ws.close();
    await until(() => s.calls[0]!.bridge.writableEnded, 'the hang-up');
    expect(s.emulator.realtimeSessions()).toHaveLength(1);
    expect(await dial(s.server.url, '127.0.0.1')).toBe(429);
    await s.calls[0]!.done;
    expect(s.emulator.realtimeSessions()).toHaveLength(0);
    expect(await dial(s.server.url, '127.0.0.1')).toBeInstanceOf(WebSocket);
  });

  it('maxCalls and maxCallsPerAddress as given', async () => {
    const s = await setup({}, { maxCalls: 3, maxCallsPerAddress: 2 });
    const url = s.server.url;
    expect(await dial(url, '127.0.0.1')).toBeInstanceOf(WebSocket);
    expect(await dial(url, '127.0.0.1')).toBeInstanceOf(WebSocket);
    expect(await dial(url, '127.0.0.1')).toBe(429);
    expect(await dial(url, '127.0.0.2')).toBeInstanceOf(WebSocket);
    expect(await dial(url, '127.0.0.3')).toBe(503);
    expect(s.calls).toHaveLength(3);
  });
});

describe('what a caller sends cannot forge the log', () => {
  it('a call id with a line break is quoted in every line about the call', async () => {
    const s = await setup({ bargeIn: false });
    const caller = await s.connect();
    caller.send({ event: 'connected', protocol: 'Call', version: '1.0.0' });
    const forged = 'CA1\nrefused 0 connection(s) forged line';
    caller.send({
      event: 'start',
      streamSid: STREAM_SID,
      start: { streamSid: STREAM_SID, callSid: forged, tracks: ['inbound'], mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 } },
    });
    await until(() => s.calls[0]?.bridge.translator.sessionId !== undefined, 'the session');
    caller.ws.close();
    await s.calls[0]!.done;
    await linesLogged(s, 2);
    expect(s.lines.join('\n').split('\n')).toHaveLength(s.lines.length);
    expect(s.lines.every((line) => line.startsWith('call "CA1\\nrefused 0 connection(s) forged line": '))).toBe(true);
  });
});

describe('the audio sent is what a call can be', () => {
  it('200 payloads of 48 KB: all refused, one warning, no audio at the service; the call goes on', async () => {
    const s = await setup({ bargeIn: false });
    const caller = await s.connect();
    caller.open();
    await until(() => s.calls[0]?.bridge.translator.sessionId !== undefined, 'the session');
    const { bridge } = s.calls[0]!;
    const big = Buffer.alloc(48_000, 0x7f);
    for (let i = 0; i < 200; i++) caller.send(media(big));
    await until(() => bridge.stats.refusedFrames === 200, '200 refusals');
    expect(s.serviceAudio()).toEqual([0]);
    expect(bridge.stats.receivedMs).toBe(0);
    // Then 10 frames of a real call's size: those are sent.
    const frames = Array.from({ length: 10 }, () => SILENT_FRAME);
    frames.forEach((frame, k) => caller.send(media(frame, k * 20)));
    const expected = appendedBytes(frames);
    expect(expected).toBeGreaterThan(0);
    await until(() => s.serviceAudio()[0] === expected, `${expected} bytes at the service`);
    caller.stop();
    expect((await caller.ended).code).toBe(1000);
    await s.calls[0]!.done;
    expect(bridge.translator.stats.bytesSent).toBe(10 * 960 + END_PADDING_BYTES);
    expect(bridge.stats).toMatchObject({ refusedFrames: 200, mediaMessages: 10, receivedMs: 200, warnings: 1, suppressedWarnings: { 'media-size': 199 } });
    await linesLogged(s, 3);
    expect(s.lines).toEqual([
      `call "CA00000000000000000000000000000001": stream "${STREAM_SID}" started`,
      '  warning: A "media" payload of 48000 bytes was refused: Twilio sends 160 bytes (20 ms of 8 kHz mu-law) at most. Further ones are refused without a warning (stats.refusedFrames).',
      expect.stringMatching(
        /^call "CA0+1": ended after \d+\.\d s; 0\.2 s of audio sent, 10 frames received, 200 refused, 1 warnings, 199 more not shown \(199 media-size\)$/,
      ),
    ]);
  });

  it('6 s of frames sent at once: the service gets at most the elapsed time plus 1 s, then the rest as the clock allows', async () => {
    fakeClock();
    const s = await setup({ bargeIn: false });
    const caller = await s.connect();
    caller.open();
    await until(() => s.calls[0]?.bridge.translator.sessionId !== undefined, 'the session');
    const { bridge } = s.calls[0]!;
    const frames = Array.from({ length: 300 }, () => SILENT_FRAME);
    frames.forEach((frame, k) => caller.send(media(frame, k * 20)));
    // The clock has not moved since `start`: 1 s goes (50 frames), the 51st waits.
    const step = async (elapsedMs: number, fed: number) => {
      await until(
        () => bridge.stats.mediaMessages === Math.min(fed + 1, 300) && s.serviceAudio()[0] === appendedBytes(frames.slice(0, fed)),
        `${fed} frames fed`,
      );
      expect(s.serviceAudio()[0]).toBeLessThanOrEqual((elapsedMs + 1000) * SERVICE_BYTES_PER_MS);
    };
    await step(0, 50);
    expect(s.serviceAudio()).toEqual([48_000 - 4800]); // the resampler keeps a few samples back: 900 ms in whole appends
    await vi.advanceTimersByTimeAsync(2000);
    await step(2000, 150);
    expect(s.serviceAudio()).toEqual([144_000 - 4800]);
    await vi.advanceTimersByTimeAsync(4000);
    await step(6000, 300);
    expect(bridge.stats.receivedMs).toBe(6000);
    expect(bridge.stats.insertedSilenceMs).toBe(0);
  });

  it('frames stamped 5 s apart: closed at the third (1008); 1.04 s of audio sent, not 300 s', async () => {
    const s = await setup({ bargeIn: false });
    const caller = await s.connect();
    caller.open();
    for (let k = 0; k < 300; k++) caller.send(media(SILENT_FRAME, k * 5000));
    expect(await caller.ended).toEqual({ code: 1008, reason: "media timestamps ahead of the call's clock" });
    const { bridge, done } = s.calls[0]!;
    const error = await done.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProtocolError);
    expect((error as Error).message).toMatch(
      /^A "media" timestamp of 10000 ms came \d+ ms after "start": \d+ ms ahead of the call's clock, more than maxTimestampLeadMs \(5000 ms\); the call was closed\.$/,
    );
    // The first frame, then the second after 1 s of silence (maxGapFillMs): 1.04 s in all.
    expect(bridge.stats).toMatchObject({ mediaMessages: 2, receivedMs: 40, insertedSilenceMs: 1000 });
    expect(bridge.translator.stats.inputBytes).toBeLessThanOrEqual(1040 * SERVICE_BYTES_PER_MS);
    await until(() => s.emulator.realtimeSessions().length === 0, 'the session to close');
    await linesLogged(s, 2);
    expect(s.lines[1]).toMatch(
      /^call "CA0+1": closed \(media timestamps ahead of the call's clock\) after \d+\.\d s; 1\.0 s of audio sent, 2 frames received, 0 refused, 0 warnings$/,
    );
  });

  it('timestamps going backwards a fourth time: closed (1008); the frames before were sent', async () => {
    const s = await setup({ bargeIn: false });
    const caller = await s.connect();
    caller.open();
    for (const timestamp of [0, 20, 40, 60, 0, 20, 0, 20, 0, 20, 0, 20]) caller.send(media(SILENT_FRAME, timestamp));
    expect(await caller.ended).toEqual({ code: 1008, reason: 'media timestamps going backwards' });
    const { bridge, done } = s.calls[0]!;
    await expect(done).rejects.toThrow('"media" timestamps went backwards 4 times (maxTimestampRewinds is 3); the call was closed.');
    expect(bridge.stats.mediaMessages).toBe(10);
  });
});

describe('the log cannot be flooded', () => {
  it('6,000 malformed messages: 5 warnings of each kind, then one line at the end with the rest counted', async () => {
    const s = await setup({ bargeIn: false });
    const caller = await s.connect();
    caller.open();
    for (let i = 0; i < 3000; i++) {
      caller.send('this is not json');
      caller.send({ event: 'transcription', text: KEY });
    }
    for (let k = 0; k < 10; k++) caller.send(media(SILENT_FRAME, k * 20));
    caller.stop();
    expect((await caller.ended).code).toBe(1000);
    await s.calls[0]!.done;
    await linesLogged(s, 12);
    expect(s.lines).toHaveLength(12);
    expect(s.lines.slice(1, 11)).toEqual(
      [
        ...Array.from({ length: 5 }, () => [
          '  warning: A Twilio message is not JSON (starts with "this is not json"). It was ignored.',
          '  warning: Unknown Twilio event "transcription"; it was ignored.',
        ]),
      ].flat(),
    );
    expect(s.lines[11]).toMatch(
      /^call "CA0+1": ended after \d+\.\d s; 0\.2 s of audio sent, 10 frames received, 0 refused, 10 warnings, 5,990 more not shown \(2,995 malformed, 2,995 unknown-event\)$/,
    );
    expect(s.calls[0]!.bridge.stats.suppressedWarnings).toEqual({ malformed: 2995, 'unknown-event': 2995 });
    expect(s.lines.join('\n')).not.toContain(KEY);
  });
});
