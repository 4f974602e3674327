/**
 * Signal level arithmetic on PCM16 LE, shared by the voice-activity detector (`vad.ts`: the
 * client's count of the speech it sent, the emulator's utterances) and the Twilio barge-in
 * detector. `frameMeanSquares` measures a run of frames in one pass of the WebAssembly SIMD
 * kernel where there is one; the JavaScript sums are the same exact integers either way.
 */
import { alignKernel, firKernel } from './wasm/fir.js';

/** The mean-square sample value of a PCM16 signal at `dbfs` (relative to full scale, 32768). */
export function dbfsToMeanSquare(dbfs: number): number {
  const amplitude = 32768 * 10 ** (dbfs / 20);
  return amplitude * amplitude;
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Mean of the squared samples of PCM16 LE `buf[start, end)`; `end - start` must be even and > 0. */
export function meanSquare(buf: Buffer, start: number, end: number): number {
  let sum = 0;
  let i = start;
  let at = buf.byteOffset + start;
  if (LITTLE_ENDIAN && at % 2 === 0) {
    if (at % 4 !== 0) {
      const sample = buf.readInt16LE(i);
      sum += sample * sample;
      i += 2;
      at += 2;
    }
    // Two samples per 32-bit read through a typed view (no bounds check per sample), squared
    // in integer arithmetic: half the loads and twice as fast as one sample at a time.
    const pairs = (end - i) >> 2;
    const words = new Int32Array(buf.buffer, at, pairs);
    for (let k = 0; k < pairs; k++) {
      const word = words[k]!;
      const low = (word << 16) >> 16;
      const high = word >> 16;
      sum += Math.imul(low, low) + Math.imul(high, high);
    }
    i += pairs * 4;
  }
  for (; i < end; i += 2) {
    const sample = buf.readInt16LE(i);
    sum += sample * sample;
  }
  return (sum * 2) / (end - start);
}

/**
 * Mean of the squared decoded samples of G.711 bytes `buf[start, end)`, by `squares`, the square
 * of each code's PCM16 value (`g711SquareTable`): the same number `meanSquare` gives for the
 * decoded PCM16, without decoding it.
 */
export function meanSquareG711(buf: Uint8Array, start: number, end: number, squares: Float64Array): number {
  let sum = 0;
  for (let i = start; i < end; i++) sum += squares[buf[i]!]!;
  return sum / (end - start);
}

/** Samples summed between looks at the partial sum in `meanSquareG711Above`. */
const ABOVE_CHECK_SAMPLES = 32;

/**
 * `meanSquareG711(buf, start, end, squares) > threshold`, answered as soon as the partial sum
 * decides it: the sum only grows (its terms are squares, exact integers in a double), so a
 * partial sum whose mean over the whole length is already above the threshold decides a loud
 * frame before its end. A quiet frame is summed to its end, and compared as `meanSquareG711`'s is.
 */
export function meanSquareG711Above(buf: Uint8Array, start: number, end: number, squares: Float64Array, threshold: number): boolean {
  const n = end - start;
  let sum = 0;
  for (let i = start; i < end;) {
    const stop = Math.min(end, i + ABOVE_CHECK_SAMPLES);
    for (; i < stop; i++) sum += squares[buf[i]!]!;
    if (sum / n > threshold) return true;
  }
  return false;
}

/** The square of each G.711 code's PCM16 value, from its decode table. */
export function g711SquareTable(decode: Readonly<Int16Array>): Float64Array {
  return Float64Array.from(decode, (sample) => sample * sample);
}

/** Frames measured per pass of the kernel: bounds the kernel memory a large write takes. */
const FRAMES_PER_PASS = 128;
/** Below this many bytes a call into the kernel costs more than the sums in JavaScript. */
const KERNEL_MIN_BYTES = 4096;

/**
 * The mean square of each of `frames` consecutive frames of `frameBytes` (even) in `buf` from
 * `offset`, into `out[0 .. frames)`: the same values as `meanSquare` per frame.
 */
export function frameMeanSquares(buf: Buffer, offset: number, frames: number, frameBytes: number, out: Float64Array): void {
  const kernel = frames * frameBytes >= KERNEL_MIN_BYTES ? firKernel() : undefined;
  if (!kernel) {
    for (let f = 0, at = offset; f < frames; f++, at += frameBytes) out[f] = meanSquare(buf, at, at + frameBytes);
    return;
  }
  const samples = frameBytes >> 1;
  for (let first = 0; first < frames; first += FRAMES_PER_PASS) {
    const count = Math.min(FRAMES_PER_PASS, frames - first);
    const bytes = count * frameBytes;
    const input = kernel.scratch(alignKernel(bytes) + count * 8);
    const sums = input + alignKernel(bytes);
    const start = offset + first * frameBytes;
    kernel.u8.set(buf.subarray(start, start + bytes), input);
    kernel.exports.frame_power(input, count, samples, sums);
    const totals = new Float64Array(kernel.u8.buffer, sums, count);
    for (let f = 0; f < count; f++) out[first + f] = totals[f]! / samples;
  }
}

/** Runs of frames a pass keeps measured (a fan-out's piece is one or a few runs of up to 64 frames). */
const MAX_SHARED_RUNS = 16;

interface MeasuredRun {
  buffer: ArrayBufferLike;
  start: number;
  frames: number;
  frameBytes: number;
  levels: Float64Array;
}

/**
 * Frame levels measured once for several detectors fed the same bytes in one synchronous pass (a
 * fan-out writing one piece of input into each of its sessions): the first to measure a run of
 * frames keeps the levels, the others, reading the same memory, copy them. A kept measurement
 * is good only between `open()` and `close()`, which the owner calls around its pass: no code
 * that could change the bytes runs in between. Outside a pass, `measure` is `frameMeanSquares`.
 */
export class SharedFrameLevels {
  #open = false;
  readonly #runs: MeasuredRun[] = [];
  #reused = 0;

  /** Runs of frames copied from an earlier measurement of the same pass, since creation. */
  get reused(): number {
    return this.#reused;
  }

  /** A pass begins: measurements are kept until `close()`. */
  open(): void {
    this.#open = true;
  }

  /** The pass is over: every kept measurement is forgotten. */
  close(): void {
    this.#open = false;
    this.#runs.length = 0;
  }

  /** `frameMeanSquares(buf, offset, frames, frameBytes, out)`, measured once per pass for the same memory. */
  measure(buf: Buffer, offset: number, frames: number, frameBytes: number, out: Float64Array): void {
    if (!this.#open) return frameMeanSquares(buf, offset, frames, frameBytes, out);
    const start = buf.byteOffset + offset;
    for (const run of this.#runs) {
      if (run.buffer === buf.buffer && run.start === start && run.frames === frames && run.frameBytes === frameBytes) {
        out.set(run.levels);
        this.#reused += 1;
        return;
      }
    }
    frameMeanSquares(buf, offset, frames, frameBytes, out);
    if (this.#runs.length < MAX_SHARED_RUNS) this.#runs.push({ buffer: buf.buffer, start, frames, frameBytes, levels: out.slice(0, frames) });
  }
}
