/**
 * Every endpoint of the HTTP interface as a typed function over an `HttpRequester` (the
 * `LocalizationClient` exposes each as a method). Requests are in the wire form (snake_case,
 * like the service's documentation), validated before sending; answers are returned as
 * camelCase objects with the raw body kept in `raw`.
 *
 * Which requests create paid work (`kind: 'create'`, see `retry.ts`): `POST /translated-tts`,
 * `/project-setup`, `/tts`, `/audio-separation`, `/tts-stream`. `DELETE /delete-voice` is a
 * deletion (`kind: 'delete'`), retried under the same rule. Everything else is a read.
 *
 * Result audio (`/tts-result` raw bytes, separated tracks) is a `FlacDownloadStream` when the
 * requester can open one (`openFlacDownload`, as `LocalizationClient` does): an interrupted
 * download resumes, and an expired separation URL is refreshed.
 */
import { Readable } from 'node:stream';
import { FormData } from 'undici';
import { AbortError, ProtocolError, ValidationError } from '../errors.js';
import type {
  AudioDownloadOptions,
  FlacDownloader,
  FlacDownloadRequest,
  HttpRequester,
  RequestOptions,
  RequestSpec,
  SeparationTrack,
  SeparationTrackOptions,
  TranslateAndSpeakOptions,
  TtsResultAudioOptions,
} from './client.js';
import type { FlacDownloadStream } from './flac-download-stream.js';
import { parseTaskStatus, runTask, waitForTask, type CompletedTask, type TaskStatusResponse, type WaitOptions } from './tasks.js';
import {
  DEFAULT_VOICE_ID,
  audioSeparationResultsSchema,
  legacyTtsSchema,
  projectSetupSchema,
  runIdParam,
  taskIdParam,
  translatedTtsSchema,
  validate,
  voiceIdParam,
  warnOnce,
  type OutputType,
} from './validation.js';

type Language = string | number;

/** `POST /translated-tts`. Languages are locale tags (`en-us`); numeric ids are deprecated. */
export interface TranslatedTtsRequest {
  text: string;
  /** Default 147320. */
  voice_id?: number;
  source_language: Language;
  target_language: Language;
  /** 3 to 255 characters. */
  project_name?: string | null;
  /** 3 to 5000 characters. */
  project_description?: string | null;
  /** Speaker age in years. */
  age?: number | null;
  /** 1 casual, 2 formal. */
  formality?: 1 | 2 | null;
  gender?: 0 | 1 | 2 | 9 | null;
  /** At least one dictionary id when given. */
  chosen_dictionaries?: number[] | null;
}

/** `POST /project-setup`. */
export interface ProjectSetupRequest {
  /** Absolute http(s) URL of the media. */
  media_url: string;
  source_language: Language;
  target_languages: Language[];
  project_name?: string | null;
  project_description?: string | null;
  /** 1 or 2 zero-based track indices (MXF only). */
  selected_audio_tracks?: number[] | null;
  add_output_as_an_audio_track?: boolean | null;
  chosen_dictionaries?: number[] | null;
  /** At least 1. */
  folder_id?: number | null;
}

/**
 * `POST /tts`.
 * @deprecated The service deprecates the asynchronous TTS flow; use `TtsStreamReadable`
 * (`POST /tts-stream`).
 */
export interface LegacyTtsRequest {
  text: string;
  voice_id?: number;
  language: Language;
  project_name?: string | null;
  project_description?: string | null;
  gender?: 0 | 1 | 2 | 9;
  age?: unknown;
}

/** The answer of a creation endpoint. */
export interface CreatedTask {
  taskId: string;
  /** Some creation answers carry a run id already; usually absent or null. */
  runId: number | null;
  raw: Record<string, unknown>;
}

export interface TranslationResult {
  translatedText: string;
  raw: Record<string, unknown>;
}

/**
 * `GET /tts-result/{run_id}?output_type=raw_bytes`: FLAC bytes as they arrive. `audio` is a
 * `FlacDownloadStream` when the requester opens resumable downloads (the client does).
 */
export interface AudioResult<A extends Readable = Readable> {
  audio: A;
  /** `audio/flac`; with `decode`, `audio/pcm;encoding=s16le;rate=R;channels=C`. */
  contentType: string | undefined;
  /**
   * Bytes `audio` will deliver, when known: the FLAC file's `Content-Length`, or with `decode`
   * the PCM size STREAMINFO announces.
   */
  contentLength: number | undefined;
}

/** `GET /tts-result/{run_id}?output_type=file_url`: a presigned URL that expires. */
export interface AudioFileUrl {
  url: string;
  raw: Record<string, unknown>;
}

/** One run of `POST /audio-separation-results`. Every field but `runId` may be absent. */
export interface AudioSeparationRun {
  runId: number;
  /** Per-run status, when the service reports one. */
  status: string | undefined;
  /** Per-run error, when the service reports one. */
  error: string | undefined;
  foregroundAudioUrl: string | undefined;
  backgroundAudioUrl: string | undefined;
  /** Both URLs present. */
  ready: boolean;
  raw: Record<string, unknown>;
}

/** An audio file for `POST /audio-separation` (WAV, MP3, FLAC or AAC). */
export interface AudioUpload {
  data: Blob | Uint8Array;
  /** File name sent in the multipart part. Default `audio`. */
  filename?: string;
  /** Default from the name's extension, else `application/octet-stream`. */
  contentType?: string;
  /** Name of the multipart field. Default `media_file`. */
  fieldName?: string;
}

export interface TaskCallOptions extends RequestOptions, Omit<WaitOptions, 'signal'> {}

function asObject(value: unknown, what: string): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ProtocolError(`${what} answered ${value === null ? 'null' : typeof value} where a JSON object was expected.`);
  }
  return value as Record<string, unknown>;
}

function created(raw: unknown, what: string): CreatedTask {
  const body = asObject(raw, what);
  const id = body.task_id;
  if ((typeof id !== 'string' || id === '') && typeof id !== 'number') {
    throw new ProtocolError(`${what} answered without a task_id.`);
  }
  const runId = body.run_id;
  return { taskId: String(id), runId: typeof runId === 'number' ? runId : null, raw: body };
}

function taskPath(prefix: string, taskId: string): string {
  validate(taskIdParam, taskId, ['task_id']);
  return `${prefix}/${encodeURIComponent(taskId)}`;
}

function runPath(prefix: string, runId: number): string {
  validate(runIdParam, runId, ['run_id']);
  return `${prefix}/${runId}`;
}

function request(options: RequestOptions = {}): RequestOptions {
  const { signal, headersTimeoutMs, bodyTimeoutMs, retry } = options;
  return { signal, headersTimeoutMs, bodyTimeoutMs, retry };
}

/* ----------------------------------------------------------------------------------------- */
/* Translated text-to-speech                                                                 */

export async function createTranslatedTts(client: HttpRequester, body: TranslatedTtsRequest, options?: RequestOptions): Promise<CreatedTask> {
  const json = validate<Record<string, unknown>>(translatedTtsSchema, { voice_id: DEFAULT_VOICE_ID, ...body });
  const raw = await client.requestJson<unknown>({ method: 'POST', path: '/translated-tts', json, kind: 'create', ...request(options) });
  return created(raw, 'POST /translated-tts');
}

export async function getTranslatedTtsStatus(client: HttpRequester, taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
  const raw = await client.requestJson<unknown>({ method: 'GET', path: taskPath('/translated-tts', taskId), kind: 'read', ...request(options) });
  return parseTaskStatus(taskId, raw);
}

export async function getTranslationResult(client: HttpRequester, runId: number, options?: RequestOptions): Promise<TranslationResult> {
  const raw = asObject(
    await client.requestJson<unknown>({ method: 'GET', path: runPath('/translation-result', runId), kind: 'read', ...request(options) }),
    'GET /translation-result',
  );
  if (typeof raw.translated_text !== 'string') throw new ProtocolError(`The translation result of run ${runId} has no translated_text.`);
  return { translatedText: raw.translated_text, raw };
}

/* ----------------------------------------------------------------------------------------- */
/* TTS results                                                                               */

/**
 * The audio of a finished run (FLAC, or PCM16 with `decode`). Consume or destroy `audio`.
 *
 * With a requester that opens resumable downloads, `audio` is a `FlacDownloadStream` and the
 * promise resolves once its first bytes (the FLAC header) arrived, so a run without a result
 * rejects with the typed error of its status (`HttpStatusError` 404, `HttpForbiddenError`, ...);
 * later failures destroy the stream with errors of the same classes. An interrupted download
 * resumes where it stopped.
 *
 * `outputType` (see `TtsResultAudioOptions`): `raw_bytes` (default) downloads
 * `/tts-result/{run_id}` with the key; a presigned storage URL it redirects to that expires is
 * replaced by asking `/tts-result/{run_id}` again. `file_url` looks the presigned URL up with
 * `getTtsResultUrl` and downloads it without the key; when it expires, `getTtsResultUrl` is
 * asked for a fresh one and the download goes on where it stopped.
 */
export function getTtsResultAudio(client: FlacDownloader, runId: number, options?: TtsResultAudioOptions): Promise<AudioResult<FlacDownloadStream>>;
export function getTtsResultAudio(client: HttpRequester, runId: number, options?: TtsResultAudioOptions): Promise<AudioResult>;
export async function getTtsResultAudio(client: HttpRequester, runId: number, options: TtsResultAudioOptions = {}): Promise<AudioResult> {
  const path = runPath('/tts-result', runId);
  const outputType = options.outputType ?? 'raw_bytes';
  if (outputType !== 'raw_bytes' && outputType !== 'file_url') {
    throw new ValidationError('outputType', "'raw_bytes' or 'file_url'", String(outputType));
  }
  if (outputType === 'file_url') {
    const req = request(options);
    const first = await getTtsResultUrl(client, runId, req);
    const fresh = async (): Promise<string> => (await getTtsResultUrl(client, runId, req)).url;
    if (client.openFlacDownload) {
      const audio = client.openFlacDownload({ url: first.url, refreshUrl: fresh, ...downloadOptions(options) });
      await firstBytes(audio);
      return describeDownload(audio, options.decode === true);
    }
    throw new ValidationError('outputType', "'raw_bytes' with a requester that cannot open downloads (no openFlacDownload)", 'file_url');
  }
  const query = { output_type: 'raw_bytes' satisfies OutputType };
  if (client.openFlacDownload) {
    const url = client.urlFor(path, query);
    const audio = client.openFlacDownload({ url, authenticate: true, ...downloadOptions(options) });
    await firstBytes(audio);
    return describeDownload(audio, options.decode === true);
  }
  const spec: RequestSpec = {
    method: 'GET',
    path,
    query,
    accept: 'audio/flac, */*',
    kind: 'read',
    ...request(options),
  };
  const response = await client.requestStream(spec);
  const type = response.headers['content-type'];
  const length = Number(response.headers['content-length']);
  return {
    audio: mapBodyErrors(response.body, (error) => client.bodyError(error, spec)),
    contentType: Array.isArray(type) ? type[0] : type,
    contentLength: Number.isSafeInteger(length) && length >= 0 ? length : undefined,
  };
}

function downloadOptions(options: AudioDownloadOptions): Omit<FlacDownloadRequest, 'url'> {
  const { signal, headersTimeoutMs, bodyTimeoutMs, retry, decode, maxAttempts, retryDelayMs } = options;
  return { signal, headersTimeoutMs, bodyTimeoutMs, retry, decode, maxAttempts, retryDelayMs };
}

function describeDownload(audio: FlacDownloadStream, decode: boolean): AudioResult<FlacDownloadStream> {
  const format = audio.format;
  if (!decode) return { audio, contentType: 'audio/flac', contentLength: audio.totalBytes };
  return {
    audio,
    contentType: format ? `audio/pcm;encoding=s16le;rate=${format.sampleRate};channels=${format.channels}` : undefined,
    contentLength: format && format.totalSamples > 0 ? format.totalSamples * format.channels * 2 : undefined,
  };
}

/**
 * Starts `stream` and waits until its FLAC header arrived. A failure before that rejects with
 * the stream's error (the stream is destroyed by then).
 */
function firstBytes(stream: FlacDownloadStream): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const done = (error?: unknown): void => {
      stream.off('format', onFormat);
      stream.off('error', onError);
      stream.off('close', onClose);
      if (error === undefined) resolve();
      else reject(error);
    };
    const onFormat = (): void => done();
    const onError = (error: Error): void => done(error);
    const onClose = (): void => done(new AbortError('The download was closed before its audio began.'));
    stream.on('format', onFormat);
    stream.on('error', onError);
    stream.on('close', onClose);
    stream.read(0);
  });
}

/** URL field names seen for `file_url` answers, in order of preference. */
const URL_FIELDS = ['output_url', 'audio_url', 'file_url', 'url'] as const;

/**
 * The body as a Readable whose failures are the library's errors (`HttpTimeoutError` for a
 * stalled body, `HttpConnectionError` for a cut one). Reads pull from the body, so backpressure
 * reaches the socket; destroying the result destroys the body.
 */
export function mapBodyErrors(body: Readable, mapError: (error: unknown) => unknown): Readable {
  async function* chunks(): AsyncGenerator<Buffer> {
    try {
      for await (const chunk of body as AsyncIterable<Buffer>) yield chunk;
    } catch (error) {
      throw mapError(error);
    }
  }
  return Readable.from(chunks(), { objectMode: false });
}

/** A presigned URL of a finished run's audio. Accepts `output_url` or `audio_url`. */
export async function getTtsResultUrl(client: HttpRequester, runId: number, options?: RequestOptions): Promise<AudioFileUrl> {
  const raw = asObject(
    await client.requestJson<unknown>({
      method: 'GET',
      path: runPath('/tts-result', runId),
      query: { output_type: 'file_url' satisfies OutputType },
      kind: 'read',
      ...request(options),
    }),
    'GET /tts-result',
  );
  return { url: pickFileUrl(raw, runId), raw };
}

/** The URL of a `file_url` answer, whichever field it is in. */
export function pickFileUrl(raw: Record<string, unknown>, runId: number): string {
  for (const field of URL_FIELDS) {
    const value = raw[field];
    if (typeof value === 'string' && value !== '') return value;
  }
  throw new ProtocolError(`The file_url answer for run ${runId} has none of ${URL_FIELDS.join(', ')}.`);
}

/* ----------------------------------------------------------------------------------------- */
/* Project setup, subtitles                                                                  */

export async function createProjectSetup(client: HttpRequester, body: ProjectSetupRequest, options?: RequestOptions): Promise<CreatedTask> {
  const json = validate<Record<string, unknown>>(projectSetupSchema, body);
  const raw = await client.requestJson<unknown>({ method: 'POST', path: '/project-setup', json, kind: 'create', ...request(options) });
  return created(raw, 'POST /project-setup');
}

/** `GET /sub/{task_id}`: status of a subtitle task. Poll it with the `longMedia` profile. */
export async function getSubtitleStatus(client: HttpRequester, taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
  const raw = await client.requestJson<unknown>({ method: 'GET', path: taskPath('/sub', taskId), kind: 'read', ...request(options) });
  return parseTaskStatus(taskId, raw);
}

/* ----------------------------------------------------------------------------------------- */
/* Legacy TTS                                                                                */

const LEGACY_TTS_WARNING = 'RTT_DEP_ASYNC_TTS';

function warnLegacyTts(): void {
  warnOnce(
    LEGACY_TTS_WARNING,
    'The asynchronous POST /tts flow is deprecated by the service; use TtsStreamReadable (POST /tts-stream).',
  );
}

/**
 * `POST /tts`.
 * @deprecated The service deprecates the asynchronous TTS flow; use `TtsStreamReadable`.
 * Emits one `DeprecationWarning` (code `RTT_DEP_ASYNC_TTS`) per process.
 */
export async function createTts(client: HttpRequester, body: LegacyTtsRequest, options?: RequestOptions): Promise<CreatedTask> {
  warnLegacyTts();
  const json = validate<Record<string, unknown>>(legacyTtsSchema, { voice_id: DEFAULT_VOICE_ID, ...body });
  const raw = await client.requestJson<unknown>({ method: 'POST', path: '/tts', json, kind: 'create', ...request(options) });
  return created(raw, 'POST /tts');
}

/**
 * `GET /tts/{task_id}`.
 * @deprecated Part of the deprecated asynchronous TTS flow; use `TtsStreamReadable`.
 */
export async function getTtsStatus(client: HttpRequester, taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
  warnLegacyTts();
  const raw = await client.requestJson<unknown>({ method: 'GET', path: taskPath('/tts', taskId), kind: 'read', ...request(options) });
  return parseTaskStatus(taskId, raw);
}

/* ----------------------------------------------------------------------------------------- */
/* Audio separation                                                                          */

const AUDIO_TYPES: Record<string, string> = {
  wav: 'audio/wav',
  mp3: 'audio/mpeg',
  flac: 'audio/flac',
  aac: 'audio/aac',
  m4a: 'audio/mp4',
};

/** `POST /audio-separation`: uploads an audio file (multipart). */
export async function createAudioSeparation(client: HttpRequester, upload: AudioUpload, options?: RequestOptions): Promise<CreatedTask> {
  if (upload === null || typeof upload !== 'object' || !(upload.data instanceof Blob || upload.data instanceof Uint8Array)) {
    throw new ValidationError('data', 'a Blob, Buffer or Uint8Array of audio (WAV, MP3, FLAC or AAC)', typeof upload?.data);
  }
  const size = upload.data instanceof Blob ? upload.data.size : upload.data.byteLength;
  if (size === 0) throw new ValidationError('data', 'a non-empty audio file', '0 bytes');
  const filename = upload.filename ?? 'audio';
  const ext = /\.([a-z0-9]+)$/i.exec(filename)?.[1]?.toLowerCase() ?? '';
  const type = upload.contentType ?? AUDIO_TYPES[ext] ?? 'application/octet-stream';
  const blob = upload.data instanceof Blob ? upload.data : new Blob([upload.data], { type });
  const form = new FormData();
  form.append(upload.fieldName ?? 'media_file', blob, filename);
  const raw = await client.requestJson<unknown>({ method: 'POST', path: '/audio-separation', form, kind: 'create', ...request(options) });
  return created(raw, 'POST /audio-separation');
}

export async function getAudioSeparationStatus(client: HttpRequester, taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
  const raw = await client.requestJson<unknown>({ method: 'GET', path: taskPath('/audio-separation', taskId), kind: 'read', ...request(options) });
  return parseTaskStatus(taskId, raw);
}

function optionalString(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/** Reads the bulk answer: keys become integers; absent or extra per-run fields are tolerated. */
export function parseAudioSeparationResults(raw: unknown): Map<number, AudioSeparationRun> {
  const body = asObject(raw, 'POST /audio-separation-results');
  const runs = new Map<number, AudioSeparationRun>();
  for (const [key, value] of Object.entries(body)) {
    const entry = value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
    const fromKey = /^\d+$/.test(key.trim()) ? Number(key.trim()) : undefined;
    const runId = fromKey ?? (typeof entry.run_id === 'number' ? entry.run_id : undefined);
    if (runId === undefined) continue;
    const foreground = optionalString(entry.foreground_audio_url);
    const background = optionalString(entry.background_audio_url);
    runs.set(runId, {
      runId,
      status: optionalString(entry.status),
      error: optionalString(entry.error) ?? optionalString(entry.message),
      foregroundAudioUrl: foreground,
      backgroundAudioUrl: background,
      ready: foreground !== undefined && background !== undefined,
      raw: entry,
    });
  }
  return runs;
}

/** `POST /audio-separation-results` for 2 to 5 distinct run ids. */
export async function getAudioSeparationResults(
  client: HttpRequester,
  runIds: number[],
  options?: RequestOptions,
): Promise<Map<number, AudioSeparationRun>> {
  const json = validate<Record<string, unknown>>(audioSeparationResultsSchema, { run_ids: runIds });
  // A bulk lookup changes nothing: it is retried like a read.
  const raw = await client.requestJson<unknown>({ method: 'POST', path: '/audio-separation-results', json, kind: 'read', ...request(options) });
  return parseAudioSeparationResults(raw);
}

/** The presigned URL of `track` of `runId` in a fresh lookup of `runIds`, or a clear error. */
async function separationTrackUrl(
  client: HttpRequester,
  runIds: number[],
  runId: number,
  track: SeparationTrack,
  options: RequestOptions,
): Promise<string> {
  const run = (await getAudioSeparationResults(client, runIds, options)).get(runId);
  const url = track === 'foreground' ? run?.foregroundAudioUrl : run?.backgroundAudioUrl;
  if (url !== undefined) return url;
  const state =
    run === undefined
      ? 'is missing from the answer'
      : `has no ${track} track (status ${run.status ?? 'not given'}${run.error ? `: ${run.error}` : ''})`;
  throw new ProtocolError(`Audio separation run ${runId} ${state}.`, { serverMessage: run?.error });
}

/**
 * One track of a finished audio separation run, as a resumable `FlacDownloadStream` (FLAC, or
 * PCM16 with `decode`) that resolves once the FLAC header arrived.
 *
 * The track's URL is presigned (no API key is sent with it) and expires. When it is refused
 * with 403, the stream asks `POST /audio-separation-results` for `runIds` again (the bulk
 * lookup takes 2 to 5 runs, so pass the batch `runId` was looked up in, `runId` included) and
 * goes on from where it stopped. `options.url` skips the first lookup when the URL is known.
 */
export async function openSeparationTrack(
  client: FlacDownloader,
  runIds: number[],
  runId: number,
  track: SeparationTrack,
  options: SeparationTrackOptions = {},
): Promise<FlacDownloadStream> {
  validate(runIdParam, runId, ['run_id']);
  if (track !== 'foreground' && track !== 'background') throw new ValidationError('track', "'foreground' or 'background'", String(track));
  if (!Array.isArray(runIds) || !runIds.includes(runId)) {
    const received = Array.isArray(runIds) ? `[${runIds.join(', ')}]` : typeof runIds;
    throw new ValidationError('runIds', `the lookup batch of 2 to 5 run ids that includes run ${runId}`, received);
  }
  validate(audioSeparationResultsSchema, { run_ids: runIds });
  const req = request(options);
  const url = options.url ?? (await separationTrackUrl(client, runIds, runId, track, req));
  const audio = client.openFlacDownload({
    url,
    refreshUrl: () => separationTrackUrl(client, runIds, runId, track, req),
    ...downloadOptions(options),
  });
  await firstBytes(audio);
  return audio;
}

/* ----------------------------------------------------------------------------------------- */
/* Voices                                                                                    */

/** `DELETE /delete-voice/{voice_id}`: permanent. 403 (`HttpForbiddenError`) for a voice the key does not own. */
export async function deleteVoice(client: HttpRequester, voiceId: number, options?: RequestOptions): Promise<{ status: 'ok' }> {
  validate(voiceIdParam, voiceId, ['voice_id']);
  // A deletion: retried only where the service surely did not act (a repeat after a lost
  // answer would be refused for a voice that was in fact deleted).
  const raw = asObject(
    await client.requestJson<unknown>({ method: 'DELETE', path: `/delete-voice/${voiceId}`, kind: 'delete', ...request(options) }),
    'DELETE /delete-voice',
  );
  if (raw.status !== 'ok') throw new ProtocolError(`DELETE /delete-voice/${voiceId} answered status ${JSON.stringify(raw.status)} instead of "ok".`);
  return { status: 'ok' };
}

/* ----------------------------------------------------------------------------------------- */
/* One-call conveniences                                                                     */

function waitOptions(client: HttpRequester, options: TaskCallOptions, profile: 'speech' | 'longMedia'): WaitOptions {
  const base = client.pollingFor(options.profile ?? profile);
  return {
    ...base,
    initialIntervalMs: options.initialIntervalMs ?? base.initialIntervalMs,
    maxIntervalMs: options.maxIntervalMs ?? Math.max(base.maxIntervalMs, options.initialIntervalMs ?? 0),
    factor: options.factor ?? base.factor,
    maxWaitMs: options.maxWaitMs ?? base.maxWaitMs,
    signal: options.signal,
    onProgress: options.onProgress,
  };
}

export interface TranslateAndSpeakResult<A extends Readable = Readable> {
  taskId: string;
  runId: number;
  translatedText: string;
  /**
   * FLAC audio (PCM16 with `decode`) as it downloads; consume or destroy it. A resumable
   * `FlacDownloadStream` with the client.
   */
  audio: A;
  contentType: string | undefined;
}

/**
 * Translated TTS in one call: creates the task, polls it (speech profile), then fetches the
 * translated text and opens the audio stream (see `getTtsResultAudio`).
 */
export function translateAndSpeak(
  client: FlacDownloader,
  body: TranslatedTtsRequest,
  options?: TranslateAndSpeakOptions,
): Promise<TranslateAndSpeakResult<FlacDownloadStream>>;
export function translateAndSpeak(client: HttpRequester, body: TranslatedTtsRequest, options?: TranslateAndSpeakOptions): Promise<TranslateAndSpeakResult>;
export function translateAndSpeak(client: HttpRequester, body: TranslatedTtsRequest, options: TranslateAndSpeakOptions = {}): Promise<TranslateAndSpeakResult> {
  const req = request(options);
  return runTask(
    {
      create: async () => (await createTranslatedTts(client, body, req)).taskId,
      status: (taskId, signal) => getTranslatedTtsStatus(client, taskId, { ...req, signal }),
      result: async (run: CompletedTask) => {
        const text = await getTranslationResult(client, run.runId, req);
        const audio = await getTtsResultAudio(client, run.runId, { ...req, decode: options.decode });
        return { taskId: run.taskId, runId: run.runId, translatedText: text.translatedText, audio: audio.audio, contentType: audio.contentType };
      },
    },
    waitOptions(client, options, 'speech'),
  );
}

/** Waits for a task whose status is read with `getStatus` (any feature), with the client's polling. */
export function waitFor(
  client: HttpRequester,
  taskId: string,
  getStatus: (taskId: string, options: RequestOptions) => Promise<TaskStatusResponse>,
  options: TaskCallOptions = {},
  profile: 'speech' | 'longMedia' = 'speech',
): Promise<CompletedTask> {
  const req = request(options);
  return waitForTask(taskId, (id, signal) => getStatus(id, { ...req, signal }), waitOptions(client, options, profile));
}

/** Uploads audio for separation and waits for the run (long-media profile). */
export async function separateAudio(client: HttpRequester, upload: AudioUpload, options: TaskCallOptions = {}): Promise<CompletedTask> {
  const task = await createAudioSeparation(client, upload, request(options));
  return waitFor(client, task.taskId, (id, o) => getAudioSeparationStatus(client, id, o), options, 'longMedia');
}
