/**
 * The options of `RealtimeFanout` (one input, one session per target language): the options of
 * `RealtimeTranslateStream` that every target shares, the targets, and the fan-out's own bounds,
 * checked once before any connection. Every bad value is a `ValidationError` or `ConfigError`
 * naming the option (`to[1].voiceId`), and no message quotes the API key.
 */
import { ValidationError } from '../errors.js';
import { describeReceived, intOption } from '../options.js';
import type { OpenUnion } from '../language-tags.js';
import { normalizeRealtimeLanguage, type RealtimeLanguage } from './languages.js';
import { resolveRealtimeOptions, type RealtimeTranslateOptions } from './realtime-options.js';

/** One target language, with its own cloned voice if it has one. */
export interface FanoutTargetOptions {
  /** Target language tag, one of the 14 realtime tags (case-insensitive). */
  lang: OpenUnion<RealtimeLanguage>;
  /** This target's cloned voice. Default: the fan-out's `voiceId`, or the language's built-in voice. */
  voiceId?: number;
}

/** A target: its language tag, or the language with options of its own. */
export type FanoutTargetSpec = OpenUnion<RealtimeLanguage> | FanoutTargetOptions;

/** Most targets `maxTargets` may allow. */
export const MAX_FANOUT_TARGETS = 64;

export interface RealtimeFanoutOptions extends Omit<RealtimeTranslateOptions, 'to'> {
  /**
   * The targets to start with (more can join later with `addTarget`): each a language tag or
   * `{ lang, voiceId }`, no language twice. May be empty.
   */
  to: readonly FanoutTargetSpec[];
  /** The voice of every target that names none of its own. Default: each language's built-in voice. */
  voiceId?: number;
  /** Targets at once (starting, running or finishing), 1 to 64. Default 8. */
  maxTargets?: number;
  /**
   * How long a target may keep the writer waiting while another target is taking the input, in
   * ms: past it, the target that lags is stopped with a `TimeoutError` and the others go on.
   * While no target takes input (all are connecting, say), nothing is stopped. Default 15 000.
   */
  maxLagMs?: number;
}

/** A target, checked. */
export interface ResolvedTarget {
  lang: RealtimeLanguage;
  voiceId: number | undefined;
}

export interface ResolvedFanoutOptions {
  /** What every target's stream is given, besides its `to` and `voiceId` (and no `signal`). */
  stream: Omit<RealtimeTranslateOptions, 'to' | 'voiceId' | 'signal'>;
  from: RealtimeLanguage;
  targets: ResolvedTarget[];
  voiceId: number | undefined;
  maxTargets: number;
  maxLagMs: number;
  signal: AbortSignal | undefined;
  maxQueuedEvents: number;
  maxQueuedEventBytes: number;
  readableHighWaterMark: number;
  writableHighWaterMark: number;
}

function checkVoice(value: unknown, field: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new ValidationError(field, 'the id of a cloned voice (positive integer)', describeReceived(value));
  }
  return value;
}

/** One target (`field` names it in errors), its voice defaulting to `voiceId`. */
export function resolveTarget(spec: unknown, field: string, voiceId: number | undefined): ResolvedTarget {
  if (typeof spec === 'string') return { lang: normalizeRealtimeLanguage(spec, field), voiceId };
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) {
    throw new ValidationError(field, 'a realtime language tag or { lang, voiceId? }', describeReceived(spec));
  }
  const target = spec as Partial<FanoutTargetOptions>;
  return {
    lang: normalizeRealtimeLanguage(target.lang, `${field}.lang`),
    voiceId: checkVoice(target.voiceId, `${field}.voiceId`) ?? voiceId,
  };
}

/** The error for a target whose language is already one of the fan-out's. */
export function duplicateTarget(field: string, lang: RealtimeLanguage): ValidationError {
  return new ValidationError(field, 'a language that is not already a target', JSON.stringify(lang));
}

/** The error for one target more than `maxTargets`. */
export function tooManyTargets(field: string, maxTargets: number, count: number): ValidationError {
  return new ValidationError(field, `at most ${maxTargets} targets at once (maxTargets)`, `${count}`);
}

/**
 * Checks every option, the shared ones as `RealtimeTranslateStream` does (so a target's stream
 * cannot refuse them later), and each target. Throws before anything connects.
 */
export function resolveFanoutOptions(options: RealtimeFanoutOptions): ResolvedFanoutOptions {
  if (options === null || typeof options !== 'object') {
    throw new ValidationError('options', 'an object with from and to', describeReceived(options));
  }
  // The targets' streams do not watch the signal: the fan-out does, and stops them (so that a
  // signal does not collect a listener per target).
  const { to, voiceId: ownVoice, maxTargets: ownMax, maxLagMs: ownLag, signal: _signal, ...stream } = options;
  const maxTargets = intOption(ownMax, 'maxTargets', { min: 1, max: MAX_FANOUT_TARGETS, fallback: 8 });
  const maxLagMs = intOption(ownLag, 'maxLagMs', { min: 1, fallback: 15_000 });
  const voiceId = checkVoice(ownVoice, 'voiceId');
  if (!Array.isArray(to)) throw new ValidationError('to', 'an array of targets (language tags or { lang, voiceId })', describeReceived(to));
  const targets: ResolvedTarget[] = [];
  for (const [i, spec] of (to as readonly unknown[]).entries()) {
    const target = resolveTarget(spec, `to[${i}]`, voiceId);
    if (targets.some((t) => t.lang === target.lang)) throw duplicateTarget(`to[${i}]`, target.lang);
    targets.push(target);
  }
  if (targets.length > maxTargets) throw tooManyTargets('to', maxTargets, targets.length);
  // The shared options, checked as a target's stream checks them (any target language will do).
  const resolved = resolveRealtimeOptions({ ...options, to: targets[0]?.lang ?? 'en-us', voiceId });
  return {
    stream,
    from: resolved.session.source_language as RealtimeLanguage,
    targets,
    voiceId,
    maxTargets,
    maxLagMs,
    signal: resolved.signal,
    maxQueuedEvents: resolved.maxQueuedEvents,
    maxQueuedEventBytes: resolved.maxQueuedEventBytes,
    readableHighWaterMark: resolved.readableHighWaterMark,
    writableHighWaterMark: resolved.writableHighWaterMark,
  };
}
