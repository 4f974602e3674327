/**
 * `LocalizationClient`: the HTTP interface of the service, with one undici dispatcher shared by
 * every request, typed errors, the retry policy of `retry.ts` and the task helper of `tasks.ts`.
 *
 * Configuration:
 * - `baseUrl` (or `RT_TRANSLATE_BASE_URL`): the base every interface path is appended to, so a
 *   base with a path prefix (`https://host/apis`) works. Plain `http://` is refused to a host
 *   that is not loopback unless `allowInsecure` is set.
 * - `apiKey` (or `RT_TRANSLATE_API_KEY`): sent in the `x-api-key` header and nowhere else. It is
 *   kept in a private field, redacted from every message, and `util.inspect(client)` and
 *   `JSON.stringify(client)` show `[redacted]`.
 * - Timeouts per request, overridable per call: `connectTimeoutMs` (default 10 s),
 *   `headersTimeoutMs` until the response headers (default 60 s; synthesis can be slow),
 *   `bodyTimeoutMs` between two pieces of a body (default 60 s).
 * - `dispatcher`: a caller's undici dispatcher; then `close()` leaves it open. Otherwise the
 *   client makes one `Agent` with its first request and `close()` closes it. undici itself is
 *   loaded with that first request (`undici.ts`), not when the library is imported.
 * - Resources: `client.dub`, `client.textToSpeech`, `client.dictionaries`, ... (see `resources.ts`,
 *   the one table they are built from); every task kind has `create`, `status`, `result`, `wait`
 *   and `run`.
 * - Result audio (`textToSpeech.result`, `translatedTts.run`, `audioSeparation.openTrack`) comes as a
 *   `FlacDownloadStream` made by `openFlacDownload`: over the same dispatcher, with the key sent
 *   to the service's own origin only, and resumed (HTTP Range, or a restart that skips what was
 *   delivered) when the connection drops, and an expired URL on the way is replaced without the
 *   caller's help (the interface path is asked again, `file_url` is looked up again, separation
 *   runs are looked up again). Its attempts follow the retry setting: `retries + 1` attempts in
 *   a row without progress, `minDelayMs` as the first back-off; `retry: false` gives one
 *   attempt, so no resume. Its failures are the same `Http*` error classes as the client's.
 */
import { inspect } from 'node:util';
import { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { resolveApiKey, parseServiceUrl, ENV_BASE_URL, ENV_API_KEY } from '../config.js';
import { AbortError, ConfigError, ConnectionError, ProtocolError, RateLimitError, RtTranslateError, redactSecret } from '../errors.js';
import { FlacDownloadStream, type FlacDownloadStreamOptions } from './flac-download-stream.js';
import { DISPATCHER_SOURCE, loadUndici, type DispatcherSourceOption, type Undici } from './undici.js';
import { HttpStatusError, type HttpRequestInfo } from './errors.js';
import { notJsonError, readServerJson, typedNetworkError, typedStatusError } from './failures.js';
import { askedDelay, withRetry, resolveRetry, type HeaderBag, type RetryInfo, type RetrySetting } from './retry.js';
import type { RateLimiter } from './rate-limiter.js';
import { numberOption } from '../options.js';
import { announcedEmulator, resolvePolling, type PollingOptions, type PollingProfile } from './tasks.js';
import { buildResources } from './resources.js';
import type {
  AudioSeparationResource,
  DictionariesResource,
  DubResource,
  FoldersResource,
  ProjectSetupResource,
  StoryResource,
  StreamsResource,
  TasksResource,
  TextToAudioResource,
  TextToSpeechResource,
  TextToVoiceResource,
  TranscriptionResource,
  TranslatedStoryResource,
  TranslatedTtsResource,
  TranslationResource,
  VoicesResource,
} from './resource-interfaces.js';
import { LanguageCatalog } from './languages.js';
import { TtsStreamReadable, type TtsStreamReadableOptions, type TtsStreamRequest } from './tts-stream-readable.js';
import type { RequestSpec, FlacDownloadRequest, FlacDownloader, StreamResponse, HttpRequester } from './requester.js';

export interface LocalizationClientOptions {
  /** Base of the HTTP interface. Default: `RT_TRANSLATE_BASE_URL`. One of the two is required. */
  baseUrl?: string;
  /** API key. Default: `RT_TRANSLATE_API_KEY`. One of the two is required. */
  apiKey?: string;
  /** Allow plain `http://` to a host that is not loopback. Default false. */
  allowInsecure?: boolean;
  /** A dispatcher to use instead of the client's own `Agent`; the caller closes it. */
  dispatcher?: Dispatcher;
  /** Time to establish a connection, ms. Default 10000 (own agent only). */
  connectTimeoutMs?: number;
  /** Time until the response headers arrive, ms. Default 60000. */
  headersTimeoutMs?: number;
  /** Longest silence between two pieces of a response body, ms. Default 60000. */
  bodyTimeoutMs?: number;
  /** Retry policy (see `retry.ts`); `false` turns retries off. Default 2 retries, 1 s to 60 s. */
  retry?: RetrySetting;
  /** Overrides of the polling guidance per profile (see `tasks.ts`). */
  polling?: Partial<Record<PollingProfile, Partial<PollingOptions>>>;
  /** Called before each retry wait (logging, metrics). Never given the key. */
  onRetry?: (info: RetryInfo & HttpRequestInfo) => void;
  /**
   * A limiter every request of the client waits on (see `rate-limiter.ts`): one 429 or 503 then
   * pauses all requests for the wait the service named. Share one between clients to share the
   * pause. Default: none (each request honours its own refusals only).
   */
  rateLimiter?: RateLimiter;
  /** Environment to read the two variables from. Default `process.env`. */
  env?: NodeJS.ProcessEnv;
}

const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
const DEFAULT_HEADERS_TIMEOUT_MS = 60_000;
const DEFAULT_BODY_TIMEOUT_MS = 60_000;
/** Error bodies are read up to this size; the rest is discarded. */
const MAX_ERROR_BODY_BYTES = 64 * 1024;
/** JSON success bodies larger than this are refused (a JSON answer here is a few KiB). */
const MAX_JSON_BODY_BYTES = 16 * 1024 * 1024;
const USER_AGENT = 'rt-translate/0.1 (+node)';

/** A timeout option: milliseconds, 0 disabling it; `ValidationError` naming the option otherwise. */
function timeoutOption(value: unknown, field: string, fallback: number): number {
  return numberOption(value, field, { min: 0, fallback, accepted: 'a number of milliseconds >= 0 (0 disables it)' });
}

async function readLimited(body: Readable, limit: number): Promise<{ buffer: Buffer; truncated: boolean }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    if (size + chunk.length > limit) {
      chunks.push(chunk.subarray(0, limit - size));
      size = limit;
      body.destroy();
      return { buffer: Buffer.concat(chunks, size), truncated: true };
    }
    chunks.push(chunk);
    size += chunk.length;
  }
  return { buffer: Buffer.concat(chunks, size), truncated: false };
}

/** The HTTP interface of the service. See the module doc for configuration. */
export class LocalizationClient implements HttpRequester {
  readonly baseUrl: URL;
  readonly #apiKey: string;
  /** The caller's dispatcher, or the client's own `Agent` once its first request made it. */
  #dispatcher: Dispatcher | undefined;
  readonly #ownsDispatcher: boolean;
  readonly #connectTimeoutMs: number;
  readonly #headersTimeoutMs: number;
  readonly #bodyTimeoutMs: number;
  readonly #retry: RetrySetting | undefined;
  readonly #polling: LocalizationClientOptions['polling'];
  readonly #onRetry: LocalizationClientOptions['onRetry'];
  readonly #rateLimiter: RateLimiter | undefined;
  readonly #allowInsecure: boolean;
  /** `redact` as a function value, for the shared error mappers. */
  readonly #redactor = (text: string): string => this.redact(text);
  #closed = false;
  #emulatorVersion: string | undefined;
  /** The service's source and target language lists, fetched once and kept. */
  readonly languages: LanguageCatalog = new LanguageCatalog(this);

  // The resources, grouped as the service's official SDK groups them (built from the one table
  // of `resources.ts`; every task kind has `create`, `status`, `result`, `wait`, `run`).
  declare readonly audioSeparation: AudioSeparationResource;
  declare readonly dictionaries: DictionariesResource;
  declare readonly dub: DubResource;
  declare readonly folders: FoldersResource;
  declare readonly projectSetup: ProjectSetupResource;
  declare readonly story: StoryResource;
  declare readonly textToAudio: TextToAudioResource;
  declare readonly textToSpeech: TextToSpeechResource;
  declare readonly textToVoice: TextToVoiceResource;
  declare readonly transcription: TranscriptionResource;
  declare readonly translatedStory: TranslatedStoryResource;
  declare readonly translatedTts: TranslatedTtsResource;
  declare readonly translation: TranslationResource;
  /** What the SDK lacks: the key's voices (list, create, delete). */
  declare readonly voices: VoicesResource;
  /** Live streams dubbed to target streams (`/stream`). */
  declare readonly streams: StreamsResource;
  /** Any task by kind (`status`, `wait`), and subtitles (`/sub`). */
  declare readonly tasks: TasksResource;

  constructor(options: LocalizationClientOptions = {}) {
    const env = options.env ?? process.env;
    const rawBase = options.baseUrl ?? env[ENV_BASE_URL];
    if (rawBase === undefined || rawBase === '') {
      throw new ConfigError('baseUrl', `No base URL: pass baseUrl or set ${ENV_BASE_URL} (for example https://client.camb.ai/apis).`);
    }
    const base = parseServiceUrl(rawBase, 'baseUrl', 'https:', { allowInsecure: options.allowInsecure });
    base.search = '';
    base.hash = '';
    this.baseUrl = base;
    this.#allowInsecure = options.allowInsecure === true;
    const key = resolveApiKey(options.apiKey, env);
    if (key === undefined) throw new ConfigError('apiKey', `No API key: pass apiKey or set ${ENV_API_KEY}.`);
    this.#apiKey = key;
    this.#connectTimeoutMs = timeoutOption(options.connectTimeoutMs, 'connectTimeoutMs', DEFAULT_CONNECT_TIMEOUT_MS);
    this.#headersTimeoutMs = timeoutOption(options.headersTimeoutMs, 'headersTimeoutMs', DEFAULT_HEADERS_TIMEOUT_MS);
    this.#bodyTimeoutMs = timeoutOption(options.bodyTimeoutMs, 'bodyTimeoutMs', DEFAULT_BODY_TIMEOUT_MS);
    resolveRetry(options.retry);
    this.#retry = options.retry === false ? false : options.retry === undefined ? undefined : { ...options.retry };
    this.#polling = options.polling;
    for (const profile of ['speech', 'longMedia'] as const) resolvePolling({ profile, ...options.polling?.[profile] });
    this.#onRetry = options.onRetry;
    this.#rateLimiter = options.rateLimiter;
    this.#dispatcher = options.dispatcher;
    this.#ownsDispatcher = !options.dispatcher;
    Object.assign(this, buildResources(this as FlacDownloader));
  }

  /** True after `close()`. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * The emulator's version once an answer of the base URL announced it (`x-rt-translate-emulator`):
   * the client then polls tasks at the pace the emulator gives. Undefined for the service.
   */
  get emulatorVersion(): string | undefined {
    return this.#emulatorVersion;
  }

  /** Closes the client's own agent (waiting for requests in flight); a caller's is left open. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#ownsDispatcher) await this.#dispatcher?.close();
  }

  /**
   * The dispatcher of a request: the caller's, or the client's own `Agent`, made on first use.
   * One made after `close()` (a request or download that was on its way) is closed at once, so
   * that request fails as it does on a closed agent.
   */
  #dispatcherOf(undici: Undici): Dispatcher {
    if (this.#dispatcher !== undefined) return this.#dispatcher;
    const agent = new undici.Agent({
      connect: { timeout: this.#connectTimeoutMs },
      headersTimeout: this.#headersTimeoutMs,
      bodyTimeout: this.#bodyTimeoutMs,
    });
    this.#dispatcher = agent;
    if (this.#closed) void agent.close();
    return agent;
  }

  redact(text: string): string {
    return redactSecret(text, this.#apiKey);
  }

  bodyError(error: unknown, spec: RequestSpec): unknown {
    return this.#networkError(error, spec);
  }

  pollingFor(profile: PollingProfile): PollingOptions {
    return resolvePolling({ profile, ...this.#polling?.[profile] });
  }

  retrySetting(): RetrySetting | undefined {
    return this.#retry === false || this.#retry === undefined ? this.#retry : { ...this.#retry };
  }

  /** The full URL of an interface path: the base URL's path, then `path`. */
  urlFor(path: string, query?: RequestSpec['query']): URL {
    const url = new URL(this.baseUrl.href);
    url.pathname = url.pathname.replace(/\/+$/, '') + (path.startsWith('/') ? path : `/${path}`);
    for (const [name, value] of Object.entries(query ?? {})) {
      if (value !== undefined) url.searchParams.set(name, String(value));
    }
    return url;
  }

  /** Sends `spec` (with retries) and parses a JSON answer. Non-2xx answers throw typed errors. */
  requestJson<T>(spec: RequestSpec): Promise<T> {
    return this.#withRetry(spec, async () => {
      const response = await this.#send(spec);
      spec.onHeaders?.(response.headers);
      const info = this.#info(spec);
      let read: { buffer: Buffer; truncated: boolean };
      try {
        read = await readLimited(response.body, MAX_JSON_BODY_BYTES);
      } catch (error) {
        throw this.#networkError(error, spec);
      }
      if (read.truncated) throw new ProtocolError(`${info.method} ${info.path} answered more than ${MAX_JSON_BODY_BYTES} bytes of JSON.`);
      const text = read.buffer.toString('utf8');
      try {
        return (text === '' ? null : readServerJson(text, this.#redactor)) as T;
      } catch (error) {
        throw notJsonError(info, response.statusCode, text, this.#redactor, error);
      }
    });
  }

  /**
   * Sends `spec` (with retries up to the response headers) and hands over the body unread. The
   * caller must consume or destroy `body`.
   */
  requestStream(spec: RequestSpec): Promise<StreamResponse> {
    return this.#withRetry(spec, () => this.#send(spec));
  }

  /**
   * A `FlacDownloadStream` of `request.url` over the client's dispatcher, with the client's
   * timeouts and attempt limits (see the module doc). With `authenticate`, the key goes to the
   * base URL's origin only (a redirect or refreshed URL elsewhere gets no header). Nothing is
   * requested until the stream is read.
   */
  openFlacDownload(request: FlacDownloadRequest): FlacDownloadStream {
    if (this.#closed) {
      throw new ConnectionError('This LocalizationClient is closed; create a new one.', { retryable: false });
    }
    const { authenticate, retry, ...rest } = request;
    const url = parseServiceUrl(String(request.url), 'url', 'https:', { allowInsecure: this.#allowInsecure });
    const headers: Record<string, string> = { 'user-agent': USER_AGENT, accept: 'audio/flac, */*' };
    if (authenticate === true) {
      if (url.origin !== this.baseUrl.origin) {
        throw new ConfigError(
          'url',
          `The API key is only sent to the service's origin (${this.baseUrl.origin}), not to ${url.origin}; ` + 'download presigned URLs without authenticate.',
        );
      }
      headers['x-api-key'] = this.#apiKey;
    }
    const policy = resolveRetry(retry !== undefined ? retry : this.#retry);
    const download: FlacDownloadStreamOptions & DispatcherSourceOption = {
      ...rest,
      url,
      headers,
      dispatcher: this.#dispatcher,
      [DISPATCHER_SOURCE]: async () => this.#dispatcherOf(await loadUndici()),
      allowInsecure: this.#allowInsecure,
      urlKind: authenticate === true ? 'api' : 'presigned',
      connectTimeoutMs: this.#connectTimeoutMs,
      headersTimeoutMs: rest.headersTimeoutMs ?? this.#headersTimeoutMs,
      bodyTimeoutMs: rest.bodyTimeoutMs ?? this.#bodyTimeoutMs,
      maxAttempts: rest.maxAttempts ?? (policy === false ? 1 : policy.retries + 1),
      retryDelayMs: rest.retryDelayMs ?? (policy === false ? 0 : policy.minDelayMs),
    };
    return new FlacDownloadStream(download);
  }

  #withRetry<T>(spec: RequestSpec, attempt: () => Promise<T>): Promise<T> {
    return withRetry(attempt, {
      kind: spec.kind,
      canRetry: spec.multipart ? () => spec.multipart!.canReopen() : undefined,
      retry: spec.retry !== undefined ? spec.retry : this.#retry,
      signal: spec.signal,
      onRetry: this.#onRetry ? (info) => this.#onRetry?.({ ...info, ...this.#info(spec) }) : undefined,
    });
  }

  #info(spec: RequestSpec): HttpRequestInfo {
    return { method: spec.method, path: this.urlFor(spec.path).pathname };
  }

  /** One attempt: sends, and throws the typed error of a non-2xx answer. */
  async #send(spec: RequestSpec): Promise<StreamResponse> {
    if (this.#closed) {
      throw new ConnectionError('This LocalizationClient is closed; create a new one.', { retryable: false });
    }
    if (spec.signal?.aborted) throw new AbortError();
    await this.#rateLimiter?.admit(spec.signal);
    const undici = await loadUndici();
    const headers: Record<string, string> = {
      'x-api-key': this.#apiKey,
      'user-agent': USER_AGENT,
      accept: spec.accept ?? 'application/json',
    };
    let body: string | Readable | undefined;
    if (spec.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(spec.json);
    } else if (spec.multipart !== undefined) {
      headers['content-type'] = spec.multipart.contentType;
      if (spec.multipart.length !== undefined) headers['content-length'] = String(spec.multipart.length);
      body = spec.multipart.open(spec.onUploadProgress);
    }
    let response: Dispatcher.ResponseData;
    try {
      response = await undici.request(this.urlFor(spec.path, spec.query), {
        dispatcher: this.#dispatcherOf(undici),
        method: spec.method,
        headers,
        body,
        signal: spec.signal,
        headersTimeout: spec.headersTimeoutMs ?? this.#headersTimeoutMs,
        bodyTimeout: spec.bodyTimeoutMs ?? this.#bodyTimeoutMs,
      });
    } catch (error) {
      if (body instanceof Readable) body.destroy();
      throw this.#networkError(error, spec);
    }
    this.#emulatorVersion ??= announcedEmulator(response.headers as HeaderBag);
    if (response.statusCode >= 200 && response.statusCode < 300) {
      return { statusCode: response.statusCode, headers: response.headers as HeaderBag, body: response.body };
    }
    const error = await this.#statusError(response, spec);
    if (error instanceof RateLimitError || (error instanceof HttpStatusError && error.unavailable)) this.#rateLimiter?.refused(askedDelay(error));
    throw error;
  }

  /** Maps an undici or socket failure to the library's error. Unknown errors pass unchanged. */
  #networkError(error: unknown, spec: RequestSpec): unknown {
    if (error instanceof RtTranslateError) return error;
    const info = this.#info(spec);
    if (spec.signal?.aborted) return new AbortError(`${info.method} ${info.path} was aborted.`, { cause: error });
    const limits = {
      connectTimeoutMs: this.#connectTimeoutMs,
      headersTimeoutMs: spec.headersTimeoutMs ?? this.#headersTimeoutMs,
      bodyTimeoutMs: spec.bodyTimeoutMs ?? this.#bodyTimeoutMs,
    };
    return typedNetworkError(error, info, limits, this.#redactor) ?? error;
  }

  async #statusError(response: Dispatcher.ResponseData, spec: RequestSpec): Promise<RtTranslateError> {
    let text = '';
    try {
      text = (await readLimited(response.body, MAX_ERROR_BODY_BYTES)).buffer.toString('utf8');
    } catch {
      // The status alone is enough to report.
    }
    return typedStatusError(response.statusCode, response.headers as HeaderBag, text, this.#info(spec), this.#redactor);
  }

  /** `POST /tts-stream` as a Readable of audio bytes. */
  ttsStream(body: TtsStreamRequest, options?: TtsStreamReadableOptions): TtsStreamReadable {
    return new TtsStreamReadable(this, body, options);
  }

  /** What `util.inspect` shows: never the key. */
  [inspect.custom](depth: number, options: object, inspectFn: typeof inspect = inspect): string {
    return `LocalizationClient ${inspectFn(this.toJSON(), options)}`;
  }

  /** What `JSON.stringify` shows: never the key. */
  toJSON(): object {
    return {
      baseUrl: this.baseUrl.href,
      apiKey: '[redacted]',
      headersTimeoutMs: this.#headersTimeoutMs,
      bodyTimeoutMs: this.#bodyTimeoutMs,
      retry: this.#retry === undefined ? 'default' : this.#retry,
      closed: this.#closed,
    };
  }
}
