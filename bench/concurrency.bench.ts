/**
 * CPU per session-hour and event-loop lag for N concurrent sessions at real time, on each path,
 * each against a bare `ws` client doing the same work by hand:
 * - `plain`: `RealtimeTranslateStream` fed PCM16 mono 24 kHz; `bare`: a `ws` client doing the
 *   protocol's JSON and base64 work by hand;
 * - `twilio`: `TwilioMediaBridge` + `bridgeTwilioSocket` behind a `ws` server, the calls coming
 *   from another process (20 ms mu-law `media` messages at real time, marks echoed);
 *   `bare-twilio`: the same bridging by hand (`openBareTwilio`);
 * - `discord`: `translateSpeaker` (Opus packets in as a voice receiver gives them, nothing
 *   during silence; 48 kHz stereo PCM frames out, as `StreamType.Raw` takes them);
 *   `bare-discord`: the same by hand (`openBareDiscord`).
 * The plain path and its bare client write 20 ms frames, each its own append (`PLAIN_FRAMES`); the
 * Twilio and Discord paths send 100 ms appends (`APPEND_FRAMES`), as the adapters do.
 * Every source sends the speech fixture in 20 ms frames at real time, each session from its own
 * point of the speech and phase of the 20 ms grid. The emulator runs in another process
 * (`concurrency-peer.ts`), the phone callers in a third one. Measured in this process, over a window
 * after a warm-up: CPU time (user + system) per hour of session time, the share of one core,
 * and the event loop's lag (p99 and max, `monitorEventLoopDelay`). Before each window all three
 * processes run a full garbage collection, so no window pays for the garbage of the one before.
 *
 * The Discord path also decodes Opus, work any Discord client does, and so does its by-hand
 * path; the bare decode of the same packets is timed and printed for scale. Each path's figure
 * is its CPU over that of the same work by hand (and, for the plain path, the lag p99 over the
 * bare client's). Environment: `CONCURRENCY` (default "50,100,200"), `CONCURRENCY_PLAIN_FRAMES`
 * (frames per write of the plain path and its bare client, default 1), `CONCURRENCY_SECONDS` (measured
 * window, default 20), `CONCURRENCY_TWILIO_MAX` (the calls-on-one-core scenario, run first,
 * against the same work by hand at the same load; default 500, 0 to skip; it starts with
 * `CONCURRENCY_TWILIO_WARMUP_ROUNDS` unmeasured rounds of 10 s windows, default 1), `CONCURRENCY_PATHS`
 * (default "bare,plain,bare-twilio,twilio,bare-discord,discord"), `CONCURRENCY_ROUNDS` (windows
 * per path, in alternating order so that a change in the machine's load falls on every path;
 * default 2: the CPU figure is their mean, the lag their worst), `CONCURRENCY_PROFILE` (a
 * directory: each measured window's CPU profile is written there).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { WebSocket, WebSocketServer } from 'ws';
import { meanSquare } from '../lib/audio/level.js';
import { createOpusCodec, isOpusBackendAvailable, type OpusBackend } from '../lib/audio/opus.js';
import { translateSpeaker } from '../lib/integrations/discord.js';
import { TwilioMediaBridge } from '../lib/integrations/twilio.js';
import { bridgeTwilioSocket } from '../lib/integrations/twilio-socket.js';
import { planConversion } from '../lib/audio/convert.js';
import { createResampleProcessor } from '../lib/audio/resampler.js';
import { RealtimeTranslateStream } from '../lib/realtime/realtime-translate-stream.js';
import { collect, cpuMsNow, destroyAll, record, startCpuProfile, terminateAll } from './harness.js';
import { CONCURRENCY_KEY, FrameClock, discordFrames, serviceFrames } from './concurrency-shared.js';

type PathName = 'bare' | 'plain' | 'bare-twilio' | 'twilio' | 'bare-discord' | 'discord';

interface Opened {
  /** Sessions whose `session.created` has arrived. */
  active(): number;
  /** Output bytes (or messages, for Twilio) received so far. */
  output(): number;
  close(): Promise<void>;
}

interface Scenario {
  path: PathName;
  sessions: number;
  /** Sessions that started (all of them unless the machine could not keep up). */
  started: number;
  cpuPerHour: number;
  corePercent: number;
  lagP99: number;
  lagMax: number;
  outputPerSession: number;
  note: string;
}

const WARMUP_MS = 4000;
/**
 * The appends of every path: the plain and bare sources write 100 ms at a time (five 20 ms
 * frames), the Twilio bridge sends the caller's audio in appends of 100 ms (its `appendMs`),
 * and the Discord path cuts the receiver's audio into 100 ms chunks (`translateSpeaker`).
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

/**
 * The bare Twilio bridge: what the Twilio path does, by hand, with the library's converters:
 * each caller message parsed, its mu-law decoded and resampled to 24 kHz, sent in 100 ms
 * appends; each translated piece resampled to 8 kHz mu-law and sent as 20 ms media messages
 * (a remainder kept for the next piece, a response's last frame padded), a mark after each
 * response. No validation, barge-in, timeline or backpressure.
 */
async function openBareTwilio(n: number, url: string, callers: Peer, seconds: number): Promise<Opened & { done: Promise<Record<string, number>> }> {
  let active = 0;
  let messages = 0;
  const sockets: WebSocket[] = [];
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: false, maxPayload: 64 * 1024 });
  await once(wss, 'listening');
  wss.on('connection', (call) => {
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
  const done = callers.request({ type: 'callers', url: `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`, count: n, seconds }, 'callers-done');
  return {
    active: () => active,
    output: () => messages,
    done,
    close: async () => {
      await terminateAll(sockets);
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
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

interface OpusMaterial {
  backend: OpusBackend;
  /** One entry per 20 ms slot: the packet, or undefined during silence (a receiver sends none). */
  packets: Array<Buffer | undefined>;
}

function opusMaterial(): OpusMaterial | undefined {
  const backend = (['native', 'opusscript'] as const).find((b) => isOpusBackendAvailable(b));
  if (!backend) return undefined;
  const codec = createOpusCodec({ backend });
  const threshold = 32768 ** 2 * 10 ** (-50 / 10); // below -50 dBFS: silence, no packet
  const packets = discordFrames().map((f) => (meanSquare(f, 0, f.length) > threshold ? codec.encode(f) : undefined));
  codec.close();
  return { backend, packets };
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

async function openTwilio(n: number, url: string, peer: Peer, seconds: number): Promise<Opened & { done: Promise<Record<string, number>> }> {
  const bridges = new Set<TwilioMediaBridge>();
  let active = 0;
  let messages = 0;
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: false, maxPayload: 64 * 1024 });
  await once(wss, 'listening');
  let connections = 0;
  if (process.env.CONCURRENCY_DEBUG) {
    const t = setInterval(() => console.error(`twilio: ${connections} calls connected, ${active} sessions started`), 2000);
    t.unref();
  }
  wss.on('connection', (ws) => {
    connections++;
    const bridge = new TwilioMediaBridge({ from: 'en-us', to: 'es-es', apiKey: CONCURRENCY_KEY, realtimeUrl: url, appendMs: APPEND_FRAMES * 20 });
    bridges.add(bridge);
    bridge.translator.once('session.created', () => active++);
    bridge.on('data', () => messages++);
    bridgeTwilioSocket(ws, bridge).catch((error: unknown) => {
      if (process.env.CONCURRENCY_DEBUG) console.error(`bridge failed: ${String(error)}`);
    });
  });
  const done = peer.request({ type: 'callers', url: `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`, count: n, seconds }, 'callers-done');
  return {
    active: () => active,
    output: () => messages,
    done,
    close: async () => {
      await destroyAll([...bridges]);
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}

// --- the other process ----------------------------------------------------------------------

class Peer {
  readonly child: ChildProcess;
  realtimeUrl = '';
  constructor() {
    this.child = fork(fileURLToPath(new URL('./concurrency-peer.js', import.meta.url)), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  }
  async ready(): Promise<void> {
    const message = (await this.next('ready')) as { realtimeUrl: string };
    this.realtimeUrl = message.realtimeUrl;
  }
  /** The next message of `type`; rejects on the peer's error report, or if the peer exits first. */
  next(type: string): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      const done = () => {
        this.child.off('message', onMessage);
        this.child.off('exit', onExit);
      };
      const onMessage = (message: Record<string, unknown>) => {
        if (message.type !== 'error' && message.type !== type) return;
        done();
        if (message.type === 'error') reject(new Error(String(message.message)));
        else resolve(message);
      };
      const onExit = (code: number | null) => {
        done();
        reject(new Error(`The bench's peer process exited (code ${code}) before answering "${type}".`));
      };
      this.child.on('message', onMessage);
      this.child.on('exit', onExit);
    });
  }
  request(message: Record<string, unknown>, answer: string): Promise<Record<string, number>> {
    const reply = this.next(answer);
    this.child.send(message);
    return reply as Promise<Record<string, number>>;
  }
  async close(): Promise<void> {
    const exited = once(this.child, 'exit');
    this.child.send({ type: 'exit' });
    await exited;
  }
}

/** The emulator's process, and the phone callers' (each runs `concurrency-peer.ts`). */
interface Peers {
  emulator: Peer;
  callers: Peer;
}

// --- measuring ------------------------------------------------------------------------------

/** Waits for the sessions to start; returns how many did (all, or as many as could in time). */
async function waitActive(opened: Opened, n: number, timeoutMs: number): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  while (opened.active() < n && performance.now() < deadline) await sleep(100);
  return opened.active();
}

async function measure(path: PathName, n: number, seconds: number, peers: Peers, opus: OpusMaterial | undefined): Promise<Scenario> {
  // Each window starts clean: it does not pay for the garbage the previous one (another path)
  // left in any of the three processes, as `compare` collects before each round.
  collect?.();
  await Promise.all([peers.emulator.request({ type: 'collect' }, 'collected'), peers.callers.request({ type: 'collect' }, 'collected')]);
  const peer = peers.emulator;
  const clock = new FrameClock();
  let opened: Opened;
  let twilioDone: Promise<Record<string, number>> | undefined;
  const connectMs = 20_000 + n * 100;
  const callSeconds = (connectMs + WARMUP_MS) / 1000 + seconds + 1;
  if (path === 'bare') opened = openBare(n, peer.realtimeUrl, clock);
  else if (path === 'plain') opened = openPlain(n, peer.realtimeUrl, clock);
  else if (path === 'discord') opened = openDiscord(n, peer.realtimeUrl, clock, opus!);
  else if (path === 'bare-discord') opened = openBareDiscord(n, peer.realtimeUrl, clock, opus!);
  else {
    const t =
      path === 'twilio'
        ? await openTwilio(n, peer.realtimeUrl, peers.callers, callSeconds)
        : await openBareTwilio(n, peer.realtimeUrl, peers.callers, callSeconds);
    opened = t;
    twilioDone = t.done;
  }
  const started = await waitActive(opened, n, connectMs);
  await sleep(WARMUP_MS);
  const lag = monitorEventLoopDelay({ resolution: 10 });
  lag.enable();
  clock.resetCounters();
  const profile = await startCpuProfile(process.env.CONCURRENCY_PROFILE, 200);
  const outputBefore = opened.output();
  const cpu0 = cpuMsNow();
  const t0 = performance.now();
  await sleep(seconds * 1000);
  const cpuSeconds = (cpuMsNow() - cpu0) / 1000;
  const wallSeconds = (performance.now() - t0) / 1000;
  lag.disable();
  await profile?.(`${path}-${n}-${Date.now()}`);
  const output = opened.output() - outputBefore;
  let note = twilioDone ? '' : `source: ${clock.lateFrames} of ${clock.frames} frames sent over 20 ms late`;
  clock.stop();
  if (twilioDone) {
    const stats = await twilioDone;
    note = `callers: ${stats.lateFrames} of ${stats.frames} frames sent over 20 ms late, ${stats.failed} socket errors`;
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

/** CPU seconds per hour of speaker timeline for the bare Opus decode of the packets. */
function opusDecodePerHour(opus: OpusMaterial): number {
  const codec = createOpusCodec({ backend: opus.backend });
  const rounds: number[] = [];
  for (let r = 0; r < 5; r++) {
    const c0 = cpuMsNow();
    let slots = 0;
    for (let pass = 0; pass < 4; pass++) {
      for (const packet of opus.packets) {
        if (packet) codec.decode(packet);
        slots++;
      }
    }
    rounds.push(((cpuMsNow() - c0) / 1000) * (3600 / ((slots * 20) / 1000)));
  }
  codec.close();
  return rounds.sort((a, b) => a - b)[2]!;
}

/** Several windows of one path: mean CPU and output, worst lag. */
function combine(list: Scenario[]): Scenario {
  const mean = (f: (s: Scenario) => number) => list.reduce((sum, s) => sum + f(s), 0) / list.length;
  return {
    ...list[0]!,
    started: Math.min(...list.map((s) => s.started)),
    cpuPerHour: mean((s) => s.cpuPerHour),
    corePercent: mean((s) => s.corePercent),
    outputPerSession: mean((s) => s.outputPerSession),
    lagP99: Math.max(...list.map((s) => s.lagP99)),
    lagMax: Math.max(...list.map((s) => s.lagMax)),
  };
}

/**
 * Measures each path with `n` sessions in `rounds` windows, the order reversed every other round
 * so that a change in the machine's load falls on every path; prints every window, then (with
 * several rounds) each path's combined row. Returns the combined scenario of each path measured.
 */
async function measureAlternating(
  paths: readonly PathName[],
  n: number,
  rounds: number,
  seconds: number,
  peers: Peers,
  opus: OpusMaterial | undefined,
  label = '',
): Promise<Map<PathName, Scenario>> {
  const windows = new Map<PathName, Scenario[]>();
  for (let round = 0; round < rounds; round++) {
    for (const path of round % 2 === 0 ? paths : [...paths].reverse()) {
      if (path.endsWith('discord') && !opus) continue;
      const s = await measure(path, n, seconds, peers, opus);
      windows.set(path, [...(windows.get(path) ?? []), s]);
      console.log(row(label ? { ...s, note: `${s.note}; ${label}` } : s));
    }
  }
  const results = new Map<PathName, Scenario>([...windows].map(([path, list]) => [path, combine(list)]));
  if (rounds > 1) for (const s of results.values()) console.log(row({ ...s, note: `mean of ${rounds} windows (lag: the worst)` }));
  return results;
}

function row(s: Scenario): string {
  return (
    `  ${s.path.padEnd(12)} ${String(s.sessions).padStart(4)}  ${s.cpuPerHour.toFixed(1).padStart(7)} CPU-s/h  ` +
    `${s.corePercent.toFixed(1).padStart(5)} % core  lag p99 ${s.lagP99.toFixed(1).padStart(6)} ms, max ${s.lagMax.toFixed(0).padStart(4)} ms  ` +
    `out ${s.path.endsWith('twilio') ? `${s.outputPerSession.toFixed(1)} messages` : `${(s.outputPerSession / 1000).toFixed(1)} kB`}/s/session  ${s.note}`
  );
}

export default async function (): Promise<void> {
  const counts = (process.env.CONCURRENCY ?? '50,100,200')
    .split(',')
    .map(Number)
    .filter((v) => v > 0);
  const seconds = Number(process.env.CONCURRENCY_SECONDS ?? 20);
  const twilioMax = Number(process.env.CONCURRENCY_TWILIO_MAX ?? 500);
  const twilioWarmupRounds = Math.max(0, Number(process.env.CONCURRENCY_TWILIO_WARMUP_ROUNDS ?? 1));
  const paths = (process.env.CONCURRENCY_PATHS ?? 'bare,plain,bare-twilio,twilio,bare-discord,discord').split(',') as PathName[];
  const rounds = Math.max(1, Number(process.env.CONCURRENCY_ROUNDS ?? 2));
  const opus = opusMaterial();
  const peers: Peers = { emulator: new Peer(), callers: new Peer() };
  await Promise.all([peers.emulator.ready(), peers.callers.ready()]);
  try {
    const decodePerHour = opus ? opusDecodePerHour(opus) : 0;
    if (opus) console.log(`bare Opus decode (${opus.backend}) of the Discord packets: ${decodePerHour.toFixed(1)} CPU-s per speaker-hour`);
    console.log(
      `each row: ${seconds} s measured after ${WARMUP_MS / 1000} s of warm-up; CPU of this process only (the emulator and the callers run in another)`,
    );
    // The calls-on-one-core scenario first, so that `CONCURRENCY=0` measures it in the same
    // conditions as the full run. Its baseline is the same work by hand at the same load, in
    // alternating windows like the rows below: the calls' figures are the mean CPU and the worst
    // lag of their windows.
    if (twilioMax > 0) {
      // One unmeasured round of both paths first: at this load the first window of each path
      // ran with all three processes cold (compiling, growing their heaps while hundreds of
      // calls connect), and its lag, 0.2 to 1.5 s in either path, decided the lag figure rather
      // than the path itself. The rows are printed, marked, and counted nowhere.
      if (twilioWarmupRounds > 0) {
        await measureAlternating(['twilio', 'bare-twilio'], twilioMax, twilioWarmupRounds, Math.min(seconds, 10), peers, opus, 'warm-up, not counted');
      }
      const calls = await measureAlternating(['twilio', 'bare-twilio'], twilioMax, rounds, seconds, peers, opus);
      const s = calls.get('twilio')!;
      const byHand = calls.get('bare-twilio')!;
      record({ name: `twilio ${twilioMax} calls: calls that reached the service in time`, value: s.started, kind: 'min', bound: twilioMax, unit: '' });
      record({ name: `twilio ${twilioMax} calls: share of one core`, value: s.corePercent, kind: 'max', bound: 100, unit: ' %' });
      record({ name: `twilio ${twilioMax} calls: event-loop lag p99`, value: s.lagP99, kind: 'max', bound: undefined, unit: ' ms' });
      record({
        name: `twilio ${twilioMax} calls: event-loop lag p99 minus that of the same work by hand`,
        value: s.lagP99 - byHand.lagP99,
        kind: 'max',
        bound: 10,
        unit: ' ms',
      });
      record({
        name: `twilio ${twilioMax} calls / the same work by hand, CPU per call-hour`,
        value: s.cpuPerHour / byHand.cpuPerHour,
        kind: 'max',
        bound: 1.1,
      });
      record({ name: `twilio ${twilioMax} calls by hand (baseline): share of one core`, value: byHand.corePercent, kind: 'max', bound: undefined, unit: ' %' });
      record({ name: `twilio ${twilioMax} calls by hand (baseline): event-loop lag p99`, value: byHand.lagP99, kind: 'max', bound: undefined, unit: ' ms' });
    }
    for (const n of counts) {
      const results = await measureAlternating(paths, n, rounds, seconds, peers, opus);
      // Each path against the same work by hand. (The adapters against the plain stream compared
      // unlike work, a conversion and a codec against none, and are no longer figures.)
      const pairs: Array<[string, PathName, PathName]> = [
        ['plain / bare ws client', 'plain', 'bare'],
        ['twilio / bare twilio bridge (the same work by hand)', 'twilio', 'bare-twilio'],
        ['discord / bare discord path (the same work by hand)', 'discord', 'bare-discord'],
      ];
      const lines: string[] = [];
      for (const [name, path, baselinePath] of pairs) {
        const value = results.get(path);
        const baseline = results.get(baselinePath);
        if (value === undefined || baseline === undefined) continue;
        const cpu = value.cpuPerHour / baseline.cpuPerHour;
        const lag = value.lagP99 / baseline.lagP99;
        lines.push(`${name.split(' (the')[0]} ${cpu.toFixed(2)} (lag p99 ${lag.toFixed(2)})`);
        record({ name: `${name}, CPU per session-hour, ${n} sessions`, value: cpu, kind: 'max', bound: 1.15 });
        if (path === 'plain') record({ name: `${name}, event-loop lag p99, ${n} sessions`, value: lag, kind: 'max', bound: 1.2 });
      }
      console.log(`  ratios at ${n}: ${lines.join(', ')}`);
    }
  } finally {
    await Promise.all([peers.emulator.close(), peers.callers.close()]);
  }
}
