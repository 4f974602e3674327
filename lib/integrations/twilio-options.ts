/**
 * What a `TwilioMediaBridge` takes and tells: its options (with the realtime service's), stats,
 * events and warnings, and the options checked and resolved in one place
 * (`resolveBridgeOptions`), so that a bad one is refused before anything connects.
 */
import { ValidationError, type RtTranslateError } from '../errors.js';
import { intOption } from '../options.js';
import type { RealtimeTranslateOptions } from '../realtime/realtime-translate-stream.js';
import type { MediaTimelineOptions } from './media-timeline.js';
import type { TwilioPacing, TwilioResponseInfo } from './twilio-outbound.js';
import { DEFAULT_MAX_TWILIO_MESSAGE_BYTES, TWILIO_FRAME_MS, TWILIO_SAMPLE_RATE, type TwilioStreamInfo } from './twilio-messages.js';

/** Barge-in detection on the caller's audio; see the module comment. */
export interface TwilioBargeInOptions {
  /** RMS level above which a 20 ms frame counts as speech, in dBFS. Default -35. */
  thresholdDbfs?: number;
  /** Speech time that makes an onset, in ms. Default 100. */
  minSpeechMs?: number;
}

export interface TwilioMediaBridgeOptions extends Omit<RealtimeTranslateOptions, 'outputModalities'> {
  /** `burst` (default): outbound messages as fast as produced; `realtime`: paced at 20 ms. */
  pacing?: TwilioPacing;
  /** Barge-in detection, or `false` to never send `clear`. Default `{ thresholdDbfs: -35, minSpeechMs: 100 }`. */
  bargeIn?: false | TwilioBargeInOptions;
  /** Longest silence inserted for one timestamp gap, in ms (0: no gap filling). Default 1000. */
  maxGapFillMs?: number;
  /** Timestamp differences below this are jitter, not gaps, in ms. Default 10. */
  gapToleranceMs?: number;
  /** The media track translated. Default `inbound` (the caller). */
  track?: string;
  /** Marks are named `${markPrefix}${n}` for the service's n-th response. Default `response-`. */
  markPrefix?: string;
  /** Readable side yields message objects (`object`, default) or their JSON text (`json`). */
  output?: 'object' | 'json';
  /** Largest inbound message accepted, in bytes of JSON text. Default 64 KiB. */
  maxMessageBytes?: number;
  /** Outbound messages the readable side buffers before the bridge waits. Default 50 (1 s of media). */
  maxQueuedMessages?: number;
  /**
   * The caller's audio goes to the service in appends of this many ms (a multiple of 20, up to
   * 1000): fewer, larger events cost much less CPU per call than one per 20 ms `media`
   * message, and the service hears the speech at most this much later. Default 100.
   */
  appendMs?: number;
  /**
   * When the realtime session opens: `start` (default), when Twilio's `start` arrives, so that a
   * connection that never starts costs no session (what a server open to the network needs);
   * `construct`, at once, so that the service's cold start overlaps the call's setup, for a
   * bridge that only trusted callers reach. With `start`, a call whose input ends before `start`
   * opens none.
   */
  openSession?: 'construct' | 'start';
  /** No `start` within this many ms of construction fails the bridge with a `TimeoutError`. Default 10000. */
  startTimeoutMs?: number;
  /**
   * No `media` of the translated track for this long, in ms, fails the bridge with a
   * `TimeoutError` (a call sends 20 ms of media every 20 ms, silence included). Counted from
   * `start`, then from the last frame accepted; it does not expire while the bridge itself waits
   * (on the service or the clock): one that would is given a full period again. Off once the
   * input has ended. Default 10000.
   */
  mediaTimeoutMs?: number;
  /**
   * How far the audio sent to the service (frames and gap fill) may run ahead of the wall time
   * since `start`, in ms; a faster source is held back (see `MediaTimeline`). Default 1000.
   */
  maxAheadMs?: number;
  /** A `media` timestamp further than this ahead of the wall time since `start` fails the bridge, in ms. Default 5000. */
  maxTimestampLeadMs?: number;
  /** `media` timestamps going backwards this many times are tolerated; one more fails the bridge. Default 3. */
  maxTimestampRewinds?: number;
  /**
   * Warnings emitted per kind (`TwilioWarningKind`) and call; later ones are only counted in
   * `stats.suppressedWarnings`. A payload of the wrong size is warned about once whatever this
   * says. Default 5.
   */
  maxWarningsPerKind?: number;
}

/**
 * What a warning was about, for the per-kind limit: a message that does not parse
 * (`malformed`), an event Twilio does not send (`unknown-event`), a message out of place
 * (`out-of-order`: media before `start`, after `stop` or of another stream, a second `start`),
 * a `media` payload over 160 bytes (`media-size`), the translator's own warnings (`service`).
 */
export type TwilioWarningKind = 'malformed' | 'unknown-event' | 'out-of-order' | 'media-size' | 'service';

/** Counters, for logs and tests. */
export interface TwilioBridgeStats {
  /** `media` messages of the translated track accepted. */
  mediaMessages: number;
  /** Audio received in them, in ms. */
  receivedMs: number;
  /** Silence inserted for timestamp gaps, in ms. */
  insertedSilenceMs: number;
  /** Gap time not filled because of `maxGapFillMs`, in ms. */
  cutGapMs: number;
  /** Outbound `media` messages produced. */
  outboundFrames: number;
  /** Responses sent with their mark. */
  responses: number;
  /** Marks of ours Twilio echoed back (played, or cleared). */
  marksPlayed: number;
  /** `clear` messages sent. */
  clears: number;
  /** Warnings emitted. */
  warnings: number;
  /** `media` payloads refused: over 160 bytes (20 ms of mu-law). */
  refusedFrames: number;
  /** Warnings counted but not emitted (over `maxWarningsPerKind`), by kind. */
  suppressedWarnings: Partial<Record<TwilioWarningKind, number>>;
}

export interface TwilioClearInfo {
  /** Marks that were still outstanding (their audio was playing or queued at Twilio). */
  pendingMarks: string[];
  /** 20 ms frames dropped from the bridge's own queue (`realtime` pacing). */
  droppedFrames: number;
}

export interface TwilioMediaBridgeEvents {
  /** `connected`: the stream's first message. */
  connected: [info: { protocol?: string; version?: string }];
  /** `start`: the stream's metadata (validated). */
  start: [info: TwilioStreamInfo];
  /**
   * A response's audio and its mark have been sent to Twilio (not `response`: that name is the
   * translator's, with its latency figures, on `bridge.translator`).
   */
  'response.sent': [info: TwilioResponseInfo];
  /** Twilio echoed a mark of ours: the response's audio has played (or was cleared). */
  played: [mark: string];
  /** Twilio echoed any mark (ours or not). */
  mark: [name: string];
  /** Caller speech started (level detector), whether or not it caused a `clear`. */
  speech: [];
  /** Barge-in: `clear` was sent and queued audio dropped. */
  clear: [info: TwilioClearInfo];
  /** A DTMF key press. */
  dtmf: [digit: string];
  /** `stop`: the stream ended; the last response is still awaited. */
  stop: [];
  /** Transcript of a caller utterance: the translator's `transcript.done`, under its name. */
  'transcript.done': [text: string];
  /** Final translated text of a response: the translator's `text.done`, under its name. */
  'text.done': [text: string];
  /** A non-fatal problem: a malformed or unknown message, or a translator warning. */
  warning: [warning: RtTranslateError];
}

const OWN_DEFAULTS = {
  pacing: 'burst' as TwilioPacing,
  markPrefix: 'response-',
  track: 'inbound',
  output: 'object' as 'object' | 'json',
  maxMessageBytes: DEFAULT_MAX_TWILIO_MESSAGE_BYTES,
  maxQueuedMessages: 50,
  appendMs: 100,
  openSession: 'start' as 'construct' | 'start',
  startTimeoutMs: 10_000,
  mediaTimeoutMs: 10_000,
  maxAheadMs: 1000,
  maxTimestampLeadMs: 5000,
  maxTimestampRewinds: 3,
  maxWarningsPerKind: 5,
};

function oneOf<T extends string>(field: string, value: unknown, accepted: readonly T[], fallback: T): T {
  if (value === undefined) return fallback;
  if (typeof value === 'string' && (accepted as readonly string[]).includes(value)) return value as T;
  throw new ValidationError(field, `one of ${accepted.join(', ')}`, typeof value === 'string' ? JSON.stringify(value) : String(value));
}

function nonEmptyString(field: string, value: unknown, fallback: string): string {
  if (value === undefined) return fallback;
  if (typeof value === 'string' && value.length > 0) return value;
  throw new ValidationError(field, 'a non-empty string', typeof value);
}

/** The bridge's options, checked, with their defaults; `realtime`, the options of its session. */
export interface ResolvedBridgeOptions {
  pacing: TwilioPacing;
  output: 'object' | 'json';
  openSession: 'construct' | 'start';
  track: string;
  markPrefix: string;
  maxMessageBytes: number;
  maxQueuedMessages: number;
  appendMs: number;
  bargeIn: false | TwilioBargeInOptions | undefined;
  limits: { startTimeoutMs: number; mediaTimeoutMs: number; maxTimestampLeadMs: number; maxTimestampRewinds: number; maxWarningsPerKind: number };
  timeline: MediaTimelineOptions;
  realtime: Omit<RealtimeTranslateOptions, 'outputModalities'>;
}

/** Checks `options` (a `ValidationError` naming the first bad one) and fills in the defaults. */
export function resolveBridgeOptions(options: TwilioMediaBridgeOptions): ResolvedBridgeOptions {
  if (options === null || typeof options !== 'object') {
    throw new ValidationError('options', 'an object with from and to (and the realtime service options)');
  }
  const {
    pacing: pacingOption,
    bargeIn,
    maxGapFillMs,
    gapToleranceMs,
    track: trackOption,
    markPrefix: markPrefixOption,
    output: outputOption,
    maxMessageBytes: maxMessageBytesOption,
    maxQueuedMessages: maxQueuedOption,
    appendMs: appendMsOption,
    openSession: openSessionOption,
    startTimeoutMs,
    mediaTimeoutMs,
    maxAheadMs,
    maxTimestampLeadMs,
    maxTimestampRewinds,
    maxWarningsPerKind,
    ...realtime
  } = options;
  const pacing = oneOf('pacing', pacingOption, ['burst', 'realtime'], OWN_DEFAULTS.pacing);
  const output = oneOf('output', outputOption, ['object', 'json'], OWN_DEFAULTS.output);
  const openSession = oneOf('openSession', openSessionOption, ['construct', 'start'], OWN_DEFAULTS.openSession);
  const track = nonEmptyString('track', trackOption, OWN_DEFAULTS.track);
  const markPrefix = nonEmptyString('markPrefix', markPrefixOption, OWN_DEFAULTS.markPrefix);
  const maxMessageBytes = intOption(maxMessageBytesOption, 'maxMessageBytes', { min: 1, fallback: OWN_DEFAULTS.maxMessageBytes });
  const maxQueuedMessages = intOption(maxQueuedOption, 'maxQueuedMessages', { min: 1, fallback: OWN_DEFAULTS.maxQueuedMessages });
  const appendMs = intOption(appendMsOption, 'appendMs', { min: 1, fallback: OWN_DEFAULTS.appendMs });
  if (appendMs % TWILIO_FRAME_MS !== 0 || appendMs > 1000) {
    throw new ValidationError('appendMs', `a multiple of ${TWILIO_FRAME_MS} ms, at most 1000`, String(appendMs));
  }
  if (bargeIn !== undefined && bargeIn !== false && (bargeIn === null || typeof bargeIn !== 'object')) {
    throw new ValidationError('bargeIn', 'false or an object { thresholdDbfs?, minSpeechMs? }', String(bargeIn));
  }
  const limits = {
    startTimeoutMs: intOption(startTimeoutMs, 'startTimeoutMs', { min: 1, fallback: OWN_DEFAULTS.startTimeoutMs }),
    mediaTimeoutMs: intOption(mediaTimeoutMs, 'mediaTimeoutMs', { min: 1, fallback: OWN_DEFAULTS.mediaTimeoutMs }),
    maxTimestampLeadMs: intOption(maxTimestampLeadMs, 'maxTimestampLeadMs', { min: 0, fallback: OWN_DEFAULTS.maxTimestampLeadMs }),
    maxTimestampRewinds: intOption(maxTimestampRewinds, 'maxTimestampRewinds', { min: 0, fallback: OWN_DEFAULTS.maxTimestampRewinds }),
    maxWarningsPerKind: intOption(maxWarningsPerKind, 'maxWarningsPerKind', { min: 0, fallback: OWN_DEFAULTS.maxWarningsPerKind }),
  };
  const timeline: MediaTimelineOptions = {
    sampleRate: TWILIO_SAMPLE_RATE,
    // Checked here, so that a bad value is named as the bridge's option.
    ...(maxGapFillMs === undefined ? {} : { maxFillMs: intOption(maxGapFillMs, 'maxGapFillMs', { min: 0, fallback: 0 }) }),
    ...(gapToleranceMs === undefined ? {} : { toleranceMs: intOption(gapToleranceMs, 'gapToleranceMs', { min: 0, fallback: 0 }) }),
    maxAheadMs: intOption(maxAheadMs, 'maxAheadMs', { min: 0, fallback: OWN_DEFAULTS.maxAheadMs }),
  };
  return { pacing, output, openSession, track, markPrefix, maxMessageBytes, maxQueuedMessages, appendMs, bargeIn, limits, timeline, realtime };
}
