/**
 * The resampling processors behind `createResampleProcessor` (`resampler.ts`, where the filter,
 * the delay policy and chunking are described): the state one stream keeps (partial frames,
 * frames in and out, the end), and the two ways its dot products run, the WebAssembly SIMD
 * kernel over the design's taps split for it (`tablesFor`) and the JavaScript loop. Both compute
 * the same exact sums; G.711 decoding, encoding and the channel mix fold into the same pass.
 */
import { averageInt16 } from './channels.js';
import { FrameCutter } from './frames.js';
import { ALAW_DECODE_TABLE, MULAW_DECODE_TABLE, encodeAlaw, encodeMulaw, type G711Law } from './g711.js';
import { EMPTY, type AudioProcessor } from './processor.js';
import { TAP_SCALE, toInt16, type ResamplerDesign } from './resampler-design.js';
import { alignKernel, type FirKernel } from './wasm/fir.js';

/** Input frames converted per inner pass; bounds the working buffer. */
const PIECE_FRAMES = 4096;
/** The kernel splits each tap q into hi * 2^LO_BITS + lo, both int16 (see wasm/resample.c). */
const LO_BITS = 8;

/**
 * The kernel's form of a design (see wasm/resample.c): rows of `kp` taps (K rounded up to a
 * multiple of 8, the padding being zero taps on the oldest side), in blocks of 8 taps stored as
 * 8 hi then 8 lo int16 in the kernel's memory at `table`. Blocks `[splitFrom, splitTo)` are
 * split, `q = hi * 2^8 + lo`; the blocks outside them (the filter's tails) are narrow, every tap
 * int16, and hold `q` itself in lo: one dot product instead of two (38 to 46 % of the blocks of
 * the supported pairs). Undefined when a row breaks the kernel's overflow bounds (no supported
 * pair does).
 */
interface KernelTables {
  readonly kp: number;
  readonly splitFrom: number;
  readonly splitTo: number;
  readonly table: number;
}

const kernelTables = new WeakMap<ResamplerDesign, KernelTables | null>();

/** The kernel's overflow bound on a row's sum of absolute hi parts, and on that of its lo parts (narrow taps whole). */
const SUM_BOUND = 1 << 16;

export function tablesFor(kernel: FirKernel, design: ResamplerDesign): KernelTables | undefined {
  const cached = kernelTables.get(design);
  if (cached !== undefined) return cached ?? undefined;
  const { up, tapsPerPhase: taps, table } = design;
  const kp = (taps + 7) & ~7;
  const blocks = kp >> 3;
  /**
   * The rows in the kernel's layout with blocks [left, right) split into hi and lo and the rest
   * narrow (the tap whole in lo); undefined when a part does not fit int16 or a row breaks a sum
   * bound.
   */
  const layout = (left: number, right: number): Int16Array | undefined => {
    const rows = new Int16Array(up * 2 * kp);
    for (let p = 0; p < up; p++) {
      let hiSum = 0;
      let loSum = 0;
      for (let k = 0; k < kp; k++) {
        const j = k - (kp - taps); // the padding, on the oldest side, is zero taps
        const q = j < 0 ? 0 : Math.round(table[p * taps + j]! * TAP_SCALE);
        const block = k >> 3;
        const hi = block >= left && block < right ? Math.round(q / (1 << LO_BITS)) : 0;
        const lo = q - hi * (1 << LO_BITS);
        if (Math.abs(hi) > 0x7fff || Math.abs(lo) > 0x7fff) return undefined;
        const at = p * 2 * kp + block * 16 + (k & 7);
        rows[at] = hi;
        rows[at + 8] = lo;
        hiSum += Math.abs(hi);
        loSum += Math.abs(lo);
      }
      if (hiSum >= SUM_BOUND || loSum >= SUM_BOUND) return undefined;
    }
    return rows;
  };
  let split = layout(0, blocks);
  if (!split) {
    kernelTables.set(design, null);
    return undefined;
  }
  // Narrow blocks taken from both tails, one at a time, while the bounds hold.
  let left = 0;
  let right = blocks;
  const narrowTo = (l: number, r: number): boolean => {
    const rows = l <= r ? layout(l, r) : undefined;
    if (!rows) return false;
    split = rows;
    left = l;
    right = r;
    return true;
  };
  for (let grew = true; grew;) {
    const fromOldest = narrowTo(left + 1, right);
    const fromNewest = narrowTo(left, right - 1);
    grew = fromOldest || fromNewest;
  }
  const tables = { kp, splitFrom: left, splitTo: right, table: kernel.store(split) };
  kernelTables.set(design, tables);
  return tables;
}

/**
 * Work folded into a resampler's pass, so a conversion chain needs no separate pass (and no
 * buffer) for it; the bytes are those of the separate stages:
 * - `mix`: `'down'` takes stereo in and filters its mono mix (the average of `channels.ts`,
 *   rounded the same way); `'up'` filters mono and writes each sample to both channels.
 * - `decode`: the input is G.711 (`'mulaw'` or `'alaw'`, one byte per sample), decoded as
 *   `g711.ts` does; `encode`: the output is G.711, encoded as `g711.ts` does.
 */
export interface ResampleOptions {
  /** Where the dot products run: `auto` (the WebAssembly kernel where it loads), or one of them. */
  kernel?: ResampleKernel;
  mix?: 'none' | 'down' | 'up';
  decode?: G711Law;
  encode?: G711Law;
}

/** Where the dot products run: `auto` (the WebAssembly kernel where it loads), or one of them. */
export type ResampleKernel = 'auto' | 'wasm' | 'js';

const G711_DECODE: Record<G711Law, Readonly<Int16Array>> = { mulaw: MULAW_DECODE_TABLE, alaw: ALAW_DECODE_TABLE };
const g711Encode = new Map<G711Law, Uint8Array>();

/** The code word of every int16 value (indexed by its 16 bits), built on first use. */
function encodeTable(law: G711Law): Uint8Array {
  let table = g711Encode.get(law);
  if (!table) {
    const encode = law === 'mulaw' ? encodeMulaw : encodeAlaw;
    table = new Uint8Array(65536);
    for (let v = -32768; v < 32768; v++) table[v & 0xffff] = encode(v);
    g711Encode.set(law, table);
  }
  return table;
}

/**
 * The resampling state for one stream: partial frames, the count of frames in and out, and the
 * end of stream. `feed` (the kernel or the JavaScript loop) does the filtering.
 */
abstract class ResampleProcessor implements AudioProcessor {
  /** Channels filtered (1 when mixing). */
  protected readonly channels: number;
  protected readonly inChannels: number;
  protected readonly outChannels: number;
  protected readonly mix: 'none' | 'down' | 'up';
  protected readonly decode: G711Law | undefined;
  protected readonly encode: G711Law | undefined;
  protected readonly inFrameBytes: number;
  protected readonly outFrameBytes: number;
  protected readonly up: number;
  protected readonly down: number;
  protected readonly taps: number;
  /** Whole input frames to advance per output (`floor(down / up)`), and the phase step. */
  protected readonly stepFrames: number;
  protected readonly stepPhase: number;

  /** Whole input frames, a frame cut between chunks carried over (the library's re-framer). */
  readonly #frames: FrameCutter;
  #out: Buffer = EMPTY;
  #o = 0;

  /** The filter's delay, in samples at `up` times the input rate. */
  readonly #delay: number;
  #inputFrames = 0;
  #outputFrames = 0;
  #ended = false;

  constructor(design: ResamplerDesign, channels: number, options: ResampleOptions) {
    this.mix = options.mix ?? 'none';
    this.decode = options.decode;
    this.encode = options.encode;
    this.channels = this.mix === 'none' ? channels : 1;
    this.inChannels = this.mix === 'down' ? 2 : this.channels;
    this.outChannels = this.mix === 'up' ? 2 : this.channels;
    this.inFrameBytes = this.inChannels * (this.decode ? 1 : 2);
    this.outFrameBytes = this.outChannels * (this.encode ? 1 : 2);
    this.up = design.up;
    this.down = design.down;
    this.taps = design.tapsPerPhase;
    this.stepFrames = Math.floor(design.down / design.up);
    this.stepPhase = design.down % design.up;
    this.#delay = design.delay;
    this.#frames = new FrameCutter(this.inFrameBytes, { reuse: true });
  }

  /**
   * Appends `frames` input frames from `src` at byte `offset` (silence when `src` is null) and
   * writes the outputs they complete, at most `limit`, to `out` at byte `o`; returns the new
   * offset.
   */
  protected abstract feed(src: Buffer | null, offset: number, frames: number, out: Buffer, o: number, limit: number): number;

  /**
   * Converts `chunk` into a buffer of exactly the outputs it completes (none: `EMPTY`). A chunk
   * of whole frames, with nothing carried over (every G.711 mono chunk), skips the re-framer.
   */
  process(chunk: Buffer): Buffer {
    if (this.#ended) return EMPTY;
    const pending = this.#frames.pendingBytes;
    const frames = Math.floor((pending + chunk.length) / this.inFrameBytes);
    const outputs = this.#outputsAfter(this.#inputFrames + frames) - this.#outputFrames;
    const out = outputs > 0 ? Buffer.allocUnsafe(outputs * this.outFrameBytes) : EMPTY;
    this.#out = out;
    this.#o = 0;
    if (pending === 0 && frames * this.inFrameBytes === chunk.length) this.#convert(chunk, 0, frames);
    else this.#frames.cut(chunk, this.#run);
    this.#out = EMPTY;
    return out;
  }

  /**
   * How many outputs the first `inputFrames` input frames complete: output n needs input frames
   * up to `floor((delay + n * down) / up)` (the filter's delay compensated, see `resampler.ts`).
   */
  #outputsAfter(inputFrames: number): number {
    return Math.max(0, Math.ceil((inputFrames * this.up - this.#delay) / this.down));
  }

  readonly #run = (src: Buffer, offset: number, frames: number): void => this.#convert(src, offset, frames);

  /** Converts a run of whole input frames, in pieces of at most PIECE_FRAMES. */
  #convert(src: Buffer, offset: number, frames: number): void {
    const fb = this.inFrameBytes;
    for (let done = 0; done < frames; done += PIECE_FRAMES) {
      const n = Math.min(PIECE_FRAMES, frames - done);
      this.#inputFrames += n;
      const next = this.feed(src, offset + done * fb, n, this.#out, this.#o, Infinity);
      this.#outputFrames += (next - this.#o) / this.outFrameBytes;
      this.#o = next;
    }
  }

  flush(): Buffer {
    if (this.#ended) return EMPTY;
    this.#ended = true;
    this.#frames.clear(); // a partial frame holds no complete sample: dropped
    const expected = Math.ceil((this.#inputFrames * this.up) / this.down);
    const remaining = expected - this.#outputFrames;
    if (remaining <= 0) return EMPTY;
    const out = Buffer.allocUnsafe(remaining * this.outFrameBytes);
    let o = 0;
    while (this.#outputFrames < expected) {
      const next = this.feed(null, 0, Math.min(PIECE_FRAMES, this.taps), out, o, expected - this.#outputFrames);
      this.#outputFrames += (next - o) / this.outFrameBytes;
      o = next;
    }
    return out;
  }
}

/** Filtering in the WebAssembly kernel; the history is kept here, planar, between calls. */
export class KernelResampleProcessor extends ResampleProcessor {
  readonly #kernel: FirKernel;
  readonly #tables: KernelTables;
  readonly #decodeTable: number;
  readonly #encodeTable: number;
  /** Per channel, the input frames future outputs still need (usually at most kp - 1). */
  readonly #history: Int16Array[];
  #kept: number;
  /** Index (in history + new frames) of the newest frame the next output needs, and its row. */
  #pos: number;
  #phase: number;

  constructor(design: ResamplerDesign, channels: number, options: ResampleOptions, kernel: FirKernel, tables: KernelTables) {
    super(design, channels, options);
    this.#kernel = kernel;
    this.#tables = tables;
    this.#decodeTable = this.decode ? kernelStore(kernel, `decode ${this.decode}`, () => G711_DECODE[this.decode!]) : 0;
    this.#encodeTable = this.encode ? kernelStore(kernel, `encode ${this.encode}`, () => encodeTable(this.encode!)) : 0;
    // kp - 1 frames of silence stand for the time before the stream starts.
    this.#kept = tables.kp - 1;
    this.#history = Array.from({ length: this.channels }, () => new Int16Array(tables.kp - 1));
    this.#pos = this.#kept + Math.floor(design.delay / design.up);
    this.#phase = design.delay % design.up;
  }

  protected feed(src: Buffer | null, offset: number, frames: number, out: Buffer, o: number, limit: number): number {
    const { channels, mix } = this;
    const kernel = this.#kernel;
    const kept = this.#kept;
    const { kp, splitFrom, splitTo, table } = this.#tables;
    const len = kept + frames;
    const inBytes = frames * this.inFrameBytes;
    const samplesIn = frames * this.inChannels;
    const maxOut = Math.min(limit, Math.max(0, Math.ceil(((len - this.#pos) * this.up) / this.down) + 1));
    const outSamples = maxOut * this.outChannels;
    // Scratch: state (2 x int32), one planar buffer per channel, the input as given, the input
    // as int16, the output as int16, the output encoded.
    const planeBytes = alignKernel(len * 2);
    const state = kernel.scratch(
      16 + channels * planeBytes + alignKernel(inBytes) + alignKernel(samplesIn * 2) + alignKernel(outSamples * 2) + alignKernel(outSamples),
    );
    const planes = state + 16;
    const raw = planes + channels * planeBytes;
    const pcm = raw + alignKernel(inBytes);
    const output = pcm + alignKernel(samplesIn * 2);
    const encoded = output + alignKernel(outSamples * 2);
    const exports = kernel.exports;
    const u8 = kernel.u8;
    const i16 = kernel.i16;
    const i32 = kernel.i32;
    for (let c = 0; c < channels; c++) {
      const history = this.#history[c]!;
      i16.set(kept === history.length ? history : history.subarray(0, kept), (planes + c * planeBytes) >> 1);
    }
    const fresh = planes + kept * 2;
    if (src === null) {
      for (let c = 0; c < channels; c++) u8.fill(0, fresh + c * planeBytes, fresh + c * planeBytes + frames * 2);
    } else {
      const direct = this.inChannels === 1; // the samples go straight into the one plane
      u8.set(offset === 0 && inBytes === src.length ? src : src.subarray(offset, offset + inBytes), this.decode ? raw : direct ? fresh : pcm);
      if (this.decode) exports.g711_decode(raw, samplesIn, this.#decodeTable, direct ? fresh : pcm);
      if (mix === 'down') exports.downmix(pcm, frames, fresh);
      else if (!direct) for (let c = 0; c < channels; c++) exports.deinterleave(pcm, frames, channels, c, fresh + c * planeBytes);
    }
    const copies = mix === 'up' ? 2 : 1;
    let produced = 0;
    for (let c = 0; c < channels; c++) {
      i32[state >> 2] = this.#pos;
      i32[(state >> 2) + 1] = this.#phase;
      produced = exports.fir(
        planes + c * planeBytes,
        len,
        state,
        this.up,
        this.stepFrames,
        this.stepPhase,
        table,
        kp,
        splitFrom,
        splitTo,
        output + c * 2,
        this.outChannels,
        copies,
        maxOut,
      );
    }
    this.#pos = i32[state >> 2]!;
    this.#phase = i32[(state >> 2) + 1]!;
    const bytes = produced * this.outFrameBytes;
    if (this.encode) exports.g711_encode(output, produced * this.outChannels, this.#encodeTable, encoded);
    out.set(u8.subarray(this.encode ? encoded : output, (this.encode ? encoded : output) + bytes), o);
    // Keep what the next output needs: frames from pos - kp + 1 on.
    const drop = Math.max(0, Math.min(this.#pos - kp + 1, len));
    this.#kept = len - drop;
    for (let c = 0; c < channels; c++) {
      const from = (planes + c * planeBytes) >> 1;
      // More than kp - 1 frames stay only when `limit` stopped the outputs early (flush).
      if (this.#history[c]!.length < this.#kept) this.#history[c] = new Int16Array(this.#kept);
      this.#history[c]!.set(i16.subarray(from + drop, from + len));
    }
    this.#pos -= drop;
    return o + bytes;
  }
}

const kernelStored = new Map<string, number>();

/** Stores a table in the kernel's memory once per process; returns its address. */
function kernelStore(kernel: FirKernel, key: string, make: () => Int16Array | Uint8Array): number {
  let at = kernelStored.get(key);
  if (at === undefined) {
    at = kernel.store(make());
    kernelStored.set(key, at);
  }
  return at;
}

/** Filtering in JavaScript (engines without WebAssembly SIMD): the same exact sums. */
export class ScriptResampleProcessor extends ResampleProcessor {
  readonly #table: Float64Array;
  readonly #decodeTable: Readonly<Int16Array> | undefined;
  readonly #encodeTable: Uint8Array | undefined;
  /** Input history, interleaved Float64 frames; frame 0 is the oldest kept. */
  #buf: Float64Array;
  #len = 0;
  /** Index in `buf` of the newest frame the next output needs, and that output's phase. */
  #pos: number;
  #phase: number;

  constructor(design: ResamplerDesign, channels: number, options: ResampleOptions) {
    super(design, channels, options);
    this.#table = design.table;
    this.#decodeTable = this.decode && G711_DECODE[this.decode];
    this.#encodeTable = this.encode && encodeTable(this.encode);
    // K - 1 frames of silence stand for the time before the stream starts.
    this.#len = this.taps - 1;
    this.#buf = new Float64Array((this.#len + PIECE_FRAMES) * this.channels);
    this.#pos = this.#len + Math.floor(design.delay / design.up);
    this.#phase = design.delay % design.up;
  }

  protected feed(src: Buffer | null, offset: number, frames: number, out: Buffer, o: number, limit: number): number {
    this.#append(src, offset, frames);
    const next = this.#produce(out, o, limit);
    this.#compact();
    return next;
  }

  /** Input sample `i` (counted in samples from `offset`) of `src`, as int16. */
  #sample(src: Buffer, offset: number, i: number): number {
    if (this.#decodeTable) return this.#decodeTable[src[offset + i]!]!;
    const s = offset + 2 * i;
    return ((src[s]! | (src[s + 1]! << 8)) << 16) >> 16;
  }

  #append(src: Buffer | null, offset: number, frames: number): void {
    const c = this.channels;
    const need = (this.#len + frames) * c;
    if (need > this.#buf.length) {
      const grown = new Float64Array(Math.max(need, this.#buf.length * 2));
      grown.set(this.#buf.subarray(0, this.#len * c));
      this.#buf = grown;
    }
    const buf = this.#buf;
    const w = this.#len * c;
    if (src === null) {
      buf.fill(0, w, w + frames * c);
    } else if (this.mix === 'down') {
      for (let f = 0; f < frames; f++) buf[w + f] = averageInt16(this.#sample(src, offset, 2 * f), this.#sample(src, offset, 2 * f + 1));
    } else {
      for (let i = 0; i < frames * c; i++) buf[w + i] = this.#sample(src, offset, i);
    }
    this.#len += frames;
  }

  /** Computes outputs while their input is available, at most `limit`; returns the new offset. */
  #produce(out: Buffer, o: number, limit: number): number {
    const { taps, channels: c, up, stepFrames, stepPhase } = this;
    const buf = this.#buf;
    const table = this.#table;
    const encodeTable = this.#encodeTable;
    const symmetric = up === 1 && taps % 2 === 1;
    const half = (taps - 1) >> 1;
    const copies = this.mix === 'up' ? 2 : 1;
    let pos = this.#pos;
    let phase = this.#phase;
    const len = this.#len;
    let produced = 0;
    // Every product and partial sum is an integer times 2^-22 well inside 2^53: the sums are
    // exact whatever their order.
    while (pos < len && produced < limit) {
      const row = phase * taps;
      const first = (pos - taps + 1) * c;
      for (let ch = 0; ch < c; ch++) {
        let a0 = 0;
        let a1 = 0;
        if (c === 1 && symmetric) {
          // One symmetric row (integer decimation): fold the mirrored taps, half the multiplies.
          let lo = first;
          let hi = first + taps - 1;
          for (let k = 0; k < half; k++, lo++, hi--) a0 += (buf[lo]! + buf[hi]!) * table[k]!;
          a1 = buf[lo]! * table[half]!;
        } else {
          let k = 0;
          let s = first + ch;
          for (; k + 1 < taps; k += 2, s += 2 * c) {
            a0 += buf[s]! * table[row + k]!;
            a1 += buf[s + c]! * table[row + k + 1]!;
          }
          if (k < taps) a0 += buf[s]! * table[row + k]!;
        }
        const v = toInt16(a0 + a1);
        for (let n = 0; n < copies; n++) {
          if (encodeTable) {
            out[o++] = encodeTable[v & 0xffff]!;
          } else {
            out[o++] = v & 0xff;
            out[o++] = (v >> 8) & 0xff;
          }
        }
      }
      produced++;
      pos += stepFrames;
      phase += stepPhase;
      if (phase >= up) {
        phase -= up;
        pos++;
      }
    }
    this.#pos = pos;
    this.#phase = phase;
    return o;
  }

  /** Drops the frames no future output needs. */
  #compact(): void {
    const drop = Math.min(this.#pos - this.taps + 1, this.#len);
    if (drop <= 0) return;
    const c = this.channels;
    this.#buf.copyWithin(0, drop * c, this.#len * c);
    this.#len -= drop;
    this.#pos -= drop;
  }
}
