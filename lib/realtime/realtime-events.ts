/**
 * The events of a realtime session under one name each, whether they reach a caller as an
 * emitter event (`stream.on(type, ...)`), through `stream.events()` or as a line of an event log
 * (`eventToRecord`): the service's events (with their wire name in `wireType`) and the stream's
 * own (`reconnecting`, `reconnected`, `response`, `warning`, `ended`).
 */
import type { RtTranslateError } from '../errors.js';
import { SERVER_EVENT_TYPES, type ServerEvent, type ServerEventListenerArgs } from './codec.js';

export type { SessionStartedInfo } from './codec.js';
import type { LatencySummary, ResponseTiming } from './speech-ledger.js';

/** `reconnecting`: the connection dropped and attempt `attempt` starts after `delayMs`. */
export interface ReconnectingInfo {
  attempt: number;
  delayMs: number;
  /** Why the connection dropped (or why the previous attempt failed). */
  cause: RtTranslateError;
}

/** `reconnected`: a new session is up and the unanswered input is being sent again. */
export interface ReconnectedInfo {
  sessionId: string;
  /** Attempts it took. */
  attempt: number;
  /** Input audio sent again, in ms. */
  replayedMs: number;
  /** Input audio that may have been unanswered but was no longer kept for replay, in ms (0 normally). */
  notReplayedMs: number;
  /** From the drop to the new session, in ms. */
  outageMs: number;
}

/** `ended`: how the session ended, once it did (also in `stats.ending`). */
export interface EndedInfo {
  /**
   * True when everything owed was answered; false when the stream gave up waiting, the service
   * closed early or reconnecting gave up.
   */
  complete: boolean;
  /**
   * Why it ended incomplete: the last response stalled, speech went unanswered, the service closed
   * early, or the connection was lost and reconnecting `gave-up` (the stream's error follows).
   */
  reason: 'response-stalled' | 'speech-unanswered' | 'closed-by-service' | 'gave-up' | undefined;
  /** Speech sent that no response answered, in ms. */
  unansweredSpeechMs: number;
}

/** Counters and gauges, for progress lines, summaries and tests. */
export interface RealtimeStats {
  /** Input audio accepted from the writer, in bytes (end padding not included). */
  inputBytes: number;
  /** Silence appended on `end()`, in bytes. */
  paddingBytes: number;
  /** Audio bytes the socket has taken (handed to the kernel), replays and padding included. */
  bytesSent: number;
  /** Audio bytes accepted but not yet taken by the socket (queued in the stream or the WebSocket). */
  bytesQueued: number;
  /** Audio bytes sent again after reconnects. */
  bytesReplayed: number;
  /** Input audio kept in memory for a replay (sent but unanswered, and not yet sent), in bytes. */
  replayBytes: number;
  /** Translated audio bytes received. */
  bytesReceived: number;
  /** Bytes queued in the WebSocket that the kernel has not taken yet. */
  socketBufferedAmount: number;
  /** Responses completed so far. */
  responses: number;
  /** Whether the socket is paused because a reader is behind. */
  paused: boolean;
  /** Sessions re-established after a drop. */
  reconnects: number;
  /** Time spent without a session after drops, in total and the longest, in ms. */
  outageMs: number;
  longestOutageMs: number;
  /** From the end of the answered speech to each stage of the response, over all responses. */
  latency: { transcriptMs: LatencySummary; firstTextMs: LatencySummary; firstAudioMs: LatencySummary; doneMs: LatencySummary };
  /** How the session ended, once it has. */
  ending: EndedInfo | undefined;
}

/** Listener arguments of each event (the same names as the `type` of what `events()` yields). */
export interface RealtimeTranslateEvents extends ServerEventListenerArgs<Buffer> {
  unknown: [event: Extract<ServerEvent, { type: 'unknown' }>];
  reconnecting: [info: ReconnectingInfo];
  reconnected: [info: ReconnectedInfo];
  response: [timing: ResponseTiming];
  warning: [warning: RtTranslateError];
  ended: [info: EndedInfo];
  /** Every event, as `events()` yields it. */
  event: [event: RealtimeEvent];
}

/** Every event of a realtime session, as `events()` yields it. */
export type RealtimeEvent =
  | ServerEvent
  | ({ type: 'reconnecting' } & ReconnectingInfo)
  | ({ type: 'reconnected' } & ReconnectedInfo)
  | { type: 'response'; timing: ResponseTiming }
  | { type: 'warning'; warning: RtTranslateError }
  | ({ type: 'ended' } & EndedInfo);

/** The `type` of every realtime event. */
export type RealtimeEventType = RealtimeEvent['type'];

/** What an event holds in memory while queued for an `events()` consumer, in bytes. */
export function eventWeight(event: RealtimeEvent): number {
  return event.type === 'audio.delta' ? event.audio.length * 2 : 0;
}

/** The arguments an emitter listener of `event.type` gets (see `RealtimeTranslateEvents`). */
export function listenerArgs(event: RealtimeEvent): unknown[] {
  switch (event.type) {
    case 'session.starting':
    case 'audio.done':
      return [];
    case 'session.created':
      return [{ ...event.session, id: event.session.id ?? '' }];
    case 'session.updated':
      return [event.session];
    case 'transcript.delta':
    case 'text.delta':
      return [event.delta];
    case 'transcript.done':
      return [event.text];
    case 'text.done':
      return [event.text ?? ''];
    case 'audio.delta':
      return [event.audio];
    case 'response':
      return [event.timing];
    default:
      return commonListenerArgs(event);
  }
}

/**
 * The arguments a listener gets for the events every realtime stream has: `server.error`
 * (message, code), `warning` (the error), `unknown` (the event), and the stream's own
 * `reconnecting`, `reconnected` and `ended` (their info, without `type`).
 */
export function commonListenerArgs(event: { type: string }): unknown[] {
  const e = event as { type: string; message?: unknown; code?: unknown; warning?: unknown };
  switch (e.type) {
    case 'server.error':
      return [e.message, e.code];
    case 'warning':
      return [e.warning];
    case 'unknown':
      return [event];
    default: {
      const { type: _type, ...info } = event;
      return [info];
    }
  }
}

/** An error as a log record: its code, message and whether a retry may help. */
export function errorRecord(error: RtTranslateError): Record<string, unknown> {
  return { code: error.code, message: error.message, retryable: error.retryable };
}

/**
 * The event as a JSON-safe record for a log line, under the same `type`: audio as its byte
 * count (never base64), errors as code and message, the wire name in `wireType`; an unknown
 * service event keeps its wire object in `raw`.
 */
export function eventToRecord(event: RealtimeEvent): Record<string, unknown> {
  switch (event.type) {
    case 'audio.delta':
      return { type: event.type, wireType: event.wireType, bytes: event.audio.length };
    case 'session.created':
    case 'session.updated': {
      // The session in the library's words, and the wire object for what the service added.
      const { raw: _wire, ...session } = event.session;
      return { type: event.type, wireType: event.wireType, session, raw: event.raw };
    }
    case 'unknown':
      return { type: event.type, wireType: event.wireType, raw: event.raw };
    case 'reconnecting':
      return { type: event.type, attempt: event.attempt, delayMs: event.delayMs, cause: errorRecord(event.cause) };
    case 'warning':
      return { type: event.type, warning: errorRecord(event.warning) };
    case 'response':
    case 'reconnected':
    case 'ended':
      return { ...event };
    default: {
      const { raw: _raw, ...fields } = event;
      return fields;
    }
  }
}

/**
 * Replaces `secret` in every string of a parsed event object, in place (keys included), except
 * (with `skipAudio`) the base64 payload fields `delta`/`audio` of an audio event, which would be
 * corrupted by it. The `delta` of a text or transcript event is text, and redacted.
 */
export function redactObject(value: Record<string, unknown>, secret: string, skipAudio: boolean): void {
  const audioEvent = skipAudio && value.type === SERVER_EVENT_TYPES.audioDelta;
  for (const [key, item] of Object.entries(value)) {
    if (audioEvent && (key === 'delta' || key === 'audio')) continue;
    const replaced = redactValue(item, secret);
    if (key.includes(secret)) {
      delete value[key];
      value[key.split(secret).join('[redacted]')] = replaced;
    } else {
      value[key] = replaced;
    }
  }
}

function redactValue(value: unknown, secret: string): unknown {
  if (typeof value === 'string') return value.includes(secret) ? value.split(secret).join('[redacted]') : value;
  if (Array.isArray(value)) return value.map((item) => redactValue(item, secret));
  if (value !== null && typeof value === 'object') {
    redactObject(value as Record<string, unknown>, secret, false);
    return value;
  }
  return value;
}
