/**
 * `FlacDownloadStream`: a Readable of a FLAC result (`GET /tts-result/{run_id}` raw bytes, or a
 * presigned `file_url` / audio separation URL), as FLAC bytes or, with `decode: true`, as PCM16
 * LE interleaved decoded on the fly; with `content: 'any'`, any file byte for byte.
 *
 * The body is read only while the reader wants it. An interrupted download resumes with `Range`
 * and `If-Range` (strong ETag, or a `Last-Modified` that is a strong validator), each byte given
 * exactly once and a changed file failing with `IntegrityError`; waits follow `Retry-After`;
 * `maxAttempts` bounds the attempts in a row without progress. A 403 is an expired URL to
 * refresh (`urlKind: 'presigned'`, `refreshUrl`) or a refusal (`urlKind: 'api'`). `headers` go
 * only to the first URL's origin. With `decode`, STREAMINFO's sample count and MD5 are checked
 * at the end. The policies in full: docs/http.md ("`FlacDownloadStream`").
 *
 * Three layers, composed with `pipeline`: `ResumableDownload` (the bytes, resumed across
 * failures), `HeaderTap` (STREAMINFO, read as the bytes pass) and `FlacDecodeStream` (with
 * `decode`). This class keeps the stream callbacks and the wiring.
 */
import { inspect } from 'node:util';
import { Readable, finished, pipeline } from 'node:stream';
import { FLAC_STREAMINFO_END, parseFlacStreamInfo } from '../audio/flac-decoder.js';
import { FlacDecodeStream } from '../audio/flac-stream.js';
import { AbortError, ProtocolError, ValidationError } from '../errors.js';
import { HeaderTap } from './header-tap.js';
import { ResumableDownload, type DownloadRetry, type ResumableDownloadOptions } from './resumable-download.js';
import { withEvents } from '../typed-events.js';

export interface FlacDownloadStreamOptions extends ResumableDownloadOptions {
  /** Aborts the download; the stream is destroyed with `AbortError`. */
  signal?: AbortSignal;
  /** Output PCM16 LE interleaved instead of FLAC bytes, with the STREAMINFO checks. Default false. */
  decode?: boolean;
  /**
   * `flac` (default): the file must be FLAC (its STREAMINFO is read, `'format'` fires). `any`:
   * any file (a dubbed MP4, a WAV), passed on byte for byte with the same resuming; no
   * `decode`.
   */
  content?: 'flac' | 'any';
}

/** The audio format, from STREAMINFO. */
export interface FlacFormat {
  sampleRate: number;
  channels: number;
  /** Bits per sample of the FLAC (the decoded output is always 16 bits). */
  bitsPerSample: number;
  /** Samples per channel; 0 when the encoder did not record it. */
  totalSamples: number;
  /** MD5 of the unencoded audio, 32 hex digits; all zeros when not recorded. */
  md5: string;
}

/** Why and how the download goes on after a failed attempt. */
export type FlacDownloadRetry = DownloadRetry;

/** The events of `FlacDownloadStream`, beside its base stream's: each event's listener arguments. */
export interface FlacDownloadStreamEvents {
  /** STREAMINFO was read: the audio's format. */
  format: [format: FlacFormat];
  /** Another attempt is about to be made, after the wait it says. */
  retry: [info: FlacDownloadRetry];
}

/** STREAMINFO's format from the first bytes (see `parseFlacStreamInfo`). */
function readFormat(head: Buffer): FlacFormat | undefined {
  const info = parseFlacStreamInfo(head);
  if (!info) return undefined;
  const { sampleRate, channels, bitsPerSample, totalSamples, md5 } = info;
  return { sampleRate, channels, bitsPerSample, totalSamples, md5 };
}

function closed(stream: Readable): Promise<void> {
  return stream.closed ? Promise.resolve() : new Promise((resolve) => stream.once('close', () => resolve()));
}

export class FlacDownloadStream extends withEvents<FlacDownloadStreamEvents>()(Readable) {
  readonly #bytes: ResumableDownload;
  readonly #tap: HeaderTap<FlacFormat> | undefined;
  readonly #decoder: FlacDecodeStream | undefined;
  /** The last layer, whose output this stream hands on. */
  readonly #output: Readable;
  readonly #signal: AbortSignal | undefined;
  /** The layers were joined (on the first `_read`: nothing is requested before). */
  #started = false;
  readonly #onAbort = (): void => {
    this.destroy(new AbortError('The FLAC download was aborted.', { cause: this.#signal?.reason }));
  };

  constructor(options: FlacDownloadStreamOptions) {
    const { signal, decode, content, ...download } = options;
    const highWaterMark = options.highWaterMark ?? 64 * 1024;
    super({ highWaterMark });
    this.#bytes = new ResumableDownload({ ...download, highWaterMark });
    if (content !== undefined && content !== 'flac' && content !== 'any') {
      throw new ValidationError('content', "'flac' or 'any'", String(content));
    }
    if (content === 'any' && decode) throw new ValidationError('decode', "false with content 'any' (only FLAC is decoded)", 'true');
    if (content !== 'any') {
      this.#tap = new HeaderTap({
        size: FLAC_STREAMINFO_END,
        parse: readFormat,
        highWaterMark,
        // Decoding, the decoder names a stream that ends before its header.
        incomplete: decode ? undefined : () => new ProtocolError(`The download of ${this.#bytes.address} ended before a complete FLAC header.`),
        onHeader: (format) => this.emit('format', format),
      });
    }
    this.#decoder = decode ? new FlacDecodeStream({ readableHighWaterMark: highWaterMark, writableHighWaterMark: highWaterMark }) : undefined;
    this.#output = this.#decoder ?? this.#tap ?? this.#bytes;
    this.#bytes.on('retry', (info) => this.emit('retry', info));
    this.#signal = signal;
    if (signal?.aborted) {
      process.nextTick(this.#onAbort);
    } else {
      signal?.addEventListener('abort', this.#onAbort, { once: true });
    }
  }

  /** STREAMINFO's format, once the first 42 bytes arrived (also announced by `'format'`). */
  get format(): FlacFormat | undefined {
    return this.#tap?.header;
  }

  /** Bytes of the FLAC file received so far (each byte counted once, across attempts). */
  get bytesReceived(): number {
    return this.#bytes.bytesReceived;
  }

  /** The FLAC file's size in bytes, once a response told it. */
  get totalBytes(): number | undefined {
    return this.#bytes.totalBytes;
  }

  override _read(): void {
    if (!this.#started) this.#start();
    else this.#output.resume();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#signal?.removeEventListener('abort', this.#onAbort);
    const layers = this.#layers();
    for (const layer of layers) layer.destroy();
    void Promise.all(layers.map(closed)).then(() => callback(error));
  }

  /** Shows where it downloads from and how far, never the headers (an API key) or the URL's query (a signature). */
  [inspect.custom](): string {
    return `FlacDownloadStream ${inspect(this.toJSON())}`;
  }

  toJSON(): object {
    return {
      url: this.#bytes.address,
      bytesReceived: this.bytesReceived,
      totalBytes: this.totalBytes,
      decode: this.#decoder !== undefined,
      destroyed: this.destroyed,
    };
  }

  #layers(): Readable[] {
    return [this.#bytes, this.#tap, this.#decoder].filter((layer): layer is NonNullable<typeof layer> => layer !== undefined);
  }

  /** Joins the layers and passes the last one's output on, pausing it while this stream is full. */
  #start(): void {
    this.#started = true;
    const layers = this.#layers();
    const output = this.#output;
    const fail = (error: Error | null | undefined): void => {
      if (error) this.destroy(error);
    };
    output.on('data', (chunk: Buffer) => {
      if (!this.push(chunk)) output.pause();
    });
    output.once('end', () => this.push(null));
    if (layers.length === 1) finished(output, fail);
    else pipeline(layers as [Readable, ...NodeJS.ReadWriteStream[]], fail);
  }
}
