/**
 * The pieces the Twilio bridge's limits are made of, in process: the media timeline bound by the
 * clock (a table of steps), every new option refused with a `ValidationError` naming it, and the
 * deferred translator, which connects only when told (a TCP server on loopback counts its
 * connections, so "no session" means no connection at all).
 */
import { once } from 'node:events';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { setImmediate as turn } from 'node:timers/promises';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { TimeoutError, ValidationError } from '../lib/errors.js';
import { MediaTimeline, TwilioMediaBridge, type TwilioMediaBridgeOptions } from '../lib/integrations/twilio.js';
import { bridgeTwilioSocket } from '../lib/integrations/twilio-socket.js';
import { DeferredTranslateStream } from '../lib/integrations/twilio-session.js';
import { startTwilioBridgeServer } from '../examples/twilio-bridge.js';

const KEY = 'twilio-limits-test-key-0123456789abcdef';

describe('MediaTimeline bound by the clock', () => {
  it('hands out at most maxAheadMs beyond the elapsed time, gap fill included, and says how long to wait', () => {
    const t = new MediaTimeline({ sampleRate: 8000 }); // maxFillMs 1000, maxAheadMs 1000
    // [elapsed ms, timestamp ms, expected step]: 160-sample (20 ms) frames.
    const steps: Array<[number, number | undefined, { fillSamples: number; cutSamples: number; waitMs: number }]> = [
      [0, 0, { fillSamples: 0, cutSamples: 0, waitMs: 0 }],
      ...Array.from({ length: 49 }, (_, k): [number, number, { fillSamples: number; cutSamples: number; waitMs: number }] => [
        0,
        (k + 1) * 20,
        { fillSamples: 0, cutSamples: 0, waitMs: 0 },
      ]),
      // 1 s handed out at elapsed 0: the 51st frame waits 20 ms, the 52nd (at 5 ms) 35 ms.
      [0, 1000, { fillSamples: 0, cutSamples: 0, waitMs: 20 }],
      [5, 1020, { fillSamples: 0, cutSamples: 0, waitMs: 35 }],
      // Unstamped frames count the same.
      [200, undefined, { fillSamples: 0, cutSamples: 0, waitMs: 0 }],
      // A 3 s hole in the stamps: 1 s filled (maxFillMs), and it all waits for the clock.
      [200, 4060, { fillSamples: 8000, cutSamples: 16000, waitMs: 880 }],
      // Much later, on time: nothing to wait for.
      [5000, 4080, { fillSamples: 0, cutSamples: 0, waitMs: 0 }],
    ];
    for (const [i, [elapsedMs, timestamp, expected]] of steps.entries()) {
      expect(t.next(timestamp, 160, elapsedMs), `step ${i}`).toEqual(expected);
    }
    expect(t.handedOut).toBe(55 * 160 + 8000);
  });

  it('maxAheadMs 0: nothing ahead of the clock', () => {
    const t = new MediaTimeline({ sampleRate: 8000, maxAheadMs: 0 });
    expect(t.next(0, 160, 0)).toEqual({ fillSamples: 0, cutSamples: 0, waitMs: 20 });
    expect(t.next(20, 160, 40)).toEqual({ fillSamples: 0, cutSamples: 0, waitMs: 0 });
  });
});

describe('options of the limits', () => {
  const base = { from: 'en-us', to: 'es-es', apiKey: KEY, realtimeUrl: 'ws://127.0.0.1:9' };

  function refusal(make: () => unknown): ValidationError {
    let error: unknown;
    try {
      make();
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ValidationError);
    return error as ValidationError;
  }

  it.each([
    ['openSession', 'later', /^Invalid openSession: expected one of construct, start \(got "later"\)/],
    ['startTimeoutMs', 0, /^Invalid startTimeoutMs: expected an integer >= 1 \(got 0\)/],
    ['mediaTimeoutMs', 1.5, /^Invalid mediaTimeoutMs: expected an integer >= 1 \(got 1\.5\)/],
    ['maxAheadMs', -1, /^Invalid maxAheadMs: expected an integer >= 0 \(got -1\)/],
    ['maxTimestampLeadMs', KEY, /^Invalid maxTimestampLeadMs: expected an integer >= 0 \(got a string of 39 characters\)/],
    ['maxTimestampRewinds', -1, /^Invalid maxTimestampRewinds: expected an integer >= 0 \(got -1\)/],
    ['maxWarningsPerKind', Number.NaN, /^Invalid maxWarningsPerKind: expected an integer >= 0 \(got NaN\)/],
    ['maxGapFillMs', -5, /^Invalid maxGapFillMs: expected an integer >= 0 \(got -5\)/],
    ['gapToleranceMs', 'soon', /^Invalid gapToleranceMs: expected an integer >= 0 \(got "soon"\)/],
    ['appendMs', 0, /^Invalid appendMs: expected an integer >= 1 \(got 0\)/],
  ])('TwilioMediaBridge %s = %s', (field, value, message) => {
    const error = refusal(() => new TwilioMediaBridge({ ...base, [field]: value } as TwilioMediaBridgeOptions));
    expect(error.field).toBe(field);
    expect(error.message).toMatch(message);
    expect(error.message).not.toContain(KEY);
  });

  it.each([
    ['pingIntervalMs', 0],
    ['maxSocketBufferBytes', 0.5],
  ])('bridgeTwilioSocket %s = %s, before anything is wired', (field, value) => {
    const error = refusal(() => bridgeTwilioSocket({} as never, {} as never, { [field]: value }));
    expect(error.field).toBe(field);
  });

  it.each([
    ['maxCalls', 0],
    ['maxCallsPerAddress', 2.5],
  ])('the example server %s = %s', async (field, value) => {
    const error = await startTwilioBridgeServer({ bridge: base, [field]: value }).then(
      (server) => server.close(),
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).field).toBe(field);
  });
});

let server: Server | undefined;
const sockets = new Set<Socket>();
afterEach(async () => {
  vi.useRealTimers();
  for (const socket of sockets) socket.destroy();
  sockets.clear();
  const closing = server;
  server = undefined;
  if (closing) await new Promise<void>((resolve) => closing.close(() => resolve()));
});

/** A TCP server standing for the service: it counts connections and answers nothing. */
async function service(): Promise<string> {
  const listening = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.resume();
  });
  server = listening;
  listening.listen(0, '127.0.0.1');
  await once(listening, 'listening');
  return `ws://127.0.0.1:${(listening.address() as AddressInfo).port}`;
}
const connections = () => sockets.size;

describe('the deferred translator', () => {
  it('destroyed before open(): closes without ever connecting', async () => {
    const realtimeUrl = await service();
    const stream = new DeferredTranslateStream({ from: 'en-us', to: 'es-es', apiKey: KEY, realtimeUrl, reconnect: false });
    stream.destroy();
    await once(stream, 'close');
    expect(connections()).toBe(0);
    expect(stream.opened).toBe(false);
  });

  it('open() connects, once', async () => {
    const realtimeUrl = await service();
    const stream = new DeferredTranslateStream({ from: 'en-us', to: 'es-es', apiKey: KEY, realtimeUrl, reconnect: false });
    stream.on('error', () => undefined);
    const connected = once(server!, 'connection');
    stream.open();
    stream.open();
    await connected;
    stream.destroy();
    await once(stream, 'close');
    expect(connections()).toBe(1);
  });

  it('a bridge with openSession "start" whose input ends before start: ends cleanly, no connection', async () => {
    const realtimeUrl = await service();
    const bridge = new TwilioMediaBridge({ from: 'en-us', to: 'es-es', apiKey: KEY, realtimeUrl, reconnect: false, openSession: 'start' });
    const errors: unknown[] = [];
    bridge.on('error', (error) => errors.push(error));
    bridge.resume();
    bridge.end('{"event":"connected","protocol":"Call","version":"1.0.0"}');
    await once(bridge, 'close');
    expect(errors).toEqual([]);
    expect(bridge.readableEnded).toBe(true);
    expect(bridge.translator.destroyed).toBe(true);
    expect(connections()).toBe(0);
  });

  it('a bridge with openSession "start" connects at start; without start it fails after startTimeoutMs', async () => {
    const realtimeUrl = await service();
    const started = new TwilioMediaBridge({ from: 'en-us', to: 'es-es', apiKey: KEY, realtimeUrl, reconnect: false, openSession: 'start' });
    started.on('error', () => undefined);
    const connected = once(server!, 'connection');
    started.write('{"event":"start","start":{"streamSid":"MZ1","tracks":["inbound"]}}');
    await connected;
    started.destroy();
    await once(started, 'close');

    const silent = new TwilioMediaBridge({ from: 'en-us', to: 'es-es', apiKey: KEY, realtimeUrl, reconnect: false, openSession: 'start', startTimeoutMs: 20 });
    const failed = new Promise<Error>((resolve) => silent.once('error', resolve));
    const closed = new Promise((resolve) => silent.once('close', resolve));
    const error = await failed;
    expect(error).toBeInstanceOf(TimeoutError);
    expect(error.message).toBe('No "start" message within 20 ms (startTimeoutMs); the call was closed.');
    expect(silent.closeReason).toBe('no start within 20 ms');
    await closed;
    expect(connections()).toBe(1);
  });
});

describe("the bridge's input states own their timers", () => {
  /** Fake clocks for the bridge's bounds; the sockets stay real. */
  function fakeClock(): void {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'performance', 'Date'] });
  }
  const START = '{"event":"start","start":{"streamSid":"MZ1","tracks":["inbound"]}}';
  const MEDIA = JSON.stringify({ event: 'media', media: { track: 'inbound', payload: Buffer.alloc(160, 0xff).toString('base64') } });
  const written = (bridge: TwilioMediaBridge, message: string) =>
    new Promise<void>((resolve, reject) => bridge.write(message, (error) => (error ? reject(error) : resolve())));
  /**
   * A bridge on fake timers whose session connects at once and is never ready (its own timers stay
   * as they are meanwhile), flowing, with the errors it emits.
   */
  async function fakeClockBridge(options: Partial<TwilioMediaBridgeOptions>): Promise<{ bridge: TwilioMediaBridge; errors: Error[] }> {
    const realtimeUrl = await service();
    fakeClock();
    const bridge = new TwilioMediaBridge({ from: 'en-us', to: 'es-es', apiKey: KEY, realtimeUrl, reconnect: false, readyTimeoutMs: 600_000, ...options });
    const errors: Error[] = [];
    bridge.on('error', (error) => errors.push(error));
    bridge.resume();
    return { bridge, errors };
  }

  it('start takes the start timeout away and arms the media timeout; a frame ahead of the clock holds one more; stop leaves none', async () => {
    const { bridge, errors } = await fakeClockBridge({ openSession: 'construct', maxAheadMs: 0 });
    await once(server!, 'connection');
    const base = vi.getTimerCount(); // the session's, and the start timeout

    await written(bridge, START);
    expect(vi.getTimerCount()).toBe(base); // the media timeout, in the start timeout's place
    const sent = written(bridge, MEDIA);
    await turn();
    expect(vi.getTimerCount()).toBe(base + 1); // and the frame held for the clock
    await vi.advanceTimersByTimeAsync(20);
    await sent;
    expect(vi.getTimerCount()).toBe(base);
    await written(bridge, '{"event":"stop"}');
    expect(vi.getTimerCount()).toBe(base - 1); // the session's only
    // Past both timeouts: the input has ended, nothing fires.
    await vi.advanceTimersByTimeAsync(30_000);
    expect(errors).toEqual([]);
    expect(bridge.destroyed).toBe(false);
    bridge.destroy();
    await once(bridge, 'close');
  });

  it('the media timeout does not end a call whose audio waits for the service (its write held on the translator)', async () => {
    const { bridge, errors } = await fakeClockBridge({ writableHighWaterMark: 4800, mediaTimeoutMs: 1000, maxAheadMs: 600_000 });
    await written(bridge, START);
    // 100 ms of audio is one append, as much as the translator buffers before it asks for a pause.
    for (let i = 0; i < 10; i++) bridge.write(MEDIA);
    while (!bridge.translator.writableNeedDrain) await turn();
    // Five times the media timeout: the bridge is the one waiting, not the caller.
    await vi.advanceTimersByTimeAsync(5000);
    expect(errors).toEqual([]);
    expect(bridge.destroyed).toBe(false);
    bridge.destroy();
    await once(bridge, 'close');
  });

  it('the media timeout counts from the last frame, however long before the timer fires it came', async () => {
    const { bridge, errors } = await fakeClockBridge({ openSession: 'construct', mediaTimeoutMs: 1000, maxAheadMs: 600_000 });
    await written(bridge, START);
    await vi.advanceTimersByTimeAsync(600);
    await written(bridge, MEDIA);
    // 1000 ms after start, 400 ms after the frame: the call is still on.
    await vi.advanceTimersByTimeAsync(999);
    expect(bridge.destroyed).toBe(false);
    await written(bridge, MEDIA); // at 1599 ms
    await vi.advanceTimersByTimeAsync(999);
    expect(bridge.destroyed).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(bridge.destroyed).toBe(true);
    expect(errors.map((e) => e.message)).toEqual(['No media from the call for 1000 ms (mediaTimeoutMs); the call was closed.']);
    expect(bridge.closeReason).toBe('no media for 1000 ms');
  });
});
