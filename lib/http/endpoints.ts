/**
 * The endpoints of the service interface as typed functions over an `HttpRequester` (the
 * `LocalizationClient`'s resources call them): translated TTS, TTS results, project setup,
 * subtitles' status and the legacy TTS flow. Requests are camelCase objects, validated and
 * mapped to the wire by the schemas of `schemas.ts` before anything is sent; answers are
 * camelCase with the wire body in `raw`. Audio separation is in `audio-separation.ts`, voices
 * (deletion included) in `voices.ts`, the endpoints beyond the interface in the modules beside
 * this one (`translation.ts`, `dubbing.ts`, ...).
 *
 * Creations (`kind: 'create'`, see `retry.ts`): `POST /translated-tts`, `/project-setup`,
 * `/tts`. Everything else is a read.
 *
 * Result audio (`/tts-result` raw bytes) is a `FlacDownloadStream` when the requester can open
 * one (`openFlacDownload`, as `LocalizationClient` does): an interrupted download resumes, and
 * an expired URL is refreshed.
 */
import type { Readable } from 'node:stream';
import { ProtocolError, ValidationError } from '../errors.js';
import type { AudioDownloadOptions, FlacDownloader, HttpRequester, RequestOptions, RequestSpec, TtsResultAudioOptions } from './requester.js';
import type { FlacDownloadStream } from './flac-download-stream.js';
import {
  asObject,
  bulkResultsOf,
  call,
  callOptions,
  createTask,
  downloadOptions,
  fileUrlEntry,
  firstBytes,
  getTaskStatus,
  mapBodyErrors,
  pickFileUrl,
  runPath,
  waitSettings,
  type CreatedTask,
  type TaskCallOptions,
} from './endpoint-kit.js';
import { legacyTtsSchema, projectSetupSchema, translatedTtsSchema, type OutputType } from './schemas.js';
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
