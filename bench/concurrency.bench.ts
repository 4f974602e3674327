/**
 * CPU per session-hour and event-loop lag for N concurrent sessions at real time, on each path:
 * - `bare`: a bare `ws` client doing the protocol's JSON and base64 work by hand (the baseline);
 * - `plain`: `RealtimeTranslateStream` fed PCM16 mono 24 kHz;
 * - `twilio`: `TwilioMediaBridge` + `bridgeTwilioSocket` behind a `ws` server, the calls coming
 *   from the other process (20 ms mu-law `media` messages at real time, marks echoed);
 * - `discord`: `translateSpeaker` (Opus packets in as a voice receiver gives them, nothing
 *   during silence; 48 kHz stereo PCM frames out, as `StreamType.Raw` takes them).
 * Every source sends the speech fixture in 20 ms frames at real time, each session from its own
 * point of the speech and phase of the 20 ms grid. The emulator runs in another process
 * (`concurrency-peer.ts`), as do the phone callers. Measured in this process, over a window
 * after a warm-up: CPU time (user + system) per hour of session time, the share of one core,
 * and the event loop's lag (p99 and max, `monitorEventLoopDelay`).
 *
 * The Discord path also decodes Opus, work any Discord client does; its row is compared with
 * the plain path, and with the plain path plus the bare decode of the same packets (timed here
 * too). Environment: `CONCURRENCY` (default "50,100,200"), `CONCURRENCY_SECONDS` (measured
 * window, default 20), `CONCURRENCY_TWILIO_MAX` (the calls-on-one-core scenario, default 500),
 * `CONCURRENCY_PATHS` (default "bare,plain,twilio,discord"), `CONCURRENCY_ROUNDS` (windows per
 * path, in alternating order so that a change in the machine's load falls on every path;
 * default 2: the CPU figure is their mean, the lag their worst), `CONCURRENCY_PROFILE` (a
 * directory: each measured window's CPU profile is written there).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { WebSocket, WebSocketServer } from 'ws';
import { meanSquare } from '../lib/audio/level.js';
import { createOpusCodec, isOpusBackendAvailable, type OpusBackend } from '../lib/audio/opus.js';
import { translateSpeaker } from '../lib/integrations/discord.js';
import { TwilioMediaBridge, bridgeTwilioSocket } from '../lib/integrations/twilio.js';
import { RealtimeTranslateStream } from '../lib/realtime/realtime-translate-stream.js';
import { cpuMsNow, record } from './harness.js';
import { CONCURRENCY_KEY, FrameClock, discordFrames, serviceFrames } from './concurrency-shared.js';

type PathName = 'bare' | 'plain' | 'twilio' | 'discord';

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
  cpuPerHour: number;
  corePercent: number;
  lagP99: number;
  lagMax: number;
  outputPerSession: number;
  note: string;
}

const WARMUP_MS = 4000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const pcmFrames = serviceFrames();
const APPEND_PREFIX = '{"type":"input_audio_buffer.append","audio":"';

function randomStart(length: number): number {
  return Math.floor(Math.random() * length);
}

// --- the paths -------------------------------------------------------------------------------

function openBare(n: number, url: string, clock: FrameClock): Opened {
  let active = 0;
  let bytes = 0;
  const sockets: WebSocket[] = [];
  for (let i = 0; i < n; i++) {
    const ws = new WebSocket(`${url}/v1/realtime`, { headers: { 'x-api-key': CONCURRENCY_KEY }, perMessageDeflate: false });
    sockets.push(ws);
    let frame = randomStart(pcmFrames.length);
    let started = false;
    ws.on('error', () => {});
    ws.on('open', () => ws.send(JSON.stringify({ type: 'session.update', session: { source_language: 'en-us', target_language: 'es-es' } })));
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (isBinary) {
        bytes += data.length;
        return;
      }
      const event = JSON.parse(data.toString('utf8')) as { type: string; delta?: string };
      if (event.type === 'response.audio.delta' && event.delta) bytes += Buffer.from(event.delta, 'base64').length;
      else if (event.type === 'session.created' && !started) {
        started = true;
        active++;
        clock.add(() => {
          if (ws.readyState !== ws.OPEN) return;
          ws.send(APPEND_PREFIX + pcmFrames[frame]!.toString('base64') + '"}');
          frame = (frame + 1) % pcmFrames.length;
        });
      }
    });
  }
  return {
    active: () => active,
    output: () => bytes,
    close: async () => {
      await Promise.all(
        sockets.map(async (ws) => {
          if (ws.readyState === ws.CLOSED) return;
          const closed = once(ws, 'close');
          ws.terminate();
          await closed;
        }),
      );
    },
  };
}

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
    stream.once('session', () => {
      active++;
      clock.add(() => {
        if (stream.destroyed) return;
        stream.write(pcmFrames[frame]!);
        frame = (frame + 1) % pcmFrames.length;
      });
    });
  }
  return { active: () => active, output: () => bytes, close: () => destroyAll(streams) };
}

async function destroyAll(streams: Array<{ destroy(): void; closed: boolean } & NodeJS.EventEmitter>): Promise<void> {
  await Promise.all(
    streams.map(async (s) => {
      if (s.closed) return;
      const closed = once(s, 'close');
      s.destroy();
      await closed;
    }),
  );
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
    const path = translateSpeaker({ opusPackets: source, output: 'pcm', from: 'en-us', to: 'es-es', apiKey: CONCURRENCY_KEY, realtimeUrl: url, opusBackend: opus.backend });
    path.done.catch(() => {});
    playbacks.push(path.playback);
    let slot = randomStart(opus.packets.length);
    path.playback.on('data', (frame: Buffer) => (bytes += frame.length));
    path.translator.once('session', () => {
      active++;
      clock.add(() => {
        if (source.destroyed) return;
        const packet = opus.packets[slot];
        slot = (slot + 1) % opus.packets.length;
        if (packet) source.push(packet);
      });
    });
  }
  return { active: () => active, output: () => bytes, close: () => destroyAll(playbacks as never) };
}

async function openTwilio(n: number, url: string, peer: Peer, seconds: number): Promise<Opened & { done: Promise<Record<string, number>> }> {
  const bridges = new Set<TwilioMediaBridge>();
  let active = 0;
  let messages = 0;
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: false, maxPayload: 64 * 1024 });
  await once(wss, 'listening');
  wss.on('connection', (ws) => {
    const bridge = new TwilioMediaBridge({ from: 'en-us', to: 'es-es', apiKey: CONCURRENCY_KEY, realtimeUrl: url });
    bridges.add(bridge);
    bridge.translator.once('session', () => active++);
    bridge.on('data', () => messages++);
    bridgeTwilioSocket(ws, bridge).catch(() => {});
  });
  const done = peer.request({ type: 'callers', url: `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`, count: n, seconds }, 'callers-done');
  return {
    active: () => active,
    output: () => messages,
    done,
    close: async () => {
      await destroyAll([...bridges] as never);
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
  next(type: string): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      const onMessage = (message: Record<string, unknown>) => {
        if (message.type === 'error') reject(new Error(String(message.message)));
        if (message.type !== type) return;
        this.child.off('message', onMessage);
        resolve(message);
      };
      this.child.on('message', onMessage);
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

// --- measuring ------------------------------------------------------------------------------

async function waitActive(opened: Opened, n: number, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (opened.active() < n && performance.now() < deadline) await sleep(100);
  if (opened.active() < n) throw new Error(`only ${opened.active()} of ${n} sessions started`);
}

async function measure(path: PathName, n: number, seconds: number, peer: Peer, opus: OpusMaterial | undefined): Promise<Scenario> {
  const clock = new FrameClock();
  let opened: Opened;
  let twilioDone: Promise<Record<string, number>> | undefined;
  const connectMs = 10_000 + n * 40;
  if (path === 'bare') opened = openBare(n, peer.realtimeUrl, clock);
  else if (path === 'plain') opened = openPlain(n, peer.realtimeUrl, clock);
  else if (path === 'discord') opened = openDiscord(n, peer.realtimeUrl, clock, opus!);
  else {
    const t = await openTwilio(n, peer.realtimeUrl, peer, (connectMs + WARMUP_MS) / 1000 + seconds + 1);
    opened = t;
    twilioDone = t.done;
  }
  await waitActive(opened, n, connectMs);
  await sleep(WARMUP_MS);
  const lag = monitorEventLoopDelay({ resolution: 10 });
  lag.enable();
  clock.resetCounters();
  const profile = await startProfile();
  const outputBefore = opened.output();
  const cpu0 = cpuMsNow();
  const t0 = performance.now();
  await sleep(seconds * 1000);
  const cpuSeconds = (cpuMsNow() - cpu0) / 1000;
  const wallSeconds = (performance.now() - t0) / 1000;
  lag.disable();
  await profile?.(`${path}-${n}-${Date.now()}`);
  const output = opened.output() - outputBefore;
  let note = path === 'twilio' ? '' : `source: ${clock.lateFrames} of ${clock.frames} frames sent over 20 ms late`;
  clock.stop();
  if (twilioDone) {
    const stats = await twilioDone;
    note = `callers: ${stats.lateFrames} of ${stats.frames} frames sent over 20 ms late, ${stats.failed} socket errors`;
  }
  await opened.close();
  return {
    path,
    sessions: n,
    cpuPerHour: (cpuSeconds * 3600) / (n * wallSeconds),
    corePercent: (cpuSeconds / wallSeconds) * 100,
    lagP99: lag.percentile(99) / 1e6,
    lagMax: lag.max / 1e6,
    outputPerSession: output / n / wallSeconds,
    note,
  };
}

/** With `CONCURRENCY_PROFILE` set, starts the CPU profiler; the function returned writes the profile. */
async function startProfile(): Promise<((name: string) => Promise<void>) | undefined> {
  const dir = process.env.CONCURRENCY_PROFILE;
  if (!dir) return undefined;
  const session = new Session();
  session.connect();
  const post = (method: string, params?: object) =>
    new Promise<unknown>((resolve, reject) => session.post(method, params, (error, result) => (error ? reject(error) : resolve(result))));
  await post('Profiler.enable');
  await post('Profiler.setSamplingInterval', { interval: 200 });
  await post('Profiler.start');
  return async (name) => {
    const { profile } = (await post('Profiler.stop')) as { profile: unknown };
    session.disconnect();
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, `${name}.cpuprofile`), JSON.stringify(profile));
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
    cpuPerHour: mean((s) => s.cpuPerHour),
    corePercent: mean((s) => s.corePercent),
    outputPerSession: mean((s) => s.outputPerSession),
    lagP99: Math.max(...list.map((s) => s.lagP99)),
    lagMax: Math.max(...list.map((s) => s.lagMax)),
  };
}

function row(s: Scenario): string {
  return (
    `  ${s.path.padEnd(8)} ${String(s.sessions).padStart(4)}  ${s.cpuPerHour.toFixed(1).padStart(7)} CPU-s/h  ` +
    `${s.corePercent.toFixed(1).padStart(5)} % core  lag p99 ${s.lagP99.toFixed(1).padStart(6)} ms, max ${s.lagMax.toFixed(0).padStart(4)} ms  ` +
    `out ${s.path === 'twilio' ? `${s.outputPerSession.toFixed(1)} messages` : `${(s.outputPerSession / 1000).toFixed(1)} kB`}/s/session  ${s.note}`
  );
}

export default async function (): Promise<void> {
  const counts = (process.env.CONCURRENCY ?? '50,100,200').split(',').map(Number).filter((v) => v > 0);
  const seconds = Number(process.env.CONCURRENCY_SECONDS ?? 20);
  const twilioMax = Number(process.env.CONCURRENCY_TWILIO_MAX ?? 500);
  const paths = (process.env.CONCURRENCY_PATHS ?? 'bare,plain,twilio,discord').split(',') as PathName[];
  const rounds = Math.max(1, Number(process.env.CONCURRENCY_ROUNDS ?? 2));
  const opus = opusMaterial();
  const peer = new Peer();
  await peer.ready();
  try {
    const decodePerHour = opus ? opusDecodePerHour(opus) : 0;
    if (opus) console.log(`bare Opus decode (${opus.backend}) of the Discord packets: ${decodePerHour.toFixed(1)} CPU-s per speaker-hour`);
    console.log(`each row: ${seconds} s measured after ${WARMUP_MS / 1000} s of warm-up; CPU of this process only (the emulator and the callers run in another)`);
    for (const n of counts) {
      const runs = new Map<PathName, Scenario[]>();
      for (let round = 0; round < rounds; round++) {
        for (const path of round % 2 === 0 ? paths : [...paths].reverse()) {
          if (path === 'discord' && !opus) continue;
          const s = await measure(path, n, seconds, peer, opus);
          runs.set(path, [...(runs.get(path) ?? []), s]);
          console.log(row(s));
        }
      }
      const results = new Map<PathName, Scenario>([...runs].map(([path, list]) => [path, combine(list)]));
      if (rounds > 1) for (const s of results.values()) console.log(row({ ...s, note: `mean of ${rounds} windows (lag: the worst)` }));
      const bare = results.get('bare');
      const plain = results.get('plain');
      const twilio = results.get('twilio');
      const discord = results.get('discord');
      if (!bare || !plain || !twilio) continue;
      const ratio = (a: Scenario, b: number) => a.cpuPerHour / b;
      console.log(
        `  ratios at ${n}: plain/bare ${ratio(plain, bare.cpuPerHour).toFixed(2)}, twilio/plain ${ratio(twilio, plain.cpuPerHour).toFixed(2)}` +
          (discord ? `, discord/plain ${ratio(discord, plain.cpuPerHour).toFixed(2)}, discord/(plain + Opus decode) ${ratio(discord, plain.cpuPerHour + decodePerHour).toFixed(2)}` : ''),
      );
      record({ name: `plain / bare ws, CPU per session-hour, ${n} sessions`, value: ratio(plain, bare.cpuPerHour), kind: 'max', bound: 1.1 });
      record({ name: `twilio / plain, CPU per session-hour, ${n} sessions`, value: ratio(twilio, plain.cpuPerHour), kind: 'max', bound: 1.3 });
      if (discord) {
        record({ name: `discord / plain, CPU per session-hour, ${n} sessions`, value: ratio(discord, plain.cpuPerHour), kind: 'max', bound: 1.3 });
        record({ name: `discord / (plain + bare Opus decode), ${n} sessions`, value: ratio(discord, plain.cpuPerHour + decodePerHour), kind: 'max', bound: 1.3 });
      }
    }
    if (twilioMax > 0) {
      const s = await measure('twilio', twilioMax, seconds, peer, opus);
      console.log(row(s));
      record({ name: `twilio ${twilioMax} calls: share of one core`, value: s.corePercent, kind: 'max', bound: 100, unit: ' %' });
      record({ name: `twilio ${twilioMax} calls: event-loop lag p99`, value: s.lagP99, kind: 'max', bound: 50, unit: ' ms' });
    }
  } finally {
    await peer.close();
  }
}
