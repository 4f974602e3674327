/**
 * The emulator's own utterance detector, sharing no judgement (code or setting) with the client's
 * (`lib/audio/vad.ts`), only the level arithmetic (`audio/level.ts`): a service segments its own
 * way. It hands back each utterance's
 * input audio (its voiced region, plus `paddingMs` either side), which the emulator returns, byte
 * for byte, as the "translation". In frames of `frameMs` (30 ms) counted from the first byte fed:
 * - a frame is voiced when its RMS is at least `thresholdDbfs` (-45 dBFS, relative to 32768);
 * - an utterance starts at a voiced frame and ends after `silenceMs` (900) of unvoiced frames, at
 *   the voiced frame that brings it to `maxUtteranceMs`, or at `end()` (the audio stopped);
 * - with `splitMs`, its first part is handed out once the voiced span reaches `splitMs`, the
 *   rest (if voiced) when it ends: together, exactly the unsplit audio.
 * Audio never overlaps the previous answer's nor passes what was analysed (whole frames only).
 * Memory: about `paddingMs + maxUtteranceMs + silenceMs` plus one chunk, whatever the input's
 * length; any byte count per call is accepted (odd counts included).
 */
import { intOption, numberOption } from '../options.js';
import { frameMeanSquares, meanSquare } from '../audio/level.js';

/** PCM16 mono 24 kHz: bytes per millisecond of audio. */
const BYTES_PER_MS = 48;
/** Frame length of the detector, in milliseconds (720 samples). */
export const DEFAULT_VAD_FRAME_MS = 30;
/** A frame is voiced at or above this RMS level, in dBFS. */
export const DEFAULT_VAD_THRESHOLD_DBFS = -45;
/** Unvoiced time that ends an utterance, in milliseconds. */
export const DEFAULT_VAD_SILENCE_MS = 900;
/** Longest utterance before a forced end, in milliseconds. */
export const DEFAULT_MAX_UTTERANCE_MS = 15_000;
/** Input audio kept around the voiced region of each utterance, in milliseconds. */
export const DEFAULT_PADDING_MS = 0;
/** Upper bound of `paddingMs`. */
export const MAX_PADDING_MS = 300;

export interface UtteranceSegmenterOptions {
  /** Frame length in whole milliseconds, 1 to 1000. Default 30. */
  frameMs?: number;
  /** RMS level at or above which a frame is voiced, in dBFS (at most 0). Default -45. */
  thresholdDbfs?: number;
  /** Unvoiced milliseconds that end an utterance (> 0). Default 900. */
  silenceMs?: number;
  /** Milliseconds after which an utterance is ended even if speech goes on (> 0). Default 15000. */
  maxUtteranceMs?: number;
  /** Padding around the voiced region, in milliseconds, 0 to 300. Default 0: a translation as long as the speech. */
  paddingMs?: number;
  /** Hand out an utterance's first part once its voiced span reaches this many ms (> 0). Default: never split. */
  splitMs?: number;
}

/**
 * What was handed out: a whole utterance, or with `splitMs` its first part (while the speech
 * goes on) or the rest of it.
 */
export type UtterancePart = 'whole' | 'first' | 'rest';

/** One finished utterance (or part). Offsets are byte offsets into everything fed so far. */
export interface SegmentedUtterance {
  /** 1 for the first utterance of the stream, then 2, 3, ... (both parts of one share it). */
  readonly index: number;
  readonly part: UtterancePart;
  /** Start of the first voiced frame (of a rest: where the first part ended). */
  readonly voicedStart: number;
  /** End of the last voiced frame. */
  readonly voicedEnd: number;
  /** Where analysis stood when it was handed out. */
  readonly endedAt: number;
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

/** Segments a PCM16 LE mono 24 kHz stream into utterances; see the module comment for the policy. */
export class UtteranceSegmenter {
  readonly #frameBytes: number;
  /** Sum of squared samples of a frame at the threshold. */
  readonly #energyThreshold: number;
  /** Unvoiced bytes after the last voiced frame that end an utterance (whole frames). */
  readonly #silenceBytes: number;
  /** Bytes from an utterance's start at which a voiced frame ends it (whole frames). */
  readonly #maxBytes: number;
  /** Voiced span, in bytes, at which an utterance's first part is handed out (whole frames). */
  readonly #splitBytes: number;
  readonly #padBytes: number;

  /** The frame being assembled, when a chunk ended inside it. */
  readonly #frame: Buffer;
  /** The mean squares of up to 64 frames, measured together. */
  readonly #levels = new Float64Array(64);
  #frameFill = 0;
  /** Bytes analysed (whole frames). */
  #analysed = 0;
  /** Bytes fed. */
  #received = 0;
  /** Input still needed, in order, without gaps. */
  readonly #pieces: Piece[] = [];

  #speaking = false;
  /** Start of the current utterance's first voiced frame. */
  #utteranceStart = 0;
  /** Where the audio not yet handed out of the current utterance starts (its start, or the split point). */
  #partStart = 0;
  #split = false;
  #lastVoicedEnd = 0;
  #previousAudioEnd = 0;
  #count = 0;
  #out: SegmentedUtterance[] = [];

  constructor(options: UtteranceSegmenterOptions = {}) {
    const ms = 'a positive number of milliseconds';
    const frameMs = intOption(options.frameMs, 'frameMs', {
      min: 1,
      max: 1000,
      fallback: DEFAULT_VAD_FRAME_MS,
      accepted: 'a whole number of milliseconds, 1 to 1000',
    });
    const db = numberOption(options.thresholdDbfs, 'thresholdDbfs', { max: 0, fallback: DEFAULT_VAD_THRESHOLD_DBFS, accepted: 'a number of dBFS, at most 0' });
    const silence = numberOption(options.silenceMs, 'silenceMs', { above: 0, fallback: DEFAULT_VAD_SILENCE_MS, accepted: ms });
    const max = numberOption(options.maxUtteranceMs, 'maxUtteranceMs', { above: 0, fallback: DEFAULT_MAX_UTTERANCE_MS, accepted: ms });
    const pad = numberOption(options.paddingMs, 'paddingMs', {
      min: 0,
      max: MAX_PADDING_MS,
      fallback: DEFAULT_PADDING_MS,
      accepted: `0 to ${MAX_PADDING_MS} milliseconds`,
    });
    const split = options.splitMs === undefined ? undefined : numberOption(options.splitMs, 'splitMs', { above: 0, fallback: 0, accepted: ms });
    const samples = frameMs * (BYTES_PER_MS / 2);
    this.#frameBytes = samples * 2;
    this.#frame = Buffer.alloc(this.#frameBytes);
    const rms = 32768 * 10 ** (db / 20);
    this.#energyThreshold = rms * rms * samples;
    const frames = (ms: number): number => Math.max(1, Math.ceil(ms / frameMs)) * this.#frameBytes;
    this.#silenceBytes = frames(silence);
    this.#maxBytes = frames(max);
    this.#splitBytes = split === undefined ? Infinity : frames(split);
    this.#padBytes = Math.round((pad * BYTES_PER_MS) / 2) * 2;
  }

  /** Bytes per frame. */
  get frameBytes(): number {
    return this.#frameBytes;
  }

  /** Bytes fed so far. */
  get receivedBytes(): number {
    return this.#received;
  }

  /** Bytes analysed so far (whole frames). */
  get analysedBytes(): number {
    return this.#analysed;
  }

  /** End of the last voiced frame analysed (0 before any). */
  get lastVoicedEnd(): number {
    return this.#lastVoicedEnd;
  }

  /** Input bytes currently held (bounded; see the module comment). */
  get retainedBytes(): number {
    let total = 0;
    for (const piece of this.#pieces) total += piece.bytes.length;
    return total;
  }

  /** True while an utterance has started and not yet ended. */
  get speaking(): boolean {
    return this.#speaking;
  }

  /**
   * Feeds input audio and returns what was handed out within it, in order. The segmenter keeps a
   * reference to `chunk` (no copy) while it may be needed: do not modify it afterwards.
   */
  push(chunk: Buffer): SegmentedUtterance[] {
    if (chunk.length === 0) return [];
    this.#pieces.push({ offset: this.#received, bytes: chunk });
    this.#received += chunk.length;
    const size = this.#frameBytes;
    let at = 0;
    if (this.#frameFill > 0) {
      const taken = chunk.copy(this.#frame, this.#frameFill, 0, size - this.#frameFill);
      this.#frameFill += taken;
      at = taken;
      if (this.#frameFill < size) return this.#drain();
      this.#frameFill = 0;
      this.#analyse(this.#frame, 0);
    }
    // Whole frames measured together (one pass of the level kernel), then classified in order.
    const frames = Math.floor((chunk.length - at) / size);
    const levels = this.#levels;
    for (let first = 0; first < frames; first += levels.length) {
      const count = Math.min(levels.length, frames - first);
      frameMeanSquares(chunk, at + first * size, count, size, levels);
      for (let i = 0; i < count; i++) this.#classify(this.#energyOf(levels[i]!));
    }
    at += frames * size;
    this.#frameFill = chunk.copy(this.#frame, 0, at);
    return this.#drain();
  }

  /** Ends the utterance in progress now (the audio stopped arriving) and returns it, if any. */
  end(): SegmentedUtterance[] {
    if (this.#speaking) this.#finish(this.#analysed);
    return this.#drain();
  }

  /** Forgets the utterance in progress (its audio is never returned). */
  dropCurrent(): void {
    this.#speaking = false;
    this.#trim();
  }

  #drain(): SegmentedUtterance[] {
    this.#trim();
    if (this.#out.length === 0) return [];
    const out = this.#out;
    this.#out = [];
    return out;
  }

  /** Classifies the frame at `buf[offset]` and moves the utterance state on. */
  #analyse(buf: Buffer, offset: number): void {
    this.#classify(this.#energyOf(meanSquare(buf, offset, offset + this.#frameBytes)));
  }

  /** A frame's energy (the sum of its squared samples, an exact integer) from its mean square. */
  #energyOf(meanSquareValue: number): number {
    return Math.round(meanSquareValue * (this.#frameBytes / 2));
  }

  /** The next frame, of `energy`: moves the utterance state on. */
  #classify(energy: number): void {
    const voiced = energy >= this.#energyThreshold;
    const start = this.#analysed;
    const end = start + this.#frameBytes;
    this.#analysed = end;
    if (!voiced) {
      // Silence long enough since the last voiced frame ends the utterance.
      if (this.#speaking && end - this.#lastVoicedEnd >= this.#silenceBytes) this.#finish(end);
      return;
    }
    if (!this.#speaking) {
      this.#speaking = true;
      this.#utteranceStart = start;
      this.#partStart = start;
      this.#split = false;
    }
    this.#lastVoicedEnd = end;
    if (end - this.#utteranceStart >= this.#maxBytes) {
      this.#finish(end);
    } else if (!this.#split && end - this.#utteranceStart >= this.#splitBytes) {
      this.#split = true;
      this.#emit('first', this.#utteranceStart, end, end, end);
      this.#partStart = end;
    }
  }

  /** The utterance in progress ended with `endedAt` analysed: hand out what is left of it. */
  #finish(endedAt: number): void {
    this.#speaking = false;
    const voicedEnd = this.#lastVoicedEnd;
    if (voicedEnd <= this.#partStart) return; // a rest with no voiced frame
    this.#emit(this.#split ? 'rest' : 'whole', this.#partStart, voicedEnd, endedAt, voicedEnd + Math.min(this.#padBytes, endedAt - voicedEnd));
  }

  #emit(part: UtterancePart, voicedStart: number, voicedEnd: number, endedAt: number, audioEnd: number): void {
    const audioStart = Math.max(0, this.#previousAudioEnd, voicedStart - this.#padBytes);
    this.#previousAudioEnd = audioEnd;
    if (part !== 'rest') this.#count += 1;
    this.#out.push({
      index: this.#count,
      part,
      voicedStart,
      voicedEnd,
      endedAt,
      durationSeconds: (voicedEnd - voicedStart) / (BYTES_PER_MS * 1000),
      audioStart,
      audioEnd,
      audio: this.#slice(audioStart, audioEnd),
    });
  }

  #slice(from: number, to: number): Buffer {
    const out = Buffer.allocUnsafe(to - from);
    let written = 0;
    for (const piece of this.#pieces) {
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
  #trim(): void {
    const firstNeeded = this.#speaking ? this.#partStart : this.#analysed;
    const keepFrom = Math.max(this.#previousAudioEnd, firstNeeded - this.#padBytes);
    let drop = 0;
    while (drop < this.#pieces.length) {
      const piece = this.#pieces[drop]!;
      if (piece.offset + piece.bytes.length > keepFrom) break;
      drop += 1;
    }
    if (drop > 0) this.#pieces.splice(0, drop);
  }
}
