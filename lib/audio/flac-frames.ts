/**
 * The library's own FLAC frame decoder: the frames of a FLAC stream, fed in chunks of any size,
 * to PCM16 LE interleaved, in the WebAssembly kernel built from `wasm/flac.c` (every frame's
 * CRC-8 and CRC-16 checked there). It covers 4 to 24 bits per sample and 1 to 8 channels,
 * which is every stream the service makes; `FlacPcmDecoder` hands anything else, and engines
 * without WebAssembly SIMD, to libFLAC.
 *
 * Memory: the kernel has one memory for the process. Each call copies the bytes it was given
 * (plus the unfinished frame kept from the call before) into it, at most 4 MiB at a time,
 * decodes every whole frame and copies the audio out; nothing stays in the kernel between
 * calls, so decoders never share state, and the kernel's memory stays under 9 MiB (8 channels
 * of 24 bits; about 5.6 MiB for 16-bit stereo). The unfinished frame is kept here, copied, and
 * tried again once the bytes held reach the size of the frame before it, else once they have
 * doubled (or at the end): a frame's audio usually comes out within a chunk of its last byte, and a
 * stream fed one byte at a time costs a logarithmic number of attempts per frame, not one per
 * byte.
 */
import type { Hash } from 'node:crypto';
import { IntegrityError, ProtocolError, UsageError } from '../errors.js';
import { alignKernel, lazyKernel, type WasmKernel } from './wasm/fir.js';
import { WASM_BASE64 } from './wasm/flac-kernel.js';

/** The fields of a FLAC stream's STREAMINFO block. */
export interface FlacStreamInfo {
  /** Samples per channel per block (the last block may be shorter). */
  minBlockSize: number;
  maxBlockSize: number;
  /** Bytes per frame; 0 means unknown. */
  minFrameSize: number;
  maxFrameSize: number;
  /** Samples per second per channel. */
  sampleRate: number;
  channels: number;
  /** Bits per sample of the original audio (4 to 32). */
  bitsPerSample: number;
  /** Samples per channel in the whole stream; 0 means unknown. */
  totalSamples: number;
  /** MD5 of the unencoded audio as 32 hex digits; all zeros means the encoder did not compute it. */
  md5: string;
}

interface FlacExports {
  frame_decode(input: number, length: number, info: number, work: number, pcm: number, raw: number): number;
}

/** Slots of the kernel's `info` array (see `flac.c`). */
const I_BITS = 0;
const I_CHANNELS = 1;
const I_MAX_BLOCK = 2;
const I_BLOCK = 3;
const I_NUMBER_LOW = 4;
const I_NUMBER_HIGH = 5;
const I_VARIABLE = 6;
const INFO_BYTES = 32;

/** The largest block the format allows, in samples per channel. */
const MAX_BLOCK = 65_536;
/** PCM16 samples (all channels) the output area holds before it is copied out. */
const OUTPUT_SAMPLES = 1 << 19;
/**
 * Most input bytes copied into the kernel at once: above any frame an encoder writes (a verbatim
 * frame of 65535 samples of 8 channels at 25 bits is about 1.6 MB; escape-coded residuals, at
 * most 31 bits a sample, about 2 MB).
 */
const INPUT_WINDOW = 4 << 20;

const ERR_SYNC = -1;
const MESSAGES: Record<number, string> = {
  [-1]: 'no frame sync code where the frame should start',
  [-2]: 'the CRC-8 of its header does not match',
  [-3]: 'its header holds a reserved or invalid value',
  [-4]: 'a subframe holds a reserved or invalid value',
  [-5]: 'the CRC-16 of the frame does not match',
  [-6]: "its channels or sample depth differ from STREAMINFO's",
};

const flacKernel = lazyKernel<FlacExports>(WASM_BASE64);

/** True when this process can decode a stream with `info` in the kernel. */
export function kernelDecodes(info: FlacStreamInfo): boolean {
  return info.bitsPerSample >= 4 && info.bitsPerSample <= 24 && flacKernel() !== undefined;
}

const EMPTY: Buffer = Buffer.alloc(0);

/**
 * Decodes a FLAC stream from its first byte (`fLaC`, the metadata blocks, then the frames).
 * `decode()` returns the PCM16 of the frames the bytes so far complete and feeds `hash` the
 * bytes STREAMINFO's MD5 covers; `end()` decodes the rest. A frame that does not decode (CRC
 * mismatch, invalid field) or does not carry the number due next (a frame missing or repeated)
 * becomes an `IntegrityError` in `failure`, once the audio before it has been returned;
 * `decode()` throws it from then on. A malformed metadata block throws `ProtocolError`. Bytes
 * after the last frame that are not a frame (an ID3v1 tag, zero padding) are ignored once the
 * samples STREAMINFO announces are all out; where it gives no total they fail the stream.
 */
export class FlacFrameDecoder {
  readonly #info: FlacStreamInfo;
  readonly #hash: Hash;
  readonly #kernel: WasmKernel<FlacExports>;
  /** Bytes received and not decoded yet. */
  #held: Buffer[] = [];
  #heldBytes = 0;
  /** Held bytes at which the next attempt is made. */
  #retryAt = 0;
  /** Bytes of the `fLaC` marker and the metadata still to skip; -1 once the frames start. */
  #skip = 4;
  #lastBlock = false;
  #frames = 0;
  #samples = 0;
  /** Bytes of the last frame decoded (the size the next one probably has). */
  #lastFrameBytes: number;
  /** A frame that did not decode: thrown by the next call, after the audio before it is out. */
  #failure: Error | undefined;
  /** Every sample STREAMINFO announces is out and what followed was not a frame: input is ignored. */
  #complete = false;

  constructor(info: FlacStreamInfo, hash: Hash) {
    const k = flacKernel();
    if (!k) throw new UsageError('FlacFrameDecoder needs the WebAssembly kernel (check kernelDecodes first).');
    this.#kernel = k;
    this.#info = info;
    this.#hash = hash;
    this.#lastFrameBytes = info.maxFrameSize;
  }

  /** Samples per channel decoded so far. */
  get samplesDecoded(): number {
    return this.#samples;
  }

  /** The error of a frame that did not decode, once one has been met. */
  get failure(): Error | undefined {
    return this.#failure;
  }

  /** STREAMINFO gives a total and every sample of it has been decoded. */
  get #allAnnouncedOut(): boolean {
    return this.#info.totalSamples > 0 && this.#samples === this.#info.totalSamples;
  }

  /** The PCM16 of every frame the bytes so far complete (often empty). */
  decode(chunk: Uint8Array): Buffer {
    if (this.#failure) throw this.#failure;
    if (chunk.length === 0 || this.#complete) return EMPTY;
    this.#heldBytes += chunk.length;
    if (this.#heldBytes < this.#retryAt) {
      // Held past this call: a copy, as the caller may reuse its buffer.
      this.#held.push(Buffer.from(chunk));
      return EMPTY;
    }
    this.#held.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length));
    return this.#run(false);
  }

  /**
   * The PCM16 of the frames still held. It does not throw for the audio: a frame that did not
   * decode, bytes of an unfinished frame or metadata left at the end are recorded as `failure`
   * (the decoder's `verify()` throws it).
   */
  end(): Buffer {
    if (this.#failure || this.#complete) return EMPTY;
    const pcm = this.#run(true);
    if (this.#failure || this.#complete) return pcm;
    if (this.#skip >= 0) {
      this.#failure = new IntegrityError('The FLAC stream ends inside its metadata blocks, before its first audio frame: the data is truncated.');
    } else if (this.#heldBytes > 0 && !this.#allAnnouncedOut) {
      // (Bytes after every announced sample, too short to tell a frame from a tag, are left.)
      const total = this.#info.totalSamples;
      const of = total > 0 ? ` of the ${total} its STREAMINFO announces` : '';
      this.#failure = new IntegrityError(
        `The FLAC stream ends inside frame ${this.#frames} (${this.#heldBytes} bytes of it received), after ${this.#samples} samples per channel${of}: ` +
          'the data is truncated or corrupt.',
      );
    }
    this.#held = [];
    this.#heldBytes = 0;
    return pcm;
  }

  #run(final: boolean): Buffer {
    let data: Buffer = this.#held.length === 1 ? this.#held[0]! : Buffer.concat(this.#held, this.#heldBytes);
    const pos = this.#skipMetadata(data);
    data = data.subarray(pos);
    let pcm = EMPTY;
    let used = 0;
    if (this.#skip < 0 && data.length > 0) ({ pcm, used } = this.#decodeFrames(data));
    if (this.#failure || this.#complete) {
      this.#held = [];
      this.#heldBytes = 0;
      return pcm;
    }
    const rest = data.length - used;
    // Keep the unfinished frame as bytes of our own: the caller may reuse its buffers.
    this.#held = rest > 0 ? [Buffer.from(data.subarray(used))] : [];
    this.#heldBytes = rest;
    // Try again once a frame like the last one may be complete, else once the bytes double.
    this.#retryAt = final ? 0 : rest < this.#lastFrameBytes ? this.#lastFrameBytes : rest * 2;
    return pcm;
  }

  /** Skips the marker and metadata blocks at the start of `data`; returns the bytes consumed. */
  #skipMetadata(data: Buffer): number {
    let pos = 0;
    while (this.#skip >= 0) {
      if (this.#skip > 0) {
        const n = Math.min(this.#skip, data.length - pos);
        pos += n;
        this.#skip -= n;
        if (this.#skip > 0) return pos;
      }
      if (this.#lastBlock) {
        this.#skip = -1;
        break;
      }
      if (data.length - pos < 4) return pos;
      const flags = data[pos]!;
      if ((flags & 0x7f) === 127) throw new ProtocolError('Not a valid FLAC stream: a metadata block has the invalid type 127.');
      this.#lastBlock = (flags & 0x80) !== 0;
      this.#skip = (data[pos + 1]! << 16) | (data[pos + 2]! << 8) | data[pos + 3]!;
      pos += 4;
    }
    return pos;
  }

  /**
   * Decodes the whole frames at the start of `data` (frames only), copying it into the kernel
   * a window of at most `INPUT_WINDOW` bytes at a time, so the kernel's memory stays bounded
   * whatever the caller hands over at once.
   */
  #decodeFrames(data: Buffer): { pcm: Buffer; used: number } {
    const k = this.#kernel;
    const { channels, bitsPerSample: bits } = this.#info;
    const width = bits === 16 ? 0 : (bits + 7) >> 3;
    const capacity = Math.max(OUTPUT_SAMPLES, MAX_BLOCK * channels);
    const workBytes = alignKernel(MAX_BLOCK * channels * 4);
    const info = k.scratch(INFO_BYTES + workBytes + capacity * 2 + alignKernel(capacity * width) + Math.min(data.length, INPUT_WINDOW));
    const work = info + INFO_BYTES;
    const pcmAt = work + workBytes;
    const rawAt = pcmAt + capacity * 2;
    const input = rawAt + alignKernel(capacity * width);
    const slots = info >> 2;
    // The kernel only reads these (and nothing here grows the memory during the loop).
    k.i32[slots + I_BITS] = bits;
    k.i32[slots + I_CHANNELS] = channels;
    k.i32[slots + I_MAX_BLOCK] = MAX_BLOCK;
    const parts: Buffer[] = [];
    let produced = 0;
    const flush = (): void => {
      if (produced === 0) return;
      const pcm = Buffer.from(k.u8.subarray(pcmAt, pcmAt + produced * 2));
      this.#hash.update(width === 0 ? pcm : k.u8.subarray(rawAt, rawAt + produced * width));
      parts.push(pcm);
      produced = 0;
    };
    let at = 0;
    while (at < data.length && !this.#failure && !this.#complete) {
      const length = Math.min(INPUT_WINDOW, data.length - at);
      k.u8.set(data.subarray(at, at + length), input);
      let offset = 0;
      while (offset < length) {
        if (capacity - produced < MAX_BLOCK * channels) flush();
        const r = k.exports.frame_decode(input + offset, length - offset, info, work, pcmAt + produced * 2, rawAt + produced * width);
        if (r === 0) break;
        if (r === ERR_SYNC && this.#allAnnouncedOut) {
          // Whatever follows the last frame (a tag, padding) is not audio.
          this.#complete = true;
          break;
        }
        if (r < 0) {
          this.#failure = new IntegrityError(`FLAC frame ${this.#frames} could not be decoded: ${MESSAGES[r] ?? `error ${r}`}.`);
          break;
        }
        const number = (k.i32[slots + I_NUMBER_LOW]! >>> 0) + k.i32[slots + I_NUMBER_HIGH]! * 2 ** 32;
        const variable = k.i32[slots + I_VARIABLE] === 1;
        const due = variable ? this.#samples : this.#frames;
        if (number !== due) {
          this.#failure = new IntegrityError(
            `FLAC frame ${this.#frames} carries the ${variable ? 'sample' : 'frame'} number ${number} where ${due} is due: a frame is missing or repeated.`,
          );
          break;
        }
        const block = k.i32[slots + I_BLOCK]!;
        this.#lastFrameBytes = r;
        offset += r;
        produced += block * channels;
        this.#samples += block;
        this.#frames++;
      }
      at += offset;
      // The window ended inside a frame: read on from that frame, unless the data ends there
      // too (wait for more) or the frame would be larger than any the format can hold.
      if (at + (length - offset) === data.length || this.#complete) break;
      if (offset === 0 && !this.#failure) {
        this.#failure = new IntegrityError(
          `FLAC frame ${this.#frames} could not be decoded: it does not end within ${INPUT_WINDOW} bytes, more than any frame can hold.`,
        );
      }
    }
    flush();
    const pcm = parts.length === 0 ? EMPTY : parts.length === 1 ? parts[0]! : Buffer.concat(parts);
    return { pcm, used: at };
  }
}
