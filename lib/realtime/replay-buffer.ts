/**
 * The input audio a realtime stream still answers for: everything accepted from the writer that
 * the service has not been sent yet, and what was sent but may have to be sent again after a
 * reconnect (the service acknowledges nothing). Offsets are bytes of the input timeline since the
 * stream began.
 *
 *   start ........ sent ........ end
 *   | kept for replay | not sent yet |
 *
 * Accepted audio is copied into fixed-size blocks, so a writer may reuse its buffers once its
 * write has called back, tiny writes cost no allocation each, and a piece to send is always a
 * view of one block (never a concatenation).
 */

/** Size of one storage block: about 1.4 s of PCM16 mono 24 kHz. */
export const REPLAY_BLOCK_BYTES = 64 * 1024;

/**
 * Released blocks kept for reuse, shared by every stream of the process (at most
 * `MAX_SPARE_BLOCKS`, 16 MiB, reached only by servers of many sessions). A block lives for as
 * long as its audio is unanswered, seconds, so fresh blocks would outlive V8's young generation
 * and be freed only by full collections, which the external memory of many sessions then
 * triggers several times a second. Reuse keeps that memory out of the collector's way: at 200
 * sessions in `npm run bench -- concurrency`, a third fewer full collections and about 0.2 less
 * CPU relative to a bare client.
 */
const spareBlocks: Buffer[] = [];
const MAX_SPARE_BLOCKS = 256;

export interface ReplayBufferOptions {
  /**
   * Reuse released blocks. Only where nothing made from a `peek()` still refers to the block's
   * memory once its bytes are released: the piece is encoded into a message of its own (the
   * realtime stream's base64 text), not sent as a view that a socket may still be queueing.
   * Only for blocks of `REPLAY_BLOCK_BYTES` (other sizes never recycle). Default false.
   */
  recycle?: boolean;
}

export class ReplayBuffer {
  readonly #blockBytes: number;
  readonly #blocks: Buffer[] = [];
  /** Offset of the first byte of `#blocks[0]`. */
  #blocksStart = 0;
  #start = 0;
  #sent = 0;
  #end = 0;
  /** Bytes used in the last block. */
  #tailFill = 0;

  readonly #recycle: boolean;

  constructor(blockBytes = REPLAY_BLOCK_BYTES, options: ReplayBufferOptions = {}) {
    this.#blockBytes = blockBytes;
    this.#recycle = options.recycle === true && blockBytes === REPLAY_BLOCK_BYTES;
  }

  /** First offset still kept. */
  get start(): number {
    return this.#start;
  }

  /** Offset of the next byte to send. */
  get sent(): number {
    return this.#sent;
  }

  /** Bytes accepted since the stream began. */
  get end(): number {
    return this.#end;
  }

  /** Bytes kept: sent but replayable, and not sent yet. */
  get retained(): number {
    return this.#end - this.#start;
  }

  /** Memory held in blocks, in bytes (what is retained, rounded up to whole blocks). */
  get allocatedBytes(): number {
    return this.#blocks.length * this.#blockBytes;
  }

  /** Bytes accepted and not sent yet. */
  get unsent(): number {
    return this.#end - this.#sent;
  }

  /** Appends a copy of `pcm`. */
  push(pcm: Uint8Array): void {
    let offset = 0;
    while (offset < pcm.length) {
      let block = this.#blocks.at(-1);
      if (!block || this.#tailFill === this.#blockBytes) {
        if (!block) this.#blocksStart = this.#end;
        block = (this.#recycle ? spareBlocks.pop() : undefined) ?? Buffer.allocUnsafe(this.#blockBytes);
        this.#blocks.push(block);
        this.#tailFill = 0;
      }
      const n = Math.min(pcm.length - offset, this.#blockBytes - this.#tailFill);
      // A live source's write fits whole: copied as it is, without a view of it.
      block.set(n === pcm.length ? pcm : pcm.subarray(offset, offset + n), this.#tailFill);
      this.#tailFill += n;
      offset += n;
      this.#end += n;
    }
  }

  /** A view of the next unsent bytes, at most `maxBytes` and never across a block; undefined when all is sent. */
  peek(maxBytes: number): Buffer | undefined {
    if (this.#sent >= this.#end) return undefined;
    const relative = this.#sent - this.#blocksStart;
    const index = Math.floor(relative / this.#blockBytes);
    const at = relative - index * this.#blockBytes;
    const n = Math.min(maxBytes, this.#end - this.#sent, this.#blockBytes - at);
    return this.#blocks[index]!.subarray(at, at + n);
  }

  /** Marks `n` more bytes as sent. */
  advance(n: number): void {
    this.#sent = Math.min(this.#end, this.#sent + n);
  }

  /**
   * Forgets what was sent before `offset` (never what is unsent). Returns the bytes forgotten.
   */
  release(offset: number): number {
    const to = Math.min(offset, this.#sent);
    if (to <= this.#start) return 0;
    const released = to - this.#start;
    this.#start = to;
    while (this.#blocks.length > 1 && this.#blocksStart + this.#blockBytes <= this.#start) {
      const block = this.#blocks.shift()!;
      // Cleared first: a spare block holds no caller's audio (a heap dump shows none).
      if (this.#recycle && spareBlocks.length < MAX_SPARE_BLOCKS) spareBlocks.push(block.fill(0));
      this.#blocksStart += this.#blockBytes;
    }
    return released;
  }

  /** Sends again from `offset` (clamped to what is kept). Returns the bytes to be sent again. */
  rewind(offset: number): number {
    const to = Math.min(this.#sent, Math.max(this.#start, offset));
    const again = this.#sent - to;
    this.#sent = to;
    return again;
  }
}
