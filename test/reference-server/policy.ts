/**
 * Answering policies: which detected speech makes up one answer, and when that answer is
 * complete. Driven by the detector's events and by the session's idle timer; keeps no clock.
 *
 * - 'utterance': each utterance is one answer, complete when it ends.
 * - 'idle': utterances pile up; the pile is one answer when the audio stops arriving.
 * - 'merge': `mergeCount` utterances make one answer; a partial group is one when the audio stops.
 * - 'split': like 'utterance', but once an utterance's voiced span reaches `splitMs` what was heard
 *   so far is an answer at once (part 1), and the rest is another when it ends (part 2).
 */
import type { Span } from './detector.js';

export type AnswerPolicy = 'utterance' | 'idle' | 'merge' | 'split';

/** Speech that an answer covers: a whole utterance (part 0) or part 1 or 2 of a split one. */
export interface Segment extends Span {
  /** Session-local utterance number, from 1. */
  utterance: number;
  part: 0 | 1 | 2;
}

/** The segments that one response answers, in input order. */
export type Answer = Segment[];

export class Grouping {
  private count = 0;
  private current: { from: number; utterance: number; splitAt?: number } | undefined;
  private pending: Segment[] = [];

  constructor(
    private readonly policy: AnswerPolicy,
    private readonly mergeCount: number,
    private readonly splitBytes: number,
  ) {}

  /** A voiced frame of the utterance `span.from` whose voiced span now ends at `span.to`. */
  voiced(span: Span): Answer[] {
    if (this.policy !== 'split' || span.to - span.from < this.splitBytes) return [];
    const current = this.track(span.from);
    if (current.splitAt !== undefined) return [];
    current.splitAt = span.to;
    return [[{ utterance: current.utterance, part: 1, ...span }]];
  }

  /** An utterance ended (long enough to count). */
  ended(span: Span): Answer[] {
    const current = this.track(span.from);
    this.current = undefined;
    if (current.splitAt !== undefined) {
      // The rest after the split point; nothing when the speech stopped right there.
      return span.to > current.splitAt ? [[{ utterance: current.utterance, part: 2, from: current.splitAt, to: span.to }]] : [];
    }
    const segment: Segment = { utterance: current.utterance, part: 0, ...span };
    if (this.policy === 'utterance' || this.policy === 'split') return [[segment]];
    this.pending.push(segment);
    return this.policy === 'merge' && this.pending.length >= this.mergeCount ? this.takePending() : [];
  }

  /** The audio stopped arriving (after the detector's own flush). */
  idle(): Answer[] {
    return this.pending.length > 0 ? this.takePending() : [];
  }

  private takePending(): Answer[] {
    const answer = this.pending;
    this.pending = [];
    return [answer];
  }

  /** The utterance starting at `from`, numbered the first time it is seen here. */
  private track(from: number): NonNullable<Grouping['current']> {
    if (this.current?.from !== from) this.current = { from, utterance: ++this.count };
    return this.current;
  }
}
