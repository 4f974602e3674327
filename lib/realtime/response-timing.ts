/**
 * A response's timing and the summary of many, as plain data: what the Node stream's
 * `response` event and `stats.latency` carry, and the browser module's too.
 */

/** A response's timing, from the end of the speech it answers to its end. */
export interface ResponseTiming {
  /** 1 for the stream's first completed response. */
  index: number;
  /** Speech segments this response answered (0: a piece of longer speech still being sent). */
  segments: number;
  /** End of the answered speech, in milliseconds of input audio (media time). */
  speechEndMediaMs: number | undefined;
  /** When that audio was first handed to the socket (epoch ms). */
  speechEndAt: number | undefined;
  /** First event of the response, transcript, first text delta, first audio byte and end (epoch ms). */
  startedAt: number;
  transcriptAt: number | undefined;
  firstTextAt: number | undefined;
  firstAudioAt: number | undefined;
  doneAt: number;
  /** Durations from `speechEndAt`, in ms (undefined when either end is unknown). */
  transcriptMs: number | undefined;
  firstTextMs: number | undefined;
  firstAudioMs: number | undefined;
  doneMs: number | undefined;
  /** Translated audio bytes of the response. */
  audioBytes: number;
}

/** p50, p95 and max of a series of durations in ms. */
export interface LatencySummary {
  count: number;
  p50: number | undefined;
  p95: number | undefined;
  max: number | undefined;
}

/** Collects durations and summarises them; keeps at most `limit` samples (the most recent). */
export class LatencySeries {
  readonly #samples: number[] = [];
  readonly #limit: number;
  #count = 0;
  #max: number | undefined;
  /** The summary of the samples as they are, until the next `add()`: `stats` is read often. */
  #summary: LatencySummary | undefined;

  constructor(limit = 10_000) {
    this.#limit = limit;
  }

  add(value: number | undefined): void {
    if (value === undefined) return;
    this.#count += 1;
    this.#max = this.#max === undefined ? value : Math.max(this.#max, value);
    this.#samples.push(value);
    if (this.#samples.length > this.#limit) this.#samples.shift();
    this.#summary = undefined;
  }

  summary(): LatencySummary {
    if (this.#samples.length === 0) return { count: 0, p50: undefined, p95: undefined, max: undefined };
    if (!this.#summary) {
      const sorted = [...this.#samples].sort((a, b) => a - b);
      const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
      this.#summary = { count: this.#count, p50: at(0.5), p95: at(0.95), max: this.#max };
    }
    return { ...this.#summary };
  }
}
