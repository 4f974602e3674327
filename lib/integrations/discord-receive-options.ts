/**
 * What `DiscordReceiveAdapter` takes and tells: the packets it accepts (bare Opus or with their
 * RTP fields), how it finds the gaps a receiver leaves (`GapMode`), its options, stats, gap and
 * warning details, and its typed events.
 */
import type { OpusBackendChoice } from '../audio/opus.js';
import type { RtTranslateError } from '../errors.js';

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

export const GAP_MODES: readonly GapMode[] = ['auto', 'clock', 'timestamp', 'sequence', 'none'];

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
