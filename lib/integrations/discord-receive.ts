/**
 * Receiving from Discord: `DiscordReceiveAdapter` decodes a voice receiver's Opus packets (20 ms
 * of 48 kHz stereo each), fills the silence gaps a receiver leaves (it sends nothing while the
 * speaker is silent) on the timeline its `GapMode` chooses, and converts to the service's
 * format. Its options and events are in `discord-receive-options.ts`.
 */
import { Transform, type TransformCallback } from 'node:stream';
import { IntegrityError, ValidationError, describeCause } from '../errors.js';
import { SERVICE_FORMAT } from '../audio/audio-format.js';
import { planConversion } from '../audio/convert.js';
import { FrameCutter } from '../audio/frames.js';
import type { AudioProcessor } from '../audio/processor.js';
import { OPUS_FRAME_MS, OPUS_FRAME_SAMPLES, OPUS_SAMPLE_RATE, createOpusCodec, type OpusBackend, type OpusCodec } from '../audio/opus.js';
import { withEvents } from '../typed-events.js';
import { intOption, numberOption } from '../options.js';
import { DISCORD_PCM_FORMAT } from './discord-format.js';
import {
  GAP_MODES,
  type DiscordReceiveEvents,
  type DiscordReceiveOptions,
  type DiscordReceiveStats,
  type GapInfo,
  type GapMode,
  type RtpOpusPacket,
} from './discord-receive-options.js';
/** 48 kHz samples per millisecond. */
const SAMPLES_PER_MS = OPUS_SAMPLE_RATE / 1000;
/** A packet behind the timeline by at most this much is late or repeated (dropped); more is a restart. */
const LATE_WINDOW_MS = 1000;
/** Silence is converted in pieces of at most this many 48 kHz stereo samples (100 ms). */
const SILENCE_PIECE_SAMPLES = 4800;
const SILENCE_PIECE = Buffer.alloc(SILENCE_PIECE_SAMPLES * 4);

function toServiceProcessor(): AudioProcessor {
  return planConversion({ ...DISCORD_PCM_FORMAT }, { ...SERVICE_FORMAT }).processor;
}

/** Clock mode's timeline: see `DiscordReceiveAdapter`. */
interface ClockTimeline {
  status: 'clock';
  /** Set by the first packet (and moved when a capped gap restarts the timeline). */
  origin: number | undefined;
  /** Audio out since the origin (`D`), in samples per channel. */
  outSamples: number;
  /** Frames of silence inserted for the gap in progress, and whether it reached `maxGapMs`. */
  gapFrames: number;
  gapCapped: boolean;
  /** `idleFillMs`: sends the silence that is due while no packet arrives. */
  idleTimer: NodeJS.Timeout | undefined;
}

/** The RTP modes' timeline: the next timestamp or sequence number expected (none before the first packet). */
interface RtpTimeline {
  status: 'timestamp' | 'sequence';
  expected: number | undefined;
}

/**
 * Where a receive adapter's timeline is: the gap mode in force with what it tracks, `auto` until
 * the first packet decides, `closed` (with the mode it had) after the end or a destroy. Changed
 * only through `#set`, which clears the idle timer unless the new state keeps it; the counters
 * change in place.
 */
type ReceiveState = { status: 'auto' | 'none' } | ClockTimeline | RtpTimeline | { status: 'closed'; mode: GapMode };

/** The timeline of a mode, before its first packet. */
function timelineFor(mode: GapMode): ReceiveState {
  switch (mode) {
    case 'clock':
      return { status: 'clock', origin: undefined, outSamples: 0, gapFrames: 0, gapCapped: false, idleTimer: undefined };
    case 'timestamp':
    case 'sequence':
      return { status: mode, expected: undefined };
    default:
      return { status: mode };
  }
}

/**
 * Opus packets from a Discord voice receiver in (object mode: one packet per write, a Buffer or
 * `{ packet, timestamp?, sequence? }`), PCM16 LE mono 24 kHz out (byte mode), with the silence
 * a receiver leaves out put back, so the output timeline is the speaker's real timeline.
 *
 * Gap rules (see `GapMode`):
 * - Clock: the clock is read when a packet reaches the adapter. The first packet sets the
 *   origin; after that the output holds `D` ms of audio, so a packet arriving at `t` is late by
 *   `L = t - origin - D`. When `L > toleranceMs`, `round(L / 20)` frames of 20 ms silence are
 *   inserted first. Because `L` is measured against the origin, not the previous packet, jitter
 *   does not accumulate: a frame inserted for a merely delayed packet is taken back from the next
 *   real gap. With `idleFillMs`, the same rule runs on a timer while no packets arrive. A gap
 *   that reaches `maxGapMs` stops there, and the next packet restarts the timeline (new origin).
 *   Keep the adapter directly behind the receiver with the pipeline flowing: a packet held up by
 *   backpressure looks late.
 * - Timestamp: a packet whose RTP timestamp is `n > 0` samples past the end of the previous
 *   packet is preceded by exactly `n` samples of silence (at most `maxGapMs`). A packet behind
 *   the timeline by up to 1 s is late or repeated: dropped with a `late-packet` warning; further
 *   behind, the sender restarted: a `discontinuity` warning, and the timeline goes on from it.
 * - Sequence: as timestamp, counting missing packets, each as long as the last packet decoded
 *   (20 ms for Discord).
 * Nothing is filled before the first packet. After the last one, only clock mode's idle fill
 * adds silence (up to `maxGapMs`), as a live microphone would, while the stream stays open.
 * Memory: silence goes out as it is due, whatever the reader does (`push()` returning false
 * does not hold it back), so it is bounded by `maxGapMs` per gap.
 *
 * A packet that does not decode (or is empty) is replaced by silence as long as the last good
 * packet (20 ms at first), with a `corrupt-packet` warning (`IntegrityError`): the timeline
 * stays real and the stream goes on.
 *
 * Conversion: decoded 48 kHz stereo -> downmix -> resample to 24 kHz (the library's converter;
 * output sample `k` is the input at time `k / 24000`, so N samples at 48 kHz give N / 2 out).
 *
 * Throws `UnsupportedError` when no Opus backend loads, `ValidationError` for bad options; a
 * write that is not a packet fails the stream with a `ValidationError` (field `packet`, or
 * `packet.timestamp` / `packet.sequence`).
 */
export class DiscordReceiveAdapter extends withEvents<DiscordReceiveEvents>()(Transform) {
  readonly opusBackend: OpusBackend;
  readonly toleranceMs: number;
  readonly maxGapMs: number;
  readonly idleFillMs: number;
  readonly stats: DiscordReceiveStats = {
    packets: 0,
    decodedPackets: 0,
    corruptPackets: 0,
    droppedPackets: 0,
    gaps: 0,
    cappedGaps: 0,
    silenceSamples: 0,
    bytesOut: 0,
  };

  readonly #codec: OpusCodec;
  readonly #processor: AudioProcessor;
  readonly #now: () => number;
  readonly #maxGapSamples: number;
  readonly #maxGapFrames: number;
  /** Output cut into `chunkMs` chunks, when set. */
  readonly #chunks: FrameCutter | undefined;
  #state: ReceiveState;
  /** Duration of the last packet decoded (or replaced), in samples per channel. */
  #lastSamples = OPUS_FRAME_SAMPLES;

  constructor(options: DiscordReceiveOptions = {}) {
    if (typeof options !== 'object' || options === null) {
      throw new ValidationError('options', 'an object { gaps?, toleranceMs?, maxGapMs?, idleFillMs?, now?, opusBackend? }', String(options));
    }
    const mode = options.gaps ?? 'auto';
    if (!GAP_MODES.includes(mode)) throw new ValidationError('gaps', `one of ${GAP_MODES.map((m) => `'${m}'`).join(', ')}`, String(mode));
    const toleranceMs = numberOption(options.toleranceMs, 'toleranceMs', { min: 0, fallback: 40, accepted: 'a finite number of milliseconds, 0 or more' });
    const maxGapMs = numberOption(options.maxGapMs, 'maxGapMs', { min: 0, fallback: 5000, accepted: 'a finite number of milliseconds, 0 or more' });
    const idleFillMs = numberOption(options.idleFillMs, 'idleFillMs', { min: 0, fallback: 100, accepted: 'a finite number of milliseconds, 0 or more' });
    const chunkMs = numberOption(options.chunkMs, 'chunkMs', { min: 0, fallback: 0, accepted: 'a finite number of milliseconds, 0 or more' });
    if (options.now !== undefined && typeof options.now !== 'function') {
      throw new ValidationError('now', 'a function returning monotonic milliseconds', typeof options.now);
    }
    const writableHighWaterMark = intOption(options.writableHighWaterMark, 'writableHighWaterMark', { min: 1, fallback: 16, accepted: 'a positive integer' });
    const readableHighWaterMark = intOption(options.readableHighWaterMark, 'readableHighWaterMark', {
      min: 1,
      fallback: 64 * 1024,
      accepted: 'a positive integer',
    });
    const codec = createOpusCodec({ backend: options.opusBackend ?? 'auto' });
    super({ writableObjectMode: true, readableObjectMode: false, writableHighWaterMark, readableHighWaterMark });
    this.#codec = codec;
    this.opusBackend = codec.backend;
    this.#processor = toServiceProcessor();
    this.#state = timelineFor(mode);
    this.toleranceMs = toleranceMs;
    this.maxGapMs = maxGapMs;
    this.idleFillMs = idleFillMs;
    this.#maxGapSamples = Math.floor(maxGapMs * SAMPLES_PER_MS);
    this.#maxGapFrames = Math.floor(maxGapMs / OPUS_FRAME_MS);
    const chunkBytes = Math.round(chunkMs * 24) * 2; // PCM16 mono 24 kHz
    this.#chunks = chunkBytes > 0 ? new FrameCutter(chunkBytes) : undefined;
    this.#now = options.now ?? (() => performance.now());
  }

  /** The gap mode in force (`'auto'` until the first packet decides). */
  get gapMode(): GapMode {
    const state = this.#state;
    return state.status === 'closed' ? state.mode : state.status;
  }

  /** Silence inserted so far (gaps and corrupt packets), in ms. */
  get silenceMs(): number {
    return this.stats.silenceSamples / SAMPLES_PER_MS;
  }

  override _transform(chunk: unknown, _encoding: BufferEncoding, callback: TransformCallback): void {
    try {
      this.#receive(chunk);
    } catch (err) {
      callback(err as Error);
      return;
    }
    callback();
  }

  override _flush(callback: TransformCallback): void {
    this.#set({ status: 'closed', mode: this.gapMode });
    let tail: Buffer;
    try {
      tail = this.#processor.flush();
    } catch (err) {
      callback(err as Error);
      return;
    }
    this.#out(tail);
    if (this.#chunks && this.#chunks.pendingBytes > 0) this.push(this.#chunks.takePending());
    this.#codec.close();
    callback();
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    this.#set({ status: 'closed', mode: this.gapMode });
    this.#codec.close();
    callback(err);
  }

  /** The one way the state changes: the idle timer of a clock timeline goes unless the new state keeps it. */
  #set(next: ReceiveState): void {
    const previous = this.#state;
    this.#state = next;
    const timer = previous.status === 'clock' ? previous.idleTimer : undefined;
    if (timer !== undefined && timer !== (next.status === 'clock' ? next.idleTimer : undefined)) clearTimeout(timer);
  }

  #receive(chunk: unknown): void {
    const { packet, timestamp, sequence } = readPacket(chunk);
    const index = this.stats.packets++;
    if (this.#state.status === 'auto') this.#set(timelineFor(timestamp !== undefined ? 'timestamp' : sequence !== undefined ? 'sequence' : 'clock'));
    const state = this.#state;
    switch (state.status) {
      case 'clock':
        this.#beforeClockPacket(state);
        break;
      case 'timestamp':
        if (timestamp === undefined)
          throw new ValidationError('packet.timestamp', 'an RTP timestamp on every packet (the first packet had one)', 'a packet without it');
        if (!this.#beforeRtpPacket(state, timestamp, index)) return;
        break;
      case 'sequence':
        if (sequence === undefined)
          throw new ValidationError('packet.sequence', 'an RTP sequence number on every packet (the first packet had one)', 'a packet without it');
        if (!this.#beforeRtpPacket(state, sequence, index)) return;
        break;
      default:
        break;
    }
    const samples = this.#decode(packet, index);
    if (state.status === 'timestamp') state.expected = (timestamp! + samples) >>> 0;
    else if (state.status === 'sequence') state.expected = (sequence! + 1) & 0xffff;
    else if (state.status === 'clock') this.#armIdleTimer();
  }

  /** Decodes (or replaces) one packet and emits it; returns its duration in samples per channel. */
  #decode(packet: Buffer, index: number): number {
    let pcm: Buffer | undefined;
    let reason = 'the packet is empty';
    if (packet.length > 0) {
      try {
        // Converted below before the next packet: the codec's own memory serves.
        pcm = this.#codec.decodeTransient(packet);
        if (pcm.length === 0 || pcm.length % 4 !== 0) {
          reason = `the decoder returned ${pcm.length} bytes`;
          pcm = undefined;
        }
      } catch (err) {
        reason = describeCause(err);
      }
    }
    if (pcm === undefined) {
      const samples = this.#lastSamples;
      this.stats.corruptPackets++;
      this.emit(
        'warning',
        new IntegrityError(
          `Opus packet ${index} (${packet.length} bytes) could not be decoded (${reason}); replaced by ${samples / SAMPLES_PER_MS} ms of silence.`,
        ),
        { kind: 'corrupt-packet', packetIndex: index },
      );
      this.#silence(samples);
      return samples;
    }
    const samples = pcm.length / 4;
    this.#lastSamples = samples;
    this.stats.decodedPackets++;
    this.#counted(samples);
    this.#out(this.#processor.process(pcm));
    return samples;
  }

  /** `samples` more of the output's timeline (clock mode measures lateness against it). */
  #counted(samples: number): void {
    if (this.#state.status === 'clock') this.#state.outSamples += samples;
  }

  /** Emits `samples` of silence (48 kHz stereo, converted), in bounded pieces. */
  #silence(samples: number): void {
    this.stats.silenceSamples += samples;
    this.#counted(samples);
    for (let left = samples; left > 0; left -= SILENCE_PIECE_SAMPLES) {
      const n = Math.min(left, SILENCE_PIECE_SAMPLES);
      this.#out(this.#processor.process(SILENCE_PIECE.subarray(0, n * 4)));
    }
  }

  #out(pcm: Buffer): void {
    if (pcm.length === 0) return;
    this.stats.bytesOut += pcm.length;
    if (this.#chunks) this.#chunks.forEachFrame(pcm, this.#pushChunk);
    else this.push(pcm);
  }

  readonly #pushChunk = (chunk: Buffer): void => {
    this.push(chunk);
  };

  /** Counts and reports a filled gap; a gap with nothing filled (`maxGapMs: 0`) is no event. */
  #closeGap(mode: GapInfo['mode'], samples: number, capped: boolean): void {
    if (samples === 0) return;
    this.stats.gaps++;
    if (capped) this.stats.cappedGaps++;
    this.emit('gap', { mode, durationMs: samples / SAMPLES_PER_MS, capped });
  }

  // --- clock mode ---

  #beforeClockPacket(clock: ClockTimeline): void {
    const t = this.#now();
    if (clock.origin === undefined) {
      clock.origin = t;
      return;
    }
    this.#catchUp(clock, t);
    const capped = clock.gapCapped;
    if (capped) clock.origin = t - clock.outSamples / SAMPLES_PER_MS; // restart the timeline here
    this.#closeGap('clock', clock.gapFrames * OPUS_FRAME_SAMPLES, capped);
    clock.gapFrames = 0;
    clock.gapCapped = false;
  }

  /** Inserts the silence due at time `t`. */
  #catchUp(clock: ClockTimeline, t: number): void {
    if (clock.origin === undefined || clock.gapCapped) return;
    const lateMs = t - clock.origin - clock.outSamples / SAMPLES_PER_MS;
    if (lateMs <= this.toleranceMs) return;
    let frames = Math.round(lateMs / OPUS_FRAME_MS);
    const room = this.#maxGapFrames - clock.gapFrames;
    if (frames > room) {
      frames = room;
      clock.gapCapped = true;
    }
    if (frames <= 0) return;
    clock.gapFrames += frames;
    this.#silence(frames * OPUS_FRAME_SAMPLES);
  }

  /** Restarts the idle wait: the pending timer is re-armed (one per packet would be 50 a second). */
  #armIdleTimer(): void {
    const state = this.#state;
    if (this.idleFillMs <= 0 || state.status !== 'clock') return;
    if (state.idleTimer !== undefined) {
      state.idleTimer.refresh();
      return;
    }
    const idleTimer = setTimeout(this.#onIdle, this.idleFillMs);
    idleTimer.unref();
    this.#set({ ...state, idleTimer });
  }

  readonly #onIdle = (): void => {
    if (this.#state.status !== 'clock') return;
    const clock: ClockTimeline = { ...this.#state, idleTimer: undefined };
    this.#set(clock);
    if (this.destroyed || this.writableFinished) return;
    try {
      this.#catchUp(clock, this.#now());
    } catch (err) {
      this.destroy(err as Error);
      return;
    }
    if (!clock.gapCapped) this.#armIdleTimer();
  };

  // --- RTP modes: return false to drop the packet ---

  /** Before a packet at `value` (its timestamp, or its sequence number): the gap since the last one is filled. */
  #beforeRtpPacket(rtp: RtpTimeline, value: number, index: number): boolean {
    const expected = rtp.expected;
    if (expected === undefined) return true;
    if (rtp.status === 'timestamp') {
      const delta = (value - expected) | 0; // signed distance, modulo 2^32
      return this.#fillRtpGap('timestamp', delta, 1, index, LATE_WINDOW_MS * SAMPLES_PER_MS, `timestamp ${value}, expected ${expected}`);
    }
    const delta = ((value - expected) << 16) >> 16; // signed distance, modulo 2^16
    return this.#fillRtpGap('sequence', delta, this.#lastSamples, index, LATE_WINDOW_MS / OPUS_FRAME_MS, `sequence ${value}, expected ${expected}`);
  }

  /** `delta` units of `unitSamples` are missing (> 0), or the packet is behind (< 0). */
  #fillRtpGap(mode: 'timestamp' | 'sequence', delta: number, unitSamples: number, index: number, lateWindow: number, where: string): boolean {
    if (delta > 0) {
      const missing = delta * unitSamples;
      const limit = mode === 'timestamp' ? this.#maxGapSamples : Math.floor(this.#maxGapSamples / unitSamples) * unitSamples;
      const samples = Math.min(missing, limit);
      if (samples > 0) this.#silence(samples);
      this.#closeGap(mode, samples, missing > limit);
      return true;
    }
    if (delta === 0) return true;
    if (-delta <= lateWindow) {
      this.stats.droppedPackets++;
      this.emit('warning', new IntegrityError(`Opus packet ${index} is late or repeated (${where}); dropped.`), { kind: 'late-packet', packetIndex: index });
      return false;
    }
    this.emit(
      'warning',
      new IntegrityError(`Opus packet ${index} jumps back in time (${where}): the sender restarted; the timeline goes on from this packet.`),
      { kind: 'discontinuity', packetIndex: index },
    );
    return true;
  }
}

function readPacket(chunk: unknown): { packet: Buffer; timestamp?: number; sequence?: number } {
  if (Buffer.isBuffer(chunk)) return { packet: chunk };
  if (chunk instanceof Uint8Array) return { packet: Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength) };
  if (typeof chunk === 'object' && chunk !== null && 'packet' in chunk) {
    const c = chunk as RtpOpusPacket;
    const packet = Buffer.isBuffer(c.packet)
      ? c.packet
      : c.packet instanceof Uint8Array
        ? Buffer.from(c.packet.buffer, c.packet.byteOffset, c.packet.byteLength)
        : undefined;
    if (packet === undefined) throw new ValidationError('packet.packet', 'a Buffer or Uint8Array holding one Opus packet', typeof c.packet);
    if (c.timestamp !== undefined && !(Number.isInteger(c.timestamp) && c.timestamp >= 0 && c.timestamp <= 0xffffffff)) {
      throw new ValidationError('packet.timestamp', 'an RTP timestamp, an integer from 0 to 2^32 - 1 (48 kHz samples)', String(c.timestamp));
    }
    if (c.sequence !== undefined && !(Number.isInteger(c.sequence) && c.sequence >= 0 && c.sequence <= 0xffff)) {
      throw new ValidationError('packet.sequence', 'an RTP sequence number, an integer from 0 to 65535', String(c.sequence));
    }
    return { packet, timestamp: c.timestamp, sequence: c.sequence };
  }
  const got = chunk === null ? 'null' : typeof chunk === 'string' ? 'a string' : typeof chunk;
  throw new ValidationError('packet', 'a Buffer holding one Opus packet, or { packet, timestamp?, sequence? }', got);
}
