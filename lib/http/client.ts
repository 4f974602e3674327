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
 *   client makes one `Agent` and `close()` closes it.
 * - Result audio (`getTtsResultAudio`, `translateAndSpeak`, `openSeparationTrack`) comes as a
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
import { Agent, request, type Dispatcher } from 'undici';
import { resolveApiKey, parseServiceUrl, ENV_BASE_URL, ENV_API_KEY } from '../config.js';
import { AbortError, ConfigError, ConnectionError, ProtocolError, RtTranslateError, redactSecret } from '../errors.js';
import { FlacDownloadStream } from './flac-download-stream.js';
import type { HttpRequestInfo } from './errors.js';
import { notJsonError, readServerJson, typedNetworkError, typedStatusError } from './failures.js';
import { withRetry, resolveRetry, type HeaderBag, type RetryInfo, type RetrySetting } from './retry.js';
import { announcedEmulator, resolvePolling, type CompletedTask, type PollingOptions, type PollingProfile, type TaskStatusResponse } from './tasks.js';
import * as endpoints from './endpoints.js';
import * as kit from './endpoint-kit.js';
import * as voices from './voices.js';
import * as translation from './translation.js';
import * as transcription from './transcription.js';
import * as dubbing from './dubbing.js';
import * as projects from './projects.js';
import * as library from './library.js';
import * as streams from './streams.js';
import type { TaskKind } from './task-kinds.js';
import type { DubAltFormat } from './schemas.js';
import type { ParseTranscriptOptions } from './transcript.js';
import { LanguageCatalog, type Language, type LanguageSide } from './languages.js';
import { TtsStreamReadable, type TtsStreamReadableOptions, type TtsStreamRequest } from './tts-stream-readable.js';
import type {
  RequestOptions,
  RequestSpec,
  FlacDownloadRequest,
  AudioDownloadOptions,
  TtsResultAudioOptions,
  SeparationTrack,
  SeparationTrackOptions,
  StreamResponse,
  HttpRequester,
} from './requester.js';
import type { TranslateAndSpeakOptions } from './endpoints.js';

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

function checkTimeout(value: number | undefined, field: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new ConfigError(field, `Invalid ${field}: expected a number of milliseconds >= 0 (0 disables it).`);
  }
  return value;
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
  readonly #dispatcher: Dispatcher;
  readonly #ownsDispatcher: boolean;
  readonly #connectTimeoutMs: number;
  readonly #headersTimeoutMs: number;
  readonly #bodyTimeoutMs: number;
  readonly #retry: RetrySetting | undefined;
  readonly #polling: LocalizationClientOptions['polling'];
  readonly #onRetry: LocalizationClientOptions['onRetry'];
  readonly #allowInsecure: boolean;
  /** `redact` as a function value, for the shared error mappers. */
  readonly #redactor = (text: string): string => this.redact(text);
  #closed = false;
  #emulatorVersion: string | undefined;
  /** The service's source and target language lists, fetched once and kept. */
  readonly languages: LanguageCatalog = new LanguageCatalog(this);

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
    this.#connectTimeoutMs = checkTimeout(options.connectTimeoutMs, 'connectTimeoutMs') ?? DEFAULT_CONNECT_TIMEOUT_MS;
    this.#headersTimeoutMs = checkTimeout(options.headersTimeoutMs, 'headersTimeoutMs') ?? DEFAULT_HEADERS_TIMEOUT_MS;
    this.#bodyTimeoutMs = checkTimeout(options.bodyTimeoutMs, 'bodyTimeoutMs') ?? DEFAULT_BODY_TIMEOUT_MS;
    resolveRetry(options.retry);
    this.#retry = options.retry === false ? false : options.retry === undefined ? undefined : { ...options.retry };
    this.#polling = options.polling;
    for (const profile of ['speech', 'longMedia'] as const) resolvePolling({ profile, ...options.polling?.[profile] });
    this.#onRetry = options.onRetry;
    if (options.dispatcher) {
      this.#dispatcher = options.dispatcher;
      this.#ownsDispatcher = false;
    } else {
      this.#dispatcher = new Agent({
        connect: { timeout: this.#connectTimeoutMs },
        headersTimeout: this.#headersTimeoutMs,
        bodyTimeout: this.#bodyTimeoutMs,
      });
      this.#ownsDispatcher = true;
    }
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
    if (this.#ownsDispatcher) await this.#dispatcher.close();
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
          `The API key is only sent to the service's origin (${this.baseUrl.origin}), not to ${url.origin}; ` +
            'download presigned URLs without authenticate.',
        );
      }
      headers['x-api-key'] = this.#apiKey;
    }
    const policy = resolveRetry(retry !== undefined ? retry : this.#retry);
    return new FlacDownloadStream({
      ...rest,
      url,
      headers,
      dispatcher: this.#dispatcher,
      allowInsecure: this.#allowInsecure,
      urlKind: authenticate === true ? 'api' : 'presigned',
      connectTimeoutMs: this.#connectTimeoutMs,
      headersTimeoutMs: rest.headersTimeoutMs ?? this.#headersTimeoutMs,
      bodyTimeoutMs: rest.bodyTimeoutMs ?? this.#bodyTimeoutMs,
      maxAttempts: rest.maxAttempts ?? (policy === false ? 1 : policy.retries + 1),
      retryDelayMs: rest.retryDelayMs ?? (policy === false ? 0 : policy.minDelayMs),
    });
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
      response = await request(this.urlFor(spec.path, spec.query), {
        dispatcher: this.#dispatcher,
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
    throw await this.#statusError(response, spec);
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

  /* --------------------------------------------------------------------------------------- */
  /* Endpoints (see endpoints.ts for each one's policy)                                       */

  /** `POST /translated-tts`: starts a translate-then-speak task. */
  createTranslatedTts(body: endpoints.TranslatedTtsRequest, options?: RequestOptions): Promise<endpoints.CreatedTask> {
    return endpoints.createTranslatedTts(this, body, options);
  }

  /** `GET /translated-tts/{task_id}`. */
  getTranslatedTtsStatus(taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
    return endpoints.getTranslatedTtsStatus(this, taskId, options);
  }

  /** `GET /translation-result/{run_id}`: the translated text. */
  getTranslationResult(runId: number, options?: RequestOptions): Promise<endpoints.TranslationResult> {
    return endpoints.getTranslationResult(this, runId, options);
  }

  /**
   * `GET /tts-result/{run_id}?output_type=raw_bytes` (or, with `outputType: 'file_url'`, the
   * presigned URL of `file_url`): the FLAC audio (or PCM16 with `decode`) as a resumable
   * `FlacDownloadStream`, once its first bytes arrived (errors before that reject). An expired
   * URL on the way is replaced by a fresh one without the caller's help.
   */
  getTtsResultAudio(runId: number, options?: TtsResultAudioOptions): Promise<endpoints.AudioResult<FlacDownloadStream>> {
    return endpoints.getTtsResultAudio(this, runId, options);
  }

  /** `GET /tts-result/{run_id}?output_type=file_url`: a presigned URL (`output_url` or `audio_url`). */
  getTtsResultUrl(runId: number, options?: RequestOptions): Promise<endpoints.AudioFileUrl> {
    return endpoints.getTtsResultUrl(this, runId, options);
  }

  /** `POST /project-setup`: creates a dubbing project from a media URL. */
  createProjectSetup(body: endpoints.ProjectSetupRequest, options?: RequestOptions): Promise<endpoints.CreatedTask> {
    return endpoints.createProjectSetup(this, body, options);
  }

  /** `GET /sub/{task_id}`: status of a subtitle task. */
  getSubtitleStatus(taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
    return endpoints.getSubtitleStatus(this, taskId, options);
  }

  /**
   * `POST /tts`.
   * @deprecated The service deprecates the asynchronous TTS flow; use `ttsStream()`.
   */
  createTts(body: endpoints.LegacyTtsRequest, options?: RequestOptions): Promise<endpoints.CreatedTask> {
    return endpoints.createTts(this, body, options);
  }

  /**
   * `GET /tts/{task_id}`.
   * @deprecated Part of the deprecated asynchronous TTS flow; use `ttsStream()`.
   */
  getTtsStatus(taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
    return endpoints.getTtsStatus(this, taskId, options);
  }

  /** `POST /audio-separation`: uploads audio (multipart) and starts a separation task. */
  createAudioSeparation(upload: endpoints.AudioSeparationRequest, options?: RequestOptions): Promise<endpoints.CreatedTask> {
    return endpoints.createAudioSeparation(this, upload, options);
  }

  /** `GET /audio-separation/{task_id}`. */
  getAudioSeparationStatus(taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
    return endpoints.getAudioSeparationStatus(this, taskId, options);
  }

  /** `POST /audio-separation-results` for 2 to 5 runs; keyed by integer run id. */
  getAudioSeparationResults(runIds: number[], options?: RequestOptions): Promise<Map<number, endpoints.AudioSeparationRun>> {
    return endpoints.getAudioSeparationResults(this, runIds, options);
  }

  /**
   * One track of a finished audio separation run as a resumable download whose presigned URL is
   * refreshed by looking `runIds` up again: `[runId]` alone through `GET
   * /audio-separation-result/{run_id}`, 2 to 5 runs through `POST /audio-separation-results`
   * (see `endpoints.openSeparationTrack`).
   */
  openSeparationTrack(
    runIds: number[],
    runId: number,
    track: SeparationTrack,
    options?: SeparationTrackOptions,
  ): Promise<FlacDownloadStream> {
    return endpoints.openSeparationTrack(this, runIds, runId, track, options);
  }

  /** `DELETE /delete-voice/{voice_id}`: permanent; only the key's own voices. */
  deleteVoice(voiceId: number, options?: RequestOptions): Promise<{ status: 'ok' }> {
    return endpoints.deleteVoice(this, voiceId, options);
  }

  /** `POST /tts-stream` as a Readable of audio bytes. */
  ttsStream(body: TtsStreamRequest, options?: TtsStreamReadableOptions): TtsStreamReadable {
    return new TtsStreamReadable(this, body, options);
  }

  /** Create, poll, fetch text and audio (a resumable `FlacDownloadStream`) of a translated TTS task in one call. */
  translateAndSpeak(
    body: endpoints.TranslatedTtsRequest,
    options?: TranslateAndSpeakOptions,
  ): Promise<endpoints.TranslateAndSpeakResult<FlacDownloadStream>> {
    return endpoints.translateAndSpeak(this, body, options);
  }

  /** Upload audio for separation and wait for its run. */
  separateAudio(upload: endpoints.AudioSeparationRequest, options?: endpoints.TaskCallOptions): Promise<CompletedTask> {
    return endpoints.separateAudio(this, upload, options);
  }

  /** Wait for a subtitle task (long-media polling: 15 s growing to 60 s). */
  waitForSubtitles(taskId: string, options?: endpoints.TaskCallOptions): Promise<CompletedTask> {
    return kit.waitForTaskOf(this, 'sub', taskId, options);
  }

  /** Wait for a translated TTS task (speech polling: 2 s growing to 5 s). */
  waitForTranslatedTts(taskId: string, options?: endpoints.TaskCallOptions): Promise<CompletedTask> {
    return kit.waitForTaskOf(this, 'translated-tts', taskId, options);
  }

  /**
   * Wait for a legacy TTS task.
   * @deprecated Part of the deprecated asynchronous TTS flow; use `ttsStream()`.
   */
  waitForTts(taskId: string, options?: endpoints.TaskCallOptions): Promise<CompletedTask> {
    return kit.waitForTaskOf(this, 'tts', taskId, options);
  }

  /* --------------------------------------------------------------------------------------- */
  /* Beyond the interface: the official SDK's operations (see each module for its policy)     */

  /** The status of any task kind of `task-kinds.ts` (`GET {path}/{task_id}`). */
  getTaskStatus(kind: TaskKind, taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
    return kit.getTaskStatus(this, kind, taskId, options);
  }

  /** Waits for a task of any kind, polled as its kind advises (speech or long media). */
  waitForTask(kind: TaskKind, taskId: string, options?: endpoints.TaskCallOptions): Promise<CompletedTask> {
    return kit.waitForTaskOf(this, kind, taskId, options);
  }

  /** `GET /source-languages` or `/target-languages`, fetched once per client (`languages.clear()` forgets them). */
  listLanguages(side: LanguageSide, options?: RequestOptions): Promise<Language[]> {
    return this.languages.list(side, options);
  }

  /** The numeric id of a locale tag in the service's lists (a `ValidationError` naming `tag` when it has none). */
  languageId(tag: string, side: LanguageSide = 'target', options?: RequestOptions): Promise<number> {
    return this.languages.idOf(tag, side, 'tag', options);
  }

  /** The locale tag of a numeric language id in the service's lists (a `ValidationError` naming `id` when it has none). */
  languageTag(id: number, side: LanguageSide = 'target', options?: RequestOptions): Promise<string> {
    return this.languages.tagOf(id, side, 'id', options);
  }

  /** `GET /list-voices`. */
  listVoices(options?: RequestOptions): Promise<voices.Voice[]> {
    return voices.listVoices(this, options);
  }

  /** `POST /create-custom-voice`: a voice cloned from a recording (path, Buffer, Blob or Readable, streamed). */
  createCustomVoice(request: voices.CustomVoiceRequest, options?: RequestOptions): Promise<voices.CreatedVoice> {
    return voices.createCustomVoice(this, request, options);
  }

  /** `POST /text-to-voice`. */
  createTextToVoice(request: voices.TextToVoiceRequest, options?: RequestOptions): Promise<endpoints.CreatedTask> {
    return voices.createTextToVoice(this, request, options);
  }

  getTextToVoiceStatus(taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
    return voices.getTextToVoiceStatus(this, taskId, options);
  }

  /** `GET /text-to-voice-result/{run_id}`: preview URLs. */
  getTextToVoiceResult(runId: number, options?: RequestOptions): Promise<voices.TextToVoiceResult> {
    return voices.getTextToVoiceResult(this, runId, options);
  }

  /** A voice from a description in one call: create, wait, previews. */
  textToVoice(request: voices.TextToVoiceRequest, options?: endpoints.TaskCallOptions): Promise<voices.TextToVoiceResult & { taskId: string; runId: number }> {
    return voices.textToVoice(this, request, options);
  }

  /** `POST /translate`. */
  createTranslation(request: translation.TranslationRequest, options?: RequestOptions): Promise<endpoints.CreatedTask> {
    return translation.createTranslation(this, request, options);
  }

  getTranslationStatus(taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
    return translation.getTranslationStatus(this, taskId, options);
  }

  /** `POST /translation-results`. */
  getTranslationResults(runIds: number[], options?: RequestOptions): Promise<Map<number, endpoints.TranslationResult | undefined>> {
    return translation.getTranslationResults(this, runIds, options);
  }

  /** Translates texts in one call: create, wait, the translations in order. */
  translateTexts(texts: string[], options: translation.TranslateTextsOptions): Promise<string[]> {
    return translation.translateTexts(this, texts, options);
  }

  /** `POST /translation/stream` as a Readable of text (deprecated by the service). */
  translationStream(request: translation.TranslationStreamRequest, options?: RequestOptions): Promise<Readable> {
    return translation.translationStream(this, request, options);
  }

  /** `POST /transcribe`: an upload (streamed) or a media URL. */
  createTranscription(request: transcription.TranscriptionRequest, options?: RequestOptions): Promise<endpoints.CreatedTask> {
    return transcription.createTranscription(this, request, options);
  }

  getTranscriptionStatus(taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
    return transcription.getTranscriptionStatus(this, taskId, options);
  }

  /** `GET /transcription-result/{run_id}`, with word timings on request. */
  getTranscriptionResult(runId: number, options?: transcription.TranscriptionResultOptions): Promise<transcription.TranscriptionResult> {
    return transcription.getTranscriptionResult(this, runId, options);
  }

  /** `POST /transcription-results`. */
  getTranscriptionResults(runIds: number[], options?: RequestOptions & ParseTranscriptOptions): Promise<Map<number, transcription.TranscriptionResult | undefined>> {
    return transcription.getTranscriptionResults(this, runIds, options);
  }

  /** Transcription in one call: create, wait (long media), segments. */
  transcribe(
    request: transcription.TranscriptionRequest,
    options?: endpoints.TaskCallOptions & Omit<transcription.TranscriptionResultOptions, keyof RequestOptions>,
  ): Promise<transcription.TranscriptionResult & { taskId: string; runId: number }> {
    return transcription.transcribe(this, request, options);
  }

  /** `GET /discord/dub/{task_id}`: a dubbing started from the service's Discord bot. */
  getDiscordDubStatus(taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
    return dubbing.getDiscordDubStatus(this, taskId, options);
  }

  /** `GET /twitter/dub/{task_id}`: a dubbing started from the service's X (Twitter) bot. */
  getTwitterDubStatus(taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
    return dubbing.getTwitterDubStatus(this, taskId, options);
  }

  /** `GET /discord/tts/{task_id}`: text to speech started from the service's Discord bot. */
  getDiscordTtsStatus(taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
    return dubbing.getDiscordTtsStatus(this, taskId, options);
  }

  /** `POST /dub`. */
  createDubbing(request: dubbing.DubbingRequest, options?: RequestOptions): Promise<endpoints.CreatedTask> {
    return dubbing.createDubbing(this, request, options);
  }

  getDubbingStatus(taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
    return dubbing.getDubbingStatus(this, taskId, options);
  }

  /** `GET /dub-result/{run_id}`. */
  getDubbingResult(runId: number, options?: RequestOptions & ParseTranscriptOptions): Promise<dubbing.DubbingResult> {
    return dubbing.getDubbingResult(this, runId, options);
  }

  /** `POST /dubbing-results`. */
  getDubbingResults(runIds: number[], options?: RequestOptions & ParseTranscriptOptions): Promise<Map<number, dubbing.DubbingResult | undefined>> {
    return dubbing.getDubbingResults(this, runIds, options);
  }

  /** Dubbing in one call: create, wait (15 s growing to 60 s), result. */
  dub(request: dubbing.DubbingRequest, options?: endpoints.TaskCallOptions & ParseTranscriptOptions): Promise<dubbing.DubbingResult & { taskId: string; runId: number }> {
    return dubbing.dub(this, request, options);
  }

  /** A dubbed audio or video file as a resumable download (its URL looked up again when it expires). */
  openDubbedFile(runId: number, kind: 'audio' | 'video', options?: dubbing.DubbedFileOptions): Promise<FlacDownloadStream> {
    return dubbing.openDubbedFile(this, runId, kind, options);
  }

  /** `GET /transcript/{run_id}/{language}`: a dubbing or subtitle run's transcript as SRT, WebVTT or text. */
  getRunTranscript(runId: number, language: endpoints.Language, options?: dubbing.RunTranscriptOptions): Promise<dubbing.RunTranscript> {
    return dubbing.getRunTranscript(this, runId, language, options);
  }

  /** `POST /dub-alt-format/{run_id}/{language}`: a URL at once or a task. */
  requestDubAltFormat(runId: number, language: endpoints.Language, format: DubAltFormat, options?: RequestOptions): Promise<dubbing.DubAltFormatAnswer> {
    return dubbing.requestDubAltFormat(this, runId, language, format, options);
  }

  getDubAltFormatStatus(taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
    return dubbing.getDubAltFormatStatus(this, taskId, options);
  }

  /** The converted file's URL of a finished conversion run (`GET /dub-result/{run_id}`). */
  getDubAltFormatResult(runId: number, options?: RequestOptions): Promise<string> {
    return dubbing.getDubAltFormatResult(this, runId, options);
  }

  /** Another format of a dubbed output in one call: the converted file's URL. */
  dubAltFormat(runId: number, language: endpoints.Language, format: DubAltFormat, options?: endpoints.TaskCallOptions): Promise<{ url: string; runId: number | undefined }> {
    return dubbing.dubAltFormat(this, runId, language, format, options);
  }

  /** `POST /sub`: a subtitle task (results: `getRunTranscript`). */
  createSubtitles(request: dubbing.SubtitlesRequest, options?: RequestOptions): Promise<endpoints.CreatedTask> {
    return dubbing.createSubtitles(this, request, options);
  }

  getProjectSetupStatus(taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
    return projects.getProjectSetupStatus(this, taskId, options);
  }

  /** `GET /project-setup-result/{run_id}`. */
  getProjectSetupResult(runId: number, options?: RequestOptions): Promise<projects.ProjectSetupResult | null> {
    return projects.getProjectSetupResult(this, runId, options);
  }

  /** `POST /project-setup-results`. */
  getProjectSetupResults(runIds: number[], options?: RequestOptions): Promise<Map<number, projects.ProjectSetupResult | undefined>> {
    return projects.getProjectSetupResults(this, runIds, options);
  }

  /** `POST /text-to-sound`. */
  createTextToSound(request: projects.TextToSoundRequest, options?: RequestOptions): Promise<endpoints.CreatedTask> {
    return projects.createTextToSound(this, request, options);
  }

  getTextToSoundStatus(taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
    return projects.getTextToSoundStatus(this, taskId, options);
  }

  /** `GET /text-to-sound-result/{run_id}`: WAV, as a resumable download. */
  getTextToSoundResultAudio(runId: number, options?: Omit<TtsResultAudioOptions, 'decode'>): Promise<endpoints.AudioResult<FlacDownloadStream>> {
    return projects.getTextToSoundResultAudio(this, runId, options) as Promise<endpoints.AudioResult<FlacDownloadStream>>;
  }

  /** `POST /text-to-sound-results`. */
  getTextToSoundResults(runIds: number[], options?: RequestOptions): Promise<Map<number, endpoints.AudioFileUrl | undefined>> {
    return projects.getTextToSoundResults(this, runIds, options);
  }

  /** Text to sound in one call: create, wait, the sound. */
  textToSound(request: projects.TextToSoundRequest, options?: endpoints.TaskCallOptions): Promise<endpoints.AudioResult<FlacDownloadStream> & { taskId: string; runId: number }> {
    return projects.textToSound(this, request, options) as Promise<endpoints.AudioResult<FlacDownloadStream> & { taskId: string; runId: number }>;
  }

  /** `POST /tts-results`. */
  getTtsResults(runIds: number[], options?: RequestOptions): Promise<Map<number, endpoints.AudioFileUrl | undefined>> {
    return endpoints.getTtsResults(this, runIds, options);
  }

  /** `GET /audio-separation-result/{run_id}`. */
  getAudioSeparationResult(runId: number, options?: RequestOptions): Promise<endpoints.AudioSeparationRun> {
    return endpoints.getAudioSeparationResult(this, runId, options);
  }

  /** `POST /story`: a document to narrate. */
  createStory(request: projects.StoryRequest, options?: RequestOptions): Promise<projects.StoryCreated> {
    return projects.createStory(this, request, options);
  }

  /** `POST /story-setup`: the story set up at once. */
  setupStory(request: projects.StoryRequest, options?: RequestOptions): Promise<projects.StorySetup> {
    return projects.setupStory(this, request, options);
  }

  getStoryStatus(taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
    return projects.getStoryStatus(this, taskId, options);
  }

  /** `GET /story-result/{run_id}`. */
  getStoryResult(runId: number, options?: projects.StoryResultOptions): Promise<projects.StoryResult> {
    return projects.getStoryResult(this, runId, options);
  }

  /** A story's narration as a resumable download; an expired link is refreshed. */
  openStoryAudio(runId: number, options?: AudioDownloadOptions): Promise<FlacDownloadStream> {
    return projects.openStoryAudio(this, runId, options);
  }

  /** `POST /stories-results`. */
  getStoriesResults(runIds: number[], options?: RequestOptions & ParseTranscriptOptions): Promise<Map<number, projects.StoryResult | undefined>> {
    return projects.getStoriesResults(this, runIds, options);
  }

  /** `POST /translated-story/{run_id}`. */
  createTranslatedStory(runId: number, targetLanguage: endpoints.Language, options?: RequestOptions): Promise<endpoints.CreatedTask & { message: string | undefined }> {
    return projects.createTranslatedStory(this, runId, targetLanguage, options);
  }

  getTranslatedStoryStatus(taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
    return projects.getTranslatedStoryStatus(this, taskId, options);
  }

  /** `GET /translated-story-result/{run_id}/{target_language}`. */
  getTranslatedStoryResult(runId: number, targetLanguage: endpoints.Language, options?: projects.StoryResultOptions): Promise<projects.StoryResult> {
    return projects.getTranslatedStoryResult(this, runId, targetLanguage, options);
  }

  /** `GET /dictionaries`. */
  listDictionaries(options?: RequestOptions): Promise<library.Dictionary[]> {
    return library.listDictionaries(this, options);
  }

  /** `POST /dictionaries/create-from-file`: a CSV file (streamed). */
  createDictionaryFromFile(request: library.DictionaryFromFileRequest, options?: RequestOptions): Promise<library.LooseAnswer & { dictionaryId: number | undefined }> {
    return library.createDictionaryFromFile(this, request, options);
  }

  /** `GET /dictionaries/{id}`. */
  getDictionary(dictionaryId: number, options?: RequestOptions): Promise<library.Dictionary> {
    return library.getDictionary(this, dictionaryId, options);
  }

  /** `GET /dictionaries/{id}/full-details`. */
  getDictionaryDetails(dictionaryId: number, options?: library.DictionaryDetailsOptions): Promise<library.Dictionary> {
    return library.getDictionaryDetails(this, dictionaryId, options);
  }

  /** `DELETE /dictionaries/{id}`. */
  deleteDictionary(dictionaryId: number, options?: RequestOptions): Promise<library.LooseAnswer> {
    return library.deleteDictionary(this, dictionaryId, options);
  }

  /** `POST /dictionaries/{id}/add-term`. */
  addDictionaryTerm(dictionaryId: number, translations: library.TermTranslationInput[], options?: RequestOptions): Promise<library.LooseAnswer & { termId: number | undefined }> {
    return library.addDictionaryTerm(this, dictionaryId, translations, options);
  }

  /** `PUT /dictionaries/term/{id}/{term_id}`. */
  updateDictionaryTerm(dictionaryId: number, termId: number, translations: library.TermTranslationInput[], options?: RequestOptions): Promise<library.LooseAnswer> {
    return library.updateDictionaryTerm(this, dictionaryId, termId, translations, options);
  }

  /** `DELETE /dictionaries/term/{id}/{term_id}`. */
  deleteDictionaryTerm(dictionaryId: number, termId: number, options?: RequestOptions): Promise<library.LooseAnswer> {
    return library.deleteDictionaryTerm(this, dictionaryId, termId, options);
  }

  /** `GET /folders`. */
  listFolders(options?: library.ListFoldersOptions): Promise<library.Folder[]> {
    return library.listFolders(this, options);
  }

  /** `POST /folders/create`. */
  createFolder(folderName: string, options?: RequestOptions): Promise<library.Folder> {
    return library.createFolder(this, folderName, options);
  }

  /** `POST /stream`: dubs a live stream (SRT, RTMP, HLS) to target streams. */
  createStream(request: streams.StreamRequest, options?: RequestOptions): Promise<streams.CreatedStream> {
    return streams.createStream(this, request, options);
  }

  /** `GET /stream/{id}`. */
  getStream(streamId: number, options?: RequestOptions): Promise<library.LooseAnswer> {
    return streams.getStream(this, streamId, options);
  }

  /** `PATCH /stream/{id}`: reschedules a stream or changes its settings. */
  updateStream(streamId: number, update: Parameters<typeof streams.updateStream>[2], options?: RequestOptions): Promise<library.LooseAnswer> {
    return streams.updateStream(this, streamId, update, options);
  }

  /** `DELETE /stream/{id}`. */
  deleteStream(streamId: number, options?: RequestOptions): Promise<library.LooseAnswer> {
    return streams.deleteStream(this, streamId, options);
  }

  /** `POST /stream/probe`: the tracks of a source stream. */
  probeStream(request: Parameters<typeof streams.probeStream>[1], options?: RequestOptions): Promise<streams.StreamProbe> {
    return streams.probeStream(this, request, options);
  }

  /** `POST /v1/stream`. @deprecated The service deprecates `/v1/stream`; use `createStream`. */
  createStreamV1(request: streams.StreamRequest, options?: RequestOptions): Promise<streams.CreatedStream> {
    return streams.createStreamV1(this, request, options);
  }

  /** `GET /v1/stream/{id}`. @deprecated Use `getStream`. */
  getStreamV1(streamId: number, options?: RequestOptions): Promise<library.LooseAnswer> {
    return streams.getStreamV1(this, streamId, options);
  }

  /** `GET /v1/stream/{id}/stop`: stops a stream. @deprecated Use `deleteStream`. */
  stopStreamV1(streamId: number, options?: RequestOptions): Promise<library.LooseAnswer> {
    return streams.stopStreamV1(this, streamId, options);
  }

  /** `POST /v1/stream/probe`. @deprecated Use `probeStream`. */
  probeStreamV1(request: Parameters<typeof streams.probeStreamV1>[1], options?: RequestOptions): Promise<streams.StreamProbe> {
    return streams.probeStreamV1(this, request, options);
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
