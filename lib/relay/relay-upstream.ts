/**
 * The service side of one relayed session: the realtime library's own parts, driven by what a
 * browser sends instead of by a Node stream. The connection and its reconnects are a
 * `SessionLink`; the browser's audio goes through a `TranslationInput` (sent in appends of the
 * library's size while the socket has room, kept for a replay), and a `ResponseAssembler`
 * follows what the service has answered, so that after a drop only the unanswered input is sent
 * again, as `RealtimeTranslateStream` does.
 *
 * Everything the service sends is passed on to the browser as it came, with the key scrubbed
 * from it, except the `session.created` and `session.updated` of a session re-established after
 * a drop: the browser already has its session, so it gets `relay.reconnected` instead (and
 * `relay.reconnecting` when the drop happens). Events other than audio keep their place after the
 * audio before them: one is sent once everything before it has been handed on.
 */
import { type RtTranslateError } from '../errors.js';
import { FrameCutter } from '../audio/frames.js';
import { APPEND_PIECE_BYTES, REALTIME_BYTES_PER_FRAME, type SessionInfo } from '../realtime/codec.js';
import type { ConnectionEnd } from '../realtime/connection.js';
import type { AudioOutbox } from '../realtime/audio-outbox.js';
import type { OutageReplay } from '../realtime/outage-replay.js';
import { MAX_SERVER_MESSAGE_BYTES, linkOptions, type ResolvedConnectionOptions } from '../realtime/realtime-options.js';
import { ResponseAssembler } from '../realtime/response-assembler.js';
import { PendingServerError, sessionReadyTimeout } from '../realtime/server-errors.js';
import { SessionLink } from '../realtime/session-link.js';
import { SpeechLedger } from '../realtime/speech-ledger.js';
import { TranslationInput } from '../realtime/translation-input.js';
import { scrubFrame, scrubText } from './scrub.js';

/** How a relayed session ended, for the browser. */
export interface UpstreamEnd {
  /** The close code for the browser. */
  code: number;
  reason: string;
  /** Undefined when the service ended the session normally. */
  error: RtTranslateError | undefined;
  /** The service said it itself (its `error` event was passed on): no second one is sent. */
  forwarded: boolean;
}

export interface UpstreamHandlers {
  /** A message of the service for the browser, the key scrubbed from it. */
  forward(data: Buffer, isBinary: boolean): void;
  /** An event of the relay's own for the browser. */
  notice(event: Record<string, unknown>): void;
  /** The session is over, unasked (said once). */
  ended(end: UpstreamEnd): void;
}

/** The first session.update (without `auth`) and whether it asks for audio output. */
export interface FirstUpdate {
  text: string;
  audio: boolean;
}

/** Close codes a server may send in a close frame (1004 to 1006 and 1015 are reserved). */
function sendableCloseCode(code: number | undefined): code is number {
  return code !== undefined && ((code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999));
}

/** 1013 (try again later) when a new session may cure it, else 1011 (the server failed). */
function closeCodeFor(error: RtTranslateError): number {
  return error.retryable ? 1013 : 1011;
}

export class RelayUpstream {
  readonly #link: SessionLink;
  readonly #handlers: UpstreamHandlers;
  readonly #secret: string;
  readonly #ledger = new SpeechLedger();
  readonly #uplink: TranslationInput;
  readonly #outbox: AudioOutbox;
  readonly #outage: OutageReplay;
  readonly #responses: ResponseAssembler;
  readonly #serverError: PendingServerError;
  readonly #input = new FrameCutter(REALTIME_BYTES_PER_FRAME);
  readonly #reconnect: boolean;
  /** The latest session.update sent (the first one until another is): what a new connection sends first. */
  #sessionUpdate: string;
  /** An event waiting for the audio before it to be handed on. */
  #waiting: { text: string; sessionUpdate: boolean; sent: () => void } | undefined;
  /** A session has been created: a later `session.created` is a reconnect's. */
  #started = false;
  /** The reconnected session's `session.updated` is not passed on either. */
  #swallowUpdated = false;
  /** The service error that was passed on and became the cause of the end. */
  #forwardedCause: RtTranslateError | undefined;
  #closeCode: number | undefined;
  #over = false;
  #reconnects = 0;

  constructor(o: ResolvedConnectionOptions, url: URL, first: FirstUpdate, handlers: UpstreamHandlers) {
    this.#handlers = handlers;
    this.#secret = o.apiKey;
    this.#sessionUpdate = first.text;
    this.#reconnect = o.reconnect !== undefined;
    this.#serverError = new PendingServerError(o.apiKey, () => {
      // The browser had the service's error event as it came: nothing more to say.
    });
    const link = linkOptions(o, MAX_SERVER_MESSAGE_BYTES, true);
    this.#link = new SessionLink(
      { ...link, connection: { ...link.connection, url } },
      {
        open: () => {
          this.#responses.newConnection();
          this.#link.send(this.#sessionUpdate);
        },
        message: (data, isBinary) => this.#onMessage(data, isBinary),
        readyTimeout: (waitedMs, reconnecting) => sessionReadyTimeout(waitedMs, reconnecting, this.#responses.sawStarting),
        dropped: (end, cause, wasReady) => this.#onDropped(end, cause, wasReady),
        reconnecting: (attempt, delayMs, cause, sessionLost) => this.#onReconnecting(attempt, delayMs, cause, sessionLost),
        failed: (error) => this.#end({ error, forwarded: error === this.#forwardedCause }),
        closed: () => this.#end({ error: undefined, forwarded: false }),
      },
    );
    const input = new TranslationInput(this.#link, this.#ledger, {
      maxPieceBytes: APPEND_PIECE_BYTES,
      maxSocketBufferBytes: o.maxSocketBufferBytes,
      maxReplayMs: o.reconnect?.maxReplayMs,
      handed: () => this.#flush(),
      sent: () => this.#flush(),
    });
    this.#uplink = input;
    this.#outbox = input.outbox;
    this.#outage = input.outage;
    this.#responses = new ResponseAssembler(
      this.#ledger,
      { secret: o.apiKey, audioExpected: first.audio, sent: () => this.#outbox.sent },
      {
        publish: () => undefined,
        audio: () => undefined,
        activity: () => undefined,
        answered: () => input.answered(),
        starting: () => this.#link.starting(),
        sessionCreated: (info) => this.#onSessionCreated(info),
        serverError: (message, code) => this.#onServerError(message, code),
      },
    );
  }

  /** Bytes held for the session: input kept (to send, or for a replay) and the socket's unsent bytes. */
  get bufferedBytes(): number {
    return this.#outbox.retained + this.#link.bufferedAmount;
  }

  /** Sessions re-established after a drop. */
  get reconnects(): number {
    return this.#reconnects;
  }

  /** Opens the first connection. */
  start(): void {
    this.#link.start();
  }

  /**
   * Audio from the browser (any length: an odd byte waits for the next piece). `room` is called
   * once more may come (at once when there is room now): while the socket has room, or while
   * reconnecting, while the replay bound has.
   */
  audio(pcm: Buffer, room: () => void): void {
    this.#input.cut(pcm, (buf, offset, frames) => this.#uplink.accept(buf.subarray(offset, offset + frames * REALTIME_BYTES_PER_FRAME)));
    this.#outbox.hold(room);
  }

  /** An event other than audio: sent once the session is up and the audio before it handed on; `sent` follows. */
  event(text: string, sessionUpdate: boolean, sent: () => void): void {
    this.#waiting = { text, sessionUpdate, sent };
    this.#flush();
  }

  /** Stops reading the service for `reason` (the browser is behind). */
  pause(reason: string): void {
    this.#link.pause(reason);
  }

  resume(reason: string): void {
    this.#link.resume(reason);
  }

  /** The browser is gone: the session is closed (gracefully when a connection is open). */
  close(): void {
    this.#over = true;
    this.#serverError.discard();
    const status = this.#link.status;
    if (status === 'ready' || status === 'connecting') this.#link.close();
    else this.#link.shutdown();
  }

  /** Resolves once the newest connection's socket has closed. */
  whenClosed(): Promise<void> {
    return this.#link.whenClosed();
  }

  #flush(): void {
    const waiting = this.#waiting;
    if (!waiting || this.#link.status !== 'ready' || this.#outbox.unsent > 0) return;
    if (!this.#link.send(waiting.text)) return;
    this.#waiting = undefined;
    if (waiting.sessionUpdate) this.#sessionUpdate = waiting.text;
    waiting.sent();
  }

  #onMessage(data: Buffer, isBinary: boolean): void {
    const event = this.#responses.decode(data, isBinary);
    if (event) this.#serverError.settle();
    let pass = true;
    if (event?.type === 'session.created' && this.#started) {
      pass = false;
      this.#swallowUpdated = true;
    } else if (event?.type === 'session.updated' && this.#swallowUpdated) {
      pass = false;
      this.#swallowUpdated = false;
    }
    if (pass) this.#handlers.forward(scrubFrame(data, isBinary, this.#secret), isBinary);
    if (event) this.#responses.handle(event);
  }

  #onSessionCreated(info: SessionInfo): void {
    const recovery = this.#link.ready();
    if (this.#link.status !== 'ready') return;
    const id = info.id ?? '';
    const reconnected = this.#outage.recovered(id, recovery);
    this.#started = true;
    if (reconnected) {
      this.#reconnects += 1;
      this.#handlers.notice({
        type: 'relay.reconnected',
        session_id: id,
        attempt: reconnected.attempt,
        outage_ms: reconnected.outageMs,
        replayed_ms: reconnected.replayedMs,
        not_replayed_ms: reconnected.notReplayedMs,
      });
    }
    this.#outbox.pump();
    this.#outbox.release();
    this.#flush();
  }

  #onServerError(message: string, code: number | string | undefined): void {
    const error = this.#serverError.note(message, code);
    if (this.#link.status === 'connecting' && (!this.#started || !error.retryable)) {
      // Refused before the session started (the configuration, a voice, the key): no new
      // session can cure it, and the browser has the service's own words already.
      this.#serverError.discard();
      this.#link.shutdown();
      this.#end({ error, forwarded: true });
    }
  }

  #onDropped(end: ConnectionEnd, cause: RtTranslateError, wasReady: boolean): RtTranslateError | 'finished' {
    const closeCode = end.kind === 'closed' ? end.code : undefined;
    const serverCause = this.#serverError.takeAsCause(closeCode);
    this.#closeCode = closeCode;
    if (wasReady && !serverCause && (closeCode === 1000 || closeCode === 1005)) {
      this.#end({ error: undefined, forwarded: false, code: 1000, reason: end.kind === 'closed' ? end.reason : '' });
      return 'finished';
    }
    const verdict = serverCause ?? cause;
    this.#forwardedCause = serverCause;
    if (wasReady && this.#reconnect && verdict.retryable) this.#outage.begin();
    return verdict;
  }

  #onReconnecting(attempt: number, delayMs: number, cause: RtTranslateError, sessionLost: boolean): void {
    if (sessionLost) {
      this.#responses.sessionLost();
      this.#outage.rewind();
    }
    this.#handlers.notice({ type: 'relay.reconnecting', attempt, delay_ms: delayMs, reason: scrubText(cause.message, this.#secret) });
    this.#outbox.release();
  }

  #end(end: { error: RtTranslateError | undefined; forwarded: boolean; code?: number; reason?: string }): void {
    if (this.#over) return;
    this.#over = true;
    const { error, forwarded } = end;
    let code = end.code ?? 1000;
    if (error) code = forwarded && sendableCloseCode(this.#closeCode) && this.#closeCode !== 1000 ? this.#closeCode : closeCodeFor(error);
    const reason = scrubText(end.reason ?? (error ? error.message : 'session ended'), this.#secret);
    this.#handlers.ended({ code, reason, error, forwarded });
  }
}
