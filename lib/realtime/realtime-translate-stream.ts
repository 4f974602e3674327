/**
 * `RealtimeTranslateStream`: a Duplex over the realtime speech-to-speech WebSocket. Writable
 * side: PCM16 LE mono 24 kHz, any chunking. Readable side: the translated PCM16 LE mono 24 kHz.
 * Transcripts, text, timings and reconnects are typed events, also yielded by `events()`.
 *
 * The stream is the translation protocol over the realtime Duplex core (`realtime-duplex.ts`:
 * the stream callbacks, connections and reconnects, sending and replaying input, events to the
 * caller, the lifecycle, server errors, all shared with live transcription). Its own parts live
 * in their own modules: options (`realtime-options.ts`); its events and stats
 * (`realtime-events.ts`); what the service's messages mean (`response-assembler.ts`); the append
 * framing (`translation-input.ts`, shared with the browser relay); what the service owes
 * (`speech-ledger.ts`); pings behind the input (`receipt-fences.ts`); the ending
 * (`ending-controller.ts` over the pure `ending-policy.ts`). The README explains the rules.
 */
import { inspect } from 'node:util';
import type { SharedFrameLevels } from '../audio/level.js';
import { ValidationError, type RtTranslateError } from '../errors.js';
import { REALTIME_BYTES_PER_FRAME, type ServerEvent, type SessionInfo } from './codec.js';
import type { ConnectionEnd } from './connection.js';
import type { StreamCallback } from './duplex-lifecycle.js';
import { EndingController, type EndingWait } from './ending-controller.js';
import type { InputFence } from './ending-policy.js';
import {
  eventWeight,
  listenerArgs,
  type EndedInfo,
  type RealtimeEvent,
  type RealtimeStats,
  type RealtimeTranslateEvents,
  type SessionStartedInfo,
} from './realtime-events.js';
import { RealtimeDuplex } from './realtime-duplex.js';
import { MAX_SERVER_MESSAGE_BYTES, resolveRealtimeOptions, type RealtimeTranslateOptions, type ResolvedRealtimeOptions } from './realtime-options.js';
import { ReceiptFences } from './receipt-fences.js';
import { REPLAY_PREROLL_MS } from './outage-replay.js';
import { ResponseAssembler } from './response-assembler.js';
import { sessionReadyTimeout } from './server-errors.js';
import { SpeechLedger } from './speech-ledger.js';
import { APPEND_FRAMING, BYTES_PER_MS } from './translation-input.js';
import { withEvents } from '../typed-events.js';

export type { RealtimeTranslateOptions, ReconnectOptions } from './realtime-options.js';

export type { RealtimeStats, RealtimeTranslateEvents, SessionStartedInfo } from './realtime-events.js';

/** The ledger of a stream, for `shareInputLevels` (set by the class, which alone can read it). */
let ledgerOf: (stream: RealtimeTranslateStream) => SpeechLedger;

/**
 * Has `stream` measure its input's frame levels through `shared`, so sessions fed the same input
 * in one pass (a fan-out's targets) measure it once; what each finds is unchanged. For the
 * fan-out, not part of the public surface.
 */
export function shareInputLevels(stream: RealtimeTranslateStream, shared: SharedFrameLevels): void {
  ledgerOf(stream).shareLevels(shared);
}

export class RealtimeTranslateStream extends withEvents<RealtimeTranslateEvents>()(RealtimeDuplex<RealtimeEvent, ServerEvent, EndingWait>) {
  readonly #o: ResolvedRealtimeOptions;
  /** What the service owes: the speech sent, and what its responses answered. */
  readonly #ledger: SpeechLedger;
  /** The service's messages, turned into events, audio and answers. */
  readonly #responses: ResponseAssembler;
  #paddingBytes = 0;
  /** After end(): when the session is over, and how it ended. */
  readonly #ending: EndingController;
  /** Pings behind the input: what the service has shown it has read. */
  readonly #fences = new ReceiptFences();
  #session: SessionStartedInfo | undefined;

  static {
    ledgerOf = (stream) => stream.#ledger;
  }

  constructor(options: RealtimeTranslateOptions) {
    const o = resolveRealtimeOptions(options);
    const ledger = new SpeechLedger({ thresholdDbfs: o.speechThresholdDbfs, silenceMs: o.speechSilenceMs });
    super({
      connection: o,
      name: 'realtime session',
      maxPayload: MAX_SERVER_MESSAGE_BYTES,
      textOnly: true,
      frameBytes: REALTIME_BYTES_PER_FRAME,
      bytesPerMs: BYTES_PER_MS,
      framing: { ...APPEND_FRAMING, maxPieceBytes: o.maxAppendBytes },
      answers: ledger,
      prerollMs: REPLAY_PREROLL_MS,
      weigh: eventWeight,
      listenerArgs,
      readableObjectMode: false,
      readableHighWaterMark: o.readableHighWaterMark,
      writableHighWaterMark: o.writableHighWaterMark,
    });
    this.#o = o;
    this.#ledger = ledger;
    this.#ending = new EndingController({
      life: this.life,
      ledger,
      quietPeriodMs: o.quietPeriodMs,
      responseStallTimeoutMs: o.responseStallTimeoutMs,
      fenceTimeoutMs: o.livenessTimeoutMs,
      bytesPerMs: BYTES_PER_MS,
      ready: () => this.link.status === 'ready',
      paused: () => this.link.paused,
      drained: () => this.outbox.drained,
      inputFence: () => this.#inputFence(),
      warn: (warning) => this.warn(warning),
      close: () => this.closeSession(),
    });
    this.#responses = new ResponseAssembler(
      ledger,
      { secret: o.apiKey, audioExpected: o.modalities.includes('audio'), sent: () => this.outbox.sent },
      {
        publish: (event) => this.publish(event),
        audio: (audio) => audio.length > 0 && this.deliver(audio),
        activity: (now) => this.#ending.activity(now),
        answered: () => this.answered(),
        starting: () => this.link.starting(),
        sessionCreated: (info) => this.#onSessionCreated(info),
        serverError: (message, code) => this.serverError(message, code),
      },
    );
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
    const status = this.link.status;
    return status === 'ready' ? 'active' : status === 'waiting' ? 'reconnecting' : status;
  }

  /** `stats.bytesReceived` alone: translated audio bytes received so far, without building `stats`. */
  get bytesReceived(): number {
    return this.#responses.bytesReceived;
  }

  get stats(): RealtimeStats {
    const buffered = this.link.bufferedAmount;
    const { inputBytes, bytesSent } = this;
    const { bytesReplayed, reconnects, outageMs, longestOutageMs } = this.outage.stats;
    const { bytesReceived, responses } = this.#responses;
    return {
      ...{ inputBytes, paddingBytes: this.#paddingBytes, bytesSent, bytesReplayed, bytesReceived, responses, reconnects, outageMs, longestOutageMs },
      bytesQueued: this.outbox.unsent + buffered,
      replayBytes: this.outbox.retained,
      socketBufferedAmount: buffered,
      paused: this.link.paused,
      latency: this.#responses.latency(),
      ending: this.life.ending,
    };
  }

  /* ------------------------------------------------------------------ incoming */

  protected override connectionOpened(): void {
    this.#responses.newConnection();
    this.#fences.reset();
    this.link.send(this.#o.sessionUpdate);
  }

  protected override decode(data: Buffer, isBinary: boolean): ServerEvent | undefined {
    return this.#responses.decode(data, isBinary);
  }

  protected override handle(event: ServerEvent): void {
    this.#responses.handle(event);
  }

  protected override readyTimeout(waitedMs: number, reconnecting: boolean): RtTranslateError {
    return sessionReadyTimeout(waitedMs, reconnecting, this.#responses.sawStarting);
  }

  protected override pongReceived(id: number): void {
    if (this.#fences.answered(id, Date.now())) this.#ending.evaluate();
  }

  protected override readsResumed(): void {
    this.#ending.activity(Date.now());
  }

  #onSessionCreated(info: SessionInfo): void {
    this.sessionReady(info.id ?? '', () => (this.#session = { ...info, id: info.id ?? '' }));
  }

  /* ------------------------------------------------------------------ outgoing */

  protected override noteInput(pcm: Buffer): void {
    this.#ledger.accept(pcm);
  }

  /**
   * Input up to `end` was just handed to the socket: once silence has closed a stretch of speech,
   * a fence goes behind its end, so the ending knows when the service has read it.
   */
  protected override inputHanded(end: number): void {
    this.#ledger.recordSent(end, Date.now());
    const speechEnd = this.#ledger.endedSpeechEnd;
    if (speechEnd > this.#fences.lastOffset && speechEnd <= end) this.#fence(end);
  }

  protected override trailingInput(): RtTranslateError {
    return new ValidationError('input', 'whole PCM16 samples (an even number of bytes)', 'a trailing odd byte, dropped');
  }

  /* ------------------------------------------------------------------ the ending */

  protected override endInput(callback: StreamCallback): void {
    this.#ending.begin(callback);
    const padding = Buffer.alloc(this.#o.endPaddingMs * BYTES_PER_MS);
    this.#paddingBytes += padding.length;
    this.acceptInput(padding);
    this.#ending.evaluate();
  }

  protected override evaluateEnding(): void {
    this.#ending.evaluate();
  }

  /**
   * The fence behind the latest speech on this connection, or behind all the input when no
   * speech was sent; one goes behind all that was sent if there is none.
   */
  #inputFence(): InputFence {
    return this.#fences.covering(this.#ledger.lastSpeechEnd || this.outbox.end) ?? this.#fence(this.outbox.sent);
  }

  #fence(offset: number): InputFence {
    const now = Date.now();
    const id = this.link.ping();
    if (id !== undefined) this.#fences.sent(id, offset, now);
    return { sentAt: now, receivedAt: undefined };
  }

  /** After end(), a clean close by the service, or a drop with nothing owed, is the session's end. */
  protected override endedByDrop(end: ConnectionEnd, normal: boolean, wasReady: boolean): boolean {
    return (normal && end.kind === 'closed' && this.#ending.closedByService(end.code)) || (wasReady && this.#ending.droppedWithNothingOwed());
  }

  /** A reconnect is scheduled: the ending waits; a lost session's open response is abandoned. */
  protected override reconnecting(sessionLost: boolean): void {
    this.#ending.suspend(sessionLost);
    if (sessionLost) this.#responses.sessionLost();
  }

  protected override gaveUp(): EndedInfo {
    return this.#ending.gaveUp();
  }

  /** Once a session had started, `error` says how much accepted input may not have been processed. */
  protected override explainFailure(error: RtTranslateError, whileReconnecting: boolean): RtTranslateError {
    return this.#session ? this.outage.explain(error, whileReconnecting ? ' while reconnecting' : '') : error;
  }

  [inspect.custom](): string {
    const { url, session } = this.#o;
    return (
      `RealtimeTranslateStream { url: '${url.origin}${url.pathname}', from: '${session.source_language}', ` +
      `to: '${session.target_language}', state: '${this.state}', sessionId: ${this.sessionId ? `'${this.sessionId}'` : 'undefined'} }`
    );
  }
}

// Typed events: `on('transcript.done', (text) => ...)` and friends.
