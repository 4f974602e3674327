/**
 * The emulator's voice-activity detector: splits a PCM16 LE mono 24 kHz byte stream into
 * utterances by energy, and hands back each utterance's own input audio (its voiced region plus
 * a little padding) so the emulator can return it, byte for byte, as the "translation".
 *
 * Policy, in 20 ms frames of 480 samples (960 bytes), counted from the first byte fed:
 * - a frame is voiced when its RMS level is above `thresholdDbfs` (relative to 32768);
 * - an utterance starts at its first voiced frame and ends once `silenceMs` of unvoiced frames
 *   followed its last voiced frame, or, for endless speech, at the first voiced frame that
 *   brings it to `maxUtteranceMs` (the next voiced frame then starts a new utterance);
 * - its audio runs from `paddingMs` before the first voiced frame to `paddingMs` after the last
 *   one, clamped: never before the first byte fed, never into the previous utterance's audio,
 *   and never past the audio received when the utterance ended (a forced end has no trailing
 *   padding; a silence shorter than the padding gives a shorter one).
 *
 * Memory: only the audio an utterance may still need is kept (the current utterance, its
 * leading padding and the frame being assembled), so at most about
 * `paddingMs + maxUtteranceMs + silenceMs` plus one fed chunk, whatever the length of the input.
 * Any byte count per call is accepted (odd counts included): frames are assembled across calls.
 */
import { ValidationError } from '../errors.js';
import { dbfsToMeanSquare, meanSquare } from '../audio/level.js';

/** Samples per detector frame: 20 ms at 24 kHz. */
export const VAD_FRAME_SAMPLES = 480;
/** Bytes per detector frame (PCM16 mono). */
export const VAD_FRAME_BYTES = VAD_FRAME_SAMPLES * 2;
/** Duration of one detector frame, in milliseconds. */
export const VAD_FRAME_MS = 20;
/** PCM16 mono 24 kHz: bytes per millisecond of audio. */
const BYTES_PER_MS = 48;

/** A frame is voiced above this RMS level, in dBFS. */
export const DEFAULT_VAD_THRESHOLD_DBFS = -40;
/** Unvoiced time that ends an utterance, in milliseconds. */
export const DEFAULT_VAD_SILENCE_MS = 600;
/** Longest utterance before a forced end, in milliseconds. */
export const DEFAULT_MAX_UTTERANCE_MS = 15_000;
/** Input audio kept around the voiced region of each utterance, in milliseconds. */
export const DEFAULT_PADDING_MS = 300;
/** Upper bound of `paddingMs`. */
export const MAX_PADDING_MS = 300;

export interface UtteranceSegmenterOptions {
  /** RMS level above which a frame is voiced, in dBFS (at most 0). Default -40. */
  thresholdDbfs?: number;
  /** Unvoiced milliseconds that end an utterance (> 0). Default 600. */
  silenceMs?: number;
  /** Milliseconds after which an utterance is ended even if speech goes on (> 0). Default 15000. */
  maxUtteranceMs?: number;
  /** Padding around the voiced region, in milliseconds, 0 to 300. Default 300. */
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
  if (typeof value !== 'number' || !Number.isFinite(value) || !ok(value)) {
    throw new ValidationError(field, accepted, String(value));
  }
  return value;
}

/** Segments a PCM16 LE mono 24 kHz stream into utterances; see the module comment for the policy. */
export class UtteranceSegmenter {
  private readonly powerThreshold: number;
  private readonly silenceFrames: number;
  private readonly maxFrames: number;
  private readonly padBytes: number;

  /** Bytes fed so far. */
  private received = 0;
  /** Offset of the frame being assembled (a multiple of VAD_FRAME_BYTES). */
  private frameStart = 0;
  /** The frame being assembled when it spans calls. */
  private readonly partial = Buffer.alloc(VAD_FRAME_BYTES);
  private partialLength = 0;

  /** Input still needed, in order, without gaps. */
  private readonly pieces: Piece[] = [];

  private inUtterance = false;
  private utteranceStart = 0;
  private lastVoicedEnd = 0;
  private utteranceFrames = 0;
  private unvoicedRun = 0;
  private previousAudioEnd = 0;
  private count = 0;

  constructor(options: UtteranceSegmenterOptions = {}) {
    const db = checkNumber('thresholdDbfs', options.thresholdDbfs ?? DEFAULT_VAD_THRESHOLD_DBFS, 'a number of dBFS, at most 0', (v) => v <= 0);
    const silence = checkNumber('silenceMs', options.silenceMs ?? DEFAULT_VAD_SILENCE_MS, 'a positive number of milliseconds', (v) => v > 0);
    const max = checkNumber('maxUtteranceMs', options.maxUtteranceMs ?? DEFAULT_MAX_UTTERANCE_MS, 'a positive number of milliseconds', (v) => v > 0);
    const pad = checkNumber('paddingMs', options.paddingMs ?? DEFAULT_PADDING_MS, `0 to ${MAX_PADDING_MS} milliseconds`, (v) => v >= 0 && v <= MAX_PADDING_MS);
    this.powerThreshold = dbfsToMeanSquare(db);
    this.silenceFrames = Math.max(1, Math.ceil(silence / VAD_FRAME_MS));
    this.maxFrames = Math.max(1, Math.ceil(max / VAD_FRAME_MS));
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
    return this.inUtterance;
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
    let pos = 0;
    if (this.partialLength > 0) {
      const take = Math.min(VAD_FRAME_BYTES - this.partialLength, chunk.length);
      chunk.copy(this.partial, this.partialLength, 0, take);
      this.partialLength += take;
      pos = take;
      if (this.partialLength === VAD_FRAME_BYTES) {
        this.partialLength = 0;
        this.frame(this.partial, 0, ended);
      }
    }
    while (chunk.length - pos >= VAD_FRAME_BYTES) {
      this.frame(chunk, pos, ended);
      pos += VAD_FRAME_BYTES;
    }
    if (pos < chunk.length) {
      chunk.copy(this.partial, 0, pos);
      this.partialLength = chunk.length - pos;
    }
    this.trim();
    return ended;
  }

  /** Forgets the utterance in progress (its audio is never returned). */
  dropCurrent(): void {
    this.inUtterance = false;
    this.trim();
  }

  private frame(buf: Buffer, offset: number, ended: SegmentedUtterance[]): void {
    const voiced = meanSquare(buf, offset, offset + VAD_FRAME_BYTES) > this.powerThreshold;
    const start = this.frameStart;
    const end = start + VAD_FRAME_BYTES;
    this.frameStart = end;

    if (!this.inUtterance) {
      if (!voiced) return;
      this.inUtterance = true;
      this.utteranceStart = start;
      this.utteranceFrames = 0;
      this.unvoicedRun = 0;
    }
    this.utteranceFrames += 1;
    if (voiced) {
      this.lastVoicedEnd = end;
      this.unvoicedRun = 0;
    } else {
      this.unvoicedRun += 1;
    }
    if (this.unvoicedRun >= this.silenceFrames || (voiced && this.utteranceFrames >= this.maxFrames)) {
      ended.push(this.finish(end));
    }
  }

  /** Ends the current utterance; `now` is the end of the last frame analysed. */
  private finish(now: number): SegmentedUtterance {
    this.inUtterance = false;
    const voicedStart = this.utteranceStart;
    const voicedEnd = this.lastVoicedEnd;
    const audioStart = Math.max(0, this.previousAudioEnd, voicedStart - this.padBytes);
    const audioEnd = voicedEnd + Math.min(this.padBytes, now - voicedEnd);
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
    const firstNeeded = this.inUtterance ? this.utteranceStart : this.frameStart;
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
