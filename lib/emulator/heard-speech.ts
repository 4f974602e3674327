/**
 * What an active realtime session of the emulator has heard and not answered yet, and when it
 * answers: utterances (or parts) from its detector are grouped (`segmentation: 'idle'`,
 * `mergeUtterances`; a group of `MAX_GROUP_BYTES` is answered even if the appends never pause),
 * and with `lastAnswer` a finished answer is held until speech is heard again; when the audio
 * stops, what was heard is answered and the answers still held are the last ones. Data and
 * policy only: the session schedules the answers this returns, in order.
 */
import { MAX_GROUP_BYTES, type LastAnswer } from './session-settings.js';
import type { SegmentedUtterance, UtteranceSegmenter } from './vad.js';

/** Utterances answered as one, `extraMs` later than the session's latency. */
export interface DueAnswer {
  utterances: SegmentedUtterance[];
  extraMs: number;
}

export class HeardSpeech {
  readonly #segmenter: UtteranceSegmenter;
  /** How many utterances make one answer (Infinity: until the audio stops). */
  readonly #groupSize: number;
  readonly #lastAnswer: LastAnswer;
  /** Utterances (or parts) waiting to be answered as one. */
  #grouped: SegmentedUtterance[] = [];
  /** Their audio, in bytes. */
  #groupedBytes = 0;
  /** Finished answers held until speech is heard again (`lastAnswer`), oldest first. */
  readonly #held: SegmentedUtterance[][] = [];

  constructor(segmenter: UtteranceSegmenter, groupSize: number, lastAnswer: LastAnswer) {
    this.#segmenter = segmenter;
    this.#groupSize = groupSize;
    this.#lastAnswer = lastAnswer;
  }

  /** Something waits for the audio to stop: an utterance in progress, a partial group, a held answer. */
  get waiting(): boolean {
    return this.#segmenter.speaking || this.#grouped.length > 0 || this.#held.length > 0;
  }

  /** Input audio heard: the answers it makes due, in order. */
  hear(pcm: Buffer): DueAnswer[] {
    const due: DueAnswer[] = [];
    for (const utterance of this.#segmenter.push(pcm)) this.#add(utterance, due);
    this.#release(due);
    return due;
  }

  /** The audio stopped arriving: what has been heard is answered, and answers still held are the last ones (sent `lateMs` later, or never). */
  stopped(): DueAnswer[] {
    const due: DueAnswer[] = [];
    for (const utterance of this.#segmenter.end()) this.#add(utterance, due);
    this.#respond(due);
    const last = this.#held.splice(0);
    const rule = this.#lastAnswer;
    if (typeof rule === 'object') for (const group of last) due.push({ utterances: group, extraMs: rule.lateMs });
    return due;
  }

  /** Forgets the utterance in progress (the credit ran out in the middle of it). */
  dropCurrent(): void {
    this.#segmenter.dropCurrent();
  }

  /** An utterance (or part) ended: answer it, or group it with the next ones. */
  #add(utterance: SegmentedUtterance, due: DueAnswer[]): void {
    this.#grouped.push(utterance);
    this.#groupedBytes += utterance.audio.length;
    if (this.#grouped.length >= this.#groupSize || this.#groupedBytes >= MAX_GROUP_BYTES) this.#respond(due);
  }

  /** The group is one answer: due now, or held until speech is heard again (`lastAnswer`). */
  #respond(due: DueAnswer[]): void {
    const group = this.#grouped;
    if (group.length === 0) return;
    this.#grouped = [];
    this.#groupedBytes = 0;
    if (this.#lastAnswer === 'prompt') {
      due.push({ utterances: group, extraMs: 0 });
      return;
    }
    this.#held.push(group);
    this.#release(due);
  }

  /** The held answers after which a voiced frame has been heard are due. */
  #release(due: DueAnswer[]): void {
    const voiced = this.#segmenter.lastVoicedEnd;
    while (this.#held.length > 0 && this.#held[0]!.at(-1)!.endedAt < voiced) due.push({ utterances: this.#held.shift()!, extraMs: 0 });
  }
}
