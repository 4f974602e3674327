/**
 * A small, dependency-free FLAC encoder: PCM16 (mono or stereo, interleaved, little-endian) in,
 * one complete FLAC stream out (`fLaC`, STREAMINFO, frames).
 *
 * Policies:
 * - Fixed block size (4096 samples per channel by default); the last block may be shorter.
 * - Each subframe is CONSTANT when the block holds one value, otherwise the smallest of the
 *   fixed predictors (orders 0 to 4) with Rice-coded residuals (best partition order 0 to 8,
 *   one Rice parameter per partition) and VERBATIM.
 * - Stereo blocks pick the smallest of left/right, left/side, side/right and mid/side.
 * - STREAMINFO carries the real minimum and maximum frame sizes, the total sample count and the
 *   MD5 of the unencoded audio (the interleaved little-endian 16-bit samples, as the format
 *   specifies).
 * - Deterministic: the same input and options always give the same bytes.
 *
 * Memory: the whole output is built in one buffer (about the size of the input at worst).
 */
import { createHash } from 'node:crypto';
import { ValidationError } from '../errors.js';
import { describeReceived } from '../options.js';

export interface FlacEncoderOptions {
  /** Samples per second per channel, 1 to 655350 Hz. */
  sampleRate: number;
  /** 1 (mono) or 2 (stereo, samples interleaved left then right). */
  channels: 1 | 2;
  /** Samples per channel in each frame, 16 to 65535. Default 4096. */
  blockSize?: number;
}

/** The size of the `fLaC` marker plus the STREAMINFO block, in bytes. */
export const FLAC_HEADER_BYTES = 42;

const BITS_PER_SAMPLE = 16;
const MAX_FIXED_ORDER = 4;
const MAX_PARTITION_ORDER = 8;

const CRC8_TABLE = new Uint8Array(256);
const CRC16_TABLE = new Uint16Array(256);
for (let i = 0; i < 256; i++) {
  let c8 = i;
  for (let b = 0; b < 8; b++) c8 = c8 & 0x80 ? ((c8 << 1) ^ 0x07) & 0xff : (c8 << 1) & 0xff;
  CRC8_TABLE[i] = c8;
  let c16 = i << 8;
  for (let b = 0; b < 8; b++) c16 = c16 & 0x8000 ? ((c16 << 1) ^ 0x8005) & 0xffff : (c16 << 1) & 0xffff;
  CRC16_TABLE[i] = c16;
}

/** CRC-8 (polynomial 0x07, initial 0) of the FLAC frame header. */
export function flacCrc8(bytes: Uint8Array, start = 0, end = bytes.length): number {
  let crc = 0;
  for (let i = start; i < end; i++) crc = CRC8_TABLE[crc ^ bytes[i]!]!;
  return crc;
}

/** CRC-16 (polynomial 0x8005, initial 0) of a whole FLAC frame; `crc` continues one computed over the bytes before `start`. */
export function flacCrc16(bytes: Uint8Array, start = 0, end = bytes.length, crc = 0): number {
  for (let i = start; i < end; i++) crc = ((crc << 8) & 0xffff) ^ CRC16_TABLE[(crc >> 8) ^ bytes[i]!]!;
  return crc;
}

/** MSB-first bit writer over a preallocated buffer. */
class BitWriter {
  pos = 0;
  #acc = 0;
  #pending = 0;
  constructor(readonly buf: Uint8Array) {}

  /** Writes the low `bits` bits of `value`, `bits` from 0 to 24. */
  write(value: number, bits: number): void {
    if (bits === 0) return;
    this.#acc = (this.#acc << bits) | (value & ((1 << bits) - 1));
    this.#pending += bits;
    while (this.#pending >= 8) {
      this.#pending -= 8;
      this.buf[this.pos++] = (this.#acc >>> this.#pending) & 0xff;
    }
    this.#acc &= (1 << this.#pending) - 1;
  }

  /** Writes up to 32 bits. */
  writeLong(value: number, bits: number): void {
    if (bits > 24) {
      this.write(Math.floor(value / 2 ** 24), bits - 24);
      this.write(value % 2 ** 24, 24);
    } else {
      this.write(value, bits);
    }
  }

  /** `q` zero bits, then a one. */
  writeUnary(q: number): void {
    while (q >= 24) {
      this.write(0, 24);
      q -= 24;
    }
    this.write(1, q + 1);
  }

  /** Pads with zero bits to the next byte boundary. */
  align(): void {
    if (this.#pending > 0) this.write(0, 8 - this.#pending);
  }
}

type SubframePlan =
  | { kind: 'constant'; bits: number }
  | { kind: 'verbatim'; bits: number }
  | { kind: 'fixed'; bits: number; order: number; partitionOrder: number; params: number[]; wideParams: boolean };

/** Reusable scratch space for one block. */
class Analyzer {
  /** diffs[k][i]: the k-th order difference at sample i (valid for i >= k). */
  readonly #diffs: Int32Array[];
  readonly #sums: Float64Array;

  constructor(blockSize: number) {
    this.#diffs = Array.from({ length: MAX_FIXED_ORDER + 1 }, () => new Int32Array(blockSize));
    this.#sums = new Float64Array(1 << MAX_PARTITION_ORDER);
  }

  /** Fills the residuals of every fixed order for `n` samples of `x`. */
  prepare(x: Int32Array, n: number): void {
    this.#diffs[0]!.set(x.subarray(0, n));
    for (let k = 1; k <= MAX_FIXED_ORDER; k++) {
      const prev = this.#diffs[k - 1]!;
      const cur = this.#diffs[k]!;
      for (let i = k; i < n; i++) cur[i] = prev[i]! - prev[i - 1]!;
    }
  }

  /** The residual of the fixed predictor of `order` for sample `i` of the last analysed block. */
  residuals(order: number): Int32Array {
    return this.#diffs[order]!;
  }

  /** Picks the smallest encoding of `n` samples of `x`, each `bps` bits wide. */
  plan(x: Int32Array, n: number, bps: number): SubframePlan {
    let constant = true;
    const first = x[0]!;
    for (let i = 1; i < n; i++) {
      if (x[i] !== first) {
        constant = false;
        break;
      }
    }
    if (constant) return { kind: 'constant', bits: 8 + bps };

    this.prepare(x, n);
    let best: SubframePlan = { kind: 'verbatim', bits: 8 + bps * n };
    let bestEstimate = Infinity;
    let bestOrder = -1;
    let bestPo = 0;
    for (let order = 0; order <= MAX_FIXED_ORDER && order < n; order++) {
      const { estimate, partitionOrder } = this.#estimate(order, n);
      if (estimate < bestEstimate) {
        bestEstimate = estimate;
        bestOrder = order;
        bestPo = partitionOrder;
      }
    }
    if (bestOrder >= 0) {
      const exact = this.#exact(bestOrder, bestPo, n, bps);
      if (exact.bits < best.bits) best = exact;
    }
    return best;
  }

  #maxPartitionOrder(order: number, n: number): number {
    let po = 0;
    while (po < MAX_PARTITION_ORDER && n % (1 << (po + 1)) === 0 && n >> (po + 1) > order) po++;
    return po;
  }

  /** Estimated residual bits of `order` at its best partition order (an upper bound). */
  #estimate(order: number, n: number): { estimate: number; partitionOrder: number } {
    const r = this.#diffs[order]!;
    const maxPo = this.#maxPartitionOrder(order, n);
    const parts = 1 << maxPo;
    const size = n >> maxPo;
    const sums = this.#sums;
    for (let p = 0; p < parts; p++) {
      let s = 0;
      const end = (p + 1) * size;
      for (let i = p === 0 ? order : p * size; i < end; i++) {
        const v = r[i]!;
        s += v >= 0 ? 2 * v : -2 * v - 1;
      }
      sums[p] = s;
    }
    let bestBits = Infinity;
    let bestPo = 0;
    for (let po = maxPo; po >= 0; po--) {
      const count = 1 << po;
      const partSize = n >> po;
      let bits = 0;
      for (let p = 0; p < count; p++) {
        const samples = p === 0 ? partSize - order : partSize;
        bits += 4 + riceCost(samples, sums[p]!, bestRiceParam(samples, sums[p]!));
      }
      if (bits < bestBits) {
        bestBits = bits;
        bestPo = po;
      }
      // Merge pairs for the next coarser order.
      for (let p = 0; p < count >> 1; p++) sums[p] = sums[2 * p]! + sums[2 * p + 1]!;
    }
    return { estimate: bestBits, partitionOrder: bestPo };
  }

  /** The exact size of the fixed subframe, with its Rice parameters. */
  #exact(order: number, partitionOrder: number, n: number, bps: number): SubframePlan {
    const r = this.#diffs[order]!;
    const count = 1 << partitionOrder;
    const partSize = n >> partitionOrder;
    const params: number[] = [];
    let bits = 8 + order * bps + 2 + 4;
    let wideParams = false;
    for (let p = 0; p < count; p++) {
      const start = p === 0 ? order : p * partSize;
      const end = (p + 1) * partSize;
      let s = 0;
      for (let i = start; i < end; i++) {
        const v = r[i]!;
        s += v >= 0 ? 2 * v : -2 * v - 1;
      }
      const k = bestRiceParam(end - start, s);
      let total = (end - start) * (k + 1);
      for (let i = start; i < end; i++) {
        const v = r[i]!;
        total += ((v << 1) ^ (v >> 31)) >>> k;
      }
      if (k > 14) wideParams = true;
      params.push(k);
      bits += total;
    }
    bits += count * (wideParams ? 5 : 4);
    return { kind: 'fixed', bits, order, partitionOrder, params, wideParams };
  }
}

/** Estimated bits of `samples` Rice-coded values whose zigzag sum is `sum`, with parameter `k`. */
function riceCost(samples: number, sum: number, k: number): number {
  return samples * (k + 1) + Math.floor(sum / 2 ** k);
}

/** The Rice parameter (0 to 30) that minimises `riceCost`. */
function bestRiceParam(samples: number, sum: number): number {
  if (samples === 0 || sum <= samples) return 0;
  // The optimum sits near log2(mean); check the neighbours.
  const guess = Math.max(0, Math.min(30, Math.floor(Math.log2(sum / samples))));
  let best = guess;
  let bestBits = riceCost(samples, sum, guess);
  for (const k of [guess - 1, guess + 1, guess - 2]) {
    if (k < 0 || k > 30) continue;
    const bits = riceCost(samples, sum, k);
    if (bits < bestBits) {
      bestBits = bits;
      best = k;
    }
  }
  return best;
}

function writeSubframe(w: BitWriter, plan: SubframePlan, x: Int32Array, n: number, bps: number, analyzer: Analyzer): void {
  switch (plan.kind) {
    case 'constant':
      w.write(0b00000000, 8);
      w.writeLong(x[0]! & (2 ** bps - 1), bps);
      return;
    case 'verbatim':
      w.write(0b00000010, 8);
      for (let i = 0; i < n; i++) w.writeLong(x[i]! & (2 ** bps - 1), bps);
      return;
    case 'fixed': {
      w.write(0b00010000 | (plan.order << 1), 8);
      for (let i = 0; i < plan.order; i++) w.writeLong(x[i]! & (2 ** bps - 1), bps);
      w.write(plan.wideParams ? 1 : 0, 2);
      w.write(plan.partitionOrder, 4);
      const paramBits = plan.wideParams ? 5 : 4;
      const r = analyzer.residuals(plan.order);
      const partSize = n >> plan.partitionOrder;
      for (let p = 0; p < plan.params.length; p++) {
        const k = plan.params[p]!;
        w.write(k, paramBits);
        const end = (p + 1) * partSize;
        for (let i = p === 0 ? plan.order : p * partSize; i < end; i++) {
          const v = r[i]!;
          const u = ((v << 1) ^ (v >> 31)) >>> 0;
          w.writeUnary(u >>> k);
          if (k > 0) w.writeLong(u & (2 ** k - 1), k);
        }
      }
      return;
    }
  }
}

function blockSizeCode(n: number): { code: number; extraBits: number } {
  if (n === 192) return { code: 0b0001, extraBits: 0 };
  for (let c = 2; c <= 5; c++) if (n === 576 << (c - 2)) return { code: c, extraBits: 0 };
  for (let c = 8; c <= 15; c++) if (n === 256 << (c - 8)) return { code: c, extraBits: 0 };
  return n <= 256 ? { code: 0b0110, extraBits: 8 } : { code: 0b0111, extraBits: 16 };
}

const RATE_CODES = new Map<number, number>([
  [88200, 0b0001],
  [176400, 0b0010],
  [192000, 0b0011],
  [8000, 0b0100],
  [16000, 0b0101],
  [22050, 0b0110],
  [24000, 0b0111],
  [32000, 0b1000],
  [44100, 0b1001],
  [48000, 0b1010],
  [96000, 0b1011],
]);

function sampleRateCode(rate: number): { code: number; extraBits: number; extra: number } {
  const known = RATE_CODES.get(rate);
  if (known !== undefined) return { code: known, extraBits: 0, extra: 0 };
  if (rate % 1000 === 0 && rate / 1000 <= 255) return { code: 0b1100, extraBits: 8, extra: rate / 1000 };
  if (rate <= 0xffff) return { code: 0b1101, extraBits: 16, extra: rate };
  if (rate % 10 === 0 && rate / 10 <= 0xffff) return { code: 0b1110, extraBits: 16, extra: rate / 10 };
  return { code: 0b0000, extraBits: 0, extra: 0 };
}

/** The frame number in FLAC's extended UTF-8 coding (up to 31 bits, 6 bytes). */
function writeUtf8Number(w: BitWriter, value: number): void {
  if (value < 0x80) {
    w.write(value, 8);
    return;
  }
  let continuation = 1;
  while (continuation < 5 && value >= 2 ** (6 * continuation + (6 - continuation))) continuation++;
  const lead = value / 2 ** (6 * continuation);
  w.write(((0xff00 >> (continuation + 1)) & 0xff) | Math.floor(lead), 8);
  for (let i = continuation - 1; i >= 0; i--) w.write(0x80 | (Math.floor(value / 2 ** (6 * i)) & 0x3f), 8);
}

function validate(pcm: Uint8Array, options: FlacEncoderOptions): { channels: number; sampleRate: number; blockSize: number } {
  const { sampleRate, channels } = options;
  const blockSize = options.blockSize ?? 4096;
  if (channels !== 1 && channels !== 2) throw new ValidationError('channels', '1 or 2', describeReceived(channels));
  if (!Number.isInteger(sampleRate) || sampleRate < 1 || sampleRate > 655350) {
    throw new ValidationError('sampleRate', 'an integer from 1 to 655350 Hz', describeReceived(sampleRate));
  }
  if (!Number.isInteger(blockSize) || blockSize < 16 || blockSize > 65535) {
    throw new ValidationError('blockSize', 'an integer from 16 to 65535 samples', describeReceived(blockSize));
  }
  if (!(pcm instanceof Uint8Array)) throw new ValidationError('pcm', 'a Buffer or Uint8Array of PCM16 LE samples');
  if (pcm.byteLength % (2 * channels) !== 0) {
    throw new ValidationError('pcm', `a whole number of ${2 * channels}-byte sample frames`, `${pcm.byteLength} bytes`);
  }
  return { channels, sampleRate, blockSize };
}

/**
 * Encodes PCM16 LE interleaved samples (`channels` of them per frame) as a complete FLAC
 * stream. An empty input gives a valid stream with no frames (total samples 0, which the format
 * also uses for "unknown"). Throws `ValidationError` naming the option at fault.
 */
export function encodeFlac(pcm: Uint8Array, options: FlacEncoderOptions): Buffer {
  const { channels, sampleRate, blockSize } = validate(pcm, options);
  const totalSamples = pcm.byteLength / (2 * channels);
  const frames = Math.ceil(totalSamples / blockSize);
  const frameBound = 16 + channels * (2 + Math.ceil((blockSize * (BITS_PER_SAMPLE + 1)) / 8)) + 3;
  const out = new Uint8Array(FLAC_HEADER_BYTES + frames * frameBound);
  const w = new BitWriter(out);
  const view = new DataView(pcm.buffer, pcm.byteOffset, pcm.byteLength);
  const analyzer = new Analyzer(blockSize);
  const left = new Int32Array(blockSize);
  const right = new Int32Array(blockSize);
  const mid = new Int32Array(blockSize);
  const side = new Int32Array(blockSize);
  const rate = sampleRateCode(sampleRate);

  w.pos = FLAC_HEADER_BYTES;
  let minFrame = Infinity;
  let maxFrame = 0;
  for (let f = 0; f < frames; f++) {
    const start = f * blockSize;
    const n = Math.min(blockSize, totalSamples - start);
    const frameStart = w.pos;
    if (channels === 1) {
      for (let i = 0; i < n; i++) left[i] = view.getInt16((start + i) * 2, true);
    } else {
      for (let i = 0; i < n; i++) {
        const l = view.getInt16((start + i) * 4, true);
        const r = view.getInt16((start + i) * 4 + 2, true);
        left[i] = l;
        right[i] = r;
        mid[i] = (l + r) >> 1;
        side[i] = l - r;
      }
    }

    // Choose the channel layout and each subframe's encoding.
    let assignment: number;
    let subframes: Array<{ x: Int32Array; bps: number; plan: SubframePlan }>;
    if (channels === 1) {
      assignment = 0b0000;
      subframes = [{ x: left, bps: 16, plan: analyzer.plan(left, n, 16) }];
    } else {
      const pl = analyzer.plan(left, n, 16);
      const pr = analyzer.plan(right, n, 16);
      const pm = analyzer.plan(mid, n, 16);
      const ps = analyzer.plan(side, n, 17);
      const layouts: Array<[number, number, typeof subframes]> = [
        [
          pl.bits + pr.bits,
          0b0001,
          [
            { x: left, bps: 16, plan: pl },
            { x: right, bps: 16, plan: pr },
          ],
        ],
        [
          pl.bits + ps.bits,
          0b1000,
          [
            { x: left, bps: 16, plan: pl },
            { x: side, bps: 17, plan: ps },
          ],
        ],
        [
          ps.bits + pr.bits,
          0b1001,
          [
            { x: side, bps: 17, plan: ps },
            { x: right, bps: 16, plan: pr },
          ],
        ],
        [
          pm.bits + ps.bits,
          0b1010,
          [
            { x: mid, bps: 16, plan: pm },
            { x: side, bps: 17, plan: ps },
          ],
        ],
      ];
      let chosen = layouts[0]!;
      for (const layout of layouts) if (layout[0] < chosen[0]) chosen = layout;
      assignment = chosen[1];
      subframes = chosen[2];
    }

    // Frame header.
    const bs = blockSizeCode(n);
    w.write(0xfff8, 16);
    w.write((bs.code << 4) | rate.code, 8);
    w.write((assignment << 4) | (0b100 << 1), 8);
    writeUtf8Number(w, f);
    if (bs.extraBits) w.write(n - 1, bs.extraBits);
    if (rate.extraBits) w.write(rate.extra, rate.extraBits);
    w.write(flacCrc8(out, frameStart, w.pos), 8);

    for (const sub of subframes) {
      // The analyzer holds the residuals of the channel it saw last: refill them.
      if (sub.plan.kind === 'fixed' && channels > 1) analyzer.prepare(sub.x, n);
      writeSubframe(w, sub.plan, sub.x, n, sub.bps, analyzer);
    }
    w.align();
    w.write(flacCrc16(out, frameStart, w.pos), 16);
    const size = w.pos - frameStart;
    if (size < minFrame) minFrame = size;
    if (size > maxFrame) maxFrame = size;
  }
  const end = w.pos;

  // Marker and STREAMINFO.
  w.pos = 0;
  w.write(0x664c, 16); // "fL"
  w.write(0x6143, 16); // "aC"
  w.write(0x80, 8); // last metadata block, type 0 (STREAMINFO)
  w.write(34, 24);
  w.write(blockSize, 16);
  w.write(blockSize, 16);
  w.write(frames ? minFrame : 0, 24);
  w.write(maxFrame, 24);
  w.write(sampleRate, 20);
  w.write(channels - 1, 3);
  w.write(BITS_PER_SAMPLE - 1, 5);
  w.write(Math.floor(totalSamples / 2 ** 32), 4);
  w.writeLong(totalSamples % 2 ** 32, 32);
  out.set(createHash('md5').update(pcm).digest(), 26);

  return Buffer.from(out.subarray(0, end));
}
