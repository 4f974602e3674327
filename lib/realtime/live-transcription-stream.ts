/**
 * `LiveTranscriptionStream`: a Duplex over the live transcription WebSocket
 * (`{realtime_url}/streaming-transcription/listen`, wire format in `transcription-codec.ts`).
 * Writable side: audio in the encoding the options describe (PCM16 `linear16` at 16 kHz by
 * default; `mulaw` at 8 kHz straight from a phone call). Readable side, in object mode: the
 * transcript results (`LiveTranscript`), final ones only unless `results: 'all'`; interim and
 * final results are also events, and `events()` yields everything.
 *
 * It is the live transcription protocol over the realtime Duplex core it shares with the
 * translation stream (`realtime-duplex.ts`: connections, liveness and reconnects, backpressure,
 * replay and the outage figures, the lifecycle, events, the reading of service errors). While
 * the caller is silent it sends `KeepAlive` (the ready session's timer); `end()` sends
 * `CloseStream` once every byte is sent, and the stream ends when the service has flushed its
 * last results and closed (bounded by `finishTimeoutMs` of silence). A dropped session is
 * resumed from the end of the last final result; result times stay on one timeline, the
 * stream's, across reconnects.
 */
import { inspect } from 'node:util';
import { ProtocolError, TimeoutError, ValidationError, type RtTranslateError } from '../errors.js';
import { intOption, describeReceived } from '../options.js';
import type { LanguageTag, OpenUnion } from '../language-tags.js';
import type { ConnectionEnd } from './connection.js';
import type { StreamCallback } from './duplex-lifecycle.js';
import type { AnsweredInput } from './outage-replay.js';
import { RealtimeDuplex } from './realtime-duplex.js';
import { resolveConnectionOptions, withApiKey, type RealtimeConnectionOptions, type ResolvedConnectionOptions } from './realtime-options.js';
import { commonListenerArgs, errorRecord, type EndedInfo, type ReconnectedInfo, type ReconnectingInfo } from './realtime-events.js';
import { verdictTimer } from './verdict-timer.js';
import {
  DEFAULT_LIVE_PARAMS,
  LIVE_TRANSCRIPTION_PATH,
  decodeLiveServerEvent,
  encodeCloseStream,
  encodeKeepAlive,
  encodeLiveQuery,
  liveSampleBytes,
  type LiveEncoding,
  type LiveResults,
  type LiveServerEvent,
  type LiveWord,
} from './transcription-codec.js';
import { withEvents } from '../typed-events.js';

export interface LiveTranscriptionOptions extends RealtimeConnectionOptions {
  /** Locale tag of the speech. Default `en-us`. */
  language?: OpenUnion<LanguageTag>;
  /** Default `boli-v5`. */
  model?: string;
  /** `linear16` (default), `linear32`, `mulaw` or `alaw`. */
  encoding?: LiveEncoding;
  /** Hz. Default 16 000 (8000 for a phone call's `mulaw`). */
  sampleRate?: number;
  /** Default 1. */
  channels?: number;
  /** What the readable side yields: `'final'` results (default) or `'all'`, interim ones too. */
  results?: 'final' | 'all';
  /** Send `KeepAlive` after this long without audio, in ms. Default 5000. */
  keepAliveMs?: number;
  /** After `end()`: silence from the service this long before the stream gives up waiting, in ms. Default 10 000. */
  finishTimeoutMs?: number;
  /** Largest binary audio frame, in bytes. Default 32 KiB. */
  maxChunkBytes?: number;
  /** Readable side buffer, in results. Default 64. */
  readableHighWaterMark?: number;
  /** Writable side buffer, in bytes. Default 64 KiB. */
  writableHighWaterMark?: number;
}

/** A transcript result, its times in seconds on the stream's timeline (from its first byte of audio). */
export interface LiveTranscript {
  /** An interim hypothesis (false) or the final text of its segment (true). */
  isFinal: boolean;
  transcript: string;
  start: number;
  end: number;
  confidence: number;
  words: LiveWord[];
  requestId: string | undefined;
}

/** Every event of a live transcription session, as `events()` yields it. */
export type LiveTranscriptionEvent =
  | { type: 'ready'; requestId: string | undefined }
  | { type: 'interim'; result: LiveTranscript }
  | { type: 'final'; result: LiveTranscript }
  | { type: 'server.error'; message: string; code: string | undefined }
  | { type: 'unknown'; wireType: string; raw: Record<string, unknown> }
  | ({ type: 'reconnecting' } & ReconnectingInfo)
  | ({ type: 'reconnected' } & ReconnectedInfo)
  | { type: 'warning'; warning: RtTranslateError }
  | ({ type: 'ended' } & EndedInfo);

export interface LiveTranscriptionStats {
  inputBytes: number;
  bytesSent: number;
  bytesQueued: number;
  bytesReplayed: number;
  replayBytes: number;
  finals: number;
  interims: number;
  keepAlives: number;
  reconnects: number;
  outageMs: number;
  paused: boolean;
  ending: EndedInfo | undefined;
}

interface Resolved extends ResolvedConnectionOptions {
  encoding: LiveEncoding;
  sampleRate: number;
  frameBytes: number;
  bytesPerSecond: number;
  results: 'final' | 'all';
  keepAliveMs: number;
  finishTimeoutMs: number;
  maxChunkBytes: number;
  readableHighWaterMark: number;
  writableHighWaterMark: number;
}

function resolve(options: LiveTranscriptionOptions): Resolved {
  return withApiKey(options, 'an object of live transcription options', (apiKey) => {
    const encoding = options.encoding ?? DEFAULT_LIVE_PARAMS.encoding;
    const phone = encoding === 'mulaw' || encoding === 'alaw';
    const params = {
      model: options.model ?? DEFAULT_LIVE_PARAMS.model,
      language: options.language ?? DEFAULT_LIVE_PARAMS.language,
      encoding,
      sampleRate: options.sampleRate ?? (phone ? 8000 : DEFAULT_LIVE_PARAMS.sampleRate),
      channels: options.channels ?? DEFAULT_LIVE_PARAMS.channels,
    };
    const query = Object.fromEntries(encodeLiveQuery(params));
    if (options.results !== undefined && options.results !== 'final' && options.results !== 'all') {
      throw new ValidationError('results', "'final' or 'all'", describeReceived(options.results));
    }
    const frameBytes = liveSampleBytes(encoding) * params.channels;
    const maxChunkBytes = intOption(options.maxChunkBytes, 'maxChunkBytes', { min: frameBytes, max: 1024 * 1024, fallback: 32 * 1024 });
    return {
      ...resolveConnectionOptions(options, apiKey, { path: LIVE_TRANSCRIPTION_PATH, query, readyTimeoutMs: 30_000 }),
      encoding,
      sampleRate: params.sampleRate,
      frameBytes,
      bytesPerSecond: frameBytes * params.sampleRate,
      results: options.results ?? 'final',
      keepAliveMs: intOption(options.keepAliveMs, 'keepAliveMs', { min: 100, fallback: 5_000 }),
      finishTimeoutMs: intOption(options.finishTimeoutMs, 'finishTimeoutMs', { min: 1, fallback: 10_000 }),
      maxChunkBytes: maxChunkBytes - (maxChunkBytes % frameBytes),
      readableHighWaterMark: intOption(options.readableHighWaterMark, 'readableHighWaterMark', { min: 1, fallback: 64 }),
      writableHighWaterMark: intOption(options.writableHighWaterMark, 'writableHighWaterMark', { min: 1, fallback: 64 * 1024 }),
    };
  });
}

/** Largest message accepted from the service. */
const MAX_PAYLOAD_BYTES = 4 * 1024 * 1024;

/** The event as a JSON-safe record for a log line, under the same `type` (errors as code and message). */
export function liveEventToRecord(event: LiveTranscriptionEvent): Record<string, unknown> {
  if (event.type === 'warning') return { type: event.type, warning: errorRecord(event.warning) };
  if (event.type === 'reconnecting') return { type: event.type, attempt: event.attempt, delayMs: event.delayMs, cause: errorRecord(event.cause) };
  return { ...event };
}

/** The arguments of a listener of `event.type` (see `LiveTranscriptionEvents`). */
function liveListenerArgs(event: LiveTranscriptionEvent): unknown[] {
  switch (event.type) {
    case 'ready':
      return [event.requestId];
    case 'interim':
    case 'final':
      return [event.result];
    default:
      return commonListenerArgs(event);
  }
}

export class LiveTranscriptionStream extends withEvents<LiveTranscriptionEvents>()(
  RealtimeDuplex<LiveTranscriptionEvent, LiveServerEvent, { closeSent: boolean }>,
) {
  readonly #o: Resolved;
  /** How far the final results have covered the input. */
  readonly #finals: FinalsFrontier;
  readonly #counts = { finals: 0, interims: 0, keepAlives: 0 };
  /** Input offset where the current session's timeline starts (0, or where a replay began). */
  #sessionBase = 0;
  #audioSinceTick = false;

  constructor(options: LiveTranscriptionOptions = {}) {
    const o = resolve(options);
    const finals = new FinalsFrontier(o.frameBytes);
    super({
      connection: o,
      name: 'live transcription session',
      maxPayload: MAX_PAYLOAD_BYTES,
      textOnly: false,
      keepAliveMs: o.keepAliveMs,
      frameBytes: o.frameBytes,
      bytesPerMs: o.bytesPerSecond / 1000,
      framing: { maxPieceBytes: o.maxChunkBytes, encode: (piece) => piece, binary: true },
      answers: finals,
      prerollMs: 0,
      weigh: () => 0,
      listenerArgs: liveListenerArgs,
      readableObjectMode: true,
      readableHighWaterMark: o.readableHighWaterMark,
      writableHighWaterMark: o.writableHighWaterMark,
    });
    this.#o = o;
    this.#finals = finals;
  }

  get stats(): LiveTranscriptionStats {
    const { bytesReplayed, reconnects, outageMs } = this.outage.stats;
    return {
      ...{ inputBytes: this.inputBytes, bytesSent: this.bytesSent, bytesReplayed, ...this.#counts, reconnects, outageMs },
      bytesQueued: this.outbox.unsent + this.link.bufferedAmount,
      replayBytes: this.outbox.retained,
      paused: this.link.paused,
      ending: this.life.ending,
    };
  }

  /* ------------------------------------------------------------------ incoming */

  protected override decode(data: Buffer, isBinary: boolean): LiveServerEvent | undefined {
    if (isBinary) {
      this.warn(new ProtocolError('The live transcription service sent a binary frame; it was ignored.'));
      return undefined;
    }
    try {
      return decodeLiveServerEvent(data.toString('utf8'));
    } catch (error) {
      this.warn(error as RtTranslateError);
      return undefined;
    }
  }

  protected override handle(event: LiveServerEvent): void {
    switch (event.type) {
      case 'Ready':
        // The handshake said everything; the service speaks first.
        this.sessionReady(event.requestId ?? '', () => this.publish({ type: 'ready', requestId: event.requestId }));
        return;
      case 'Results':
        this.#onResults(event);
        return;
      case 'Error':
        this.publish({ type: 'server.error', message: event.message, code: event.code });
        this.serverError(event.message, event.code);
        return;
      case 'unknown':
        this.publish(event);
    }
  }

  protected override readyTimeout(waitedMs: number): RtTranslateError {
    return new TimeoutError(`No Ready from the live transcription service within ${waitedMs} ms.`, waitedMs);
  }

  /** A result, its times moved from the session's timeline to the stream's. */
  #onResults(results: LiveResults): void {
    const offset = this.#sessionBase / this.#o.bytesPerSecond;
    const shift = (seconds: number): number => Number((seconds + offset).toFixed(3));
    const result: LiveTranscript = {
      isFinal: results.isFinal,
      transcript: results.transcript,
      start: shift(results.start),
      end: shift(results.start + results.duration),
      confidence: results.confidence,
      words: results.words.map((w) => ({ ...w, start: shift(w.start), end: shift(w.end) })),
      requestId: results.requestId,
    };
    if (result.isFinal) {
      this.#counts.finals += 1;
      const end = this.#sessionBase + Math.round((results.start + results.duration) * this.#o.sampleRate) * this.#o.frameBytes;
      this.#finals.reach(Math.min(end, this.outbox.sent));
      this.answered();
      this.publish({ type: 'final', result });
    } else {
      this.#counts.interims += 1;
      this.publish({ type: 'interim', result });
    }
    if (result.isFinal || this.#o.results === 'all') this.deliver(result);
    if (this.#closeSent()) this.#setCloseSent(true);
  }

  /* ------------------------------------------------------------------ outgoing */

  protected override inputHanded(): void {
    this.#audioSinceTick = true;
  }

  /** While the caller is silent, tells the service the session is still wanted. */
  protected override keepAlive(): void {
    if (!this.#audioSinceTick && this.link.status === 'ready' && !this.#closeSent() && this.link.send(encodeKeepAlive())) this.#counts.keepAlives += 1;
    this.#audioSinceTick = false;
  }

  protected override trailingInput(bytes: number): RtTranslateError {
    return new ValidationError('input', `whole sample frames of ${this.#o.frameBytes} bytes`, `a trailing ${bytes} bytes, dropped`);
  }

  /* ------------------------------------------------------------------ the ending */

  protected override endInput(callback: StreamCallback): void {
    this.life.set({ status: 'ending', finalCallback: callback, timer: undefined, closeSent: false });
    this.evaluateEnding();
  }

  /** After end(), once every byte has been sent on a ready session: `CloseStream`, then wait for the close. */
  protected override evaluateEnding(): void {
    const state = this.life.stateIn('ending');
    if (!state || state.closeSent || this.link.status !== 'ready' || !this.outbox.drained) return;
    this.link.send(encodeCloseStream());
    this.#setCloseSent(true);
  }

  #closeSent(): boolean {
    const state = this.life.state;
    return state.status === 'ending' && state.closeSent;
  }

  /**
   * After `CloseStream` (and again after each result): the service must answer or close within
   * `finishTimeoutMs` of its last word. A new session has not been sent `CloseStream` yet.
   */
  #setCloseSent(sent: boolean): void {
    const state = this.life.state;
    if (state.status !== 'ending') return;
    const timer = sent
      ? verdictTimer(
          this.#o.finishTimeoutMs,
          (t) => 'timer' in this.life.state && this.life.state.timer === t,
          () => this.#finishTimedOut(),
        )
      : undefined;
    this.life.set({ ...state, closeSent: sent, timer });
  }

  #finishTimedOut(): void {
    const state = this.life.state;
    if (state.status !== 'ending') return;
    const waited = this.#o.finishTimeoutMs;
    this.warn(
      new TimeoutError(
        `The live transcription service neither answered nor closed for ${waited} ms after CloseStream; closing without its last results.`,
        waited,
      ),
    );
    this.life.decide({ complete: false, reason: 'response-stalled', unansweredSpeechMs: this.outage.unprocessedMs() });
    this.closeSession();
  }

  /** The service flushed its last results and closed, as `CloseStream` asks: complete. */
  protected override endedByDrop(_end: ConnectionEnd, normal: boolean): boolean {
    return normal && this.#closeSent();
  }

  /** A session was lost: what its final results did not cover is sent again, on a new timeline. */
  protected override reconnecting(sessionLost: boolean): void {
    this.#setCloseSent(false);
    if (sessionLost) this.#sessionBase = this.outbox.sent;
  }

  protected override gaveUp(): EndedInfo {
    const ending: EndedInfo = { complete: false, reason: 'gave-up', unansweredSpeechMs: this.outage.unprocessedMs() };
    this.life.decide(ending);
    return ending;
  }

  [inspect.custom](): string {
    const { url, encoding, sampleRate } = this.#o;
    return `LiveTranscriptionStream { url: '${url.origin}${url.pathname}', encoding: '${encoding}', sampleRate: ${sampleRate}, state: '${this.link.status}' }`;
  }
}

/** How far the final results have covered the input: a lost session's audio is sent again from there. */
class FinalsFrontier implements AnsweredInput {
  readonly #frameBytes: number;
  #frontier = 0;

  constructor(frameBytes: number) {
    this.#frameBytes = frameBytes;
  }

  get frontier(): number {
    return this.#frontier;
  }

  /** A final result covers the input up to `offset`. */
  reach(offset: number): void {
    this.#frontier = Math.max(this.#frontier, offset);
  }

  /** On a whole frame at the frontier: the service's results say where they end, so no preroll. */
  replayStart(): number {
    return this.#frontier - (this.#frontier % this.#frameBytes);
  }

  keepStart(): number {
    return this.replayStart();
  }
}

/** Listener arguments of each event (the same names as the `type` of what `events()` yields). */
export interface LiveTranscriptionEvents {
  ready: [requestId: string | undefined];
  interim: [result: LiveTranscript];
  final: [result: LiveTranscript];
  'server.error': [message: string, code: string | undefined];
  unknown: [event: Extract<LiveTranscriptionEvent, { type: 'unknown' }>];
  reconnecting: [info: ReconnectingInfo];
  reconnected: [info: ReconnectedInfo];
  warning: [warning: RtTranslateError];
  ended: [info: EndedInfo];
  event: [event: LiveTranscriptionEvent];
}
