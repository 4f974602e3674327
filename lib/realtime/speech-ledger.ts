/**
 * What the stream knows of the speech it has sent and the service's answers to it, as byte
 * offsets of the input timeline and the clock values it is given: pure bookkeeping, no timers,
 * no sockets. Its speech detector is the stream's own, not the service's (which segments its own
 * way, merges utterances that arrive fast, splits long ones and says nothing about which input a
 * response covers), so what it finds is evidence, used two ways:
 *
 * - Owed for certain: speech sent after the service's latest response began (or, before it has
 *   answered anything in this session, any speech not yet answered) cannot have been heard when
 *   that response started, so an answer to it is still to come (`speechSinceLastResponse`).
 * - An estimate, the answered frontier (every voiced byte before it counts as answered), for
 *   where a replay after a reconnect starts and for timing each response: a response that
 *   completes answers the first unanswered segment that was wholly sent before it started, and
 *   the following such segments while their voiced length, times `coverage`, fits in the
 *   response's audio. A response that starts while the speech it would answer is still being
 *   sent is a piece of longer speech and moves nothing.
 */
import { FrameCutter } from '../audio/frames.js';
import type { SharedFrameLevels } from '../audio/level.js';
import { VoiceActivityDetector, VAD_FRAME_BYTES, type VoiceActivityOptions, type VoiceSegment } from '../audio/vad.js';
import type { ResponseTiming } from './response-timing.js';

export { LatencySeries, type LatencySummary, type ResponseTiming } from './response-timing.js';

/** PCM16 mono 24 kHz, bytes per millisecond. */
const BYTES_PER_MS = 48;
/** Send times kept for timing responses (about 10 minutes of 40 ms appends). */
const MAX_SEND_RECORDS = 16_384;
/** Stretches of speech kept while no answer covers them (hours of talk). */
const MAX_SEGMENTS = 4096;
/**
 * Input is heard by the detector in batches of this many bytes (100 ms, five detector frames):
 * a live source writes 20 ms at a time, and the detector's work per call (a pass into the
 * level kernel and back, the segment bookkeeping) was paid on every write. What reads the
 * detector's findings hears the rest of the batch first, so no answer changes; only
 * `endedSpeechEnd` may lag the input by up to one batch.
 */
const HEARING_BATCH_BYTES = 5 * VAD_FRAME_BYTES;

export interface SpeechLedgerOptions extends VoiceActivityOptions {
  /** Voiced length below which a segment is not speech the service owes an answer to, in ms. Default 100. */
  minSpeechMs?: number;
  /** Fraction of the voiced length a response's audio must reach to answer one more segment. Default 0.8. */
  coverage?: number;
}

interface Segment {
  voicedStart: number;
  voicedEnd: number;
  /** Set once the detector has ended it. */
  ended: boolean;
}

/** When things happened during one response, in epoch milliseconds. */
interface OpenResponse {
  /** Input bytes handed to the socket when the response's first event arrived. */
  sentAtStart: number;
  startedAt: number;
  transcriptAt?: number;
  firstTextAt?: number;
  firstAudioAt?: number;
  audioBytes: number;
}

export class SpeechLedger {
  readonly #detector: VoiceActivityDetector;
  readonly #minSpeechBytes: number;
  readonly #coverage: number;
  /** Segments that reach past the frontier, oldest first; the last one may be in progress. */
  #segments: Segment[] = [];
  #frontier = 0;
  #accepted = 0;
  #open: OpenResponse | undefined;
  #completed = 0;
  /**
   * First-send records, ascending offsets, trimmed below the frontier: `#sendEnds[i]` was handed
   * to the socket at `#sendTimes[i]` (epoch ms). Two arrays of numbers, not a pair per send: a
   * record lives until an answer covers it, long enough that a pair would be promoted out of
   * the young generation, 50 times a second per session.
   */
  #sendEnds: number[] = [];
  #sendTimes: number[] = [];
  #sentMax = 0;
  /** Input handed to the socket when this session's latest response began (undefined: none yet). */
  #lastStart: number | undefined;
  /** Voiced end of the latest segment long enough to be speech, and of the latest such that has ended. */
  #lastSpeechEnd = 0;
  #endedSpeechEnd = 0;
  /**
   * Cuts accepted input into the batches the detector hears; its pending bytes are input not
   * heard yet. Undefined once levels are shared (each piece is heard as it is accepted).
   */
  #batches: FrameCutter | undefined = new FrameCutter(HEARING_BATCH_BYTES, { reuse: true });

  constructor(options: SpeechLedgerOptions = {}) {
    this.#detector = new VoiceActivityDetector(options);
    this.#minSpeechBytes = Math.round((options.minSpeechMs ?? 100) * BYTES_PER_MS);
    this.#coverage = options.coverage ?? 0.8;
  }

  /** Bytes of input accepted so far. */
  get acceptedBytes(): number {
    return this.#accepted;
  }

  /** Every voiced byte before this input offset has been answered. */
  get frontier(): number {
    return this.#frontier;
  }

  /** Whether a response has started and not completed. */
  get responseOpen(): boolean {
    return this.#open !== undefined;
  }

  /** Responses completed so far. */
  get responsesCompleted(): number {
    return this.#completed;
  }

  /**
   * Frame levels measured once for several ledgers fed the same input (see `SharedFrameLevels`).
   * Such a ledger hears each piece as it is accepted: the shared measurements are of the input's
   * own memory, which a batch of the ledger's own would not be.
   */
  shareLevels(shared: SharedFrameLevels): void {
    this.#catchUp();
    this.#batches = undefined;
    this.#detector.shareLevels(shared);
  }

  /**
   * Feeds accepted input audio (PCM16 LE mono 24 kHz) to the speech detector, in batches of
   * 100 ms (see `HEARING_BATCH_BYTES`); a batch split across writes is assembled in the ledger's
   * own memory, so `pcm` may be reused once this returns.
   */
  accept(pcm: Buffer): void {
    this.#accepted += pcm.length;
    if (this.#batches) this.#batches.cut(pcm, this.#hearBatches);
    else this.#hear(pcm);
  }

  readonly #hearBatches = (buf: Buffer, offset: number, batches: number): void => {
    const end = offset + batches * HEARING_BATCH_BYTES;
    this.#hear(offset === 0 && end === buf.length ? buf : buf.subarray(offset, end));
  };

  /** Has the detector hear what is still batched: before anything reads what it found. */
  #catchUp(): void {
    if (this.#batches !== undefined && this.#batches.pendingBytes > 0) this.#hear(this.#batches.takePending());
  }

  #hear(pcm: Buffer): void {
    this.#detector.push(pcm, this.#segmentEnded);
    if (this.#detector.speaking) {
      const start = this.#detector.segmentStart;
      const end = start + this.#detector.currentVoicedBytes;
      const last = this.#segments.at(-1);
      if (last && !last.ended) last.voicedEnd = end;
      else this.#segments.push({ voicedStart: start, voicedEnd: end, ended: false });
      if (end - start >= this.#minSpeechBytes) this.#lastSpeechEnd = Math.max(this.#lastSpeechEnd, end);
    }
    // Speech no answer covered stays until one does; past this many stretches, the oldest count
    // as answered (far beyond any replay), so a service that never answers cannot grow this.
    if (this.#segments.length > MAX_SEGMENTS) this.#advance(this.#segments[this.#segments.length - MAX_SEGMENTS - 1]!.voicedEnd);
  }

  readonly #segmentEnded = (segment: VoiceSegment): void => {
    const last = this.#segments.at(-1);
    if (last && !last.ended) this.#segments.pop();
    // A click is not speech: it would only hold memory and anchor a replay too early.
    if (segment.voicedEnd - segment.voicedStart < this.#minSpeechBytes) return;
    this.#segments.push({ voicedStart: segment.voicedStart, voicedEnd: segment.voicedEnd, ended: true });
    this.#lastSpeechEnd = Math.max(this.#lastSpeechEnd, segment.voicedEnd);
    this.#endedSpeechEnd = Math.max(this.#endedSpeechEnd, segment.voicedEnd);
  };

  /** Whether a response has begun since this session started. */
  get answeredInSession(): boolean {
    return this.#lastStart !== undefined;
  }

  /** Input offset where the latest speech accepted so far ends (0: none yet). */
  get lastSpeechEnd(): number {
    this.#catchUp();
    return this.#lastSpeechEnd;
  }

  /**
   * Where the latest speech that has ended (silence followed it) ends (0: none yet), as far as
   * the detector has heard: up to one batch (100 ms) behind the input accepted. Read on every
   * send, so it does not hear the rest of the batch first.
   */
  get endedSpeechEnd(): number {
    return this.#endedSpeechEnd;
  }

  /** Voiced bytes past the answered frontier (segments with at least `minSpeechMs` of speech there): what a lost session's replay must cover. */
  get speechPastFrontier(): number {
    this.#catchUp();
    return this.#voicedPast(this.#frontier);
  }

  /**
   * Voiced bytes of speech that is owed an answer for certain: sent after this session's latest
   * response began, or, before the session has answered anything, past the frontier. Only
   * segments with at least `minSpeechMs` of speech there count.
   */
  get speechSinceLastResponse(): number {
    this.#catchUp();
    return this.#voicedPast(Math.max(this.#frontier, this.#lastStart ?? 0));
  }

  #voicedPast(anchor: number): number {
    let total = 0;
    for (const segment of this.#segments) {
      const voiced = segment.voicedEnd - Math.max(segment.voicedStart, anchor);
      if (voiced >= this.#minSpeechBytes) total += voiced;
    }
    return total;
  }

  /** Records that input up to `endOffset` was handed to the socket at `now` (only a first send counts). */
  recordSent(endOffset: number, now: number): void {
    if (endOffset <= this.#sentMax) return;
    this.#sentMax = endOffset;
    this.#sendEnds.push(endOffset);
    this.#sendTimes.push(now);
    // Bounded even when nothing is ever answered: the oldest records go (their timings with them).
    if (this.#sendEnds.length > MAX_SEND_RECORDS) this.#dropSends(this.#sendEnds.length - MAX_SEND_RECORDS / 2);
  }

  /** A response event arrived: opens a response if none is open. `sent` is the input handed to the socket so far. */
  responseActivity(kind: 'transcript' | 'text' | 'audio', now: number, sent: number, audioBytes = 0): void {
    if (!this.#open) {
      this.#open = { sentAtStart: sent, startedAt: now, audioBytes: 0 };
      this.#lastStart = sent;
    }
    const open = this.#open;
    if (kind === 'transcript') open.transcriptAt ??= now;
    else if (kind === 'text') open.firstTextAt ??= now;
    else {
      if (audioBytes > 0) open.firstAudioAt ??= now;
      open.audioBytes += audioBytes;
    }
  }

  /**
   * The open response ended (`audio.done`, or `text.done` without audio): moves the frontier over
   * the speech it answered and returns its timing. `audioExpected` is false for text-only sessions
   * (then a response answers exactly one segment). Undefined when no response was open.
   */
  responseCompleted(now: number, audioExpected: boolean): ResponseTiming | undefined {
    const open = this.#open;
    if (!open) return undefined;
    this.#catchUp();
    this.#open = undefined;
    this.#completed += 1;
    let covered = 0;
    let speechEnd: number | undefined;
    let voicedSum = 0;
    for (const segment of this.#segments) {
      const voiced = segment.voicedEnd - Math.max(segment.voicedStart, this.#frontier);
      if (voiced < this.#minSpeechBytes) continue;
      if (segment.voicedEnd > open.sentAtStart) break;
      if (covered > 0 && (!audioExpected || (voicedSum + voiced) * this.#coverage > open.audioBytes)) break;
      voicedSum += voiced;
      covered += 1;
      speechEnd = segment.voicedEnd;
    }
    if (speechEnd !== undefined) this.#advance(speechEnd);
    const speechEndAt = speechEnd === undefined ? undefined : this.#sentTime(speechEnd);
    const since = (at: number | undefined): number | undefined => (at === undefined || speechEndAt === undefined ? undefined : Math.max(0, at - speechEndAt));
    return {
      index: this.#completed,
      segments: covered,
      speechEndMediaMs: speechEnd === undefined ? undefined : speechEnd / BYTES_PER_MS,
      speechEndAt,
      startedAt: open.startedAt,
      transcriptAt: open.transcriptAt,
      firstTextAt: open.firstTextAt,
      firstAudioAt: open.firstAudioAt,
      doneAt: now,
      transcriptMs: since(open.transcriptAt),
      firstTextMs: since(open.firstTextAt),
      firstAudioMs: since(open.firstAudioAt),
      doneMs: since(now),
      audioBytes: open.audioBytes,
    };
  }

  /**
   * The session was lost: a response in progress answers nothing (its speech is replayed), and
   * the next session has answered nothing yet.
   */
  sessionLost(): void {
    this.#open = undefined;
    this.#lastStart = undefined;
  }

  /**
   * Where a replay starts: `prerollMs` before the first voiced byte past the frontier (so the
   * service's detector hears the speech begin), or before `sent` when no speech is pending; never
   * before the frontier; aligned down to a detector frame of the input timeline.
   */
  replayStart(sent: number, prerollMs: number): number {
    this.#catchUp();
    return this.#startBefore(sent, prerollMs, false);
  }

  /**
   * Where input must still be kept from, for a replay from `sent`: `replayStart` as far as the
   * detector has heard, never after it (input it has not heard may hold speech, and the speech in
   * progress may go on past the frontier). Called on every send, so it does not hear the rest of
   * the batch first.
   */
  keepStart(sent: number, prerollMs: number): number {
    return this.#startBefore(Math.min(sent, this.#accepted - (this.#batches?.pendingBytes ?? 0)), prerollMs, true);
  }

  #startBefore(sent: number, prerollMs: number, speechMayGoOn: boolean): number {
    let anchor = sent;
    for (const segment of this.#segments) {
      if (segment.voicedEnd <= this.#frontier && (segment.ended || !speechMayGoOn)) continue;
      anchor = Math.max(segment.voicedStart, this.#frontier);
      break;
    }
    const start = Math.max(this.#frontier, Math.min(anchor, sent) - prerollMs * BYTES_PER_MS);
    return Math.max(0, start - (start % VAD_FRAME_BYTES));
  }

  #advance(to: number): void {
    this.#frontier = Math.max(this.#frontier, to);
    while (this.#segments.length > 0 && this.#segments[0]!.ended && this.#segments[0]!.voicedEnd <= this.#frontier) {
      this.#segments.shift();
    }
    // Keep the send record that times the frontier itself; older ones are never looked up again.
    let drop = 0;
    while (drop + 1 < this.#sendEnds.length && this.#sendEnds[drop + 1]! <= this.#frontier) drop += 1;
    if (drop > 0) this.#dropSends(drop);
  }

  #dropSends(count: number): void {
    this.#sendEnds.splice(0, count);
    this.#sendTimes.splice(0, count);
  }

  /** When input offset `offset` was first handed to the socket. */
  #sentTime(offset: number): number | undefined {
    const ends = this.#sendEnds;
    for (let i = 0; i < ends.length; i++) if (ends[i]! >= offset) return this.#sendTimes[i];
    return undefined;
  }
}
