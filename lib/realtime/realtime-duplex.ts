/**
 * The realtime Duplex core: what every realtime stream of the library is around its protocol.
 * It owns the stream callbacks (`_construct`, `_write`, `_final`, `_read`, `_destroy`) and the
 * wiring of the shared parts: the session's connections and reconnects (`SessionLink`), the
 * input's way to the socket and its replay after a drop (`AudioOutbox`, `OutageReplay`), the
 * events and data to the caller (`EventOutlet`), the stream's own state with its pending
 * callbacks and timers (`DuplexLifecycle`), and what a service error means (`PendingServerError`).
 *
 * A stream supplies its protocol as hooks: what a connection sends first, how a message of the
 * service is decoded and handled (and which one makes the session ready), how appends are framed,
 * what the service has answered of the input, and the ending rule (what `end()` starts, when it
 * is looked at again, what a drop means after it, what a give-up leaves unanswered). A failure,
 * a give-up, a drop and a reconnect go the same way for every protocol: the link reports them,
 * the core publishes `reconnecting`, `reconnected` and `ended`, and fails the stream through the
 * lifecycle once the reader has taken what arrived.
 */
import { Duplex } from 'node:stream';
import { FrameCutter } from '../audio/frames.js';
import type { RtTranslateError } from '../errors.js';
import { AudioOutbox, type AudioOutboxOptions } from './audio-outbox.js';
import type { ConnectionEnd } from './connection.js';
import { DuplexLifecycle, type StreamCallback } from './duplex-lifecycle.js';
import { EventOutlet } from './event-outlet.js';
import { OutageReplay, type AnsweredInput } from './outage-replay.js';
import type { EndedInfo, ReconnectedInfo, ReconnectingInfo } from './realtime-events.js';
import { linkOptions, type ResolvedConnectionOptions } from './realtime-options.js';
import { PendingServerError } from './server-errors.js';
import { SessionLink } from './session-link.js';

/** The events the core publishes itself; every realtime stream's events include them. */
export type SessionEvent =
  | { type: 'warning'; warning: RtTranslateError }
  | ({ type: 'reconnecting' } & ReconnectingInfo)
  | ({ type: 'reconnected' } & ReconnectedInfo)
  | ({ type: 'ended' } & EndedInfo);

export interface RealtimeDuplexOptions<E> {
  connection: ResolvedConnectionOptions;
  /** The stream's name in messages, e.g. `realtime session`. */
  name: string;
  /** Largest message accepted from the service, in bytes. */
  maxPayload: number;
  /** Every message sent is text (see `ConnectionOptions.textOnly`). */
  textOnly: boolean;
  /** While a session is ready, `keepAlive()` is called this often, in ms (undefined: never). */
  keepAliveMs?: number;
  /** Input is taken in whole frames of this many bytes (a frame split across writes waits for the rest). */
  frameBytes: number;
  /** Input audio bytes per millisecond. */
  bytesPerMs: number;
  /** How input audio goes on the wire. */
  framing: Pick<AudioOutboxOptions, 'maxPieceBytes' | 'encode' | 'binary' | 'encodeCopies' | 'release'>;
  /** What the service has answered of the input: where a lost session's replay starts. */
  answers: AnsweredInput;
  /** Input replayed before the first unanswered input, in ms. */
  prerollMs: number;
  /** What an event holds in memory while queued for an `events()` consumer, in bytes. */
  weigh(event: E): number;
  /** The arguments of a listener of `event.type`. */
  listenerArgs(event: E): unknown[];
  /** The readable side yields objects (results) instead of bytes. */
  readableObjectMode: boolean;
  readableHighWaterMark: number;
  writableHighWaterMark: number;
}

/**
 * `E`: the stream's events (its `SessionEvent`s included); `M`: a decoded message of the service;
 * `W`: what the lifecycle's `ending` state keeps while the session ends.
 */
export abstract class RealtimeDuplex<E extends { type: string }, M, W extends object> extends Duplex {
  protected readonly link: SessionLink;
  /** The input's way to the socket: kept, sent while the socket has room, sent again after a drop. */
  protected readonly outbox: AudioOutbox;
  /** Drops the link retries: what is sent again, and the reconnect figures. */
  protected readonly outage: OutageReplay;
  /** Construction, ending, failure and close, as one state. */
  protected readonly life: DuplexLifecycle<W>;
  /** Events to listeners and iterators, data to the reader; either one behind pauses the socket. */
  readonly #outlet: EventOutlet<E>;
  /** A server error that is a warning unless the service closes right after it. */
  readonly #serverError: PendingServerError;
  readonly #input: FrameCutter;
  #inputBytes = 0;
  #bytesSent = 0;

  constructor(o: RealtimeDuplexOptions<E>) {
    const c = o.connection;
    const { readableObjectMode, readableHighWaterMark, writableHighWaterMark } = o;
    super({ readableObjectMode, writableObjectMode: false, readableHighWaterMark, writableHighWaterMark, allowHalfOpen: true, decodeStrings: true });
    this.#input = new FrameCutter(o.frameBytes);
    this.life = new DuplexLifecycle<W>(this, {
      signal: c.signal,
      name: o.name,
      shutdown: () => this.link.shutdown(),
      // An empty push makes the next read() call _read, where the failure is delivered once drained.
      ...(readableObjectMode ? {} : { nudgeRead: () => this.push(Buffer.alloc(0)) }),
    });
    this.#serverError = new PendingServerError(c.apiKey, (warning) => this.warn(warning));
    this.link = new SessionLink(
      { ...linkOptions(c, o.maxPayload, o.textOnly), keepAliveMs: o.keepAliveMs },
      {
        open: (attempt) => this.connectionOpened(attempt),
        message: (data, isBinary) => this.#onMessage(data, isBinary),
        pong: (id) => this.pongReceived(id),
        keepAlive: () => this.keepAlive(),
        readyTimeout: (waitedMs, reconnecting) => this.readyTimeout(waitedMs, reconnecting),
        dropped: (end, cause, wasReady) => this.#onDropped(end, cause, wasReady),
        reconnecting: (attempt, delayMs, cause, sessionLost) => this.#onReconnecting(attempt, delayMs, cause, sessionLost),
        failed: (error, whileReconnecting, gaveUp) => this.#fail(this.explainFailure(error, whileReconnecting), gaveUp),
        closed: () => this.#completeClose(),
      },
    );
    this.#outlet = new EventOutlet<E>(this, this.link, {
      bounds: { count: c.maxQueuedEvents, bytes: c.maxQueuedEventBytes, weigh: o.weigh },
      listenerArgs: o.listenerArgs,
      resumed: () => this.readsResumed(),
    });
    this.outbox = new AudioOutbox(this.link, {
      ...o.framing,
      maxSocketBufferBytes: c.maxSocketBufferBytes,
      maxReplayBytes: c.reconnect ? Math.round(c.reconnect.maxReplayMs * o.bytesPerMs) : undefined,
      handed: (end) => {
        this.inputHanded(end);
        this.outage.handed(end);
      },
      sent: (length) => {
        this.#bytesSent += length;
        // Only the ending waits on sends: before end() there is nothing to ask, 50 times a second.
        if (this.life.stateIn('ending')) this.evaluateEnding();
      },
    });
    this.outage = new OutageReplay(o.answers, this.outbox, { prerollMs: o.prerollMs, bytesPerMs: o.bytesPerMs });
  }

  /* ------------------------------------------------------------------ the protocol's hooks */

  /** A connection is open (attempt 0 is the first): send what the protocol sends first. */
  protected connectionOpened(_attempt: number): void {}

  /** A message of the service, decoded; undefined when it cannot be read (warned about already). */
  protected abstract decode(data: Buffer, isBinary: boolean): M | undefined;

  /** A decoded message (a pending server error was settled as a warning first). */
  protected abstract handle(message: M): void;

  /** The error for a session that did not become ready within `waitedMs`. */
  protected abstract readyTimeout(waitedMs: number, reconnecting: boolean): RtTranslateError;

  /** Whole frames of input (also `end()`'s padding), before the outbox has them. */
  protected noteInput(_audio: Buffer): void {}

  /** Input up to offset `end` was just handed to the socket. */
  protected inputHanded(_end: number): void {}

  /** The warning for `bytes` of input that end short of a whole frame at `end()`. */
  protected abstract trailingInput(bytes: number): RtTranslateError;

  /** `_final`: the input has ended; the ending state takes `callback` until the session has ended. */
  protected abstract endInput(callback: StreamCallback): void;

  /** After `end()`: something the ending rule depends on changed (a send completed, a session is ready). */
  protected abstract evaluateEnding(): void;

  /**
   * The connection ended unasked: whether that is the session's normal end after `end()`
   * (`normal`: a clean close of a ready session, no service error right before it).
   */
  protected abstract endedByDrop(end: ConnectionEnd, normal: boolean, wasReady: boolean): boolean;

  /** A reconnect is scheduled (a lost session's input was just rewound): no ending rule waits meanwhile. */
  protected abstract reconnecting(sessionLost: boolean): void;

  /** Reconnecting gave up on a lost session: decides (in the lifecycle) and returns how the session ended. */
  protected abstract gaveUp(): EndedInfo;

  /** The error of a session that cannot go on, as the caller gets it (`whileReconnecting`: a reconnect attempt met it). */
  protected explainFailure(error: RtTranslateError, _whileReconnecting: boolean): RtTranslateError {
    return error;
  }

  /** The peer answered ping `id` (see `SessionLink.ping`). */
  protected pongReceived(_id: number): void {}

  /** Every `keepAliveMs` while a session is ready. */
  protected keepAlive(): void {}

  /** The socket, paused by us, reads again (our own pause is never the service's quiet). */
  protected readsResumed(): void {}

  /* ------------------------------------------------------------------ for the protocol */

  /** Input audio accepted from the writer, in bytes. */
  protected get inputBytes(): number {
    return this.#inputBytes;
  }

  /** Input audio bytes the socket has taken, replays included. */
  protected get bytesSent(): number {
    return this.#bytesSent;
  }

  /** Emits an event under its one name, and queues it for `events()` iterators. */
  protected publish(event: E | SessionEvent): void {
    this.#outlet.publish(event as E);
  }

  protected warn(warning: RtTranslateError): void {
    this.publish({ type: 'warning', warning });
  }

  /** Data for the readable side; a reader that is behind pauses the socket. */
  protected deliver(data: unknown): void {
    this.#outlet.deliver(data);
  }

  /** Takes input audio (whole frames): the protocol notes it, the outbox keeps it and sends it when it can. */
  protected acceptInput(audio: Buffer): void {
    if (audio.length === 0) return;
    this.noteInput(audio);
    this.outbox.accept(audio);
  }

  /**
   * The protocol's message says the session is ready: `announce` runs once the link has taken
   * it, then a reconnect is reported, construction succeeds and the input flows again.
   */
  protected sessionReady(sessionId: string, announce: () => void): void {
    const recovery = this.link.ready();
    if (this.link.status !== 'ready') return;
    announce();
    const reconnected = this.outage.recovered(sessionId, recovery);
    if (reconnected) this.publish({ type: 'reconnected', ...reconnected });
    this.life.opened();
    this.outbox.pump();
    this.outbox.release();
    this.evaluateEnding();
  }

  /** The service answered the input sent so far: a drop from now on is a new outage, and what it answered is not sent again. */
  protected answered(): void {
    this.link.progress();
    this.outage.forgetAnswered(this.outbox.sent);
  }

  /**
   * The service sent an error (published already). Before the session started (the key, the
   * parameters, a voice), or on a reconnect attempt for a reason no new session can cure, it is
   * fatal at once; otherwise what follows decides (see `PendingServerError`).
   */
  protected serverError(message: string, code: number | string | undefined): void {
    const error = this.#serverError.note(message, code);
    if (this.link.status === 'connecting' && (!this.link.recovering || !error.retryable)) {
      this.#serverError.discard();
      this.link.fail(error);
    }
  }

  /** The session is over: the connection closes (the stream ends once it has). */
  protected closeSession(): void {
    this.#serverError.settle();
    this.link.close();
  }

  /* ------------------------------------------------------------------ the stream callbacks */

  /**
   * Every event, in order, for `for await`: the service's events and the stream's own. Ends when
   * the stream closes; throws its error. An iterator that falls behind pauses the socket. While
   * nothing reads the stream, what it would read reaches an iterator only (no buffer grows).
   */
  events(): AsyncIterableIterator<E> {
    return this.#outlet.subscribe();
  }

  override _construct(callback: StreamCallback): void {
    this.life.construct(callback, () => this.link.start());
  }

  override _read(): void {
    if (!this.life.failWhenDrained()) this.#outlet.read();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: StreamCallback): void {
    if (this.life.over || this.link.status === 'closing') {
      // The error reaches the caller through destroy(), which settles this held write.
      this.outbox.hold(callback);
      return;
    }
    this.#input.cut(chunk, this.#takeFrames);
    this.outbox.hold(callback);
  }

  /** Whole frames cut from a write: bound once, not a closure per write. */
  readonly #takeFrames = (buf: Buffer, offset: number, frames: number): void => {
    const length = frames * this.#input.frameBytes;
    // A write of whole frames (a live source's usual) is taken as it is, without a view of it.
    const audio = offset === 0 && length === buf.length ? buf : buf.subarray(offset, offset + length);
    this.acceptInput(audio);
    this.#inputBytes += audio.length;
  };

  override _final(callback: StreamCallback): void {
    // After a failure the stream is destroyed with the error once the reader has drained what arrived.
    if (this.life.failWhenDrained()) return;
    if (this.#input.pendingBytes > 0) {
      this.warn(this.trailingInput(this.#input.pendingBytes));
      this.#input.clear();
    }
    this.outbox.reportEverySend();
    this.endInput(callback);
  }

  override destroy(error?: Error): this {
    super.destroy(error);
    this.life.destroying(error);
    return this;
  }

  override _destroy(error: Error | null, callback: StreamCallback): void {
    this.link.shutdown();
    this.life.destroyed(error);
    this.outbox.abandon(error);
    this.#serverError.discard();
    this.#outlet.end(error ?? undefined);
    void this.link.whenClosed().then(() => callback(error));
  }

  /* ------------------------------------------------------------------ the link's reports */

  #onMessage(data: Buffer, isBinary: boolean): void {
    if (this.life.error) return;
    const message = this.decode(data, isBinary);
    if (message === undefined) return;
    this.#serverError.settle();
    this.handle(message);
  }

  /** The connection ended unasked: what it means, or the session's normal end. */
  #onDropped(end: ConnectionEnd, cause: RtTranslateError, wasReady: boolean): RtTranslateError | 'finished' {
    // A server error right before the close is its cause; the close code says whether to retry.
    const serverCause = this.#serverError.takeAsCause(end.kind === 'closed' ? end.code : undefined);
    const normal = wasReady && !serverCause && end.kind === 'closed' && (end.code === 1000 || end.code === 1005);
    if (this.endedByDrop(end, normal, wasReady)) {
      this.#completeClose();
      return 'finished';
    }
    return serverCause ?? cause;
  }

  /** A reconnect attempt is scheduled; when a session was lost, what it did not answer is rewound. */
  #onReconnecting(attempt: number, delayMs: number, cause: RtTranslateError, sessionLost: boolean): void {
    if (sessionLost) this.outage.rewind();
    this.reconnecting(sessionLost);
    this.publish({ type: 'reconnecting', attempt, delayMs, cause });
    this.outbox.release();
  }

  #completeClose(): void {
    this.life.close((ending) => {
      this.publish({ type: 'ended', ...ending });
      this.#outlet.end();
    });
  }

  /**
   * A fatal error (see `DuplexLifecycle.fail`). When the link gave up on a lost session, the
   * session ended incomplete: `ended` says so before the error.
   */
  #fail(error: RtTranslateError, gaveUp: boolean): void {
    if (this.life.over) return;
    this.#serverError.settle();
    if (gaveUp) this.publish({ type: 'ended', ...this.gaveUp() });
    this.life.fail(error);
  }
}
