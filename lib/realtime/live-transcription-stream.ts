/**
 * `LiveTranscriptionStream`: a Duplex over the live transcription WebSocket
 * (`{realtime_url}/streaming-transcription/listen`, wire format in `transcription-codec.ts`).
 * Writable side: audio in the encoding the options describe (PCM16 `linear16` at 16 kHz by
 * default; `mulaw` at 8 kHz straight from a phone call). Readable side, in object mode: the
 * transcript results (`LiveTranscript`), final ones only unless `results: 'all'`; interim and
 * final results are also events, and `events()` yields everything.
 *
 * It shares the translation stream's machinery: `SessionLink` (connections, liveness,
 * reconnects), `AudioOutbox` (backpressure, replay), `DuplexLifecycle` (the stream's state and
 * its pending callbacks), `EventOutlet` (events and results to the caller, with backpressure),
 * the connection options and the reading of service errors. While the caller is silent it sends `KeepAlive`; `end()` sends `CloseStream`
 * once every byte is sent, and the stream ends when the service has flushed its last results and
 * closed (bounded by `finishTimeoutMs` of silence). A dropped session is resumed from the end of
 * the last final result; result times stay on one timeline, the stream's, across reconnects.
 */
import { Duplex } from 'node:stream';
import { inspect } from 'node:util';
import { FrameCutter } from '../audio/frames.js';
import { ProtocolError, TimeoutError, ValidationError, type RtTranslateError } from '../errors.js';
import { intOption } from '../options.js';
import type { LanguageTag, OpenUnion } from '../language-tags.js';
import type { ConnectionEnd } from './connection.js';
import { DuplexLifecycle } from './duplex-lifecycle.js';
import { EventOutlet } from './event-outlet.js';
import { AudioOutbox } from './audio-outbox.js';
import { linkOptions, resolveConnectionOptions, withApiKey, type RealtimeConnectionOptions, type ResolvedConnectionOptions } from './realtime-options.js';
import { commonListenerArgs, errorRecord, type EndedInfo, type ReconnectedInfo, type ReconnectingInfo } from './realtime-events.js';
import { PendingServerError } from './server-errors.js';
import { SessionLink } from './session-link.js';
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
      throw new ValidationError('results', "'final' or 'all'", String(options.results));
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

export class LiveTranscriptionStream extends Duplex {
  readonly #o: Resolved;
  readonly #link: SessionLink;
  readonly #outbox: AudioOutbox;
  readonly #outlet: EventOutlet<LiveTranscriptionEvent>;
  readonly #serverError: PendingServerError;
  readonly #stats = { inputBytes: 0, bytesSent: 0, bytesReplayed: 0, finals: 0, interims: 0, keepAlives: 0, reconnects: 0, outageMs: 0 };
  /** Construction, ending, failure and close; while ending, whether `CloseStream` went on this session. */
  readonly #life: DuplexLifecycle<{ closeSent: boolean }>;
  /** Input cut to whole sample frames (a frame split across writes waits for the rest). */
  readonly #input: FrameCutter;
  /** Input offset where the current session's timeline starts (0, or where a replay began). */
  #sessionBase = 0;
  /** Input offset up to which final results have covered the audio. */
  #frontier = 0;
  #ready = false;
  #audioSinceTick = false;
  #keepAliveTimer: NodeJS.Timeout | undefined;
  #replayedBytes = 0;

  constructor(options: LiveTranscriptionOptions = {}) {
    const o = resolve(options);
    super({ readableObjectMode: true, writableObjectMode: false, readableHighWaterMark: o.readableHighWaterMark, writableHighWaterMark: o.writableHighWaterMark, allowHalfOpen: true, decodeStrings: true });
    this.#o = o;
    this.#input = new FrameCutter(o.frameBytes);
    this.#life = new DuplexLifecycle(this, { signal: o.signal, name: 'live transcription session', shutdown: () => this.#link.shutdown() });
    this.#serverError = new PendingServerError(o.apiKey, (warning) => this.#outlet.publish({ type: 'warning', warning }));
    this.#link = new SessionLink(linkOptions(o, MAX_PAYLOAD_BYTES, false), {
      open: () => undefined, // the handshake says everything; the service speaks first (Ready)
      message: (data, isBinary) => this.#onMessage(data, isBinary),
      readyTimeout: (waitedMs) => new TimeoutError(`No Ready from the live transcription service within ${waitedMs} ms.`, waitedMs),
      dropped: (end, cause) => this.#onDropped(end, cause),
      reconnecting: (attempt, delayMs, cause, sessionLost) => this.#onReconnecting(attempt, delayMs, cause, sessionLost),
      failed: (error) => this.#fail(error),
      closed: () => this.#completeClose(),
    });
    this.#outlet = new EventOutlet<LiveTranscriptionEvent>(this, this.#link, {
      bounds: { count: o.maxQueuedEvents, bytes: o.maxQueuedEventBytes, weigh: () => 0 },
      listenerArgs: liveListenerArgs,
    });
    this.#outbox = new AudioOutbox(this.#link, {
      maxPieceBytes: o.maxChunkBytes,
      maxSocketBufferBytes: o.maxSocketBufferBytes,
      maxReplayBytes: o.reconnect ? Math.round((o.reconnect.maxReplayMs / 1000) * o.bytesPerSecond) : undefined,
      encode: (piece) => piece,
      binary: true,
      handed: () => (this.#audioSinceTick = true),
      sent: (length) => {
        this.#stats.bytesSent += length;
        this.#maybeCloseStream();
      },
    });
  }

  get stats(): LiveTranscriptionStats {
    return {
      ...this.#stats,
      bytesQueued: this.#outbox.unsent + this.#link.bufferedAmount,
      replayBytes: this.#outbox.retained,
      paused: this.#link.paused,
      ending: this.#life.ending,
    };
  }

  /** Every event, in order (results, reconnects, warnings, the end), for `for await`. */
  events(): AsyncIterableIterator<LiveTranscriptionEvent> {
    return this.#outlet.subscribe();
  }

  override _construct(callback: (error?: Error | null) => void): void {
    this.#life.construct(callback, () => this.#link.start());
  }

  /* ------------------------------------------------------------------ incoming */

  #onMessage(data: Buffer, isBinary: boolean): void {
    if (this.#life.error) return;
    if (isBinary) {
      this.#outlet.publish({ type: 'warning', warning: new ProtocolError('The live transcription service sent a binary frame; it was ignored.') });
      return;
    }
    let event: LiveServerEvent;
    try {
      event = decodeLiveServerEvent(data.toString('utf8'));
    } catch (error) {
      this.#outlet.publish({ type: 'warning', warning: error as RtTranslateError });
      return;
    }
    this.#serverError.settle();
    switch (event.type) {
      case 'Ready':
        this.#onReady(event.requestId);
        return;
      case 'Results':
        this.#onResults(event);
        return;
      case 'Error': {
        this.#outlet.publish({ type: 'server.error', message: event.message, code: event.code });
        const error = this.#serverError.note(event.message, event.code);
        if (!this.#ready) {
          this.#serverError.discard();
          this.#link.shutdown();
          this.#fail(error);
        }
        return;
      }
      case 'unknown':
        this.#outlet.publish(event);
    }
  }

  #onReady(requestId: string | undefined): void {
    const recovery = this.#link.ready();
    if (this.#link.status !== 'ready') return;
    this.#ready = true;
    this.#setCloseSent(false);
    this.#outlet.publish({ type: 'ready', requestId });
    if (recovery) {
      this.#stats.reconnects += 1;
      this.#stats.outageMs += recovery.gapMs;
      this.#stats.bytesReplayed += this.#replayedBytes;
      this.#outlet.publish({
        type: 'reconnected',
        sessionId: requestId ?? '',
        attempt: recovery.attempt,
        replayedMs: Math.round((this.#replayedBytes / this.#o.bytesPerSecond) * 1000),
        notReplayedMs: 0,
        outageMs: recovery.gapMs,
      });
      this.#replayedBytes = 0;
    }
    clearInterval(this.#keepAliveTimer);
    this.#keepAliveTimer = setInterval(() => this.#keepAlive(), this.#o.keepAliveMs);
    this.#keepAliveTimer.unref();
    this.#life.opened();
    this.#outbox.pump();
    this.#outbox.release();
    this.#maybeCloseStream();
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
      this.#stats.finals += 1;
      const end = this.#sessionBase + Math.round((results.start + results.duration) * this.#o.sampleRate) * this.#o.frameBytes;
      this.#frontier = Math.max(this.#frontier, Math.min(end, this.#outbox.sent));
      this.#outbox.keepFrom(this.#frontier);
      this.#link.progress();
      this.#outlet.publish({ type: 'final', result });
    } else {
      this.#stats.interims += 1;
      this.#outlet.publish({ type: 'interim', result });
    }
    if (result.isFinal || this.#o.results === 'all') this.#outlet.deliver(result);
    if (this.#closeSent()) this.#setCloseSent(true);
  }

  override _read(): void {
    if (!this.#life.failWhenDrained()) this.#outlet.read();
  }

  /* ------------------------------------------------------------------ outgoing */

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    if (this.#life.over) {
      this.#outbox.hold(callback);
      return;
    }
    this.#input.cut(chunk, (buf, offset, frames) => {
      const audio = buf.subarray(offset, offset + frames * this.#input.frameBytes);
      this.#stats.inputBytes += audio.length;
      this.#outbox.accept(audio);
    });
    this.#outbox.hold(callback);
  }

  /** While the caller is silent, tells the service the session is still wanted. */
  #keepAlive(): void {
    if (!this.#audioSinceTick && this.#link.status === 'ready' && !this.#closeSent() && this.#link.send(encodeKeepAlive())) this.#stats.keepAlives += 1;
    this.#audioSinceTick = false;
  }

  override _final(callback: (error?: Error | null) => void): void {
    if (this.#life.failWhenDrained()) return;
    if (this.#input.pendingBytes > 0) {
      this.#outlet.publish({
        type: 'warning',
        warning: new ValidationError('input', `whole sample frames of ${this.#o.frameBytes} bytes`, `a trailing ${this.#input.pendingBytes} bytes, dropped`),
      });
      this.#input.clear();
    }
    this.#life.set({ status: 'ending', finalCallback: callback, timer: undefined, closeSent: false });
    this.#maybeCloseStream();
  }

  /** After end(), once every byte has been sent on a ready session: `CloseStream`, then wait for the close. */
  #maybeCloseStream(): void {
    const state = this.#life.state;
    if (state.status !== 'ending' || state.closeSent || this.#link.status !== 'ready' || !this.#outbox.drained) return;
    this.#link.send(encodeCloseStream());
    this.#setCloseSent(true);
  }

  #closeSent(): boolean {
    const state = this.#life.state;
    return state.status === 'ending' && state.closeSent;
  }

  /**
   * After `CloseStream` (and again after each result): the service must answer or close within
   * `finishTimeoutMs` of its last word. A new session has not been sent `CloseStream` yet.
   */
  #setCloseSent(sent: boolean): void {
    const state = this.#life.state;
    if (state.status !== 'ending') return;
    const timer = sent ? verdictTimer(this.#o.finishTimeoutMs, (t) => 'timer' in this.#life.state && this.#life.state.timer === t, () => this.#finishTimedOut()) : undefined;
    this.#life.set({ ...state, closeSent: sent, timer });
  }

  #finishTimedOut(): void {
    const state = this.#life.state;
    if (state.status !== 'ending') return;
    const waited = this.#o.finishTimeoutMs;
    this.#outlet.publish({
      type: 'warning',
      warning: new TimeoutError(`The live transcription service neither answered nor closed for ${waited} ms after CloseStream; closing without its last results.`, waited),
    });
    this.#life.decide({ complete: false, reason: 'response-stalled', unansweredSpeechMs: this.#unansweredMs() });
    this.#link.close();
  }


  #unansweredMs(): number {
    return Math.round(((this.#outbox.end - this.#frontier) / this.#o.bytesPerSecond) * 1000);
  }

  /* ------------------------------------------------------------------ the end, drops and failures */

  #onDropped(end: ConnectionEnd, cause: RtTranslateError): RtTranslateError | 'finished' {
    this.#ready = false;
    clearInterval(this.#keepAliveTimer);
    const serverCause = this.#serverError.takeAsCause(end.kind === 'closed' ? end.code : undefined);
    if (this.#closeSent() && !serverCause && end.kind === 'closed' && (end.code === 1000 || end.code === 1005)) {
      // The service flushed its last results and closed, as CloseStream asks: complete.
      this.#completeClose();
      return 'finished';
    }
    return serverCause ?? cause;
  }

  /** A session was lost: what its final results did not cover is sent again, on a new timeline. */
  #onReconnecting(attempt: number, delayMs: number, cause: RtTranslateError, sessionLost: boolean): void {
    this.#setCloseSent(false);
    if (sessionLost) {
      const from = this.#frontier - (this.#frontier % this.#o.frameBytes);
      this.#replayedBytes += this.#outbox.rewind(from);
      this.#sessionBase = this.#outbox.sent;
    }
    this.#outlet.publish({ type: 'reconnecting', attempt, delayMs, cause });
    this.#outbox.release();
  }

  #completeClose(): void {
    this.#life.close((ending) => {
      clearInterval(this.#keepAliveTimer);
      this.#outlet.publish({ type: 'ended', ...ending });
      this.#outlet.end();
    });
  }

  #fail(error: RtTranslateError): void {
    if (this.#life.over) return;
    clearInterval(this.#keepAliveTimer);
    this.#serverError.settle();
    this.#life.fail(error);
  }

  override destroy(error?: Error): this {
    super.destroy(error);
    this.#life.destroying(error);
    return this;
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#link.shutdown();
    clearInterval(this.#keepAliveTimer);
    this.#life.destroyed(error);
    this.#outbox.abandon(error);
    this.#serverError.discard();
    this.#outlet.end(error ?? undefined);
    void this.#link.whenClosed().then(() => callback(error));
  }

  [inspect.custom](): string {
    const { url, encoding, sampleRate } = this.#o;
    return `LiveTranscriptionStream { url: '${url.origin}${url.pathname}', encoding: '${encoding}', sampleRate: ${sampleRate}, state: '${this.#link.status}' }`;
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

export interface LiveTranscriptionStream {
  on<E extends keyof LiveTranscriptionEvents>(event: E, listener: (...args: LiveTranscriptionEvents[E]) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
  once<E extends keyof LiveTranscriptionEvents>(event: E, listener: (...args: LiveTranscriptionEvents[E]) => void): this;
  once(event: string | symbol, listener: (...args: any[]) => void): this;
  off<E extends keyof LiveTranscriptionEvents>(event: E, listener: (...args: LiveTranscriptionEvents[E]) => void): this;
  off(event: string | symbol, listener: (...args: any[]) => void): this;
  emit(event: string | symbol, ...args: any[]): boolean;
}
