/**
 * The one re-framer: cuts a byte stream, written in pieces of any size, into fixed-size frames,
 * for every chunker, detector and packetizer of the library. Frames that lie inside one piece
 * are handed out where they are (no copy); only a frame split across pieces is copied, once,
 * into the cutter's assembly memory. Less than a frame is ever kept between calls.
 * Pending bytes are copied at once, or (`lazyTail`) kept as a view until the next call.
 *
 * Two ways to take the frames: `cut(piece, run)` hands out runs of whole frames (a buffer, an
 * offset and a frame count: at most two calls per piece), for code that works on many frames at
 * once; `forEachFrame(piece, fn)` hands out one frame at a time as a buffer of its own (a view),
 * for code that emits frames. Assembled frames live in slabs the cutter allocates and never
 * reuses, so a frame handed out stays valid for as long as its receiver keeps it (with
 * `reuse: true`, a detector that only reads frames during the call saves those allocations).
 */
import { ValidationError } from '../errors.js';
import { describeReceived } from '../options.js';

/** Assembled frames are carved from slabs of about this size (a whole number of frames). */
const SLAB_BYTES = 64 * 1024;

export interface FrameCutterOptions {
  /**
   * Assemble split frames in one buffer reused for every such frame: only for receivers that
   * are done with a frame when their callback returns. Default false.
   */
  reuse?: boolean;
  /**
   * Keep the rest of a piece as a view of it until the next call (when it is copied), instead
   * of copying it at once: a stream that ends there hands it out without a copy. Only where
   * the writer does not touch a piece after giving it (the stream contract). Default false.
   */
  lazyTail?: boolean;
}

export class FrameCutter {
  readonly frameBytes: number;
  readonly #reuse: boolean;
  readonly #lazyTail: boolean;
  /** Where the frame being assembled goes: `#slab[#at, #at + frameBytes)`. */
  #slab: Buffer;
  #at = 0;
  #pending = 0;
  /** With `lazyTail`: the pending bytes, still a view of the piece they came from. */
  #tail: Buffer | undefined;

  constructor(frameBytes: number, options: FrameCutterOptions = {}) {
    if (!Number.isSafeInteger(frameBytes) || frameBytes < 1) throw new ValidationError('frameBytes', 'an integer >= 1', describeReceived(frameBytes));
    this.frameBytes = frameBytes;
    this.#reuse = options.reuse === true;
    this.#lazyTail = options.lazyTail === true;
    this.#slab = this.#newSlab();
  }

  /** Bytes waiting for the rest of their frame (0 to frameBytes - 1). */
  get pendingBytes(): number {
    return this.#pending;
  }

  /**
   * Calls `run(buf, offset, frames)` for the whole frames `piece` completes, in order: first the
   * frame assembled from the pending bytes and the head of `piece` (one frame, in the cutter's
   * memory), then every whole frame inside `piece` as one run (`buf` is `piece`). The rest of
   * `piece` (less than a frame) is kept for the next call.
   */
  cut(piece: Uint8Array, run: (buf: Buffer, offset: number, frames: number) => void): void {
    const fb = this.frameBytes;
    const length = piece.byteLength;
    let offset = 0;
    if (this.#tail !== undefined) {
      this.#slab.set(this.#tail, this.#at);
      this.#tail = undefined;
    }
    if (this.#pending > 0) {
      offset = Math.min(fb - this.#pending, length);
      this.#slab.set(offset === length ? piece : piece.subarray(0, offset), this.#at + this.#pending);
      this.#pending += offset;
      if (this.#pending < fb) return;
      const slab = this.#slab;
      const at = this.#at;
      this.#next();
      run(slab, at, 1);
    }
    const whole = Math.floor((length - offset) / fb);
    if (whole > 0) {
      run(Buffer.isBuffer(piece) ? piece : Buffer.from(piece.buffer, piece.byteOffset, length), offset, whole);
      offset += whole * fb;
    }
    if (offset < length) {
      const rest = offset === 0 ? piece : piece.subarray(offset);
      if (this.#lazyTail) this.#tail = Buffer.isBuffer(rest) ? rest : Buffer.from(rest.buffer, rest.byteOffset, rest.byteLength);
      else this.#slab.set(rest, this.#at);
      this.#pending = length - offset;
    }
  }

  /**
   * Calls `fn(frame)` for each whole frame `piece` completes, in order, each frame a buffer of
   * its own (a view of `piece`, or of the cutter's memory for a frame split across pieces).
   */
  forEachFrame(piece: Uint8Array, fn: (frame: Buffer) => void): void {
    const fb = this.frameBytes;
    this.cut(piece, (buf, offset, frames) => {
      for (let i = 0, at = offset; i < frames; i++, at += fb) fn(buf.subarray(at, at + fb));
    });
  }

  /**
   * The pending bytes (fewer than a frame) as a buffer of their own, completed to `size` bytes
   * with `fill` when `size` is given (for padding a last frame), and forgets them.
   */
  takePending(size = this.#pending, fill = 0): Buffer {
    let out: Buffer;
    if (this.#tail !== undefined && size <= this.#pending) {
      out = this.#tail.subarray(0, size);
    } else {
      out = Buffer.alloc(size, fill);
      if (this.#tail !== undefined) this.#tail.copy(out, 0, 0, Math.min(this.#pending, size));
      else this.#slab.copy(out, 0, this.#at, this.#at + Math.min(this.#pending, size));
    }
    this.clear();
    return out;
  }

  /** Forgets the pending bytes. */
  clear(): void {
    this.#pending = 0;
    this.#tail = undefined;
  }

  /** Moves the assembly place past a completed frame (a new slab when this one is full). */
  #next(): void {
    this.#pending = 0;
    if (this.#reuse) return;
    this.#at += this.frameBytes;
    if (this.#at + this.frameBytes > this.#slab.length) {
      this.#slab = this.#newSlab();
      this.#at = 0;
    }
  }

  #newSlab(): Buffer {
    const frames = this.#reuse ? 1 : Math.max(1, Math.floor(SLAB_BYTES / this.frameBytes));
    return Buffer.allocUnsafe(frames * this.frameBytes);
  }
}
