/**
 * One measured window of `concurrency.bench.ts`, in a process of its own: the bench forks this
 * module for every window, so that each path is measured in a process no other path ran in.
 * (In one shared process the baselines moved by a third to a half with what had run before
 * them, while the library's own cost stayed put. A guess, not measured: V8 compiles the code
 * both paths share, `ws` and Node's streams, for whichever pattern it sees first.) Driven over
 * the fork IPC channel:
 *
 * - on start it sends `{ type: 'ready' }`;
 * - `{ type: 'measure', path, sessions, seconds, realtimeUrl }` opens the path's sessions against
 *   the emulator at `realtimeUrl`; once they have all started and run through the warm-up it
 *   sends `{ type: 'warm' }` and waits for `{ type: 'go' }` (so that windows measured together
 *   start together), measures one window and answers `{ type: 'measured', scenario }`;
 *   the Twilio paths ask the bench for their callers with `{ type: 'callers', url, count,
 *   seconds }` and wait for its `{ type: 'callers-done', ...stats }`;
 * - `{ type: 'exit' }` ends the process (so does the bench going away).
 */
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay, performance, PerformanceObserver } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import { createOpusCodec } from '../lib/audio/opus.js';
import { translateSpeaker } from '../lib/integrations/discord.js';
import { TwilioMediaBridge } from '../lib/integrations/twilio.js';
import { bridgeTwilioSocket } from '../lib/integrations/twilio-socket.js';
import { planConversion } from '../lib/audio/convert.js';
import { createResampleProcessor } from '../lib/audio/resampler.js';
import { RealtimeTranslateStream } from '../lib/realtime/realtime-translate-stream.js';
import { cpuNow, destroyAll, startCpuProfile, terminateAll } from './harness.js';
import { IpcLink } from './ipc.js';
import {
  CONCURRENCY_KEY,
  connectLimitMs,
  FrameClock,
  WARMUP_MS,
  opusMaterial,
  serviceFrames,
  type OpusMaterial,
  type PathName,
  type Scenario,
} from './concurrency-shared.js';

/** The link to the bench that forked this process. */
const bench = new IpcLink(process, 'disconnect', 'the concurrency bench');

interface Opened {
  /** Sessions whose `session.created` has arrived. */
  active(): number;
  /** Output bytes (or messages, for Twilio) received so far. */
  output(): number;
  close(): Promise<void>;
}

/**
 * The appends of the Twilio and Discord paths (and their by-hand paths): the Twilio bridge sends
 * the caller's audio in appends of 100 ms (its `appendMs`), and the Discord path cuts the
 * receiver's audio into 100 ms chunks (`translateSpeaker`). The plain path writes `PLAIN_FRAMES`.
 */
const APPEND_FRAMES = Number(process.env.CONCURRENCY_APPEND_FRAMES ?? 5);
/**
 * The writes of the plain path and its bare client: one 20 ms frame each by default, as a
 * microphone or a phone line delivers audio, each sent as its own append. Every piece of work
 * the stream does per write is paid 50 times a second per session here.
 */
const PLAIN_FRAMES = Number(process.env.CONCURRENCY_PLAIN_FRAMES ?? 1);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const pcmFrames = serviceFrames();
const APPEND_PREFIX = '{"type":"input_audio_buffer.append","audio":"';

function randomStart(length: number): number {
  return Math.floor(Math.random() * length);
}

// --- the paths -------------------------------------------------------------------------------

/**
 * A bare realtime client: a `ws` socket doing the protocol's JSON and base64 work by hand.
 * `onActive` once the session exists; `onAudio` with each piece of translated audio.
 */
interface BareSession {
  ws: WebSocket;
  append(pcm: Buffer): void;
}

function bareSession(url: string, onActive: () => void, onAudio: (pcm: Buffer) => void, onDone: () => void = () => {}): BareSession {
  const ws = new WebSocket(`${url}/v1/realtime`, { headers: { 'x-api-key': CONCURRENCY_KEY }, perMessageDeflate: false });
  let started = false;
  ws.on('error', () => {});
  ws.on('open', () => ws.send(JSON.stringify({ type: 'session.update', session: { source_language: 'en-us', target_language: 'es-es' } })));
  ws.on('message', (data: Buffer, isBinary: boolean) => {
    if (isBinary) return onAudio(data);
    const event = JSON.parse(data.toString('utf8')) as { type: string; delta?: string };
    if (event.type === 'response.audio.delta' && event.delta) onAudio(Buffer.from(event.delta, 'base64'));
    else if (event.type === 'response.audio.done') onDone();
    else if (event.type === 'session.created' && !started) {
      started = true;
      onActive();
    }
  });
  return {
    ws,
    append: (pcm) => {
      if (ws.readyState === ws.OPEN) ws.send(APPEND_PREFIX + pcm.toString('base64') + '"}');
    },
  };
}

function openBare(n: number, url: string, clock: FrameClock): Opened {
  let active = 0;
  let bytes = 0;
  const sockets: WebSocket[] = [];
  for (let i = 0; i < n; i++) {
    let frame = randomStart(pcmFrames.length);
    const batch: Buffer[] = [];
    const session = bareSession(
      url,
      () => {
        active++;
        clock.add(() => {
          batch.push(pcmFrames[frame]!);
          frame = (frame + 1) % pcmFrames.length;
          if (batch.length < PLAIN_FRAMES) return;
          session.append(Buffer.concat(batch));
          batch.length = 0;
        });
      },
      (pcm) => (bytes += pcm.length),
    );
    sockets.push(session.ws);
  }
  return { active: () => active, output: () => bytes, close: () => terminateAll(sockets) };
}

/** Phone calls in progress: the callers' statistics once they hang up, and how to end them. */
interface PhoneCalls {
  done: Promise<Record<string, number>>;
  /** Ends the calls' bridges with `endCalls`, then closes the server. */
  close(endCalls: () => Promise<void>): Promise<void>;
}

/**
 * A `ws` server on loopback that the callers' process calls `n` times, each call for `seconds`
 * (asked of the bench, which passes the request on); `onCall` bridges each call that arrives.
 */
async function phoneCalls(n: number, seconds: number, onCall: (call: WebSocket) => void): Promise<PhoneCalls> {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: false, maxPayload: 64 * 1024 });
  await once(wss, 'listening');
  wss.on('connection', onCall);
  const url = `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`;
  const done = bench.request({ type: 'callers', url, count: n, seconds }, 'callers-done');
  // Awaited once the window is measured, which reports a failure; none is left unhandled before.
  done.catch(() => {});
  return {
    done,
    close: async (endCalls) => {
      await endCalls();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}

/**
 * The bare Twilio bridge: what the Twilio path does, by hand, with the library's converters:
 * each caller message parsed, its mu-law decoded and resampled to 24 kHz, sent in 100 ms
 * appends; each translated piece resampled to 8 kHz mu-law and sent as 20 ms media messages
 * (a remainder kept for the next piece, a response's last frame padded), a mark after each
 * response. No validation, barge-in, timeline or backpressure.
 */
async function openBareTwilio(n: number, url: string, seconds: number): Promise<Opened & { done: Promise<Record<string, number>> }> {
  let active = 0;
  let messages = 0;
  const sockets: WebSocket[] = [];
  const calls = await phoneCalls(n, seconds, (call) => {
    sockets.push(call);
    let sid = '';
    let responses = 0;
    const inbound = createResampleProcessor(8000, 24000, 1, { decode: 'mulaw' });
    let outbound = createResampleProcessor(24000, 8000, 1, { encode: 'mulaw' });
    const appendBytes = APPEND_FRAMES * 960;
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    // As the library does: a piece's mu-law that does not fill a 20 ms frame waits for the next
    // piece, and a response's last frame is padded with silence, so no audio is dropped.
    let rest: Buffer = Buffer.alloc(0);
    const sendMedia = (converted: Buffer, last = false) => {
      let mulaw = rest.length > 0 ? Buffer.concat([rest, converted]) : converted;
      if (last && mulaw.length % 160 !== 0) mulaw = Buffer.concat([mulaw, Buffer.alloc(160 - (mulaw.length % 160), 0xff)]);
      let at = 0;
      for (; at + 160 <= mulaw.length; at += 160) {
        call.send(`{"event":"media","streamSid":"${sid}","media":{"payload":"${mulaw.subarray(at, at + 160).toString('base64')}"}}`);
        messages++;
      }
      rest = mulaw.subarray(at);
    };
    const session = bareSession(
      url,
      () => active++,
      (pcm) => sendMedia(outbound.process(pcm)),
      () => {
        sendMedia(outbound.flush(), true);
        outbound = createResampleProcessor(24000, 8000, 1, { encode: 'mulaw' });
        call.send(`{"event":"mark","streamSid":"${sid}","mark":{"name":"response-${++responses}"}}`);
      },
    );
    sockets.push(session.ws);
    call.on('error', () => {});
    call.on('message', (data: Buffer) => {
      const message = JSON.parse(data.toString('utf8')) as { event: string; start?: { streamSid: string }; media?: { payload: string } };
      if (message.event === 'start') sid = message.start!.streamSid;
      if (message.event !== 'media') return;
      const pcm = inbound.process(Buffer.from(message.media!.payload, 'base64'));
      pending.push(pcm);
      pendingBytes += pcm.length;
      if (pendingBytes < appendBytes) return;
      session.append(pending.length === 1 ? pending[0]! : Buffer.concat(pending));
      pending = [];
      pendingBytes = 0;
    });
  });
  return {
    active: () => active,
    output: () => messages,
    done: calls.done,
    close: () => calls.close(() => terminateAll(sockets)),
  };
}

/**
 * The bare Discord path: the same packets decoded by the same Opus codec, converted to the
 * service format by the library's converter and sent in 100 ms appends; translated audio
 * converted to 48 kHz stereo and cut into 3840-byte frames. No gap filling or validation.
 */
function openBareDiscord(n: number, url: string, clock: FrameClock, opus: OpusMaterial): Opened {
  let active = 0;
  let bytes = 0;
  const sockets: WebSocket[] = [];
  for (let i = 0; i < n; i++) {
    const decoder = createOpusCodec({ backend: opus.backend });
    const toService = planConversion({ format: 's16le', rate: 48000, channels: 2 }, { format: 's16le', rate: 24000, channels: 1 }).processor;
    const toDiscord = planConversion({ format: 's16le', rate: 24000, channels: 1 }, { format: 's16le', rate: 48000, channels: 2 }).processor;
    let slot = randomStart(opus.packets.length);
    const batch: Buffer[] = [];
    let batched = 0;
    const session = bareSession(
      url,
      () => {
        active++;
        clock.add(() => {
          const packet = opus.packets[slot];
          slot = (slot + 1) % opus.packets.length;
          batch.push(toService.process(packet ? decoder.decode(packet) : SILENT_FRAME));
          if (++batched < APPEND_FRAMES) return;
          session.append(Buffer.concat(batch));
          batch.length = 0;
          batched = 0;
        });
      },
      (pcm) => {
        const frames = toDiscord.process(pcm);
        for (let at = 0; at + 3840 <= frames.length; at += 3840) bytes += frames.subarray(at, at + 3840).length;
      },
    );
    sockets.push(session.ws);
  }
  return { active: () => active, output: () => bytes, close: () => terminateAll(sockets) };
}

const SILENT_FRAME = Buffer.alloc(3840);

function openPlain(n: number, url: string, clock: FrameClock): Opened {
  let active = 0;
  let bytes = 0;
  const streams: RealtimeTranslateStream[] = [];
  for (let i = 0; i < n; i++) {
    const stream = new RealtimeTranslateStream({ from: 'en-us', to: 'es-es', apiKey: CONCURRENCY_KEY, realtimeUrl: url });
    streams.push(stream);
    let frame = randomStart(pcmFrames.length);
    stream.on('error', () => {});
    stream.on('data', (chunk: Buffer) => (bytes += chunk.length));
    stream.once('session.created', () => {
      active++;
      const batch: Buffer[] = [];
      clock.add(() => {
        if (stream.destroyed) return;
        batch.push(pcmFrames[frame]!);
        frame = (frame + 1) % pcmFrames.length;
        if (batch.length < PLAIN_FRAMES) return;
        stream.write(Buffer.concat(batch));
        batch.length = 0;
      });
    });
  }
  return { active: () => active, output: () => bytes, close: () => destroyAll(streams) };
}

function openDiscord(n: number, url: string, clock: FrameClock, opus: OpusMaterial): Opened {
  let active = 0;
  let bytes = 0;
  const playbacks: Readable[] = [];
  for (let i = 0; i < n; i++) {
    const source = new Readable({ objectMode: true, read() {} });
    const path = translateSpeaker({
      opusPackets: source,
      output: 'pcm',
      from: 'en-us',
      to: 'es-es',
      apiKey: CONCURRENCY_KEY,
      realtimeUrl: url,
      opusBackend: opus.backend,
    });
    path.done.catch(() => {});
    playbacks.push(path.playback);
    let slot = randomStart(opus.packets.length);
    path.playback.on('data', (frame: Buffer) => (bytes += frame.length));
    path.translator.once('session.created', () => {
      active++;
      clock.add(() => {
        if (source.destroyed) return;
        const packet = opus.packets[slot];
        slot = (slot + 1) % opus.packets.length;
        if (packet) source.push(packet);
      });
    });
  }
  return { active: () => active, output: () => bytes, close: () => destroyAll(playbacks) };
}

async function openTwilio(n: number, url: string, seconds: number): Promise<Opened & { done: Promise<Record<string, number>> }> {
  const bridges = new Set<TwilioMediaBridge>();
  let active = 0;
  let messages = 0;
  let connections = 0;
  if (process.env.CONCURRENCY_DEBUG) {
    const t = setInterval(() => console.error(`twilio: ${connections} calls connected, ${active} sessions started`), 2000);
    t.unref();
  }
  const calls = await phoneCalls(n, seconds, (ws) => {
    connections++;
    const bridge = new TwilioMediaBridge({ from: 'en-us', to: 'es-es', apiKey: CONCURRENCY_KEY, realtimeUrl: url, appendMs: APPEND_FRAMES * 20 });
    bridges.add(bridge);
    bridge.translator.once('session.created', () => active++);
    bridge.on('data', () => messages++);
    bridgeTwilioSocket(ws, bridge).catch((error: unknown) => {
      if (process.env.CONCURRENCY_DEBUG) console.error(`bridge failed: ${String(error)}`);
    });
  });
  return {
    active: () => active,
    output: () => messages,
    done: calls.done,
    close: () => calls.close(() => destroyAll([...bridges])),
  };
}

// --- measuring ------------------------------------------------------------------------------

/** Waits for the sessions to start; returns how many did (all, or as many as could in time). */
async function waitActive(opened: Opened, n: number, timeoutMs: number): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  while (opened.active() < n && performance.now() < deadline) await sleep(100);
  return opened.active();
}

/** Time spent in garbage collection (on the main thread's pauses) from now until `stop()`, in ms. */
function gcTime(): { stop(): number } {
  let total = 0;
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) total += entry.duration;
  });
  observer.observe({ entryTypes: ['gc'] });
  return {
    stop: () => {
      for (const entry of observer.takeRecords()) total += entry.duration;
      observer.disconnect();
      return total;
    },
  };
}

/** Opens `n` sessions of `path` against the emulator at `url`, and measures one window of them. */
async function measure(path: PathName, n: number, seconds: number, url: string): Promise<Scenario> {
  const clock = new FrameClock();
  let opened: Opened;
  let twilioDone: Promise<Record<string, number>> | undefined;
  const connectMs = connectLimitMs(n);
  const callSeconds = (connectMs + WARMUP_MS) / 1000 + seconds + 1;
  if (path === 'bare') opened = openBare(n, url, clock);
  else if (path === 'plain') opened = openPlain(n, url, clock);
  else if (path === 'discord') opened = openDiscord(n, url, clock, opus());
  else if (path === 'bare-discord') opened = openBareDiscord(n, url, clock, opus());
  else {
    const t = path === 'twilio' ? await openTwilio(n, url, callSeconds) : await openBareTwilio(n, url, callSeconds);
    opened = t;
    twilioDone = t.done;
  }
  const started = await waitActive(opened, n, connectMs);
  await sleep(WARMUP_MS);
  await bench.request({ type: 'warm' }, 'go');
  const lag = monitorEventLoopDelay({ resolution: 10 });
  lag.enable();
  const gc = gcTime();
  clock.resetCounters();
  const profile = await startCpuProfile(process.env.CONCURRENCY_PROFILE, 200);
  const outputBefore = opened.output();
  const cpu0 = cpuNow();
  const t0 = performance.now();
  await sleep(seconds * 1000);
  const cpu1 = cpuNow();
  const cpuSeconds = (cpu1.total - cpu0.total) / 1000;
  const wallSeconds = (performance.now() - t0) / 1000;
  lag.disable();
  const gcMs = gc.stop();
  await profile?.(`${path}-${n}-${Date.now()}`);
  const output = opened.output() - outputBefore;
  let note = twilioDone ? '' : `source: ${clock.lateFrames} of ${clock.frames} frames sent over 20 ms late`;
  clock.stop();
  if (twilioDone) {
    const stats = await twilioDone;
    note = `callers: ${stats.lateFrames} of ${stats.frames} frames sent over 20 ms late, ${stats.failed} socket errors`;
  }
  note += `; garbage collection ${((gcMs / 1000 / wallSeconds) * 100).toFixed(1)} % of the window`;
  if (cpu0.others !== undefined && cpu1.others !== undefined) {
    const share = (cpu1.others - cpu0.others) / Math.max(1, cpu1.total - cpu0.total);
    note += `; ${(share * 100).toFixed(0)} % of the CPU off the main thread`;
  }
  await opened.close();
  return {
    path,
    sessions: n,
    started,
    cpuPerHour: (cpuSeconds * 3600) / (Math.max(1, started) * wallSeconds),
    corePercent: (cpuSeconds / wallSeconds) * 100,
    lagP99: lag.percentile(99) / 1e6,
    lagMax: lag.max / 1e6,
    outputPerSession: output / Math.max(1, started) / wallSeconds,
    note: started < n ? `${note}; ${started} of ${n} sessions started` : note,
  };
}

// --- the window's process -------------------------------------------------------------------

let material: OpusMaterial | undefined;
/** The Discord paths' packets, encoded on first use (only their windows need them). */
function opus(): OpusMaterial {
  material ??= opusMaterial();
  if (!material) throw new Error('no Opus backend is available for the Discord paths');
  return material;
}

process.on('message', (message: { type: string; path?: PathName; sessions?: number; seconds?: number; realtimeUrl?: string }) => {
  if (message.type === 'measure') {
    measure(message.path!, message.sessions!, message.seconds!, message.realtimeUrl!).then(
      (scenario) => bench.send({ type: 'measured', scenario }),
      (error: unknown) => bench.send({ type: 'error', message: String(error) }),
    );
  } else if (message.type === 'exit') {
    process.exit(0);
  }
});
bench.send({ type: 'ready' });
// The bench that started this process is gone (it failed or was stopped): so is this one.
process.on('disconnect', () => process.exit(0));
