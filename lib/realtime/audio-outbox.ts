/**
 * The sending half of a realtime audio stream: input accepted from the writer is kept in a
 * `ReplayBuffer`, handed to the session's socket one message at a time while the socket's send
 * buffer is under its bound, and kept after sending until the owner says it can no longer be
 * needed (answered, or past the replay bound). The writer's callback is held while there is no
 * room: in the socket when connected, in the replay bound while reconnecting. How audio is
 * framed on the wire (a JSON append, a binary frame) is the owner's `encode`.
 */
import { ReplayBuffer } from './replay-buffer.js';
import type { SessionLink } from './session-link.js';

/** What the outbox uses of the session: whether it is up, its send buffer, and sending. */
export type OutboxLink = Pick<SessionLink, 'status' | 'bufferedAmount' | 'send'>;

export interface AudioOutboxOptions {
  /** Largest audio payload of one message, in bytes (a multiple of the frame size). */
  maxPieceBytes: number;
  /** The socket's send buffer above which nothing more is handed over (and writes wait). */
  maxSocketBufferBytes: number;
  /** Input kept for a replay; undefined when there is no reconnecting (sent audio is forgotten at once). */
  maxReplayBytes: number | undefined;
  /** The wire message carrying `piece`; a string must be ASCII (its length is its size in bytes). */
  encode(piece: Buffer): string | Buffer;
  /**
   * The frame kind of every message: binary (true), or text (false), in which case a Buffer from
   * `encode` is the UTF-8 bytes of the text.
   */
  binary: boolean;
  /**
   * `encode` copies the piece (the message never refers to the input's memory), so released
   * input memory may be reused at once. Default false: a message that is a view of the piece
   * may sit in the socket's queue after its bytes are released.
   */
  encodeCopies?: boolean;
  /**
   * The socket is done with `message` (it was written, or never will be): its memory may be
   * used again. Called once per message from `encode`.
   */
  release?(message: string | Buffer): void;
  /** `length` bytes ending at input offset `end` were handed to the socket now. */
  handed?(end: number): void;
  /** `length` bytes were taken by the kernel (a send completed). */
  sent?(length: number): void;
}

const SETTLED = Promise.resolve();
/** How often an unconfirmed message is looked at again once every send must be reported, in ms. */
const CONFIRM_POLL_MS = 10;

export class AudioOutbox {
  readonly #link: OutboxLink;
  // The options, each in a field of its own. The owner builds its options by spreading its
  // framing into them, and V8's IC log (`node --log-ic`) showed every read from that object
  // megamorphic: a stub-cache lookup, several times per message on the send path.
  readonly #maxPieceBytes: number;
  readonly #maxSocketBufferBytes: number;
  readonly #maxReplayBytes: number | undefined;
  readonly #encode: (piece: Buffer) => string | Buffer;
  readonly #binary: boolean;
  readonly #releaseMessage: ((message: string | Buffer) => void) | undefined;
  readonly #handed: ((end: number) => void) | undefined;
  readonly #sent: ((length: number) => void) | undefined;
  readonly #replay: ReplayBuffer;
  #held: ((error?: Error | null) => void) | undefined;
  /** The earliest offset the owner may still send again; set with `keepFrom()`. */
  #keepFrom = 0;
  #pumpQueued = false;
  /**
   * Bytes of messages sent with a completion callback that has not run yet. A send completes
   * after its bytes have left the socket's buffer, so with `#unconfirmedBytes` this is never
   * less than what the outbox's messages hold of the socket's `bufferedAmount`. While the sum is
   * under the bound there is room without asking the socket, whose `bufferedAmount` is a walk
   * through the socket's objects that showed in profiles of many sessions; it is asked only when
   * the sum says there may be no room.
   */
  #inFlight = 0;
  /**
   * A message sent without a completion callback that the socket had not written out when the
   * send returned (its bytes, and the audio bytes it carries): the next send's completion
   * confirms it, since a socket writes in order.
   */
  #unconfirmedBytes = 0;
  #unconfirmedLength = 0;
  /** Every send reports its completion from now on (see `reportEverySend()`). */
  #reportEverySend = false;

  constructor(link: OutboxLink, options: AudioOutboxOptions) {
    this.#link = link;
    this.#maxPieceBytes = options.maxPieceBytes;
    this.#maxSocketBufferBytes = options.maxSocketBufferBytes;
    this.#maxReplayBytes = options.maxReplayBytes;
    this.#encode = options.encode;
    this.#binary = options.binary;
    this.#releaseMessage = options.release;
    this.#handed = options.handed;
    this.#sent = options.sent;
    this.#replay = new ReplayBuffer(undefined, { recycle: options.encodeCopies === true });
  }

  /** Offset of the next byte to hand to the socket. */
  get sent(): number {
    return this.#replay.sent;
  }

  /** Bytes accepted since the stream began. */
  get end(): number {
    return this.#replay.end;
  }

  /** First offset still kept. */
  get start(): number {
    return this.#replay.start;
  }

  /** Bytes kept in memory (sent but possibly needed again, and not sent yet). */
  get retained(): number {
    return this.#replay.retained;
  }

  /** Bytes accepted but not yet handed to the socket. */
  get unsent(): number {
    return this.#replay.unsent;
  }

  /** Nothing is left to send, in the stream or in the socket's buffer. */
  get drained(): boolean {
    return this.#replay.unsent === 0 && this.#link.bufferedAmount === 0;
  }

  /**
   * Takes `pcm` (copied) and sends what the socket has room for: at once when a whole
   * `maxPieceBytes` is queued, else once the current run of synchronous writes is over (a
   * microtask later), so that many small writes in a row leave as a few full appends rather than
   * one message each. A writer that writes one frame at a time at real time still sees each
   * frame sent at once.
   */
  accept(pcm: Buffer): void {
    if (pcm.length === 0) return;
    this.#replay.push(pcm);
    if (this.#replay.unsent >= this.#maxPieceBytes) {
      this.pump();
      return;
    }
    if (this.#pumpQueued) return;
    this.#pumpQueued = true;
    // A settled promise's reaction: a microtask without the per-call closure and async resource
    // of `queueMicrotask`, paid on every write of a live source.
    SETTLED.then(this.#queuedPump);
  }

  readonly #queuedPump = (): void => {
    this.#pumpQueued = false;
    this.pump();
  };

  /** Holds a writer's callback until there is room (`release()` checks again). */
  hold(callback: (error?: Error | null) => void): void {
    this.#held = callback;
    this.release();
  }

  /** Calls back the held write if there is room now. */
  release(): void {
    const callback = this.#held;
    if (!callback) return;
    const status = this.#link.status;
    const room =
      status === 'ready'
        ? this.#socketHasRoom(this.#replay.unsent)
        : (status === 'connecting' || status === 'waiting') && this.#replay.retained <= (this.#maxReplayBytes ?? 0);
    if (!room) return;
    this.#held = undefined;
    callback();
  }

  /** Settles a held write with `error` (the stream is failing or destroyed). */
  abandon(error: Error | null): void {
    const callback = this.#held;
    this.#held = undefined;
    callback?.(error);
  }

  /**
   * From now on every send reports its completion (`sent`, then another look at the queue and
   * the held write), because something waits on it (the ending after `end()`). A message already
   * sent without a callback is confirmed once the socket has written it out.
   */
  reportEverySend(): void {
    this.#reportEverySend = true;
    this.#confirmWhenWritten();
  }

  /**
   * Hands queued audio to the socket, one message at a time, while its buffer is under the bound.
   *
   * A send asks for a completion callback only when something waits on it: a write held for
   * room, a message whose memory `release` takes back, a send still in flight or unconfirmed
   * (completions confirm in order), `reportEverySend()`, or a message as large as half the
   * socket bound. A live source's message on an idle socket waits on nothing: it is written to
   * the kernel before `send` returns, which the socket's empty buffer then shows, and it is
   * counted `sent` at once. A completion callback is no small thing at 50 messages a second per
   * session: the closure, and the socket's write queue keeping it in a list of its own until the
   * next tick. With every append sent without one, the stream measured 1.22 times a bare
   * client's CPU at 50 sessions, against 1.30 with them (`npm run bench -- concurrency`, three
   * pairs each). The half bound keeps a writer from waiting on a message nothing reports: an
   * unconfirmed message (one at most) leaves room for the next, which does.
   */
  pump(): void {
    if (this.#link.status !== 'ready') return;
    while (this.#replay.unsent > 0 && this.#socketHasRoom(0)) {
      const piece = this.#replay.peek(this.#maxPieceBytes)!;
      const length = piece.length;
      const message = this.#encode(piece);
      const bytes = message.length; // a string here is ASCII (base64 in JSON): its length is its bytes
      const quiet =
        this.#inFlight === 0 &&
        this.#unconfirmedBytes === 0 &&
        this.#held === undefined &&
        !this.#reportEverySend &&
        bytes * 2 <= this.#maxSocketBufferBytes &&
        (typeof message === 'string' || this.#releaseMessage === undefined);
      const sent = quiet ? this.#link.send(message, undefined, this.#binary) : this.#link.send(message, this.#completion(message, bytes, length), this.#binary);
      if (!sent) {
        this.#releaseMessage?.(message);
        break;
      }
      this.#replay.advance(length);
      this.#handed?.(this.#replay.sent);
      if (!quiet) {
        this.#inFlight += bytes;
        continue;
      }
      // A string cannot change: the socket's copy of it is its own.
      this.#releaseMessage?.(message);
      if (this.#link.bufferedAmount === 0) {
        this.#sent?.(length);
      } else {
        this.#unconfirmedBytes = bytes;
        this.#unconfirmedLength = length;
      }
    }
    this.#trim();
  }

  /**
   * After `reportEverySend()`, a message sent without a callback and still in the socket's
   * buffer is confirmed once the buffer is empty: by the next completion when a send is in
   * flight, else by looking again every few milliseconds while the session is up (an ending
   * with no padding to send after it; a dropped session forgets it).
   */
  #confirmWhenWritten(): void {
    if (this.#unconfirmedBytes === 0 || this.#inFlight > 0 || this.#link.status !== 'ready') return;
    if (this.#link.bufferedAmount > 0) {
      setTimeout(() => this.#confirmWhenWritten(), CONFIRM_POLL_MS).unref();
      return;
    }
    this.#sent?.(this.#takeUnconfirmed());
  }

  /** Forgets the unconfirmed message (written out, or never to be); returns the audio bytes it carried. */
  #takeUnconfirmed(): number {
    const length = this.#unconfirmedLength;
    this.#unconfirmedBytes = 0;
    this.#unconfirmedLength = 0;
    return length;
  }

  /** The callback of a send that reports its completion. */
  #completion(message: string | Buffer, bytes: number, length: number): (error?: Error) => void {
    return (error) => {
      this.#inFlight -= bytes;
      this.#releaseMessage?.(message);
      const confirmed = this.#takeUnconfirmed();
      if (error) return; // the connection is going down: its end reports the cause
      this.#sent?.(confirmed + length);
      // Usually nothing is queued and no write is held: then a completion costs no pass over the queue.
      if (this.#replay.unsent > 0) this.pump();
      if (this.#held) this.release();
    };
  }

  /** Whether `queued` more bytes leave the socket's send buffer within its bound. */
  #socketHasRoom(queued: number): boolean {
    const bound = this.#maxSocketBufferBytes - queued;
    return this.#inFlight + this.#unconfirmedBytes <= bound || this.#link.bufferedAmount <= bound;
  }

  /**
   * The owner will never send again what lies before `offset` (it was answered): it is
   * forgotten, as is sent audio beyond the replay bound.
   */
  keepFrom(offset: number): void {
    if (offset <= this.#keepFrom) return;
    this.#keepFrom = offset;
    this.#trim();
  }

  /** Sends again from `offset` (clamped to what is kept); returns the bytes to be sent again. */
  rewind(offset: number): number {
    // The session is lost: a message its socket had not written out is not confirmed by the next one's.
    this.#takeUnconfirmed();
    return this.#replay.rewind(offset);
  }

  #trim(): void {
    const replay = this.#replay;
    const bound = this.#maxReplayBytes;
    if (bound === undefined) {
      replay.release(replay.sent);
      return;
    }
    replay.release(this.#keepFrom);
    if (replay.sent - replay.start > bound) replay.release(replay.sent - bound);
  }
}
