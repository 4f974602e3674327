/**
 * What both processes of `concurrency.bench.ts` use: the key, the speech material cut into
 * 20 ms frames in each path's format, and a clock that calls each session's sender once per
 * 20 ms frame at real time.
 */
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { SERVICE_FORMAT } from '../lib/audio/audio-format.js';
import { planConversion } from '../lib/audio/convert.js';

export const CONCURRENCY_KEY = 'concurrency-bench-key';
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
export function discordFrames(): Buffer[] {
  const p = planConversion({ ...SERVICE_FORMAT }, { format: 's16le', rate: 48000, channels: 2 }).processor;
  return frames(Buffer.concat([p.process(speech24k()), p.flush()]), 3840);
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
