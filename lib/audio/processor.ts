/**
 * The synchronous core shared by the conversion transforms. Each conversion is an
 * `AudioProcessor` (bytes in, bytes out, state kept between calls); `AudioTransform` wraps one
 * as a stream, and `ChainProcessor` runs several in one call so a whole conversion chain costs
 * a single stream hop.
 */
import { Transform, type TransformCallback } from 'node:stream';
import { FrameCutter } from './frames.js';

/** A byte-stream converter with state kept across calls. */
export interface AudioProcessor {
  /**
   * Converts the next piece of input, which may be cut anywhere (inside a sample or frame).
   * Returns the output that is complete so far, possibly empty. The returned buffer belongs to
   * the caller; the input buffer is not kept after the call returns.
   */
  process(chunk: Buffer): Buffer;
  /** End of input: returns what remains (a filter's tail). The processor is done afterwards. */
  flush(): Buffer;
}

export const EMPTY: Buffer = Buffer.alloc(0);

/** Output equals input. */
export class PassThroughProcessor implements AudioProcessor {
  process(chunk: Buffer): Buffer {
    return chunk;
  }
  flush(): Buffer {
    return EMPTY;
  }
}

/**
 * Base for conversions that map each input frame (of `inFrameBytes`) to one output frame (of
 * `outFrameBytes`) with no memory beyond the frame. A frame cut between chunks is carried over
 * (the library's re-framer: a copy of at most `inFrameBytes - 1` bytes, never the backlog). A
 * partial frame left at the end of input carries no complete sample and is dropped.
 */
export abstract class FrameProcessor implements AudioProcessor {
  readonly #frames: FrameCutter;
  #out: Buffer = EMPTY;
  #o = 0;

  constructor(
    readonly inFrameBytes: number,
    readonly outFrameBytes: number,
  ) {
    this.#frames = new FrameCutter(inFrameBytes, { reuse: true });
  }

  /** Converts `frames` whole frames from `src` at `srcOffset` into `dst` at `dstOffset`. */
  protected abstract convert(src: Buffer, srcOffset: number, frames: number, dst: Buffer, dstOffset: number): void;

  process(chunk: Buffer): Buffer {
    const frames = Math.floor((this.#frames.pendingBytes + chunk.length) / this.inFrameBytes);
    const out = frames === 0 ? EMPTY : Buffer.allocUnsafe(frames * this.outFrameBytes);
    this.#out = out;
    this.#o = 0;
    this.#frames.cut(chunk, this.#run);
    this.#out = EMPTY;
    return out;
  }

  readonly #run = (buf: Buffer, offset: number, frames: number): void => {
    this.convert(buf, offset, frames, this.#out, this.#o);
    this.#o += frames * this.outFrameBytes;
  };

  flush(): Buffer {
    this.#frames.clear();
    return EMPTY;
  }
}

/** Runs processors in sequence; the output of one is the input of the next. */
export class ChainProcessor implements AudioProcessor {
  constructor(readonly stages: readonly AudioProcessor[]) {}

  process(chunk: Buffer): Buffer {
    let data = chunk;
    for (const stage of this.stages) {
      if (data.length === 0) return EMPTY;
      data = stage.process(data);
    }
    return data;
  }

  flush(): Buffer {
    let carried: Buffer = EMPTY;
    for (const stage of this.stages) {
      const head = carried.length > 0 ? stage.process(carried) : EMPTY;
      const tail = stage.flush();
      carried = head.length === 0 ? tail : tail.length === 0 ? head : Buffer.concat([head, tail]);
    }
    return carried;
  }
}

/** Options common to the conversion transforms: only the high-water marks are taken. */
export interface AudioTransformOptions {
  /** Bytes buffered on the writable side before `write()` returns false. */
  writableHighWaterMark?: number;
  /** Bytes buffered on the readable side before the transform stops reading. */
  readableHighWaterMark?: number;
}

/** Input converted per processor call by `AudioTransform`; bounds each output buffer. */
const TRANSFORM_PIECE_BYTES = 8192;

/**
 * A Transform around an `AudioProcessor`: byte mode, any chunking in, the processor's output
 * out (empty outputs are not pushed). A large write is converted in pieces of 8 KiB, each
 * pushed as it is done, so no output buffer is more than a few tens of KiB (fresh large buffers
 * cost page faults and collection; small ones are recycled). A processor that throws fails the
 * stream through the callback.
 */
export class AudioTransform extends Transform {
  protected readonly processor: AudioProcessor;

  constructor(processor: AudioProcessor, options: AudioTransformOptions = {}) {
    super({
      writableHighWaterMark: options.writableHighWaterMark,
      readableHighWaterMark: options.readableHighWaterMark,
      objectMode: false,
      decodeStrings: true,
    });
    this.processor = processor;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    try {
      for (let at = 0; at < chunk.length; at += TRANSFORM_PIECE_BYTES) {
        const out = this.processor.process(at === 0 && chunk.length <= TRANSFORM_PIECE_BYTES ? chunk : chunk.subarray(at, at + TRANSFORM_PIECE_BYTES));
        if (out.length > 0) this.push(out);
      }
    } catch (err) {
      callback(err as Error);
      return;
    }
    callback();
  }

  override _flush(callback: TransformCallback): void {
    let out: Buffer;
    try {
      out = this.processor.flush();
    } catch (err) {
      callback(err as Error);
      return;
    }
    if (out.length > 0) this.push(out);
    callback();
  }
}

export { toInt16 } from './resampler-design.js';
