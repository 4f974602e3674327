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
 */
import { inspect } from 'node:util';
import { Readable } from 'node:stream';
import { request, type Dispatcher } from 'undici';
import { FlacPcmDecoder, parseFlacStreamInfo, type FlacStreamInfo } from '../audio/flac-decoder.js';
import { parseServiceUrl } from '../config.js';
import { AbortError, IntegrityError, ProtocolError, RtTranslateError, ValidationError, describeCause, redactSecret } from '../errors.js';
import { HttpConnectionError, HttpForbiddenError, HttpTimeoutError, type HttpRequestInfo } from './errors.js';
import { typedNetworkError, typedStatusError } from './failures.js';
import { parseRetryAfter, type HeaderBag } from './retry.js';

export interface FlacDownloadStreamOptions {
  /** The FLAC's address: an `https://` URL, or `http://` on loopback (see `allowInsecure`). */
  url: string | URL;
  /** Request headers, sent to the origin of `url` only (for example `x-api-key`). */
  headers?: Record<string, string>;
  /** The undici dispatcher to use (share your client's); default undici's global one. */
  dispatcher?: Dispatcher;
  /** Aborts the download; the stream is destroyed with `AbortError`. */
  signal?: AbortSignal;
  /** Returns a fresh URL for the same file when the current one is refused with 403 (expired). */
  refreshUrl?: () => Promise<string | URL>;
  /**
   * What a 403 from `url` itself means: `presigned` (default), an expired presigned URL, for
   * which `refreshUrl` is asked; `api`, an address of the service's interface, where a 403 means
   * the credentials lack permission, so the download fails at once.
   */
  urlKind?: 'presigned' | 'api';
  /** Output PCM16 LE interleaved instead of FLAC bytes, with the STREAMINFO checks. Default false. */
  decode?: boolean;
  /**
   * `flac` (default): the file must be FLAC (its STREAMINFO is read, `'format'` fires). `any`:
   * any file (a dubbed MP4, a WAV), passed on byte for byte with the same resuming; no
   * `decode`.
   */
  content?: 'flac' | 'any';
  /** Attempts in a row without a new byte before giving up (at least 1). Default 5. */
  maxAttempts?: number;
  /** Longest wait for more body bytes, in ms; 0 disables. Default 30000. */
  bodyTimeoutMs?: number;
  /** Longest wait for response headers, in ms; 0 disables. Default 60000. */
  headersTimeoutMs?: number;
  /**
   * The connect time limit of `dispatcher`, in ms, as named in an `HttpTimeoutError` (the
   * dispatcher enforces it). Default 10000, undici's.
   */
  connectTimeoutMs?: number;
  /** First back-off between attempts, in ms, doubling up to 5 s; `Retry-After` (at most 60 s) wins. Default 250. */
  retryDelayMs?: number;
  /** Allow plain `http://` to a host that is not loopback. Default false. */
  allowInsecure?: boolean;
  /** Readable buffer size in bytes. Default 64 KiB. */
  highWaterMark?: number;
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
export interface FlacDownloadRetry {
  /** Attempts in a row without progress so far (1 after the first failure). */
  attempt: number;
  /** The byte of the FLAC file the next request starts from. */
  offset: number;
  reason: 'interrupted' | 'timeout' | 'expired' | 'status' | 'connect';
  /** HTTP status, for 'expired' and 'status'. */
  status?: number;
  /** Wait before the next request, in ms. */
  delayMs: number;
}

export interface FlacDownloadStream {
  on(event: 'format', listener: (format: FlacFormat) => void): this;
  on(event: 'retry', listener: (info: FlacDownloadRetry) => void): this;
  on(event: 'data', listener: (chunk: Buffer) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
  once(event: 'format', listener: (format: FlacFormat) => void): this;
  once(event: 'retry', listener: (info: FlacDownloadRetry) => void): this;
  once(event: string | symbol, listener: (...args: any[]) => void): this;
}

const MAX_REDIRECTS = 5;
const MAX_DELAY_MS = 5_000;
const MAX_RETRY_AFTER_MS = 60_000;
const ERROR_BODY_LIMIT = 4096;

/** An attempt that failed in a way another attempt may fix. */
interface Retry {
  reason: FlacDownloadRetry['reason'];
  error: RtTranslateError;
  status?: number;
  retryAfterMs?: number;
  /** Ask `refreshUrl` for a fresh URL before the next attempt. */
  refresh?: boolean;
}

function header(headers: HeaderBag, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Origin and path only: presigned URLs carry their signature in the query. */
function describeUrl(url: URL): string {
  return `${url.origin}${url.pathname}`;
}

/**
 * Whether `lastModified` is a strong validator by RFC 9110 8.8.2.2: the response's `Date` is at
 * least one second after it (the file was not changed again within the same second).
 */
function strongDate(lastModified: string | undefined, date: string | undefined): boolean {
  if (lastModified === undefined || date === undefined) return false;
  const modified = Date.parse(lastModified);
  const sent = Date.parse(date);
  return Number.isFinite(modified) && Number.isFinite(sent) && sent - modified >= 1000;
}

function nonNegative(value: number | undefined, field: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new ValidationError(field, 'a number of milliseconds >= 0', String(value));
  }
  return value;
}

export class FlacDownloadStream extends Readable {
  readonly #firstUrl: URL;
  #url: URL;
  readonly #userHeaders: Record<string, string>;
  readonly #secrets: string[];
  private readonly dispatcher: Dispatcher | undefined;
  private readonly signal: AbortSignal | undefined;
  readonly #refreshUrl: (() => Promise<string | URL>) | undefined;
  readonly #urlKind: 'presigned' | 'api';
  private readonly maxAttempts: number;
  private readonly bodyTimeoutMs: number;
  private readonly headersTimeoutMs: number;
  private readonly connectTimeoutMs: number;
  private readonly retryDelayMs: number;
  private readonly allowInsecure: boolean;
  private readonly decoder: FlacPcmDecoder | undefined;
  /** Read STREAMINFO from the first bytes (a FLAC file). */
  private readonly readsHeader: boolean;

  private received = 0;
  private total: number | undefined;
  private etag: string | undefined;
  private lastModified: string | undefined;
  /** `lastModified` may go into `If-Range` (RFC 9110 13.1.5). */
  private lastModifiedStrong = false;
  private header: Buffer[] = [];
  private formatInfo: FlacFormat | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private readonly stoppedPromise: Promise<void>;
  private resolveStopped!: () => void;
  private attempt: AbortController | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  private idleFired = false;
  private readWaiter: (() => void) | undefined;
  private readonly onAbort = (): void => {
    this.destroy(new AbortError('The FLAC download was aborted.', { cause: this.signal?.reason }));
  };

  constructor(options: FlacDownloadStreamOptions) {
    super({ highWaterMark: options.highWaterMark ?? 64 * 1024 });
    this.allowInsecure = options.allowInsecure === true;
    this.#firstUrl = parseServiceUrl(String(options.url), 'url', 'https:', { allowInsecure: this.allowInsecure });
    this.#url = this.#firstUrl;
    this.#userHeaders = {};
    for (const [name, value] of Object.entries(options.headers ?? {})) this.#userHeaders[name.toLowerCase()] = value;
    delete this.#userHeaders.range;
    delete this.#userHeaders['if-range'];
    this.#secrets = Object.values(this.#userHeaders).filter((value) => value.length >= 4);
    this.dispatcher = options.dispatcher;
    this.signal = options.signal;
    this.#refreshUrl = options.refreshUrl;
    if (options.urlKind !== undefined && options.urlKind !== 'presigned' && options.urlKind !== 'api') {
      throw new ValidationError('urlKind', "'presigned' or 'api'", String(options.urlKind));
    }
    this.#urlKind = options.urlKind ?? 'presigned';
    const maxAttempts = options.maxAttempts ?? 5;
    if (!Number.isInteger(maxAttempts) || maxAttempts < 1) {
      throw new ValidationError('maxAttempts', 'an integer >= 1', String(maxAttempts));
    }
    this.maxAttempts = maxAttempts;
    this.bodyTimeoutMs = nonNegative(options.bodyTimeoutMs, 'bodyTimeoutMs', 30_000);
    this.headersTimeoutMs = nonNegative(options.headersTimeoutMs, 'headersTimeoutMs', 60_000);
    this.connectTimeoutMs = nonNegative(options.connectTimeoutMs, 'connectTimeoutMs', 10_000);
    this.retryDelayMs = nonNegative(options.retryDelayMs, 'retryDelayMs', 250);
    if (options.content !== undefined && options.content !== 'flac' && options.content !== 'any') {
      throw new ValidationError('content', "'flac' or 'any'", String(options.content));
    }
    if (options.content === 'any' && options.decode) throw new ValidationError('decode', "false with content 'any' (only FLAC is decoded)", 'true');
    this.readsHeader = options.content !== 'any';
    this.decoder = options.decode ? new FlacPcmDecoder() : undefined;
    this.stoppedPromise = new Promise((resolve) => {
      this.resolveStopped = resolve;
    });
    if (this.signal?.aborted) {
      process.nextTick(this.onAbort);
    } else {
      this.signal?.addEventListener('abort', this.onAbort, { once: true });
    }
  }

  /** STREAMINFO's format, once the first 42 bytes arrived (also announced by `'format'`). */
  get format(): FlacFormat | undefined {
    return this.formatInfo;
  }

  /** Bytes of the FLAC file received so far (each byte counted once, across attempts). */
  get bytesReceived(): number {
    return this.received;
  }

  /** The FLAC file's size in bytes, once a response told it. */
  get totalBytes(): number | undefined {
    return this.total;
  }

  override _read(): void {
    const waiter = this.readWaiter;
    this.readWaiter = undefined;
    if (waiter) {
      waiter();
    } else if (!this.running) {
      this.running = this.run().catch((err: unknown) => {
        if (!this.stopped) this.destroy(err instanceof Error ? err : new Error(String(err)));
      });
    }
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.stopped = true;
    this.resolveStopped();
    this.signal?.removeEventListener('abort', this.onAbort);
    this.clearIdle();
    this.attempt?.abort();
    const waiter = this.readWaiter;
    this.readWaiter = undefined;
    waiter?.();
    const running = this.running ?? Promise.resolve();
    running
      .then(() => this.decoder?.close())
      .then(
        () => callback(error),
        () => callback(error),
      );
  }

  /** Shows where it downloads from and how far, never the headers (an API key) or the URL's query (a signature). */
  [inspect.custom](): string {
    return `FlacDownloadStream ${inspect(this.toJSON())}`;
  }

  toJSON(): object {
    return {
      url: `${this.#url.origin}${this.#url.pathname}`,
      bytesReceived: this.received,
      totalBytes: this.total,
      decode: this.decoder !== undefined,
      destroyed: this.destroyed,
    };
  }

  private redact(text: string): string {
    let out = text;
    for (const secret of this.#secrets) out = redactSecret(out, secret);
    return out;
  }

  private async run(): Promise<void> {
    let failures = 0;
    for (;;) {
      const before = this.received;
      const outcome = await this.fetchOnce();
      if (this.stopped) return;
      if (outcome === 'done') break;
      failures = this.received > before ? 1 : failures + 1;
      if (failures >= this.maxAttempts) throw outcome.error;
      if (outcome.refresh && this.#refreshUrl) {
        let fresh: string | URL | void;
        try {
          fresh = await Promise.race([this.#refreshUrl(), this.stoppedPromise]);
        } catch (err) {
          throw new HttpForbiddenError({
            ...this.info(this.#url),
            status: 403,
            cause: err,
            explanation: `the presigned URL expired and refreshUrl() failed: ${this.redact(describeCause(err))}.`,
          });
        }
        if (this.stopped) return;
        this.#url = parseServiceUrl(String(fresh), 'refreshUrl()', 'https:', { allowInsecure: this.allowInsecure });
      }
      const backoff = outcome.reason === 'expired' ? 0 : Math.min(this.retryDelayMs * 2 ** (failures - 1), MAX_DELAY_MS);
      const delayMs = outcome.retryAfterMs ?? backoff;
      const info: FlacDownloadRetry = { attempt: failures, offset: this.received, reason: outcome.reason, delayMs };
      if (outcome.status !== undefined) info.status = outcome.status;
      this.emit('retry', info);
      await this.sleep(delayMs);
      if (this.stopped) return;
    }
    if (this.decoder) {
      const pcm = await this.decoder.end();
      if (this.stopped) return;
      if (pcm.length > 0) this.push(pcm);
      this.decoder.verify();
    } else if (!this.formatInfo && this.readsHeader) {
      throw new ProtocolError(`The download of ${describeUrl(this.#url)} ended before a complete FLAC header.`);
    }
    this.push(null);
  }

  private sleep(ms: number): Promise<void> {
    if (ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      void this.stoppedPromise.then(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** One request (following redirects): streams what it can, says whether to go on. */
  private async fetchOnce(): Promise<'done' | Retry> {
    const controller = new AbortController();
    this.attempt = controller;
    try {
      let url = this.#url;
      for (let redirects = 0; ; redirects++) {
        const headers: Record<string, string> = url.origin === this.#firstUrl.origin ? { ...this.#userHeaders } : {};
        if (this.received > 0) {
          headers.range = `bytes=${this.received}-`;
          const validator = this.ifRange();
          if (validator !== undefined) headers['if-range'] = validator;
        }
        let response: Dispatcher.ResponseData;
        try {
          response = await request(url, {
            method: 'GET',
            headers,
            dispatcher: this.dispatcher,
            signal: controller.signal,
            headersTimeout: this.headersTimeoutMs,
            bodyTimeout: 0,
          });
        } catch (err) {
          return this.networkFailure(err, url, 'connect');
        }
        const { statusCode } = response;
        const location = header(response.headers, 'location');
        if (statusCode >= 300 && statusCode < 400 && location && statusCode !== 304) {
          await response.body.dump().catch(() => undefined);
          if (redirects >= MAX_REDIRECTS) {
            throw new ProtocolError(`The download of ${describeUrl(this.#url)} was redirected more than ${MAX_REDIRECTS} times.`);
          }
          url = parseServiceUrl(new URL(location, url).href, 'redirect location', 'https:', { allowInsecure: this.allowInsecure });
          continue;
        }
        if (statusCode === 200 || statusCode === 206) return await this.readBody(response, url, controller);
        return await this.statusFailure(response, url);
      }
    } finally {
      this.clearIdle();
      if (this.attempt === controller) this.attempt = undefined;
    }
  }

  /**
   * `If-Range` for a resumed request (RFC 9110 13.1.5): a strong ETag; with no ETag at all, a
   * `Last-Modified` date that is a strong validator; otherwise none (a weak ETag must not be
   * sent, and a date must not be sent when an ETag exists).
   */
  private ifRange(): string | undefined {
    if (this.etag !== undefined) return this.etag.startsWith('W/') ? undefined : this.etag;
    return this.lastModifiedStrong ? this.lastModified : undefined;
  }

  private readonly redactor = (text: string): string => this.redact(text);

  /** How a request is named in errors: GET and the path, never the query (a signature), and how far the download got. */
  private info(url: URL): HttpRequestInfo & { context?: string } {
    const info = { method: 'GET', path: url.pathname };
    return this.received > 0 ? { ...info, context: `at byte ${this.received} of the file` } : info;
  }

  /**
   * The typed error of a request or body that failed without a status, as a `Retry`; thrown
   * when another attempt cannot help (a TLS/certificate failure).
   */
  private networkFailure(err: unknown, url: URL, reason: 'connect' | 'interrupted'): Retry {
    const info = this.info(url);
    if (this.idleFired) {
      this.idleFired = false;
      return { reason: 'timeout', error: new HttpTimeoutError('body', this.bodyTimeoutMs, { ...info, cause: err }) };
    }
    const limits = { connectTimeoutMs: this.connectTimeoutMs, headersTimeoutMs: this.headersTimeoutMs, bodyTimeoutMs: this.bodyTimeoutMs };
    const error =
      typedNetworkError(err, info, limits, this.redactor) ??
      new HttpConnectionError('exchange', undefined, this.redact(describeCause(err)), { ...info, cause: err });
    if (!error.retryable && !(error instanceof AbortError)) throw error;
    return { reason: error instanceof HttpTimeoutError ? 'timeout' : reason, error };
  }

  /** Up to `ERROR_BODY_LIMIT` characters of an error body, then the body is dropped. */
  private async errorText(body: Dispatcher.ResponseData['body']): Promise<string> {
    let text = '';
    try {
      for await (const chunk of body) {
        text += (chunk as Buffer).toString('utf8');
        if (text.length >= ERROR_BODY_LIMIT) break;
      }
    } catch {
      // The status says enough.
    }
    body.on('error', () => undefined);
    body.destroy();
    return text;
  }

  /** What a 403 from `url` means, for the message of its `HttpForbiddenError`. */
  private forbiddenExplanation(url: URL, redirected: boolean): string | undefined {
    if (redirected) {
      return (
        `this address, which ${describeUrl(this.#url)} redirected to, refused the download ` +
        `(a presigned URL that expired, or one without access to this file).`
      );
    }
    if (this.#urlKind === 'api') return undefined;
    if (this.#refreshUrl) {
      return this.#url === this.#firstUrl
        ? 'the presigned URL was refused (expired, or without access to this file).'
        : 'the presigned URL was refused although it came fresh from refreshUrl() (it does not grant access to this file).';
    }
    return (
      'the presigned URL has probably expired (or does not grant access to this file). ' +
      'Give FlacDownloadStream (or LocalizationClient.openFlacDownload) a refreshUrl that returns a fresh URL ' +
      'for the same file, or download through LocalizationClient.getTtsResultAudio or openSeparationTrack, ' +
      'which get fresh URLs themselves.'
    );
  }

  private async statusFailure(response: Dispatcher.ResponseData, url: URL): Promise<'done' | Retry> {
    const status = response.statusCode;
    const headers = response.headers as HeaderBag;
    const text = await this.errorText(response.body);
    const info = this.info(url);
    if (status === 416 && this.rangeEnded(headers, url)) return 'done';
    if (status === 403) {
      const redirected = url.href !== this.#url.href;
      const error = typedStatusError(status, headers, text, info, this.redactor, this.forbiddenExplanation(url, redirected));
      // A storage URL the first one redirected to: asking the first one again redirects anew.
      if (redirected) return { reason: 'expired', status, error };
      if (this.#urlKind === 'api' || !this.#refreshUrl) throw error;
      return { reason: 'expired', status, error, refresh: true };
    }
    const error = typedStatusError(status, headers, text, info, this.redactor);
    if (status === 408 || status === 429 || status >= 500) {
      const retry: Retry = { reason: 'status', status, error };
      const asked = parseRetryAfter(headers);
      if (asked !== undefined) retry.retryAfterMs = Math.min(Math.max(0, asked), MAX_RETRY_AFTER_MS);
      return retry;
    }
    throw error;
  }

  /**
   * For a 416: true when `Content-Range: bytes * /N` (or the size known before) says the file has
   * exactly the bytes already received, so the download is complete. A size that differs from
   * one seen before means the file changed (`IntegrityError`).
   */
  private rangeEnded(headers: HeaderBag, url: URL): boolean {
    const match = /^bytes \*\/(\d+)$/.exec(header(headers, 'content-range')?.trim() ?? '');
    const size = match ? Number(match[1]) : undefined;
    if (size !== undefined && this.total !== undefined && size !== this.total) {
      throw new IntegrityError(
        `The file at ${describeUrl(url)} changed while it was being downloaded (its size went from ${this.total} to ${size} bytes); start the download again.`,
      );
    }
    const known = size ?? this.total;
    if (known === undefined || this.received === 0 || this.received !== known) return false;
    this.total = known;
    return true;
  }

  /**
   * Checks that a 200/206 continues the same file at `received` (same ETag, `Last-Modified` and
   * size, where both responses name them); returns the bytes to skip: all `received` of a 200,
   * and of a 206 that starts before `received` the part before it.
   */
  private acceptResponse(response: Dispatcher.ResponseData, url: URL): number {
    const where = describeUrl(url);
    const headers = response.headers as HeaderBag;
    const etag = header(headers, 'etag');
    const lastModified = header(headers, 'last-modified');
    const length = header(headers, 'content-length');
    let total: number | undefined;
    let skip: number;
    if (response.statusCode === 206) {
      const match = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(header(headers, 'content-range')?.trim() ?? '');
      if (!match) {
        throw new ProtocolError(`The server answered a request for ${where} from byte ${this.received} with 206 but no valid Content-Range.`);
      }
      const start = Number(match[1]);
      if (start > this.received) {
        throw new ProtocolError(
          `The server answered a request for ${where} from byte ${this.received} with a range that starts later, at byte ${start}: ` +
            `${start - this.received} bytes would be missing.`,
        );
      }
      skip = this.received - start;
      if (match[3] !== '*') total = Number(match[3]);
    } else {
      if (length !== undefined && /^\d+$/.test(length)) total = Number(length);
      skip = this.received;
    }
    if (this.received > 0) {
      const differs = (before: string | number | undefined, now: string | number | undefined): boolean =>
        before !== undefined && now !== undefined && before !== now;
      const changed =
        differs(this.etag, etag) ||
        differs(this.total, total) ||
        (this.etag === undefined && etag === undefined && differs(this.lastModified, lastModified));
      if (changed) {
        throw new IntegrityError(
          `The file at ${where} changed while it was being downloaded (at byte ${this.received}); start the download again.`,
        );
      }
    }
    if (this.etag === undefined && this.lastModified === undefined) {
      this.etag = etag;
      this.lastModified = lastModified;
      this.lastModifiedStrong = strongDate(lastModified, header(headers, 'date'));
    }
    this.total ??= total;
    return skip;
  }

  /**
   * Streams one response body into the reader: each chunk pauses the body until it has been
   * handed on (decoded, pushed) and the reader wants more. Settles once the body is done, the
   * attempt failed in a way worth retrying (a `Retry`), or with a final error.
   */
  private readBody(response: Dispatcher.ResponseData, url: URL, controller: AbortController): Promise<'done' | Retry> {
    const body = response.body;
    let skip: number;
    try {
      skip = this.acceptResponse(response, url);
    } catch (err) {
      body.on('error', () => undefined);
      body.destroy();
      throw err;
    }
    return new Promise<'done' | Retry>((resolve, reject) => {
      let busy = false;
      let ended = false;
      let failure: unknown;
      let settled = false;
      const settle = (outcome: 'done' | Retry | Error, isError = false): void => {
        if (settled) return;
        settled = true;
        this.clearIdle();
        body.off('data', onData);
        body.off('end', onEnd);
        body.off('error', onError);
        // A body dropped before its end reports an abort: keep it from going unhandled.
        body.on('error', () => undefined);
        if (!body.destroyed) body.destroy();
        if (isError) reject(outcome as Error);
        else resolve(outcome as 'done' | Retry);
      };
      const conclude = (): void => {
        if (this.stopped) return settle('done');
        if (failure !== undefined) return settle(this.networkFailure(failure, url, 'interrupted'));
        if (ended) {
          if (skip > 0 || (this.total !== undefined && this.received < this.total)) {
            return settle(this.networkFailure(new Error('the response ended early'), url, 'interrupted'));
          }
          return settle('done');
        }
        body.resume();
        this.armIdle(controller);
      };
      const onData = (data: Buffer): void => {
        this.clearIdle();
        let chunk = data;
        if (skip > 0) {
          const n = Math.min(skip, chunk.length);
          skip -= n;
          chunk = chunk.subarray(n);
          if (chunk.length === 0) return this.armIdle(controller);
        }
        busy = true;
        body.pause();
        this.deliver(chunk).then(
          () => {
            busy = false;
            conclude();
          },
          (err: unknown) => settle(err instanceof Error ? err : new Error(String(err)), true),
        );
      };
      const onEnd = (): void => {
        ended = true;
        if (!busy) conclude();
      };
      const onError = (err: unknown): void => {
        failure = err;
        if (!busy) conclude();
      };
      body.on('data', onData);
      body.on('end', onEnd);
      body.on('error', onError);
      this.armIdle(controller);
    });
  }

  private armIdle(controller: AbortController): void {
    this.clearIdle();
    if (this.bodyTimeoutMs <= 0) return;
    this.idleTimer = setTimeout(() => {
      this.idleTimer = undefined;
      this.idleFired = true;
      controller.abort();
    }, this.bodyTimeoutMs);
  }

  private clearIdle(): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
  }

  /** Hands new FLAC bytes on (decoded or not) and waits while the reader is full. */
  private async deliver(chunk: Buffer): Promise<void> {
    this.received += chunk.length;
    if (!this.formatInfo && this.readsHeader) this.readHeader(chunk);
    let out: Buffer = chunk;
    if (this.decoder) {
      out = await this.decoder.decode(chunk);
      if (this.stopped) return;
    }
    if (out.length > 0 && !this.push(out)) {
      await new Promise<void>((resolve) => {
        this.readWaiter = resolve;
      });
    }
  }

  private readHeader(chunk: Buffer): void {
    this.header.push(chunk.subarray(0, 42));
    const info: FlacStreamInfo | undefined = parseFlacStreamInfo(
      this.header.length === 1 ? this.header[0]! : Buffer.concat(this.header),
    );
    if (!info) return;
    this.header = [];
    this.formatInfo = {
      sampleRate: info.sampleRate,
      channels: info.channels,
      bitsPerSample: info.bitsPerSample,
      totalSamples: info.totalSamples,
      md5: info.md5,
    };
    this.emit('format', this.formatInfo);
  }
}
