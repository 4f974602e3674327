/**
 * Audio files cut short (a stream or a download that stopped midway) made valid as far as they
 * go, and measured:
 *
 * - WAV (RIFF or RIFX): the data is cut to whole sample frames (a pad byte added when RIFF needs
 *   one) and the RIFF and `data` sizes are set to what the file holds; a header written for the
 *   whole stream (or placeholder sizes) no longer claims audio that is not there.
 * - FLAC: the file is cut after its last complete frame (found by walking the frames: a frame
 *   counts when a valid header follows it, or the file's end, and its CRC-16 matches), and
 *   STREAMINFO's total samples are set to what those frames hold, its MD5 to zeros ("not
 *   computed": the MD5 was of the whole stream). A cut within the first bytes of a frame's
 *   header can cost the frame before it.
 *
 * `FlacCutScanner` (pure, fed chunks) and `wavLayout` hold the logic; `finishCutAudioFile` is
 * the file shell. Other files are left as they are.
 */
import { open, type FileHandle } from 'node:fs/promises';
import { FLAC_STREAMINFO_END, parseFlacStreamInfo, type FlacStreamInfo } from './flac-decoder.js';
import { flacCrc16, flacCrc8 } from './flac-encoder.js';
import { isSniffResult, sniffAudio } from './sniff.js';

/** What a cut audio file holds once finished. */
export interface CutAudio {
  /** `WAV` or `FLAC`. */
  format: string;
  /** Seconds of audio in the file. */
  seconds: number;
  /** The file's size afterwards. */
  bytes: number;
}

/* ----------------------------------------------------------------------------------------- */
/* WAV                                                                                       */

/** Where a WAV file's sample data starts, and its layout. */
export interface WavLayout {
  /** Offset of the `data` chunk's first byte. */
  dataOffset: number;
  /** Bytes of one sample frame (all channels). */
  blockAlign: number;
  /** Bytes of one second. */
  byteRate: number;
  littleEndian: boolean;
}

function chunkId(head: Uint8Array, at: number): string {
  return String.fromCharCode(head[at]!, head[at + 1]!, head[at + 2]!, head[at + 3]!);
}

/** The layout of the WAV file whose first bytes are `head`; undefined when they hold no `fmt ` and `data` chunk headers. */
export function wavLayout(head: Uint8Array): WavLayout | undefined {
  if (head.length < 12) return undefined;
  const riff = chunkId(head, 0);
  if ((riff !== 'RIFF' && riff !== 'RIFX') || chunkId(head, 8) !== 'WAVE') return undefined;
  const view = new DataView(head.buffer, head.byteOffset, head.byteLength);
  const littleEndian = riff === 'RIFF';
  let format: { blockAlign: number; byteRate: number } | undefined;
  for (let at = 12; at + 8 <= head.length;) {
    const id = chunkId(head, at);
    const size = view.getUint32(at + 4, littleEndian);
    if (id === 'data') return format && { dataOffset: at + 8, ...format, littleEndian };
    if (id === 'fmt ' && at + 8 + 16 <= head.length) {
      format = { byteRate: view.getUint32(at + 8 + 8, littleEndian), blockAlign: view.getUint16(at + 8 + 12, littleEndian) };
      if (format.blockAlign === 0 || format.byteRate === 0) return undefined;
    }
    at += 8 + size + (size % 2);
  }
  return undefined;
}

async function finishWav(file: FileHandle, head: Uint8Array, size: number): Promise<CutAudio> {
  const layout = wavLayout(head);
  if (layout === undefined) return { format: 'WAV', seconds: 0, bytes: size };
  const data = Math.max(0, size - layout.dataOffset);
  const whole = data - (data % layout.blockAlign);
  const pad = whole % 2;
  const length = layout.dataOffset + whole + pad;
  if (length !== size) await file.truncate(length);
  if (pad) await file.write(Buffer.alloc(1), 0, 1, length - 1);
  const sizes = Buffer.alloc(4);
  const put = (value: number): Buffer => {
    if (layout.littleEndian) sizes.writeUInt32LE(value);
    else sizes.writeUInt32BE(value);
    return sizes;
  };
  await file.write(put(length - 8), 0, 4, 4);
  await file.write(put(whole), 0, 4, layout.dataOffset - 4);
  return { format: 'WAV', seconds: whole / layout.byteRate, bytes: length };
}

/* ----------------------------------------------------------------------------------------- */
/* FLAC                                                                                      */

/** Most bytes a frame header takes: sync and codes 4, number 7, block size 2, rate 2, CRC-8 1. */
const MAX_FRAME_HEADER = 16;

/** A frame header's fields this needs. */
interface FrameHeader {
  /** Header bytes, CRC-8 included. */
  length: number;
  blockSize: number;
  /** The frame number (fixed block size) or the first sample's number (variable). */
  number: number;
  variable: boolean;
}

/** The frame header at `at` of `bytes`, or undefined when there is none (or not all of it is there). */
function frameHeader(bytes: Uint8Array, at: number, end: number): FrameHeader | undefined {
  if (at + 6 > end) return undefined;
  const b1 = bytes[at + 1]!;
  if (bytes[at] !== 0xff || (b1 & 0xfe) !== 0xf8) return undefined;
  const blockCode = bytes[at + 2]! >> 4;
  const rateCode = bytes[at + 2]! & 0xf;
  const channelCode = bytes[at + 3]! >> 4;
  const sizeCode = (bytes[at + 3]! >> 1) & 0x7;
  if (blockCode === 0 || rateCode === 0xf || channelCode > 10 || sizeCode === 3 || (bytes[at + 3]! & 1) !== 0) return undefined;
  // The frame or sample number, in FLAC's extended UTF-8 coding.
  let pos = at + 4;
  const lead = bytes[pos++]!;
  let extra = 0;
  let number = lead;
  if (lead >= 0x80) {
    // 110xxxxx: one continuation byte, ... 11111110: six.
    let ones = 0;
    while (ones < 8 && lead & (0x80 >> ones)) ones++;
    if (ones < 2 || ones > 7) return undefined;
    extra = ones - 1;
    number = lead & (0xff >> (ones + 1));
    if (pos + extra > end) return undefined;
    for (let i = 0; i < extra; i++) {
      const next = bytes[pos++]!;
      if ((next & 0xc0) !== 0x80) return undefined;
      number = number * 64 + (next & 0x3f);
    }
  }
  let blockSize: number;
  if (blockCode === 1) blockSize = 192;
  else if (blockCode <= 5) blockSize = 576 << (blockCode - 2);
  else if (blockCode === 6) {
    if (pos + 1 > end) return undefined;
    blockSize = bytes[pos++]! + 1;
  } else if (blockCode === 7) {
    if (pos + 2 > end) return undefined;
    blockSize = ((bytes[pos]! << 8) | bytes[pos + 1]!) + 1;
    pos += 2;
  } else blockSize = 256 << (blockCode - 8);
  if (rateCode === 12) pos += 1;
  else if (rateCode === 13 || rateCode === 14) pos += 2;
  if (pos + 1 > end || flacCrc8(bytes, at, pos) !== bytes[pos]) return undefined;
  return { length: pos + 1 - at, blockSize, number, variable: (b1 & 1) === 1 };
}

/** What `FlacCutScanner` found: the bytes to keep and the samples they hold. */
export interface FlacCut {
  info: FlacStreamInfo;
  /** Bytes from the file's start through the last complete frame. */
  keepBytes: number;
  /** Samples per channel in those frames. */
  samples: number;
}

/**
 * Walks a FLAC stream fed in chunks of any size and finds where its last complete frame ends.
 * Memory: the bytes of the frame being walked that its CRC-16 has not taken yet, plus a header.
 */
export class FlacCutScanner {
  #buffer: Uint8Array = new Uint8Array(0);
  /** Offset in the stream of `#buffer[0]`. */
  #base = 0;
  #info: FlacStreamInfo | undefined;
  /** Where the frame being walked starts (after the metadata), and its header. */
  #start = 0;
  #header: FrameHeader | undefined;
  /** CRC-16 of the frame being walked up to `#crcAt`, and the next offset to look for a header at. */
  #crc = 0;
  #crcAt = 0;
  #at = 0;
  /** No frame can follow (a frame header was not where it had to be). */
  #stuck = false;
  #keep = 0;
  #samples = 0;

  push(chunk: Uint8Array): void {
    const merged = new Uint8Array(this.#buffer.length + chunk.length);
    merged.set(this.#buffer);
    merged.set(chunk, this.#buffer.length);
    this.#buffer = merged;
    this.#scan(false);
  }

  /** The result once the whole stream was pushed; undefined when its metadata is not all there. */
  end(): FlacCut | undefined {
    this.#scan(true);
    return this.#info && { info: this.#info, keepBytes: this.#keep, samples: this.#samples };
  }

  #byte(offset: number): number {
    return this.#buffer[offset - this.#base] ?? 0;
  }

  /** True when the frame being walked, ending at `end`, ends with the CRC-16 of its other bytes. */
  #crcMatches(end: number): boolean {
    if (end - 2 < this.#crcAt) return false;
    this.#crc = flacCrc16(this.#buffer, this.#crcAt - this.#base, end - 2 - this.#base, this.#crc);
    this.#crcAt = end - 2;
    return this.#crc === ((this.#byte(end - 2) << 8) | this.#byte(end - 1));
  }

  #scan(final: boolean): void {
    if (!this.#info && !this.#readMetadata()) return;
    const end = this.#base + this.#buffer.length;
    while (!this.#stuck) {
      if (!this.#header) {
        const header = frameHeader(this.#buffer, this.#start - this.#base, this.#buffer.length);
        if (!header) {
          if (final || end - this.#start >= MAX_FRAME_HEADER) this.#stuck = true;
          break;
        }
        this.#header = header;
        this.#crc = flacCrc16(this.#buffer, this.#start - this.#base, this.#start - this.#base + header.length);
        this.#crcAt = this.#start + header.length;
        this.#at = this.#crcAt + 2;
      }
      const header = this.#header;
      const maxFrame = this.#info!.maxFrameSize;
      let next: FrameHeader | undefined;
      let complete = false;
      for (; this.#at + (final ? 0 : MAX_FRAME_HEADER) <= end; this.#at++) {
        const at = this.#at;
        if (maxFrame > 0 && at - this.#start > maxFrame) {
          // Longer than any frame of the stream: what follows is not a frame this can walk.
          this.#stuck = true;
          break;
        }
        if (at === end) {
          // The file ends here: the frame is complete when its CRC-16 is the last two bytes.
          complete = this.#crcMatches(at);
          break;
        }
        if (this.#byte(at) !== 0xff || (this.#byte(at + 1) & 0xfe) !== 0xf8) continue;
        const candidate = frameHeader(this.#buffer, at - this.#base, end - this.#base);
        if (!candidate || candidate.variable !== header.variable || !this.#crcMatches(at)) continue;
        next = candidate;
        complete = true;
        break;
      }
      if (!complete) break;
      this.#keep = this.#at;
      const first = header.variable ? header.number : header.number * (this.#info!.maxBlockSize || header.blockSize);
      this.#samples = first + header.blockSize;
      this.#start = this.#at;
      this.#header = undefined;
      if (next === undefined) break;
    }
    // Bytes before the frame's unread part are no longer needed.
    const drop = Math.min(this.#header ? this.#crcAt : this.#start, end) - this.#base;
    if (drop > 0) {
      this.#buffer = this.#buffer.subarray(drop);
      this.#base += drop;
    }
  }

  /** Reads STREAMINFO and skips the other metadata blocks; false while they are not all there. */
  #readMetadata(): boolean {
    const bytes = this.#buffer;
    if (bytes.length < FLAC_STREAMINFO_END) return false;
    const info = parseFlacStreamInfo(bytes);
    if (!info) return false;
    let at = 4;
    for (;;) {
      if (at + 4 > bytes.length) return false;
      const last = (bytes[at]! & 0x80) !== 0;
      at += 4 + ((bytes[at + 1]! << 16) | (bytes[at + 2]! << 8) | bytes[at + 3]!);
      if (last) break;
    }
    if (at > bytes.length) return false;
    this.#info = info;
    this.#start = at;
    this.#keep = at;
    return true;
  }
}

async function finishFlac(file: FileHandle, size: number): Promise<CutAudio> {
  const scanner = new FlacCutScanner();
  const chunk = Buffer.alloc(1 << 20);
  for (let offset = 0; offset < size;) {
    const { bytesRead } = await file.read(chunk, 0, chunk.length, offset);
    if (bytesRead === 0) break;
    scanner.push(chunk.subarray(0, bytesRead));
    offset += bytesRead;
  }
  const cut = scanner.end();
  if (!cut) return { format: 'FLAC', seconds: 0, bytes: size };
  if (cut.keepBytes !== size) await file.truncate(cut.keepBytes);
  // STREAMINFO: total samples (36 bits from the low nibble of byte 21), then the MD5.
  const fields = Buffer.alloc(21);
  await file.read(fields, 0, 21, 21);
  fields[0] = (fields[0]! & 0xf0) | Math.floor(cut.samples / 2 ** 32);
  fields.writeUInt32BE(cut.samples % 2 ** 32, 1);
  fields.fill(0, 5);
  await file.write(fields, 0, 21, 21);
  return { format: 'FLAC', seconds: cut.samples / cut.info.sampleRate, bytes: cut.keepBytes };
}

/* ----------------------------------------------------------------------------------------- */

/** Bytes read to find a WAV file's `data` chunk. */
const WAV_HEAD_BYTES = 65_536;

/**
 * Makes the WAV or FLAC file at `path`, cut short, valid as far as it goes (see the module
 * comment) and says what it holds: no seconds at all, the file left as it is, when even its
 * header is not all there. Undefined for any other file (left as it is).
 */
export async function finishCutAudioFile(path: string): Promise<CutAudio | undefined> {
  const file = await open(path, 'r+');
  try {
    const { size } = await file.stat();
    const head = Buffer.alloc(Math.min(size, WAV_HEAD_BYTES));
    await file.read(head, 0, head.length, 0);
    const sniffed = sniffAudio(head, true);
    if (!isSniffResult(sniffed)) return undefined;
    if (sniffed.kind === 'wav') return await finishWav(file, head, size);
    if (sniffed.kind === 'flac') return await finishFlac(file, size);
    return undefined;
  } finally {
    await file.close();
  }
}
