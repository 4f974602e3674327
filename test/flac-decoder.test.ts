/**
 * FlacPcmDecoder against FLAC files made by the real ffmpeg encoder (and a few built here for
 * what ffmpeg never writes), across the features a FLAC decoder has to handle: every subframe
 * type (CONSTANT, VERBATIM, FIXED orders 0 to 4, LPC orders up to 32 with 1- to 15-bit
 * coefficients), every stereo decorrelation mode, wasted bits (1 to 15), both Rice coding
 * methods with partition orders 0 to 8 and escape-coded partitions, every block size code of the
 * frame header, every sample rate and depth code (table, kHz, Hz and tens of Hz, and 0: from
 * STREAMINFO), frame and sample numbers in 1- to 5-byte UTF-8, fixed and variable block size
 * strategies, 8-, 12-, 16-, 20- and 24-bit depths, 1 to 8 channels; then damaged and truncated
 * streams (with and without STREAMINFO's MD5), STREAMINFO's total and MD5, metadata blocks of
 * every kind, and how soon audio comes out while streaming. A few files also go through libFLAC,
 * the decoder's fallback.
 *
 * The source audio is generated here (seeded, so every run encodes the same bytes) and the
 * decoder's output must equal it byte for byte. A small reference parser in this file walks
 * every frame (checking both CRCs and reconstructing the samples) to record which features each
 * file really uses, so a change in ffmpeg's choices cannot silently shrink the coverage: each
 * case names the features it must contain, and a coverage test checks the union.
 * `FLAC_CENSUS=1` prints what each file uses.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FlacPcmDecoder, type FlacEngine } from '../lib/audio/flac-decoder.js';
import { FlacDecodeStream } from '../lib/audio/flac-stream.js';
import { flacCrc16, flacCrc8 } from '../lib/audio/flac-encoder.js';
import { prng } from '../lib/emulator/synth.js';
import { IntegrityError, ProtocolError } from '../lib/errors.js';

const require = createRequire(import.meta.url);
const ffmpegPath = require.resolve('@ffmpeg-installer/linux-x64/ffmpeg');

// ---------------------------------------------------------------------------------------------
// Deterministic sources

type Signal =
  /** Exponential sine sweep, 20 Hz to 0.45 of the rate, at -3 dBFS. */
  | 'sweep'
  /** Uniform white noise over the whole range, independent channels. */
  | 'noise'
  /** Uniform noise in [-4, 3]: the lowest bits only. */
  | 'lownoise'
  /** Digital silence. */
  | 'silence'
  /** A different constant per channel, stepping once half way. */
  | 'dc'
  /** Square wave between exactly the minimum and the maximum value, odd channels inverted. */
  | 'square'
  /** Voiced harmonics with formants, syllables, pauses and a breath of noise; correlated channels. */
  | 'speech'
  /** `speech` rounded to multiples of 8: three wasted bits. */
  | 'wasted'
  /** 24-bit only: `speech` at 16-bit resolution, multiples of 256: eight wasted bits. */
  | 'upper16'
  /** `speech` on channel 0, silence on the others. */
  | 'halfsilent';

interface Source {
  /** Interleaved samples at the source depth. */
  samples: Int32Array;
  /** What the decoder must output: PCM16 LE interleaved (24-bit sources shifted right by 8). */
  pcm16: Buffer;
  /** What ffmpeg reads: s16le, or s32le with the 24-bit value in the top bits. */
  raw: Buffer;
  /** MD5 of the samples at their own depth, little-endian (what STREAMINFO carries). */
  md5: string;
}

function makeSource(signal: Signal, frames: number, channels: number, rate: number, bits: 16 | 24, seed: number): Source {
  const max = 2 ** (bits - 1) - 1;
  const min = -max - 1;
  const random = prng(seed);
  const samples = new Int32Array(frames * channels);
  const clamp = (v: number): number => Math.max(min, Math.min(max, Math.round(v)));
  const set = (i: number, c: number, v: number): void => {
    samples[i * channels + c] = clamp(v);
  };
  const speechBase = (): Float64Array => {
    // Values in about [-1, 1].
    const out = new Float64Array(frames + 16);
    let phase = 0;
    for (let i = 0; i < out.length; i++) {
      const t = i / rate;
      const f0 = 120 + 60 * Math.sin(2 * Math.PI * 0.7 * t) + 15 * Math.sin(2 * Math.PI * 5.3 * t);
      phase += (2 * Math.PI * f0) / rate;
      let voiced = 0;
      for (let h = 1; h <= 14 && h * f0 < rate / 2; h++) {
        const f = h * f0;
        const a = Math.exp(-(((f - 700) / 260) ** 2)) + 0.6 * Math.exp(-(((f - 1500) / 380) ** 2)) + 0.25 / h;
        voiced += a * Math.sin(h * phase + h * 0.4);
      }
      const syllable = Math.floor(t * 6.2);
      const pause = syllable % 5 === 4;
      const env = pause ? 0 : Math.sin(Math.PI * (t * 6.2 - syllable)) ** 2;
      const breath = (random() - 0.5) * (pause ? 0.002 : 0.04);
      out[i] = 0.33 * voiced * env + breath;
    }
    return out;
  };
  switch (signal) {
    case 'sweep': {
      const f0 = 20;
      const f1 = 0.45 * rate;
      const T = frames / rate;
      const k = Math.log(f1 / f0);
      for (let i = 0; i < frames; i++) {
        const t = i / rate;
        const phase = ((2 * Math.PI * f0 * T) / k) * (Math.exp((k * t) / T) - 1);
        for (let c = 0; c < channels; c++) set(i, c, 0.7 * max * (1 - 0.08 * c) * Math.sin(phase + 0.3 * c));
      }
      break;
    }
    case 'noise':
      for (let i = 0; i < samples.length; i++) samples[i] = Math.floor(random() * 2 ** bits) + min;
      break;
    case 'lownoise':
      for (let i = 0; i < samples.length; i++) samples[i] = Math.floor(random() * 8) - 4;
      break;
    case 'silence':
      break;
    case 'dc':
      for (let i = 0; i < frames; i++) {
        for (let c = 0; c < channels; c++) set(i, c, ((i < frames / 2 ? -0.377 : 0.213) * max * (c + 1)) / channels);
      }
      break;
    case 'square':
      for (let i = 0; i < frames; i++) {
        const high = Math.floor(i / 50) % 2 === 1;
        for (let c = 0; c < channels; c++) samples[i * channels + c] = high !== (c % 2 === 1) ? max : min;
      }
      break;
    case 'speech':
    case 'wasted':
    case 'upper16':
    case 'halfsilent': {
      const base = speechBase();
      const quantum = signal === 'wasted' ? 8 : signal === 'upper16' ? 256 : 1;
      for (let i = 0; i < frames; i++) {
        for (let c = 0; c < channels; c++) {
          if (signal === 'halfsilent' && c > 0) continue;
          // Each channel: the voice delayed by 3 samples per channel, a little quieter, plus its own faint noise.
          const v = (1 - 0.12 * c) * base[i + 16 - 3 * c]! * max + (random() - 0.5) * (c ? 24 : 8) * (max / 32767);
          const q = Math.round(v / quantum) * quantum;
          samples[i * channels + c] = Math.max(min, Math.min(max + 1 - quantum, q));
        }
      }
      break;
    }
  }
  const pcm16 = Buffer.alloc(samples.length * 2);
  const raw = Buffer.alloc(samples.length * (bits === 16 ? 2 : 4));
  for (let i = 0; i < samples.length; i++) {
    const v = samples[i]!;
    pcm16.writeInt16LE(bits === 16 ? v : v >> 8, i * 2);
    if (bits === 16) raw.writeInt16LE(v, i * 2);
    else raw.writeInt32LE(v * 256, i * 4);
  }
  return { samples, pcm16, raw, md5: audioMd5(samples, bits) };
}

/** The MD5 STREAMINFO carries: samples at their own depth, little-endian, ceil(bits / 8) bytes each. */
function audioMd5(samples: Int32Array, bits: number): string {
  const width = Math.ceil(bits / 8);
  const own = Buffer.alloc(samples.length * width);
  samples.forEach((v, i) => own.writeIntLE(v, i * width, width));
  return createHash('md5').update(own).digest('hex');
}

// ---------------------------------------------------------------------------------------------
// A reference FLAC parser: walks the metadata chain and every frame, checks CRC-8 and CRC-16,
// reconstructs the samples, and records which format features the stream uses.

const crc8 = flacCrc8;
const crc16 = flacCrc16;

class BitReader {
  pos: number;
  constructor(
    private readonly b: Uint8Array,
    byteOffset: number,
  ) {
    this.pos = byteOffset * 8;
  }
  get byte(): number {
    return Math.floor(this.pos / 8);
  }
  /** Unsigned, up to 32 bits. */
  read(n: number): number {
    let v = 0;
    while (n > 0) {
      const byte = this.b[this.pos >> 3];
      if (byte === undefined) throw new Error('reference parser: ran past the end of the data');
      const off = this.pos & 7;
      const take = Math.min(8 - off, n);
      v = v * (1 << take) + ((byte >> (8 - off - take)) & ((1 << take) - 1));
      this.pos += take;
      n -= take;
    }
    return v;
  }
  signed(n: number): number {
    if (n === 0) return 0;
    const v = this.read(n);
    return v >= 2 ** (n - 1) ? v - 2 ** n : v;
  }
  unary(): number {
    let q = 0;
    for (;;) {
      if ((this.pos & 7) === 0 && this.b[this.pos >> 3] === 0) {
        q += 8;
        this.pos += 8;
        continue;
      }
      if (this.read(1) === 1) return q;
      q++;
    }
  }
  align(): void {
    this.pos = Math.ceil(this.pos / 8) * 8;
  }
}

interface MetaBlock {
  type: number;
  /** Offset of the block's 4-byte header. */
  start: number;
  /** Offset just past the block. */
  end: number;
}

function metadataBlocks(file: Uint8Array): { blocks: MetaBlock[]; audioStart: number } {
  if (Buffer.from(file.subarray(0, 4)).toString('latin1') !== 'fLaC') throw new Error('reference parser: no fLaC marker');
  const blocks: MetaBlock[] = [];
  let o = 4;
  for (;;) {
    const h = file[o]!;
    const length = (file[o + 1]! << 16) | (file[o + 2]! << 8) | file[o + 3]!;
    blocks.push({ type: h & 0x7f, start: o, end: o + 4 + length });
    o += 4 + length;
    if (h & 0x80) return { blocks, audioStart: o };
  }
}

interface FrameSpan {
  offset: number;
  length: number;
  /** Index of the frame's first sample (per channel) in the stream. */
  firstSample: number;
  blockSize: number;
  /** Bytes of the frame header, CRC-8 included. */
  headerLength: number;
}

interface Reference {
  frames: FrameSpan[];
  audioStart: number;
  blocks: MetaBlock[];
  /** Reconstructed samples, interleaved. */
  samples: Int32Array;
  /** Feature name, how many times seen. */
  features: Map<string, number>;
}

const SAMPLE_RATES = [0, 88200, 176400, 192000, 8000, 16000, 22050, 24000, 32000, 44100, 48000, 96000];
const SAMPLE_SIZES = [0, 8, 12, 0, 16, 20, 24, 32];
const FIXED = [[], [1], [2, -1], [3, -3, 1], [4, -6, 4, -1]];

function parseReference(file: Uint8Array): Reference {
  const { blocks, audioStart } = metadataBlocks(file);
  const si = blocks[0]!;
  if (si.type !== 0) throw new Error('reference parser: first block is not STREAMINFO');
  const r = new BitReader(file, si.start + 4 + 10);
  const rate = r.read(20);
  const channels = r.read(3) + 1;
  const bps = r.read(5) + 1;
  const total = r.read(4) * 2 ** 32 + r.read(32);
  const features = new Map<string, number>();
  const see = (name: string): void => {
    features.set(name, (features.get(name) ?? 0) + 1);
  };
  const perChannel: number[][] = Array.from({ length: channels }, () => []);
  const frames: FrameSpan[] = [];
  let offset = audioStart;
  let firstSample = 0;
  while (offset < file.length) {
    const br = new BitReader(file, offset);
    if (br.read(14) !== 0x3ffe) throw new Error(`reference parser: no frame sync at ${offset}`);
    if (br.read(1) !== 0) throw new Error('reference parser: reserved bit set');
    const variable = br.read(1);
    see(variable ? 'strategy:variable' : 'strategy:fixed');
    const bsCode = br.read(4);
    const srCode = br.read(4);
    const chCode = br.read(4);
    const sizeCode = br.read(3);
    br.read(1);
    // The frame (or sample) number, UTF-8 coded.
    const lead = br.read(8);
    let extra = 0;
    while (extra < 7 && lead & (0x80 >> extra)) extra++;
    const utf8Bytes = extra === 0 ? 1 : extra;
    let number = extra === 0 ? lead : lead & (0xff >> (extra + 1));
    for (let i = 1; i < utf8Bytes; i++) number = number * 64 + (br.read(8) & 0x3f);
    see(`utf8:${utf8Bytes}`);
    if (!variable && number !== frames.length) throw new Error(`reference parser: frame number ${number}, expected ${frames.length}`);
    if (variable && number !== firstSample) throw new Error(`reference parser: sample number ${number}, expected ${firstSample}`);
    see(`bs:code${bsCode}`);
    const blockSize =
      bsCode === 1 ? 192 : bsCode <= 5 ? 576 << (bsCode - 2) : bsCode === 6 ? br.read(8) + 1 : bsCode === 7 ? br.read(16) + 1 : 256 << (bsCode - 8);
    if (bsCode === 0) throw new Error('reference parser: reserved block size code');
    see(`sr:code${srCode}`);
    const frameRate =
      srCode === 0
        ? rate
        : srCode <= 11
          ? SAMPLE_RATES[srCode]!
          : srCode === 12
            ? br.read(8) * 1000
            : srCode === 13
              ? br.read(16)
              : srCode === 14
                ? br.read(16) * 10
                : -1;
    if (frameRate !== rate) throw new Error(`reference parser: frame rate ${frameRate} differs from STREAMINFO ${rate}`);
    see(`bps:code${sizeCode}`);
    const frameBps = sizeCode === 0 ? bps : SAMPLE_SIZES[sizeCode]!;
    if (frameBps !== bps) throw new Error(`reference parser: frame depth ${frameBps} differs from STREAMINFO ${bps}`);
    const headerEnd = br.byte;
    if (br.read(8) !== crc8(file, offset, headerEnd)) throw new Error(`reference parser: bad header CRC-8 at ${offset}`);
    const mode = chCode < 8 ? 'independent' : (['left_side', 'right_side', 'mid_side'] as const)[chCode - 8];
    if (!mode || (chCode >= 8 && channels !== 2) || (chCode < 8 && chCode + 1 !== channels)) {
      throw new Error(`reference parser: channel assignment ${chCode} for ${channels} channels`);
    }
    see(`ch:${mode}${mode === 'independent' ? channels : ''}`);
    const decoded: number[][] = [];
    for (let c = 0; c < channels; c++) {
      const side = (mode === 'left_side' && c === 1) || (mode === 'right_side' && c === 0) || (mode === 'mid_side' && c === 1);
      decoded.push(readSubframe(br, blockSize, bps + (side ? 1 : 0), see));
    }
    if (mode !== 'independent') {
      const [a, b] = decoded as [number[], number[]];
      for (let i = 0; i < blockSize; i++) {
        if (mode === 'left_side') b[i] = a[i]! - b[i]!;
        else if (mode === 'right_side') a[i] = a[i]! + b[i]!;
        else {
          const mid = a[i]! * 2 + (b[i]! & 1);
          a[i] = (mid + b[i]!) / 2;
          b[i] = (mid - b[i]!) / 2;
        }
      }
    }
    br.align();
    const end = br.byte + 2;
    if (br.read(16) !== crc16(file, offset, end - 2)) throw new Error(`reference parser: bad frame CRC-16 at ${offset}`);
    for (let c = 0; c < channels; c++) for (const v of decoded[c]!) perChannel[c]!.push(v);
    frames.push({ offset, length: end - offset, firstSample, blockSize, headerLength: headerEnd + 1 - offset });
    firstSample += blockSize;
    offset = end;
  }
  if (total !== 0 && total !== firstSample) throw new Error(`reference parser: ${firstSample} samples, STREAMINFO says ${total}`);
  const samples = new Int32Array(firstSample * channels);
  for (let c = 0; c < channels; c++) perChannel[c]!.forEach((v, i) => (samples[i * channels + c] = v));
  if (frames.length > 1 && frames.at(-1)!.blockSize < frames[0]!.blockSize) see('frame:short-last');
  return { frames, audioStart, blocks, samples, features };
}

function readSubframe(br: BitReader, n: number, bps: number, see: (name: string) => void): number[] {
  if (br.read(1) !== 0) throw new Error('reference parser: subframe padding bit set');
  const type = br.read(6);
  let wasted = 0;
  if (br.read(1)) {
    wasted = br.unary() + 1;
    see(`wasted:${wasted}`);
  }
  const depth = bps - wasted;
  let out: number[];
  if (type === 0) {
    see('sub:constant');
    out = new Array<number>(n).fill(br.signed(depth));
  } else if (type === 1) {
    see('sub:verbatim');
    out = [];
    for (let i = 0; i < n; i++) out.push(br.signed(depth));
  } else if (type >= 8 && type <= 12) {
    const order = type - 8;
    see(`sub:fixed${order}`);
    out = [];
    for (let i = 0; i < order; i++) out.push(br.signed(depth));
    const residual = readResidual(br, n, order, see);
    const coefs = FIXED[order]!;
    for (let i = order; i < n; i++) {
      let p = 0;
      for (let j = 0; j < order; j++) p += coefs[j]! * out[i - 1 - j]!;
      out.push(p + residual[i - order]!);
    }
  } else if (type >= 32) {
    const order = (type & 31) + 1;
    see(`sub:lpc${order}`);
    out = [];
    for (let i = 0; i < order; i++) out.push(br.signed(depth));
    const precision = br.read(4) + 1;
    if (precision === 16) throw new Error('reference parser: invalid LPC precision');
    const shift = br.signed(5);
    if (shift < 0) throw new Error('reference parser: negative LPC shift');
    see(`lpc:precision${precision}`);
    see(`lpc:shift${shift}`);
    const coefs: number[] = [];
    for (let i = 0; i < order; i++) coefs.push(br.signed(precision));
    const residual = readResidual(br, n, order, see);
    const scale = 2 ** shift;
    for (let i = order; i < n; i++) {
      let sum = 0;
      for (let j = 0; j < order; j++) sum += coefs[j]! * out[i - 1 - j]!;
      out.push(Math.floor(sum / scale) + residual[i - order]!);
    }
  } else {
    throw new Error(`reference parser: reserved subframe type ${type}`);
  }
  if (wasted) for (let i = 0; i < n; i++) out[i] = out[i]! * 2 ** wasted;
  return out;
}

function readResidual(br: BitReader, n: number, order: number, see: (name: string) => void): number[] {
  const method = br.read(2);
  if (method > 1) throw new Error('reference parser: reserved residual coding method');
  see(`rice:method${method}`);
  const paramBits = method === 0 ? 4 : 5;
  const escape = method === 0 ? 15 : 31;
  const partitionOrder = br.read(4);
  see(`rice:po${partitionOrder}`);
  const partitions = 1 << partitionOrder;
  if (n % partitions !== 0 || n / partitions < order) throw new Error('reference parser: bad partition order');
  const out: number[] = [];
  for (let p = 0; p < partitions; p++) {
    const count = n / partitions - (p === 0 ? order : 0);
    const param = br.read(paramBits);
    if (param === escape) {
      const bits = br.read(5);
      see('rice:escape');
      for (let i = 0; i < count; i++) out.push(br.signed(bits));
    } else {
      see(`rice:param${param}`);
      for (let i = 0; i < count; i++) {
        const v = br.unary() * 2 ** param + br.read(param);
        out.push(v % 2 ? -(v + 1) / 2 : v / 2);
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Hand-built streams, for what ffmpeg's encoder never writes: escape-coded (raw) residual
// partitions (both coding methods, including 0-bit ones), Rice method 1 in a 16-bit stream,
// the variable block size strategy with sample numbers up to 5-byte UTF-8, 8-bit depth, and
// the table codes for 88.2, 176.4 and 192 kHz. Only FIXED, VERBATIM and CONSTANT subframes:
// ffmpeg covers LPC.

class BitWriter {
  private readonly bytes: number[] = [];
  private acc = 0;
  private n = 0;
  private bit(b: number): void {
    this.acc = (this.acc << 1) | b;
    if (++this.n === 8) {
      this.bytes.push(this.acc);
      this.acc = 0;
      this.n = 0;
    }
  }
  /** The low `bits` bits of `value` (two's complement for negative values), up to 36 bits. */
  write(value: number, bits: number): void {
    const v = value < 0 ? value + 2 ** bits : value;
    for (let i = bits - 1; i >= 0; i--) this.bit(Math.floor(v / 2 ** i) % 2);
  }
  unary(q: number): void {
    for (let i = 0; i < q; i++) this.bit(0);
    this.bit(1);
  }
  bytesSoFar(): Buffer {
    while (this.n) this.bit(0);
    return Buffer.from(this.bytes);
  }
}

/** The UTF-8-like coding of frame and sample numbers (up to 36 bits, 7 bytes). */
function utf8Number(n: number): number[] {
  if (n < 0x80) return [n];
  let len = 2;
  while (n >= 2 ** (5 * len + 1)) len++;
  const out = [((0xff << (8 - len)) & 0xff) | Math.floor(n / 2 ** (6 * (len - 1)))];
  for (let i = len - 2; i >= 0; i--) out.push(0x80 | (Math.floor(n / 2 ** (6 * i)) % 64));
  return out;
}

/** Bits a two's complement field needs to hold every value in `values` (0 when all are 0). */
function signedWidth(values: number[]): number {
  let bits = 0;
  for (const v of values) bits = Math.max(bits, v === 0 ? 0 : v > 0 ? Math.floor(Math.log2(v)) + 2 : Math.ceil(Math.log2(-v)) + 1);
  return bits;
}

type ChannelMode = 'independent' | 'left_side' | 'right_side' | 'mid_side';

type HandSubframe = (
  | { kind: 'verbatim' }
  | { kind: 'constant' }
  | {
      kind: 'fixed';
      order: number;
      /** The highest partition order to use (lowered where the block does not divide). */
      partitionOrder: number;
      /** Residual coding method: 0 (4-bit Rice parameters, escape 15) or 1 (5-bit, escape 31). */
      method: 0 | 1;
      /** Which partitions to write escape-coded (raw two's complement). */
      escape: (partition: number) => boolean;
    }
) & {
  /** Wasted bits: the subframe's samples must all be multiples of 2^wasted. */
  wasted?: number;
};

interface HandStream {
  bits: number;
  channels: number;
  rate: number;
  /** Block sizes, in order. */
  blocks: number[];
  /** Variable block size strategy: frame headers carry sample numbers, not frame numbers. */
  variable: boolean;
  /** Interleaved samples at `bits` depth. */
  samples: Int32Array;
  subframe: (frame: number, channel: number) => HandSubframe;
  /** Stereo decorrelation per frame (independent when absent). */
  mode?: (frame: number) => ChannelMode;
  /** Frame headers leave the sample rate and depth to STREAMINFO (codes 0). */
  headerFromStreamInfo?: boolean;
}

const HAND_RATES: Record<number, number> = { 88200: 1, 176400: 2, 192000: 3, 8000: 4, 16000: 5, 22050: 6, 24000: 7, 32000: 8, 44100: 9, 48000: 10, 96000: 11 };
const HAND_SIZES: Record<number, number> = { 8: 1, 12: 2, 16: 4, 20: 5, 24: 6 };
const HAND_BLOCKS: Record<number, number> = {
  192: 1,
  576: 2,
  1152: 3,
  2304: 4,
  4608: 5,
  256: 8,
  512: 9,
  1024: 10,
  2048: 11,
  4096: 12,
  8192: 13,
  16384: 14,
  32768: 15,
};

function writeResidual(w: BitWriter, residual: number[], n: number, order: number, plan: Extract<HandSubframe, { kind: 'fixed' }>): void {
  // The highest partition order up to the plan's that divides the block and leaves the first partition its warm-up.
  let partitionOrder = plan.partitionOrder;
  while (partitionOrder > 0 && (n % (1 << partitionOrder) !== 0 || n >> partitionOrder < order)) partitionOrder--;
  w.write(plan.method, 2);
  w.write(partitionOrder, 4);
  const partitions = 1 << partitionOrder;
  const escapeCode = plan.method === 0 ? 15 : 31;
  let at = 0;
  for (let p = 0; p < partitions; p++) {
    const count = n / partitions - (p === 0 ? order : 0);
    const part = residual.slice(at, at + count);
    at += count;
    if (plan.escape(p)) {
      const bits = signedWidth(part);
      w.write(escapeCode, plan.method === 0 ? 4 : 5);
      w.write(bits, 5);
      for (const v of part) w.write(v, bits);
      continue;
    }
    const zigzag = part.map((v) => (v >= 0 ? 2 * v : -2 * v - 1));
    const mean = zigzag.reduce((a, b) => a + b, 0) / Math.max(1, count);
    const param = Math.min(escapeCode - 1, mean < 1 ? 0 : Math.floor(Math.log2(mean)));
    w.write(param, plan.method === 0 ? 4 : 5);
    for (const u of zigzag) {
      w.unary(Math.floor(u / 2 ** param));
      w.write(u % 2 ** param, param);
    }
  }
}

function buildFlac(s: HandStream): Buffer {
  const frames: Buffer[] = [];
  let first = 0;
  for (const [f, n] of s.blocks.entries()) {
    const mode = s.channels === 2 && s.mode ? s.mode(f) : 'independent';
    const w = new BitWriter();
    w.write(0x3ffe, 14);
    w.write(0, 1);
    w.write(s.variable ? 1 : 0, 1);
    const bsCode = HAND_BLOCKS[n] ?? (n <= 256 ? 6 : 7);
    const srCode = s.headerFromStreamInfo ? 0 : (HAND_RATES[s.rate] ?? (s.rate % 1000 === 0 ? 12 : s.rate % 10 === 0 ? 14 : 13));
    w.write(bsCode, 4);
    w.write(srCode, 4);
    w.write(mode === 'independent' ? s.channels - 1 : mode === 'left_side' ? 8 : mode === 'right_side' ? 9 : 10, 4);
    w.write(s.headerFromStreamInfo ? 0 : HAND_SIZES[s.bits]!, 3);
    w.write(0, 1);
    for (const b of utf8Number(s.variable ? first : f)) w.write(b, 8);
    if (bsCode === 6) w.write(n - 1, 8);
    if (bsCode === 7) w.write(n - 1, 16);
    if (srCode === 12) w.write(s.rate / 1000, 8);
    if (srCode === 13) w.write(s.rate, 16);
    if (srCode === 14) w.write(s.rate / 10, 16);
    const header = w.bytesSoFar();
    w.write(crc8(header, 0, header.length), 8);
    const chans: number[][] = [];
    for (let c = 0; c < s.channels; c++) {
      const x: number[] = [];
      for (let i = 0; i < n; i++) x.push(s.samples[(first + i) * s.channels + c]!);
      chans.push(x);
    }
    let sideChannel = -1;
    if (mode !== 'independent') {
      const [l, r] = chans as [number[], number[]];
      const side = l.map((v, i) => v - r[i]!);
      if (mode === 'left_side') chans[1] = side;
      if (mode === 'right_side') chans[0] = side;
      if (mode === 'mid_side')
        chans.splice(
          0,
          2,
          l.map((v, i) => Math.floor((v + r[i]!) / 2)),
          side,
        );
      sideChannel = mode === 'right_side' ? 0 : 1;
    }
    for (let c = 0; c < s.channels; c++) {
      const plan = s.subframe(f, c);
      const wasted = plan.wasted ?? 0;
      if (chans[c]!.some((v) => v % 2 ** wasted !== 0)) throw new Error('hand-built stream: samples not multiples of the wasted bits');
      const x = chans[c]!.map((v) => v / 2 ** wasted);
      const depth = s.bits + (c === sideChannel ? 1 : 0) - wasted;
      const type = plan.kind === 'constant' ? 0 : plan.kind === 'verbatim' ? 1 : 8 + plan.order;
      w.write(0, 1);
      w.write(type, 6);
      if (wasted) {
        w.write(1, 1);
        w.unary(wasted - 1);
      } else {
        w.write(0, 1);
      }
      if (plan.kind === 'constant') {
        if (x.some((v) => v !== x[0])) throw new Error('hand-built stream: constant subframe for a varying block');
        w.write(x[0]!, depth);
      } else if (plan.kind === 'verbatim') {
        for (const v of x) w.write(v, depth);
      } else {
        const coefs = FIXED[plan.order]!;
        for (let i = 0; i < plan.order; i++) w.write(x[i]!, depth);
        const residual: number[] = [];
        for (let i = plan.order; i < n; i++) {
          let p = 0;
          for (let j = 0; j < plan.order; j++) p += coefs[j]! * x[i - 1 - j]!;
          residual.push(x[i]! - p);
        }
        writeResidual(w, residual, n, plan.order, plan);
      }
    }
    const body = w.bytesSoFar();
    const frame = Buffer.alloc(body.length + 2);
    body.copy(frame);
    frame.writeUInt16BE(crc16(body, 0, body.length), body.length);
    frames.push(frame);
    first += n;
  }
  const total = first;
  const info = new BitWriter();
  const sizes = frames.map((f) => f.length);
  // The minimum leaves out the last block (which may be shorter), as the format says.
  info.write(Math.min(...(s.blocks.length > 1 ? s.blocks.slice(0, -1) : s.blocks)), 16);
  info.write(Math.max(...s.blocks), 16);
  info.write(Math.min(...sizes), 24);
  info.write(Math.max(...sizes), 24);
  info.write(s.rate, 20);
  info.write(s.channels - 1, 3);
  info.write(s.bits - 1, 5);
  info.write(total, 36);
  const streamInfo = Buffer.concat([info.bytesSoFar(), Buffer.from(audioMd5(s.samples, s.bits), 'hex')]);
  return Buffer.concat([Buffer.from('fLaC', 'latin1'), Buffer.from([0x80, 0, 0, 34]), streamInfo, ...frames]);
}

/** What the decoder must output for samples at `bits` depth: PCM16 LE. */
function toPcm16(samples: Int32Array, bits: number): Buffer {
  const out = Buffer.alloc(samples.length * 2);
  samples.forEach((v, i) => out.writeInt16LE(bits >= 16 ? v >> (bits - 16) : v << (16 - bits), i * 2));
  return out;
}

// ---------------------------------------------------------------------------------------------
// The matrix: files encoded by ffmpeg

interface Case {
  name: string;
  signal: Signal;
  bits: 16 | 24;
  channels: number;
  rate: number;
  frames: number;
  /** ffmpeg encoder options. */
  args: string[];
  /** Features (reference parser names) this file must use. */
  expect: string[];
  /** Features it must not use. */
  forbid?: RegExp[];
  /** Also decode it fed one byte at a time. */
  byteByByte?: boolean;
  /** Encode to a pipe: ffmpeg cannot seek back, so STREAMINFO has no MD5 and no total. */
  pipe?: boolean;
}

const sec = (rate: number, seconds: number): number => Math.round(rate * seconds);
/**
 * ffmpeg logs this at error level when the layout it guessed for raw input (2.1, quad, 6.1) is not
 * FLAC's for that channel count; it still encodes the samples in the order given.
 */
const LAYOUT_COMPLAINT = /^(\[flac @ 0x[0-9a-f]+\] Channel layout not supported by Flac, output stream will have incorrect channel layout\.\n)+$/;

const cases: Case[] = [
  // Compression levels.
  {
    name: 'level 0, sweep, mono 44.1 kHz',
    signal: 'sweep',
    bits: 16,
    channels: 1,
    rate: 44100,
    frames: sec(44100, 0.6),
    args: ['-compression_level', '0'],
    expect: ['sub:fixed2', 'sub:fixed3', 'bs:code3'],
    forbid: [/^sub:lpc/],
  },
  {
    name: 'level 5, speech, stereo 44.1 kHz',
    signal: 'speech',
    bits: 16,
    channels: 2,
    rate: 44100,
    frames: sec(44100, 1),
    args: ['-compression_level', '5'],
    expect: ['bs:code5', 'sr:code9', 'sub:lpc8', 'ch:mid_side'],
  },
  {
    name: 'level 8, speech, stereo 48 kHz',
    signal: 'speech',
    bits: 16,
    channels: 2,
    rate: 48000,
    frames: sec(48000, 1),
    args: ['-compression_level', '8'],
    expect: ['sr:code10', 'sub:lpc12'],
  },
  {
    name: 'level 12, speech, mono 16 kHz',
    signal: 'speech',
    bits: 16,
    channels: 1,
    rate: 16000,
    frames: sec(16000, 1.5),
    args: ['-compression_level', '12'],
    expect: ['sr:code5', 'sub:lpc1'],
  },
  // Predictor choice.
  // lpc_type none means FIXED order 0 only; ffmpeg writes a frame VERBATIM when its coded form would be larger.
  {
    name: 'lpc_type none (VERBATIM here), sweep, mono 22.05 kHz',
    signal: 'sweep',
    bits: 16,
    channels: 1,
    rate: 22050,
    frames: sec(22050, 0.5),
    args: ['-lpc_type', 'none'],
    expect: ['sr:code6', 'sub:verbatim'],
    forbid: [/^sub:(lpc|fixed[1-4])/],
  },
  {
    name: 'lpc_type fixed, speech, stereo 32 kHz',
    signal: 'speech',
    bits: 16,
    channels: 2,
    rate: 32000,
    frames: sec(32000, 0.8),
    args: ['-lpc_type', 'fixed'],
    expect: ['sr:code8', 'sub:fixed1', 'sub:fixed2'],
    forbid: [/^sub:lpc/],
  },
  {
    name: 'lpc_type fixed, sweep, mono 96 kHz, frame_size 1024',
    signal: 'sweep',
    bits: 16,
    channels: 1,
    rate: 96000,
    frames: sec(96000, 0.5),
    args: ['-lpc_type', 'fixed', '-frame_size', '1024'],
    expect: ['sub:fixed3', 'sub:fixed4', 'bs:code10'],
    forbid: [/^sub:lpc/],
  },
  {
    name: 'lpc_type fixed, order 0, low-level noise, mono',
    signal: 'lownoise',
    bits: 16,
    channels: 1,
    rate: 44100,
    frames: sec(44100, 0.3),
    args: ['-lpc_type', 'fixed', '-min_prediction_order', '0', '-max_prediction_order', '0'],
    expect: ['sub:fixed0'],
    forbid: [/^sub:lpc/, /^sub:fixed[1-4]/],
  },
  {
    name: 'lpc_type levinson, sweep, stereo 24 kHz',
    signal: 'sweep',
    bits: 16,
    channels: 2,
    rate: 24000,
    frames: sec(24000, 0.6),
    args: ['-lpc_type', 'levinson'],
    expect: ['sr:code7', 'ch:right_side'],
  },
  {
    name: 'lpc_type cholesky, 3 passes, speech, mono 44.1 kHz',
    signal: 'speech',
    bits: 16,
    channels: 1,
    rate: 44100,
    frames: sec(44100, 0.6),
    args: ['-lpc_type', 'cholesky', '-lpc_passes', '3'],
    expect: ['sub:lpc8'],
  },
  {
    name: 'order 32 forced, precision 15, speech, stereo 48 kHz',
    signal: 'speech',
    bits: 16,
    channels: 2,
    rate: 48000,
    frames: sec(48000, 0.4),
    args: ['-min_prediction_order', '32', '-max_prediction_order', '32', '-prediction_order_method', 'search', '-lpc_coeff_precision', '15'],
    expect: ['sub:lpc32', 'lpc:precision15'],
  },
  {
    name: 'orders up to 32 (log search), precision 5, sweep, mono 96 kHz',
    signal: 'sweep',
    bits: 16,
    channels: 1,
    rate: 96000,
    frames: sec(96000, 0.5),
    args: ['-max_prediction_order', '32', '-prediction_order_method', 'log', '-lpc_coeff_precision', '5'],
    expect: ['sr:code11', 'lpc:precision5', 'bs:code13'],
  },
  {
    name: 'precision 1, speech, stereo',
    signal: 'speech',
    bits: 16,
    channels: 2,
    rate: 44100,
    frames: sec(44100, 0.3),
    args: ['-lpc_coeff_precision', '1'],
    expect: ['lpc:precision1'],
  },
  {
    name: 'exact Rice parameters, level 8, speech, stereo',
    signal: 'speech',
    bits: 16,
    channels: 2,
    rate: 44100,
    frames: sec(44100, 0.6),
    args: ['-compression_level', '8', '-exact_rice_parameters', '1'],
    expect: [],
  },
  // multi_dim_quant tries coefficient roundings exhaustively: about 9 times slower per two orders (order 8 takes seconds per second of audio).
  {
    name: 'multi-dimensional quantization, order 6, speech, mono',
    signal: 'speech',
    bits: 16,
    channels: 1,
    rate: 44100,
    frames: sec(44100, 0.3),
    args: ['-multi_dim_quant', '1', '-max_prediction_order', '6'],
    expect: ['sub:lpc6'],
  },
  {
    name: 'partition order 8 forced, speech, mono',
    signal: 'speech',
    bits: 16,
    channels: 1,
    rate: 44100,
    frames: sec(44100, 0.5),
    args: ['-min_partition_order', '8', '-max_partition_order', '8', '-frame_size', '4096'],
    expect: ['rice:po8'],
  },
  // Stereo decorrelation.
  {
    name: 'ch_mode indep, speech',
    signal: 'speech',
    bits: 16,
    channels: 2,
    rate: 44100,
    frames: sec(44100, 0.5),
    args: ['-ch_mode', 'indep'],
    expect: ['ch:independent2'],
    forbid: [/^ch:(left|right|mid)/],
  },
  {
    name: 'ch_mode left_side, speech',
    signal: 'speech',
    bits: 16,
    channels: 2,
    rate: 44100,
    frames: sec(44100, 0.5),
    args: ['-ch_mode', 'left_side'],
    expect: ['ch:left_side'],
    forbid: [/^ch:(independent|right|mid)/],
  },
  {
    name: 'ch_mode right_side, speech',
    signal: 'speech',
    bits: 16,
    channels: 2,
    rate: 44100,
    frames: sec(44100, 0.5),
    args: ['-ch_mode', 'right_side'],
    expect: ['ch:right_side'],
    forbid: [/^ch:(independent|left|mid)/],
  },
  {
    name: 'ch_mode mid_side, speech',
    signal: 'speech',
    bits: 16,
    channels: 2,
    rate: 44100,
    frames: sec(44100, 0.5),
    args: ['-ch_mode', 'mid_side'],
    expect: ['ch:mid_side'],
    forbid: [/^ch:(independent|left|right)/],
  },
  // Extremes.
  {
    name: 'full-scale white noise, stereo (VERBATIM)',
    signal: 'noise',
    bits: 16,
    channels: 2,
    rate: 44100,
    frames: sec(44100, 0.3),
    args: [],
    expect: ['sub:verbatim'],
  },
  {
    name: 'low-level noise, mono 8 kHz',
    signal: 'lownoise',
    bits: 16,
    channels: 1,
    rate: 8000,
    frames: sec(8000, 1),
    args: [],
    expect: ['sr:code4', 'bs:code9'],
  },
  { name: 'digital silence, stereo', signal: 'silence', bits: 16, channels: 2, rate: 48000, frames: sec(48000, 0.5), args: [], expect: ['sub:constant'] },
  {
    name: 'constant levels, 6 channels',
    signal: 'dc',
    bits: 16,
    channels: 6,
    rate: 48000,
    frames: sec(48000, 0.3),
    args: [],
    expect: ['sub:constant', 'ch:independent6'],
  },
  {
    name: 'square wave at -32768 and 32767, stereo mid_side',
    signal: 'square',
    bits: 16,
    channels: 2,
    rate: 44100,
    frames: sec(44100, 0.3),
    args: ['-ch_mode', 'mid_side'],
    expect: ['ch:mid_side'],
  },
  {
    name: 'square wave at -32768 and 32767, stereo left_side',
    signal: 'square',
    bits: 16,
    channels: 2,
    rate: 44100,
    frames: sec(44100, 0.3),
    args: ['-ch_mode', 'left_side'],
    expect: ['ch:left_side'],
  },
  { name: 'square wave, mono', signal: 'square', bits: 16, channels: 1, rate: 22050, frames: sec(22050, 0.4), args: [], expect: [] },
  {
    name: 'one channel silent, stereo',
    signal: 'halfsilent',
    bits: 16,
    channels: 2,
    rate: 44100,
    frames: sec(44100, 0.5),
    args: ['-ch_mode', 'indep'],
    expect: ['sub:constant'],
  },
  // Wasted bits.
  { name: 'multiples of 8, mono', signal: 'wasted', bits: 16, channels: 1, rate: 44100, frames: sec(44100, 0.5), args: [], expect: ['wasted:3'] },
  {
    name: 'multiples of 8, stereo mid_side',
    signal: 'wasted',
    bits: 16,
    channels: 2,
    rate: 44100,
    frames: sec(44100, 0.5),
    args: ['-ch_mode', 'mid_side'],
    expect: ['ch:mid_side', 'wasted:2', 'wasted:3'],
  },
  // Channel counts.
  { name: 'sweep, 3 channels', signal: 'sweep', bits: 16, channels: 3, rate: 44100, frames: sec(44100, 0.2), args: [], expect: ['ch:independent3'] },
  { name: 'speech, 4 channels', signal: 'speech', bits: 16, channels: 4, rate: 32000, frames: sec(32000, 0.3), args: [], expect: ['ch:independent4'] },
  {
    name: 'low-level noise, 5 channels',
    signal: 'lownoise',
    bits: 16,
    channels: 5,
    rate: 16000,
    frames: sec(16000, 0.3),
    args: [],
    expect: ['ch:independent5'],
  },
  {
    name: 'speech, 6 channels, 48 kHz, frame_size 2048',
    signal: 'speech',
    bits: 16,
    channels: 6,
    rate: 48000,
    frames: sec(48000, 0.5),
    args: ['-frame_size', '2048'],
    expect: ['ch:independent6', 'bs:code11'],
  },
  { name: 'speech, 7 channels', signal: 'speech', bits: 16, channels: 7, rate: 22050, frames: sec(22050, 0.3), args: [], expect: ['ch:independent7'] },
  { name: 'sweep, 8 channels, 96 kHz', signal: 'sweep', bits: 16, channels: 8, rate: 96000, frames: sec(96000, 0.25), args: [], expect: ['ch:independent8'] },
  // Sample rates the table has no code for: coded in the frame header itself.
  { name: 'rate 12 kHz (header kHz field)', signal: 'speech', bits: 16, channels: 1, rate: 12000, frames: sec(12000, 0.5), args: [], expect: ['sr:code12'] },
  {
    name: 'rate 192 kHz (header kHz field)',
    signal: 'sweep',
    bits: 16,
    channels: 2,
    rate: 192000,
    frames: sec(192000, 0.2),
    args: [],
    expect: ['sr:code12', 'bs:code14'],
  },
  { name: 'rate 11025 Hz (header Hz field)', signal: 'speech', bits: 16, channels: 2, rate: 11025, frames: sec(11025, 0.6), args: [], expect: ['sr:code13'] },
  {
    name: 'rate 88.2 kHz (header tens-of-Hz field)',
    signal: 'sweep',
    bits: 16,
    channels: 1,
    rate: 88200,
    frames: sec(88200, 0.3),
    args: [],
    expect: ['sr:code14'],
  },
  // Block sizes (STREAMINFO's, and the frame header's table codes and 8- and 16-bit fields).
  {
    name: 'frame_size 16, mono 48 kHz (3-byte frame numbers)',
    signal: 'speech',
    bits: 16,
    channels: 1,
    rate: 48000,
    frames: 16 * 2100 + 1,
    args: ['-frame_size', '16'],
    expect: ['bs:code6', 'utf8:1', 'utf8:2', 'utf8:3', 'frame:short-last'],
  },
  {
    name: 'frame_size 32, stereo',
    signal: 'sweep',
    bits: 16,
    channels: 2,
    rate: 16000,
    frames: 32 * 100 + 7,
    args: ['-frame_size', '32'],
    expect: ['bs:code6'],
  },
  { name: 'frame_size 192', signal: 'speech', bits: 16, channels: 2, rate: 44100, frames: 192 * 40 + 1, args: ['-frame_size', '192'], expect: ['bs:code1'] },
  {
    name: 'frame_size 256, stereo',
    signal: 'speech',
    bits: 16,
    channels: 2,
    rate: 16000,
    frames: 256 * 30 + 255,
    args: ['-frame_size', '256'],
    expect: ['bs:code8'],
  },
  { name: 'frame_size 576', signal: 'speech', bits: 16, channels: 1, rate: 44100, frames: 576 * 20 + 1, args: ['-frame_size', '576'], expect: ['bs:code2'] },
  {
    name: 'frame_size 1000 (16-bit header field)',
    signal: 'sweep',
    bits: 16,
    channels: 2,
    rate: 44100,
    frames: 1000 * 10 + 999,
    args: ['-frame_size', '1000'],
    expect: ['bs:code7'],
  },
  {
    name: 'frame_size 4096',
    signal: 'speech',
    bits: 16,
    channels: 2,
    rate: 48000,
    frames: 4096 * 8 + 1,
    args: ['-frame_size', '4096'],
    expect: ['bs:code12', 'bs:code6'],
  },
  {
    name: 'frame_size 4608',
    signal: 'sweep',
    bits: 16,
    channels: 2,
    rate: 44100,
    frames: 4608 * 5 + 300,
    args: ['-frame_size', '4608'],
    expect: ['bs:code5', 'bs:code7'],
  },
  {
    name: 'frame_size 16384',
    signal: 'speech',
    bits: 16,
    channels: 1,
    rate: 44100,
    frames: 16384 * 2 + 5000,
    args: ['-frame_size', '16384'],
    expect: ['bs:code14'],
  },
  {
    name: 'frame_size 32768',
    signal: 'speech',
    bits: 16,
    channels: 2,
    rate: 48000,
    frames: 32768 + 100,
    args: ['-frame_size', '32768'],
    expect: ['bs:code15'],
  },
  {
    name: 'frame_size 65535 (the largest)',
    signal: 'sweep',
    bits: 16,
    channels: 1,
    rate: 44100,
    frames: 65535 + 2000,
    args: ['-frame_size', '65535'],
    expect: ['bs:code7'],
  },
  // Lengths.
  {
    name: 'shorter than one block, stereo',
    signal: 'speech',
    bits: 16,
    channels: 2,
    rate: 44100,
    frames: 1000,
    args: [],
    expect: ['bs:code7'],
    byteByByte: true,
  },
  { name: 'a single sample, mono', signal: 'sweep', bits: 16, channels: 1, rate: 44100, frames: 1, args: [], expect: ['bs:code6'], byteByByte: true },
  {
    name: 'fewer samples than the smallest block (15), stereo',
    signal: 'noise',
    bits: 16,
    channels: 2,
    rate: 8000,
    frames: 15,
    args: [],
    expect: ['bs:code6'],
    byteByByte: true,
  },
  {
    name: 'frame_size 16, square wave, byte by byte (15 wasted bits)',
    signal: 'square',
    bits: 16,
    channels: 1,
    rate: 8000,
    frames: 16 * 300 + 1,
    args: ['-frame_size', '16'],
    expect: ['utf8:2', 'wasted:15'],
    byteByByte: true,
  },
  // 24 bits.
  {
    name: '24-bit sweep, stereo 96 kHz, level 8',
    signal: 'sweep',
    bits: 24,
    channels: 2,
    rate: 96000,
    frames: sec(96000, 0.4),
    args: ['-compression_level', '8'],
    expect: ['bps:code6', 'rice:method1', 'sub:lpc12'],
  },
  {
    name: '24-bit speech, orders up to 32, precision 15, stereo 48 kHz',
    signal: 'speech',
    bits: 24,
    channels: 2,
    rate: 48000,
    frames: sec(48000, 0.5),
    args: ['-max_prediction_order', '32', '-prediction_order_method', 'search', '-lpc_coeff_precision', '15'],
    expect: ['rice:method1'],
  },
  {
    name: '24-bit speech, order 32 forced, stereo',
    signal: 'speech',
    bits: 24,
    channels: 2,
    rate: 44100,
    frames: sec(44100, 0.3),
    args: ['-min_prediction_order', '32', '-max_prediction_order', '32'],
    expect: ['sub:lpc32'],
  },
  { name: '24-bit white noise, stereo', signal: 'noise', bits: 24, channels: 2, rate: 48000, frames: sec(48000, 0.2), args: [], expect: [] },
  {
    name: '24-bit white noise, lpc_type fixed (VERBATIM, 25-bit side channel)',
    signal: 'noise',
    bits: 24,
    channels: 2,
    rate: 48000,
    frames: sec(48000, 0.2),
    args: ['-lpc_type', 'fixed'],
    expect: ['sub:verbatim', 'ch:mid_side'],
    forbid: [/^sub:lpc/],
  },
  { name: '24-bit low-level noise, mono', signal: 'lownoise', bits: 24, channels: 1, rate: 44100, frames: sec(44100, 0.3), args: [], expect: [] },
  {
    name: '24-bit square at the extremes, stereo left_side',
    signal: 'square',
    bits: 24,
    channels: 2,
    rate: 44100,
    frames: sec(44100, 0.3),
    args: ['-ch_mode', 'left_side'],
    expect: ['ch:left_side'],
  },
  {
    name: '24-bit square at the extremes, stereo mid_side',
    signal: 'square',
    bits: 24,
    channels: 2,
    rate: 44100,
    frames: sec(44100, 0.3),
    args: ['-ch_mode', 'mid_side'],
    expect: ['ch:mid_side'],
  },
  {
    name: '24-bit speech, right_side',
    signal: 'speech',
    bits: 24,
    channels: 2,
    rate: 44100,
    frames: sec(44100, 0.4),
    args: ['-ch_mode', 'right_side'],
    expect: ['ch:right_side'],
  },
  {
    name: '24-bit holding 16-bit audio (8 wasted bits), stereo',
    signal: 'upper16',
    bits: 24,
    channels: 2,
    rate: 48000,
    frames: sec(48000, 0.4),
    args: [],
    expect: ['wasted:8'],
  },
  {
    name: '24-bit multiples of 8, 6 channels',
    signal: 'wasted',
    bits: 24,
    channels: 6,
    rate: 48000,
    frames: sec(48000, 0.3),
    args: [],
    expect: ['wasted:3', 'ch:independent6'],
  },
  {
    name: '24-bit silence and a one-sample tail, mono 88.2 kHz',
    signal: 'silence',
    bits: 24,
    channels: 1,
    rate: 88200,
    frames: 4608 + 1,
    args: [],
    expect: ['sub:constant', 'sr:code14'],
  },
  // Written to a pipe: no MD5, no total.
  {
    name: 'streamed (no MD5, no total), speech, stereo',
    signal: 'speech',
    bits: 16,
    channels: 2,
    rate: 44100,
    frames: sec(44100, 0.5),
    args: [],
    expect: [],
    pipe: true,
  },
];

// ---------------------------------------------------------------------------------------------
// Hand-built cases

interface HandCase {
  name: string;
  stream: () => HandStream;
  expect: string[];
  byteByByte?: boolean;
}

/** A smooth signal with a little noise, at `bits` depth. */
function handSignal(bits: number, channels: number, frames: number, seed: number): Int32Array {
  const random = prng(seed);
  const max = 2 ** (bits - 1) - 1;
  const out = new Int32Array(frames * channels);
  for (let i = 0; i < frames; i++) {
    for (let c = 0; c < channels; c++) {
      const v = max * (0.6 * Math.sin(i / (19 + 3 * c)) + 0.25 * Math.sin(i / 3.7)) + (random() - 0.5) * max * 0.02;
      out[i * channels + c] = Math.max(-max - 1, Math.min(max, Math.round(v)));
    }
  }
  return out;
}

const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);
const VARIABLE_BLOCKS = [1152, 17, 4096, 300, 192, 65535, 4608, 5000, 16, 2047];

const handCases: HandCase[] = [
  {
    name: 'escape-coded partitions (method 0) among Rice ones, stereo left_side',
    stream: () => ({
      bits: 16,
      channels: 2,
      rate: 44100,
      blocks: [4096, 4096, 1000],
      variable: false,
      samples: handSignal(16, 2, 9192, 1),
      mode: () => 'left_side',
      subframe: () => ({ kind: 'fixed', order: 2, partitionOrder: 3, method: 0, escape: (p) => p % 2 === 0 }),
    }),
    expect: ['rice:escape', 'rice:method0', 'ch:left_side'],
  },
  {
    name: 'escape-coded partitions of 0 bits (all-zero residual)',
    stream: () => {
      const samples = handSignal(16, 1, 4096 * 2, 2);
      samples.fill(0, 0, 3000);
      return {
        bits: 16,
        channels: 1,
        rate: 44100,
        blocks: [4096, 4096],
        variable: false,
        samples,
        subframe: () => ({ kind: 'fixed', order: 0, partitionOrder: 2, method: 0, escape: () => true }),
      };
    },
    expect: ['rice:escape', 'sub:fixed0'],
    byteByByte: true,
  },
  {
    name: 'escape-coded partitions (method 1), 24-bit stereo mid_side',
    stream: () => ({
      bits: 24,
      channels: 2,
      rate: 48000,
      blocks: [4096, 100],
      variable: false,
      samples: handSignal(24, 2, 4196, 3),
      mode: () => 'mid_side',
      subframe: () => ({ kind: 'fixed', order: 1, partitionOrder: 2, method: 1, escape: (p) => p !== 1 }),
    }),
    expect: ['rice:escape', 'rice:method1', 'ch:mid_side'],
  },
  {
    name: 'Rice method 1 (5-bit parameters) in a 16-bit stream, right_side',
    stream: () => ({
      bits: 16,
      channels: 2,
      rate: 48000,
      blocks: [4096, 100],
      variable: false,
      samples: handSignal(16, 2, 4196, 4),
      mode: () => 'right_side',
      subframe: () => ({ kind: 'fixed', order: 3, partitionOrder: 4, method: 1, escape: () => false }),
    }),
    expect: ['rice:method1', 'ch:right_side', 'sub:fixed3'],
  },
  {
    name: 'variable block sizes (sample numbers up to 4-byte UTF-8)',
    stream: () => ({
      bits: 16,
      channels: 2,
      rate: 44100,
      blocks: VARIABLE_BLOCKS,
      variable: true,
      samples: handSignal(16, 2, sum(VARIABLE_BLOCKS), 5),
      mode: (f) => (['independent', 'left_side', 'right_side', 'mid_side'] as const)[f % 4]!,
      subframe: (f) => ({ kind: 'fixed', order: f % 5, partitionOrder: 6, method: 0, escape: (p) => p === 3 }),
    }),
    expect: ['strategy:variable', 'utf8:4', 'bs:code3', 'bs:code6', 'bs:code7'],
  },
  {
    name: 'variable block sizes, 2.2 million samples (5-byte UTF-8 sample numbers)',
    stream: () => {
      const blocks = Array.from({ length: 34 }, () => 65535);
      const samples = new Int32Array(34 * 65535);
      for (let f = 0; f < 34; f++) samples.fill(f * 997 - 17000, f * 65535, (f + 1) * 65535);
      return { bits: 16, channels: 1, rate: 44100, blocks, variable: true, samples, subframe: () => ({ kind: 'constant' }) };
    },
    expect: ['strategy:variable', 'utf8:5', 'sub:constant'],
  },
  {
    name: '8-bit stereo, mid_side and verbatim',
    stream: () => ({
      bits: 8,
      channels: 2,
      rate: 32000,
      blocks: [4096, 4096, 7],
      variable: false,
      samples: handSignal(8, 2, 8199, 6),
      mode: (f) => (f === 1 ? 'mid_side' : 'independent'),
      subframe: (f, c) => (c === 1 && f !== 1 ? { kind: 'verbatim' } : { kind: 'fixed', order: 2, partitionOrder: 1, method: 0, escape: () => false }),
    }),
    expect: ['bps:code1', 'ch:mid_side', 'sub:verbatim'],
  },
  ...[88200, 176400, 192000].map((rate, i): HandCase => ({
    name: `rate ${rate} Hz through the frame header's table code ${i + 1}`,
    stream: () => ({
      bits: 16,
      channels: 1,
      rate,
      blocks: [4096, 50],
      variable: false,
      samples: handSignal(16, 1, 4146, 7 + i),
      subframe: () => ({ kind: 'fixed', order: 2, partitionOrder: 0, method: 0, escape: () => false }),
    }),
    expect: [`sr:code${i + 1}`],
  })),
  {
    name: '12-bit mono (a depth below 16: samples shifted up, MD5 over 2-byte samples)',
    stream: () => ({
      bits: 12,
      channels: 1,
      rate: 16000,
      blocks: [4096, 4096, 33],
      variable: false,
      samples: handSignal(12, 1, 8225, 12),
      subframe: (f) => (f === 1 ? { kind: 'verbatim' } : { kind: 'fixed', order: 2, partitionOrder: 2, method: 0, escape: (p) => p === 1 }),
    }),
    expect: ['bps:code2', 'sub:verbatim', 'rice:escape'],
  },
  {
    name: '20-bit stereo, left_side (top 16 bits out, MD5 over 3-byte samples)',
    stream: () => ({
      bits: 20,
      channels: 2,
      rate: 48000,
      blocks: [4608, 4608, 100],
      variable: false,
      samples: handSignal(20, 2, 9316, 13),
      mode: (f) => (f === 2 ? 'independent' : 'left_side'),
      subframe: () => ({ kind: 'fixed', order: 3, partitionOrder: 3, method: 1, escape: () => false }),
    }),
    expect: ['bps:code5', 'ch:left_side', 'rice:method1'],
  },
  {
    name: 'frame headers that leave the rate and depth to STREAMINFO (codes 0)',
    stream: () => ({
      bits: 16,
      channels: 2,
      rate: 44100,
      blocks: [4096, 4096, 10],
      variable: false,
      samples: handSignal(16, 2, 8202, 14),
      mode: () => 'mid_side',
      subframe: () => ({ kind: 'fixed', order: 2, partitionOrder: 4, method: 0, escape: () => false }),
      headerFromStreamInfo: true,
    }),
    expect: ['sr:code0', 'bps:code0', 'ch:mid_side'],
    byteByByte: true,
  },
  {
    name: 'fixed order 4, partition order 8, wasted bits, escapes',
    stream: () => {
      const samples = handSignal(16, 1, 4096, 10).map((v) => Math.max(-32768, Math.min(32764, Math.round(v / 4) * 4)));
      return {
        bits: 16,
        channels: 1,
        rate: 44100,
        blocks: [4096],
        variable: false,
        samples,
        subframe: () => ({ kind: 'fixed', order: 4, partitionOrder: 8, method: 0, escape: (p) => p % 3 === 0, wasted: 2 }),
      };
    },
    expect: ['sub:fixed4', 'rice:po8', 'wasted:2', 'rice:escape'],
  },
];

// ---------------------------------------------------------------------------------------------
// Fixtures

interface Fixture {
  name: string;
  flac: Buffer;
  /** The source, interleaved at its own depth. */
  samples: Int32Array;
  /** What the decoder must output. */
  pcm16: Buffer;
  channels: number;
  rate: number;
  bits: number;
  frames: number;
  /** STREAMINFO's MD5 and total sample count (all zeros and 0 when the encoder could not write them). */
  md5: string;
  totalSamples: number;
  ref: Reference;
  expect: string[];
  forbid: RegExp[];
  byteByByte: boolean;
}

let dir: string | undefined;
const fixtures = new Map<string, Fixture>();

async function encode(c: Case, source: Source, index: number): Promise<Buffer> {
  const input = ['-f', c.bits === 16 ? 's16le' : 's32le', '-ar', String(c.rate), '-ac', String(c.channels), '-i', 'pipe:0'];
  const codec = ['-c:a', 'flac', ...(c.bits === 24 ? ['-sample_fmt', 's32', '-bits_per_raw_sample', '24'] : []), ...c.args];
  const file = join(dir!, `case-${index}.flac`);
  const output = c.pipe ? ['-f', 'flac', 'pipe:1'] : [file];
  const child = spawn(ffmpegPath, ['-hide_banner', '-nostats', '-v', 'error', ...input, ...codec, ...output]);
  const out: Buffer[] = [];
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdin.on('error', () => undefined);
  child.stdin.end(source.raw);
  // A stuck encoder fails the run with its name rather than a bare hook timeout.
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const [code, signal] = (await once(child, 'close').finally(() => clearTimeout(timer))) as [number | null, string | null];
  const complaint = stderr !== '' && !(c.channels > 2 && LAYOUT_COMPLAINT.test(stderr));
  if (code !== 0 || complaint) throw new Error(`ffmpeg failed for "${c.name}" (exit ${code}, signal ${signal}): ${stderr}`);
  return c.pipe ? Buffer.concat(out) : readFileSync(file);
}

/** Runs `work` over `items`, `limit` at a time. */
async function pool<T>(items: T[], limit: number, work: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const runners = Array.from({ length: limit }, async () => {
    while (next < items.length) {
      const i = next++;
      await work(items[i]!, i);
    }
  });
  await Promise.all(runners);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'rtt-flac-dec-'));
  await pool(cases, 4, async (c, i) => {
    const source = makeSource(c.signal, c.frames, c.channels, c.rate, c.bits, 1000 + i);
    const flac = await encode(c, source, i);
    fixtures.set(c.name, {
      name: c.name,
      flac,
      samples: source.samples,
      pcm16: source.pcm16,
      channels: c.channels,
      rate: c.rate,
      bits: c.bits,
      frames: c.frames,
      md5: c.pipe ? '0'.repeat(32) : source.md5,
      totalSamples: c.pipe ? 0 : c.frames,
      ref: parseReference(flac),
      expect: [...c.expect, c.bits === 16 ? 'bps:code4' : 'bps:code6'],
      forbid: c.forbid ?? [],
      byteByByte: c.byteByByte ?? false,
    });
  });
  for (const h of handCases) {
    const s = h.stream();
    const flac = buildFlac(s);
    const frames = s.samples.length / s.channels;
    fixtures.set(h.name, {
      name: h.name,
      flac,
      samples: s.samples,
      pcm16: toPcm16(s.samples, s.bits),
      channels: s.channels,
      rate: s.rate,
      bits: s.bits,
      frames,
      md5: audioMd5(s.samples, s.bits),
      totalSamples: frames,
      ref: parseReference(flac),
      expect: h.expect,
      forbid: [],
      byteByByte: h.byteByByte ?? false,
    });
  }
}, 120_000);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function fixture(name: string): Fixture {
  const f = fixtures.get(name);
  if (!f) throw new Error(`no fixture "${name}"`);
  return f;
}

// ---------------------------------------------------------------------------------------------
// Decoding helpers

/** Where two PCM16 buffers first differ, in words, for failure messages. */
function describeDifference(actual: Buffer, expected: Buffer, channels: number): string {
  if (actual.length === expected.length && Buffer.compare(actual, expected) === 0) return 'identical';
  const n = Math.min(actual.length, expected.length);
  let i = 0;
  while (i < n && actual[i] === expected[i]) i++;
  const word = i >> 1;
  const at =
    i < n
      ? `first difference at byte ${i} (sample ${Math.floor(word / channels)}, channel ${word % channels}): got ${actual.readInt16LE(word * 2)}, expected ${expected.readInt16LE(word * 2)}`
      : `identical for the first ${n} bytes`;
  return `${at}; got ${actual.length} bytes, expected ${expected.length}`;
}

function expectSamePcm(actual: Buffer, expected: Buffer, channels: number, label: string): void {
  expect(Buffer.compare(actual, expected), `${label}: ${describeDifference(actual, expected, channels)}`).toBe(0);
}

/** `actual` must be the first `actual.length` bytes of `expected` (possibly none), in whole samples. */
function expectPrefix(actual: Buffer, expected: Buffer, channels: number, label: string): void {
  expect(actual.length, `${label}: ${actual.length} bytes of output for ${expected.length} of audio`).toBeLessThanOrEqual(expected.length);
  expect(actual.length % (2 * channels), `${label}: output is not whole samples`).toBe(0);
  const head = expected.subarray(0, actual.length);
  expect(Buffer.compare(actual, head), `${label}: ${describeDifference(actual, head, channels)}`).toBe(0);
}

/** Chunk sizes: all at once, one byte, or seeded random sizes in [min, max]. */
type Feed = { kind: 'whole' } | { kind: 'bytes' } | { kind: 'random'; seed: number; min: number; max: number };

function describeFeed(feed: Feed): string {
  return feed.kind === 'random'
    ? `fed in random chunks of ${feed.min} to ${feed.max} bytes (seed ${feed.seed})`
    : feed.kind === 'bytes'
      ? 'fed byte by byte'
      : 'fed whole';
}

function chunksOf(data: Buffer, feed: Feed): Buffer[] {
  if (feed.kind === 'whole') return [data];
  const out: Buffer[] = [];
  const random = prng(feed.kind === 'random' ? feed.seed : 0);
  for (let o = 0; o < data.length;) {
    const size = feed.kind === 'bytes' ? 1 : feed.min + Math.floor(random() * (feed.max - feed.min + 1));
    out.push(data.subarray(o, o + size));
    o += size;
  }
  return out;
}

interface Run {
  /** Everything decode() and end() returned before any failure. */
  pcm: Buffer;
  /** The first rejection of decode(), end() or verify(), if any, and which call it came from. */
  error: unknown;
  stage: 'decode' | 'end' | 'verify' | undefined;
  decoder: FlacPcmDecoder;
  /** The first step at which samplesDecoded disagreed with the bytes returned so far. */
  countMismatch: string | undefined;
}

/**
 * Feeds `chunks` (awaiting each decode), then end() and verify(); stops at the first failure and
 * closes the decoder. After every call it checks that samplesDecoded matches the PCM returned.
 */
async function run(chunks: Buffer[], channels: number, onChunk?: (decoder: FlacPcmDecoder, fed: number) => void, engine: FlacEngine = 'auto'): Promise<Run> {
  const decoder = new FlacPcmDecoder({ engine });
  const out: Buffer[] = [];
  let fed = 0;
  let bytesOut = 0;
  let countMismatch: string | undefined;
  let stage: Run['stage'] = 'decode';
  const check = (): void => {
    if (countMismatch === undefined && decoder.samplesDecoded * channels * 2 !== bytesOut) {
      countMismatch = `after ${fed} bytes (${stage}): samplesDecoded ${decoder.samplesDecoded}, PCM returned ${bytesOut} bytes`;
    }
  };
  try {
    for (const chunk of chunks) {
      const pcm = await decoder.decode(chunk);
      out.push(pcm);
      fed += chunk.length;
      bytesOut += pcm.length;
      check();
      onChunk?.(decoder, fed);
    }
    stage = 'end';
    const tail = await decoder.end();
    out.push(tail);
    bytesOut += tail.length;
    check();
    stage = 'verify';
    decoder.verify();
    return { pcm: Buffer.concat(out), error: undefined, stage: undefined, decoder, countMismatch };
  } catch (error) {
    return { pcm: Buffer.concat(out), error, stage, decoder, countMismatch };
  } finally {
    await decoder.close();
  }
}

function expectRejected(r: Run, label: string): void {
  expect(r.error, `${label}: decoding did not fail`).toBeDefined();
  const ok = r.error instanceof IntegrityError || r.error instanceof ProtocolError;
  expect(ok, `${label}: ${r.stage}() failed with ${String(r.error)} instead of IntegrityError or ProtocolError`).toBe(true);
}

/** Decodes `flac` with `feed` and expects exactly the fixture's audio and STREAMINFO. */
async function expectDecodesExactly(f: Fixture, flac: Buffer, feed: Feed, label: string): Promise<void> {
  const full = `${label}, ${describeFeed(feed)}`;
  let infoBefore42: unknown = 'unchecked';
  const r = await run(chunksOf(flac, feed), f.channels, (d, fed) => {
    if (fed === 41) infoBefore42 = d.streamInfo;
  });
  expect(r.error, `${full}: ${r.stage}() failed: ${String(r.error)}`).toBeUndefined();
  expectSamePcm(r.pcm, f.pcm16, f.channels, full);
  expect(r.decoder.samplesDecoded, full).toBe(f.frames);
  expect(r.countMismatch, full).toBeUndefined();
  if (feed.kind === 'bytes') expect(infoBefore42, `${full}: STREAMINFO reported before its 42 bytes were fed`).toBeUndefined();
  expect(r.decoder.streamInfo, full).toMatchObject({
    sampleRate: f.rate,
    channels: f.channels,
    bitsPerSample: f.bits,
    totalSamples: f.totalSamples,
    md5: f.md5,
  });
}

// ---------------------------------------------------------------------------------------------
// Tests

function checkFixture(name: string, index: number): () => Promise<void> {
  return async () => {
    const f = fixture(name);
    // The file is what the case says: the reference parser reproduces the source exactly (both
    // CRCs checked on every frame) and the file uses the features the case is there for.
    expect(f.ref.samples.length, name).toBe(f.samples.length);
    expect(Buffer.compare(Buffer.from(f.ref.samples.buffer), Buffer.from(f.samples.buffer)), `${name}: the reference parser disagrees with the source`).toBe(0);
    const used = [...f.ref.features.keys()];
    if (process.env.FLAC_CENSUS) console.log(`CENSUS ${name}: ${[...f.ref.features].map(([k, n]) => `${k}=${n}`).join(' ')}`);
    for (const feature of f.expect) expect(used, `${name}: the file does not use ${feature}`).toContain(feature);
    for (const pattern of f.forbid)
      expect(
        used.filter((u) => pattern.test(u)),
        `${name}: unexpected features`,
      ).toEqual([]);

    const feeds: Feed[] = [
      { kind: 'whole' },
      { kind: 'random', seed: 17 + index, min: 1, max: 70000 },
      { kind: 'random', seed: 99 + index, min: 1, max: Math.max(2, Math.ceil(f.flac.length / 8)) },
    ];
    if (f.byteByByte) feeds.push({ kind: 'bytes' });
    for (const feed of feeds) await expectDecodesExactly(f, f.flac, feed, name);
  };
}

describe('FlacPcmDecoder decodes ffmpeg-encoded FLAC exactly', () => {
  for (const [index, c] of cases.entries()) it(c.name, checkFixture(c.name, index));
});

describe('FlacPcmDecoder decodes hand-built FLAC exactly', () => {
  for (const [index, h] of handCases.entries()) it(h.name, checkFixture(h.name, 500 + index));
});

describe('libFLAC, the fallback for depths above 24 bits and engines without WebAssembly SIMD', () => {
  for (const name of ['level 5, speech, stereo 44.1 kHz', '24-bit speech, right_side', 'frame_size 16, mono 48 kHz (3-byte frame numbers)']) {
    it(`decodes exactly what the library's own decoder does: ${name}`, async () => {
      const f = fixture(name);
      const r = await run(chunksOf(f.flac, { kind: 'random', seed: 31, min: 1, max: 70000 }), f.channels, undefined, 'libflac');
      expect(r.error, `${r.stage}() failed: ${String(r.error)}`).toBeUndefined();
      expectSamePcm(r.pcm, f.pcm16, f.channels, `${name} through libFLAC`);
      expect(r.decoder.samplesDecoded).toBe(f.frames);
    });
  }
});

describe('coverage', () => {
  it('the files use every feature the matrix is there for', () => {
    const all = new Map<string, number>();
    for (const f of fixtures.values()) for (const [k, n] of f.ref.features) all.set(k, (all.get(k) ?? 0) + n);
    const required = [
      'strategy:fixed',
      'strategy:variable',
      'sub:constant',
      'sub:verbatim',
      ...[0, 1, 2, 3, 4].map((o) => `sub:fixed${o}`),
      ...[1, 2, 4, 8, 12, 32].map((o) => `sub:lpc${o}`),
      'lpc:precision1',
      'lpc:precision5',
      'lpc:precision15',
      ...[1, 2, 3, 8, 15].map((k) => `wasted:${k}`),
      ...[1, 2, 3, 4, 5, 6, 7, 8].map((c) => `ch:independent${c}`),
      'ch:left_side',
      'ch:right_side',
      'ch:mid_side',
      'rice:method0',
      'rice:method1',
      'rice:escape',
      ...[0, 1, 2, 3, 4, 5, 6, 7, 8].map((o) => `rice:po${o}`),
      ...[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15].map((c) => `bs:code${c}`),
      ...[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14].map((c) => `sr:code${c}`),
      'bps:code1',
      'bps:code4',
      'bps:code6',
      ...[1, 2, 3, 4, 5].map((n) => `utf8:${n}`),
      'frame:short-last',
    ];
    expect(required.filter((f) => !all.has(f))).toEqual([]);
    if (process.env.FLAC_CENSUS)
      console.log(
        [...all]
          .sort(([a], [b]) => a.localeCompare(b, 'en', { numeric: true }))
          .map(([k, n]) => `${k}=${n}`)
          .join('\n'),
      );
  });

  it("ffmpeg's files carry a VORBIS_COMMENT and a PADDING block after STREAMINFO, which the decoder skips", () => {
    for (const c of cases)
      expect(
        fixture(c.name).ref.blocks.map((b) => b.type),
        c.name,
      ).toEqual([0, 4, 1]);
  });
});

/** Fixtures with STREAMINFO's MD5 and total, damaged in the tests below. */
const DAMAGE_TARGETS = [
  'level 5, speech, stereo 44.1 kHz',
  '24-bit speech, right_side',
  'frame_size 16, mono 48 kHz (3-byte frame numbers)',
  'sweep, 8 channels, 96 kHz',
  'variable block sizes (sample numbers up to 4-byte UTF-8)',
];

describe("the decoder's 4 MiB input window", () => {
  it('decodes a file larger than the window handed over in one piece', async () => {
    const c: Case = {
      name: 'noise, 25 s stereo 48 kHz',
      signal: 'noise',
      bits: 16,
      channels: 2,
      rate: 48000,
      frames: sec(48000, 25),
      args: ['-compression_level', '0'],
      expect: [],
    };
    const source = makeSource(c.signal, c.frames, c.channels, c.rate, c.bits, 77);
    const flac = await encode(c, source, 900);
    expect(flac.length).toBeGreaterThan(4 << 20);
    const r = await run([flac], c.channels);
    expect(r.error, `${r.stage}() failed: ${String(r.error)}`).toBeUndefined();
    expectSamePcm(r.pcm, source.pcm16, c.channels, c.name);
  });

  it('rejects a "frame" that does not end within the window instead of holding bytes without bound', async () => {
    const stream = buildFlac({
      bits: 16,
      channels: 1,
      rate: 44100,
      blocks: [4096],
      variable: false,
      samples: handSignal(16, 1, 4096, 21),
      subframe: () => ({ kind: 'fixed', order: 0, partitionOrder: 0, method: 0, escape: () => false }),
    });
    const fr = parseReference(stream).frames[0]!;
    // The header and the subframe's first bytes, then zeros: one endless Rice quotient.
    const bad = Buffer.concat([stream.subarray(0, fr.offset + fr.headerLength + 2), Buffer.alloc(5 << 20)]);
    for (const feed of [{ kind: 'whole' }, { kind: 'random', seed: 5, min: 30_000, max: 70_000 }] as Feed[]) {
      const r = await run(chunksOf(bad, feed), 1);
      expectRejected(r, describeFeed(feed));
      expect(String(r.error)).toMatch(/does not end within 4194304 bytes/);
      expect(r.pcm.length).toBe(0);
    }
  });
});

describe('damaged streams', () => {
  for (const [t, name] of DAMAGE_TARGETS.entries()) {
    it(`one flipped byte anywhere in a frame is rejected, with only correct audio before it: ${name}`, async () => {
      const f = fixture(name);
      const { frames } = f.ref;
      const random = prng(4242 + t);
      let tried = 0;
      for (const k of new Set([0, 1, Math.floor(frames.length / 2), frames.length - 1])) {
        const fr = frames[k]!;
        const positions: Record<string, number> = {
          'sync byte': fr.offset,
          'sync and blocking strategy': fr.offset + 1,
          'block size and sample rate codes': fr.offset + 2,
          'channel assignment and depth': fr.offset + 3,
          'frame number': fr.offset + 4,
          'header CRC-8': fr.offset + fr.headerLength - 1,
          'first subframe header': fr.offset + fr.headerLength,
          'middle of the frame': fr.offset + Math.floor(fr.length / 2),
          'frame CRC-16': fr.offset + fr.length - 1,
        };
        for (const [where, pos] of Object.entries(positions)) {
          const bad = Buffer.from(f.flac);
          bad[pos] = bad[pos]! ^ (1 + Math.floor(random() * 255));
          const feed: Feed = tried++ % 2 === 0 ? { kind: 'whole' } : { kind: 'random', seed: tried, min: 1, max: 3000 };
          const label = `${name}: frame ${k} of ${frames.length}, ${where} (byte ${pos}) flipped, ${describeFeed(feed)}`;
          const r = await run(chunksOf(bad, feed), f.channels);
          expectRejected(r, label);
          expect(r.countMismatch, label).toBeUndefined();
          expectPrefix(r.pcm, f.pcm16, f.channels, label);
          // Nothing of the damaged frame, or of what follows it, comes out.
          expect(r.pcm.length, label).toBeLessThanOrEqual(fr.firstSample * f.channels * 2);
        }
      }
    });
  }

  it('a stream without MD5 or total (written to a pipe) still rejects a damaged frame, by its CRCs', async () => {
    const f = fixture('streamed (no MD5, no total), speech, stereo');
    expect(f.md5).toBe('0'.repeat(32));
    const { frames } = f.ref;
    for (const k of [0, Math.floor(frames.length / 2), frames.length - 1]) {
      const fr = frames[k]!;
      for (const pos of [fr.offset + 2, fr.offset + fr.headerLength, fr.offset + Math.floor(fr.length / 2), fr.offset + fr.length - 1]) {
        const bad = Buffer.from(f.flac);
        bad[pos] = bad[pos]! ^ 0x21;
        const label = `frame ${k}, byte ${pos} flipped`;
        const r = await run(chunksOf(bad, { kind: 'random', seed: pos, min: 1, max: 5000 }), f.channels);
        expectRejected(r, label);
        expectPrefix(r.pcm, f.pcm16, f.channels, label);
        expect(r.pcm.length, label).toBeLessThanOrEqual(fr.firstSample * f.channels * 2);
      }
    }
  });

  for (const [what, splice] of [
    ['missing', (f: Buffer, starts: number[]) => Buffer.concat([f.subarray(0, starts[2]), f.subarray(starts[3])])],
    ['repeated', (f: Buffer, starts: number[]) => Buffer.concat([f.subarray(0, starts[3]), f.subarray(starts[2])])],
  ] as const) {
    it(`a whole frame ${what} is rejected by the frame numbers, even without STREAMINFO's total and MD5`, async () => {
      const f = fixture('streamed (no MD5, no total), speech, stereo');
      const starts = f.ref.frames.map((fr) => fr.offset);
      expect(starts.length).toBeGreaterThan(3);
      const r = await run(chunksOf(splice(f.flac, starts), { kind: 'random', seed: 8, min: 1, max: 9000 }), f.channels);
      expectRejected(r, `frame 2 ${what}`);
      expect(String(r.error)).toMatch(/missing or repeated/);
      expectPrefix(r.pcm, f.pcm16, f.channels, `frame 2 ${what}`);
      expect(r.pcm.length).toBeLessThanOrEqual(f.ref.frames[what === 'missing' ? 2 : 3]!.firstSample * f.channels * 2);
    });
  }

  it('FlacDecodeStream with verify: false still fails on a damaged frame, after the audio before it', async () => {
    const f = fixture('level 5, speech, stereo 44.1 kHz');
    const fr = f.ref.frames[2]!;
    const bad = Buffer.from(f.flac);
    bad[fr.offset + Math.floor(fr.length / 2)]! ^= 0x44;
    const stream = new FlacDecodeStream({ verify: false });
    const out: Buffer[] = [];
    stream.on('data', (c: Buffer) => out.push(c));
    const failed = once(stream, 'error');
    stream.end(bad);
    const [error] = (await failed) as [Error];
    expect(error).toBeInstanceOf(IntegrityError);
    expectPrefix(Buffer.concat(out), f.pcm16, f.channels, 'verify: false');
  });

  it('a damaged frame is rejected when fed byte by byte', async () => {
    const f = fixture('shorter than one block, stereo');
    const fr = f.ref.frames[0]!;
    const bad = Buffer.from(f.flac);
    const pos = fr.offset + Math.floor(fr.length / 3);
    bad[pos] = bad[pos]! ^ 0x10;
    const r = await run(chunksOf(bad, { kind: 'bytes' }), f.channels);
    expectRejected(r, 'byte by byte');
    expect(r.pcm.length).toBe(0);
  });

  for (const name of DAMAGE_TARGETS) {
    it(`a stream cut short is rejected by end() or verify(), never by decode(): ${name}`, async () => {
      const f = fixture(name);
      const { frames, audioStart, blocks } = f.ref;
      const mid = frames[Math.floor(frames.length / 2)]!;
      const last = frames.at(-1)!;
      const cuts: Record<string, number> = {
        'in the middle of a frame': mid.offset + Math.floor(mid.length / 2),
        'one byte into a frame': mid.offset + 1,
        'just after a frame header': mid.offset + mid.headerLength,
        'at a frame boundary': mid.offset,
        'one byte before the end': f.flac.length - 1,
        'two bytes before the end': f.flac.length - 2,
        'inside the last frame header': last.offset + 3,
        'after the metadata, before any frame': audioStart,
      };
      if (blocks.length > 1) cuts['inside the metadata after STREAMINFO'] = Math.floor((blocks[1]!.start + blocks.at(-1)!.end) / 2);
      for (const [i, [where, length]] of Object.entries(cuts).entries()) {
        const feed: Feed = i % 2 === 0 ? { kind: 'whole' } : { kind: 'random', seed: 300 + i, min: 1, max: 5000 };
        const label = `${name}: cut ${where} (${length} of ${f.flac.length} bytes), ${describeFeed(feed)}`;
        const r = await run(chunksOf(f.flac.subarray(0, length), feed), f.channels);
        expectRejected(r, label);
        expect(r.stage === 'end' || r.stage === 'verify', `${label}: rejected by ${r.stage}()`).toBe(true);
        expectPrefix(r.pcm, f.pcm16, f.channels, label);
        expect(r.countMismatch, label).toBeUndefined();
      }
    });
  }

  it('a stream cut inside or before STREAMINFO is a ProtocolError from end()', async () => {
    const f = fixture('level 5, speech, stereo 44.1 kHz');
    for (const length of [0, 1, 3, 4, 8, 30, 41]) {
      const r = await run(chunksOf(f.flac.subarray(0, length), { kind: 'bytes' }), f.channels);
      expect(r.error, `${length} bytes`).toBeInstanceOf(ProtocolError);
      expect(r.stage, `${length} bytes`).toBe('end');
      expect(r.pcm.length, `${length} bytes`).toBe(0);
      expect(r.decoder.streamInfo, `${length} bytes`).toBeUndefined();
    }
  });
});

// ---------------------------------------------------------------------------------------------
// STREAMINFO's checks

/** A copy of `flac` with STREAMINFO's total sample count and/or MD5 replaced. */
function patchStreamInfo(flac: Buffer, patch: { totalSamples?: number; md5?: string }): Buffer {
  const out = Buffer.from(flac);
  if (patch.totalSamples !== undefined) {
    out[21] = (out[21]! & 0xf0) | Math.floor(patch.totalSamples / 2 ** 32);
    out.writeUInt32BE(patch.totalSamples % 2 ** 32, 22);
  }
  if (patch.md5 !== undefined) Buffer.from(patch.md5, 'hex').copy(out, 26);
  return out;
}

describe("STREAMINFO's total and MD5", () => {
  const names = [
    'level 5, speech, stereo 44.1 kHz',
    '24-bit speech, right_side',
    '8-bit stereo, mid_side and verbatim',
    'speech, 6 channels, 48 kHz, frame_size 2048',
  ];
  for (const name of names) {
    it(`verify() rejects intact frames that disagree with STREAMINFO, and accepts unknown values: ${name}`, async () => {
      const f = fixture(name);
      const flipped = Buffer.from(f.md5, 'hex');
      flipped[7] = flipped[7]! ^ 0x20;
      const wrong: Record<string, Buffer> = {
        'an MD5 one bit off': patchStreamInfo(f.flac, { md5: flipped.toString('hex') }),
        'a total one sample short': patchStreamInfo(f.flac, { totalSamples: f.frames - 1 }),
        'a total one sample long': patchStreamInfo(f.flac, { totalSamples: f.frames + 1 }),
      };
      for (const [what, flac] of Object.entries(wrong)) {
        for (const feed of [{ kind: 'whole' }, { kind: 'random', seed: 21, min: 1, max: 4000 }] as Feed[]) {
          const label = `${name}, ${what}, ${describeFeed(feed)}`;
          const r = await run(chunksOf(flac, feed), f.channels);
          expect(r.error, `${label}: ${r.stage}() failed with ${String(r.error)}`).toBeInstanceOf(IntegrityError);
          expectPrefix(r.pcm, f.pcm16, f.channels, label);
        }
      }
      // All zeros means "not computed" for the MD5, and 0 means "unknown" for the total.
      const unknown = { ...f, md5: '0'.repeat(32) };
      await expectDecodesExactly(unknown, patchStreamInfo(f.flac, { md5: '0'.repeat(32) }), { kind: 'whole' }, `${name}, MD5 unknown`);
      const noTotal = { ...f, totalSamples: 0 };
      await expectDecodesExactly(
        noTotal,
        patchStreamInfo(f.flac, { totalSamples: 0 }),
        { kind: 'random', seed: 22, min: 1, max: 4000 },
        `${name}, total unknown`,
      );
    });
  }
});

// ---------------------------------------------------------------------------------------------
// Metadata blocks

function metadataBlock(type: number, body: Buffer): Buffer {
  const header = Buffer.alloc(4);
  header[0] = type;
  header.writeUIntBE(body.length, 1, 3);
  return Buffer.concat([header, body]);
}

/**
 * The same stream with another metadata chain: STREAMINFO, then (if `keep`) the original blocks,
 * then `extra` (complete blocks). The last-metadata-block flag is set on the final block only.
 */
function rechain(flac: Buffer, extra: Buffer[], keep: boolean): Buffer {
  const { blocks, audioStart } = metadataBlocks(flac);
  const chain = [flac.subarray(4, 42), ...(keep ? blocks.slice(1).map((b) => flac.subarray(b.start, b.end)) : []), ...extra].map((b) => Buffer.from(b));
  chain.forEach((b, i) => (b[0] = (b[0]! & 0x7f) | (i === chain.length - 1 ? 0x80 : 0)));
  return Buffer.concat([Buffer.from('fLaC', 'latin1'), ...chain, flac.subarray(audioStart)]);
}

/** Seeded bytes without 0xFF, so no frame sync code can appear in them. */
function syncFreeBytes(length: number, seed: number): Buffer {
  const random = prng(seed);
  const out = Buffer.alloc(length);
  for (let i = 0; i < length; i++) out[i] = Math.floor(random() * 255);
  return out;
}

function pictureBlock(seed: number): Buffer {
  const mime = Buffer.from('image/png', 'latin1');
  const description = Buffer.from('front cover, ünïcödé', 'utf8');
  const image = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), syncFreeBytes(3000, seed)]);
  const u32 = (v: number): Buffer => {
    const b = Buffer.alloc(4);
    b.writeUInt32BE(v);
    return b;
  };
  return metadataBlock(
    6,
    Buffer.concat([u32(3), u32(mime.length), mime, u32(description.length), description, u32(1), u32(1), u32(24), u32(0), u32(image.length), image]),
  );
}

/** A SEEKTABLE with a point per frame (offsets from the first frame) and one placeholder. */
function seekTableBlock(ref: Reference): Buffer {
  const points = ref.frames.slice(0, 20).map((fr) => {
    const p = Buffer.alloc(18);
    p.writeBigUInt64BE(BigInt(fr.firstSample), 0);
    p.writeBigUInt64BE(BigInt(fr.offset - ref.audioStart), 8);
    p.writeUInt16BE(fr.blockSize, 16);
    return p;
  });
  const placeholder = Buffer.alloc(18);
  placeholder.writeBigUInt64BE(0xffffffffffffffffn, 0);
  return metadataBlock(3, Buffer.concat([...points, placeholder]));
}

function extraBlocks(f: Fixture, padding: number, seed: number): Buffer[] {
  return [
    metadataBlock(2, Buffer.concat([Buffer.from('RTTS', 'latin1'), syncFreeBytes(100, seed)])),
    seekTableBlock(f.ref),
    pictureBlock(seed + 1),
    metadataBlock(100, syncFreeBytes(777, seed + 2)),
    metadataBlock(1, Buffer.alloc(0)),
    metadataBlock(1, Buffer.alloc(padding)),
  ];
}

describe('metadata blocks', () => {
  for (const [i, name] of [
    'level 5, speech, stereo 44.1 kHz',
    '24-bit speech, right_side',
    'variable block sizes (sample numbers up to 4-byte UTF-8)',
  ].entries()) {
    it(`skips APPLICATION, SEEKTABLE, PICTURE, a reserved type, an empty and a 150 kB PADDING: ${name}`, async () => {
      const f = fixture(name);
      const flac = rechain(f.flac, extraBlocks(f, 150_000, 70 + i), true);
      expect(metadataBlocks(flac).blocks.map((b) => b.type)).toEqual([0, ...f.ref.blocks.slice(1).map((b) => b.type), 2, 3, 6, 100, 1, 1]);
      expect(parseReference(flac).samples.length).toBe(f.samples.length);
      for (const feed of [
        { kind: 'whole' },
        { kind: 'random', seed: 7 + i, min: 1, max: 70000 },
        { kind: 'random', seed: 8 + i, min: 1, max: 500 },
      ] as Feed[]) {
        await expectDecodesExactly(f, flac, feed, `${name} with extra metadata`);
      }
    });
  }

  it('skips a PICTURE block whose image holds bytes of a real frame (sync code, header and all)', async () => {
    const f = fixture('level 5, speech, stereo 44.1 kHz');
    const fr = f.ref.frames[1]!;
    const lookalike = Buffer.concat([syncFreeBytes(50, 5), f.flac.subarray(fr.offset, fr.offset + fr.length), syncFreeBytes(50, 6)]);
    const flac = rechain(f.flac, [metadataBlock(6, lookalike)], true);
    for (const feed of [{ kind: 'whole' }, { kind: 'random', seed: 12, min: 1, max: 400 }] as Feed[]) {
      await expectDecodesExactly(f, flac, feed, 'frame bytes inside a PICTURE');
    }
  });

  it('ignores what follows the last frame (an ID3v1 tag, zero padding) once every announced sample is out', async () => {
    const f = fixture('level 5, speech, stereo 44.1 kHz');
    const tag = Buffer.concat([Buffer.from('TAG', 'latin1'), Buffer.alloc(125, 0x20)]);
    for (const [what, tail] of [
      ['an ID3v1 tag', tag],
      ['32 zero bytes', Buffer.alloc(32)],
      ['1 zero byte', Buffer.alloc(1)],
    ] as const) {
      for (const feed of [{ kind: 'whole' }, { kind: 'random', seed: 4, min: 1, max: 3000 }] as Feed[]) {
        await expectDecodesExactly(f, Buffer.concat([f.flac, tail]), feed, `followed by ${what}`);
      }
    }
  });

  it('rejects bytes after the last frame when STREAMINFO gives no total to tell they are not audio', async () => {
    const f = fixture('streamed (no MD5, no total), speech, stereo');
    const r = await run([Buffer.concat([f.flac, Buffer.alloc(32)])], f.channels);
    expectRejected(r, 'trailing zeros, no total');
    expectSamePcm(r.pcm, f.pcm16, f.channels, 'trailing zeros, no total');
  });

  it('keeps no view of a buffer the caller fills again for every chunk', async () => {
    const f = fixture('level 5, speech, stereo 44.1 kHz');
    for (const size of [1000, 37]) {
      const decoder = new FlacPcmDecoder();
      const buffer = Buffer.alloc(size);
      const out: Buffer[] = [];
      for (let at = 0; at < f.flac.length; at += size) {
        const n = f.flac.copy(buffer, 0, at, at + size);
        out.push(await decoder.decode(buffer.subarray(0, n)));
        buffer.fill(0xa5);
      }
      out.push(await decoder.end());
      decoder.verify();
      await decoder.close();
      expectSamePcm(Buffer.concat(out), f.pcm16, f.channels, `one reused ${size}-byte buffer`);
    }
  });

  it('decodes a stream whose only metadata block is STREAMINFO (flagged last)', async () => {
    for (const name of ['level 5, speech, stereo 44.1 kHz', 'a single sample, mono']) {
      const f = fixture(name);
      const flac = rechain(f.flac, [], false);
      expect(flac[4]).toBe(0x80);
      expect(metadataBlocks(flac).audioStart).toBe(42);
      for (const feed of [{ kind: 'whole' }, { kind: 'random', seed: 3, min: 1, max: 200 }] as Feed[])
        await expectDecodesExactly(f, flac, feed, `${name}, STREAMINFO only`);
    }
  });

  it('skips extra metadata fed byte by byte', async () => {
    const f = fixture('shorter than one block, stereo');
    const flac = rechain(f.flac, extraBlocks(f, 2000, 90), true);
    await expectDecodesExactly(f, flac, { kind: 'bytes' }, 'extra metadata');
  });
});

// ---------------------------------------------------------------------------------------------
// Streaming

describe('streaming', () => {
  for (const name of [
    'level 5, speech, stereo 44.1 kHz',
    'frame_size 4096',
    '24-bit speech, right_side',
    'variable block sizes (sample numbers up to 4-byte UTF-8)',
  ]) {
    it(`returns each frame's audio before the end of the stream: ${name}`, async () => {
      const f = fixture(name);
      const { frames } = f.ref;
      const maxFrame = Math.max(...frames.map((fr) => fr.length));
      let late: string | undefined;
      const r = await run(chunksOf(f.flac, { kind: 'random', seed: 11, min: 1, max: 1500 }), f.channels, (d, fed) => {
        // A frame must have come out once another maximum frame size of bytes has followed it.
        let due = 0;
        for (const fr of frames) if (fr.offset + fr.length + maxFrame <= fed) due = fr.firstSample + fr.blockSize;
        if (late === undefined && d.samplesDecoded < due) late = `after ${fed} bytes: ${d.samplesDecoded} samples out, ${due} due`;
      });
      expect(r.error).toBeUndefined();
      expect(late).toBeUndefined();
      expectSamePcm(r.pcm, f.pcm16, f.channels, name);
    });
  }
});
