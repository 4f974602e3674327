/**
 * What the processes of `concurrency.bench.ts` share: the key, the paths and their figures, the
 * speech material cut into 20 ms frames in each path's format (the Discord paths' as Opus
 * packets), and a clock that calls each session's sender once per 20 ms frame at real time.
 */
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { SERVICE_FORMAT } from '../lib/audio/audio-format.js';
import { planConversion } from '../lib/audio/convert.js';
import { meanSquare } from '../lib/audio/level.js';
import { createOpusCodec, isOpusBackendAvailable, type OpusBackend } from '../lib/audio/opus.js';

export const CONCURRENCY_KEY = 'concurrency-bench-key';

/**
 * Sessions run this long after they have all started before a window is measured: each window's
 * process is fresh, and V8 is still compiling the paths' code for the first seconds (the plain
 * stream at 50 sessions cost 8.8 and 10.9 CPU-s per session-hour after 4 s, 6.8 and 7.9 after 30 s).
 */
export const WARMUP_MS = Number(process.env.CONCURRENCY_WARMUP_SECONDS ?? 15) * 1000;

/** How long a window waits for all its sessions to start (the rest are counted as not started). */
export function connectLimitMs(sessions: number): number {
  return 20_000 + sessions * 100;
}

export type PathName = 'bare' | 'plain' | 'bare-twilio' | 'twilio' | 'bare-discord' | 'discord';

/** One path's figures over a measured window (or the combination of several). */
export interface Scenario {
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
const FRAME_MS = 20;
/** Phase buckets of the 20 ms grid: sessions are spread over them, as real sources are. */
const BUCKETS = 10;

/** The speech fixture, PCM16 mono 24 kHz (8.3 s, three utterances). */
export function speech24k(): Buffer {
  return readFileSync(new URL('../../test/fixtures/speech-en-24k.wav', import.meta.url)).subarray(44);
}

function frames(data: Buffer, frameBytes: number): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0; at + frameBytes <= data.length; at += frameBytes) out.push(Buffer.from(data.subarray(at, at + frameBytes)));
  return out;
}

/** The speech as 20 ms frames of PCM16 mono 24 kHz (960 bytes). */
export function serviceFrames(): Buffer[] {
  return frames(speech24k(), 960);
}

/** The speech as 20 ms frames of 8 kHz mu-law (160 bytes), as a phone call carries it. */
export function phoneFrames(): Buffer[] {
  const p = planConversion({ ...SERVICE_FORMAT }, { format: 'mulaw', rate: 8000, channels: 1 }).processor;
  return frames(Buffer.concat([p.process(speech24k()), p.flush()]), 160);
}

/** The speech as 20 ms frames of 48 kHz stereo PCM16 (3840 bytes), as Discord plays it. */
function discordFrames(): Buffer[] {
  const p = planConversion({ ...SERVICE_FORMAT }, { format: 's16le', rate: 48000, channels: 2 }).processor;
  return frames(Buffer.concat([p.process(speech24k()), p.flush()]), 3840);
}

export interface OpusMaterial {
  backend: OpusBackend;
  /** One entry per 20 ms slot: the packet, or undefined during silence (a receiver sends none). */
  packets: Array<Buffer | undefined>;
}

/** The speech as a Discord receiver gives it, in the first Opus backend available (undefined: none). */
export function opusMaterial(): OpusMaterial | undefined {
  const backend = (['native', 'opusscript'] as const).find((b) => isOpusBackendAvailable(b));
  if (!backend) return undefined;
  const codec = createOpusCodec({ backend });
  const threshold = 32768 ** 2 * 10 ** (-50 / 10); // below -50 dBFS: silence, no packet
  const packets = discordFrames().map((f) => (meanSquare(f, 0, f.length) > threshold ? codec.encode(f) : undefined));
  codec.close();
  return { backend, packets };
}

/**
 * Calls every registered sender once per 20 ms frame, on an absolute schedule (a late timer
 * sends every frame that is due). Senders are spread over phase buckets of the 20 ms grid.
 */
export class FrameClock {
  readonly #buckets: Array<Array<() => void>> = Array.from({ length: BUCKETS }, () => []);
  readonly #timers: Array<NodeJS.Timeout | undefined> = [];
  readonly #t0 = performance.now();
  #stopped = false;
  /** Frames sent, and frames sent more than one frame late. */
  frames = 0;
  lateFrames = 0;
  /** Largest lateness seen, in ms. */
  maxLateMs = 0;

  constructor() {
    for (let b = 0; b < BUCKETS; b++) this.#arm(b, 0);
  }

  /** Registers a sender in a random bucket. */
  add(send: () => void): void {
    this.#buckets[Math.floor(Math.random() * BUCKETS)]!.push(send);
  }

  stop(): void {
    this.#stopped = true;
    for (const timer of this.#timers) clearTimeout(timer);
  }

  resetCounters(): void {
    this.frames = 0;
    this.lateFrames = 0;
    this.maxLateMs = 0;
  }

  #arm(bucket: number, slot: number): void {
    if (this.#stopped) return;
    const deadline = this.#t0 + (bucket * FRAME_MS) / BUCKETS + slot * FRAME_MS;
    this.#timers[bucket] = setTimeout(() => this.#tick(bucket, slot), Math.max(0, deadline - performance.now()));
  }

  #tick(bucket: number, slot: number): void {
    const now = performance.now();
    let next = slot;
    // Every frame due by now goes out (a late timer catches up instead of losing time).
    while (this.#t0 + (bucket * FRAME_MS) / BUCKETS + next * FRAME_MS <= now) {
      const late = now - (this.#t0 + (bucket * FRAME_MS) / BUCKETS + next * FRAME_MS);
      if (late > this.maxLateMs) this.maxLateMs = late;
      for (const send of this.#buckets[bucket]!) {
        send();
        this.frames++;
        if (late > FRAME_MS) this.lateFrames++;
      }
      next++;
    }
    this.#arm(bucket, next);
  }
}
