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
  /** The wire message carrying `piece`. */
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
        ? this.#replay.unsent + this.#link.bufferedAmount <= this.#maxSocketBufferBytes
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

  /** Hands queued audio to the socket, one message at a time, while its buffer is under the bound. */
  pump(): void {
    if (this.#link.status !== 'ready') return;
    // The socket's buffer is read only while something is queued.
    while (this.#replay.unsent > 0 && this.#link.bufferedAmount <= this.#maxSocketBufferBytes) {
      const piece = this.#replay.peek(this.#maxPieceBytes)!;
      const length = piece.length;
      const message = this.#encode(piece);
      const sent = this.#link.send(
        message,
        (error) => {
          this.#releaseMessage?.(message);
          if (error) return; // the connection is going down: its end reports the cause
          this.#sent?.(length);
          // Usually nothing is queued and no write is held (a live source's frame went out at
          // once): then a completion costs no pass over the queue.
          if (this.#replay.unsent > 0) this.pump();
          if (this.#held) this.release();
        },
        this.#binary,
      );
      if (!sent) {
        this.#releaseMessage?.(message);
        break;
      }
      this.#replay.advance(length);
      this.#handed?.(this.#replay.sent);
    }
    this.#trim();
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
