/** The reference server's options, their defaults and their validation. */
import type { AnswerPolicy } from './policy.js';
import { SAMPLES_PER_MS } from './detector.js';

export interface ReferenceServerOptions {
  /** The one accepted API key. Default 'reference-key'. */
  apiKey?: string;
  /** Cloned voice ids the key owns; a session asking for another cloned voice is refused (403). */
  clonedVoices?: number[];
  /** Output audio as JSON `response.audio.delta` events (default) or as binary frames. */
  audio?: 'json' | 'binary';
  /** When set, `session.starting` at once and `session.created` this much later. Default 0. */
  coldStartMs?: number;
  /** Which speech makes one response, and when (see policy.ts). Default 'utterance'. */
  answer?: AnswerPolicy;
  /** Utterances per response with answer 'merge'. Default 2. */
  mergeCount?: number;
  /** Voiced span after which answer 'split' answers what it heard so far. Default 700. */
  splitMs?: number;
  /**
   * How the answer to the final speech is given. 'prompt' (default): nothing is held. Otherwise
   * every answer is held until speech is heard again (then sent at once) or the audio stops
   * arriving for `idleMs` (then it is the last: sent `lateMs` later, or never).
   */
  last?: 'prompt' | 'never' | { lateMs: number };
  /** Processing time before a response's first event. Default 20. */
  answerDelayMs?: number;
  /** Output audio length over the voiced input it answers. Default 0.6. */
  audioRatio?: number;
  /** Output audio piece length. Default 400. */
  pieceMs?: number;
  /** Pause between the pieces of one response. Default 0 (back to back). */
  pieceGapMs?: number;
  /** Appends pausing this long end the utterance in progress (and trigger 'idle'/'merge'/`last`). Default 300. */
  idleMs?: number;
  /** Detection frame. Default 10. */
  frameMs?: number;
  /** A frame is voiced when its RMS reaches this (dBFS, relative to 32768). Default -36. */
  thresholdDbfs?: number;
  /** Unvoiced time that ends an utterance. Default 450. */
  hangoverMs?: number;
  /** Utterances with a shorter voiced span are noise. Default 150. */
  minUtteranceMs?: number;
  /** An utterance is cut when it reaches this length. Default 8000. */
  maxUtteranceMs?: number;
  /** Cut (no close frame) the first `drops` sessions once they have received this much audio. */
  dropAfterInputMs?: number;
  /** How many sessions `dropAfterInputMs` cuts. Default 1. */
  drops?: number;
  /** Wait for the first `session.update`. Default 10000, as the service. */
  sessionUpdateTimeoutMs?: number;
}

export type ResolvedOptions = Required<Omit<ReferenceServerOptions, 'dropAfterInputMs'>> & { dropAfterInputMs: number | undefined };

const DEFAULTS: ResolvedOptions = {
  apiKey: 'reference-key',
  clonedVoices: [],
  audio: 'json',
  coldStartMs: 0,
  answer: 'utterance',
  mergeCount: 2,
  splitMs: 700,
  last: 'prompt',
  answerDelayMs: 20,
  audioRatio: 0.6,
  pieceMs: 400,
  pieceGapMs: 0,
  idleMs: 300,
  frameMs: 10,
  thresholdDbfs: -36,
  hangoverMs: 450,
  minUtteranceMs: 150,
  maxUtteranceMs: 8000,
  dropAfterInputMs: undefined,
  drops: 1,
  sessionUpdateTimeoutMs: 10_000,
};

type Check = (value: unknown) => boolean;

const number =
  (min: number, max = Infinity): Check =>
  (v) =>
    typeof v === 'number' && Number.isFinite(v) && v >= min && v <= max;
const integer =
  (min: number): Check =>
  (v) =>
    Number.isInteger(v) && (v as number) >= min;
const oneOf =
  (...values: unknown[]): Check =>
  (v) =>
    values.includes(v);
const isLate: Check = (v) => typeof v === 'object' && v !== null && number(0)((v as { lateMs?: unknown }).lateMs);

const CHECKS: Record<keyof ReferenceServerOptions, [Check, string]> = {
  apiKey: [(v) => typeof v === 'string' && v.length > 0, 'a non-empty string'],
  clonedVoices: [(v) => Array.isArray(v) && v.every(integer(1)), 'an array of positive integers'],
  audio: [oneOf('json', 'binary'), "'json' or 'binary'"],
  coldStartMs: [number(0), 'a number >= 0'],
  answer: [oneOf('utterance', 'idle', 'merge', 'split'), "'utterance', 'idle', 'merge' or 'split'"],
  mergeCount: [integer(1), 'an integer >= 1'],
  splitMs: [number(1), 'a number >= 1'],
  last: [(v) => v === 'prompt' || v === 'never' || isLate(v), "'prompt', 'never' or { lateMs >= 0 }"],
  answerDelayMs: [number(0), 'a number >= 0'],
  audioRatio: [number(Number.MIN_VALUE), 'a number > 0'],
  pieceMs: [number(1), 'a number >= 1'],
  pieceGapMs: [number(0), 'a number >= 0'],
  idleMs: [number(1), 'a number >= 1'],
  frameMs: [(v) => number(1)(v) && Number.isInteger((v as number) * SAMPLES_PER_MS), 'a number >= 1 that is a whole number of samples'],
  thresholdDbfs: [number(-200, 0), 'a number from -200 to 0'],
  hangoverMs: [number(0), 'a number >= 0'],
  minUtteranceMs: [number(0), 'a number >= 0'],
  maxUtteranceMs: [number(1), 'a number >= 1'],
  dropAfterInputMs: [number(0), 'a number >= 0'],
  drops: [integer(0), 'an integer >= 0'],
  sessionUpdateTimeoutMs: [number(1), 'a number >= 1'],
};

/** Options with defaults filled in; throws an Error naming the first bad option. */
export function resolveOptions(options: ReferenceServerOptions): ResolvedOptions {
  for (const [name, value] of Object.entries(options)) {
    if (!(name in CHECKS)) throw new Error(`reference server: unknown option ${name}`);
    const [check, expected] = CHECKS[name as keyof ReferenceServerOptions];
    if (value !== undefined && !check(value)) throw new Error(`reference server: option ${name} must be ${expected}, got ${JSON.stringify(value)}`);
  }
  const resolved = { ...DEFAULTS, ...withoutUndefined(options) };
  if (resolved.answer === 'split' && resolved.splitMs < resolved.minUtteranceMs) {
    throw new Error('reference server: option splitMs must be at least minUtteranceMs (a split must never answer noise)');
  }
  return resolved;
}

function withoutUndefined(options: ReferenceServerOptions): ReferenceServerOptions {
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
}
