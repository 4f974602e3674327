/**
 * Discord voice adapters: between "@discordjs/voice style" audio and the realtime service's
 * format (PCM16 LE, mono, 24 kHz). Nothing here imports discord.js or @discordjs/voice:
 *
 * - Receiving: a voice receiver's `AudioReceiveStream` yields one Opus packet (a Buffer, 20 ms of
 *   48 kHz stereo) per object. `DiscordReceiveAdapter` decodes them, fills the silence gaps a
 *   receiver leaves (it sends nothing while the speaker is silent), and converts to the service
 *   format.
 * - Playing: `createAudioResource` takes a Readable of 48 kHz stereo PCM16 (`StreamType.Raw`) or
 *   of Opus packets (`StreamType.Opus`). `DiscordPlaybackAdapter` converts translated audio into
 *   exact 20 ms frames of either.
 * - `translateSpeaker` composes receiver -> adapter -> `RealtimeTranslateStream` -> playback with
 *   `pipeline()`.
 *
 * The DSP (channel mix, resampling) is the conversion chain of `audio/convert.ts`; the codec is
 * `./opus.ts`; pacing is `audio/pacer.ts`. This module only decides what goes where and when.
 */
import { Readable, Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { IntegrityError, RtTranslateError, ValidationError, describeCause } from '../errors.js';
import { SERVICE_FORMAT, type ResolvedAudioDescription } from '../audio/audio-format.js';
import { planConversion } from '../audio/convert.js';
import { FrameCutter } from '../audio/frames.js';
import { Pacer } from '../audio/pacer.js';
import type { AudioProcessor } from '../audio/processor.js';
import { RealtimeTranslateStream, type RealtimeTranslateOptions } from '../realtime/realtime-translate-stream.js';
import {
  FrameAssembler,
  OPUS_FRAME_BYTES,
  OPUS_FRAME_MS,
  OPUS_FRAME_SAMPLES,
  OPUS_SAMPLE_RATE,
  OpusPacketEncoder,
  createOpusCodec,
  type OpusBackend,
  type OpusBackendChoice,
  type OpusCodec,
} from '../audio/opus.js';

/** Discord's PCM: s16le, 48 kHz, stereo (what a receiver decodes to and a player plays). */
export const DISCORD_PCM_FORMAT: Readonly<ResolvedAudioDescription> = Object.freeze({ format: 's16le', rate: 48_000, channels: 2 });

/** Bytes of one 20 ms playback frame of 48 kHz stereo PCM16: 3840. */
export const DISCORD_FRAME_BYTES = OPUS_FRAME_BYTES;

/** 48 kHz samples per millisecond. */
const SAMPLES_PER_MS = OPUS_SAMPLE_RATE / 1000;
/** A packet behind the timeline by at most this much is late or repeated (dropped); more is a restart. */
const LATE_WINDOW_MS = 1000;
/** Silence is converted in pieces of at most this many 48 kHz stereo samples (100 ms). */
const SILENCE_PIECE_SAMPLES = 4800;
const SILENCE_PIECE = Buffer.alloc(SILENCE_PIECE_SAMPLES * 4);

// --- receiving -----------------------------------------------------------------------------------

/**
 * An Opus packet with the RTP header fields that place it on the sender's timeline (for
 * receivers that expose them). `timestamp` counts 48 kHz samples (uint32, wraps);
 * `sequence` counts packets (uint16, wraps).
 */
export interface RtpOpusPacket {
  packet: Buffer | Uint8Array;
  timestamp?: number;
  sequence?: number;
}

/** What the receive adapter accepts per write: a bare packet or a packet with RTP fields. */
export type OpusPacketInput = Buffer | Uint8Array | RtpOpusPacket;

/**
 * How gaps are found (see `DiscordReceiveAdapter`):
 * - `'clock'`: bare packets arriving in real time, gaps measured on a monotonic clock;
 * - `'timestamp'`: `{ packet, timestamp }`, gaps from the RTP timestamps, sample-exact;
 * - `'sequence'`: `{ packet, sequence }`, gaps from the RTP sequence numbers, whole packets;
 * - `'none'`: no gap filling (the packets are decoded back to back);
 * - `'auto'` (default): from the first packet: `timestamp` if it has one, else `sequence` if it
 *   has one, else `clock`. Every later packet must carry the same field.
 */
export type GapMode = 'auto' | 'clock' | 'timestamp' | 'sequence' | 'none';

const GAP_MODES: readonly GapMode[] = ['auto', 'clock', 'timestamp', 'sequence', 'none'];

export interface DiscordReceiveOptions {
  /** Default `'auto'`. */
  gaps?: GapMode;
  /**
   * Clock mode: lateness tolerated before silence is inserted, in ms (network jitter). Default
   * 40. A shorter gap (a single lost packet) is not filled at once: its time is carried until
   * the lag exceeds the tolerance. A smaller value finds short gaps sooner but turns more
   * jitter into inserted frames (taken back at the next gap). Either way the output stays
   * within about this plus half a frame of the clock.
   */
  toleranceMs?: number;
  /**
   * Most silence inserted for one gap, in ms (rounded down to whole 20 ms frames in clock and
   * sequence modes). Default 5000: enough for any voice detector to close an utterance and for
   * natural pauses, while a speaker returning after an hour does not cause an hour of zeros to
   * be sent (and possibly billed). Longer gaps are shortened to this; 0 disables filling.
   */
  maxGapMs?: number;
  /**
   * Clock mode: while no packet arrives, check every this many ms and send the silence that is
   * due, so the service hears the pause (and ends the utterance) without waiting for the speaker
   * to talk again. Default 100; 0 inserts silence only when the next packet arrives. The timer
   * is unref'd and stops at the `maxGapMs` bound.
   */
  idleFillMs?: number;
  /** Clock mode: monotonic clock in ms. Default `performance.now()`. */
  now?: () => number;
  /** Default `'auto'` (`@discordjs/opus`, else `opusscript`). */
  opusBackend?: OpusBackendChoice;
  /**
   * Push the output in chunks of this many ms of audio (the rest waits for more, and goes out
   * at the end): fewer, larger appends to the service cost less CPU, and the service hears the
   * speech at most this much later. Default 0: each packet's audio as soon as it is decoded.
   * `translateSpeaker` uses 100.
   */
  chunkMs?: number;
  /** Packets buffered on the writable side. Default 16 (320 ms). */
  writableHighWaterMark?: number;
  /** Bytes buffered on the readable side. Default 64 KiB. */
  readableHighWaterMark?: number;
}

/** Counters of a receive adapter. */
export interface DiscordReceiveStats {
  /** Packets written. */
  packets: number;
  /** Packets decoded into audio. */
  decodedPackets: number;
  /** Packets that failed to decode (each replaced by silence of one packet's duration). */
  corruptPackets: number;
  /** Late or repeated packets dropped (timestamp and sequence modes). */
  droppedPackets: number;
  /** Gaps filled with silence (none when `maxGapMs` is 0). */
  gaps: number;
  /** Gaps longer than `maxGapMs`, shortened to it (and filled). */
  cappedGaps: number;
  /** Silence inserted for gaps and corrupt packets, in 48 kHz samples per channel. */
  silenceSamples: number;
  /** PCM bytes emitted (service format). */
  bytesOut: number;
}

/**
 * Payload of the `gap` event, emitted when a gap with silence inserted closes (the next packet
 * arrives). With `maxGapMs: 0` nothing is inserted and no `gap` event is emitted.
 */
export interface GapInfo {
  mode: 'clock' | 'timestamp' | 'sequence';
  /** Silence inserted for this gap, in ms. */
  durationMs: number;
  /** The gap was longer than `maxGapMs` and was shortened to it. */
  capped: boolean;
}

/** What a receive warning is about. */
export interface ReceiveWarningDetail {
  kind: 'corrupt-packet' | 'late-packet' | 'discontinuity';
  /** 0-based index of the packet among those written. */
  packetIndex: number;
}

export interface DiscordReceiveEvents {
  /** A packet could not be used; the stream goes on. The error is an `IntegrityError`. */
  warning: [warning: RtTranslateError, detail: ReceiveWarningDetail];
  /** A gap was filled with silence. */
  gap: [gap: GapInfo];
}

function nonNegative(value: unknown, field: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value === 'number' && Number.isFinite(value) && value >= 0) return value;
  throw new ValidationError(field, 'a finite number of milliseconds, 0 or more', String(value));
}

function positiveInteger(value: unknown, field: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value === 'number' && Number.isInteger(value) && value > 0) return value;
  throw new ValidationError(field, 'a positive integer', String(value));
}

function toServiceProcessor(): AudioProcessor {
  return planConversion({ ...DISCORD_PCM_FORMAT }, { ...SERVICE_FORMAT }).processor;
}

function fromServiceProcessor(): AudioProcessor {
  return planConversion({ ...SERVICE_FORMAT }, { ...DISCORD_PCM_FORMAT }).processor;
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
export class DiscordReceiveAdapter extends Transform {
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
    const toleranceMs = nonNegative(options.toleranceMs, 'toleranceMs', 40);
    const maxGapMs = nonNegative(options.maxGapMs, 'maxGapMs', 5000);
    const idleFillMs = nonNegative(options.idleFillMs, 'idleFillMs', 100);
    const chunkMs = nonNegative(options.chunkMs, 'chunkMs', 0);
    if (options.now !== undefined && typeof options.now !== 'function') {
      throw new ValidationError('now', 'a function returning monotonic milliseconds', typeof options.now);
    }
    const writableHighWaterMark = positiveInteger(options.writableHighWaterMark, 'writableHighWaterMark', 16);
    const readableHighWaterMark = positiveInteger(options.readableHighWaterMark, 'readableHighWaterMark', 64 * 1024);
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
        if (timestamp === undefined) throw new ValidationError('packet.timestamp', 'an RTP timestamp on every packet (the first packet had one)', 'a packet without it');
        if (!this.#beforeRtpPacket(state, timestamp, index)) return;
        break;
      case 'sequence':
        if (sequence === undefined) throw new ValidationError('packet.sequence', 'an RTP sequence number on every packet (the first packet had one)', 'a packet without it');
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
    const packet = Buffer.isBuffer(c.packet) ? c.packet : c.packet instanceof Uint8Array ? Buffer.from(c.packet.buffer, c.packet.byteOffset, c.packet.byteLength) : undefined;
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

// Typed events.
export interface DiscordReceiveAdapter {
  on<E extends keyof DiscordReceiveEvents>(event: E, listener: (...args: DiscordReceiveEvents[E]) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
  once<E extends keyof DiscordReceiveEvents>(event: E, listener: (...args: DiscordReceiveEvents[E]) => void): this;
  once(event: string | symbol, listener: (...args: any[]) => void): this;
  off<E extends keyof DiscordReceiveEvents>(event: E, listener: (...args: DiscordReceiveEvents[E]) => void): this;
  off(event: string | symbol, listener: (...args: any[]) => void): this;
  emit<E extends keyof DiscordReceiveEvents>(event: E, ...args: DiscordReceiveEvents[E]): boolean;
  emit(event: string | symbol, ...args: any[]): boolean;
}

// --- playing -------------------------------------------------------------------------------------

/** `'pcm'`: 3840-byte frames of 48 kHz stereo PCM16 (`StreamType.Raw`); `'opus'`: one packet per frame (`StreamType.Opus`). */
export type PlaybackOutput = 'pcm' | 'opus';

export interface DiscordPlaybackOptions {
  /** Default `'pcm'`. */
  output?: PlaybackOutput;
  /** For `'opus'` output; default `'auto'`. */
  opusBackend?: OpusBackendChoice;
  /** For `'opus'` output: encoder bitrate in bits per second. Default: the codec's own. */
  bitrate?: number;
  /** Frames (or packets) buffered on the readable side. Default 16 (320 ms). */
  readableHighWaterMark?: number;
  /** Bytes buffered on the writable side. Default 16 KiB. */
  writableHighWaterMark?: number;
}

/**
 * Translated audio (PCM16 LE mono 24 kHz, any chunking) in; 20 ms frames for a Discord player
 * out, one per chunk (object mode): 3840-byte frames of 48 kHz stereo PCM16, or one Opus packet
 * per such frame. Conversion: resample 24 -> 48 kHz, then the mono sample in both channels.
 *
 * End of input: the converter's tail is emitted, and a last partial frame is padded with
 * silence to a whole 20 ms frame (at most 19.98 ms added; `paddingBytes` says how much).
 *
 * No pacing: a @discordjs/voice `AudioPlayer` reads one frame every 20 ms by itself. Between
 * translations this stream has nothing to give; create the player with
 * `behaviors: { maxMissedFrames: Infinity }` so it plays silence meanwhile instead of stopping
 * after 5 missed frames, or put `createDiscordPacer({ fillGaps: true })` behind a `'pcm'`
 * adapter for a sink that wants a steady 20 ms stream.
 */
export class DiscordPlaybackAdapter extends Transform {
  readonly output: PlaybackOutput;
  /** The Opus backend (`'opus'` output only). */
  readonly opusBackend: OpusBackend | undefined;
  /** Frames emitted so far. */
  framesOut = 0;
  /** Silence bytes (48 kHz stereo) added to complete the last frame. */
  paddingBytes = 0;

  private readonly processor: AudioProcessor = fromServiceProcessor();
  private readonly frames = new FrameAssembler(DISCORD_FRAME_BYTES);
  private readonly codec: OpusCodec | undefined;

  constructor(options: DiscordPlaybackOptions = {}) {
    if (typeof options !== 'object' || options === null) {
      throw new ValidationError('options', 'an object { output?, opusBackend?, bitrate? }', String(options));
    }
    const output = options.output ?? 'pcm';
    if (output !== 'pcm' && output !== 'opus') throw new ValidationError('output', "'pcm' or 'opus'", String(output));
    const readableHighWaterMark = positiveInteger(options.readableHighWaterMark, 'readableHighWaterMark', 16);
    const writableHighWaterMark = positiveInteger(options.writableHighWaterMark, 'writableHighWaterMark', 16 * 1024);
    const codec = output === 'opus' ? createOpusCodec({ backend: options.opusBackend ?? 'auto', bitrate: options.bitrate }) : undefined;
    super({ readableObjectMode: true, writableObjectMode: false, decodeStrings: true, readableHighWaterMark, writableHighWaterMark });
    this.output = output;
    this.codec = codec;
    this.opusBackend = codec?.backend;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    try {
      this.frames.add(this.processor.process(chunk), this.emitFrame);
    } catch (err) {
      callback(err as Error);
      return;
    }
    callback();
  }

  override _flush(callback: TransformCallback): void {
    try {
      this.frames.add(this.processor.flush(), this.emitFrame);
      this.paddingBytes = this.frames.finish(this.emitFrame);
    } catch (err) {
      callback(err as Error);
      return;
    }
    this.codec?.close();
    callback();
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    this.codec?.close();
    callback(err);
  }

  private readonly emitFrame = (frame: Buffer): void => {
    this.framesOut++;
    this.push(this.codec ? this.codec.encode(frame) : frame);
  };
}

export interface DiscordPacerOptions {
  /** Send silent frames while no audio is queued (keeps a player fed). Default true. */
  fillGaps?: boolean;
  /** Queued audio beyond which writes wait, in ms. Default 200. */
  highWaterMs?: number;
  /** Monotonic clock in ms; default `performance.now()`. */
  now?: () => number;
}

/**
 * A `Pacer` for Discord playback: 48 kHz stereo PCM16 in, 3840-byte frames out every 20 ms of
 * the clock (see `audio/pacer.ts` for the schedule and the gap policy).
 */
export function createDiscordPacer(options: DiscordPacerOptions = {}): Pacer {
  return new Pacer({
    sampleRate: DISCORD_PCM_FORMAT.rate,
    channels: DISCORD_PCM_FORMAT.channels,
    frameMs: OPUS_FRAME_MS,
    fillGaps: options.fillGaps ?? true,
    highWaterMs: options.highWaterMs,
    now: options.now,
  });
}

// --- the whole path ------------------------------------------------------------------------------

export interface TranslateSpeakerOptions extends RealtimeTranslateOptions {
  /** The speaker's Opus packets: a receiver's `AudioReceiveStream`, or any (async) iterable of packets. */
  opusPackets: Readable | AsyncIterable<OpusPacketInput> | Iterable<OpusPacketInput>;
  /** Playback as Opus packets (default, for `StreamType.Opus`) or 48 kHz stereo PCM frames (`StreamType.Raw`). */
  output?: PlaybackOutput;
  /** Release playback frames at real time, with silence between translations (`createDiscordPacer`). Default false. */
  pace?: boolean;
  /** Options of the receive adapter (`opusBackend` defaults to the top-level one, `chunkMs` to 100). */
  receive?: DiscordReceiveOptions;
  /** Options of the playback adapter (`output` is the top-level one). */
  playback?: Omit<DiscordPlaybackOptions, 'output'>;
  /** Opus backend for both directions. Default `'auto'`. */
  opusBackend?: OpusBackendChoice;
}

export interface SpeakerTranslation {
  /** 20 ms frames to play: Opus packets or 3840-byte PCM frames, one per chunk (object mode). */
  playback: Readable;
  translator: RealtimeTranslateStream;
  receiver: DiscordReceiveAdapter;
  /**
   * Settles when the path ends: resolves after the packets ended and the last translation went
   * into `playback`; rejects with the first error (every stage, `playback` included, is then
   * destroyed with it). Already handled: not awaiting it causes no unhandled rejection.
   */
  done: Promise<void>;
}

/**
 * One speaker's translation path, composed with `pipeline()`:
 * `opusPackets -> DiscordReceiveAdapter -> RealtimeTranslateStream -> DiscordPlaybackAdapter
 * [-> createDiscordPacer() [-> OpusPacketEncoder]]`. Read (or play) `playback`; destroy it, or
 * end `opusPackets`, to stop. Throws synchronously for bad options (as the stages' constructors
 * do).
 */
export function translateSpeaker(options: TranslateSpeakerOptions): SpeakerTranslation {
  if (typeof options !== 'object' || options === null) {
    throw new ValidationError('options', 'an object { opusPackets, from, to, ... }', String(options));
  }
  const { opusPackets, output = 'opus', pace = false, receive = {}, playback = {}, opusBackend = 'auto', ...realtime } = options;
  const source = opusPackets instanceof Readable ? opusPackets : isIterable(opusPackets) ? Readable.from(opusPackets) : undefined;
  if (source === undefined) throw new ValidationError('opusPackets', 'a Readable or an (async) iterable of Opus packets', typeof opusPackets);
  if (output !== 'pcm' && output !== 'opus') throw new ValidationError('output', "'pcm' or 'opus'", String(output));

  // The translator connects as soon as it exists: it is made last, and whatever was made before
  // a constructor throws is released.
  const made: Array<Transform | Pacer> = [];
  let receiver: DiscordReceiveAdapter;
  let translator: RealtimeTranslateStream;
  try {
    receiver = new DiscordReceiveAdapter({ opusBackend, chunkMs: 100, ...receive });
    made.push(receiver);
    if (pace) {
      made.push(new DiscordPlaybackAdapter({ opusBackend, ...playback, output: 'pcm' }), createDiscordPacer());
      if (output === 'opus') made.push(new OpusPacketEncoder({ opusBackend: playback.opusBackend ?? opusBackend, bitrate: playback.bitrate }));
    } else {
      made.push(new DiscordPlaybackAdapter({ opusBackend, ...playback, output }));
    }
    translator = new RealtimeTranslateStream(realtime);
  } catch (err) {
    for (const stream of made) stream.destroy();
    throw err;
  }
  const stages = made.slice(1);
  const done = pipeline([source, receiver, translator, ...stages]);
  done.catch(() => {});
  return { playback: stages[stages.length - 1] as unknown as Readable, translator, receiver, done };
}

function isIterable(value: unknown): value is AsyncIterable<unknown> | Iterable<unknown> {
  return (
    typeof value === 'object' &&
    value !== null &&
    (typeof (value as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function' || typeof (value as Iterable<unknown>)[Symbol.iterator] === 'function')
  );
}
