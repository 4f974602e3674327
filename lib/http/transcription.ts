/**
 * Transcription: `POST /transcribe` (multipart: the media uploaded as it is read, from a path,
 * Buffer, Blob or Readable; or a media URL the service fetches), its status, its result
 * (`GET /transcription-result/{run_id}`, segments with optional word-level timestamps), bulk
 * results, and `transcribe()` for the whole flow. Segments render as SRT, WebVTT or text with
 * `renderTranscript` (`transcript.ts`).
 */
import { ValidationError } from '../errors.js';
import type { HttpRequester, RequestOptions } from './requester.js';
import { bulkResultsOf, call, callOptions, createAndWait, createTask, getTaskStatus, runPath, type CreatedTask, type TaskCallOptions } from './endpoint-kit.js';
import type { Language, ProjectFields } from './endpoints.js';
import { tagsToIds } from './languages.js';
import { multipartBody, type FieldValue, type FileField, type Upload } from './multipart.js';
import { transcriptionSchema, type TranscriptionMode } from './schemas.js';
import type { TaskStatusResponse } from './tasks.js';
import { parseTranscript, type ParseTranscriptOptions, type TranscriptSegment } from './transcript.js';
import { validate } from './validation.js';

/** `POST /transcribe`: exactly one of `mediaFile` and `mediaUrl`. */
export interface TranscriptionRequest extends ProjectFields {
  /** The spoken language: a locale tag (converted through the language lists) or an id. */
  language: Language;
  /** The media to upload: a file path, Buffer, Blob, Readable, or one with a `filename`. */
  mediaFile?: Upload;
  /** An absolute http(s) URL the service fetches the media from. */
  mediaUrl?: string;
  /** `fast` (the service's default) or `slow`, a more thorough pass. */
  transcriptionMode?: TranscriptionMode;
}

export interface TranscriptionResultOptions extends RequestOptions, ParseTranscriptOptions {
  /** Ask for word timings (`word_level_timestamps=true`). Default false. */
  wordLevelTimestamps?: boolean;
}

export interface TranscriptionResult {
  segments: TranscriptSegment[];
  raw: unknown;
}

/** `POST /transcribe`: uploads the media (or gives its URL) and starts a transcription. */
export async function createTranscription(client: HttpRequester, request: TranscriptionRequest, options?: RequestOptions): Promise<CreatedTask> {
  if (request === null || typeof request !== 'object') throw new ValidationError('request', 'an object', typeof request);
  const { mediaFile, ...fields } = request;
  if ((mediaFile === undefined) === (fields.mediaUrl === undefined)) {
    throw new ValidationError(
      'mediaFile',
      'exactly one of mediaFile (the media to upload) and mediaUrl (where the service fetches it)',
      mediaFile === undefined ? 'neither' : 'both',
    );
  }
  const wire = await tagsToIds(client, validate(transcriptionSchema, fields), [{ wire: 'language', side: 'source', field: 'language' }], callOptions(options));
  const files: FileField[] = mediaFile === undefined ? [] : [{ name: 'media_file', field: 'mediaFile', upload: mediaFile }];
  const multipart = await multipartBody(wire as Record<string, FieldValue>, files);
  return createTask(client, '/transcribe', options, { multipart });
}

export function getTranscriptionStatus(client: HttpRequester, taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
  return getTaskStatus(client, 'transcription', taskId, options);
}

/** `GET /transcription-result/{run_id}`: the segments (the answer may be `{transcript: [...]}` or the list itself). */
export async function getTranscriptionResult(client: HttpRequester, runId: number, options: TranscriptionResultOptions = {}): Promise<TranscriptionResult> {
  const query = options.wordLevelTimestamps === undefined ? undefined : { word_level_timestamps: String(options.wordLevelTimestamps) };
  const raw = await call(client, 'GET', runPath('/transcription-result', runId), 'read', options, query ? { query } : {});
  return { segments: parseTranscript(raw, options), raw };
}

/** `POST /transcription-results`: the segments of 2 to 5 runs by run id; a run without a result maps to undefined. */
export async function getTranscriptionResults(
  client: HttpRequester,
  runIds: number[],
  options: RequestOptions & ParseTranscriptOptions = {},
): Promise<Map<number, TranscriptionResult | undefined>> {
  return bulkResultsOf(client, '/transcription-results', runIds, (entry) => ({ segments: parseTranscript(entry, options), raw: entry }), options);
}

/** Transcription in one call: uploads (or points at) the media, waits (long-media polling), reads the segments. */
export async function transcribe(
  client: HttpRequester,
  request: TranscriptionRequest,
  options: TaskCallOptions & Omit<TranscriptionResultOptions, keyof RequestOptions> = {},
): Promise<TranscriptionResult & { taskId: string; runId: number }> {
  const run = await createAndWait(client, 'transcription', (o) => createTranscription(client, request, o), options);
  const result = await getTranscriptionResult(client, run.runId, {
    ...callOptions(options),
    wordLevelTimestamps: options.wordLevelTimestamps,
    timeUnit: options.timeUnit,
  });
  return { taskId: run.taskId, runId: run.runId, ...result };
}
