/**
 * The WebAssembly SIMD kernel of the resampler, which also does the library's other bulk work
 * on samples and bytes: G.711 tables, channel mixing, float to int16, frame levels, and the
 * base64 of large appends (source: `resample.c` beside this file, built by
 * `scripts/build-wasm.sh`). Loaded once per process on first use, synchronously, with no
 * process-wide side effect. Where WebAssembly or its SIMD extension is missing (`--jitless`, an
 * old engine) or the host is big-endian, `firKernel()` returns undefined and each caller does
 * the same work in JavaScript, with the same result.
 *
 * Memory: one `WebAssembly.Memory` for the process. The first page is the module's own; the
 * coefficient tables of the rate pairs in use follow (written once, never freed: at most a few
 * hundred KiB for every pair); above them, a scratch area that each call lays out afresh, so no
 * resampler keeps state in the module and none needs freeing.
 */
import { endianness } from 'node:os';
import { WASM_BASE64 } from './resample-kernel.js';

interface FirExports {
  fir(
    x: number,
    len: number,
    state: number,
    up: number,
    stepFrames: number,
    stepPhase: number,
    table: number,
    kp: number,
    splitFrom: number,
    splitTo: number,
    out: number,
    stride: number,
    copies: number,
    limit: number,
  ): number;
  deinterleave(src: number, frames: number, channels: number, channel: number, dst: number): void;
  downmix(src: number, frames: number, dst: number): void;
  g711_decode(src: number, n: number, table: number, dst: number): void;
  g711_encode(src: number, n: number, table: number, dst: number): void;
  f32_to_i16(src: number, n: number, scale: number, dst: number, stride: number): void;
  frame_power(src: number, frames: number, samples: number, sums: number): void;
  base64_encode(src: number, n: number, dst: number): void;
}

/** The parts of the WebAssembly API used here (Node's types for this target do not declare it). */
interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}
interface WasmApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: unknown };
  Memory: new (descriptor: { initial: number }) => WasmMemory;
}

const PAGE = 65_536;

/** `bytes` rounded up to a multiple of 16: where the next region of kernel memory may start (SIMD loads). */
export function alignKernel(bytes: number): number {
  return (bytes + 15) & ~15;
}

/** A loaded kernel (one WebAssembly module with its own memory) and its memory. */
export class WasmKernel<Exports> {
  readonly exports: Exports;
  readonly memory: WasmMemory;
  /** Views of the memory; renewed when it grows (only `#ensure` grows it: the C code never does). */
  u8: Uint8Array;
  i16: Int16Array;
  i32: Int32Array;
  #top = PAGE;
  #size: number;

  constructor(api: WasmApi, bytes: Uint8Array) {
    this.memory = new api.Memory({ initial: 4 });
    const instance = new api.Instance(new api.Module(bytes), { env: { memory: this.memory } });
    this.exports = instance.exports as Exports;
    this.#size = this.memory.buffer.byteLength;
    this.u8 = new Uint8Array(this.memory.buffer);
    this.i16 = new Int16Array(this.memory.buffer);
    this.i32 = new Int32Array(this.memory.buffer);
  }

  #ensure(end: number): void {
    if (end <= this.#size) return;
    this.memory.grow(Math.ceil((end - this.#size) / PAGE));
    const buffer = this.memory.buffer;
    this.#size = buffer.byteLength;
    this.u8 = new Uint8Array(buffer);
    this.i16 = new Int16Array(buffer);
    this.i32 = new Int32Array(buffer);
  }

  /** Copies `data` into memory for good (tables); returns its byte address. */
  store(data: Int16Array | Uint8Array): number {
    const at = this.#top;
    const end = at + alignKernel(data.byteLength);
    this.#ensure(end);
    this.u8.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), at);
    this.#top = end;
    return at;
  }

  /**
   * The scratch area for one call: `bytes` bytes, 16-aligned, valid until the next `store` or
   * `scratch`. Take the views (`u8`, `i16`, `i32`) after this call: it may grow the memory.
   */
  scratch(bytes: number): number {
    this.#ensure(this.#top + bytes);
    return this.#top;
  }
}

/** The resampler's kernel. */
export type FirKernel = WasmKernel<FirExports>;

/**
 * The kernel whose module is `base64`, instantiated with a fresh memory on the first call of the
 * function returned (then the same one); undefined where this engine cannot run it (no
 * WebAssembly or no SIMD, or a big-endian host: the kernels read little-endian memory through
 * the host's typed arrays).
 */
export function lazyKernel<Exports>(base64: string): () => WasmKernel<Exports> | undefined {
  let kernel: WasmKernel<Exports> | null | undefined;
  return () => {
    if (kernel === undefined) {
      try {
        const api = (globalThis as { WebAssembly?: WasmApi }).WebAssembly;
        kernel = api && endianness() === 'LE' ? new WasmKernel<Exports>(api, Buffer.from(base64, 'base64')) : null;
      } catch {
        kernel = null;
      }
    }
    return kernel ?? undefined;
  };
}

/** The resampler's kernel, or undefined where this engine cannot run it. */
export const firKernel = lazyKernel<FirExports>(WASM_BASE64);
