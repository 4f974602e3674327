/**
 * The emulator's utterance segmenter: splits a PCM16 LE mono 24 kHz byte stream into
 * utterances with the shared energy detector (`lib/audio/vad.ts`: 20 ms frames, an utterance
 * ends after `silenceMs` of unvoiced frames or at `maxUtteranceMs`), and hands back each
 * utterance's own input audio (its voiced region plus a little padding) so the emulator can
 * return it, byte for byte, as the "translation".
 *
 * - An utterance's audio runs from `paddingMs` before the first voiced frame to `paddingMs` after the last
 *   one, clamped: never before the first byte fed, never into the previous utterance's audio,
 *   and never past the audio received when the utterance ended (a forced end has no trailing
 *   padding; a silence shorter than the padding gives a shorter one).
 *
 * Memory: only the audio an utterance may still need is kept (the current utterance, its
 * leading padding and the frame being assembled), so at most about
 * `paddingMs + maxUtteranceMs + silenceMs` plus one fed chunk, whatever the length of the input.
 * Any byte count per call is accepted (odd counts included): frames are assembled across calls.
 */
import {
  DEFAULT_VAD_SILENCE_MS,
  DEFAULT_VAD_THRESHOLD_DBFS,
  VoiceActivityDetector,
  checkVadNumber,
  type VoiceSegment,
} from '../audio/vad.js';

export { DEFAULT_VAD_SILENCE_MS, DEFAULT_VAD_THRESHOLD_DBFS, VAD_FRAME_BYTES, VAD_FRAME_MS, VAD_FRAME_SAMPLES } from '../audio/vad.js';

/** PCM16 mono 24 kHz: bytes per millisecond of audio. */
const BYTES_PER_MS = 48;
/** Longest utterance before a forced end, in milliseconds. */
export const DEFAULT_MAX_UTTERANCE_MS = 15_000;
/** Input audio kept around the voiced region of each utterance, in milliseconds. */
export const DEFAULT_PADDING_MS = 0;
/** Upper bound of `paddingMs`. */
export const MAX_PADDING_MS = 300;

export interface UtteranceSegmenterOptions {
  /** RMS level above which a frame is voiced, in dBFS (at most 0). Default -40. */
  thresholdDbfs?: number;
  /** Unvoiced milliseconds that end an utterance (> 0). Default 600. */
  silenceMs?: number;
  /** Milliseconds after which an utterance is ended even if speech goes on (> 0). Default 15000. */
  maxUtteranceMs?: number;
  /** Padding around the voiced region, in milliseconds, 0 to 300. Default 0: a translation as long as the speech. */
  paddingMs?: number;
}

/** One finished utterance. Offsets are byte offsets into everything fed so far. */
export interface SegmentedUtterance {
  /** 1 for the first utterance of the stream, then 2, 3, ... */
  readonly index: number;
  /** Start of the first voiced frame. */
  readonly voicedStart: number;
  /** End of the last voiced frame. */
  readonly voicedEnd: number;
  /** Voiced duration (`voicedEnd - voicedStart`), in seconds. */
  readonly durationSeconds: number;
  /** Where `audio` starts (padding included). */
  readonly audioStart: number;
  /** Where `audio` ends (padding included). */
  readonly audioEnd: number;
  /** The input bytes `[audioStart, audioEnd)`, a copy owned by the caller. */
  readonly audio: Buffer;
}

interface Piece {
  offset: number;
  bytes: Buffer;
}

function checkNumber(field: string, value: number, accepted: string, ok: (v: number) => boolean): number {
  return checkVadNumber(field, value, accepted, (v) => Number.isFinite(v) && ok(v));
}

/** Segments a PCM16 LE mono 24 kHz stream into utterances; see the module comment for the policy. */
export class UtteranceSegmenter {
  private readonly detector: VoiceActivityDetector;
  private readonly padBytes: number;

  /** Bytes fed so far. */
  private received = 0;
  /** Input still needed, in order, without gaps. */
  private readonly pieces: Piece[] = [];
  private previousAudioEnd = 0;
  private count = 0;

  constructor(options: UtteranceSegmenterOptions = {}) {
    const db = checkNumber('thresholdDbfs', options.thresholdDbfs ?? DEFAULT_VAD_THRESHOLD_DBFS, 'a number of dBFS, at most 0', (v) => v <= 0);
    const silence = checkNumber('silenceMs', options.silenceMs ?? DEFAULT_VAD_SILENCE_MS, 'a positive number of milliseconds', (v) => v > 0);
    const max = checkNumber('maxUtteranceMs', options.maxUtteranceMs ?? DEFAULT_MAX_UTTERANCE_MS, 'a positive number of milliseconds', (v) => v > 0);
    const pad = checkNumber('paddingMs', options.paddingMs ?? DEFAULT_PADDING_MS, `0 to ${MAX_PADDING_MS} milliseconds`, (v) => v >= 0 && v <= MAX_PADDING_MS);
    this.detector = new VoiceActivityDetector({ thresholdDbfs: db, silenceMs: silence, maxSegmentMs: max });
    this.padBytes = Math.round((pad * BYTES_PER_MS) / 2) * 2;
  }

  /** Bytes fed so far. */
  get receivedBytes(): number {
    return this.received;
  }

  /** Input bytes currently held (bounded; see the module comment). */
  get retainedBytes(): number {
    let total = 0;
    for (const piece of this.pieces) total += piece.bytes.length;
    return total;
  }

  /** True while an utterance has started and not yet ended. */
  get speaking(): boolean {
    return this.detector.speaking;
  }

  /**
   * Feeds input audio and returns the utterances that ended within it, in order. The segmenter
   * keeps a reference to `chunk` (no copy) while it may be needed: do not modify it afterwards.
   */
  push(chunk: Buffer): SegmentedUtterance[] {
    if (chunk.length === 0) return [];
    this.pieces.push({ offset: this.received, bytes: chunk });
    this.received += chunk.length;
    const ended: SegmentedUtterance[] = [];
    this.detector.push(chunk, (segment) => ended.push(this.finish(segment)));
    this.trim();
    return ended;
  }

  /** Forgets the utterance in progress (its audio is never returned). */
  dropCurrent(): void {
    this.detector.dropCurrent();
    this.trim();
  }

  /** The audio of a segment that just ended, with its padding. */
  private finish({ voicedStart, voicedEnd, endedAt }: VoiceSegment): SegmentedUtterance {
    const audioStart = Math.max(0, this.previousAudioEnd, voicedStart - this.padBytes);
    const audioEnd = voicedEnd + Math.min(this.padBytes, endedAt - voicedEnd);
    this.previousAudioEnd = audioEnd;
    this.count += 1;
    return {
      index: this.count,
      voicedStart,
      voicedEnd,
      durationSeconds: (voicedEnd - voicedStart) / (BYTES_PER_MS * 1000),
      audioStart,
      audioEnd,
      audio: this.slice(audioStart, audioEnd),
    };
  }

  private slice(from: number, to: number): Buffer {
    const out = Buffer.allocUnsafe(to - from);
    let written = 0;
    for (const piece of this.pieces) {
      const pieceEnd = piece.offset + piece.bytes.length;
      if (pieceEnd <= from) continue;
      if (piece.offset >= to) break;
      const a = Math.max(from, piece.offset) - piece.offset;
      const b = Math.min(to, pieceEnd) - piece.offset;
      written += piece.bytes.copy(out, written, a, b);
    }
    return out;
  }

  /** Drops input no future utterance can need. */
  private trim(): void {
    const firstNeeded = this.detector.speaking ? this.detector.segmentStart : this.detector.analysedBytes;
    const keepFrom = Math.max(this.previousAudioEnd, firstNeeded - this.padBytes);
    let drop = 0;
    while (drop < this.pieces.length) {
      const piece = this.pieces[drop]!;
      if (piece.offset + piece.bytes.length > keepFrom) break;
      drop += 1;
    }
    if (drop > 0) this.pieces.splice(0, drop);
  }
}
