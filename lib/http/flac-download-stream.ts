/**
 * `FlacDownloadStream`: a Readable of a FLAC result (`GET /tts-result/{run_id}` raw bytes, or a
 * presigned `file_url` / audio separation URL), as FLAC bytes or, with `decode: true`, as PCM16
 * LE interleaved decoded on the fly; with `content: 'any'`, any file (a dubbed MP4, a WAV).
 *
 * Three layers, composed with `pipeline`: `ResumableDownload` (the bytes, resumed across
 * failures), `HeaderTap` (STREAMINFO, read as the bytes pass) and `FlacDecodeStream` (with
 * `decode`). This class keeps the stream callbacks and the wiring.
 *
 * Policies:
 * - Backpressure: the body is read only while the reader wants data; when `push()` returns
 *   false, reading the response stops (and undici pauses the socket) until `_read`.
 * - Interruptions (connection lost mid-body, stalled body, 5xx, 408, 429): the download goes on
 *   with `Range: bytes=N-`, plus `If-Range` so that a file that changed is sent whole instead
 *   of spliced: the ETag when it is strong, else (no ETag at all) the `Last-Modified` date when
 *   it is a strong validator by RFC 9110 8.8.2.2, that is when the response's `Date` is at
 *   least one second later. A 206 may start at N or before it (block-aligned ranges; the bytes
 *   before N are skipped), never after it. A server that answers 200 instead is read again from
 *   the start and the first N bytes are skipped. Either way the response must be the same file
 *   (ETag, `Last-Modified`, length) and the reader gets every byte exactly once; a file that
 *   changed in between fails with `IntegrityError`. A 416 whose `Content-Range: bytes * /N`
 *   says the file has exactly the N bytes already received ends the download successfully.
 * - The wait after 408, 429 and 5xx is the server's (`Retry-After` in seconds, fractions
 *   included, or as a date; `X-RateLimit-Reset`), at most 60 s; otherwise an exponential
 *   back-off from `retryDelayMs`, at most 5 s, with jitter (`retry.ts`'s `backoffDelay`).
 * - `maxAttempts` bounds the attempts in a row that bring no new byte; progress resets it.
 *   Failures that another attempt cannot fix (a TLS/certificate failure, 401, 404, ...) end the
 *   download at once.
 * - Errors are the HTTP client's classes (`HttpStatusError`, `HttpForbiddenError`,
 *   `ServiceValidationError`, `RateLimitError`, `HttpConnectionError`, `HttpTlsError`,
 *   `HttpTimeoutError`, ...), with `method` GET and the URL's path, whether the failure came
 *   before the first byte or in the middle of the download.
 * - HTTP 403: from a URL that `url` redirected to (a storage URL that expired), the download
 *   starts again from `url`, which redirects anew. From `url` itself, by `urlKind`:
 *   `presigned` (default), an expired presigned URL: `refreshUrl()` is asked for a fresh one and
 *   the download goes on where it was; without `refreshUrl` it fails with `HttpForbiddenError`
 *   saying so. `api` (an interface address such as `/tts-result/{run_id}`): the key lacks
 *   permission; it fails at once.
 * - `headers` (for example `x-api-key` for `/tts-result`) go only to the origin of `url`: a
 *   redirect or refreshed URL on another origin (a storage host) gets none of them. No header
 *   value and no URL query (presigned signatures) ever appears in an error message.
 * - `decode: true`: a `'format'` event carries STREAMINFO (it is emitted in both modes); at the
 *   end the decoded sample count and the MD5 of the decoded audio are checked against STREAMINFO
 *   and a mismatch destroys the stream with `IntegrityError` once the last audio has been
 *   pushed (audio still buffered in the stream at that moment is dropped; use `pipeline` so
 *   the failure reaches you). The MD5 check is skipped when STREAMINFO's MD5 is
 *   all zeros, which the format uses for "not computed"; the sample count check when the total
 *   is 0 ("unknown").
 * - `bodyTimeoutMs`: the longest wait for the next body bytes (time spent waiting for the reader
 *   does not count); `headersTimeoutMs`: the longest wait for response headers.
 * - `destroy()` and the `signal` abort the request in flight; `_destroy` waits for it and for
 *   the decoder to be released.
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
