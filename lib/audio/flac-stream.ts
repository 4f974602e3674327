/**
 * FLAC bytes in, PCM out, as a Transform around `FlacPcmDecoder` (the library's WebAssembly
 * frame decoder; libFLAC for depths above 24 bits).
 *
 * - Emits `format` with the STREAMINFO fields before any audio; the property `streamInfo`
 *   holds them afterwards.
 * - Output: PCM16 LE interleaved at the stream's own rate and channels (depths other than 16
 *   bits are scaled as `FlacPcmDecoder` documents), or, with `to`, converted to that layout by
 *   the conversion chain; a stream that cannot be converted (rate outside `SUPPORTED_RATES`,
 *   more than 2 channels) fails with `UnsupportedError` naming what was found and what is
 *   accepted.
 * - At the end, the sample count and the MD5 of the decoded audio are checked against
 *   STREAMINFO (`verify`, default true): a mismatch fails the stream with `IntegrityError`
 *   after the last audio has been pushed. Input that is not FLAC fails with `ProtocolError`.
 * - The decoder is released at the end and on `destroy()`.
 *
 * Each chunk is decoded before the next is taken (the write callback waits), so backpressure
 * holds and memory stays at one chunk plus the decoder's frame buffer.
 */
import { Transform, type TransformCallback } from 'node:stream';
import { UnsupportedError } from '../errors.js';
import { SUPPORTED_RATES, resolveDescription, type AudioDescription, type ResolvedAudioDescription } from './audio-format.js';
import { planConversion } from './convert.js';
import { FlacPcmDecoder, type FlacStreamInfo } from './flac-decoder.js';
import type { AudioProcessor, AudioTransformOptions } from './processor.js';
import { withEvents } from '../typed-events.js';

export interface FlacDecodeStreamOptions extends AudioTransformOptions {
  /** Convert the decoded audio to this layout (format default `s16le`); default: PCM16 as found. */
  to?: AudioDescription;
  /**
   * Check the sample count and MD5 against STREAMINFO at the end; default true. A frame that
   * does not decode, or a stream that ends inside a frame, fails the stream either way.
   */
  verify?: boolean;
}

/** Decodes a FLAC stream; see the module comment for the policies. */
export class FlacDecodeStream extends withEvents<FlacDecodeStreamEvents>()(Transform) {
  /** STREAMINFO, once read. */
  streamInfo: FlacStreamInfo | undefined;
  /** The layout the audio is converted to, or undefined for PCM16 as found. */
  readonly target: ResolvedAudioDescription | undefined;
  readonly #decoder = new FlacPcmDecoder();
  readonly #verify: boolean;
  #processor: AudioProcessor | undefined;

  constructor(options: FlacDecodeStreamOptions = {}) {
    const target = options.to === undefined ? undefined : resolveDescription(options.to, 'to');
    super({
      readableHighWaterMark: options.readableHighWaterMark,
      writableHighWaterMark: options.writableHighWaterMark,
      objectMode: false,
      decodeStrings: true,
    });
    this.target = target;
    this.#verify = options.verify !== false;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.#decoder.decode(chunk).then(
      (pcm) => {
        try {
          this.#checkFormat();
          this.#output(pcm);
          callback();
        } catch (error) {
          callback(error as Error);
        }
      },
      (error: Error) => callback(error),
    );
  }

  override _flush(callback: TransformCallback): void {
    this.#decoder
      .end()
      .then((pcm) => {
        this.#checkFormat();
        this.#output(pcm);
        if (this.#processor) {
          const tail = this.#processor.flush();
          if (tail.length > 0) this.push(tail);
        }
        if (this.#verify) this.#decoder.verify();
        else this.#decoder.checkFrames();
      })
      .then(() => this.#decoder.close())
      .then(
        () => callback(),
        (error: Error) => callback(error),
      );
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#decoder.close().then(
      () => callback(error),
      () => callback(error),
    );
  }

  #output(pcm: Buffer): void {
    const out = this.#processor && pcm.length > 0 ? this.#processor.process(pcm) : pcm;
    if (out.length > 0) this.push(out);
  }

  /** Once STREAMINFO is known: emits `format` and sets up the conversion. */
  #checkFormat(): void {
    if (this.streamInfo !== undefined) return;
    const info = this.#decoder.streamInfo;
    if (info === undefined) return;
    this.streamInfo = info;
    if (this.target !== undefined) {
      const convertible = (info.channels === 1 || info.channels === 2) && (SUPPORTED_RATES as readonly number[]).includes(info.sampleRate);
      if (!convertible) {
        throw new UnsupportedError(
          `Cannot convert this FLAC stream: found ${info.bitsPerSample}-bit, ${info.channels} channel(s), ${info.sampleRate} Hz; ` +
            `accepted: 1 or 2 channels at one of ${SUPPORTED_RATES.join(', ')} Hz.`,
        );
      }
      this.#processor = planConversion({ format: 's16le', rate: info.sampleRate, channels: info.channels }, this.target).processor;
    }
    this.emit('format', info);
  }
}

export interface FlacDecodeStreamEvents {
  format: [info: FlacStreamInfo];
}
