/**
 * The endpoints of the service interface as typed functions over an `HttpRequester` (the
 * `LocalizationClient` exposes each as a method): translated TTS, TTS results, project setup,
 * subtitles' status, the legacy TTS flow, audio separation and voice deletion. Requests are
 * camelCase objects, validated and mapped to the wire by the schemas of `schemas.ts` before
 * anything is sent; answers are camelCase with the wire body in `raw`. The endpoints beyond the
 * interface are in the modules beside this one (`voices.ts`, `translation.ts`, ...).
 *
 * Creations (`kind: 'create'`, see `retry.ts`): `POST /translated-tts`, `/project-setup`,
 * `/tts`, `/audio-separation`. `DELETE /delete-voice` is a deletion (`kind: 'delete'`), retried
 * under the same rule. Everything else is a read.
 *
 * Result audio (`/tts-result` raw bytes, separated tracks) is a `FlacDownloadStream` when the
 * requester can open one (`openFlacDownload`, as `LocalizationClient` does): an interrupted
 * download resumes, and an expired URL is refreshed.
 */
import type { Readable } from 'node:stream';
import { ProtocolError, ValidationError } from '../errors.js';
import type {
  AudioDownloadOptions,
  FlacDownloader,
  HttpRequester,
  RequestOptions,
  RequestSpec,
  SeparationTrack,
  SeparationTrackOptions,
  TtsResultAudioOptions,
} from './requester.js';
import type { FlacDownloadStream } from './flac-download-stream.js';
import {
  asObject,
  bulkLookup,
  bulkResultsOf,
  call,
  callOptions,
  createTask,
  downloadOptions,
  fileUrlEntry,
  firstBytes,
  getTaskStatus,
  mapBodyErrors,
  optionalString,
  parseBulkAnswer,
  pickFileUrl,
  runPath,
  waitForTaskOf,
  waitSettings,
  type CreatedTask,
  type TaskCallOptions,
} from './endpoint-kit.js';
import { multipartBody, type FieldValue, type Upload } from './multipart.js';
import { audioSeparationSchema, legacyTtsSchema, projectSetupSchema, runIdParam, translatedTtsSchema, voiceIdParam, type OutputType } from './schemas.js';
import { runTask, type CompletedTask, type TaskStatusResponse } from './tasks.js';
import { validate } from './validation.js';
import { reportDeprecation } from '../deprecations.js';
import type { LanguageTag, OpenUnion } from '../language-tags.js';

export type { CreatedTask, TaskCallOptions } from './endpoint-kit.js';

/**
 * A language: a locale tag such as `en-us` (the documented ones offered by an editor's
 * completion, any other accepted; the service's lists decide), or a numeric language id.
 */
export type Language = OpenUnion<LanguageTag> | number;

/** Fields every creation of a project-like task takes. */
export interface ProjectFields {
  /** 3 to 255 characters. */
  projectName?: string | null;
  /** 3 to 5000 characters. */
  projectDescription?: string | null;
  /** A folder of the workspace, at least 1. */
  folderId?: number | null;
}

/** `POST /translated-tts`. Languages are locale tags (`en-us`); numeric ids are deprecated. */
export interface TranslatedTtsRequest extends ProjectFields {
  text: string;
  /** Default 147320. */
  voiceId?: number;
  sourceLanguage: Language;
  targetLanguage: Language;
  /** Speaker age in years. */
  age?: number | null;
  /** 1 casual, 2 formal. */
  formality?: 1 | 2 | null;
  gender?: 0 | 1 | 2 | 9 | null;
  /** At least one dictionary id when given. */
  chosenDictionaries?: number[] | null;
}

/** `POST /project-setup`. */
export interface ProjectSetupRequest extends ProjectFields {
  /** Absolute http(s) URL of the media. */
  mediaUrl: string;
  sourceLanguage: Language;
  targetLanguages: Language[];
  /** 1 or 2 zero-based track indices (MXF only). */
  selectedAudioTracks?: number[] | null;
  addOutputAsAnAudioTrack?: boolean | null;
  chosenDictionaries?: number[] | null;
}

/**
 * `POST /tts`.
 * @deprecated The service deprecates the asynchronous TTS flow; use `TtsStreamReadable`
 * (`POST /tts-stream`).
 */
export interface LegacyTtsRequest extends ProjectFields {
  text: string;
  /** Default 147320. */
  voiceId?: number;
  language: Language;
  gender?: 0 | 1 | 2 | 9;
  age?: unknown;
}

/**
 * `GET /translation-result/{run_id}`. The SDK and the service's documentation answer
 * `{texts: [...]}`, the interface names a `translated_text`: both are read.
 */
export interface TranslationResult {
  /** The translations, one per text sent (one for a translated TTS run). */
  texts: string[];
  /** `translated_text` when the service gives it, else the texts joined by newlines. */
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

/** `POST /audio-separation`: an audio file (WAV, MP3, FLAC or AAC), uploaded as it is read. */
export interface AudioSeparationRequest extends ProjectFields {
  /** A file path, a Buffer, a Blob, a Readable, or one of these with a `filename`. */
  mediaFile: Upload;
}

/* ----------------------------------------------------------------------------------------- */
/* Translated text-to-speech                                                                 */

export async function createTranslatedTts(client: HttpRequester, body: TranslatedTtsRequest, options?: RequestOptions): Promise<CreatedTask> {
  return createTask(client, '/translated-tts', options, { json: validate(translatedTtsSchema, body) });
}

export function getTranslatedTtsStatus(client: HttpRequester, taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
  return getTaskStatus(client, 'translated-tts', taskId, options);
}

/** Reads a translation result in either of its shapes (see `TranslationResult`). */
export function parseTranslationResult(raw: Record<string, unknown>, runId: number): TranslationResult {
  const texts = Array.isArray(raw.texts) && raw.texts.every((t) => typeof t === 'string') ? (raw.texts as string[]) : undefined;
  const translated = typeof raw.translated_text === 'string' ? raw.translated_text : undefined;
  if (texts === undefined && translated === undefined) {
    throw new ProtocolError(`The translation result of run ${runId} has neither texts nor translated_text.`);
  }
  return { texts: texts ?? [translated!], translatedText: translated ?? texts!.join('\n'), raw };
}

export async function getTranslationResult(client: HttpRequester, runId: number, options?: RequestOptions): Promise<TranslationResult> {
  const raw = asObject(await call(client, 'GET', runPath('/translation-result', runId), 'read', options), 'GET /translation-result');
  return parseTranslationResult(raw, runId);
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
export function getTtsResultAudio(client: HttpRequester, runId: number, options: TtsResultAudioOptions = {}): Promise<AudioResult> {
  return runResultAudio(client, '/tts-result', runId, options);
}

/**
 * The audio of `GET {prefix}/{run_id}` (`raw_bytes` with the key, or the presigned URL of
 * `file_url`): `/tts-result` (FLAC) and `/text-to-sound-result` (WAV: `content: 'any'`) share it.
 */
export async function runResultAudio(
  client: HttpRequester,
  prefix: string,
  runId: number,
  options: TtsResultAudioOptions = {},
  content: 'flac' | 'any' = 'flac',
): Promise<AudioResult> {
  const path = runPath(prefix, runId);
  const outputType = options.outputType ?? 'raw_bytes';
  if (outputType !== 'raw_bytes' && outputType !== 'file_url') {
    throw new ValidationError('outputType', "'raw_bytes' or 'file_url'", String(outputType));
  }
  if (outputType === 'file_url') {
    const req = callOptions(options);
    const first = await resultFileUrl(client, prefix, runId, req);
    const fresh = async (): Promise<string> => (await resultFileUrl(client, prefix, runId, req)).url;
    if (client.openFlacDownload) {
      const audio = client.openFlacDownload({ url: first.url, refreshUrl: fresh, ...downloadOptions(options), content });
      await firstBytes(audio);
      return describeDownload(audio, options.decode === true);
    }
    throw new ValidationError('outputType', "'raw_bytes' with a requester that cannot open downloads (no openFlacDownload)", 'file_url');
  }
  const query = { output_type: 'raw_bytes' satisfies OutputType };
  if (client.openFlacDownload) {
    const url = client.urlFor(path, query);
    const audio = client.openFlacDownload({ url, authenticate: true, ...downloadOptions(options), content });
    await firstBytes(audio);
    return describeDownload(audio, options.decode === true);
  }
  const spec: RequestSpec = { method: 'GET', path, query, accept: 'audio/*, */*', kind: 'read', ...callOptions(options) };
  const response = await client.requestStream(spec);
  const type = response.headers['content-type'];
  const length = Number(response.headers['content-length']);
  return {
    audio: mapBodyErrors(response.body, (error) => client.bodyError(error, spec)),
    contentType: Array.isArray(type) ? type[0] : type,
    contentLength: Number.isSafeInteger(length) && length >= 0 ? length : undefined,
  };
}

function describeDownload(audio: FlacDownloadStream, decode: boolean): AudioResult<FlacDownloadStream> {
  const format = audio.format;
  if (!decode) return { audio, contentType: format ? 'audio/flac' : undefined, contentLength: audio.totalBytes };
  return {
    audio,
    contentType: format ? `audio/pcm;encoding=s16le;rate=${format.sampleRate};channels=${format.channels}` : undefined,
    contentLength: format && format.totalSamples > 0 ? format.totalSamples * format.channels * 2 : undefined,
  };
}

/** `GET {prefix}/{run_id}?output_type=file_url`: the presigned URL (`output_url` or `audio_url`). */
export async function resultFileUrl(client: HttpRequester, prefix: string, runId: number, options?: RequestOptions): Promise<AudioFileUrl> {
  const raw = asObject(
    await call(client, 'GET', runPath(prefix, runId), 'read', options, { query: { output_type: 'file_url' satisfies OutputType } }),
    `GET ${prefix}`,
  );
  return { url: pickFileUrl(raw, runId), raw };
}

/** A presigned URL of a finished run's audio. Accepts `output_url` or `audio_url`. */
export function getTtsResultUrl(client: HttpRequester, runId: number, options?: RequestOptions): Promise<AudioFileUrl> {
  return resultFileUrl(client, '/tts-result', runId, options);
}

/** `POST /tts-results`: the results of 2 to 5 TTS runs (their presigned URLs), by run id. */
export function getTtsResults(client: HttpRequester, runIds: number[], options?: RequestOptions): Promise<Map<number, AudioFileUrl | undefined>> {
  return bulkResultsOf(client, '/tts-results', runIds, fileUrlEntry, options);
}

/* ----------------------------------------------------------------------------------------- */
/* Project setup, subtitles                                                                  */

export async function createProjectSetup(client: HttpRequester, body: ProjectSetupRequest, options?: RequestOptions): Promise<CreatedTask> {
  return createTask(client, '/project-setup', options, { json: validate(projectSetupSchema, body) });
}

/** `GET /sub/{task_id}`: status of a subtitle task. Poll it with the `longMedia` profile. */
export function getSubtitleStatus(client: HttpRequester, taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
  return getTaskStatus(client, 'sub', taskId, options);
}

/* ----------------------------------------------------------------------------------------- */
/* Legacy TTS                                                                                */

function warnLegacyTts(): void {
  reportDeprecation('RTT_DEP_ASYNC_TTS');
}

/**
 * `POST /tts`.
 * @deprecated The service deprecates the asynchronous TTS flow; use `TtsStreamReadable`.
 * Reports the deprecation (code `RTT_DEP_ASYNC_TTS`): one `DeprecationWarning` per process by default.
 */
export async function createTts(client: HttpRequester, body: LegacyTtsRequest, options?: RequestOptions): Promise<CreatedTask> {
  warnLegacyTts();
  return createTask(client, '/tts', options, { json: validate(legacyTtsSchema, body) });
}

/**
 * `GET /tts/{task_id}`.
 * @deprecated Part of the deprecated asynchronous TTS flow; use `TtsStreamReadable`.
 */
export function getTtsStatus(client: HttpRequester, taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
  warnLegacyTts();
  return getTaskStatus(client, 'tts', taskId, options);
}

/* ----------------------------------------------------------------------------------------- */
/* Audio separation                                                                          */

/** `POST /audio-separation`: uploads an audio file (multipart, streamed) and starts a separation task. */
export async function createAudioSeparation(client: HttpRequester, request: AudioSeparationRequest, options?: RequestOptions): Promise<CreatedTask> {
  if (request === null || typeof request !== 'object' || request.mediaFile === undefined) {
    throw new ValidationError('mediaFile', 'an audio file (WAV, MP3, FLAC or AAC): a path, Buffer, Blob or Readable', 'nothing');
  }
  const { mediaFile, ...fields } = request;
  const wire = validate<Record<string, FieldValue>>(audioSeparationSchema, fields);
  const multipart = await multipartBody(wire, [{ name: 'media_file', field: 'mediaFile', upload: mediaFile }]);
  return createTask(client, '/audio-separation', options, { multipart });
}

export function getAudioSeparationStatus(client: HttpRequester, taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
  return getTaskStatus(client, 'audio-separation', taskId, options);
}

/** One separation run's entry, tolerant of absent and extra fields. */
function separationRun(runId: number, entry: Record<string, unknown>): AudioSeparationRun {
  const foreground = optionalString(entry.foreground_audio_url);
  const background = optionalString(entry.background_audio_url);
  return {
    runId,
    status: optionalString(entry.status),
    error: optionalString(entry.error) ?? optionalString(entry.message),
    foregroundAudioUrl: foreground,
    backgroundAudioUrl: background,
    ready: foreground !== undefined && background !== undefined,
    raw: entry,
  };
}

/** `GET /audio-separation-result/{run_id}`: the two presigned track URLs of one run. */
export async function getAudioSeparationResult(client: HttpRequester, runId: number, options?: RequestOptions): Promise<AudioSeparationRun> {
  const raw = asObject(await call(client, 'GET', runPath('/audio-separation-result', runId), 'read', options), 'GET /audio-separation-result');
  return separationRun(runId, raw);
}

/** Reads a separation bulk answer: keys become integers; absent or extra per-run fields are tolerated. */
export function parseAudioSeparationResults(raw: unknown): Map<number, AudioSeparationRun> {
  return separationRuns(parseBulkAnswer(raw, 'POST /audio-separation-results'));
}

function separationRuns(entries: Map<number, Record<string, unknown>>): Map<number, AudioSeparationRun> {
  const runs = new Map<number, AudioSeparationRun>();
  for (const [runId, entry] of entries) runs.set(runId, separationRun(runId, entry));
  return runs;
}

/** `POST /audio-separation-results` for 2 to 5 distinct run ids; keyed by integer run id. */
export async function getAudioSeparationResults(client: HttpRequester, runIds: number[], options?: RequestOptions): Promise<Map<number, AudioSeparationRun>> {
  return separationRuns(await bulkLookup(client, '/audio-separation-results', runIds, options));
}

/**
 * The runs `runIds` looked up afresh: one run through `GET /audio-separation-result/{run_id}`,
 * 2 to 5 through `POST /audio-separation-results`.
 */
export async function lookUpSeparationRuns(client: HttpRequester, runIds: number[], options?: RequestOptions): Promise<Map<number, AudioSeparationRun>> {
  if (Array.isArray(runIds) && runIds.length === 1) return new Map([[runIds[0]!, await getAudioSeparationResult(client, runIds[0]!, options)]]);
  return getAudioSeparationResults(client, runIds, options);
}

/** The presigned URL of `track` of `runId` in a fresh lookup of `runIds`, or a clear error. */
async function separationTrackUrl(client: HttpRequester, runIds: number[], runId: number, track: SeparationTrack, options: RequestOptions): Promise<string> {
  const run = (await lookUpSeparationRuns(client, runIds, options)).get(runId);
  const url = track === 'foreground' ? run?.foregroundAudioUrl : run?.backgroundAudioUrl;
  if (url !== undefined) return url;
  const state =
    run === undefined ? 'is missing from the answer' : `has no ${track} track (status ${run.status ?? 'not given'}${run.error ? `: ${run.error}` : ''})`;
  throw new ProtocolError(`Audio separation run ${runId} ${state}.`, { serverMessage: run?.error });
}

/**
 * One track of a finished audio separation run, as a resumable `FlacDownloadStream` (FLAC, or
 * PCM16 with `decode`) that resolves once the FLAC header arrived.
 *
 * The track's URL is presigned (no API key is sent with it) and expires. When it is refused
 * with 403, the stream looks `runIds` up again and goes on from where it stopped: `[runId]`
 * alone through `GET /audio-separation-result/{run_id}`, or the batch of 2 to 5 runs `runId`
 * was looked up in through `POST /audio-separation-results`. `options.url` skips the first
 * lookup when the URL is known.
 */
export async function openSeparationTrack(
  client: FlacDownloader,
  runIds: number[],
  runId: number,
  track: SeparationTrack,
  options: SeparationTrackOptions = {},
): Promise<FlacDownloadStream> {
  validate(runIdParam, runId, ['runId']);
  if (track !== 'foreground' && track !== 'background') throw new ValidationError('track', "'foreground' or 'background'", String(track));
  if (!Array.isArray(runIds) || !runIds.includes(runId)) {
    const received = Array.isArray(runIds) ? `[${runIds.join(', ')}]` : typeof runIds;
    throw new ValidationError('runIds', `[${runId}], or the lookup batch of 2 to 5 run ids that includes run ${runId}`, received);
  }
  const req = callOptions(options);
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
  validate(voiceIdParam, voiceId, ['voiceId']);
  // A deletion: retried only where the service surely did not act (a repeat after a lost
  // answer would be refused for a voice that was in fact deleted).
  const raw = asObject(await call(client, 'DELETE', `/delete-voice/${voiceId}`, 'delete', options), 'DELETE /delete-voice');
  if (raw.status !== 'ok') throw new ProtocolError(`DELETE /delete-voice/${voiceId} answered status ${JSON.stringify(raw.status)} instead of "ok".`);
  return { status: 'ok' };
}

/* ----------------------------------------------------------------------------------------- */
/* One-call conveniences                                                                     */

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
 * A finished translated TTS run: the translated text (`GET /translation-result/{run_id}`), then
 * its audio opened (see `getTtsResultAudio`).
 */
export function getTranslatedTtsResult(
  client: FlacDownloader,
  runId: number,
  options?: TtsResultAudioOptions,
): Promise<Omit<TranslateAndSpeakResult<FlacDownloadStream>, 'taskId' | 'runId'>>;
export function getTranslatedTtsResult(
  client: HttpRequester,
  runId: number,
  options?: TtsResultAudioOptions,
): Promise<Omit<TranslateAndSpeakResult, 'taskId' | 'runId'>>;
export async function getTranslatedTtsResult(
  client: HttpRequester,
  runId: number,
  options: TtsResultAudioOptions = {},
): Promise<Omit<TranslateAndSpeakResult, 'taskId' | 'runId'>> {
  const text = await getTranslationResult(client, runId, callOptions(options));
  const audio = await getTtsResultAudio(client, runId, options);
  return { translatedText: text.translatedText, audio: audio.audio, contentType: audio.contentType };
}

/** `translateAndSpeak` options: the task's, and `decode` for its audio. */
export interface TranslateAndSpeakOptions extends TaskCallOptions, Pick<AudioDownloadOptions, 'decode'> {}

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
  const req = callOptions(options);
  return runTask(
    {
      create: async () => (await createTranslatedTts(client, body, req)).taskId,
      status: (taskId, signal) => getTranslatedTtsStatus(client, taskId, { ...req, signal }),
      result: async (run: CompletedTask) => ({
        taskId: run.taskId,
        runId: run.runId,
        ...(await getTranslatedTtsResult(client, run.runId, { ...req, decode: options.decode } satisfies AudioDownloadOptions)),
      }),
    },
    waitSettings(client, options, 'speech'),
  );
}

/** Uploads audio for separation and waits for the run (long-media profile). */
export async function separateAudio(client: HttpRequester, request: AudioSeparationRequest, options: TaskCallOptions = {}): Promise<CompletedTask> {
  const task = await createAudioSeparation(client, request, callOptions(options));
  return waitForTaskOf(client, 'audio-separation', task.taskId, options);
}
