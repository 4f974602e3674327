/**
 * `RealtimeTranslateStream`: a Duplex over the realtime speech-to-speech WebSocket. Writable
 * side: PCM16 LE mono 24 kHz, any chunking. Readable side: the translated PCM16 LE mono 24 kHz.
 * Transcripts, text, timings and reconnects are typed events, also yielded by `events()`.
 *
 * The stream keeps the stream callbacks and the wiring; the parts live in their own modules:
 * options (`realtime-options.ts`), the socket with its liveness (`connection.ts`), what a failure
 * means (`server-errors.ts`), the audio kept for replay (`replay-buffer.ts`), what the service
 * owes (`speech-ledger.ts`), and the two policies (`reconnect-policy.ts`, `ending-policy.ts`).
 * Its state is one union, changed only by `#setState`, which clears the old state's timers and
 * closes a connection the new state does not keep. The README ("Realtime") explains the rules.
 */
import { Duplex } from 'node:stream';
import { inspect } from 'node:util';
import {
  AbortError,
  ConnectionError,
  ProtocolError,
  RtTranslateError,
  TimeoutError,
  ValidationError,
  describeCause,
} from '../errors.js';
import {
  REALTIME_BYTES_PER_FRAME,
  REALTIME_SAMPLE_RATE,
  decodeBinaryAudio,
  decodeServerEvent,
  encodeAudioAppend,
  type ServerEvent,
  type SessionInfo,
} from './codec.js';
import { RealtimeConnection, type ConnectionEnd } from './connection.js';
import { decideEnding } from './ending-policy.js';
import { EventFanout } from './event-queue.js';
import { redactObject, type EndedInfo, type RealtimeEvent, type ReconnectedInfo, type ReconnectingInfo } from './realtime-events.js';
import { resolveRealtimeOptions, type RealtimeTranslateOptions, type ResolvedRealtimeOptions } from './realtime-options.js';
import { reconnectDelay } from './reconnect-policy.js';
import { ReplayBuffer } from './replay-buffer.js';
import { classifyServerError, errorForConnectionEnd } from './server-errors.js';
import { LatencySeries, SpeechLedger, type LatencySummary, type ResponseTiming } from './speech-ledger.js';

export type { RealtimeTranslateOptions, ReconnectOptions } from './realtime-options.js';

export type SessionStartedInfo = SessionInfo & { id: string };

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
export interface RealtimeTranslateEvents {
  'session.starting': [];
  'session.created': [info: SessionStartedInfo];
  'session.updated': [info: SessionInfo];
  'transcript.delta': [delta: string];
  'transcript.done': [text: string];
  'text.delta': [delta: string];
  'text.done': [text: string];
  'audio.delta': [audio: Buffer];
  'audio.done': [];
  'server.error': [message: string, code: number | string | undefined];
  unknown: [event: Extract<ServerEvent, { type: 'unknown' }>];
  reconnecting: [info: ReconnectingInfo];
  reconnected: [info: ReconnectedInfo];
  response: [timing: ResponseTiming];
  warning: [warning: RtTranslateError];
  ended: [info: EndedInfo];
  /** Every event, as `events()` yields it. */
  event: [event: RealtimeEvent];
}

type Timer = NodeJS.Timeout;

/** Where the session is. Each state owns its timers; `#setState` clears them. */
type State =
  | { status: 'connecting'; connection: RealtimeConnection; attempt: number; readyTimer: Timer; sawStarting: boolean }
  | { status: 'active'; connection: RealtimeConnection; endingTimer: Timer | undefined; settleTimer: Timer | undefined }
  | { status: 'reconnecting'; attempt: number; timer: Timer }
  | { status: 'closing'; connection: RealtimeConnection }
  | { status: 'closed' };

type PauseReason = 'reader' | 'events';

/** Bytes of PCM16 mono 24 kHz per millisecond. */
const BYTES_PER_MS = (REALTIME_SAMPLE_RATE * REALTIME_BYTES_PER_FRAME) / 1000;
/** Input replayed before the first unanswered speech, so the service hears it begin. */
const REPLAY_PREROLL_MS = 300;
/** A server `error` followed by a close within this time is the cause of the close (else a warning). */
const ERROR_CLOSE_GRACE_MS = 250;
/** Largest message accepted from the service. */
const MAX_PAYLOAD_BYTES = 16 * 1024 * 1024;

const ms = (bytes: number): number => Math.round(bytes / BYTES_PER_MS);

/** What an event holds in memory while queued for an `events()` consumer, in bytes. */
function eventBytes(event: RealtimeEvent): number {
  return event.type === 'audio.delta' ? event.audio.length * 2 : 0;
}

export class RealtimeTranslateStream extends Duplex {
  readonly #o: ResolvedRealtimeOptions;
  readonly #fanout: EventFanout<RealtimeEvent>;
  readonly #ledger: SpeechLedger;
  readonly #replay = new ReplayBuffer();
  readonly #pauses = new Set<PauseReason>();
  readonly #latency = { transcriptMs: new LatencySeries(), firstTextMs: new LatencySeries(), firstAudioMs: new LatencySeries(), doneMs: new LatencySeries() };
  readonly #stats = { inputBytes: 0, paddingBytes: 0, bytesSent: 0, bytesReplayed: 0, bytesReceived: 0, responses: 0, reconnects: 0, outageMs: 0, longestOutageMs: 0 };
  #state: State = { status: 'closed' };
  #constructCallback: ((error?: Error | null) => void) | undefined;
  #finalCallback: ((error?: Error | null) => void) | undefined;
  /** The write waiting for room (in the socket, or in the replay bound during an outage). */
  #heldWrite: ((error?: Error | null) => void) | undefined;
  #session: SessionStartedInfo | undefined;
  #inputCarry: Buffer | undefined;
  #outputCarry: number | undefined;
  #textSoFar = '';
  #inputEnded = false;
  #allSentAt: number | undefined;
  #lastActivityAt = 0;
  /**
   * The outage being recovered from: kept after a reconnect until the new session proves itself
   * (a response, or longer up than the longest back-off), so a service that accepts sessions and
   * drops them at once is still bounded by the reconnect policy.
   */
  #outage: { startedAt: number; attempts: number; gapStartedAt: number; replayedBytes: number; notReplayedBytes: number } | undefined;
  #pendingWarning: { error: RtTranslateError; timer: Timer } | undefined;
  /** A server error that was the last event: if the socket closes now, it is the cause. */
  #lastErrorIfLast: { message: string; code: number | string | undefined; error: RtTranslateError } | undefined;
  /** The newest connection, so teardown can wait for its socket to close. */
  #lastConnection: RealtimeConnection | undefined;
  #fatal: RtTranslateError | undefined;
  #ending: EndedInfo | undefined;
  #onAbort: (() => void) | undefined;

  constructor(options: RealtimeTranslateOptions) {
    const o = resolveRealtimeOptions(options);
    super({
      readableHighWaterMark: o.readableHighWaterMark,
      writableHighWaterMark: o.writableHighWaterMark,
      allowHalfOpen: true,
      decodeStrings: true,
      objectMode: false,
    });
    this.#o = o;
    this.#ledger = new SpeechLedger({ thresholdDbfs: o.speechThresholdDbfs, silenceMs: o.speechSilenceMs });
    this.#fanout = new EventFanout<RealtimeEvent>({ count: o.maxQueuedEvents, bytes: o.maxQueuedEventBytes, weigh: eventBytes }, (full) =>
      this.#setPause('events', full),
    );
    const signal = o.signal;
    if (signal) {
      this.#onAbort = () => {
        // A session that has already delivered everything is complete, not aborted.
        if (this.#ending) return;
        this.destroy(new AbortError('The realtime session was aborted.', { cause: signal.reason }));
      };
      signal.addEventListener('abort', this.#onAbort, { once: true });
    }
  }

  /** The current session's info (with `id`) once `session.created` has arrived; a reconnect replaces it. */
  get session(): SessionStartedInfo | undefined {
    return this.#session;
  }

  /** The current session's durable identifier, once known. */
  get sessionId(): string | undefined {
    return this.#session?.id;
  }

  /** `connecting`, `active`, `reconnecting`, `closing` or `closed`. */
  get state(): State['status'] {
    return this.#state.status;
  }

  get stats(): RealtimeStats {
    const connection = 'connection' in this.#state ? this.#state.connection : undefined;
    const buffered = connection?.bufferedAmount ?? 0;
    const l = this.#latency;
    return {
      ...this.#stats,
      bytesQueued: this.#replay.unsent + buffered,
      replayBytes: this.#replay.retained,
      socketBufferedAmount: buffered,
      paused: this.#pauses.size > 0,
      latency: { transcriptMs: l.transcriptMs.summary(), firstTextMs: l.firstTextMs.summary(), firstAudioMs: l.firstAudioMs.summary(), doneMs: l.doneMs.summary() },
      ending: this.#ending,
    };
  }

  /**
   * Every event, in order, for `for await`: the service's events and the stream's own. Ends when
   * the stream closes; throws its error. An iterator that falls behind pauses the socket. While
   * nothing reads the stream's audio, the audio reaches an iterator only (no buffer grows).
   */
  events(): AsyncIterableIterator<RealtimeEvent> {
    return this.#fanout.subscribe();
  }

  /* ------------------------------------------------------------------ state */

  #setState(next: State): void {
    const previous = this.#state;
    if (previous.status === 'connecting') clearTimeout(previous.readyTimer);
    if (previous.status === 'active') {
      clearTimeout(previous.endingTimer);
      clearTimeout(previous.settleTimer);
    }
    if (previous.status === 'reconnecting') clearTimeout(previous.timer);
    const kept = 'connection' in next ? next.connection : undefined;
    if ('connection' in previous && previous.connection !== kept) previous.connection.close(1000, '', 1000);
    this.#flushPendingWarning();
    this.#state = next;
  }

  /** The current connection, when `connection` is it (stale connections report nothing). */
  #current(connection: RealtimeConnection): boolean {
    return 'connection' in this.#state && this.#state.connection === connection;
  }

  override _construct(callback: (error?: Error | null) => void): void {
    if (this.#o.signal?.aborted) {
      callback(new AbortError('The realtime session was aborted before it started.', { cause: this.#o.signal.reason }));
      return;
    }
    this.#constructCallback = callback;
    this.#connect(0);
  }

  /** Opens a connection: attempt 0 is the first session, later ones reconnect. */
  #connect(attempt: number): void {
    const o = this.#o;
    let connection: RealtimeConnection;
    try {
      connection = new RealtimeConnection(
        { url: o.url, headers: o.headers, handshakeTimeoutMs: o.readyTimeoutMs, maxPayload: MAX_PAYLOAD_BYTES, pingIntervalMs: o.pingIntervalMs, livenessTimeoutMs: o.livenessTimeoutMs },
        {
          open: () => connection.send(o.sessionUpdate),
          message: (data, isBinary) => this.#onMessage(connection, data, isBinary),
          end: (end) => this.#onConnectionEnd(connection, end),
        },
      );
    } catch (error) {
      this.#fail(new ConnectionError(`Cannot open the realtime connection: ${describeCause(error, o.apiKey)}`));
      return;
    }
    for (const reason of this.#pauses) connection.pause(reason);
    this.#lastConnection = connection;
    // A reconnect attempt may not outlast the outage budget.
    const budget = this.#outage && o.reconnect ? o.reconnect.giveUpAfterMs - (Date.now() - this.#outage.startedAt) : Infinity;
    const readyMs = Math.max(1, Math.min(o.readyTimeoutMs, budget));
    const readyTimer = setTimeout(() => this.#onReadyTimeout(connection, readyMs), readyMs);
    this.#setState({ status: 'connecting', connection, attempt, readyTimer, sawStarting: false });
  }

  #onReadyTimeout(connection: RealtimeConnection, waitedMs: number): void {
    const state = this.#state;
    if (state.status !== 'connecting' || state.connection !== connection) return;
    const hint = state.sawStarting ? ' The service sent session.starting: the model is still booting; raise readyTimeoutMs.' : '';
    const error = new TimeoutError(`No session.created within ${waitedMs} ms.${hint}`, waitedMs);
    if (state.attempt === 0) this.#fail(error);
    else this.#retry(error, state.attempt + 1);
  }

  #onSessionCreated(info: SessionInfo): void {
    const state = this.#state;
    if (state.status !== 'connecting') return;
    this.#session = { ...info, id: info.id ?? '' };
    const outage = this.#outage;
    const settleMs = this.#o.reconnect?.maxDelayMs ?? 0;
    const settleTimer = outage ? setTimeout(() => (this.#outage = undefined), settleMs) : undefined;
    this.#setState({ status: 'active', connection: state.connection, endingTimer: undefined, settleTimer });
    if (outage) {
      outage.attempts = state.attempt;
      const outageMs = Date.now() - outage.gapStartedAt;
      this.#stats.reconnects += 1;
      this.#stats.outageMs += outageMs;
      this.#stats.longestOutageMs = Math.max(this.#stats.longestOutageMs, outageMs);
      this.#stats.bytesReplayed += outage.replayedBytes;
      this.#publish({
        type: 'reconnected',
        sessionId: this.#session.id,
        attempt: state.attempt,
        replayedMs: ms(outage.replayedBytes),
        notReplayedMs: ms(outage.notReplayedBytes),
        outageMs,
      });
    }
    const callback = this.#constructCallback;
    this.#constructCallback = undefined;
    callback?.(null);
    this.#pump();
    this.#releaseWrite();
    this.#evaluateEnding();
  }

  /* ------------------------------------------------------------------ incoming */

  #onMessage(connection: RealtimeConnection, data: Buffer, isBinary: boolean): void {
    if (!this.#current(connection) || this.#fatal) return;
    let event: ServerEvent;
    if (isBinary) {
      event = decodeBinaryAudio(data);
    } else {
      const key = this.#o.apiKey;
      const text = data.toString('utf8');
      try {
        event = decodeServerEvent(text, text.includes(key) ? (raw) => redactObject(raw, key, true) : undefined);
      } catch (error) {
        this.#warn(error as RtTranslateError);
        return;
      }
    }
    this.#lastErrorIfLast = undefined;
    this.#flushPendingWarning();
    this.#handle(event);
  }

  #handle(event: ServerEvent): void {
    const now = Date.now();
    const sent = this.#replay.sent;
    switch (event.type) {
      case 'session.starting':
        if (this.#state.status === 'connecting') this.#state.sawStarting = true;
        this.#publish(event);
        return;
      case 'session.created':
        this.#publish(event);
        this.#onSessionCreated(event.session);
        return;
      case 'transcript.done':
        this.#ledger.responseActivity('transcript', now, sent);
        break;
      case 'text.delta':
        this.#ledger.responseActivity('text', now, sent);
        this.#textSoFar += event.delta;
        break;
      case 'text.done':
        event.text ??= this.#textSoFar;
        this.#textSoFar = '';
        break;
      case 'audio.delta': {
        const audio = this.#realign(event.audio);
        this.#ledger.responseActivity('audio', now, sent, audio.length);
        this.#stats.bytesReceived += audio.length;
        this.#publish({ ...event, audio });
        this.#deliverAudio(audio);
        this.#activity(now);
        return;
      }
      case 'audio.done':
        if (this.#outputCarry !== undefined) {
          this.#outputCarry = undefined;
          this.#warn(new ProtocolError('The service sent an odd number of audio bytes for one response; the last byte was dropped.'));
        }
        break;
      case 'server.error':
        this.#publish(event);
        this.#onServerError(event.message, event.code);
        return;
      default:
        break;
    }
    this.#publish(event);
    if (event.type === 'audio.done' || (event.type === 'text.done' && !this.#o.modalities.includes('audio'))) {
      this.#completeResponse(now);
    }
    if (event.type === 'transcript.done' || event.type === 'text.delta' || event.type === 'text.done' || event.type === 'audio.done') {
      this.#activity(now);
    }
  }

  /** Emits an event under its one name, and queues it for `events()` iterators. */
  #publish(event: RealtimeEvent): void {
    this.emit('event', event);
    this.#fanout.push(event);
    switch (event.type) {
      case 'session.starting':
      case 'audio.done':
        this.emit(event.type);
        return;
      case 'session.created':
        this.emit(event.type, { ...event.session, id: event.session.id ?? '' });
        return;
      case 'session.updated':
        this.emit(event.type, event.session);
        return;
      case 'transcript.delta':
      case 'text.delta':
        this.emit(event.type, event.delta);
        return;
      case 'transcript.done':
        this.emit(event.type, event.text);
        return;
      case 'text.done':
        this.emit(event.type, event.text ?? '');
        return;
      case 'audio.delta':
        this.emit(event.type, event.audio);
        return;
      case 'server.error':
        this.emit(event.type, event.message, event.code);
        return;
      case 'response':
        this.emit(event.type, event.timing);
        return;
      case 'warning':
        this.emit(event.type, event.warning);
        return;
      case 'unknown':
        this.emit(event.type, event);
        return;
      default: {
        const { type, ...info } = event;
        this.emit(type, info);
      }
    }
  }

  /** Carries an odd byte to the next audio, so the output is whole samples across deltas and frames. */
  #realign(audio: Buffer): Buffer {
    let data = audio;
    if (this.#outputCarry !== undefined) {
      data = Buffer.allocUnsafe(audio.length + 1);
      data[0] = this.#outputCarry;
      audio.copy(data, 1);
      this.#outputCarry = undefined;
    }
    if (data.length % 2 === 1) {
      this.#outputCarry = data[data.length - 1];
      data = data.subarray(0, data.length - 1);
    }
    return data;
  }

  #deliverAudio(audio: Buffer): void {
    if (audio.length === 0 || this.readableEnded || this.destroyed) return;
    // Nothing reads the audio but an events() iterator does: it gets the audio there.
    if (this.readableFlowing === null && this.#fanout.subscribers > 0) return;
    if (!this.push(audio)) this.#setPause('reader', true);
  }

  #completeResponse(now: number): void {
    const timing = this.#ledger.responseCompleted(now, this.#o.modalities.includes('audio'));
    if (!timing) return;
    this.#stats.responses += 1;
    for (const key of ['transcriptMs', 'firstTextMs', 'firstAudioMs', 'doneMs'] as const) this.#latency[key].add(timing[key]);
    this.#publish({ type: 'response', timing });
    this.#outage = undefined;
    this.#trimReplay();
  }

  #onServerError(message: string, code: number | string | undefined): void {
    const error = classifyServerError(message, code, this.#o.apiKey);
    const state = this.#state;
    if (state.status === 'connecting' && (state.attempt === 0 || !error.retryable)) {
      // Refused before the session started (a bad voice, the key): no new session can cure it.
      this.#fail(error);
      return;
    }
    this.#lastErrorIfLast = { message, code, error };
    this.#pendingWarning = { error, timer: setTimeout(() => this.#flushPendingWarning(), ERROR_CLOSE_GRACE_MS) };
  }

  #flushPendingWarning(): void {
    const pending = this.#pendingWarning;
    if (!pending) return;
    this.#pendingWarning = undefined;
    clearTimeout(pending.timer);
    this.#warn(pending.error);
  }

  #warn(warning: RtTranslateError): void {
    this.#publish({ type: 'warning', warning });
  }

  /** Pauses the socket while the reader or an events() consumer is behind; resumes otherwise. */
  #setPause(reason: PauseReason, on: boolean): void {
    if (on === this.#pauses.has(reason)) return;
    if (on) this.#pauses.add(reason);
    else this.#pauses.delete(reason);
    const state = this.#state;
    if (!('connection' in state)) return;
    if (on) state.connection.pause(reason);
    else {
      state.connection.resume(reason);
      // Our own pause is never the service's quiet.
      if (this.#pauses.size === 0) this.#activity(Date.now());
    }
  }

  override _read(): void {
    if (this.#fatal) {
      this.#failWhenDrained();
      return;
    }
    this.#setPause('reader', false);
  }

  /* ------------------------------------------------------------------ outgoing */

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    if (this.#fatal || this.#state.status === 'closed' || this.#state.status === 'closing') {
      // The error reaches the caller through destroy(), which settles this held write.
      this.#heldWrite = callback;
      return;
    }
    let data = chunk;
    if (this.#inputCarry) {
      data = Buffer.concat([this.#inputCarry, chunk]);
      this.#inputCarry = undefined;
    }
    const aligned = data.length - (data.length % REALTIME_BYTES_PER_FRAME);
    if (aligned < data.length) this.#inputCarry = Buffer.from(data.subarray(aligned));
    this.#accept(data.subarray(0, aligned));
    this.#stats.inputBytes += aligned;
    this.#heldWrite = callback;
    this.#releaseWrite();
  }

  #accept(pcm: Buffer): void {
    if (pcm.length === 0) return;
    this.#ledger.accept(pcm);
    this.#replay.push(pcm);
    this.#allSentAt = undefined;
    this.#pump();
  }

  /** Calls back the held write once there is room: in the socket when connected, else in the replay bound. */
  #releaseWrite(): void {
    const callback = this.#heldWrite;
    if (!callback) return;
    const state = this.#state;
    const o = this.#o;
    // Connected: room in the socket. Reconnecting: room in the replay bound (what is kept to send again).
    const room =
      state.status === 'active'
        ? this.#replay.unsent + state.connection.bufferedAmount <= o.maxSocketBufferBytes
        : (state.status === 'connecting' || state.status === 'reconnecting') && this.#replay.retained <= (o.reconnect?.maxReplayBytes ?? 0);
    if (!room) return;
    this.#heldWrite = undefined;
    callback();
  }

  /** Hands queued audio to the socket, one append at a time, while its buffer is under the bound. */
  #pump(): void {
    const state = this.#state;
    if (state.status !== 'active') return;
    const { connection } = state;
    const o = this.#o;
    while (connection.bufferedAmount <= o.maxSocketBufferBytes) {
      const piece = this.#replay.peek(o.maxAppendBytes);
      if (!piece) break;
      const length = piece.length;
      const end = this.#replay.sent + length;
      connection.send(encodeAudioAppend(piece), (error) => {
        if (error) return; // the connection is going down: its end reports the cause
        this.#stats.bytesSent += length;
        if (!this.#current(connection)) return;
        this.#pump();
        this.#releaseWrite();
        this.#evaluateEnding();
      });
      this.#replay.advance(length);
      this.#ledger.recordSent(end, Date.now());
    }
    this.#trimReplay();
  }

  /** Forgets input nothing can need again: answered, or beyond the replay bound (counted). */
  #trimReplay(): void {
    const replay = this.#replay;
    const bound = this.#o.reconnect?.maxReplayBytes;
    if (bound === undefined) {
      replay.release(replay.sent);
      return;
    }
    replay.release(this.#ledger.replayStart(replay.sent, REPLAY_PREROLL_MS));
    if (replay.sent - replay.start > bound) replay.release(replay.sent - bound);
  }

  override _final(callback: (error?: Error | null) => void): void {
    if (this.#fatal) {
      // The stream is destroyed with the error once the reader has drained what arrived.
      this.#failWhenDrained();
      return;
    }
    if (this.#inputCarry) {
      this.#warn(new ValidationError('input', 'whole PCM16 samples (an even number of bytes)', 'a trailing odd byte, dropped'));
      this.#inputCarry = undefined;
    }
    this.#inputEnded = true;
    this.#finalCallback = callback;
    const padding = Buffer.alloc(this.#o.endPaddingMs * BYTES_PER_MS);
    this.#stats.paddingBytes += padding.length;
    this.#accept(padding);
    this.#evaluateEnding();
  }

  /* ------------------------------------------------------------------ ending */

  #activity(now: number): void {
    this.#lastActivityAt = now;
    this.#evaluateEnding();
  }

  /**
   * After end(): asks the ending policy, and acts or re-arms its one timer. `reached` is the
   * deadline a firing timer was set for: a timer that fired means its time has passed.
   */
  #evaluateEnding(reached = 0): void {
    const state = this.#state;
    if (!this.#inputEnded || state.status !== 'active') return;
    clearTimeout(state.endingTimer);
    state.endingTimer = undefined;
    const now = Math.max(Date.now(), reached);
    const allSent = this.#replay.unsent === 0 && state.connection.bufferedAmount === 0;
    if (allSent) this.#allSentAt ??= now;
    const decision = decideEnding({
      now,
      allSent,
      connected: true,
      paused: this.#pauses.size > 0,
      responseOpen: this.#ledger.responseOpen,
      speechUnanswered: this.#ledger.unansweredSegments > 0,
      lastActivityAt: Math.max(this.#lastActivityAt, this.#allSentAt ?? 0),
      quietPeriodMs: this.#o.quietPeriodMs,
      responseStallTimeoutMs: this.#o.responseStallTimeoutMs,
    });
    switch (decision.kind) {
      case 'waiting':
        return;
      case 'wait':
        state.endingTimer = setTimeout(() => this.#evaluateEnding(decision.until), decision.until - now);
        return;
      case 'finish':
        this.#finishSession(undefined);
        return;
      case 'give-up': {
        const waited = this.#o.responseStallTimeoutMs;
        const missing = this.#ledger.unansweredSegments;
        this.#warn(
          new TimeoutError(
            decision.reason === 'response-stalled'
              ? `The last response sent nothing for ${waited} ms after end(); closing without the rest of it.`
              : `No answer to the last ${missing === 1 ? 'segment' : `${missing} segments`} of speech within ${waited} ms after end(); closing without it.`,
            waited,
          ),
        );
        this.#finishSession(decision.reason);
      }
    }
  }

  /** The session is done (`reason` says what was left owed, if anything): close it, then end. */
  #finishSession(reason: EndedInfo['reason']): void {
    const state = this.#state;
    if (state.status !== 'active') return;
    this.#ending = { complete: reason === undefined, reason, unansweredSpeechMs: ms(this.#ledger.unansweredSpeechBytes) };
    this.#setState({ status: 'closing', connection: state.connection });
    state.connection.close(1000, 'done');
  }

  #completeClose(): void {
    this.#setState({ status: 'closed' });
    const ending = this.#ending ?? { complete: true, reason: undefined, unansweredSpeechMs: 0 };
    this.#ending = ending;
    this.#publish({ type: 'ended', ...ending });
    this.#fanout.end();
    if (!this.readableEnded) this.push(null);
    // Nothing was left for a reader (events-only, or text only): let the readable side end now.
    if (this.readableFlowing === null && this.readableLength === 0) this.resume();
    const callback = this.#finalCallback;
    this.#finalCallback = undefined;
    callback?.();
  }

  /* ------------------------------------------------------------------ drops and reconnects */

  #onConnectionEnd(connection: RealtimeConnection, end: ConnectionEnd): void {
    const state = this.#state;
    if (!this.#current(connection)) return;
    if (state.status === 'closing') {
      this.#completeClose();
      return;
    }
    const started = state.status === 'active';
    const lastError = this.#lastErrorIfLast;
    this.#lastErrorIfLast = undefined;
    if (lastError && this.#pendingWarning?.error === lastError.error) {
      clearTimeout(this.#pendingWarning.timer);
      this.#pendingWarning = undefined;
    }
    // A server error right before the close is its cause; the close code says whether to retry.
    const serverCause = lastError && classifyServerError(lastError.message, lastError.code, this.#o.apiKey, end.kind === 'closed' ? end.code : undefined);
    if (state.status === 'active' && this.#inputEnded && !serverCause && end.kind === 'closed' && (end.code === 1000 || end.code === 1005)) {
      // The service ended the session after our end(): complete, unless it still owed something.
      const owed = this.#ledger.responseOpen || this.#ledger.unansweredSegments > 0;
      if (owed) {
        this.#warn(new ConnectionError('The realtime service closed the session after end() while an answer was still owed.', { closeCode: end.code, retryable: false }));
      }
      this.#ending = { complete: !owed, reason: owed ? 'closed-by-service' : undefined, unansweredSpeechMs: ms(this.#ledger.unansweredSpeechBytes) };
      this.#completeClose();
      return;
    }
    const cause = serverCause ?? errorForConnectionEnd(end, this.#o.apiKey, started);
    const retryAfterMs = end.kind === 'refused' ? end.retryAfterMs : undefined;
    if (state.status === 'connecting' && state.attempt > 0) this.#retry(cause, state.attempt + 1, retryAfterMs);
    else if (state.status === 'active' && this.#o.reconnect && cause.retryable) this.#startOutage(cause);
    else this.#fail(started ? this.#withUnprocessed(cause, '') : cause);
  }

  /** The session dropped: keep what must be sent again, then reconnect. */
  #startOutage(cause: RtTranslateError): void {
    const wanted = this.#ledger.replayStart(this.#replay.sent, REPLAY_PREROLL_MS);
    const notReplayedBytes = Math.max(0, Math.min(this.#replay.start, this.#replay.sent) - wanted);
    this.#ledger.responseAbandoned();
    this.#outputCarry = undefined;
    this.#textSoFar = '';
    const replayedBytes = this.#replay.rewind(wanted);
    this.#allSentAt = undefined;
    const now = Date.now();
    // A drop soon after a reconnect continues the same outage: its attempts and time still count.
    const previous = this.#outage;
    this.#outage = { startedAt: previous?.startedAt ?? now, attempts: previous?.attempts ?? 0, gapStartedAt: now, replayedBytes, notReplayedBytes };
    this.#retry(cause, this.#outage.attempts + 1);
  }

  /** Waits before attempt `attempt`, or gives up. */
  #retry(cause: RtTranslateError, attempt: number, retryAfterMs?: number): void {
    const policy = this.#o.reconnect;
    const outage = this.#outage;
    if (!policy || !outage || !cause.retryable) {
      this.#fail(this.#withUnprocessed(cause, ' while reconnecting'));
      return;
    }
    const elapsed = Date.now() - outage.startedAt;
    const asked = retryAfterMs ?? (cause as { retryAfterMs?: number }).retryAfterMs;
    const decision = reconnectDelay(policy, attempt, elapsed, asked);
    if (!decision.retry) {
      const tried = attempt - 1;
      this.#fail(
        this.#withUnprocessed(
          new ConnectionError(
            `Gave up reconnecting after ${tried} attempt${tried === 1 ? '' : 's'} in ${Math.round(elapsed / 1000)} s ` +
              `(${decision.reason === 'attempts' ? 'reconnect.maxAttempts' : 'reconnect.giveUpAfterMs'}): ${cause.message}`,
            { cause, status: cause.status, closeCode: cause.closeCode },
          ),
          '',
        ),
      );
      return;
    }
    this.#setState({ status: 'reconnecting', attempt, timer: setTimeout(() => this.#connect(attempt), decision.delayMs) });
    this.#publish({ type: 'reconnecting', attempt, delayMs: decision.delayMs, cause });
    this.#releaseWrite();
  }

  /** Adds to `error` how much accepted input may not have been processed. */
  #withUnprocessed(error: RtTranslateError, context: string): RtTranslateError {
    const unprocessed = ms(this.#replay.end - this.#ledger.frontier);
    if (this.#session && unprocessed > 0) {
      error.unprocessedInputMs = unprocessed;
      error.message = `${error.message.replace(/\.?$/, '')}${context}. Up to ${(unprocessed / 1000).toFixed(1)} s of input audio may not have been processed.`;
    }
    return error;
  }

  /* ------------------------------------------------------------------ failure and teardown */

  /**
   * A fatal error. Before the first session it fails construction; afterwards the connection is
   * closed and the stream is destroyed once the reader has taken every byte already received.
   */
  #fail(error: RtTranslateError): void {
    if (this.#fatal || this.destroyed) return;
    this.#fatal = error;
    if (this.#pendingWarning?.error === error) {
      clearTimeout(this.#pendingWarning.timer);
      this.#pendingWarning = undefined;
    }
    this.#setState({ status: 'closed' });
    if (this.#constructCallback) {
      const callback = this.#constructCallback;
      this.#constructCallback = undefined;
      callback(error);
      return;
    }
    const final = this.#finalCallback;
    this.#finalCallback = undefined;
    if (final && this.readableLength === 0) {
      final(error);
      return;
    }
    this.#failWhenDrained();
  }

  #failWhenDrained(): void {
    const error = this.#fatal;
    if (!error || this.destroyed) return;
    if (this.readableLength === 0 || this.readableFlowing === null || this.readableEnded) {
      this.destroy(error);
      return;
    }
    // Let the next read() call _read again, where this check repeats.
    this.push(Buffer.alloc(0));
  }

  override destroy(error?: Error): this {
    super.destroy(error);
    // Node defers _destroy until construction ends: end a pending connection now.
    if (this.#constructCallback) {
      const callback = this.#constructCallback;
      this.#constructCallback = undefined;
      this.#setState({ status: 'closed' });
      callback(error);
    }
    return this;
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    const connection = this.#lastConnection;
    connection?.terminate();
    this.#setState({ status: 'closed' });
    const held = this.#heldWrite;
    this.#heldWrite = undefined;
    held?.(error);
    if (this.#pendingWarning) clearTimeout(this.#pendingWarning.timer);
    this.#pendingWarning = undefined;
    if (this.#o.signal && this.#onAbort) this.#o.signal.removeEventListener('abort', this.#onAbort);
    this.#fanout.end(error ?? undefined);
    if (!connection) callback(error);
    else void connection.closed.then(() => callback(error));
  }

  [inspect.custom](): string {
    const { url, session } = this.#o;
    return `RealtimeTranslateStream { url: '${url.origin}${url.pathname}', from: '${session.source_language}', ` +
      `to: '${session.target_language}', state: '${this.#state.status}', sessionId: ${this.sessionId ? `'${this.sessionId}'` : 'undefined'} }`;
  }
}

// Typed events: `on('transcript.done', (text) => ...)` and friends.
export interface RealtimeTranslateStream {
  on<E extends keyof RealtimeTranslateEvents>(event: E, listener: (...args: RealtimeTranslateEvents[E]) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
  once<E extends keyof RealtimeTranslateEvents>(event: E, listener: (...args: RealtimeTranslateEvents[E]) => void): this;
  once(event: string | symbol, listener: (...args: any[]) => void): this;
  off<E extends keyof RealtimeTranslateEvents>(event: E, listener: (...args: RealtimeTranslateEvents[E]) => void): this;
  off(event: string | symbol, listener: (...args: any[]) => void): this;
  emit<E extends keyof RealtimeTranslateEvents>(event: E, ...args: RealtimeTranslateEvents[E]): boolean;
  emit(event: string | symbol, ...args: any[]): boolean;
}
