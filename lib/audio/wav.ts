/**
 * WAV in and out, on the `wav` package's header parser and header writer.
 *
 * - `WavReader`: WAV bytes in, sample data out; reports the format found in the header (event
 *   `format`) and, given `to`, converts the data to that PCM layout with the conversion chain.
 * - `WavWriter`: PCM in, WAV bytes out, for a destination of unknown length (a pipe, a socket):
 *   the header carries placeholder sizes (the package's: data size 4294967195), which readers
 *   take as "read to the end of the stream" (the header bytes handed out are a copy, so they
 *   keep those sizes). The `header` event afterwards gives the header with the exact sizes, for
 *   a caller that can seek.
 * - `WavFileWriter`: PCM in, a WAV file out with exact sizes: the header is rewritten once all
 *   data is on disk, and `finish` comes only after that.
 *
 * The package's streams are of an old stream implementation (no `destroy`, errors emitted as
 * events), so each is wrapped in a core Duplex that carries backpressure both ways and turns
 * its errors into `destroy(err)`. The package's own `FileWriter` is not used: it rewrites the
 * header without waiting for the data to reach the file (a race that can lose the header or
 * fail with ENOENT on a fast, small write), and its file stream's errors are not forwarded.
 * The package is loaded by the first stream made here, not by importing the library.
 */
import { once } from 'node:events';
import { createRequire } from 'node:module';
import { createWriteStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { Duplex, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type * as WavPackage from 'wav';
import type { Format as RawWavFormat, WriterOptions } from 'wav';
import { UnsupportedError, ValidationError } from '../errors.js';
import {
  SUPPORTED_RATES,
  resolveDescription,
  validateSampleFormat,
  type AudioDescription,
  type ResolvedAudioDescription,
  type SampleFormat,
} from './audio-format.js';
import { planConversion } from './convert.js';
import { EMPTY, type AudioProcessor, type AudioTransformOptions } from './processor.js';
import { describeReceived } from '../options.js';
import { withEvents } from '../typed-events.js';

const requireFromHere = createRequire(import.meta.url);
let wavPackage: typeof WavPackage | undefined;

/** The `wav` package, loaded on first use. */
function wav(): typeof WavPackage {
  return (wavPackage ??= requireFromHere('wav') as typeof WavPackage);
}

/** WAVE format codes this module reads or writes. */
export const WAVE_FORMAT = Object.freeze({
  PCM: 0x0001,
  IEEE_FLOAT: 0x0003,
  ALAW: 0x0006,
  MULAW: 0x0007,
  EXTENSIBLE: 0xfffe,
});

/** The format found in a WAV header. */
export interface WavFormat {
  /** The `fmt ` chunk's format code (1 PCM, 3 IEEE float, 6 A-law, 7 mu-law, 0xFFFE extensible). */
  audioFormat: number;
  /** For `WAVE_FORMAT_EXTENSIBLE`, the format code inside its SubFormat GUID. */
  subFormat?: number;
  channels: number;
  sampleRate: number;
  bitDepth: number;
  /** `LE` for RIFF files, `BE` for RIFX files. */
  endianness: 'LE' | 'BE';
  /** The sample encoding, when it is one the library converts; otherwise undefined. */
  sampleFormat: SampleFormat | undefined;
}

/** What `WavReader` converts from, in words (for errors). */
export const ACCEPTED_WAV_FORMATS =
  `PCM 16-bit (format 1, RIFF or RIFX), IEEE float 32-bit (format 3), A-law 8-bit (format 6) or ` +
  `mu-law 8-bit (format 7), plain or as WAVE_FORMAT_EXTENSIBLE; 1 or 2 channels; ` +
  `sample rate one of ${SUPPORTED_RATES.join(', ')} Hz`;

function describeFormat(f: WavFormat): string {
  const code = `format ${f.audioFormat}${f.subFormat === undefined ? '' : `/${f.subFormat}`}`;
  return `${code}, ${f.bitDepth}-bit, ${f.channels} channel(s), ${f.sampleRate} Hz, ${f.endianness}`;
}

/** A WAV stream whose format the reader cannot convert to the requested layout. */
export class WavFormatError extends UnsupportedError {
  /** The format found in the header. */
  readonly found: WavFormat;
  /** What can be converted, in words. */
  readonly accepted: string;
  constructor(found: WavFormat, accepted: string = ACCEPTED_WAV_FORMATS) {
    super(`Cannot convert this WAV stream: found ${describeFormat(found)}; accepted: ${accepted}.`);
    this.found = found;
    this.accepted = accepted;
  }
}

/** The subset of the package streams' interface used here. */
interface LegacyTransform {
  write(chunk: Buffer): boolean;
  end(): void;
  pause(): unknown;
  resume(): unknown;
  on(event: string, listener: (...args: any[]) => void): unknown;
  once(event: string, listener: (...args: any[]) => void): unknown;
  removeAllListeners(event?: string): unknown;
}

/**
 * A core Duplex around one of the package's transforms: writes go in with its backpressure,
 * its output comes out through `mapOutput` with ours, its errors destroy this stream.
 */
abstract class WrappedTransform extends Duplex {
  protected readonly inner: LegacyTransform;
  #finalCallback: ((err?: Error | null) => void) | undefined;

  constructor(inner: LegacyTransform, options: AudioTransformOptions) {
    super({
      readableHighWaterMark: options.readableHighWaterMark,
      writableHighWaterMark: options.writableHighWaterMark,
      objectMode: false,
      decodeStrings: true,
    });
    this.inner = inner;
    inner.on('data', (chunk: Buffer) => {
      if (this.destroyed) return;
      let out: Buffer;
      try {
        out = this.mapOutput(chunk);
      } catch (err) {
        this.destroy(err as Error);
        return;
      }
      if (out.length > 0 && !this.push(out)) inner.pause();
    });
    inner.on('end', () => {
      if (this.destroyed) return;
      let tail: Buffer;
      try {
        tail = this.endOutput();
      } catch (err) {
        this.destroy(err as Error);
        return;
      }
      if (tail.length > 0) this.push(tail);
      this.push(null);
      const cb = this.#finalCallback;
      this.#finalCallback = undefined;
      cb?.();
    });
    inner.on('error', (err: Error) => this.destroy(this.mapError(err)));
  }

  /** Converts a piece of the inner stream's output (may throw to fail the stream). */
  protected mapOutput(chunk: Buffer): Buffer {
    return chunk;
  }
  /** Output due at the end (may throw to fail the stream). */
  protected endOutput(): Buffer {
    return EMPTY;
  }
  protected mapError(err: Error): Error {
    return err;
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (err?: Error | null) => void): void {
    if (this.inner.write(chunk)) callback();
    else this.inner.once('drain', () => callback());
  }

  override _final(callback: (err?: Error | null) => void): void {
    this.#finalCallback = callback;
    this.inner.end();
  }

  override _read(): void {
    this.inner.resume();
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    this.#finalCallback = undefined;
    this.inner.removeAllListeners('data');
    this.inner.on('error', () => {}); // late errors of a stream we have let go
    const destroy = (this.inner as { destroy?: () => void }).destroy;
    if (typeof destroy === 'function') destroy.call(this.inner);
    callback(err);
  }
}

export interface WavReaderOptions extends AudioTransformOptions {
  /**
   * Convert the sample data to this layout (format default `s16le`). Without it the data is
   * passed through as found, whatever its format.
   */
  to?: AudioDescription;
}

/** How many bytes of the stream's start are kept to read an extensible header's SubFormat. */
const HEADER_PEEK_BYTES = 512;

/**
 * WAV bytes in, sample data out. Emits `format` with the {@link WavFormat} found, before any
 * data; `format` is also readable as a property once known. With `to`, the data is converted
 * to that layout; a format that cannot be converted fails the stream with a `WavFormatError`
 * naming what was found and what is accepted. Input that is not WAV, or ends before the format
 * is known, fails it with a `ValidationError` (field `wav`).
 */
export class WavReader extends withEvents<WavReaderEvents>()(WrappedTransform) {
  /** The format found in the header; undefined until it is parsed. */
  format: WavFormat | undefined;
  /** The layout the data is converted to, or undefined when it passes through. */
  readonly target: ResolvedAudioDescription | undefined;
  #processor: AudioProcessor | undefined;
  #peek: Buffer[] = [];
  #peeked = 0;
  #bytesIn = 0;

  constructor(options: WavReaderOptions = {}) {
    const target = options.to === undefined ? undefined : resolveDescription(options.to, 'to');
    super(new (wav().Reader)() as unknown as LegacyTransform, options);
    this.target = target;
    this.inner.on('format', (raw: RawWavFormat) => {
      try {
        this.#onFormat(raw);
      } catch (err) {
        this.destroy(err as Error);
      }
    });
  }

  override _write(chunk: Buffer, encoding: BufferEncoding, callback: (err?: Error | null) => void): void {
    this.#bytesIn += chunk.length;
    if (this.format === undefined && this.#peeked < HEADER_PEEK_BYTES) {
      this.#peek.push(chunk.subarray(0, HEADER_PEEK_BYTES - this.#peeked));
      this.#peeked += Math.min(chunk.length, HEADER_PEEK_BYTES - this.#peeked);
    }
    super._write(chunk, encoding, callback);
  }

  #onFormat(raw: RawWavFormat): void {
    const header = Buffer.concat(this.#peek);
    this.#peek = [];
    const le = raw.endianness !== 'BE';
    let subFormat: number | undefined;
    // The package insists on `fmt ` right after `WAVE`, so its body starts at byte 20; an
    // extensible body has the SubFormat GUID at offset 24, its first 2 bytes the format code.
    if (raw.audioFormat === WAVE_FORMAT.EXTENSIBLE && header.length >= 20 + 26) {
      subFormat = le ? header.readUInt16LE(20 + 24) : header.readUInt16BE(20 + 24);
    }
    const code = raw.audioFormat === WAVE_FORMAT.EXTENSIBLE ? subFormat : raw.audioFormat;
    let sampleFormat: SampleFormat | undefined;
    if (code === WAVE_FORMAT.PCM && raw.bitDepth === 16) sampleFormat = le ? 's16le' : 's16be';
    else if (code === WAVE_FORMAT.IEEE_FLOAT && raw.bitDepth === 32 && le) sampleFormat = 'f32le';
    else if (code === WAVE_FORMAT.MULAW && raw.bitDepth === 8) sampleFormat = 'mulaw';
    else if (code === WAVE_FORMAT.ALAW && raw.bitDepth === 8) sampleFormat = 'alaw';
    const format: WavFormat = {
      audioFormat: raw.audioFormat,
      ...(subFormat === undefined ? {} : { subFormat }),
      channels: raw.channels,
      sampleRate: raw.sampleRate,
      bitDepth: raw.bitDepth,
      endianness: le ? 'LE' : 'BE',
      sampleFormat,
    };
    this.format = format;
    if (this.target !== undefined) {
      const t = this.target;
      const convertible =
        sampleFormat !== undefined && (format.channels === 1 || format.channels === 2) && (SUPPORTED_RATES as readonly number[]).includes(format.sampleRate);
      if (!convertible) throw new WavFormatError(format);
      const from = { format: sampleFormat!, rate: format.sampleRate, channels: format.channels };
      this.#processor = planConversion(from, t).processor;
    }
    this.emit('format', format);
  }

  protected override mapOutput(chunk: Buffer): Buffer {
    return this.#processor ? this.#processor.process(chunk) : chunk;
  }

  protected override endOutput(): Buffer {
    if (this.format === undefined) {
      throw new ValidationError('wav', 'a RIFF/WAVE stream with a complete "fmt " chunk', `${this.#bytesIn} bytes without one`);
    }
    return this.#processor ? this.#processor.flush() : EMPTY;
  }

  protected override mapError(err: Error): Error {
    return new ValidationError('wav', 'a RIFF/WAVE stream with a "fmt " chunk first', err.message, { cause: err });
  }
}

export interface WavReaderEvents {
  format: [format: WavFormat];
}

/** The formats `WavWriter` and `WavFileWriter` write. */
export type WavSampleFormat = Extract<SampleFormat, 's16le' | 'f32le' | 'mulaw' | 'alaw'>;

const WRITABLE_FORMATS: readonly WavSampleFormat[] = ['s16le', 'f32le', 'mulaw', 'alaw'];

const WRITER_FIELDS: Record<WavSampleFormat, { format: number; bitDepth: number }> = {
  s16le: { format: WAVE_FORMAT.PCM, bitDepth: 16 },
  f32le: { format: WAVE_FORMAT.IEEE_FLOAT, bitDepth: 32 },
  mulaw: { format: WAVE_FORMAT.MULAW, bitDepth: 8 },
  alaw: { format: WAVE_FORMAT.ALAW, bitDepth: 8 },
};

function writerOptions(desc: AudioDescription): WriterOptions {
  if (typeof desc !== 'object' || desc === null) {
    throw new ValidationError('format', 'an object { format?, rate, channels }', describeReceived(desc));
  }
  const format = validateSampleFormat(desc.format ?? 's16le', 'format', WRITABLE_FORMATS) as WavSampleFormat;
  if (!Number.isInteger(desc.rate) || desc.rate < 1 || desc.rate > 768000) {
    throw new ValidationError('rate', 'an integer sample rate from 1 to 768000 Hz', describeReceived(desc.rate));
  }
  if (!Number.isInteger(desc.channels) || desc.channels < 1 || desc.channels > 32) {
    throw new ValidationError('channels', 'an integer channel count from 1 to 32', describeReceived(desc.channels));
  }
  return { ...WRITER_FIELDS[format], channels: desc.channels, sampleRate: desc.rate };
}

/** Where a WAV stream's audio starts and how many bytes make a second of it. */
export interface WavDataLayout {
  /** Offset of the first byte of audio (after the `data` chunk header). */
  dataOffset: number;
  /** The `fmt ` chunk's average bytes per second. */
  byteRate: number;
}

/**
 * The layout read from the start of a WAV stream (RIFF, the chunks up to `data`), or undefined
 * when `head` is not a WAV start or does not reach the `data` chunk yet (give more bytes).
 */
export function wavDataLayout(head: Uint8Array): WavDataLayout | undefined {
  const bytes = Buffer.from(head.buffer, head.byteOffset, head.byteLength);
  if (bytes.length < 12 || bytes.toString('latin1', 0, 4) !== 'RIFF' || bytes.toString('latin1', 8, 12) !== 'WAVE') return undefined;
  let byteRate: number | undefined;
  for (let at = 12; at + 8 <= bytes.length;) {
    const id = bytes.toString('latin1', at, at + 4);
    const size = bytes.readUInt32LE(at + 4);
    if (id === 'data') return byteRate ? { dataOffset: at + 8, byteRate } : undefined;
    if (id === 'fmt ' && at + 20 <= bytes.length) byteRate = bytes.readUInt32LE(at + 16);
    at += 8 + size + (size % 2);
  }
  return undefined;
}

/** Header size the writer produces: RIFF, `fmt ` (16-byte body) and `data` headers. */
export const WAV_HEADER_BYTES = 44;

/**
 * PCM in (laid out as `desc`: `s16le`, `f32le`, `mulaw` or `alaw`), WAV bytes out: a 44-byte
 * header with placeholder sizes (data 4294967195 bytes, RIFF accordingly), then the data as
 * written. For a destination that is not seekable. After the end it emits `header` with the
 * header carrying the exact sizes, for a caller that can write it back at offset 0.
 */
export class WavWriter extends WrappedTransform {
  #headerSent = false;

  constructor(desc: AudioDescription, options: AudioTransformOptions = {}) {
    const writerOpts = writerOptions(desc);
    super(new (wav().Writer)(writerOpts) as unknown as LegacyTransform, options);
    this.inner.on('header', (header: Buffer) => this.emit('header', Buffer.from(header)));
  }

  /**
   * The package patches its header buffer in place at the end; the header handed downstream
   * is a copy, so bytes already given out never change under the consumer.
   */
  protected override mapOutput(chunk: Buffer): Buffer {
    if (this.#headerSent) return chunk;
    this.#headerSent = true;
    return Buffer.from(chunk);
  }
}

export interface WavFileWriterOptions {
  /** Bytes buffered before `write()` returns false. */
  writableHighWaterMark?: number;
}

/**
 * PCM in (laid out as `desc`), a WAV file at `path` out, with exact sizes: once all data is
 * on disk the header is rewritten in place (and a pad byte added after odd-length data, as
 * RIFF requires). `finish` (and the end of `pipeline`) comes after the file is complete and
 * closed. A file error (missing directory, disk full) fails the stream.
 */
export class WavFileWriter extends Writable {
  readonly path: string;
  /** Sample data bytes written so far (excluding the header). */
  dataBytes = 0;
  readonly #encoder: LegacyTransform;
  readonly #done: Promise<void>;
  #header: Buffer | undefined;

  constructor(path: string, desc: AudioDescription, options: WavFileWriterOptions = {}) {
    const writerOpts = writerOptions(desc);
    super({ highWaterMark: options.writableHighWaterMark, objectMode: false, decodeStrings: true });
    this.path = path;
    const encoder = new (wav().Writer)(writerOpts);
    this.#encoder = encoder as unknown as LegacyTransform;
    encoder.on('header', (header: Buffer) => {
      this.#header = header;
    });
    this.#done = pipeline(encoder, createWriteStream(path));
    this.#done.catch((err: Error) => this.destroy(err));
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (err?: Error | null) => void): void {
    this.dataBytes += chunk.length;
    if (this.#encoder.write(chunk)) callback();
    else this.#encoder.once('drain', () => callback());
  }

  override _final(callback: (err?: Error | null) => void): void {
    const pad = this.dataBytes % 2;
    if (pad) this.#encoder.write(Buffer.alloc(1));
    this.#encoder.end();
    this.#done
      .then(async () => {
        if (this.#header === undefined) await once(this.#encoder as unknown as NodeJS.EventEmitter, 'header');
        const header = Buffer.from(this.#header!);
        header.writeUInt32LE(WAV_HEADER_BYTES - 8 + this.dataBytes + pad, 4);
        header.writeUInt32LE(this.dataBytes, WAV_HEADER_BYTES - 4);
        const file = await open(this.path, 'r+');
        try {
          await file.write(header, 0, header.length, 0);
        } finally {
          await file.close();
        }
      })
      .then(
        () => callback(),
        (err: Error) => callback(err),
      );
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    // Ending the encoder lets the pipeline settle and the file close (with what was written
    // and the placeholder header); call back once the file is closed.
    this.#encoder.end();
    this.#done.then(
      () => callback(err),
      () => callback(err),
    );
  }
}
