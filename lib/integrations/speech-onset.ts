/**
 * Finds the moments speech starts in PCM16 LE (or G.711 mu-law) mono audio, by level, for
 * barge-in: a caller who starts talking while a translation is playing.
 *
 * Policy, in frames of `frameMs` (default 20 ms) aligned to the first sample fed:
 * - a frame is loud when its RMS level is above `thresholdDbfs` (relative to 32768), using the
 *   library's level arithmetic (`audio/level.ts`);
 * - an onset is reported at the frame that completes a run of `minSpeechMs` of loud frames;
 *   one onset per run: the next one needs a quiet frame first.
 *
 * Level, not the service's transcript, because the transcript of an utterance arrives only after
 * the utterance has ended (the service's voice detection waits for silence), far too late to stop
 * playback while the caller talks. The run length keeps clicks and short noises from counting.
 */
import { ValidationError } from '../errors.js';
import { FrameCutter } from '../audio/frames.js';
import { MULAW_DECODE_TABLE } from '../audio/g711.js';
import { dbfsToMeanSquare, g711SquareTable, meanSquare, meanSquareG711Above } from '../audio/level.js';

export interface SpeechOnsetOptions {
  /** Samples per second of the audio fed (Hz). */
  sampleRate: number;
  /** RMS level above which a frame is loud, in dBFS (at most 0). Default -35. */
  thresholdDbfs?: number;
  /** Loud time that makes an onset, in ms (at least one frame). Default 100. */
  minSpeechMs?: number;
  /** Analysis frame, in ms; must give a whole number of samples. Default 20. */
  frameMs?: number;
  /**
   * What is fed: PCM16 LE (`pcm16`, default) or G.711 mu-law bytes (`mulaw`), measured without
   * being decoded (the same levels, so the same onsets).
   */
  encoding?: 'pcm16' | 'mulaw';
}

let mulawSquares: Float64Array | undefined;

export const DEFAULT_ONSET_THRESHOLD_DBFS = -35;
export const DEFAULT_ONSET_MIN_SPEECH_MS = 100;

/** Reports speech onsets in a mono stream fed in any chunking; see the module comment. */
export class SpeechOnsetDetector {
  readonly frameBytes: number;
  readonly minFrames: number;
  readonly #threshold: number;
  readonly #frames: FrameCutter;
  /** For mu-law input: each code's squared PCM16 value. */
  readonly #squares: Float64Array | undefined;
  #run = 0;
  #onsets = 0;

  constructor(options: SpeechOnsetOptions) {
    const rate = options?.sampleRate;
    if (typeof rate !== 'number' || !Number.isInteger(rate) || rate <= 0) {
      throw new ValidationError('sampleRate', 'a positive integer sample rate in Hz', String(rate));
    }
    const frameMs = options.frameMs ?? 20;
    const samples = (rate * frameMs) / 1000;
    if (typeof frameMs !== 'number' || !(frameMs > 0) || !Number.isInteger(samples)) {
      throw new ValidationError('frameMs', `a frame duration in ms giving a whole number of samples at ${rate} Hz`, String(frameMs));
    }
    const db = options.thresholdDbfs ?? DEFAULT_ONSET_THRESHOLD_DBFS;
    if (typeof db !== 'number' || !Number.isFinite(db) || db > 0) {
      throw new ValidationError('thresholdDbfs', 'a level in dBFS, at most 0', String(db));
    }
    const minMs = options.minSpeechMs ?? DEFAULT_ONSET_MIN_SPEECH_MS;
    if (typeof minMs !== 'number' || !Number.isFinite(minMs) || minMs < 0) {
      throw new ValidationError('minSpeechMs', 'a number of milliseconds, 0 or more', String(minMs));
    }
    const encoding = options.encoding ?? 'pcm16';
    if (encoding !== 'pcm16' && encoding !== 'mulaw') {
      throw new ValidationError('encoding', 'one of pcm16, mulaw', String(encoding));
    }
    this.#squares = encoding === 'mulaw' ? (mulawSquares ??= g711SquareTable(MULAW_DECODE_TABLE)) : undefined;
    this.frameBytes = encoding === 'mulaw' ? samples : samples * 2;
    this.minFrames = Math.max(1, Math.ceil(minMs / frameMs));
    this.#threshold = dbfsToMeanSquare(db);
    this.#frames = new FrameCutter(this.frameBytes, { reuse: true });
  }

  /** True while the current run of loud frames has reached an onset. */
  get speaking(): boolean {
    return this.#run >= this.minFrames;
  }

  /** Feeds audio in the `encoding` given; returns how many onsets it completed (0, or more for long chunks). */
  push(audio: Buffer): number {
    this.#onsets = 0;
    this.#frames.cut(audio, this.#measure);
    return this.#onsets;
  }

  readonly #measure = (buf: Buffer, offset: number, frames: number): void => {
    const fb = this.frameBytes;
    const squares = this.#squares;
    const threshold = this.#threshold;
    for (let i = 0, at = offset; i < frames; i++, at += fb) {
      const loud = squares === undefined ? meanSquare(buf, at, at + fb) > threshold : meanSquareG711Above(buf, at, at + fb, squares, threshold);
      if (loud) {
        this.#run += 1;
        if (this.#run === this.minFrames) this.#onsets += 1;
      } else {
        this.#run = 0;
      }
    }
  };
}
