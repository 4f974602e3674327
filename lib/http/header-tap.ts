/**
 * `HeaderTap`: a pass-through Transform that reads a container's header from the first bytes as
 * they go by. Every chunk is passed on as it comes (nothing waits for the header to be
 * complete); the first `size` bytes are copied aside until `parse` makes sense of them. The
 * header is handed once to `onHeader`, before the chunk that completed it is passed on, and
 * kept in `header`. Bytes that are not the container fail the stream with `parse`'s error; input
 * that ends before the header is complete fails with `incomplete()` when given, else just ends.
 */
import { Transform, type TransformCallback } from 'node:stream';

export interface HeaderTapOptions<T> {
  /** The most bytes the header takes: `parse` sees no more than these. */
  size: number;
  /** The header from the first bytes, or undefined while they are too few; throws when they are not this container. */
  parse(head: Buffer): T | undefined;
  /** The error of an input that ends before the header is complete; without it such an input just ends. */
  incomplete?: () => Error;
  /** Called once with the header, before the chunk that completed it is passed on. */
  onHeader?: (header: T) => void;
  /** Buffer size of each side, in bytes. */
  highWaterMark?: number;
}

export class HeaderTap<T> extends Transform {
  readonly #parse: (head: Buffer) => T | undefined;
  readonly #incomplete: (() => Error) | undefined;
  readonly #onHeader: ((header: T) => void) | undefined;
  readonly #head: Buffer;
  #filled = 0;
  #header: T | undefined;

  constructor(options: HeaderTapOptions<T>) {
    super({ highWaterMark: options.highWaterMark });
    this.#parse = options.parse;
    this.#incomplete = options.incomplete;
    this.#onHeader = options.onHeader;
    this.#head = Buffer.alloc(options.size);
  }

  /** The header, once read. */
  get header(): T | undefined {
    return this.#header;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    if (this.#header === undefined && this.#filled < this.#head.length) {
      try {
        this.#look(chunk);
      } catch (error) {
        callback(error as Error);
        return;
      }
    }
    callback(null, chunk);
  }

  override _flush(callback: TransformCallback): void {
    callback(this.#header === undefined ? this.#incomplete?.() : undefined);
  }

  #look(chunk: Buffer): void {
    this.#filled += chunk.copy(this.#head, this.#filled);
    const header = this.#parse(this.#head.subarray(0, this.#filled));
    if (header === undefined) return;
    this.#header = header;
    this.#onHeader?.(header);
  }
}
