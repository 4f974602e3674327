/**
 * FLAC bytes in (in chunks of any size), PCM16 LE interleaved out, on the fly, with the
 * integrity checks the format allows: the total sample count and the MD5 of the decoded audio
 * against STREAMINFO.
 *
 * The frames are decoded by the library's own decoder (`flac-frames.ts`, a WebAssembly kernel
 * that writes PCM16 and checks every frame's CRCs) for 4 to 24 bits per sample and up to 8
 * channels: every stream the service makes. It takes a half to four fifths of libFLAC's CPU and is
 * stricter: a damaged frame fails the stream once the audio before it is out, where libFLAC
 * skips to the next frame it can find.
 *
 * Deeper streams, and engines without WebAssembly SIMD, go to `@wasm-audio-decoders/flac`
 * (libFLAC built to WebAssembly), loaded only then. It hands
 * back Float32 channel data divided by 2^(bits-1) - 1 (so the most negative sample comes out a
 * little below -1.0). `Math.round(x * (2^(bits-1) - 1))` recovers the original integers exactly
 * for every depth up to 24 bits: the float32 rounding error times the scale stays below 0.25.
 * That exactness is what makes the MD5 check possible (verified over all 65536 16-bit values
 * in the tests).
 *
 * It splits frames with `codec-parser`, which drops a final frame of 13 bytes or less (see
 * `end()` for the workaround). Importing the decoder installs no process-wide handler. It does print to `console.error` when
 * a frame fails to decode; the failure then also surfaces here as an `IntegrityError`.
 */
import { createHash, type Hash } from 'node:crypto';
import { endianness } from 'node:os';
import type { FLACDecoder, FLACDecodedAudio } from '@wasm-audio-decoders/flac';
import { IntegrityError, ProtocolError, UsageError } from '../errors.js';
import { FlacFrameDecoder, kernelDecodes, type FlacStreamInfo } from './flac-frames.js';
import { alignKernel, firKernel } from './wasm/fir.js';

export type { FlacStreamInfo } from './flac-frames.js';

/** The `fLaC` marker plus the STREAMINFO metadata block, in bytes. */
export const FLAC_STREAMINFO_END = 42;

const UNKNOWN_MD5 = '0'.repeat(32);

/** Fed after the last byte; see `FlacPcmDecoder.end`. */
const END_PADDING = new Uint8Array(32);

/** True when STREAMINFO carries an MD5 (the format writes all zeros for "not computed"). */
export function hasKnownMd5(info: FlacStreamInfo): boolean {
  return info.md5 !== UNKNOWN_MD5;
}

/**
 * Parses STREAMINFO from the first bytes of a FLAC stream. Returns `undefined` while fewer
 * than 42 bytes are available; throws `ProtocolError` when the bytes are not a FLAC stream.
 */
export function parseFlacStreamInfo(bytes: Uint8Array): FlacStreamInfo | undefined {
  const marker = [0x66, 0x4c, 0x61, 0x43];
  for (let i = 0; i < Math.min(4, bytes.length); i++) {
    if (bytes[i] !== marker[i]) throw new ProtocolError('Not a FLAC stream: the data does not start with "fLaC".');
  }
  if (bytes.length < FLAC_STREAMINFO_END) return undefined;
  const b = (i: number): number => bytes[i]!;
  const type = b(4) & 0x7f;
  const length = (b(5) << 16) | (b(6) << 8) | b(7);
  if (type !== 0 || length !== 34) {
    throw new ProtocolError(`Not a valid FLAC stream: the first metadata block is not a 34-byte STREAMINFO (type ${type}, ${length} bytes).`);
  }
  const sampleRate = (b(18) << 12) | (b(19) << 4) | (b(20) >> 4);
  const channels = ((b(20) >> 1) & 0x7) + 1;
  const bitsPerSample = (((b(20) & 1) << 4) | (b(21) >> 4)) + 1;
  const totalSamples = (b(21) & 0xf) * 2 ** 32 + ((b(22) << 24) >>> 0) + ((b(23) << 16) | (b(24) << 8) | b(25));
  return {
    minBlockSize: (b(8) << 8) | b(9),
    maxBlockSize: (b(10) << 8) | b(11),
    minFrameSize: (b(12) << 16) | (b(13) << 8) | b(14),
    maxFrameSize: (b(15) << 16) | (b(16) << 8) | b(17),
    sampleRate,
    channels,
    bitsPerSample,
    totalSamples,
    md5: Buffer.from(bytes.subarray(26, 42)).toString('hex'),
  };
}

const LITTLE_ENDIAN = endianness() === 'LE';

/**
 * Float32 channel data from the decoder (samples / (2^(bits-1) - 1)) back to integers at `bits`
 * depth, exactly for depths up to 24 (round to nearest, clamped), then written as PCM16 LE interleaved. Depths above 16 bits are shifted down
 * (arithmetic shift, i.e. truncated), depths below shifted up. `hashInto` receives the samples
 * at their own depth, little-endian, `ceil(bits / 8)` bytes each: the bytes STREAMINFO's MD5 covers.
 */
export function floatToPcm16(channelData: readonly Float32Array[], samples: number, bits: number, hashInto?: Hash): Buffer {
  const channels = channelData.length;
  const max = 2 ** (bits - 1) - 1;
  const min = -max - 1;
  const scale = max;
  const total = samples * channels;
  const out = new Int16Array(total);
  const width = Math.ceil(bits / 8);
  const raw = hashInto && bits !== 16 ? Buffer.allocUnsafe(total * width) : undefined;
  const shift = bits - 16;
  if (bits === 16 && LITTLE_ENDIAN) {
    const pcm = floatToPcm16Kernel(channelData, samples, scale);
    if (pcm) {
      hashInto?.update(pcm);
      return pcm;
    }
  }
  for (let c = 0; c < channels; c++) {
    const data = channelData[c]!;
    if (bits === 16) {
      // The common case, kept tight: the products sit within 0.002 of an integer.
      for (let i = 0, o = c; i < samples; i++, o += channels) {
        const x = data[i]! * scale;
        out[o] = x >= 32767 ? 32767 : x <= -32768 ? -32768 : x >= 0 ? (x + 0.5) | 0 : (x - 0.5) | 0;
      }
      continue;
    }
    for (let i = 0, o = c; i < samples; i++, o += channels) {
      let v = Math.round(data[i]! * scale);
      if (v < min) v = min;
      else if (v > max) v = max;
      out[o] = shift > 0 ? v >> shift : shift < 0 ? v << -shift : v;
      if (raw) raw.writeIntLE(v, o * width, width);
    }
  }
  let pcm = Buffer.from(out.buffer, out.byteOffset, out.byteLength);
  if (!LITTLE_ENDIAN) pcm = Buffer.from(pcm).swap16();
  if (hashInto) hashInto.update(raw ?? pcm);
  return pcm;
}

/** The 16-bit case in the WebAssembly kernel (the same rounding); undefined without it. */
function floatToPcm16Kernel(channelData: readonly Float32Array[], samples: number, scale: number): Buffer | undefined {
  const kernel = firKernel();
  if (!kernel) return undefined;
  const channels = channelData.length;
  const srcBytes = alignKernel(samples * 4);
  const base = kernel.scratch(srcBytes + samples * channels * 2);
  const dst = base + srcBytes;
  for (let c = 0; c < channels; c++) {
    const data = channelData[c]!;
    kernel.u8.set(new Uint8Array(data.buffer, data.byteOffset, samples * 4), base);
    kernel.exports.f32_to_i16(base, samples, scale, dst + c * 2, channels);
  }
  return Buffer.from(kernel.u8.subarray(dst, dst + samples * channels * 2));
}

/** Which decoder handles the frames: the library's own where it can (`'auto'`), or libFLAC. */
export type FlacEngine = 'auto' | 'libflac';

/**
 * A streaming FLAC to PCM16 decoder. Feed chunks with `decode()` (awaiting each), call `end()`
 * once the input is complete and then `verify()` to check the audio against STREAMINFO, and
 * `close()` to release the WebAssembly instance (also after a failure). Calls are serialized
 * internally.
 */
export class FlacPcmDecoder {
  #decoder: FLACDecoder | undefined;
  /** The library's own frame decoder, when it handles the stream. */
  #frames: FlacFrameDecoder | undefined;
  #header: Uint8Array[] = [];
  #headerBytes = 0;
  #info: FlacStreamInfo | undefined;
  readonly #hash = createHash('md5');
  #samples = 0;
  #digest: string | undefined;
  #started = false;
  #early: Uint8Array[] = [];
  #queue: Promise<unknown> = Promise.resolve();
  #closed = false;
  #ended = false;
  readonly #engine: FlacEngine;

  /** `engine: 'libflac'` decodes every stream with libFLAC (the fallback), to compare the two. */
  constructor(options: { engine?: FlacEngine } = {}) {
    this.#engine = options.engine ?? 'auto';
  }

  /** STREAMINFO, once the first 42 bytes have been fed. */
  get streamInfo(): FlacStreamInfo | undefined {
    return this.#info;
  }

  /** Samples per channel decoded so far. */
  get samplesDecoded(): number {
    return this.#frames?.samplesDecoded ?? this.#samples;
  }

  /** Decodes what `chunk` completes; returns PCM16 LE interleaved (often empty). */
  decode(chunk: Uint8Array): Promise<Buffer> {
    return this.#serialize(async () => {
      if (this.#ended) throw new UsageError('FlacPcmDecoder.decode() called after end().');
      if (!this.#info) this.#readHeader(chunk);
      let input = chunk;
      if (!this.#started) {
        // Bytes are held until STREAMINFO says which decoder handles the stream (a copy when
        // held past this call: the caller may reuse its buffer).
        this.#early.push(this.#info ? chunk : Buffer.from(chunk));
        if (!this.#info) return Buffer.alloc(0);
        input = this.#early.length === 1 ? chunk : Buffer.concat(this.#early);
        this.#early = [];
        this.#started = true;
        if (this.#engine === 'auto' && kernelDecodes(this.#info)) this.#frames = new FlacFrameDecoder(this.#info, this.#hash);
      }
      if (this.#frames) return this.#frames.decode(input);
      const decoder = await this.#instance();
      return this.#convert(await decoder.decode(input));
    });
  }

  /**
   * Decodes the frames still buffered; returns their PCM. Throws `ProtocolError` when the
   * input ended before a complete STREAMINFO.
   */
  end(): Promise<Buffer> {
    return this.#serialize(async () => {
      if (this.#ended) throw new UsageError('FlacPcmDecoder.end() called twice.');
      this.#ended = true;
      if (!this.#info) throw new ProtocolError('The FLAC stream ended before its STREAMINFO header was complete.');
      if (this.#frames) return this.#frames.end();
      const decoder = await this.#instance();
      // The decoder's frame parser looks 13 bytes past a frame header before accepting it, so a
      // final frame of 13 bytes or less (a short silent block) would be glued to the frame
      // before it and lost. Trailing zero bytes let it find that header; the CRC-16 of a
      // frame followed by zeros still checks, and libFLAC ignores them.
      const tail = this.#convert(await decoder.decode(END_PADDING));
      const rest = this.#convert(await decoder.flush());
      return tail.length === 0 ? rest : rest.length === 0 ? tail : Buffer.concat([tail, rest]);
    });
  }

  /** Releases the decoder; waits for a call in flight. Safe to call more than once. */
  close(): Promise<void> {
    const wasClosed = this.#closed;
    this.#closed = true;
    return this.#queue.then(
      () => this.#release(wasClosed),
      () => this.#release(wasClosed),
    );
  }

  #release(wasClosed: boolean): void {
    if (wasClosed) return;
    const decoder = this.#decoder;
    this.#decoder = undefined;
    decoder?.free();
  }

  #serialize<T>(op: () => Promise<T>): Promise<T> {
    if (this.#closed) return Promise.reject(new Error('FlacPcmDecoder is closed.'));
    const result = this.#queue.then(op);
    this.#queue = result.catch(() => undefined);
    return result;
  }

  async #instance(): Promise<FLACDecoder> {
    if (!this.#decoder) {
      // Loaded on first use: the decoder's module holds its WebAssembly as a string of some MB.
      const { FLACDecoder: Decoder } = await import('@wasm-audio-decoders/flac');
      this.#decoder = new Decoder();
      await this.#decoder.ready;
    }
    return this.#decoder;
  }

  #readHeader(chunk: Uint8Array): void {
    this.#header.push(Buffer.from(chunk.subarray(0, FLAC_STREAMINFO_END - this.#headerBytes)));
    this.#headerBytes += Math.min(chunk.length, FLAC_STREAMINFO_END - this.#headerBytes);
    const info = parseFlacStreamInfo(this.#header.length === 1 ? this.#header[0]! : Buffer.concat(this.#header));
    if (info) {
      this.#info = info;
      this.#header = [];
    }
  }

  #convert(decoded: FLACDecodedAudio): Buffer {
    if (decoded.errors.length > 0) {
      const first = decoded.errors[0]!;
      throw new IntegrityError(`FLAC frame ${first.frameNumber} could not be decoded: ${first.message}.`);
    }
    if (decoded.samplesDecoded === 0) return Buffer.alloc(0);
    const bits = decoded.bitDepth || this.#info?.bitsPerSample || 16;
    this.#samples += decoded.samplesDecoded;
    return floatToPcm16(decoded.channelData, decoded.samplesDecoded, bits, this.#hash);
  }

  /**
   * After `end()`: throws the `IntegrityError` of a frame that did not decode, or of a stream
   * that ended inside a frame (the library's decoder; libFLAC throws from `decode()`). `verify()`
   * includes this check.
   */
  checkFrames(): void {
    if (this.#frames?.failure) throw this.#frames.failure;
  }

  /**
   * After `end()`: `checkFrames()`, then the decoded sample count against STREAMINFO (unless it
   * says 0, "unknown") and the MD5 of the decoded audio (unless STREAMINFO's MD5 is all zeros,
   * which the format uses for "not computed"). Throws `IntegrityError` on a mismatch.
   */
  verify(): void {
    const info = this.#info;
    if (!this.#ended || !info) throw new UsageError('FlacPcmDecoder.verify() needs a completed end().');
    this.checkFrames();
    const samples = this.samplesDecoded;
    if (info.totalSamples !== 0 && samples !== info.totalSamples) {
      throw new IntegrityError(
        `The FLAC stream decoded to ${samples} samples per channel but its STREAMINFO says ${info.totalSamples}: ` + 'the data is truncated or corrupt.',
      );
    }
    if (!hasKnownMd5(info)) return;
    this.#digest ??= this.#hash.digest('hex');
    const md5 = this.#digest;
    if (md5 !== info.md5) {
      throw new IntegrityError(`The MD5 of the decoded audio (${md5}) does not match the FLAC stream's STREAMINFO (${info.md5}): the data is corrupt.`);
    }
  }
}
