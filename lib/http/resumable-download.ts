/**
 * `ResumableDownload`: the bytes of one file over HTTP as a Readable that goes on across dropped
 * connections, stalled bodies, busy servers and expired URLs, handing on every byte once.
 * `FlacDownloadStream` is built on it; its module doc lists the policies as users see them.
 *
 * The decisions are pure functions: `download-resume.ts` (what to ask for, whether an answer
 * continues the file) and `download-policy.ts` (what to do after a failure, with `retry.ts`'s
 * jittered back-off). This class holds the state, as one union changed through one setter
 * (`#set`, after `@discordjs/voice`'s `AudioPlayer`): leaving a state aborts its request, clears
 * its timer, releases its body and wakes what waited in it, so `destroy()` is one transition.
 *
 * Backpressure: the body flows while `push()` accepts bytes; when it refuses, the body is paused
 * (undici stops reading the socket) until `_read`. `bodyTimeoutMs` counts only while it flows.
 * Nothing is requested before the first `_read`; `_destroy` waits for the request in flight.
 * A `'retry'` event (`DownloadRetry`) announces each further attempt.
 */
import { inspect } from 'node:util';
import { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { parseServiceUrl } from '../config.js';
import { AbortError, ProtocolError, ValidationError, describeCause, redactSecret, type RtTranslateError } from '../errors.js';
import { acceptAnswer, completeAt416, describeUrl, resumeHeaders, UNKNOWN_FILE, type FileIdentity } from './download-resume.js';
import { decideAfterFailure, type AttemptFailure, type DownloadPolicy, type RetryReason } from './download-policy.js';
import { HttpConnectionError, HttpForbiddenError, HttpTimeoutError } from './errors.js';
import { DISPATCHER_SOURCE, loadUndici, type DispatcherSourceOption } from './undici.js';
import { typedNetworkError, typedStatusError, type FailedRequest } from './failures.js';
import { headerValue, parseRetryAfter, type HeaderBag } from '../retry-after.js';
import { withEvents } from '../typed-events.js';
import { numberOption } from '../options.js';

export interface ResumableDownloadOptions {
  /** The file's address: an `https://` URL, or `http://` on loopback (see `allowInsecure`). */
  url: string | URL;
  /** Request headers, sent to the origin of `url` only (for example `x-api-key`). */
  headers?: Record<string, string>;
  /** The undici dispatcher to use (share your client's); default undici's global one. */
  dispatcher?: Dispatcher;
  /** Returns a fresh URL for the same file when the current one is refused with 403 (expired). */
  refreshUrl?: () => Promise<string | URL>;
  /**
   * What a 403 from `url` itself means: `presigned` (default), an expired presigned URL, for
   * which `refreshUrl` is asked; `api`, an address of the service's interface, where a 403 means
   * the credentials lack permission, so the download fails at once.
   */
  urlKind?: 'presigned' | 'api';
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
  /**
   * First back-off between attempts, in ms, doubling up to 5 s, each wait drawn from the upper
   * half of that (jitter); `Retry-After` (at most 60 s) wins. Default 250.
   */
  retryDelayMs?: number;
  /** Allow plain `http://` to a host that is not loopback. Default false. */
  allowInsecure?: boolean;
  /** Readable buffer size in bytes. Default 64 KiB. */
  highWaterMark?: number;
}

/** Why and how the download goes on after a failed attempt. */
export interface DownloadRetry {
  /** Attempts in a row without progress so far (1 after the first failure). */
  attempt: number;
  /** The byte of the file the next request starts from. */
  offset: number;
  reason: RetryReason;
  /** HTTP status, for 'expired' and 'status'. */
  status?: number;
  /** Wait before the next request, in ms. */
  delayMs: number;
}

type Body = Dispatcher.ResponseData['body'];

/** How an attempt ended: the file is complete, the download was destroyed, or it failed. */
type AttemptOutcome = 'done' | 'stopped' | { error: RtTranslateError; failure: AttemptFailure };

/** Where the download is. Each state owns what it lists; the setter releases it on the way out. */
export type DownloadState =
  /** Nothing requested yet: the first `_read` starts. */
  | { status: 'idle' }
  /** A request in flight, following redirects, until an answer with a body to read. */
  | { status: 'requesting'; attempt: AbortController }
  /**
   * Reading `body` (from `url`): it flows while the reader wants bytes; `timer` is the body
   * idle limit, none while paused. `settle` ends the attempt.
   */
  | { status: 'reading'; attempt: AbortController; url: URL; body: Body; timer: NodeJS.Timeout | undefined; settle: (outcome: AttemptOutcome) => void }
  /** Between attempts: deciding, asking `refreshUrl`, or backing off (`timer`); `wake` ends the wait. */
  | { status: 'between'; timer: NodeJS.Timeout | undefined; wake: (() => void) | undefined }
  | { status: 'ended' }
  /** Destroyed, by the reader or after a failure: nothing runs any more. */
  | { status: 'closed' };

interface Resolved extends DownloadPolicy {
  firstUrl: URL;
  headers: Record<string, string>;
  secrets: string[];
  dispatcher: Dispatcher | undefined;
  /** Where the dispatcher comes from when it is made on the first request (the client's own agent). */
  dispatcherSource: (() => Promise<Dispatcher>) | undefined;
  refreshUrl: (() => Promise<string | URL>) | undefined;
  bodyTimeoutMs: number;
  headersTimeoutMs: number;
  connectTimeoutMs: number;
  allowInsecure: boolean;
}

/** Where the download stands in the file: the URL in use, the bytes handed on, what identifies the file. */
interface Progress {
  url: URL;
  received: number;
  file: FileIdentity;
}

const MAX_REDIRECTS = 5;
const ERROR_BODY_LIMIT = 4096;
const BETWEEN: DownloadState = Object.freeze({ status: 'between', timer: undefined, wake: undefined });
/**
 * Why an attempt is aborted when its state is left: made once, as an abort without a reason
 * builds a DOMException (tens of microseconds) and most attempts are over by then anyway.
 */
const LEFT = new AbortError('The download left this attempt.');

/** The options checked, defaults filled in. */
function resolveOptions(options: ResumableDownloadOptions): Resolved {
  const allowInsecure = options.allowInsecure === true;
  const firstUrl = parseServiceUrl(String(options.url), 'url', 'https:', { allowInsecure });
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(options.headers ?? {})) headers[name.toLowerCase()] = value;
  delete headers.range;
  delete headers['if-range'];
  if (options.urlKind !== undefined && options.urlKind !== 'presigned' && options.urlKind !== 'api') {
    throw new ValidationError('urlKind', "'presigned' or 'api'", String(options.urlKind));
  }
  const maxAttempts = options.maxAttempts ?? 5;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1) {
    throw new ValidationError('maxAttempts', 'an integer >= 1', String(maxAttempts));
  }
  return {
    firstUrl,
    headers,
    secrets: Object.values(headers).filter((value) => value.length >= 4),
    dispatcher: options.dispatcher,
    dispatcherSource: (options as DispatcherSourceOption)[DISPATCHER_SOURCE],
    refreshUrl: options.refreshUrl,
    urlKind: options.urlKind ?? 'presigned',
    canRefresh: options.refreshUrl !== undefined,
    maxAttempts,
    bodyTimeoutMs: numberOption(options.bodyTimeoutMs, 'bodyTimeoutMs', { min: 0, fallback: 30_000 }),
    headersTimeoutMs: numberOption(options.headersTimeoutMs, 'headersTimeoutMs', { min: 0, fallback: 60_000 }),
    connectTimeoutMs: numberOption(options.connectTimeoutMs, 'connectTimeoutMs', { min: 0, fallback: 10_000 }),
    retryDelayMs: numberOption(options.retryDelayMs, 'retryDelayMs', { min: 0, fallback: 250 }),
    allowInsecure,
  };
}

function timerOf(state: DownloadState): NodeJS.Timeout | undefined {
  return state.status === 'reading' || state.status === 'between' ? state.timer : undefined;
}

function attemptOf(state: DownloadState): AbortController | undefined {
  return state.status === 'requesting' || state.status === 'reading' ? state.attempt : undefined;
}

/** Drops a body without letting its abort go unhandled. */
function discard(body: Body): void {
  body.on('error', () => undefined);
  if (!body.destroyed) body.destroy();
}

/** Up to `ERROR_BODY_LIMIT` characters of an error body, then the body is dropped. */
async function errorText(body: Body): Promise<string> {
  let text = '';
  try {
    for await (const chunk of body) {
      text += (chunk as Buffer).toString('utf8');
      if (text.length >= ERROR_BODY_LIMIT) break;
    }
  } catch {
    // The status says enough.
  }
  discard(body);
  return text;
}

/** The events of `ResumableDownload`, beside its base stream's: each event's listener arguments. */
export interface ResumableDownloadEvents {
  /** Another attempt is about to be made, after the wait it says. */
  retry: [info: DownloadRetry];
}

export class ResumableDownload extends withEvents<ResumableDownloadEvents>()(Readable) {
  readonly #o: Resolved;
  #state: DownloadState = { status: 'idle' };
  #progress: Progress;
  #running: Promise<void> | undefined;

  constructor(options: ResumableDownloadOptions) {
    super({ highWaterMark: options.highWaterMark ?? 64 * 1024 });
    this.#o = resolveOptions(options);
    this.#progress = { url: this.#o.firstUrl, received: 0, file: UNKNOWN_FILE };
  }

  /** Where the download is now. */
  get state(): DownloadState['status'] {
    return this.#state.status;
  }

  /** Bytes of the file handed on so far (each counted once, across attempts). */
  get bytesReceived(): number {
    return this.#progress.received;
  }

  /** The file's size in bytes, once an answer told it. */
  get totalBytes(): number | undefined {
    return this.#progress.file.total;
  }

  /** The URL in use, origin and path only (never the query, where presigned URLs carry their signature). */
  get address(): string {
    return describeUrl(this.#progress.url);
  }

  override _read(): void {
    const state = this.#state;
    if (state.status === 'idle') {
      this.#running = this.#run().catch((err: unknown) => {
        if (!this.#closed) this.destroy(err instanceof Error ? err : new Error(String(err)));
      });
    } else if (state.status === 'reading' && state.body.isPaused()) {
      this.#set({ ...state, timer: this.#idleTimer(state.attempt, state.url) });
      state.body.resume();
    }
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#set({ status: 'closed' });
    void (this.#running ?? Promise.resolve()).then(() => callback(error));
  }

  /** Shows where it downloads from and how far, never the headers (an API key) or the URL's query (a signature). */
  [inspect.custom](): string {
    return `ResumableDownload ${inspect(this.toJSON())}`;
  }

  toJSON(): object {
    return { url: this.address, bytesReceived: this.bytesReceived, totalBytes: this.totalBytes, state: this.state, destroyed: this.destroyed };
  }

  get #closed(): boolean {
    return this.#state.status === 'closed';
  }

  /**
   * The one way the state changes. Leaving a state aborts its request, clears its timer, ends
   * its body's attempt and wakes its wait, unless the next state carries them on. Nothing
   * leaves `closed`.
   */
  #set(next: DownloadState): void {
    const previous = this.#state;
    if (previous.status === 'closed') return;
    this.#state = next;
    const timer = timerOf(previous);
    if (timer !== undefined && timer !== timerOf(next)) clearTimeout(timer);
    const attempt = attemptOf(previous);
    if (attempt !== undefined && attempt !== attemptOf(next)) attempt.abort(LEFT);
    if (previous.status === 'reading' && (next.status !== 'reading' || next.body !== previous.body)) previous.settle('stopped');
    if (previous.status === 'between' && previous.wake && (next.status !== 'between' || next.wake !== previous.wake)) previous.wake();
  }

  async #run(): Promise<void> {
    let failures = 0;
    for (;;) {
      const before = this.#progress.received;
      const outcome = await this.#attempt();
      if (this.#closed || outcome === 'stopped') return;
      this.#set(BETWEEN);
      if (outcome === 'done') break;
      failures = this.#progress.received > before ? 1 : failures + 1;
      const decision = decideAfterFailure(outcome.failure, failures, this.#o, Math.random());
      if (decision.action === 'fail') throw outcome.error;
      if (decision.action === 'refresh' && !(await this.#refresh())) return;
      const info: DownloadRetry = { attempt: failures, offset: this.#progress.received, reason: decision.reason, delayMs: decision.delayMs };
      if (outcome.failure.kind === 'status') info.status = outcome.failure.status;
      this.emit('retry', info);
      if (decision.delayMs > 0) {
        await new Promise<void>((wake) => this.#set({ status: 'between', timer: setTimeout(wake, decision.delayMs), wake }));
      }
      if (this.#closed) return;
    }
    this.#set({ status: 'ended' });
    this.push(null);
  }

  /** Asks `refreshUrl` for a fresh URL; false when the download was destroyed meanwhile. */
  async #refresh(): Promise<boolean> {
    const refreshUrl = this.#o.refreshUrl!;
    let fresh: string | URL | undefined;
    try {
      fresh = await new Promise<string | URL | undefined>((resolve, reject) => {
        this.#set({ status: 'between', timer: undefined, wake: () => resolve(undefined) });
        refreshUrl().then(resolve, reject);
      });
    } catch (err) {
      throw new HttpForbiddenError({
        ...this.#info(this.#progress.url),
        status: 403,
        cause: err,
        explanation: `the presigned URL expired and refreshUrl() failed: ${this.#redact(describeCause(err))}.`,
      });
    }
    if (this.#closed) return false;
    this.#progress.url = parseServiceUrl(String(fresh), 'refreshUrl()', 'https:', { allowInsecure: this.#o.allowInsecure });
    return true;
  }

  /** One request from where the download stands (following redirects), and its body. */
  async #attempt(): Promise<AttemptOutcome> {
    const attempt = new AbortController();
    this.#set({ status: 'requesting', attempt });
    let url = this.#progress.url;
    for (let redirects = 0; ; redirects++) {
      const { received, file } = this.#progress;
      const headers = { ...(url.origin === this.#o.firstUrl.origin ? this.#o.headers : {}), ...resumeHeaders(received, file) };
      let response: Dispatcher.ResponseData;
      try {
        const { request } = await loadUndici();
        const dispatcher = this.#o.dispatcher ?? (await this.#o.dispatcherSource?.());
        response = await request(url, {
          method: 'GET',
          headers,
          dispatcher,
          signal: attempt.signal,
          headersTimeout: this.#o.headersTimeoutMs,
          bodyTimeout: 0,
        });
      } catch (err) {
        return this.#networkFailure(err, url, 'request');
      }
      if (this.#closed) {
        discard(response.body);
        return 'stopped';
      }
      const { statusCode } = response;
      const location = headerValue(response.headers as HeaderBag, 'location');
      if (statusCode >= 300 && statusCode < 400 && location && statusCode !== 304) {
        await response.body.dump().catch(() => undefined);
        if (redirects >= MAX_REDIRECTS) {
          throw new ProtocolError(`The download of ${this.address} was redirected more than ${MAX_REDIRECTS} times.`);
        }
        url = parseServiceUrl(new URL(location, url).href, 'redirect location', 'https:', { allowInsecure: this.#o.allowInsecure });
        continue;
      }
      if (statusCode === 200 || statusCode === 206) return this.#read(response, url, attempt);
      return this.#statusFailure(response, url);
    }
  }

  /**
   * Hands a 200 or 206 body on, from the first byte not yet received. Settles once the body
   * ended (`done`, or a failure when it ended early), failed, or the download was destroyed.
   */
  #read(response: Dispatcher.ResponseData, url: URL, attempt: AbortController): Promise<AttemptOutcome> {
    const body = response.body;
    const progress = this.#progress;
    let skip: number;
    try {
      const accepted = acceptAnswer(response.statusCode, response.headers as HeaderBag, progress.received, progress.file, describeUrl(url));
      skip = accepted.skip;
      progress.file = accepted.file;
    } catch (err) {
      discard(body);
      throw err;
    }
    return new Promise<AttemptOutcome>((resolve) => {
      const onData = (data: Buffer): void => {
        const state = this.#state;
        if (state.status !== 'reading') return;
        let chunk = data;
        if (skip > 0) {
          const n = Math.min(skip, chunk.length);
          skip -= n;
          chunk = chunk.subarray(n);
        }
        if (chunk.length > 0) {
          progress.received += chunk.length;
          if (!this.push(chunk)) {
            body.pause();
            this.#set({ ...state, timer: undefined });
            return;
          }
        }
        state.timer?.refresh();
      };
      const onEnd = (): void => {
        const { total } = progress.file;
        const early = skip > 0 || (total !== undefined && progress.received < total);
        settle(early ? this.#networkFailure(new Error('the response ended early'), url, 'body') : 'done');
      };
      const onError = (err: unknown): void => {
        const reason: unknown = attempt.signal.reason;
        // The body idle timer aborts the attempt with its `HttpTimeoutError`.
        if (reason instanceof HttpTimeoutError) settle({ error: reason, failure: { kind: 'network', during: 'body', error: reason } });
        else settle(this.#networkFailure(err, url, 'body'));
      };
      const settle = (outcome: AttemptOutcome): void => {
        body.off('data', onData).off('end', onEnd).off('error', onError);
        discard(body);
        resolve(outcome);
      };
      this.#set({ status: 'reading', attempt, url, body, timer: this.#idleTimer(attempt, url), settle });
      body.on('data', onData).on('end', onEnd).on('error', onError);
    });
  }

  /** Aborts `attempt` with an `HttpTimeoutError` when no body bytes come for `bodyTimeoutMs`. */
  #idleTimer(attempt: AbortController, url: URL): NodeJS.Timeout | undefined {
    const ms = this.#o.bodyTimeoutMs;
    if (ms <= 0) return undefined;
    return setTimeout(() => attempt.abort(new HttpTimeoutError('body', ms, this.#info(url))), ms);
  }

  /** An answer with another status than 200 or 206: a 416 that completes the file, or a failure. */
  async #statusFailure(response: Dispatcher.ResponseData, url: URL): Promise<AttemptOutcome> {
    const status = response.statusCode;
    const headers = response.headers as HeaderBag;
    const text = await errorText(response.body);
    const progress = this.#progress;
    if (status === 416) {
      const total = completeAt416(headers, progress.received, progress.file, describeUrl(url));
      if (total !== undefined) {
        progress.file = { ...progress.file, total };
        return 'done';
      }
    }
    const redirected = url.href !== progress.url.href;
    const explanation = status === 403 ? this.#forbiddenExplanation(redirected) : undefined;
    const error = typedStatusError(status, headers, text, this.#info(url), this.#redact, explanation);
    return { error, failure: { kind: 'status', status, retryAfterMs: parseRetryAfter(headers), redirected } };
  }

  /** A request or body that failed without a status, with its typed error. */
  #networkFailure(err: unknown, url: URL, during: 'request' | 'body'): AttemptOutcome {
    const info = this.#info(url);
    const limits = { connectTimeoutMs: this.#o.connectTimeoutMs, headersTimeoutMs: this.#o.headersTimeoutMs, bodyTimeoutMs: this.#o.bodyTimeoutMs };
    const error =
      typedNetworkError(err, info, limits, this.#redact) ??
      new HttpConnectionError('exchange', undefined, this.#redact(describeCause(err)), { ...info, cause: err });
    return { error, failure: { kind: 'network', during, error } };
  }

  /** What a 403 means, for the message of its `HttpForbiddenError` (undefined: the general sentence). */
  #forbiddenExplanation(redirected: boolean): string | undefined {
    if (redirected) {
      return `this address, which ${this.address} redirected to, refused the download ` + `(a presigned URL that expired, or one without access to this file).`;
    }
    if (this.#o.urlKind === 'api') return undefined;
    if (this.#o.refreshUrl) {
      return this.#progress.url === this.#o.firstUrl
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

  /** How a request is named in errors: GET and the path, never the query (a signature), and how far the download got. */
  #info(url: URL): FailedRequest {
    const info = { method: 'GET', path: url.pathname };
    const received = this.#progress.received;
    return received > 0 ? { ...info, context: `at byte ${received} of the file` } : info;
  }

  readonly #redact = (text: string): string => {
    let out = text;
    for (const secret of this.#o.secrets) out = redactSecret(out, secret);
    return out;
  };
}
