/**
 * Real-time pacing: audio in at any speed, fixed-size frames out at the rate they would be
 * played, e.g. a file sent as if it were a microphone, or 20 ms frames for telephony and
 * Discord playback.
 *
 * Schedule: frame `k` is due at `t0 + k * frameMs` on a monotonic clock (`performance.now()`
 * unless `now` is given), `t0` being the moment the first frame was available. Each timer is set
 * for the next absolute deadline, so timer lateness never accumulates: a timer that fires late
 * releases every frame that is due by then, and the count of frames out follows the clock.
 *
 * Underrun (no full frame queued when a frame is due):
 * - `fillGaps: false` (default): the schedule stops, and restarts from the moment the next full
 *   frame is queued. Output never contains anything the source did not send.
 * - `fillGaps: true`: a frame of silence is sent in that slot, so the output timeline stays
 *   real while the source has holes (a voice receiver that sends nothing during silence).
 *   Data that arrives after its slot was filled is not dropped: it is sent in the next free
 *   slot, i.e. at its arrival time on the frame grid. A source that is merely late thus gains
 *   the delay once, which then works as a jitter buffer; a source that resumes after a pause
 *   plays from when it resumed. Nothing is ever sent ahead of the clock. Once started (first
 *   frame), silence goes on until the writable side ends or the stream is destroyed.
 *
 * Bounds: writes are held (the write callback waits) while more than `highWaterMs` of audio is
 * queued, so a fast source (a file) is slowed to real time by backpressure. When the reader
 * does not keep up (`push()` returns false) the schedule pauses (no silence piles up either)
 * and restarts when reading resumes, its next frame due one frame later: the frames the reader
 * has buffered cover that time, and nothing comes out in a burst.
 *
 * End: after the writable side ends, the queue is played out on schedule; a last partial frame
 * is padded with silence to a whole frame; then the readable side ends.
 */
import { Duplex } from 'node:stream';
import { ValidationError } from '../errors.js';
import { bytesPerSample, silenceByte, validateSampleFormat, type SampleFormat } from './audio-format.js';
import { FrameCutter } from './frames.js';
import { describeReceived, intOption } from '../options.js';

const EMPTY_FRAME = Buffer.alloc(0);

export interface PacerOptions {
  /** Samples per second per channel (Hz). */
  sampleRate: number;
  /** Interleaved channels; default 1. */
  channels?: number;
  /** Sample encoding; sets the bytes per sample and the silence pattern. Default `s16le`. */
  format?: SampleFormat;
  /** Frame duration in milliseconds; default 20. Must give a whole number of samples. */
  frameMs?: number;
  /** Send silence in slots the source left empty; default false. See the module comment. */
  fillGaps?: boolean;
  /** Queued audio (ms) beyond which writes wait; default 200, at least one frame. */
  highWaterMs?: number;
  /** Monotonic clock in milliseconds; default `performance.now()`. */
  now?: () => number;
}

/** Releases audio at real-time rate in fixed frames (see the module comment for the policies). */
export class Pacer extends Duplex {
  /** Bytes per output frame. */
  readonly frameBytes: number;
  readonly frameMs: number;
  readonly fillGaps: boolean;
  /** Frames sent so far, silence included. */
  framesSent = 0;
  /** Silent frames sent for empty slots (`fillGaps`) so far. */
  silentFramesSent = 0;

  readonly #now: () => number;
  readonly #highWaterBytes: number;
  readonly #silence: number;
  /** The input cut into whole frames (views of it; a frame split across writes is copied once). */
  readonly #cutter: FrameCutter;
  #frames: Buffer[] = [];
  #head = 0;

  #running = false;
  #pausedByReader = false;
  #t0 = 0;
  #slot = 0;
  #timer: NodeJS.Timeout | undefined;
  #ending = false;
  #pendingWrite: (() => void) | undefined;
  #finalCallback: (() => void) | undefined;

  constructor(options: PacerOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new ValidationError('options', 'an object { sampleRate, channels?, format?, frameMs?, fillGaps? }', describeReceived(options));
    }
    const sampleRate = intOption(options.sampleRate, 'sampleRate', { min: 1, accepted: 'a positive integer sample rate in Hz' });
    const channels = intOption(options.channels, 'channels', { min: 1, fallback: 1, accepted: 'a positive integer channel count' });
    const format = validateSampleFormat(options.format ?? 's16le', 'format');
    const frameMs = options.frameMs ?? 20;
    const samples = (sampleRate * frameMs) / 1000;
    if (typeof frameMs !== 'number' || !(frameMs > 0) || !Number.isInteger(samples)) {
      throw new ValidationError(
        'frameMs',
        `a frame duration in ms giving a whole number of samples at ${sampleRate} Hz (e.g. 10 or 20)`,
        describeReceived(frameMs),
      );
    }
    const highWaterMs = options.highWaterMs ?? 200;
    if (typeof highWaterMs !== 'number' || !(highWaterMs >= 0)) {
      throw new ValidationError('highWaterMs', 'a duration in ms, 0 or more', describeReceived(highWaterMs));
    }
    if (options.now !== undefined && typeof options.now !== 'function') {
      throw new ValidationError('now', 'a function returning monotonic milliseconds', typeof options.now);
    }
    super({ objectMode: false, decodeStrings: true, allowHalfOpen: true });
    this.frameMs = frameMs;
    this.fillGaps = options.fillGaps === true;
    this.frameBytes = samples * channels * bytesPerSample(format);
    this.#silence = silenceByte(format);
    this.#cutter = new FrameCutter(this.frameBytes);
    this.#highWaterBytes = Math.max(this.frameBytes, Math.round((highWaterMs / frameMs) * this.frameBytes));
    this.#now = options.now ?? (() => performance.now());
  }

  /** Bytes queued and not yet sent. */
  get queuedLength(): number {
    return this.#queuedBytes;
  }

  get #queuedBytes(): number {
    return (this.#frames.length - this.#head) * this.frameBytes + this.#cutter.pendingBytes;
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (err?: Error | null) => void): void {
    this.#cutter.forEachFrame(chunk, this.#enqueue);
    if (this.#queuedBytes > this.#highWaterBytes) this.#pendingWrite = () => callback();
    else callback();
    if (!this.#running && !this.#pausedByReader && this.#queuedBytes >= this.frameBytes) this.#start();
  }

  readonly #enqueue = (frame: Buffer): void => {
    // Frames already sent are dropped from the front now and then (the queue stays bounded).
    if (this.#head >= 64 && this.#head * 2 >= this.#frames.length) {
      this.#frames = this.#frames.slice(this.#head);
      this.#head = 0;
    }
    this.#frames.push(frame);
  };

  override _final(callback: (err?: Error | null) => void): void {
    this.#ending = true;
    this.#finalCallback = () => callback();
    if (!this.#running && !this.#pausedByReader) {
      if (this.#queuedBytes > 0) this.#start();
      else this.#finish();
    }
  }

  override _read(): void {
    if (!this.#pausedByReader) return;
    this.#pausedByReader = false;
    // The reader still has buffered frames: the next one is due one frame from now (starting
    // at once would let a reader that reads one frame at a time pull the queue in a burst).
    if (this.#queuedBytes >= this.frameBytes || (this.#ending && this.#queuedBytes > 0)) this.#start(1);
    else if (this.#ending) this.#finish();
    else if (this.fillGaps) this.#start(1);
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    this.#stopTimer();
    this.#running = false;
    this.#frames = [];
    this.#head = 0;
    this.#cutter.clear();
    this.#pendingWrite = undefined;
    this.#finalCallback = undefined;
    callback(err);
  }

  /** Starts the schedule now; the first frame is due after `firstSlot` frames. */
  #start(firstSlot = 0): void {
    this.#running = true;
    this.#t0 = this.#now();
    this.#slot = firstSlot;
    this.#tick();
  }

  #stopTimer(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #tick(): void {
    this.#timer = undefined;
    if (this.destroyed) return;
    const t = this.#now();
    while (this.#running) {
      const deadline = this.#t0 + this.#slot * this.frameMs;
      if (deadline > t) {
        this.#timer = setTimeout(() => this.#tick(), deadline - t);
        return;
      }
      let frame: Buffer;
      if (this.#head < this.#frames.length) {
        frame = this.#frames[this.#head]!;
        this.#frames[this.#head++] = EMPTY_FRAME; // not kept alive by the queue
      } else if (this.#ending && this.#queuedBytes > 0) {
        frame = this.#cutter.takePending(this.frameBytes, this.#silence);
      } else if (this.#ending) {
        this.#finish();
        return;
      } else if (this.fillGaps) {
        frame = Buffer.alloc(this.frameBytes, this.#silence);
        this.silentFramesSent++;
      } else {
        this.#running = false; // underrun: restart when the next frame is queued
        return;
      }
      this.#slot++;
      this.framesSent++;
      this.#releaseWriter();
      const more = this.push(frame);
      if (this.#ending && this.#queuedBytes === 0) {
        this.#finish();
        return;
      }
      if (!more) {
        this.#running = false;
        this.#pausedByReader = true;
        return;
      }
    }
  }

  #releaseWriter(): void {
    if (this.#pendingWrite !== undefined && this.#queuedBytes <= this.#highWaterBytes) {
      const cb = this.#pendingWrite;
      this.#pendingWrite = undefined;
      cb();
    }
  }

  #finish(): void {
    this.#running = false;
    this.#stopTimer();
    this.push(null);
    const cb = this.#finalCallback;
    this.#finalCallback = undefined;
    cb?.();
  }
}
