/**
 * `FlacDownloadStream`: a Readable of a FLAC result (`GET /tts-result/{run_id}` raw bytes, or a
 * presigned `file_url` / audio separation URL), as FLAC bytes or, with `decode: true`, as PCM16
 * LE interleaved decoded on the fly.
 *
 * Policies:
 * - Backpressure: the body is read only while the reader wants data; when `push()` returns
 *   false, reading the response stops (and undici pauses the socket) until `_read`.
 * - Interruptions (connection lost mid-body, stalled body, 5xx, 408, 429): the download goes on
 *   with `Range: bytes=N-` (plus `If-Range` with a strong ETag). A 206 must start exactly at N;
 *   a server that answers 200 instead is read again from the start and the first N bytes are
 *   skipped, after checking (ETag, else length) that it is the same file. Either way the reader
 *   gets every byte exactly once; a file that changed in between fails with `IntegrityError`.
 * - `maxAttempts` bounds the attempts in a row that bring no new byte; progress resets it.
 * - HTTP 403 (an expired presigned URL): `refreshUrl()` is asked for a fresh URL and the
 *   download goes on where it was; without `refreshUrl`, a `ForbiddenError` says so.
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
import { Readable } from 'node:stream';
import { request, type Dispatcher } from 'undici';
import { FlacPcmDecoder, parseFlacStreamInfo, type FlacStreamInfo } from '../audio/flac-decoder.js';
import { parseServiceUrl } from '../config.js';
import {
  AbortError,
  AuthError,
  ConnectionError,
  ForbiddenError,
  IntegrityError,
  ProtocolError,
  RtTranslateError,
  ServerError,
  TimeoutError,
  ValidationError,
  describeCause,
  redactSecret,
} from '../errors.js';

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
  /** Output PCM16 LE interleaved instead of FLAC bytes, with the STREAMINFO checks. Default false. */
  decode?: boolean;
  /** Attempts in a row without a new byte before giving up (at least 1). Default 5. */
  maxAttempts?: number;
  /** Longest wait for more body bytes, in ms; 0 disables. Default 30000. */
  bodyTimeoutMs?: number;
  /** Longest wait for response headers, in ms; 0 disables. Default 60000. */
  headersTimeoutMs?: number;
  /** First back-off between attempts, in ms, doubling up to 5 s; `Retry-After` wins. Default 250. */
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

// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
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
}

function header(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Origin and path only: presigned URLs carry their signature in the query. */
function describeUrl(url: URL): string {
  return `${url.origin}${url.pathname}`;
}

function retryAfterMs(value: string | undefined, now = Date.now()): number | undefined {
  if (!value) return undefined;
  if (/^\d+$/.test(value.trim())) return Math.min(Number(value) * 1000, MAX_RETRY_AFTER_MS);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.min(Math.max(0, date - now), MAX_RETRY_AFTER_MS);
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
  private readonly maxAttempts: number;
  private readonly bodyTimeoutMs: number;
  private readonly headersTimeoutMs: number;
  private readonly retryDelayMs: number;
  private readonly allowInsecure: boolean;
  private readonly decoder: FlacPcmDecoder | undefined;

  private received = 0;
  private total: number | undefined;
  private etag: string | undefined;
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
    const maxAttempts = options.maxAttempts ?? 5;
    if (!Number.isInteger(maxAttempts) || maxAttempts < 1) {
      throw new ValidationError('maxAttempts', 'an integer >= 1', String(maxAttempts));
    }
    this.maxAttempts = maxAttempts;
    this.bodyTimeoutMs = nonNegative(options.bodyTimeoutMs, 'bodyTimeoutMs', 30_000);
    this.headersTimeoutMs = nonNegative(options.headersTimeoutMs, 'headersTimeoutMs', 60_000);
    this.retryDelayMs = nonNegative(options.retryDelayMs, 'retryDelayMs', 250);
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
      if (outcome.reason === 'expired') {
        if (!this.#refreshUrl) throw outcome.error;
        let fresh: string | URL | void;
        try {
          fresh = await Promise.race([this.#refreshUrl(), this.stoppedPromise]);
        } catch (err) {
          throw new ForbiddenError(
            `The download URL expired and refreshUrl() failed: ${this.redact(describeCause(err))}.`,
            { cause: err, status: 403 },
          );
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
    } else if (!this.formatInfo) {
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
          if (this.etag && !this.etag.startsWith('W/')) headers['if-range'] = this.etag;
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

  private networkFailure(err: unknown, url: URL, reason: 'connect' | 'interrupted'): Retry {
    const code = (err as { code?: unknown } | null)?.code;
    const where = describeUrl(url);
    if (this.idleFired) {
      this.idleFired = false;
      return {
        reason: 'timeout',
        error: new TimeoutError(
          `No data came for ${this.bodyTimeoutMs} ms while downloading ${where} (at byte ${this.received}).`,
          this.bodyTimeoutMs,
        ),
      };
    }
    if (code === 'UND_ERR_HEADERS_TIMEOUT') {
      return {
        reason: 'timeout',
        error: new TimeoutError(`No response headers within ${this.headersTimeoutMs} ms from ${where}.`, this.headersTimeoutMs, {
          cause: err,
        }),
      };
    }
    const verb = reason === 'connect' ? 'The request for' : 'The download of';
    return {
      reason,
      error: new ConnectionError(
        `${verb} ${where} failed at byte ${this.received}: ${this.redact(describeCause(err))}.`,
        { cause: err },
      ),
    };
  }

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
    try {
      const parsed = JSON.parse(text) as { error?: unknown; detail?: unknown; message?: unknown };
      const message = parsed.error ?? parsed.message ?? parsed.detail;
      if (typeof message === 'string') return this.redact(message.slice(0, 500));
    } catch {
      // Not JSON.
    }
    return this.redact(text.slice(0, 500));
  }

  private async statusFailure(response: Dispatcher.ResponseData, url: URL): Promise<'done' | Retry> {
    const status = response.statusCode;
    const serverMessage = await this.errorText(response.body);
    const where = describeUrl(url);
    const said = serverMessage ? ` The server said: ${serverMessage}` : '';
    const options = { status, serverMessage };
    if (status === 403) {
      const hint = this.#refreshUrl
        ? ''
        : ' Pass `refreshUrl: async () => freshUrl` (for example one that asks /tts-result/{run_id}?output_type=file_url ' +
          'or /audio-separation-results again) so the download can go on where it stopped.';
      return {
        reason: 'expired',
        status,
        error: new ForbiddenError(
          `The download of ${where} was refused (HTTP 403): the presigned URL has probably expired, ` +
            `or the API key lacks permission for it.${hint}${said}`,
          options,
        ),
      };
    }
    if (status === 401) {
      throw new AuthError(`The download of ${where} was refused (HTTP 401): check the API key.${said}`, options);
    }
    if (status === 416 && this.total !== undefined && this.received >= this.total) return 'done';
    if (status === 408 || status === 429 || status >= 500) {
      const error =
        status >= 500
          ? new ServerError(`The download of ${where} failed with HTTP ${status}.${said}`, { ...options, retryable: true })
          : new RtTranslateError(status === 429 ? 'RTT_RATE_LIMIT' : 'RTT_HTTP', `The download of ${where} failed with HTTP ${status}.${said}`, {
              ...options,
              retryable: true,
            });
      const retry: Retry = { reason: 'status', status, error };
      const after = retryAfterMs(header(response.headers, 'retry-after'));
      if (after !== undefined) retry.retryAfterMs = after;
      return retry;
    }
    throw new RtTranslateError('RTT_HTTP', `The download of ${where} failed with HTTP ${status}.${said}`, options);
  }

  /** Checks that a 200/206 continues the same file at `received`; returns the bytes to skip. */
  private acceptResponse(response: Dispatcher.ResponseData, url: URL): number {
    const where = describeUrl(url);
    const etag = header(response.headers, 'etag');
    const length = header(response.headers, 'content-length');
    let total: number | undefined;
    let skip = 0;
    if (response.statusCode === 206) {
      const match = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(header(response.headers, 'content-range')?.trim() ?? '');
      if (!match || Number(match[1]) !== this.received) {
        throw new ProtocolError(
          `The server answered a request for ${where} from byte ${this.received} with a range that does not start there.`,
        );
      }
      if (match[3] !== '*') total = Number(match[3]);
    } else {
      if (length !== undefined && /^\d+$/.test(length)) total = Number(length);
      skip = this.received;
    }
    if (this.received > 0) {
      const changed =
        this.etag !== undefined && etag !== undefined
          ? this.etag !== etag
          : this.total !== undefined && total !== undefined && this.total !== total;
      if (changed) {
        throw new IntegrityError(
          `The file at ${where} changed while it was being downloaded (at byte ${this.received}); start the download again.`,
        );
      }
    }
    this.etag ??= etag;
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
    if (!this.formatInfo) this.readHeader(chunk);
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
