/**
 * `RealtimeTranslateStream`: a Duplex over the realtime speech-to-speech WebSocket. Writable
 * side: PCM16 LE mono 24 kHz, any chunking. Readable side: the translated PCM16 LE mono 24 kHz.
 * Transcripts, text, timings and reconnects are typed events, also yielded by `events()`.
 *
 * The stream keeps the stream callbacks and the wiring; the parts live in their own modules:
 * options (`realtime-options.ts`); its events and stats (`realtime-events.ts`) and their way to
 * the caller (`event-outlet.ts`); what the service's messages mean (`response-assembler.ts`);
 * the connections and reconnects (`session-link.ts` over `connection.ts`); what a failure means
 * (`server-errors.ts`); sending, keeping and replaying input (`translation-input.ts`, over
 * `audio-outbox.ts`, `replay-buffer.ts` and `outage-replay.ts`, shared with the browser relay);
 * what the service owes (`speech-ledger.ts`); the
 * ending (`ending-controller.ts` over the pure `ending-policy.ts`); the stream's own state with
 * its pending callbacks (`duplex-lifecycle.ts`). The outlet and the lifecycle are shared with
 * live transcription. The README explains the rules.
 */
import { Duplex } from 'node:stream';
import { inspect } from 'node:util';
import { FrameCutter } from '../audio/frames.js';
import { ValidationError, type RtTranslateError } from '../errors.js';
import { REALTIME_BYTES_PER_FRAME, type SessionInfo } from './codec.js';
import type { ConnectionEnd } from './connection.js';
import { DuplexLifecycle } from './duplex-lifecycle.js';
import { EndingController, type EndingWait } from './ending-controller.js';
import { EventOutlet } from './event-outlet.js';
import { eventWeight, listenerArgs, type RealtimeEvent, type RealtimeStats, type RealtimeTranslateEvents, type SessionStartedInfo } from './realtime-events.js';
import { MAX_SERVER_MESSAGE_BYTES, linkOptions, resolveRealtimeOptions, type RealtimeTranslateOptions, type ResolvedRealtimeOptions } from './realtime-options.js';
import type { AudioOutbox } from './audio-outbox.js';
import { BYTES_PER_MS, TranslationInput } from './translation-input.js';
import type { OutageReplay } from './outage-replay.js';
import { ResponseAssembler } from './response-assembler.js';
import { ReceiptFences } from './receipt-fences.js';
import type { InputFence } from './ending-policy.js';
import { PendingServerError, sessionReadyTimeout } from './server-errors.js';
import { SessionLink } from './session-link.js';
import { SpeechLedger } from './speech-ledger.js';

export type { RealtimeTranslateOptions, ReconnectOptions } from './realtime-options.js';

export type { RealtimeStats, RealtimeTranslateEvents, SessionStartedInfo } from './realtime-events.js';

export class RealtimeTranslateStream extends Duplex {
  readonly #o: ResolvedRealtimeOptions;
  readonly #link: SessionLink;
  /** Events to listeners and iterators, audio to the reader; either one behind pauses the socket. */
  readonly #outlet: EventOutlet<RealtimeEvent>;
  readonly #ledger: SpeechLedger;
  /** The input's way to the service: heard, kept, sent, replayed after a drop. */
  readonly #uplink: TranslationInput;
  readonly #outbox: AudioOutbox;
  /** The service's messages, turned into events, audio and answers. */
  readonly #responses: ResponseAssembler;
  readonly #stats = { inputBytes: 0, paddingBytes: 0, bytesSent: 0 };
  /** Drops the link retries: what is sent again, and the reconnect figures. */
  readonly #outage: OutageReplay;
  /** Construction, ending, failure and close, as one state. */
  readonly #life: DuplexLifecycle<EndingWait>;
  /** After end(): when the session is over, and how it ended. */
  readonly #ending: EndingController;
  /** Pings behind the input: what the service has shown it has read. */
  readonly #fences = new ReceiptFences();
  #session: SessionStartedInfo | undefined;
  /** Input cut to whole samples (a sample split across writes waits for its other byte). */
  readonly #input = new FrameCutter(REALTIME_BYTES_PER_FRAME);
  /** A server error that is a warning unless the service closes right after it. */
  readonly #serverError: PendingServerError;

  constructor(options: RealtimeTranslateOptions) {
    const o = resolveRealtimeOptions(options);
    const { readableHighWaterMark, writableHighWaterMark } = o;
    super({ readableHighWaterMark, writableHighWaterMark, allowHalfOpen: true, decodeStrings: true, objectMode: false });
    this.#o = o;
    this.#life = new DuplexLifecycle(this, {
      signal: o.signal,
      name: 'realtime session',
      shutdown: () => this.#link.shutdown(),
      // An empty push makes the next read() call _read, where the failure is delivered once drained.
      nudgeRead: () => this.push(Buffer.alloc(0)),
    });
    this.#serverError = new PendingServerError(o.apiKey, (warning) => this.#warn(warning));
    this.#ledger = new SpeechLedger({ thresholdDbfs: o.speechThresholdDbfs, silenceMs: o.speechSilenceMs });
    this.#ending = new EndingController({
      life: this.#life,
      ledger: this.#ledger,
      quietPeriodMs: o.quietPeriodMs,
      responseStallTimeoutMs: o.responseStallTimeoutMs,
      fenceTimeoutMs: o.livenessTimeoutMs,
      bytesPerMs: BYTES_PER_MS,
      ready: () => this.#link.status === 'ready',
      paused: () => this.#link.paused,
      drained: () => this.#outbox.drained,
      inputFence: () => this.#inputFence(),
      warn: (warning) => this.#warn(warning),
      close: () => {
        this.#serverError.settle();
        this.#link.close();
      },
    });
    this.#link = new SessionLink(linkOptions(o, MAX_SERVER_MESSAGE_BYTES, true), {
      open: () => {
        this.#responses.newConnection();
        this.#fences.reset();
        this.#link.send(o.sessionUpdate);
      },
      message: (data, isBinary) => this.#onMessage(data, isBinary),
      pong: (id) => {
        if (this.#fences.answered(id, Date.now())) this.#ending.evaluate();
      },
      readyTimeout: (waitedMs, reconnecting) => sessionReadyTimeout(waitedMs, reconnecting, this.#responses.sawStarting),
      dropped: (end, cause, wasReady) => this.#onDropped(end, cause, wasReady),
      reconnecting: (attempt, delayMs, cause, sessionLost) => this.#onReconnecting(attempt, delayMs, cause, sessionLost),
      failed: (error, whileReconnecting) => this.#fail(this.#withUnprocessed(error, whileReconnecting ? ' while reconnecting' : '')),
      closed: () => this.#completeClose(),
    });
    this.#outlet = new EventOutlet<RealtimeEvent>(this, this.#link, {
      bounds: { count: o.maxQueuedEvents, bytes: o.maxQueuedEventBytes, weigh: eventWeight },
      listenerArgs,
      resumed: () => this.#ending.activity(Date.now()),
    });
    const input = new TranslationInput(this.#link, this.#ledger, {
      maxPieceBytes: o.maxAppendBytes,
      maxSocketBufferBytes: o.maxSocketBufferBytes,
      maxReplayMs: o.reconnect?.maxReplayMs,
      handed: (end) => this.#fenceInput(end),
      sent: (length) => {
        this.#stats.bytesSent += length;
        this.#ending.evaluate();
      },
    });
    this.#uplink = input;
    this.#outbox = input.outbox;
    this.#outage = input.outage;
    this.#responses = new ResponseAssembler(this.#ledger, { secret: o.apiKey, audioExpected: o.modalities.includes('audio'), sent: () => this.#outbox.sent }, {
      publish: (event) => this.#outlet.publish(event),
      audio: (audio) => audio.length > 0 && this.#outlet.deliver(audio),
      activity: (now) => this.#ending.activity(now),
      answered: () => input.answered(),
      starting: () => this.#link.starting(),
      sessionCreated: (info) => this.#onSessionCreated(info),
      serverError: (message, code) => this.#onServerError(message, code),
    });
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
  get state(): 'connecting' | 'active' | 'reconnecting' | 'closing' | 'closed' {
    const status = this.#link.status;
    return status === 'ready' ? 'active' : status === 'waiting' ? 'reconnecting' : status;
  }

  /** `stats.bytesReceived` alone: translated audio bytes received so far, without building `stats`. */
  get bytesReceived(): number {
    return this.#responses.bytesReceived;
  }

  get stats(): RealtimeStats {
    const buffered = this.#link.bufferedAmount;
    const { inputBytes, paddingBytes, bytesSent } = this.#stats;
    const { bytesReplayed, reconnects, outageMs, longestOutageMs } = this.#outage.stats;
    const { bytesReceived, responses } = this.#responses;
    return {
      ...{ inputBytes, paddingBytes, bytesSent, bytesReplayed, bytesReceived, responses, reconnects, outageMs, longestOutageMs },
      bytesQueued: this.#outbox.unsent + buffered,
      replayBytes: this.#outbox.retained,
      socketBufferedAmount: buffered,
      paused: this.#link.paused,
      latency: this.#responses.latency(),
      ending: this.#life.ending,
    };
  }

  /**
   * Every event, in order, for `for await`: the service's events and the stream's own. Ends when
   * the stream closes; throws its error. An iterator that falls behind pauses the socket. While
   * nothing reads the stream's audio, the audio reaches an iterator only (no buffer grows).
   */
  events(): AsyncIterableIterator<RealtimeEvent> {
    return this.#outlet.subscribe();
  }

  override _construct(callback: (error?: Error | null) => void): void {
    this.#life.construct(callback, () => this.#link.start());
  }

  /* ------------------------------------------------------------------ incoming */

  #onMessage(data: Buffer, isBinary: boolean): void {
    if (this.#life.error) return;
    const event = this.#responses.decode(data, isBinary);
    if (!event) return;
    this.#serverError.settle();
    this.#responses.handle(event);
  }

  #onSessionCreated(info: SessionInfo): void {
    const recovery = this.#link.ready();
    if (this.#link.status !== 'ready') return;
    this.#session = { ...info, id: info.id ?? '' };
    const reconnected = this.#outage.recovered(this.#session.id, recovery);
    if (reconnected) this.#outlet.publish({ type: 'reconnected', ...reconnected });
    this.#life.opened();
    this.#outbox.pump();
    this.#outbox.release();
    this.#ending.evaluate();
  }

  #onServerError(message: string, code: number | string | undefined): void {
    const error = this.#serverError.note(message, code);
    if (this.#link.status === 'connecting' && (this.#session === undefined || !error.retryable)) {
      // Refused before the session started (a bad voice, the key): no new session can cure it.
      this.#serverError.discard();
      this.#link.shutdown();
      this.#fail(this.#withUnprocessed(error, this.#session ? ' while reconnecting' : ''));
    }
  }

  #warn(warning: RtTranslateError): void {
    this.#outlet.publish({ type: 'warning', warning });
  }

  override _read(): void {
    if (!this.#life.failWhenDrained()) this.#outlet.read();
  }

  /* ------------------------------------------------------------------ outgoing */

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    if (this.#life.over || this.#link.status === 'closing') {
      // The error reaches the caller through destroy(), which settles this held write.
      this.#outbox.hold(callback);
      return;
    }
    this.#input.cut(chunk, (buf, offset, frames) => {
      const pcm = buf.subarray(offset, offset + frames * REALTIME_BYTES_PER_FRAME);
      this.#accept(pcm);
      this.#stats.inputBytes += pcm.length;
    });
    this.#outbox.hold(callback);
  }

  #accept(pcm: Buffer): void {
    this.#uplink.accept(pcm);
  }

  override _final(callback: (error?: Error | null) => void): void {
    // After a failure the stream is destroyed with the error once the reader has drained what arrived.
    if (this.#life.failWhenDrained()) return;
    if (this.#input.pendingBytes > 0) {
      this.#warn(new ValidationError('input', 'whole PCM16 samples (an even number of bytes)', 'a trailing odd byte, dropped'));
      this.#input.clear();
    }
    this.#ending.begin(callback);
    const padding = Buffer.alloc(this.#o.endPaddingMs * BYTES_PER_MS);
    this.#stats.paddingBytes += padding.length;
    this.#accept(padding);
    this.#ending.evaluate();
  }

  #completeClose(): void {
    this.#life.close((ending) => {
      this.#outlet.publish({ type: 'ended', ...ending });
      this.#outlet.end();
    });
  }

  /* ------------------------------------------------------------------ fences */

  /**
   * Input up to `end` was just handed to the socket: once silence has closed a stretch of speech,
   * a fence goes behind its end, so the ending knows when the service has read it.
   */
  #fenceInput(end: number): void {
    const speechEnd = this.#ledger.endedSpeechEnd;
    if (speechEnd > this.#fences.lastOffset && speechEnd <= end) this.#fence(end);
  }

  /**
   * The fence behind the latest speech on this connection, or behind all the input when no
   * speech was sent; one goes behind all that was sent if there is none.
   */
  #inputFence(): InputFence {
    return this.#fences.covering(this.#ledger.lastSpeechEnd || this.#outbox.end) ?? this.#fence(this.#outbox.sent);
  }

  #fence(offset: number): InputFence {
    const now = Date.now();
    const id = this.#link.ping();
    if (id !== undefined) this.#fences.sent(id, offset, now);
    return { sentAt: now, receivedAt: undefined };
  }

  /* ------------------------------------------------------------------ drops and reconnects */

  /** The connection ended unasked: what it means, or the session's normal end after end(). */
  #onDropped(end: ConnectionEnd, cause: RtTranslateError, wasReady: boolean): RtTranslateError | 'finished' {
    // A server error right before the close is its cause; the close code says whether to retry.
    const serverCause = this.#serverError.takeAsCause(end.kind === 'closed' ? end.code : undefined);
    const normal = wasReady && !serverCause && end.kind === 'closed' && (end.code === 1000 || end.code === 1005);
    if ((normal && this.#ending.closedByService(end.code)) || (wasReady && this.#ending.droppedWithNothingOwed())) {
      this.#completeClose();
      return 'finished';
    }
    const verdict = serverCause ?? cause;
    // The link retries this drop (the same rule as its own): an outage begins, or goes on.
    if (wasReady && this.#o.reconnect && verdict.retryable) this.#outage.begin();
    return verdict;
  }

  /** A reconnect attempt is scheduled; when a session was lost, what it did not answer is rewound. */
  #onReconnecting(attempt: number, delayMs: number, cause: RtTranslateError, sessionLost: boolean): void {
    this.#ending.suspend(sessionLost);
    if (sessionLost) {
      this.#responses.sessionLost();
      this.#outage.rewind();
    }
    this.#outlet.publish({ type: 'reconnecting', attempt, delayMs, cause });
    this.#outbox.release();
  }

  /** Once a session had started, `error` says how much accepted input may not have been processed. */
  #withUnprocessed(error: RtTranslateError, context: string): RtTranslateError {
    return this.#session ? this.#outage.explain(error, context) : error;
  }

  /* ------------------------------------------------------------------ failure and teardown */

  /**
   * A fatal error (see `DuplexLifecycle.fail`). During an outage it means reconnecting gave up:
   * the session ended incomplete, and `ended` says so before the error.
   */
  #fail(error: RtTranslateError): void {
    if (this.#life.over) return;
    this.#serverError.settle();
    if (this.#outage.active) this.#outlet.publish({ type: 'ended', ...this.#ending.gaveUp() });
    this.#life.fail(error);
  }

  override destroy(error?: Error): this {
    super.destroy(error);
    this.#life.destroying(error);
    return this;
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#link.shutdown();
    this.#life.destroyed(error);
    this.#outbox.abandon(error);
    this.#serverError.discard();
    this.#outlet.end(error ?? undefined);
    void this.#link.whenClosed().then(() => callback(error));
  }

  [inspect.custom](): string {
    const { url, session } = this.#o;
    return `RealtimeTranslateStream { url: '${url.origin}${url.pathname}', from: '${session.source_language}', ` +
      `to: '${session.target_language}', state: '${this.state}', sessionId: ${this.sessionId ? `'${this.sessionId}'` : 'undefined'} }`;
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
