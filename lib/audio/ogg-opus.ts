/**
 * Ogg/Opus (RFC 7845: `.opus`, `.ogg` with Opus) to PCM16 LE interleaved, as a Transform.
 *
 * - Ogg pages are parsed here: capture pattern, version, CRC-32 (a mismatch fails the stream
 *   with `IntegrityError`), lacing, packets spanning pages. The first logical stream whose
 *   first packet is `OpusHead` is decoded; other streams (video, a second audio track) are
 *   skipped.
 * - Packets are decoded by libopus through `@discordjs/opus`, or `opusscript` (WebAssembly)
 *   where the native module is absent. libopus decodes straight to any of 8, 12, 16, 24 or
 *   48 kHz and to mono or stereo, so `{ rate: 24000, channels: 1 }` gives the service format
 *   without a resampler or mixer.
 * - Timing follows the header and the granule positions: the `pre-skip` samples at the start
 *   are dropped, and the last page's granule position trims the padding of the final packet,
 *   so the output has the duration the encoder was given (to one sample at the output rate).
 *   A stream that starts at a non-zero granule position (a cut live stream) is decoded from
 *   its first packet without trimming its start.
 * - Not supported: channel mapping families other than 0 (more than 2 channels) fail the stream
 *   with `UnsupportedError`; the header's output gain is not applied.
 * - A truncated last page (the input ended inside it) is dropped. Input that is not Ogg, or
 *   Ogg without an Opus stream, fails with `ProtocolError` naming what was found.
 *
 * Memory: at most one page (< 64 KiB) of input is held, plus the packet being assembled.
 */
import { Transform, type TransformCallback } from 'node:stream';
import { IntegrityError, ProtocolError, UnsupportedError, ValidationError } from '../errors.js';
import { EMPTY, type AudioTransformOptions } from './processor.js';
import { createOpusCodec, type OpusCodec } from './opus.js';
import { describeReceived } from '../options.js';
import { withEvents } from '../typed-events.js';

/** Rates libopus decodes to, in Hz. */
export const OPUS_DECODE_RATES = [8000, 12000, 16000, 24000, 48000] as const;
export type OpusDecodeRate = (typeof OPUS_DECODE_RATES)[number];

/** The fields of an `OpusHead` packet. */
export interface OpusHead {
  version: number;
  /** Channels of the encoded stream. */
  channels: number;
  /** Samples (at 48 kHz) to drop from the start of the decoded audio. */
  preSkip: number;
  /** The rate of the audio given to the encoder, for information only (Hz; 0 = unknown). */
  inputSampleRate: number;
  /** Gain to apply on output, in dB (not applied by this decoder). */
  outputGainDb: number;
  mappingFamily: number;
}

/** The `format` event's payload: the header and the PCM layout of the output. */
export interface OggOpusFormat {
  head: OpusHead;
  /** Output rate in Hz. */
  rate: OpusDecodeRate;
  /** Output channels (interleaved). */
  channels: 1 | 2;
}

export interface OggOpusDecoderOptions extends AudioTransformOptions {
  /** Output rate in Hz, one of `OPUS_DECODE_RATES`; default 48000. */
  rate?: number;
  /** Output channels, 1 or 2; default the stream's own. */
  channels?: number;
}

/** Ogg's CRC-32: polynomial 0x04C11DB7, most significant bit first, initial value 0, no final xor. */
const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let r = i << 24;
    for (let bit = 0; bit < 8; bit++) r = r & 0x80000000 ? (r << 1) ^ 0x04c11db7 : r << 1;
    table[i] = r >>> 0;
  }
  return table;
})();

/** The CRC of an Ogg page, computed with its checksum field (bytes 22 to 25) taken as zero. */
export function oggPageCrc(page: Uint8Array): number {
  let crc = 0;
  for (let i = 0; i < page.length; i++) {
    const byte = i >= 22 && i < 26 ? 0 : page[i]!;
    crc = ((crc << 8) ^ CRC_TABLE[((crc >>> 24) ^ byte) & 0xff]!) >>> 0;
  }
  return crc;
}

const OGG_HEADER_BYTES = 27;
const FLAG_CONTINUED = 0x01;
const FLAG_EOS = 0x04;

/** Parses an `OpusHead` packet. Throws `ProtocolError` when it is not one. */
export function parseOpusHead(packet: Buffer): OpusHead {
  if (packet.length < 19 || packet.toString('latin1', 0, 8) !== 'OpusHead') {
    throw new ProtocolError('Not an OpusHead packet.');
  }
  return {
    version: packet[8]!,
    channels: packet[9]!,
    preSkip: packet.readUInt16LE(10),
    inputSampleRate: packet.readUInt32LE(12),
    outputGainDb: packet.readInt16LE(16) / 256,
    mappingFamily: packet[18]!,
  };
}

/** Names the codec of a logical stream by its first packet (for errors). */
function codecName(packet: Buffer): string {
  if (packet.toString('latin1', 1, 7) === 'vorbis') return 'Vorbis';
  if (packet.toString('latin1', 1, 5) === 'FLAC') return 'FLAC';
  if (packet.toString('latin1', 0, 5) === 'Speex') return 'Speex';
  if (packet.toString('latin1', 1, 7) === 'theora') return 'Theora';
  return 'an unknown codec';
}

/**
 * Ogg/Opus bytes in (any chunking), PCM16 LE interleaved out at the requested rate and
 * channels. Emits `format` ({@link OggOpusFormat}) before any audio. See the module comment
 * for the policies.
 */
export class OggOpusDecoder extends withEvents<OggOpusDecoderEvents>()(Transform) {
  /** The stream's header, once read. */
  head: OpusHead | undefined;
  readonly rate: OpusDecodeRate;
  /** Requested channels; undefined: the stream's own. */
  readonly #requestedChannels: 1 | 2 | undefined;
  #outChannels: 1 | 2 = 1;
  #decoder: OpusCodec | undefined;
  #pending: Buffer = EMPTY;
  #bytesIn = 0;
  #serial: number | undefined;
  #packetsInStream = 0;
  #packet: Buffer[] = [];
  #otherCodecs: string[] = [];
  /** Output samples (per channel) decoded so far, pre-skip included. */
  #decodedSamples = 0;
  #skipSamples = 0;
  #granuleLimit: number | undefined;

  constructor(options: OggOpusDecoderOptions = {}) {
    const rate = options.rate ?? 48000;
    if (!(OPUS_DECODE_RATES as readonly number[]).includes(rate)) {
      throw new ValidationError('rate', `an Opus decoding rate in Hz, one of ${OPUS_DECODE_RATES.join(', ')}`, describeReceived(rate));
    }
    if (options.channels !== undefined && options.channels !== 1 && options.channels !== 2) {
      throw new ValidationError('channels', 'a channel count of 1 or 2', describeReceived(options.channels));
    }
    super({
      readableHighWaterMark: options.readableHighWaterMark,
      writableHighWaterMark: options.writableHighWaterMark,
      objectMode: false,
      decodeStrings: true,
    });
    this.rate = rate as OpusDecodeRate;
    this.#requestedChannels = options.channels as 1 | 2 | undefined;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.#bytesIn += chunk.length;
    this.#pending = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    try {
      let offset = 0;
      for (;;) {
        const used = this.#readPage(this.#pending, offset);
        if (used === 0) break;
        offset += used;
      }
      // Keep only the unparsed rest (less than one page); copy it so the chunk can go.
      this.#pending = offset === this.#pending.length ? EMPTY : Buffer.from(this.#pending.subarray(offset));
    } catch (error) {
      callback(error as Error);
      return;
    }
    callback();
  }

  override _flush(callback: TransformCallback): void {
    if (this.head === undefined) {
      const found =
        this.#otherCodecs.length > 0
          ? `Ogg streams of ${this.#otherCodecs.join(', ')}`
          : this.#bytesIn === 0
            ? 'no data'
            : `${this.#bytesIn} bytes without an OpusHead packet`;
      callback(new ProtocolError(`Not an Ogg/Opus stream: found ${found}.`));
      return;
    }
    this.#pending = EMPTY;
    callback();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#decoder?.close();
    this.#decoder = undefined;
    this.#pending = EMPTY;
    this.#packet = [];
    callback(error);
  }

  /** Parses one page at `offset`; returns its length, or 0 when it is not complete yet. */
  #readPage(data: Buffer, offset: number): number {
    const available = data.length - offset;
    if (available < OGG_HEADER_BYTES) {
      this.#checkCapture(data, offset, available);
      return 0;
    }
    this.#checkCapture(data, offset, 4);
    if (data[offset + 4] !== 0) throw new ProtocolError(`Unsupported Ogg page version ${data[offset + 4]} at byte ${this.#position(data, offset)}.`);
    const segments = data[offset + 26]!;
    const headerLength = OGG_HEADER_BYTES + segments;
    if (available < headerLength) return 0;
    let bodyLength = 0;
    for (let i = 0; i < segments; i++) bodyLength += data[offset + OGG_HEADER_BYTES + i]!;
    const pageLength = headerLength + bodyLength;
    if (available < pageLength) return 0;

    const page = data.subarray(offset, offset + pageLength);
    const stored = page.readUInt32LE(22);
    if (oggPageCrc(page) !== stored) {
      throw new IntegrityError(`Ogg page at byte ${this.#position(data, offset)} fails its CRC check: the data is corrupt.`);
    }
    const flags = page[5]!;
    const granule = page.readBigInt64LE(6);
    const serial = page.readUInt32LE(14);
    if (this.#serial === undefined) {
      this.#lookForHead(page, serial, segments, headerLength);
      return pageLength;
    }
    if (serial !== this.#serial) return pageLength;
    if (this.#packet.length > 0 && (flags & FLAG_CONTINUED) === 0) this.#packet = []; // lost continuation
    if ((flags & FLAG_EOS) !== 0 && granule >= 0n) {
      this.#granuleLimit = Math.round((Number(granule) * this.rate) / 48000);
    }
    let position = headerLength;
    for (let i = 0; i < segments; i++) {
      const lace = page[OGG_HEADER_BYTES + i]!;
      if (lace > 0) this.#packet.push(page.subarray(position, position + lace));
      position += lace;
      if (lace < 255) {
        const packet = this.#packet.length === 1 ? this.#packet[0]! : Buffer.concat(this.#packet);
        this.#packet = [];
        this.#onPacket(packet);
      }
    }
    // A packet still open at the end of the page continues on the next one: keep a copy.
    if (this.#packet.length > 0) this.#packet = [Buffer.concat(this.#packet)];
    return pageLength;
  }

  #position(data: Buffer, offset: number): number {
    return this.#bytesIn - (data.length - offset);
  }

  #checkCapture(data: Buffer, offset: number, n: number): void {
    const pattern = 'OggS';
    for (let i = 0; i < Math.min(n, 4); i++) {
      if (data[offset + i] !== pattern.charCodeAt(i)) {
        const at = this.#position(data, offset);
        throw new ProtocolError(
          at === 0 ? 'Not an Ogg stream: the data does not start with "OggS".' : `Ogg data is corrupt at byte ${at}: no page starts there.`,
        );
      }
    }
  }

  /** Before the Opus stream is known: a beginning-of-stream page whose first packet is OpusHead. */
  #lookForHead(page: Buffer, serial: number, segments: number, headerLength: number): void {
    if ((page[5]! & 0x02) === 0 || segments === 0) return;
    const firstLength = page[OGG_HEADER_BYTES]!;
    const first = page.subarray(headerLength, headerLength + firstLength);
    if (first.toString('latin1', 0, 8) !== 'OpusHead') {
      this.#otherCodecs.push(codecName(first));
      return;
    }
    const head = parseOpusHead(first);
    if (head.channels < 1 || head.channels > 2 || head.mappingFamily !== 0) {
      throw new UnsupportedError(
        `Unsupported Ogg/Opus stream: ${head.channels} channels, channel mapping family ${head.mappingFamily}; ` +
          'accepted: 1 or 2 channels, mapping family 0.',
      );
    }
    this.head = head;
    this.#serial = serial;
    this.#packetsInStream = 1;
    this.#outChannels = this.#requestedChannels ?? (head.channels as 1 | 2);
    this.#decoder = createOpusCodec({ sampleRate: this.rate, channels: this.#outChannels });
    this.#skipSamples = Math.round((head.preSkip * this.rate) / 48000);
    this.emit('format', { head, rate: this.rate, channels: this.#outChannels } satisfies OggOpusFormat);
  }

  #onPacket(packet: Buffer): void {
    const index = this.#packetsInStream++;
    if (index === 1) return; // OpusTags
    if (packet.length === 0) return;
    let pcm: Buffer;
    try {
      pcm = this.#decoder!.decode(packet);
    } catch (error) {
      throw new IntegrityError(`Opus packet ${index - 1} could not be decoded: ${(error as Error).message}.`, { cause: error });
    }
    const frameBytes = 2 * this.#outChannels;
    let start = 0;
    let samples = pcm.length / frameBytes;
    const before = this.#decodedSamples;
    this.#decodedSamples += samples;
    if (this.#granuleLimit !== undefined && this.#decodedSamples > this.#granuleLimit) {
      samples = Math.max(0, this.#granuleLimit - before);
    }
    if (before < this.#skipSamples) {
      const skip = Math.min(samples, this.#skipSamples - before);
      start = skip;
      samples -= skip;
    }
    if (samples > 0) this.push(pcm.subarray(start * frameBytes, (start + samples) * frameBytes));
  }
}

export interface OggOpusDecoderEvents {
  format: [format: OggOpusFormat];
}
