/**
 * The client's energy-based voice-activity detector for PCM16 LE mono 24 kHz: it finds the speech
 * the realtime stream has sent (the ending's evidence of what is owed; also public through
 * `rt-translate/dsp`). The emulator has a detector of its own (`lib/emulator/vad.ts`): a service
 * segments by its own judgement.
 *
 * Policy, in 20 ms frames of 480 samples (960 bytes), counted from the first byte fed:
 * - a frame is voiced when its RMS level is above `thresholdDbfs` (relative to 32768);
 * - a segment starts at its first voiced frame and ends once `silenceMs` of unvoiced frames
 *   followed its last voiced frame, or, for endless speech, at the first voiced frame that
 *   brings it to `maxSegmentMs` (the next voiced frame then starts a new segment).
 * Any byte count per call is accepted (odd counts included): frames are assembled across calls.
 */
import { FrameCutter } from './frames.js';
import { dbfsToMeanSquare, frameMeanSquares, type SharedFrameLevels } from './level.js';
import { numberOption } from '../options.js';

/** Samples per detector frame: 20 ms at 24 kHz. */
export const VAD_FRAME_SAMPLES = 480;
/** Bytes per detector frame (PCM16 mono). */
export const VAD_FRAME_BYTES = VAD_FRAME_SAMPLES * 2;
/** Duration of one detector frame, in milliseconds. */
export const VAD_FRAME_MS = 20;

/** A frame is voiced above this RMS level, in dBFS. */
export const DEFAULT_VAD_THRESHOLD_DBFS = -40;
/** Unvoiced time that ends a segment, in milliseconds. */
export const DEFAULT_VAD_SILENCE_MS = 600;

export interface VoiceActivityOptions {
  /** RMS level above which a frame is voiced, in dBFS (at most 0). Default -40. */
  thresholdDbfs?: number;
  /** Unvoiced milliseconds that end a segment (> 0). Default 600. */
  silenceMs?: number;
  /** Milliseconds after which a segment is ended even if speech goes on (> 0). Default: never. */
  maxSegmentMs?: number;
}

/** A finished segment. Offsets are byte offsets into everything fed so far. */
export interface VoiceSegment {
  /** Start of the first voiced frame. */
  readonly voicedStart: number;
  /** End of the last voiced frame. */
  readonly voicedEnd: number;
  /** End of the frame that ended the segment (audio received when it ended). */
  readonly endedAt: number;
}

export class VoiceActivityDetector {
  readonly #powerThreshold: number;
  readonly #silenceFrames: number;
  readonly #maxFrames: number;

  /** Offset of the frame being assembled (a multiple of VAD_FRAME_BYTES). */
  #frameStart = 0;
  readonly #frames = new FrameCutter(VAD_FRAME_BYTES, { reuse: true });
  #onEnd: (segment: VoiceSegment) => void = () => {};

  #inSegment = false;
  #segmentStart = 0;
  #segmentFrames = 0;
  #unvoicedRun = 0;
  #lastVoicedEnd = 0;

  constructor(options: VoiceActivityOptions = {}) {
    const db = numberOption(options.thresholdDbfs, 'thresholdDbfs', { max: 0, fallback: DEFAULT_VAD_THRESHOLD_DBFS, accepted: 'a number of dBFS, at most 0' });
    const silence = numberOption(options.silenceMs, 'silenceMs', { above: 0, fallback: DEFAULT_VAD_SILENCE_MS, accepted: 'a positive number of milliseconds' });
    const max = numberOption(options.maxSegmentMs, 'maxSegmentMs', {
      above: 0,
      fallback: Infinity,
      infinity: true,
      accepted: 'a positive number of milliseconds',
    });
    this.#powerThreshold = dbfsToMeanSquare(db);
    this.#silenceFrames = Math.max(1, Math.ceil(silence / VAD_FRAME_MS));
    this.#maxFrames = Number.isFinite(max) ? Math.max(1, Math.ceil(max / VAD_FRAME_MS)) : Infinity;
  }

  /** Bytes analysed so far (whole frames). */
  get analysedBytes(): number {
    return this.#frameStart;
  }

  /** True while a segment has started and not yet ended. */
  get speaking(): boolean {
    return this.#inSegment;
  }

  /** Start of the current segment's first voiced frame (meaningful while `speaking`). */
  get segmentStart(): number {
    return this.#segmentStart;
  }

  /** Voiced span of the current segment so far, in bytes (0 when not speaking). */
  get currentVoicedBytes(): number {
    return this.#inSegment ? this.#lastVoicedEnd - this.#segmentStart : 0;
  }

  /** Feeds audio; `onEnd` is called for each segment that ends within it, in order. */
  push(chunk: Buffer, onEnd: (segment: VoiceSegment) => void): void {
    this.#onEnd = onEnd;
    this.#frames.cut(chunk, this.#run);
  }

  /** The levels of up to 64 frames (1.28 s), measured together. */
  readonly #levels = new Float64Array(64);
  #shared: SharedFrameLevels | undefined;

  /**
   * Measures frame levels through `shared`, so detectors fed the same bytes in one pass (a
   * fan-out's sessions) measure them once. What the detector finds is unchanged.
   */
  shareLevels(shared: SharedFrameLevels): void {
    this.#shared = shared;
  }

  readonly #run = (buf: Buffer, offset: number, frames: number): void => {
    const levels = this.#levels;
    for (let first = 0; first < frames; first += levels.length) {
      const count = Math.min(levels.length, frames - first);
      if (this.#shared) this.#shared.measure(buf, offset + first * VAD_FRAME_BYTES, count, VAD_FRAME_BYTES, levels);
      else frameMeanSquares(buf, offset + first * VAD_FRAME_BYTES, count, VAD_FRAME_BYTES, levels);
      for (let i = 0; i < count; i++) this.#frame(levels[i]! > this.#powerThreshold, this.#onEnd);
    }
  };

  /** Forgets the segment in progress. */
  dropCurrent(): void {
    this.#inSegment = false;
  }

  #frame(voiced: boolean, onEnd: (segment: VoiceSegment) => void): void {
    const start = this.#frameStart;
    const end = start + VAD_FRAME_BYTES;
    this.#frameStart = end;

    if (!this.#inSegment) {
      if (!voiced) return;
      this.#inSegment = true;
      this.#segmentStart = start;
      this.#segmentFrames = 0;
      this.#unvoicedRun = 0;
    }
    this.#segmentFrames += 1;
    if (voiced) {
      this.#lastVoicedEnd = end;
      this.#unvoicedRun = 0;
    } else {
      this.#unvoicedRun += 1;
    }
    if (this.#unvoicedRun >= this.#silenceFrames || (voiced && this.#segmentFrames >= this.#maxFrames)) {
      this.#inSegment = false;
      onEnd({ voicedStart: this.#segmentStart, voicedEnd: this.#lastVoicedEnd, endedAt: end });
    }
  }
}

/**
 * Counts the speech segments in audio as it is sent, for a client that must know how many
 * answers it is owed. Segments with less than `minSpeechMs` of voiced span are not counted (a
 * click is not speech). Never forces a segment end: a service that splits long speech answers
 * more often than counted, which only makes the count conservative.
 */
export class SpeechSegmentCounter {
  readonly #detector: VoiceActivityDetector;
  readonly #minBytes: number;
  #completed = 0;

  constructor(options: { thresholdDbfs?: number; silenceMs?: number; minSpeechMs?: number } = {}) {
    const min = numberOption(options.minSpeechMs, 'minSpeechMs', { min: 0, fallback: 100, accepted: 'a number of milliseconds >= 0' });
    this.#detector = new VoiceActivityDetector({
      ...(options.thresholdDbfs !== undefined ? { thresholdDbfs: options.thresholdDbfs } : {}),
      ...(options.silenceMs !== undefined ? { silenceMs: options.silenceMs } : {}),
    });
    this.#minBytes = Math.round(min * (VAD_FRAME_BYTES / VAD_FRAME_MS));
  }

  push(pcm: Buffer): void {
    this.#detector.push(pcm, (segment) => {
      if (segment.voicedEnd - segment.voicedStart >= this.#minBytes) this.#completed++;
    });
  }

  /** Speech segments sent so far, the one in progress included once it is long enough. */
  get segments(): number {
    const current = this.#detector.speaking && this.#detector.currentVoicedBytes >= this.#minBytes ? 1 : 0;
    return this.#completed + current;
  }
}
