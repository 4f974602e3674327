/**
 * The Twilio Media Streams bridge, played from Twilio's side over a real WebSocket: the example's
 * bridge server (`examples/twilio-bridge.ts`) on 127.0.0.1:0, the emulator as the realtime
 * service, and a `ws` client that sends what Twilio sends (`connected`, `start`, 20 ms `media`
 * of mu-law made from the speech fixture, `stop`) as fast as it can, with correct timestamps.
 *
 * What the outbound audio must be: the emulator answers each utterance with the utterance's own
 * input audio (voiced region +- 300 ms). The service's input is the caller's mu-law decoded and
 * resampled 8 -> 24 kHz; each answer is resampled 24 -> 8 kHz, mu-law encoded and framed. Both
 * are computed here with the library's converters, independently of the bridge, so the bridge's
 * output is compared byte for byte; and against the fixture's own measured utterances (through
 * the whole 24k -> 8k -> 24k -> 8k round trip) with a measured tolerance.
 *
 * Plus unit tests of the message codec (literal JSON), the gap-filling timeline and the speech
 * onset detector.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { once } from 'node:events';
import { createHmac } from 'node:crypto';
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline } from 'node:stream/promises';
import { WebSocket, WebSocketServer, createWebSocketStream } from 'ws';
import { MULAW_DECODE_TABLE, encodeMulaw } from '../lib/audio/g711.js';
import { dbfsToMeanSquare, g711SquareTable, meanSquareG711, meanSquareG711Above } from '../lib/audio/level.js';
import { prng } from '../lib/emulator/synth.js';
import { ProtocolError, ValidationError, type RtTranslateError } from '../lib/errors.js';
import { startEmulator, type EmulatorOptions, type RunningEmulator } from '../lib/emulator/server.js';
import {
  MediaTimeline,
  SpeechOnsetDetector,
  TwilioMediaBridge,
  TWILIO_FRAME_BYTES,
  checkTwilioMediaFormat,
  parseTwilioMessage,
  twilioClearMessage,
  twilioMarkMessage,
  twilioMediaMessage,
  type TwilioMediaBridgeOptions,
} from '../lib/integrations/twilio.js';
import { bridgeTwilioSocket } from '../lib/integrations/twilio-socket.js';
import {
  isTwilioSignatureValid,
  startTwilioBridgeServer,
  twilioSignature,
  type RunningTwilioBridgeServer,
  type TwilioCall,
} from '../examples/twilio-bridge.js';
import { countHandles, expectNoLeakedHandles } from './helpers/handles.js';
import { CALLER, CALLER_FRAMES, FakeTwilio, MULAW, SERVICE, STREAM_SID, convert, groupByMark, padToFrames } from './helpers/fake-twilio.js';
import { answerVariants, emulatorUtterances, loadSpeechFixture } from './helpers/speech.js';

/* ------------------------------------------------------------------------------------------- */
/* Audio                                                                                       */

const KEY = 'twilio-test-key';
/**
 * These tests send a call's audio as fast as they can: the bridge may run, and the call's
 * timestamps lead, a minute ahead of the clock here, so each test takes the time its work takes.
 * That a real call is held to the clock (`maxAheadMs`, `maxTimestampLeadMs`) is tested in
 * twilio-abuse.test.ts.
 */
const AHEAD_MS = 60_000;
/** The translator's end padding: 800 ms of PCM16 24 kHz zeros. */
const END_PADDING_BYTES = 800 * 48;
const FIXTURE = loadSpeechFixture();

/** Fixture sample (24 kHz) to caller frame index. */
const frameAt = (sample24k: number) => Math.floor(sample24k / 3 / 160);

function decodeMulaw(mulaw: Buffer): Int16Array {
  const out = new Int16Array(mulaw.length);
  for (let i = 0; i < mulaw.length; i++) out[i] = MULAW_DECODE_TABLE[mulaw[i]!]!;
  return out;
}

/** What the service hears when the caller's audio `mulaw` arrives whole, end padding included. */
function serviceInput(mulaw: Buffer): Buffer {
  return Buffer.concat([convert(MULAW, SERVICE, mulaw), Buffer.alloc(END_PADDING_BYTES)]);
}

/** The bridge's form of an answer: 20 ms-framed mu-law. */
function toCaller(answer: Buffer): Buffer {
  return padToFrames(convert(SERVICE, MULAW, answer));
}

/** What the bridge must send back for `serviceInput`: one answer per utterance (the last ended when the audio stops). */
function expectedResponses(input: Buffer): Buffer[] {
  return emulatorUtterances(input).map((u) => toCaller(u.audio));
}

/**
 * What the bridge may send back for each utterance of `serviceInput` when the service drops and
 * the call goes on in a new session: that session counts its frames from the replay's start, so
 * its answers may move by up to a frame (`answerVariants`); the first is the unbroken stream's.
 */
function expectedResponseVariants(input: Buffer): Buffer[][] {
  return answerVariants(input).map((variants) => variants.map(toCaller));
}

/** Pearson correlation of two equally long signals. */
function correlation(a: Int16Array, b: Int16Array): number {
  let sa = 0;
  let sb = 0;
  for (let i = 0; i < a.length; i++) {
    sa += a[i]!;
    sb += b[i]!;
  }
  const ma = sa / a.length;
  const mb = sb / b.length;
  let ab = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]! - ma;
    const y = b[i]! - mb;
    ab += x * y;
    aa += x * x;
    bb += y * y;
  }
  return ab / Math.sqrt(aa * bb);
}

/** The lag (samples, `b` relative to `a`) within +-maxLag that correlates best, over the overlap. */
function bestAlignment(a: Int16Array, b: Int16Array, maxLag: number): { lag: number; r: number } {
  let best = { lag: 0, r: -2 };
  for (let lag = -maxLag; lag <= maxLag; lag += 1) {
    const aStart = Math.max(0, lag);
    const bStart = Math.max(0, -lag);
    const n = Math.min(a.length - aStart, b.length - bStart);
    if (n < a.length / 2) continue;
    const r = correlation(a.subarray(aStart, aStart + n), b.subarray(bStart, bStart + n));
    if (r > best.r) best = { lag, r };
  }
  return best;
}

/* ------------------------------------------------------------------------------------------- */
/* Twilio's side                                                                               */

/* ------------------------------------------------------------------------------------------- */
/* Servers and cleanup                                                                         */

const emulators: RunningEmulator[] = [];
const servers: RunningTwilioBridgeServer[] = [];
const clients: FakeTwilio[] = [];

afterEach(async () => {
  for (const client of clients.splice(0)) client.ws.terminate();
  for (const server of servers.splice(0)) await server.close();
  for (const emulator of emulators.splice(0)) await emulator.close();
});

interface Setup {
  server: RunningTwilioBridgeServer;
  calls: TwilioCall[];
  warnings: RtTranslateError[];
  /** Every event each call's bridge emitted, by name, with its arguments. */
  emitted: Array<Array<{ name: string | symbol; args: unknown[] }>>;
  connect(): Promise<FakeTwilio>;
}

/** The emulator and a bridge server using it; each call's bridge gets `options`. */
async function setup(options: Partial<TwilioMediaBridgeOptions> = {}, emulatorOptions: EmulatorOptions = {}): Promise<Setup> {
  const emulator = await startEmulator({ port: 0, apiKeys: [KEY], latencyMs: 0, ...emulatorOptions });
  emulators.push(emulator);
  const calls: TwilioCall[] = [];
  const warnings: RtTranslateError[] = [];
  const emitted: Setup['emitted'] = [];
  const server = await startTwilioBridgeServer({
    bridge: {
      from: 'en-us',
      to: 'es-es',
      apiKey: KEY,
      realtimeUrl: emulator.realtimeUrl,
      quietPeriodMs: 200,
      maxAheadMs: AHEAD_MS,
      maxTimestampLeadMs: AHEAD_MS,
      ...options,
    },
    onCall: (call) => {
      const events: Setup['emitted'][number] = [];
      const emit = call.bridge.emit.bind(call.bridge);
      call.bridge.emit = (name: string | symbol, ...args: unknown[]) => {
        events.push({ name, args });
        return emit(name, ...args);
      };
      emitted.push(events);
      call.bridge.on('warning', (warning) => warnings.push(warning));
      calls.push(call);
    },
  });
  servers.push(server);
  return {
    server,
    calls,
    warnings,
    emitted,
    async connect() {
      const client = await FakeTwilio.connect(server.url);
      clients.push(client);
      return client;
    },
  };
}

/* ------------------------------------------------------------------------------------------- */
/* End to end                                                                                  */

describe('TwilioMediaBridge over a WebSocket, against the emulator', () => {
  it('a call survives the service dropping after every answer: each answer once, with its mark; no error', async () => {
    const { connect, calls, warnings } = await setup(
      { bargeIn: false, reconnect: { initialDelayMs: 10, maxDelayMs: 40 } },
      { faults: { dropAfterResponses: 1 } },
    );
    const twilio = await connect();
    twilio.open();
    twilio.media(0, CALLER_FRAMES.length);
    twilio.stop();
    expect(await twilio.closed).toBe(1000);
    await calls[0]!.done;
    const { bridge } = calls[0]!;
    expect(bridge.translator.stats.reconnects).toBe(2);
    const expected = expectedResponseVariants(serviceInput(CALLER));
    const { groups, tail } = groupByMark(twilio.received);
    expect(groups.map((g) => g.mark)).toEqual(['response-1', 'response-2', 'response-3']);
    expect(tail.length).toBe(0);
    expect(groups[0]!.audio.equals(expected[0]![0]!)).toBe(true);
    groups.forEach((group, i) => expect(expected[i]!.some((answer) => answer.equals(group.audio))).toBe(true));
    expect(warnings).toEqual([]);
  });

  it('realtime pacing: a drop while an answer plays does not stop it; its media keep leaving at 20 ms through the outage', async () => {
    // The second utterance is answered 0.6 s late, so when the first answer starts to play an
    // answer is still owed and the drop is an outage (with every answer in, it would be the end).
    // The session after the drop hears the last two utterances as its first and second, so it is
    // the third that is late there: the quiet period is longer than that.
    const { connect, calls, warnings } = await setup(
      { bargeIn: false, pacing: 'realtime', reconnect: { initialDelayMs: 10, maxDelayMs: 40 }, quietPeriodMs: 1000 },
      { faults: { lateUtterances: { 2: 600 } } },
    );
    const emulator = emulators.at(-1)!;
    const twilio = await connect();
    twilio.open();
    twilio.media(0, CALLER_FRAMES.length);
    twilio.stop();
    // The first answer starts to play: the service goes away, and refuses to come back for 1 s.
    await twilio.waitFor((m) => m.event === 'media');
    const translator = calls[0]!.bridge.translator;
    const mediaSoFar = () => twilio.received.filter((m) => m.event === 'media').length;
    const gap: { from?: { at: number; media: number }; to?: { at: number; media: number; marks: string[] } } = {};
    translator.once('reconnecting', () => (gap.from = { at: performance.now(), media: mediaSoFar() }));
    translator.once('reconnected', () => {
      gap.to = { at: performance.now(), media: mediaSoFar(), marks: twilio.received.flatMap((m) => (m.event === 'mark' ? [m.mark!.name] : [])) };
    });
    emulator.realtimeFaults.refuseNextHandshakes(1, 503, 1);
    emulator.realtimeFaults.drop();
    expect(await twilio.closed).toBe(1000);
    await calls[0]!.done;
    expect(translator.stats.reconnects).toBe(1);
    const { from, to } = gap as Required<typeof gap>;
    // At least the second the service asked for; the first answer's media went on meanwhile, at
    // the pacer's rate (never faster than the clock), and no later answer's mark came before it.
    expect(to.at - from.at).toBeGreaterThanOrEqual(1000);
    expect(to.media - from.media).toBeGreaterThan(0);
    expect(to.media - from.media).toBeLessThanOrEqual(Math.ceil((to.at - from.at) / 20) + 1);
    expect(to.marks.every((mark) => mark === 'response-1')).toBe(true);
    // Nothing lost or given twice across the outage.
    const expected = expectedResponseVariants(serviceInput(CALLER));
    const { groups } = groupByMark(twilio.received);
    expect(groups.map((g) => g.mark)).toEqual(['response-1', 'response-2', 'response-3']);
    expect(groups[0]!.audio.equals(expected[0]![0]!)).toBe(true);
    groups.forEach((group, i) => expect(expected[i]!.some((answer) => answer.equals(group.audio))).toBe(true));
    expect(warnings).toEqual([]);
  });

  it('translates a call: 160-byte mu-law media, a mark after each response, audio equal to what the emulator answers', async () => {
    const { connect, calls, emitted } = await setup({ bargeIn: false });
    const twilio = await connect();
    // A gap of 500 ms (25 frames) inside the 1.2 s pause between sentences 2 and 3.
    const pauseStart = frameAt(FIXTURE.utterances[1]!.endSample) + 8;
    const gap: [number, number] = [pauseStart, pauseStart + 25];
    for (let k = gap[0]; k < gap[1]; k++) expect(CALLER_FRAMES[k]!.every((b) => b === 0xff)).toBe(true);

    twilio.open();
    twilio.media(0, gap[0]);
    twilio.media(gap[1], CALLER_FRAMES.length);
    twilio.stop();
    expect(await twilio.closed).toBe(1000);
    await calls[0]!.done;
    const { bridge } = calls[0]!;

    // The timeline the service saw is the whole call: the gap came back as silence.
    expect(bridge.stats.insertedSilenceMs).toBe(500);
    expect(bridge.stats.receivedMs).toBe((CALLER_FRAMES.length - 25) * 20);
    const input = serviceInput(CALLER);
    expect(bridge.translator.stats.bytesSent).toBe(input.length);

    const expected = expectedResponses(input);
    expect(expected).toHaveLength(3);
    expect(twilio.binaryFrames).toBe(0);
    expect(twilio.received.every((m) => m.streamSid === STREAM_SID)).toBe(true);
    const { groups, tail } = groupByMark(twilio.received);
    expect(groups.map((g) => g.mark)).toEqual(['response-1', 'response-2', 'response-3']);
    expect(tail.length).toBe(0);
    expect(twilio.received.filter((m) => m.event === 'clear')).toHaveLength(0);
    groups.forEach((group, i) => {
      expect(group.sizes.every((size) => size === TWILIO_FRAME_BYTES)).toBe(true);
      expect(group.audio.length).toBe(expected[i]!.length);
      expect(group.audio.equals(expected[i]!)).toBe(true);
    });
    expect(bridge.stats.responses).toBe(3);
    // The translator's text events come out of the bridge under the translator's own names (one
    // name per event in the whole library), with the emulator's texts; no other name carries them.
    const texts = (name: string) => emitted[0]!.filter((e) => e.name === name).map((e) => e.args);
    expect(texts('transcript.done')).toEqual([1, 2, 3].map((n) => [expect.stringMatching(new RegExp(`^\\[en-us utterance ${n}, `))]));
    expect(texts('text.done')).toEqual([1, 2, 3].map((n) => [expect.stringMatching(new RegExp(`^\\[es-es translation of utterance ${n}, `))]));
    const carriers = emitted[0]!.filter((e) => e.args.some((a) => typeof a === 'string' && /^\[(en-us|es-es) /.test(a)));
    expect(new Set(carriers.map((e) => e.name))).toEqual(new Set(['transcript.done', 'text.done']));
    // The bridge's own news of a response sent has a name of its own: `response` is the
    // translator's (a ResponseTiming), and one name never carries two meanings.
    expect(texts('response.sent')).toEqual([1, 2, 3].map((index) => [expect.objectContaining({ index, mark: `response-${index}` })]));
    expect(texts('response')).toEqual([]);
    expect(bridge.stats.outboundFrames).toBe(expected.reduce((n, r) => n + r.length / TWILIO_FRAME_BYTES, 0));

    // Against the fixture's own utterances (the voiced regions the emulator's measurement finds at
    // 24 kHz), through the whole round trip 24k -> 8k mu-law -> 24k -> 8k mu-law.
    FIXTURE.utterances.forEach(({ emulator: u }, i) => {
      const reference = decodeMulaw(convert(SERVICE, MULAW, FIXTURE.pcm.subarray(u.startSample * 2, u.endSample * 2)));
      const got = decodeMulaw(groups[i]!.audio);
      const best = bestAlignment(reference, got, 800);
      const aStart = Math.max(0, best.lag);
      const bStart = Math.max(0, -best.lag);
      const n = Math.min(reference.length - aStart, got.length - bStart);
      let signal = 0;
      let noise = 0;
      for (let k = 0; k < n; k++) {
        const x = reference[aStart + k]!;
        signal += x * x;
        noise += (got[bStart + k]! - x) ** 2;
      }
      // Measured: correlation 0.9994 to 0.9996, SNR 29 to 31 dB; the third utterance starts
      // 60 ms later and is 50 ms shorter (its soft onset loses the energy above 4 kHz that made
      // its first two 30 ms frames voiced).
      expect(Math.abs(best.lag)).toBeLessThanOrEqual(480);
      expect(Math.abs(reference.length - got.length)).toBeLessThanOrEqual(400);
      expect(best.r).toBeGreaterThan(0.999);
      expect(10 * Math.log10(signal / noise)).toBeGreaterThan(27);
    });
  });
});

/* ------------------------------------------------------------------------------------------- */
/* As a stream                                                                                 */

describe('TwilioMediaBridge as a Duplex', () => {
  /** Twilio's messages for caller frames [0, frames), as JSON text. */
  function callMessages(frames: number): string[] {
    const out = [
      '{"event":"connected","protocol":"Call","version":"1.0.0"}',
      `{"event":"start","sequenceNumber":"1","start":{"streamSid":"${STREAM_SID}","tracks":["inbound"],"mediaFormat":{"encoding":"audio/x-mulaw","sampleRate":8000,"channels":1}},"streamSid":"${STREAM_SID}"}`,
    ];
    for (let k = 0; k < frames; k++) {
      out.push(
        JSON.stringify({
          event: 'media',
          media: { track: 'inbound', chunk: String(k + 1), timestamp: String(k * 20), payload: CALLER_FRAMES[k]!.toString('base64') },
          streamSid: STREAM_SID,
        }),
      );
    }
    out.push(`{"event":"stop","streamSid":"${STREAM_SID}"}`);
    return out;
  }

  it('pipeline(createWebSocketStream(ws), bridge, same stream) with output json', async () => {
    const emulator = await startEmulator({ port: 0, apiKeys: [KEY], latencyMs: 0 });
    emulators.push(emulator);
    const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await once(wss, 'listening');
    const done: Array<Promise<void>> = [];
    wss.on('connection', (ws) => {
      const bridge = new TwilioMediaBridge({
        from: 'en-us',
        to: 'es-es',
        apiKey: KEY,
        realtimeUrl: emulator.realtimeUrl,
        quietPeriodMs: 200,
        maxAheadMs: AHEAD_MS,
        maxTimestampLeadMs: AHEAD_MS,
        output: 'json',
      });
      const socket = createWebSocketStream(ws, { readableObjectMode: true, decodeStrings: false });
      done.push(pipeline(socket, bridge, socket));
    });
    try {
      const twilio = await FakeTwilio.connect(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}`);
      clients.push(twilio);
      const frames = frameAt(FIXTURE.utterances[1]!.startSample) - 5;
      for (const message of callMessages(frames)) twilio.send(message);
      await twilio.closed;
      await done[0];
      const expected = expectedResponses(serviceInput(CALLER.subarray(0, frames * TWILIO_FRAME_BYTES)));
      const { groups } = groupByMark(twilio.received);
      expect(twilio.binaryFrames).toBe(0);
      expect(groups.map((g) => g.mark)).toEqual(['response-1']);
      expect(groups[0]!.audio.equals(expected[0]!)).toBe(true);
    } finally {
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    }
  });
  it('bridgeTwilioSocket removes every listener it added once the call is over, finished or failed', async () => {
    const emulator = await startEmulator({ port: 0, apiKeys: [KEY], latencyMs: 0 });
    emulators.push(emulator);
    const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await once(wss, 'listening');
    const events = ['message', 'close', 'error'] as const;
    const calls: Array<{ ws: WebSocket; bridge: TwilioMediaBridge; before: number[]; done: Promise<void> }> = [];
    wss.on('connection', (ws) => {
      const before = events.map((e) => ws.listenerCount(e));
      const bridge = new TwilioMediaBridge({
        from: 'en-us',
        to: 'es-es',
        apiKey: KEY,
        realtimeUrl: emulator.realtimeUrl,
        quietPeriodMs: 200,
        maxAheadMs: AHEAD_MS,
        maxTimestampLeadMs: AHEAD_MS,
      });
      const done = bridgeTwilioSocket(ws, bridge);
      done.catch(() => undefined);
      calls.push({ ws, bridge, before, done });
    });
    try {
      const url = `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`;
      const good = await FakeTwilio.connect(url);
      clients.push(good);
      for (const message of callMessages(20)) good.send(message);
      expect(await good.closed).toBe(1000);
      const bad = await FakeTwilio.connect(url);
      clients.push(bad);
      bad.open({ encoding: 'audio/x-alaw', sampleRate: 8000, channels: 1 });
      expect(await bad.closed).toBe(1011);
      await calls[0]!.done;
      await expect(calls[1]!.done).rejects.toBeInstanceOf(ValidationError);
      for (const { ws, bridge, before } of calls) {
        if (ws.readyState !== ws.CLOSED) await once(ws, 'close');
        expect(events.map((e) => ws.listenerCount(e))).toEqual(before);
        expect(bridge.listenerCount('error')).toBe(0);
        expect(['data', 'end', 'drain', 'close'].map((e) => bridge.listenerCount(e))).toEqual([0, 0, 0, 0]);
      }
    } finally {
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    }
  });

  it('destroy() mid-call ends the realtime session and closes every socket', async () => {
    const emulator = await startEmulator({ port: 0, apiKeys: [KEY], latencyMs: 0 });
    emulators.push(emulator);
    const baseline = countHandles();
    const bridge = new TwilioMediaBridge({ from: 'en-us', to: 'es-es', apiKey: KEY, realtimeUrl: emulator.realtimeUrl });
    const messages = callMessages(60);
    // Each write's callback: the bridge has handed that message's audio to the translator.
    const handed = messages.slice(0, -1).map((message) => new Promise<void>((resolve) => bridge.write(message, () => resolve())));
    await once(bridge.translator, 'session.created');
    await Promise.all(handed);
    // Mid-call: the session is open and at least 50 frames of audio are with the translator.
    const { translator } = bridge;
    expect(translator.stats.inputBytes + translator.writableLength).toBeGreaterThanOrEqual(50 * 160 * 6);
    expect(emulator.realtimeSessions()).toHaveLength(1);
    bridge.destroy();
    await once(bridge, 'close');
    expect(bridge.translator.destroyed).toBe(true);
    await expectNoLeakedHandles(baseline);
    expect(emulator.realtimeSessions()).toEqual([]);
  });
});

/* ------------------------------------------------------------------------------------------- */
/* Barge-in                                                                                    */

describe('barge-in', () => {
  const sentence2 = FIXTURE.utterances[1]!;
  const sentence3 = FIXTURE.utterances[2]!;
  /** Up to ~100 ms before a sentence: the previous utterance has ended (600 ms of silence) by then. */
  const before = (u: { startSample: number }) => frameAt(u.startSample) - 5;
  const after = (u: { endSample: number }) => frameAt(u.endSample) + 2;

  it('burst: speech while a response is still playing (mark not echoed) sends clear; speech after playback does not', async () => {
    const { connect, calls } = await setup();
    const twilio = await connect();
    twilio.open();
    twilio.media(0, before(sentence2));
    // Response 1 is sent whole, then its mark; Twilio has not played it yet (no echo).
    await twilio.waitFor((m) => m.event === 'mark' && m.mark!.name === 'response-1');
    const bridge = calls[0]!.bridge;
    const clears: unknown[] = [];
    bridge.on('clear', (info) => clears.push(info));

    twilio.media(before(sentence2), before(sentence3));
    const clear = await twilio.waitFor((m) => m.event === 'clear');
    expect(clear).toEqual({ event: 'clear', streamSid: STREAM_SID });
    expect(clears).toEqual([{ pendingMarks: ['response-1'], droppedFrames: 0 }]);
    const clearAt = twilio.received.indexOf(clear);
    expect(twilio.received.findIndex((m) => m.event === 'mark' && m.mark!.name === 'response-1')).toBeLessThan(clearAt);
    twilio.played('response-1'); // Twilio echoes pending marks after a clear

    // Response 2 plays to its end (its mark comes back) before the caller speaks again.
    await twilio.waitFor((m) => m.event === 'mark' && m.mark!.name === 'response-2');
    twilio.played('response-2');
    await new Promise<void>((resolve) => bridge.once('played', () => resolve()));
    twilio.media(before(sentence3), CALLER_FRAMES.length);
    twilio.stop();
    expect(await twilio.closed).toBe(1000);
    await calls[0]!.done;

    expect(twilio.received.filter((m) => m.event === 'clear')).toHaveLength(1);
    expect(groupByMark(twilio.received).groups.map((g) => g.mark)).toEqual(['response-1', 'response-2', 'response-3']);
    expect(bridge.stats.clears).toBe(1);
    expect(bridge.stats.marksPlayed).toBe(1); // response-1's echo came after the clear had settled it
  });

  it('realtime pacing: clear drops the queued rest of the response; the next response plays whole', async () => {
    const { connect, calls } = await setup({ pacing: 'realtime' });
    const twilio = await connect();
    twilio.open();
    twilio.media(0, before(sentence2));
    await twilio.waitFor((m) => m.event === 'media');
    const bridge = calls[0]!.bridge;
    const clears: Array<{ droppedFrames: number; pendingMarks: string[] }> = [];
    bridge.on('clear', (info) => clears.push(info));

    // The caller talks over response 1 (about 2.9 s, released 20 ms at a time).
    const end = after(sentence2);
    twilio.media(before(sentence2), end);
    const clear = await twilio.waitFor((m) => m.event === 'clear');
    twilio.stop();
    expect(await twilio.closed).toBe(1000);
    await calls[0]!.done;

    const expected = expectedResponses(serviceInput(CALLER.subarray(0, end * TWILIO_FRAME_BYTES)));
    expect(expected).toHaveLength(2);
    const clearAt = twilio.received.indexOf(clear);
    const beforeClear = twilio.received.slice(0, clearAt);
    const afterClear = twilio.received.slice(clearAt + 1);
    // Only the start of response 1 went out, and it was never marked as finished.
    const response1 = Buffer.concat(beforeClear.map((m) => Buffer.from(m.media!.payload, 'base64')));
    expect(beforeClear.every((m) => m.event === 'media')).toBe(true);
    expect(response1.length).toBeLessThan(expected[0]!.length);
    expect(response1.equals(expected[0]!.subarray(0, response1.length))).toBe(true);
    expect(clears).toHaveLength(1);
    expect(clears[0]!.droppedFrames).toBeGreaterThan(0);
    expect(clears[0]!.pendingMarks).toEqual([]);
    // After the clear: response 2, whole, then its mark.
    const { groups, tail } = groupByMark(afterClear);
    expect(groups.map((g) => g.mark)).toEqual(['response-2']);
    expect(tail.length).toBe(0);
    expect(groups[0]!.sizes.every((size) => size === TWILIO_FRAME_BYTES)).toBe(true);
    expect(groups[0]!.audio.equals(expected[1]!)).toBe(true);
  });
});

/* ------------------------------------------------------------------------------------------- */
/* Timeline, validation, lifecycle                                                             */

describe('inbound timeline and validation', () => {
  it('a timestamp jump longer than maxGapFillMs inserts exactly the bound', async () => {
    const { connect, calls } = await setup({ bargeIn: false, maxGapFillMs: 200 });
    const twilio = await connect();
    const silent = CALLER_FRAMES[0]!;
    expect(silent.every((b) => b === 0xff)).toBe(true);
    twilio.open();
    twilio.media(0, 11);
    // The next frame is stamped 1000 ms after its due time (220 ms): 1000 ms are missing.
    twilio.send({ event: 'media', media: { track: 'inbound', chunk: '12', timestamp: '1220', payload: silent.toString('base64') }, streamSid: STREAM_SID });
    // Five more frames on the new clock: on time, nothing more filled or cut.
    for (let k = 1; k <= 5; k++) {
      const media = { track: 'inbound', chunk: String(12 + k), timestamp: String(1220 + 20 * k), payload: silent.toString('base64') };
      twilio.send({ event: 'media', media, streamSid: STREAM_SID });
    }
    twilio.stop();
    expect(await twilio.closed).toBe(1000);
    await calls[0]!.done;
    const { stats, translator } = calls[0]!.bridge;
    expect(stats.insertedSilenceMs).toBe(200);
    expect(stats.cutGapMs).toBe(800);
    expect(stats.receivedMs).toBe(340);
    // 17 frames and 200 ms of silence at 8 kHz, x3 samples at 24 kHz, 2 bytes each, plus the end padding.
    expect(translator.stats.bytesSent).toBe((17 * 160 + 1600) * 3 * 2 + END_PADDING_BYTES);
  });

  it('malformed JSON, unknown events and bad media are warnings; the call goes on', async () => {
    const { connect, calls, warnings } = await setup({ bargeIn: false });
    const twilio = await connect();
    twilio.send({ event: 'media', media: { track: 'inbound', timestamp: '0', payload: CALLER_FRAMES[0]!.toString('base64') } });
    twilio.open();
    twilio.send('this is not json');
    twilio.send({ event: 'transcription', text: 'hi' });
    twilio.send({ event: 'media', streamSid: STREAM_SID });
    twilio.send({ event: 'media', media: { payload: 'not base64!' }, streamSid: STREAM_SID });
    twilio.send({ event: 'media', media: { payload: 'AAAA', timestamp: 'soon' }, streamSid: STREAM_SID });
    twilio.ws.send(Buffer.from([0x00, 0xff, 0x10]), { binary: true });
    twilio.send({ event: 'dtmf', dtmf: { track: 'inbound_track', digit: '5' }, streamSid: STREAM_SID });
    twilio.media(0, frameAt(FIXTURE.utterances[1]!.startSample) - 5);
    twilio.stop();
    expect(await twilio.closed).toBe(1000);
    await calls[0]!.done;

    expect(warnings.every((w) => w instanceof ProtocolError && w.code === 'RTT_PROTOCOL')).toBe(true);
    expect(warnings.map((w) => w.message)).toEqual([
      'A "media" message before "start" was ignored.',
      'A Twilio message is not JSON (starts with "this is not json"). It was ignored.',
      'Unknown Twilio event "transcription"; it was ignored.',
      'Malformed Twilio "media" message: no "media" object. It was ignored.',
      'Malformed Twilio "media" message: media.payload is not valid base64. It was ignored.',
      'Malformed Twilio "media" message: media.timestamp must be a non-negative integer (got "soon"). It was ignored.',
      expect.stringMatching(/^A Twilio message is not JSON/),
    ]);
    expect(calls[0]!.bridge.stats.warnings).toBe(7);
    expect(groupByMark(twilio.received).groups.map((g) => g.mark)).toEqual(['response-1']);
  });

  it('an unsupported mediaFormat fails the call with a ValidationError naming what was found and accepted', async () => {
    const { connect, calls } = await setup();
    const baseline = countHandles();
    const twilio = await connect();
    twilio.open({ encoding: 'audio/x-alaw', sampleRate: 8000, channels: 1 });
    expect(await twilio.closed).toBe(1011);
    const error = await calls[0]!.done.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).field).toBe('start.mediaFormat');
    expect((error as ValidationError).message).toBe(
      'Invalid start.mediaFormat: expected "audio/x-mulaw" at 8000 Hz, 1 channel (G.711 mu-law) (got "audio/x-alaw" at 8000 Hz, 1 channel).',
    );
    expect(calls[0]!.bridge.translator.destroyed).toBe(true);
    await expectNoLeakedHandles(baseline);
  });

  it('closing the Twilio socket mid-call ends the session cleanly and leaves no open handles', async () => {
    const { connect, calls } = await setup();
    const emulator = emulators[0]!;
    const baseline = countHandles();
    const twilio = await connect();
    twilio.open();
    // Half of sentence 1: no utterance has ended yet.
    const sent = frameAt((FIXTURE.utterances[0]!.startSample + FIXTURE.utterances[0]!.endSample) / 2);
    twilio.media(0, sent);
    // Closed at once: what arrived before the close still reaches the bridge and the service.
    twilio.ws.close(1000);
    await calls[0]!.done;
    const { bridge } = calls[0]!;
    expect(bridge.stats.mediaMessages).toBe(sent);
    // The translator's session ended properly: the speech it had was answered (audio dropped:
    // nobody is listening any more).
    expect(bridge.translator.stats.responses).toBe(1);
    expect(bridge.stats.outboundFrames).toBe(0);
    expect(bridge.destroyed).toBe(true);
    expect(bridge.translator.closed).toBe(true);
    expect(emulator.realtimeSessions()).toEqual([]);
    await expectNoLeakedHandles(baseline);
  });
});

/* ------------------------------------------------------------------------------------------- */
/* The example server: X-Twilio-Signature                                                      */

describe('the example bridge server checks X-Twilio-Signature when it has the auth token', () => {
  const TOKEN = 'twilio-auth-token-for-tests';

  it("computes Twilio's signature (its documented example, and one computed here)", () => {
    // Twilio's documented example: auth token 12345, this URL, these POST parameters.
    const params: Array<[string, string]> = [
      ['CallSid', 'CA1234567890ABCDE'],
      ['Caller', '+12349013030'],
      ['Digits', '1234'],
      ['From', '+12349013030'],
      ['To', '+18005551212'],
    ];
    const url = 'https://mycompany.com/myapp.php?foo=1&bar=2';
    expect(twilioSignature('12345', url, [...params].reverse())).toBe('0/KCTR6DLpKmkAf8muzZqo1nDgQ=');
    expect(isTwilioSignatureValid('12345', '0/KCTR6DLpKmkAf8muzZqo1nDgQ=', url, params)).toBe(true);
    expect(isTwilioSignatureValid('12346', '0/KCTR6DLpKmkAf8muzZqo1nDgQ=', url, params)).toBe(false);
    expect(isTwilioSignatureValid('12345', '0/KCTR6DLpKmkAf8muzZqo1nDgQ=', `${url}&x=1`, params)).toBe(false);
    expect(isTwilioSignatureValid('12345', undefined, url, params)).toBe(false);
    // No parameters (a WebSocket handshake): the URL alone.
    const wss = 'wss://bridge.example/twilio/media';
    expect(twilioSignature(TOKEN, wss)).toBe(createHmac('sha1', TOKEN).update(wss).digest('base64'));
  });

  it('a Media Stream handshake or a TwiML request without a valid signature gets 403; a signed one is served', async () => {
    const emulator = await startEmulator({ port: 0, apiKeys: [KEY], latencyMs: 0 });
    emulators.push(emulator);
    const calls: TwilioCall[] = [];
    const server = await startTwilioBridgeServer({
      authToken: TOKEN,
      publicHost: 'bridge.example',
      bridge: {
        from: 'en-us',
        to: 'es-es',
        apiKey: KEY,
        realtimeUrl: emulator.realtimeUrl,
        quietPeriodMs: 200,
        maxAheadMs: AHEAD_MS,
        maxTimestampLeadMs: AHEAD_MS,
      },
      onCall: (call) => calls.push(call),
    });
    servers.push(server);
    // Computed here, independently: HMAC-SHA1 of the wss URL Twilio connects to, keyed with the token.
    const signed = createHmac('sha1', TOKEN).update('wss://bridge.example/twilio/media').digest('base64');
    const refused = async (headers?: Record<string, string>) => {
      const error = await FakeTwilio.connect(server.url, headers).then(
        (client) => {
          clients.push(client);
          return undefined;
        },
        (e: unknown) => e,
      );
      return (error as Error | undefined)?.message;
    };
    expect(await refused()).toBe('Unexpected server response: 403');
    expect(await refused({ 'X-Twilio-Signature': signed.replace(/^./, (c) => (c === 'A' ? 'B' : 'A')) })).toBe('Unexpected server response: 403');
    expect(calls).toHaveLength(0);

    const twilio = await FakeTwilio.connect(server.url, { 'X-Twilio-Signature': signed });
    clients.push(twilio);
    twilio.open();
    twilio.media(0, 10);
    twilio.stop();
    expect(await twilio.closed).toBe(1000);
    expect(calls).toHaveLength(1);
    await calls[0]!.done;
    expect(calls[0]!.bridge.stats.mediaMessages).toBe(10);

    // The TwiML webhook: POST parameters are signed after the https URL, sorted by name.
    const body = 'To=%2B18005551212&CallSid=CA0001&From=%2B12349013030';
    const post = (signature?: string) =>
      new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = request(
          `http://127.0.0.1:${server.port}/twiml`,
          { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', ...(signature ? { 'x-twilio-signature': signature } : {}) } },
          (res) => {
            let text = '';
            res.setEncoding('utf8');
            res.on('data', (t: string) => (text += t));
            res.on('end', () => resolve({ status: res.statusCode!, text }));
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    const webhookSignature = createHmac('sha1', TOKEN)
      .update('https://bridge.example/twiml' + 'CallSidCA0001' + 'From+12349013030' + 'To+18005551212')
      .digest('base64');
    expect((await post()).status).toBe(403);
    expect((await post(signed)).status).toBe(403);
    const ok = await post(webhookSignature);
    expect(ok.status).toBe(200);
    expect(ok.text).toContain('<Stream url="wss://bridge.example/twilio/media" />');
  });
});

/* ------------------------------------------------------------------------------------------- */
/* Unit: the message codec                                                                     */

describe('parseTwilioMessage', () => {
  it("parses Twilio's messages from literal JSON", () => {
    expect(parseTwilioMessage('{"event":"connected","protocol":"Call","version":"1.0.0"}')).toEqual({
      event: 'connected',
      protocol: 'Call',
      version: '1.0.0',
    });
    expect(
      parseTwilioMessage(
        '{"event":"start","sequenceNumber":"1","start":{"accountSid":"AC1","streamSid":"MZ1","callSid":"CA1",' +
          '"tracks":["inbound"],"mediaFormat":{"encoding":"audio/x-mulaw","sampleRate":8000,"channels":1},' +
          '"customParameters":{"lang":"fr"}},"streamSid":"MZ1"}',
      ),
    ).toEqual({
      event: 'start',
      sequenceNumber: 1,
      start: {
        streamSid: 'MZ1',
        callSid: 'CA1',
        accountSid: 'AC1',
        tracks: ['inbound'],
        mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 },
        customParameters: { lang: 'fr' },
      },
    });
    expect(
      parseTwilioMessage(
        Buffer.from('{"event":"media","sequenceNumber":"3","media":{"track":"inbound","chunk":"2","timestamp":"25","payload":"/38A"},"streamSid":"MZ1"}'),
      ),
    ).toEqual({ event: 'media', sequenceNumber: 3, streamSid: 'MZ1', track: 'inbound', chunk: 2, timestamp: 25, audio: Buffer.from([0xff, 0x7f, 0x00]) });
    expect(parseTwilioMessage('{"event":"mark","sequenceNumber":"4","streamSid":"MZ1","mark":{"name":"response-1"}}')).toEqual({
      event: 'mark',
      sequenceNumber: 4,
      streamSid: 'MZ1',
      name: 'response-1',
    });
    expect(parseTwilioMessage('{"event":"dtmf","streamSid":"MZ1","sequenceNumber":"5","dtmf":{"track":"inbound_track","digit":"#"}}')).toEqual({
      event: 'dtmf',
      sequenceNumber: 5,
      streamSid: 'MZ1',
      track: 'inbound_track',
      digit: '#',
    });
    expect(parseTwilioMessage('{"event":"stop","sequenceNumber":"6","stop":{"accountSid":"AC1","callSid":"CA1"},"streamSid":"MZ1"}')).toEqual({
      event: 'stop',
      sequenceNumber: 6,
      streamSid: 'MZ1',
      callSid: 'CA1',
    });
    expect(parseTwilioMessage({ event: 'media', media: { payload: '' } })).toEqual({ event: 'media', track: 'inbound', audio: Buffer.alloc(0) });
    expect(parseTwilioMessage('{"event":"future-thing","x":1}')).toEqual({ event: 'unknown', wireEvent: 'future-thing' });
  });

  it.each([
    ['not JSON', '{"event":', /is not JSON/],
    ['an array', '[1,2]', /must be a JSON object \(got an array\)/],
    ['no event', '{"type":"media"}', /has no "event" name/],
    ['media without payload', '{"event":"media","media":{}}', /media\.payload must be a base64 string \(got undefined\)/],
    ['bad base64', '{"event":"media","media":{"payload":"ab$="}}', /not valid base64/],
    ['negative timestamp', '{"event":"media","media":{"payload":"","timestamp":"-20"}}', /media\.timestamp must be a non-negative integer \(got "-20"\)/],
    ['start without streamSid', '{"event":"start","start":{}}', /"start" message: no streamSid/],
    ['mark without name', '{"event":"mark","mark":{}}', /mark\.name must be a string/],
    ['dtmf without digit', '{"event":"dtmf"}', /dtmf\.digit must be a string/],
  ])('%s is a ProtocolError', (_name, text, message) => {
    let error: unknown;
    try {
      parseTwilioMessage(text);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ProtocolError);
    expect((error as ProtocolError).code).toBe('RTT_PROTOCOL');
    expect((error as ProtocolError).message).toMatch(message);
  });

  it('refuses a message over the size limit without parsing it', () => {
    expect(() => parseTwilioMessage(`{"event":"media","media":{"payload":"${'A'.repeat(200)}"}}`, 100)).toThrow(
      /A Twilio message of 240 bytes is over the 100-byte limit/,
    );
  });

  it('builds the outbound messages', () => {
    expect(JSON.stringify(twilioMediaMessage('MZ1', Buffer.from([0xff, 0x7f])))).toBe('{"event":"media","streamSid":"MZ1","media":{"payload":"/38="}}');
    expect(JSON.stringify(twilioMarkMessage('MZ1', 'response-2'))).toBe('{"event":"mark","streamSid":"MZ1","mark":{"name":"response-2"}}');
    expect(JSON.stringify(twilioClearMessage('MZ1'))).toBe('{"event":"clear","streamSid":"MZ1"}');
    expect(() => twilioClearMessage('')).toThrow(ValidationError);
  });

  it('accepts only mu-law 8 kHz mono', () => {
    expect(checkTwilioMediaFormat(undefined)).toEqual({ encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 });
    expect(checkTwilioMediaFormat({ encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 })).toEqual({
      encoding: 'audio/x-mulaw',
      sampleRate: 8000,
      channels: 1,
    });
    expect(() => checkTwilioMediaFormat({ encoding: 'audio/x-mulaw', sampleRate: 16000, channels: 2 })).toThrow(
      'Invalid start.mediaFormat: expected "audio/x-mulaw" at 8000 Hz, 1 channel (G.711 mu-law) (got "audio/x-mulaw" at 16000 Hz, 2 channels).',
    );
  });
});

/* ------------------------------------------------------------------------------------------- */
/* Unit: timeline and onset detector                                                           */

describe('MediaTimeline', () => {
  it('fills gaps from timestamps, bounded, ignoring jitter and late stamps', () => {
    const t = new MediaTimeline({ sampleRate: 8000, maxFillMs: 1000, toleranceMs: 10 });
    expect(t.next(0, 160)).toEqual({ fillSamples: 0, cutSamples: 0 });
    expect(t.next(20, 160)).toEqual({ fillSamples: 0, cutSamples: 0 });
    expect(t.next(45, 160)).toEqual({ fillSamples: 0, cutSamples: 0 }); // 5 ms late: jitter
    expect(t.position).toBe(480);
    expect(t.next(160, 160)).toEqual({ fillSamples: 800, cutSamples: 0 }); // 100 ms missing
    expect(t.next(undefined, 160)).toEqual({ fillSamples: 0, cutSamples: 0 });
    expect(t.next(100, 160)).toEqual({ fillSamples: 0, cutSamples: 0 }); // behind: taken as is
    expect(t.position).toBe(1760);
    expect(t.next(5240, 160)).toEqual({ fillSamples: 8000, cutSamples: 32160 }); // 5.02 s gap, 1 s filled
    // The cut part is skipped: the timeline is rebased on the frame's stamp.
    expect(t.position).toBe(5260 * 8);
    expect(t.next(5260, 160)).toEqual({ fillSamples: 0, cutSamples: 0 });
    expect(new MediaTimeline({ sampleRate: 8000, maxFillMs: 0 }).next(1000, 160)).toEqual({ fillSamples: 0, cutSamples: 8000 });
    expect(() => new MediaTimeline({ sampleRate: 8000, maxFillMs: -1 })).toThrow(ValidationError);
  });

  it('after a gap longer than maxFillMs, the frames that follow are on time: nothing more is filled or cut', () => {
    const t = new MediaTimeline({ sampleRate: 8000 }); // maxFillMs 1000
    let ts = 0;
    for (let i = 0; i < 5; i++, ts += 20) expect(t.next(ts, 160)).toEqual({ fillSamples: 0, cutSamples: 0 });
    ts += 3000; // a 3 s hole in the stamps
    const steps = [];
    for (let i = 0; i < 6; i++, ts += 20) steps.push(t.next(ts, 160));
    expect(steps).toEqual([
      { fillSamples: 8000, cutSamples: 16000 }, // 1 s filled, 2 s cut, once
      ...Array.from({ length: 5 }, () => ({ fillSamples: 0, cutSamples: 0 })),
    ]);
    expect(t.position).toBe(ts * 8);
    // A later real gap is measured from the rebased position.
    expect(t.next(ts + 100, 160)).toEqual({ fillSamples: 800, cutSamples: 0 });
    // maxFillMs 0: each gap is cut once, then the stream is on time again.
    const off = new MediaTimeline({ sampleRate: 8000, maxFillMs: 0 });
    expect(off.next(1000, 160)).toEqual({ fillSamples: 0, cutSamples: 8000 });
    expect(off.next(1020, 160)).toEqual({ fillSamples: 0, cutSamples: 0 });
  });
});

describe('SpeechOnsetDetector', () => {
  /** PCM16 8 kHz: `ms` of a 300 Hz tone at `dbfs` RMS (0 = silence). */
  function tone(ms: number, dbfs: number | null): Buffer {
    const samples = ms * 8;
    const out = Buffer.alloc(samples * 2);
    if (dbfs === null) return out;
    const amplitude = 32768 * 10 ** (dbfs / 20) * Math.SQRT2;
    for (let i = 0; i < samples; i++) out.writeInt16LE(Math.round(amplitude * Math.sin((2 * Math.PI * 300 * i) / 8000)), i * 2);
    return out;
  }

  it('reports one onset per run of loud frames, in any chunking', () => {
    const audio = Buffer.concat([tone(200, null), tone(300, -20), tone(100, null), tone(80, -20), tone(100, null), tone(120, -20)]);
    for (const size of [audio.length, 320, 7, 1]) {
      const detector = new SpeechOnsetDetector({ sampleRate: 8000 });
      let onsets = 0;
      for (let at = 0; at < audio.length; at += size) onsets += detector.push(audio.subarray(at, at + size));
      expect(onsets, `chunks of ${size}`).toBe(2); // the 80 ms burst is shorter than minSpeechMs
    }
  });

  it('finds the same onsets in mu-law as in the PCM16 it decodes to, frame for frame', () => {
    // Levels that straddle the threshold, so a level computed any differently would show.
    const levels = [-60, -36, -35.2, -34.8, -30, -20, -35.01, -34.99, -50, -10, -35, -33];
    const pcm = Buffer.concat(levels.flatMap((db) => [tone(60, db), tone(20, null)]));
    const mulaw = Buffer.alloc(pcm.length / 2);
    for (let i = 0; i < mulaw.length; i++) mulaw[i] = encodeMulaw(pcm.readInt16LE(i * 2));
    const samples = decodeMulaw(mulaw);
    const decoded = Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength);
    for (const size of [mulaw.length, 160, 13, 1]) {
      const fromPcm = new SpeechOnsetDetector({ sampleRate: 8000, minSpeechMs: 40 });
      const fromMulaw = new SpeechOnsetDetector({ sampleRate: 8000, minSpeechMs: 40, encoding: 'mulaw' });
      const trace: Array<[number, boolean, number, boolean]> = [];
      for (let at = 0; at < mulaw.length; at += size) {
        const end = Math.min(at + size, mulaw.length);
        trace.push([fromPcm.push(decoded.subarray(at * 2, end * 2)), fromPcm.speaking, fromMulaw.push(mulaw.subarray(at, end)), fromMulaw.speaking]);
      }
      for (const [a, speakingA, b, speakingB] of trace) expect([b, speakingB]).toEqual([a, speakingA]);
      expect(
        trace.reduce((n, [a]) => n + a, 0),
        `chunks of ${size}`,
      ).toBeGreaterThan(3);
    }
    expect(() => new SpeechOnsetDetector({ sampleRate: 8000, encoding: 'alaw' as never })).toThrow(/encoding.*pcm16, mulaw/);
  });

  it('decides each mu-law frame as its mean square does, wherever in the frame its energy lies', () => {
    // The detector may stop summing a frame once its partial sum decides it: frames loud only at
    // their start, only at their end, or throughout, each against thresholds just under and
    // just over its own level, must come out as the whole frame's mean square says.
    const squares = g711SquareTable(MULAW_DECODE_TABLE);
    const random = prng(7);
    let decided = 0;
    for (let k = 0; k < 600; k++) {
      const frame = Buffer.alloc(160);
      const loudFrom = [0, 0, 96, 150][k % 4]!;
      const loudTo = [160, 32, 160, 160][k % 4]!;
      const amplitude = 200 + random() * 12000;
      for (let i = 0; i < 160; i++)
        frame[i] = encodeMulaw(i >= loudFrom && i < loudTo ? Math.round((random() * 2 - 1) * amplitude) : Math.round((random() * 2 - 1) * 20));
      const level = meanSquareG711(frame, 0, 160, squares);
      const dbfs = 10 * Math.log10(level / 32768 ** 2);
      for (const thresholdDbfs of [dbfs - 0.001, dbfs + 0.001, dbfs - 3, dbfs + 3]) {
        const detector = new SpeechOnsetDetector({ sampleRate: 8000, minSpeechMs: 20, thresholdDbfs, encoding: 'mulaw' });
        detector.push(frame);
        expect(detector.speaking, `frame ${k} at ${thresholdDbfs} dBFS`).toBe(level > dbfsToMeanSquare(thresholdDbfs));
        if (detector.speaking) decided++;
      }
    }
    expect(decided).toBeGreaterThan(600); // about half of the 2,400 decisions are loud
    // At the tie and the doubles either side of it: above only strictly above.
    const frame = Buffer.from(Array.from({ length: 160 }, (_, i) => encodeMulaw(i < 40 ? 9000 : -300)));
    const level = meanSquareG711(frame, 0, 160, squares);
    const below = level * (1 - Number.EPSILON);
    const above = level * (1 + Number.EPSILON);
    expect([below, level, above].map((t) => meanSquareG711Above(frame, 0, 160, squares, t))).toEqual([true, false, false]);
  });

  it('ignores audio under the threshold', () => {
    const detector = new SpeechOnsetDetector({ sampleRate: 8000, thresholdDbfs: -35, minSpeechMs: 40 });
    expect(detector.push(tone(500, -40))).toBe(0);
    expect(detector.push(tone(60, -30))).toBe(1);
    expect(detector.speaking).toBe(true);
  });
});
