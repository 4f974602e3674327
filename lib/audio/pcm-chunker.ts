/**
 * Re-framing of raw PCM into chunks of one fixed duration, and the byte/duration arithmetic
 * other audio modules share.
 *
 * The realtime service takes PCM16, mono, 24 kHz audio in `input_audio_buffer.append` events
 * whose decoded payload may not exceed 256 KiB; `PcmChunker` turns a byte stream cut anywhere
 * (1-byte writes, odd lengths, multi-megabyte writes) into chunks that each fit one event.
 */
import { Transform, type TransformCallback, type TransformOptions } from 'node:stream';
import { ValidationError } from '../errors.js';
import { MAX_APPEND_AUDIO_BYTES } from '../limits.js';
import { FrameCutter } from './frames.js';
import { describeReceived, intOption } from '../options.js';
import { withEvents } from '../typed-events.js';

/**
 * Largest chunk, in bytes, `PcmChunker` ever emits: 256 KiB, the most decoded audio one
 * `input_audio_buffer.append` event may carry.
 */
export const MAX_PCM_CHUNK_BYTES = MAX_APPEND_AUDIO_BYTES;

/** Layout of interleaved PCM. Every field is optional; defaults are the realtime format. */
export interface PcmFormat {
  /** Sample frames per second, in Hz: an integer from 1000 to 768000. Default 24000. */
  sampleRate?: number;
  /** Interleaved channels per frame: an integer from 1 to 64. Default 1 (mono). */
  channels?: number;
  /** Bytes per sample of one channel: 1, 2, 3, 4 or 8. Default 2 (PCM16). */
  bytesPerSample?: number;
}

/**
 * What happens to a trailing incomplete sample frame at the end of the stream (for example the
 * odd last byte of PCM16):
 * - `'drop'`: the bytes are discarded, `droppedBytes` reports how many, and a `'partial-frame'`
 *   event is emitted before `'end'`;
 * - `'pad'`: zero bytes complete the frame, which is emitted with the final chunk;
 * - `'error'`: the stream fails with a `ValidationError` (field `input`) naming the byte count.
 */
export type PartialFramePolicy = 'drop' | 'pad' | 'error';

/** Payload of the `'partial-frame'` event. */
export interface PartialFrameInfo {
  /** Bytes discarded after the last whole frame (1 to `frameBytes - 1`). */
  droppedBytes: number;
  /** Size of one sample frame, in bytes. */
  frameBytes: number;
}

/**
 * Options of `PcmChunker`. Besides its own keys it accepts the Transform buffer limits and an
 * abort signal; every other stream option is ignored (the chunker always runs in byte mode and
 * hands strings to its own validation).
 */
export interface PcmChunkerOptions extends PcmFormat, Pick<TransformOptions, 'highWaterMark' | 'readableHighWaterMark' | 'writableHighWaterMark' | 'signal'> {
  /**
   * Duration of one output chunk, in milliseconds: a number greater than 0 and at most 60000.
   * Default 40 (short chunks keep latency low). Not together with `chunkBytes`.
   */
  chunkMs?: number;
  /** Size of one output chunk, in bytes: an integer of at least one frame. Not together with `chunkMs`. */
  chunkBytes?: number;
  /**
   * Upper bound on the chunk size, in bytes: an integer from one frame to 262144 (256 KiB).
   * Default 262144. A larger `chunkMs`/`chunkBytes` is capped to the largest whole-frame size
   * within this bound.
   */
  maxChunkBytes?: number;
  /** Policy for a trailing incomplete frame at the end of the stream. Default `'drop'`. */
  partialFrame?: PartialFramePolicy;
}

interface ResolvedFormat {
  sampleRate: number;
  channels: number;
  bytesPerSample: number;
  frameBytes: number;
}

const BYTES_PER_SAMPLE = [1, 2, 3, 4, 8] as const;
const POLICIES: readonly PartialFramePolicy[] = ['drop', 'pad', 'error'];
const MAX_CHUNK_MS = 60_000;

/** A short, safe rendering of a rejected value for an error message. */

function resolveFormat(format: PcmFormat | undefined): ResolvedFormat {
  if (format !== undefined && (typeof format !== 'object' || format === null)) {
    throw new ValidationError('format', 'an object with sampleRate, channels and bytesPerSample', describeReceived(format));
  }
  const sampleRate = intOption(format?.sampleRate, 'sampleRate', { min: 1000, max: 768_000, fallback: 24_000 });
  const channels = intOption(format?.channels, 'channels', { min: 1, max: 64, fallback: 1 });
  const bytesPerSample = format?.bytesPerSample ?? 2;
  if (!(BYTES_PER_SAMPLE as readonly unknown[]).includes(bytesPerSample)) {
    throw new ValidationError('bytesPerSample', `one of ${BYTES_PER_SAMPLE.join(', ')}`, describeReceived(bytesPerSample));
  }
  return { sampleRate, channels, bytesPerSample, frameBytes: channels * bytesPerSample };
}

/** Whole frames in `ms` milliseconds, absorbing binary rounding of decimal durations (0.3 ms). */
function framesForMs(ms: number, sampleRate: number): number {
  return Math.floor(((ms * sampleRate) / 1000) * (1 + 1e-12));
}

/**
 * Bytes of PCM that `ms` milliseconds hold in `format`, rounded down to whole sample frames.
 * `ms` is a finite number >= 0; the format defaults to PCM16 mono 24 kHz
 * (`pcmBytesForMs(40)` is 1920).
 */
export function pcmBytesForMs(ms: number, format: PcmFormat = {}): number {
  const { sampleRate, frameBytes } = resolveFormat(format);
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
    throw new ValidationError('ms', 'a finite number of milliseconds >= 0', describeReceived(ms));
  }
  const bytes = framesForMs(ms, sampleRate) * frameBytes;
  if (!Number.isSafeInteger(bytes)) {
    throw new ValidationError('ms', 'a duration whose byte count is a safe integer', describeReceived(ms));
  }
  return bytes;
}

/**
 * Duration, in milliseconds (not rounded), of the whole sample frames in `bytes` bytes of PCM in
 * `format`; a trailing incomplete frame counts for nothing. `bytes` is a safe integer >= 0; the
 * format defaults to PCM16 mono 24 kHz (`msForPcmBytes(1920)` is 40).
 */
export function msForPcmBytes(bytes: number, format: PcmFormat = {}): number {
  const { sampleRate, frameBytes } = resolveFormat(format);
  if (typeof bytes !== 'number' || !Number.isSafeInteger(bytes) || bytes < 0) {
    throw new ValidationError('bytes', `an integer from 0 to ${Number.MAX_SAFE_INTEGER}`, describeReceived(bytes));
  }
  return (Math.floor(bytes / frameBytes) * 1000) / sampleRate;
}

interface ChunkerSettings {
  frameBytes: number;
  chunkBytes: number;
  policy: PartialFramePolicy;
  streamOptions: TransformOptions;
}

function resolveChunkerOptions(options: PcmChunkerOptions): ChunkerSettings {
  if (typeof options !== 'object' || options === null) {
    throw new ValidationError('options', 'an object of PcmChunker options', describeReceived(options));
  }
  const {
    sampleRate,
    channels,
    bytesPerSample,
    chunkMs,
    chunkBytes,
    maxChunkBytes,
    partialFrame,
    highWaterMark,
    readableHighWaterMark,
    writableHighWaterMark,
    signal,
  } = options;
  const { frameBytes, sampleRate: rate } = resolveFormat({ sampleRate, channels, bytesPerSample });

  const maxBytes = intOption(maxChunkBytes, 'maxChunkBytes', { min: frameBytes, max: MAX_PCM_CHUNK_BYTES, fallback: MAX_PCM_CHUNK_BYTES });
  const cap = maxBytes - (maxBytes % frameBytes);

  if (chunkMs !== undefined && chunkBytes !== undefined) {
    throw new ValidationError('chunkBytes', 'to be left unset when chunkMs is set (give one of chunkMs or chunkBytes)', describeReceived(chunkBytes));
  }
  let requested: number;
  if (chunkBytes !== undefined) {
    requested = intOption(chunkBytes, 'chunkBytes', { min: 1, max: Number.MAX_SAFE_INTEGER, fallback: 0 });
    if (requested < frameBytes) {
      throw new ValidationError('chunkBytes', `an integer of at least one frame (${frameBytes} bytes)`, describeReceived(chunkBytes));
    }
    requested -= requested % frameBytes;
  } else {
    const ms = chunkMs ?? 40;
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms <= 0 || ms > MAX_CHUNK_MS) {
      throw new ValidationError('chunkMs', `a number of milliseconds greater than 0 and at most ${MAX_CHUNK_MS}`, describeReceived(ms));
    }
    const frames = framesForMs(ms, rate);
    if (frames < 1) {
      throw new ValidationError('chunkMs', `a duration of at least one frame (${1000 / rate} ms at ${rate} Hz)`, describeReceived(ms));
    }
    requested = frames * frameBytes;
  }

  const policy = partialFrame ?? 'drop';
  if (!POLICIES.includes(policy)) {
    throw new ValidationError('partialFrame', `one of ${POLICIES.map((p) => `'${p}'`).join(', ')}`, describeReceived(partialFrame));
  }

  const streamOptions: TransformOptions = {};
  if (highWaterMark !== undefined) streamOptions.highWaterMark = highWaterMark;
  if (readableHighWaterMark !== undefined) streamOptions.readableHighWaterMark = readableHighWaterMark;
  if (writableHighWaterMark !== undefined) streamOptions.writableHighWaterMark = writableHighWaterMark;
  if (signal !== undefined) streamOptions.signal = signal;

  return { frameBytes, chunkBytes: Math.min(requested, cap), policy, streamOptions };
}

function invalidInput(chunk: unknown): ValidationError {
  return new ValidationError('input', 'PCM bytes as a Buffer or Uint8Array', describeReceived(chunk));
}

type WriteCallback = (error: Error | null | undefined) => void;

/** The events of `PcmChunker`, beside its base stream's: each event's listener arguments. */
export interface PcmChunkerEvents {
  /** A trailing incomplete frame was dropped at the end (policy `'drop'`). */
  'partial-frame': [info: PartialFrameInfo];
}

/**
 * A Transform from raw interleaved PCM bytes to chunks of `chunkBytes` bytes: whole sample
 * frames only, never more than `maxChunkBytes` (at most 256 KiB), whatever the boundaries of the
 * input writes. At the end of the stream the remaining whole frames are emitted as one shorter
 * final chunk, and a trailing incomplete frame is handled by the `partialFrame` policy.
 *
 * Input is `Buffer` or `Uint8Array`; anything else (strings included) fails the stream with a
 * `ValidationError` (field `input`), reported to the write callback too.
 *
 * Memory and copies (the library's one re-framer, `FrameCutter`): a chunk that lies inside one
 * input buffer is emitted as a `subarray` of it, without copying; only a chunk that spans input
 * buffers is copied, once, into memory the chunker allocates in slabs of about 64 KiB and never
 * reuses (a chunk kept by a consumer keeps its slab alive). Pending input, less than one chunk,
 * stays a view of its input until the next write (the end of the stream hands it out as is).
 * Total work is proportional to the bytes written; writes buffered while the reader was behind
 * are cut in one call (`_writev`).
 *
 * Aliasing: output chunks may share memory with the caller's input buffers. Callers that reuse
 * or mutate an input buffer after writing it must write a copy instead.
 *
 * Backpressure is the standard Transform behaviour: once the readable side holds
 * `readableHighWaterMark` bytes, the write callback waits for the consumer and `write()` returns
 * false when the writable side is full. One large write is sliced at once, as views of that
 * write, so it adds no copy of its bytes.
 *
 * Chunk boundaries reach consumers that take `'data'` events or are piped/`pipeline`d into a
 * Writable. Async iteration (`for await`) of any byte-mode Readable calls `read()`, which may
 * join buffered chunks: consumers that rely on the chunk size should not iterate.
 */
export class PcmChunker extends withEvents<PcmChunkerEvents>()(Transform) {
  readonly #chunkBytes: number;
  readonly #frameBytes: number;
  readonly #policy: PartialFramePolicy;
  /** The re-framer: input not yet emitted (less than a chunk) is copied into its memory. */
  readonly #cutter: FrameCutter;
  /** A `_writev` callback waiting for the reader. */
  #heldWrite: ((error?: Error | null) => void) | undefined;
  #droppedBytes = 0;

  /** Throws `ValidationError` naming the field for any invalid option; `options` is not modified. */
  constructor(options: PcmChunkerOptions = {}) {
    const settings = resolveChunkerOptions(options);
    super({
      ...settings.streamOptions,
      objectMode: false,
      readableObjectMode: false,
      writableObjectMode: false,
      decodeStrings: false,
    });
    this.#chunkBytes = settings.chunkBytes;
    this.#frameBytes = settings.frameBytes;
    this.#policy = settings.policy;
    this.#cutter = new FrameCutter(settings.chunkBytes, { lazyTail: true });
  }

  /** Size of every output chunk but possibly the last, in bytes (a whole number of frames). */
  get chunkBytes(): number {
    return this.#chunkBytes;
  }

  /** Size of one sample frame (`channels * bytesPerSample`), in bytes. */
  get frameBytes(): number {
    return this.#frameBytes;
  }

  /** Bytes of a trailing incomplete frame dropped at the end of the stream; 0 until then. */
  get droppedBytes(): number {
    return this.#droppedBytes;
  }

  /**
   * Writable `write`, with values that are neither bytes nor strings rejected by a typed error
   * (through the callback and `destroy`) instead of the runtime's thrown TypeError.
   */
  override write(chunk: unknown, encoding?: BufferEncoding | WriteCallback, callback?: WriteCallback): boolean {
    if (typeof chunk === 'string' || chunk instanceof Uint8Array) {
      return super.write(chunk, encoding as BufferEncoding, callback);
    }
    const error = invalidInput(chunk);
    const cb = typeof encoding === 'function' ? encoding : callback;
    this.destroy(error);
    if (cb) process.nextTick(cb, error);
    return false;
  }

  override _transform(chunk: unknown, _encoding: BufferEncoding, callback: TransformCallback): void {
    if (!(chunk instanceof Uint8Array)) return callback(invalidInput(chunk));
    this.#cutter.cut(chunk, this.#emit);
    callback();
  }

  /**
   * Writes buffered while the reader was behind are cut in one call; the callback then waits,
   * as a Transform's does, while the readable side is over its high-water mark.
   */
  override _writev(chunks: Array<{ chunk: unknown }>, callback: (error?: Error | null) => void): void {
    for (const { chunk } of chunks) {
      if (!(chunk instanceof Uint8Array)) return callback(invalidInput(chunk));
      this.#cutter.cut(chunk, this.#emit);
    }
    if (this.readableLength < this.readableHighWaterMark) callback();
    else this.#heldWrite = callback;
  }

  override _read(size: number): void {
    const held = this.#heldWrite;
    this.#heldWrite = undefined;
    held?.();
    super._read(size);
  }

  override _flush(callback: TransformCallback): void {
    const queued = this.#cutter.pendingBytes;
    const partial = queued % this.#frameBytes;
    const whole = queued - partial;
    if (partial === 0) {
      if (queued > 0) this.push(this.#cutter.takePending());
      return callback();
    }
    switch (this.#policy) {
      case 'error':
        this.#cutter.clear();
        return callback(
          new ValidationError(
            'input',
            `whole ${this.#frameBytes}-byte sample frames (partialFrame: 'error')`,
            `${partial} trailing byte${partial === 1 ? '' : 's'} after the last whole frame`,
          ),
        );
      case 'pad':
        this.push(this.#cutter.takePending(whole + this.#frameBytes));
        return callback();
      case 'drop': {
        if (whole > 0) this.push(this.#cutter.takePending(whole));
        this.#cutter.clear();
        this.#droppedBytes = partial;
        const info: PartialFrameInfo = { droppedBytes: partial, frameBytes: this.#frameBytes };
        this.emit('partial-frame', info);
        return callback();
      }
    }
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#cutter.clear();
    this.#heldWrite = undefined;
    callback(error);
  }

  /** Pushes each chunk of a run of whole chunks, as views. */
  readonly #emit = (buf: Buffer, offset: number, chunks: number): void => {
    const size = this.#chunkBytes;
    for (let i = 0, at = offset; i < chunks; i++, at += size) this.push(buf.subarray(at, at + size));
  };
}
