/**
 * Latency the library adds on the receive path: from a service frame leaving the server to its
 * audio bytes arriving on `RealtimeTranslateStream`'s readable side ('data', flowing mode), against
 * a bare `ws` client doing the same decode by hand (JSON.parse and base64 for a JSON
 * `response.audio.delta`, the payload as it is for a binary frame). The server runs in another
 * process (`latency-peer.ts`) and sends each session a 20 ms frame (960 bytes of PCM16) every
 * 20 ms at real time, JSON or binary by mode; the first 8 bytes of each frame are its send time on
 * the clock both processes read (`performance.timeOrigin + performance.now()`). A frame's latency
 * is taken once all of its bytes have arrived (byte offsets are tracked: the readable side may
 * split or join chunks). No input is written.
 *
 * For each number of sessions and each mode, the library and the bare client run in alternating
 * windows (a round is one window of each, the order reversed every other round), each after a
 * warm-up whose frames are dropped. The recorded ratios (p99, bound 1.2; p50) are the median of
 * the rounds' own ratios, as `compare`'s `paired` does: on this shared machine a burst of other
 * work falls on one window, and pooling every window's frames lets that window alone decide the
 * p99 of its kind. The pooled p50, p99 and max of each kind are printed too. Environment:
 * `LATENCY_SESSIONS` (default "1,100"), `LATENCY_MODES` (default "json,binary"), `LATENCY_SECONDS`
 * (a window's length, at least; default 3), `LATENCY_MIN_WINDOW_FRAMES` (frames per window, at
 * least: with few sessions the windows are longer, so that a window's p99 is not its worst frame
 * or two; default 600, 12 s windows for one session), `LATENCY_WARMUP_MS` (default 1500),
 * `LATENCY_ROUNDS` (windows per kind, at least; default 4, so that the machine's changing load
 * falls on both kinds alike), `LATENCY_MIN_FRAMES` (frames per kind, at least: more windows where
 * they are short; default 2000), `LATENCY_PROFILE` (a
 * directory: each library window's CPU profile is written there).
 */
import { performance } from 'node:perf_hooks';
import { WebSocket } from 'ws';
import { RealtimeTranslateStream } from '../lib/realtime/realtime-translate-stream.js';
import { destroyAll, median, record, startCpuProfile, terminateAll } from './harness.js';
import { Peer, type IpcLink } from './ipc.js';

type Mode = 'json' | 'binary';
type Kind = 'library' | 'bare';

const FRAME_BYTES = 960;
const KEY = 'latency-bench-key';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const nowMs = (): number => performance.timeOrigin + performance.now();

/**
 * One session's received audio, cut back into the server's frames by byte offset: when the last
 * byte of a frame arrives, its latency is the time now less the send time in its first 8 bytes.
 */
class FrameTracker {
  readonly #stamp = Buffer.alloc(8);
  #offset = 0;
  constructor(readonly sink: { samples: number[] | undefined }) {}

  add(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length) {
      const inFrame = this.#offset % FRAME_BYTES;
      const take = Math.min(chunk.length - at, FRAME_BYTES - inFrame);
      if (inFrame < 8) chunk.copy(this.#stamp, inFrame, at, at + Math.min(take, 8 - inFrame));
      at += take;
      this.#offset += take;
      if (this.#offset % FRAME_BYTES === 0) this.sink.samples?.push(nowMs() - this.#stamp.readDoubleLE(0));
    }
  }
}

interface Opened {
  active(): number;
  close(): Promise<void>;
}

function openLibrary(n: number, url: string, sink: { samples: number[] | undefined }): Opened {
  const streams: RealtimeTranslateStream[] = [];
  let active = 0;
  for (let i = 0; i < n; i++) {
    const stream = new RealtimeTranslateStream({ from: 'en-us', to: 'es-es', apiKey: KEY, realtimeUrl: url });
    const tracker = new FrameTracker(sink);
    stream.on('error', () => {});
    stream.on('data', (chunk: Buffer) => tracker.add(chunk));
    stream.once('session.created', () => active++);
    streams.push(stream);
  }
  return {
    active: () => active,
    close: () => destroyAll(streams),
  };
}

function openBare(n: number, url: string, sink: { samples: number[] | undefined }): Opened {
  const sockets: WebSocket[] = [];
  let active = 0;
  for (let i = 0; i < n; i++) {
    const ws = new WebSocket(`${url}/v1/realtime`, { headers: { 'x-api-key': KEY }, perMessageDeflate: false });
    const tracker = new FrameTracker(sink);
    ws.on('error', () => {});
    ws.on('open', () => ws.send('{"type":"session.update","session":{"source_language":"en-us","target_language":"es-es"}}'));
    ws.on('message', (data: Buffer, isBinary) => {
      if (isBinary) {
        tracker.add(data);
        return;
      }
      const event = JSON.parse(data.toString()) as { type: string; delta?: string };
      if (event.type === 'response.audio.delta') tracker.add(Buffer.from(event.delta!, 'base64'));
      else if (event.type === 'session.created') active++;
    });
    sockets.push(ws);
  }
  return {
    active: () => active,
    close: () => terminateAll(sockets),
  };
}

/** The server's process (`latency-peer.ts`), and the URL it serves. */
interface LatencyPeer {
  link: IpcLink;
  url: string;
}

interface Window {
  samples: number[];
  started: number;
}

async function measure(kind: Kind, mode: Mode, n: number, peer: LatencyPeer, seconds: number, warmupMs: number): Promise<Window> {
  await peer.link.request({ type: 'mode', mode }, 'mode');
  const sink: { samples: number[] | undefined } = { samples: undefined };
  const opened = kind === 'library' ? openLibrary(n, peer.url, sink) : openBare(n, peer.url, sink);
  const deadline = performance.now() + 10_000 + n * 100;
  while (opened.active() < n && performance.now() < deadline) await sleep(50);
  await sleep(warmupMs);
  const profile = kind === 'library' ? await startCpuProfile(process.env.LATENCY_PROFILE, 100) : undefined;
  const samples: number[] = [];
  sink.samples = samples;
  await sleep(seconds * 1000);
  sink.samples = undefined;
  await profile?.(`${mode}-${n}-${Date.now()}`);
  const started = opened.active();
  await opened.close();
  return { samples, started };
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

interface Figures {
  p50: number;
  p99: number;
  max: number;
  count: number;
}

function figures(samples: number[]): Figures {
  const sorted = [...samples].sort((a, b) => a - b);
  return { p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted[sorted.length - 1] ?? NaN, count: sorted.length };
}

function line(kind: string, f: Figures, note: string): string {
  const ms = (v: number) => v.toFixed(3).padStart(7);
  return `  ${kind.padEnd(8)} p50 ${ms(f.p50)} ms  p99 ${ms(f.p99)} ms  max ${ms(f.max)} ms  (${f.count} frames${note})`;
}

export default async function (): Promise<void> {
  const counts = (process.env.LATENCY_SESSIONS ?? '1,100')
    .split(',')
    .map(Number)
    .filter((v) => v > 0);
  const modes = (process.env.LATENCY_MODES ?? 'json,binary').split(',') as Mode[];
  const seconds = Number(process.env.LATENCY_SECONDS ?? 3);
  const warmupMs = Number(process.env.LATENCY_WARMUP_MS ?? 1500);
  const minRounds = Math.max(1, Number(process.env.LATENCY_ROUNDS ?? 4));
  const minFrames = Number(process.env.LATENCY_MIN_FRAMES ?? 2000);
  const minWindowFrames = Number(process.env.LATENCY_MIN_WINDOW_FRAMES ?? 600);
  const server = new Peer('./latency-peer.js');
  const peer: LatencyPeer = { link: server.link, url: String((await server.link.next('ready')).url) };
  console.log(`server frame sent -> its audio on the reader; windows of ${seconds} s or more after ${warmupMs} ms of warm-up`);
  try {
    for (const n of counts) {
      // A window's p99 is of its own frames: with one session, a 3 s window's p99 would be its
      // second-worst frame of 150, so its ratio would be one frame's luck.
      const windowSeconds = Math.max(seconds, Math.ceil(minWindowFrames / (n * 50)));
      const rounds = Math.max(minRounds, Math.ceil(minFrames / (n * 50 * windowSeconds)));
      for (const mode of modes) {
        const pooled: Record<Kind, number[]> = { library: [], bare: [] };
        const started: Record<Kind, number> = { library: n, bare: n };
        const p50Ratios: number[] = [];
        const p99Ratios: number[] = [];
        for (let round = 0; round < rounds; round++) {
          const order: Kind[] = round % 2 === 0 ? ['library', 'bare'] : ['bare', 'library'];
          const windows = {} as Record<Kind, Figures>;
          for (const kind of order) {
            const w = await measure(kind, mode, n, peer, windowSeconds, warmupMs);
            pooled[kind].push(...w.samples);
            started[kind] = Math.min(started[kind], w.started);
            windows[kind] = figures(w.samples);
          }
          p50Ratios.push(windows.library.p50 / windows.bare.p50);
          p99Ratios.push(windows.library.p99 / windows.bare.p99);
        }
        const note = (kind: Kind) => (started[kind] < n ? `; ${started[kind]} of ${n} sessions started` : '');
        const lib = figures(pooled.library);
        const bare = figures(pooled.bare);
        const p50 = median(p50Ratios);
        const p99 = median(p99Ratios);
        console.log(`${mode} frames, ${n} session(s), ${rounds} windows of ${windowSeconds} s per kind (pooled):`);
        console.log(line('library', lib, note('library')));
        console.log(line('bare', bare, note('bare')));
        console.log(
          `  library / bare, median of the ${rounds} rounds' own ratios: p50 ${p50.toFixed(2)}, p99 ${p99.toFixed(2)}` +
            ` (pooled: p50 ${(lib.p50 / bare.p50).toFixed(2)}, p99 ${(lib.p99 / bare.p99).toFixed(2)})`,
        );
        record({ name: `${mode} frames, ${n} session(s): library p99 / bare ws client p99`, value: p99, kind: 'max', bound: 1.2 });
        record({ name: `${mode} frames, ${n} session(s): library p50 / bare ws client p50`, value: p50, kind: 'max', bound: undefined });
      }
    }
  } finally {
    await server.close();
  }
}
