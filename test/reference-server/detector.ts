/**
 * The reference server's own utterance detection: energy on a fixed grid of short frames.
 *
 * Input is PCM16 LE mono 24 kHz, counted in bytes from the session's first accepted byte. The
 * grid starts at offset 0; a frame is voiced when its RMS reaches the threshold (dBFS relative
 * to 32768). An utterance runs from the first sample of its first voiced frame to the end of its
 * last voiced frame, and ends after `hangoverMs` of unvoiced frames, when it reaches
 * `maxUtteranceMs` (cut there; the speech that goes on is a new utterance), or when `flush()`
 * says the audio stopped arriving. One shorter than `minUtteranceMs` is noise and is dropped.
 * The detector keeps no clock: timing is the caller's.
 */

/** PCM16 mono 24 kHz: 24 samples of 2 bytes per millisecond. */
export const SAMPLES_PER_MS = 24;
export const BYTES_PER_MS = SAMPLES_PER_MS * 2;

export interface DetectorOptions {
  frameMs: number;
  thresholdDbfs: number;
  hangoverMs: number;
  minUtteranceMs: number;
  maxUtteranceMs: number;
}

/** Byte offsets (end exclusive) of speech in the session's input. */
export interface Span {
  from: number;
  to: number;
}

export type DetectorEvent =
  /** A voiced frame; `from` is the start of its utterance, `to` the end of this frame. */
  | ({ type: 'voiced' } & Span)
  /** An utterance ended and is long enough to answer. */
  | ({ type: 'end'; cause: 'silence' | 'max' | 'idle' } & Span);

export class UtteranceDetector {
  private readonly frameBytes: number;
  private readonly minSquareSum: number;
  private carry: Buffer = Buffer.alloc(0);
  /** Offset of the next frame. */
  private offset = 0;
  /** Start of the utterance in progress, or -1. */
  private start = -1;
  private lastVoicedEnd = 0;
  private unvoicedMs = 0;

  constructor(private readonly options: DetectorOptions) {
    const samples = options.frameMs * SAMPLES_PER_MS;
    this.frameBytes = samples * 2;
    const thresholdRms = 32768 * 10 ** (options.thresholdDbfs / 20);
    this.minSquareSum = thresholdRms * thresholdRms * samples;
  }

  /** Feeds audio; returns what the complete frames in it showed, in order. */
  push(pcm: Buffer): DetectorEvent[] {
    const data = this.carry.length > 0 ? Buffer.concat([this.carry, pcm]) : pcm;
    const events: DetectorEvent[] = [];
    let at = 0;
    for (; at + this.frameBytes <= data.length; at += this.frameBytes) this.frame(data, at, events);
    this.carry = Buffer.from(data.subarray(at));
    return events;
  }

  /** The audio stopped arriving: ends the utterance in progress at its last voiced frame. */
  flush(): DetectorEvent[] {
    const events: DetectorEvent[] = [];
    if (this.start >= 0) this.end('idle', events);
    return events;
  }

  private frame(data: Buffer, at: number, events: DetectorEvent[]): void {
    const frameEnd = this.offset + this.frameBytes;
    if (this.voiced(data, at)) {
      if (this.start < 0) this.start = this.offset;
      this.lastVoicedEnd = frameEnd;
      this.unvoicedMs = 0;
      events.push({ type: 'voiced', from: this.start, to: frameEnd });
    } else if (this.start >= 0) {
      this.unvoicedMs += this.options.frameMs;
      if (this.unvoicedMs >= this.options.hangoverMs) this.end('silence', events);
    }
    if (this.start >= 0 && frameEnd - this.start >= this.options.maxUtteranceMs * BYTES_PER_MS) this.end('max', events);
    this.offset = frameEnd;
  }

  private voiced(data: Buffer, at: number): boolean {
    let sum = 0;
    for (let i = at; i < at + this.frameBytes; i += 2) {
      const sample = data.readInt16LE(i);
      sum += sample * sample;
    }
    return sum >= this.minSquareSum;
  }

  private end(cause: 'silence' | 'max' | 'idle', events: DetectorEvent[]): void {
    const span = { from: this.start, to: this.lastVoicedEnd };
    this.start = -1;
    this.unvoicedMs = 0;
    if (span.to - span.from >= this.options.minUtteranceMs * BYTES_PER_MS) events.push({ type: 'end', cause, ...span });
  }
}
