/**
 * Times each response of a browser session from the end of the speech it answers, as the Node
 * stream's `response` event does (`ResponseTiming`). The speech is found in the audio as it is
 * sent, by level: 20 ms frames whose RMS is above `thresholdDbfs` are voiced, and `silenceMs` of
 * unvoiced frames end a stretch of speech. A response answers the stretches that ended since the
 * previous one began; one that begins while no stretch has ended is a piece of longer speech,
 * and its latency is unknown.
 */
import type { ResponseTiming } from '../realtime/response-timing.js';

/** Samples per level frame: 20 ms at 24 kHz. */
const FRAME = 480;

type Stage = 'transcript' | 'text' | 'audio';

interface Open {
  startedAt: number;
  segments: number;
  speechEndMediaMs: number | undefined;
  speechEndAt: number | undefined;
  transcriptAt?: number;
  firstTextAt?: number;
  firstAudioAt?: number;
  audioBytes: number;
}

export class ResponseClock {
  readonly #threshold: number;
  readonly #silenceFrames: number;
  /** Frames measured so far (the media clock, in 20 ms steps). */
  #frames = 0;
  #speaking = false;
  #unvoiced = 0;
  #lastVoicedEnd = 0;
  #lastVoicedAt = 0;
  /** Stretches ended and not yet answered, with the end of the last one. */
  #ended = 0;
  #endedEndMs = 0;
  #endedAt = 0;
  #open: Open | undefined;
  #completed = 0;

  constructor(thresholdDbfs: number, silenceMs: number) {
    const amplitude = 32768 * 10 ** (thresholdDbfs / 20);
    this.#threshold = amplitude * amplitude;
    this.#silenceFrames = Math.max(1, Math.ceil(silenceMs / 20));
  }

  /** Audio handed to the socket at `at` (epoch ms): PCM16 24 kHz, a whole number of 20 ms frames. */
  sent(pcm: Int16Array, at: number): void {
    for (let f = 0; f + FRAME <= pcm.length; f += FRAME) {
      let sum = 0;
      for (let i = f; i < f + FRAME; i++) sum += pcm[i]! * pcm[i]!;
      this.#frames++;
      if (sum / FRAME > this.#threshold) {
        this.#speaking = true;
        this.#unvoiced = 0;
        this.#lastVoicedEnd = this.#frames * 20;
        this.#lastVoicedAt = at;
      } else if (this.#speaking && ++this.#unvoiced >= this.#silenceFrames) {
        this.#speaking = false;
        this.#ended++;
        this.#endedEndMs = this.#lastVoicedEnd;
        this.#endedAt = this.#lastVoicedAt;
      }
    }
  }

  /** A response event arrived at `at`: the first of a response opens it. */
  event(stage: Stage, at: number, audioBytes = 0): void {
    if (!this.#open) {
      const answered = this.#ended;
      this.#ended = 0;
      this.#open = {
        startedAt: at,
        segments: answered,
        speechEndMediaMs: answered > 0 ? this.#endedEndMs : undefined,
        speechEndAt: answered > 0 ? this.#endedAt : undefined,
        audioBytes: 0,
      };
    }
    const open = this.#open;
    if (stage === 'transcript') open.transcriptAt ??= at;
    if (stage === 'text') open.firstTextAt ??= at;
    if (stage === 'audio') {
      open.firstAudioAt ??= at;
      open.audioBytes += audioBytes;
    }
  }

  /** The response ended at `at`: its timing (undefined when none was open). */
  done(at: number): ResponseTiming | undefined {
    const open = this.#open;
    if (!open) return undefined;
    this.#open = undefined;
    const since = (t: number | undefined): number | undefined => (t === undefined || open.speechEndAt === undefined ? undefined : t - open.speechEndAt);
    return {
      index: ++this.#completed,
      segments: open.segments,
      speechEndMediaMs: open.speechEndMediaMs,
      speechEndAt: open.speechEndAt,
      startedAt: open.startedAt,
      transcriptAt: open.transcriptAt,
      firstTextAt: open.firstTextAt,
      firstAudioAt: open.firstAudioAt,
      doneAt: at,
      transcriptMs: since(open.transcriptAt),
      firstTextMs: since(open.firstTextAt),
      firstAudioMs: since(open.firstAudioAt),
      doneMs: since(at),
      audioBytes: open.audioBytes,
    };
  }
}
