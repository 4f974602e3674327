/**
 * End-to-end dubbing and subtitles: `POST /dub` (a media URL, one or several target languages),
 * its status (poll it with the long-media profile: 15 s growing to 60 s), its result
 * (`GET /dub-result/{run_id}`: dubbed audio and video URLs and the transcript, one set per
 * target language), bulk results, other output formats (`POST /dub-alt-format/...`, answered
 * with a URL or a task), subtitle tasks (`POST /sub`) and the transcript of a dubbing or
 * subtitle run in SRT, WebVTT or text (`GET /transcript/{run_id}/{language}`). Dubbed files
 * download through the resumable machinery, their URLs looked up again when they expire. The
 * statuses of tasks started from the service's own bots (Discord and X dubbing, Discord TTS)
 * are read here too.
 *
 * The result's URL fields are `audio_url`/`video_url` in the SDK and
 * `output_audio_url`/`output_video_url` in the service's documentation: both are read.
 */
import { ProtocolError, ValidationError } from '../errors.js';
import type { AudioDownloadOptions, HttpRequester, RequestOptions } from './requester.js';
import {
  asObject,
  bulkResultsOf,
  call,
  callOptions,
  createAndWait,
  createTask,
  getTaskStatus,
  openResultDownload,
  optionalString,
  parseCreated,
  pickFileUrl,
  runPath,
  waitForTaskOf,
  type CreatedTask,
  type TaskCallOptions,
} from './endpoint-kit.js';
import type { Language, ProjectFields } from './endpoints.js';
import type { FlacDownloadStream } from './flac-download-stream.js';
import { catalogOf, tagsToIds } from './languages.js';
import {
  dubAltFormatSchema,
  dubSchema,
  languageRef,
  subtitlesSchema,
  transcriptDataTypeParam,
  transcriptFormatParam,
  type DubAltFormat,
  type TranscriptDataType,
  type TranscriptFormat,
  type TranscriptionMode,
} from './schemas.js';
import type { CompletedTask, TaskStatusResponse } from './tasks.js';
import { parseTranscript, type ParseTranscriptOptions, type TranscriptSegment } from './transcript.js';
import { validate } from './validation.js';
import { isPlainObject } from './wire.js';

/** `POST /dub`: one of `targetLanguage` and `targetLanguages` at least. */
export interface DubbingRequest extends ProjectFields {
  /** The media: a video-sharing page, a file-sharing link or a direct media URL. */
  videoUrl: string;
  sourceLanguage: Language;
  targetLanguage?: Language | null;
  targetLanguages?: Language[] | null;
  /** 1 or 2 zero-based audio tracks (MXF only). */
  selectedAudioTracks?: number[] | null;
  addOutputAsAnAudioTrack?: boolean | null;
  chosenDictionaries?: number[] | null;
  aiOptimization?: boolean | null;
  transcriptionMode?: TranscriptionMode | null;
}

/** The dubbed output of one language. */
export interface DubbedOutput {
  /** The language key of a result with several languages (as the service keys it); undefined for a single one. */
  language: string | undefined;
  audioUrl: string | undefined;
  videoUrl: string | undefined;
  segments: TranscriptSegment[];
  raw: Record<string, unknown>;
}

export interface DubbingResult {
  outputs: DubbedOutput[];
  raw: Record<string, unknown>;
}

/** `POST /sub`: the interface names the endpoint without its body; these are the project fields. */
export interface SubtitlesRequest extends ProjectFields {
  mediaUrl: string;
  sourceLanguage: Language;
  targetLanguages?: Language[] | null;
}

export interface RunTranscriptOptions extends RequestOptions {
  /** `txt` (the service's default), `srt` or `vtt`. */
  format?: TranscriptFormat;
  /** `raw_data` (the text in the answer, the default here) or `file` (a presigned URL). */
  dataType?: TranscriptDataType;
}

/** A run's transcript in one language: the text, or the URL of a file holding it. */
export interface RunTranscript {
  format: TranscriptFormat;
  /** With `dataType: 'raw_data'`. */
  text: string | undefined;
  /** With `dataType: 'file'`: a presigned URL. */
  url: string | undefined;
  raw: Record<string, unknown>;
}

/** What `POST /dub-alt-format/...` answers: the file at once, or a task to wait for. */
export type DubAltFormatAnswer = { kind: 'ready'; url: string; raw: Record<string, unknown> } | { kind: 'task'; taskId: string; raw: Record<string, unknown> };

const DUB_LANGUAGES = [
  { wire: 'source_language', side: 'source', field: 'sourceLanguage' },
  { wire: 'target_language', side: 'target', field: 'targetLanguage' },
  { wire: 'target_languages', side: 'target', field: 'targetLanguages' },
] as const;

/** `POST /dub`: starts dubbing a media URL into one or more languages. */
export async function createDubbing(client: HttpRequester, request: DubbingRequest, options?: RequestOptions): Promise<CreatedTask> {
  const json = await tagsToIds(client, validate(dubSchema, request), [...DUB_LANGUAGES], callOptions(options));
  return createTask(client, '/dub', options, { json });
}

export function getDubbingStatus(client: HttpRequester, taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
  return getTaskStatus(client, 'dub', taskId, options);
}

function dubbedOutput(entry: Record<string, unknown>, language: string | undefined, options: ParseTranscriptOptions): DubbedOutput {
  let segments: TranscriptSegment[] = [];
  if (Array.isArray(entry.transcript)) segments = parseTranscript(entry.transcript, options);
  return {
    language,
    audioUrl: optionalString(entry.audio_url) ?? optionalString(entry.output_audio_url),
    videoUrl: optionalString(entry.video_url) ?? optionalString(entry.output_video_url),
    segments,
    raw: entry,
  };
}

function hasOutput(entry: Record<string, unknown>): boolean {
  return ['audio_url', 'output_audio_url', 'video_url', 'output_video_url', 'transcript'].some((f) => f in entry);
}

/** Reads a dubbing result: one output (`{audio_url, video_url, transcript}`), or one per language key. */
export function parseDubbingResult(raw: Record<string, unknown>, options: ParseTranscriptOptions = {}): DubbingResult {
  if (hasOutput(raw)) return { outputs: [dubbedOutput(raw, undefined, options)], raw };
  const outputs: DubbedOutput[] = [];
  for (const [key, value] of Object.entries(raw)) {
    if (isPlainObject(value) && hasOutput(value)) outputs.push(dubbedOutput(value, key, options));
  }
  if (outputs.length === 0) throw new ProtocolError('The dubbing result has no output (audio_url, video_url or transcript).');
  return { outputs, raw };
}

/** `GET /dub-result/{run_id}`. */
export async function getDubbingResult(client: HttpRequester, runId: number, options: RequestOptions & ParseTranscriptOptions = {}): Promise<DubbingResult> {
  return parseDubbingResult(asObject(await call(client, 'GET', runPath('/dub-result', runId), 'read', options), 'GET /dub-result'), options);
}

/** `POST /dubbing-results`: 2 to 5 runs by run id; a run without a result maps to undefined. */
export function getDubbingResults(
  client: HttpRequester,
  runIds: number[],
  options: RequestOptions & ParseTranscriptOptions = {},
): Promise<Map<number, DubbingResult | undefined>> {
  return bulkResultsOf(client, '/dubbing-results', runIds, (entry) => parseDubbingResult(entry, options), options);
}

/** Dubbing in one call: creates the task, waits (long-media polling: 15 s growing to 60 s), reads the result. */
export async function dub(
  client: HttpRequester,
  request: DubbingRequest,
  options: TaskCallOptions & ParseTranscriptOptions = {},
): Promise<DubbingResult & { taskId: string; runId: number }> {
  const run = await createAndWait(client, 'dub', (o) => createDubbing(client, request, o), options);
  return { taskId: run.taskId, runId: run.runId, ...(await getDubbingResult(client, run.runId, { ...callOptions(options), timeUnit: options.timeUnit })) };
}

/** The output of `language` (its key, a tag or an id), or the only one; else a clear error. */
function outputOf(result: DubbingResult, runId: number, language: string | number | undefined): DubbedOutput {
  if (language === undefined) {
    if (result.outputs.length === 1) return result.outputs[0]!;
    throw new ValidationError('language', `one of the run's languages (${result.outputs.map((o) => o.language).join(', ')})`, 'none');
  }
  const found = result.outputs.find((o) => o.language === undefined || o.language.toLowerCase() === String(language).toLowerCase());
  if (!found) throw new ProtocolError(`Dubbing run ${runId} has no output in ${language} (it has ${result.outputs.map((o) => o.language).join(', ')}).`);
  return found;
}

export interface DubbedFileOptions extends AudioDownloadOptions, ParseTranscriptOptions {
  /** The language key of a run with several target languages. */
  language?: Language;
}

/**
 * A dubbed file of a finished run (`audio` or `video`) as a resumable download, opened once its
 * first bytes arrived; an expired URL is replaced by looking the result up again.
 */
export async function openDubbedFile(
  client: HttpRequester,
  runId: number,
  kind: 'audio' | 'video',
  options: DubbedFileOptions = {},
): Promise<FlacDownloadStream> {
  const req = callOptions(options);
  const urlOf = async (): Promise<string> => {
    const output = outputOf(await getDubbingResult(client, runId, { ...req, timeUnit: options.timeUnit }), runId, options.language);
    const url = kind === 'audio' ? output.audioUrl : output.videoUrl;
    if (url === undefined) throw new ProtocolError(`Dubbing run ${runId} has no ${kind} URL.`);
    return url;
  };
  return openResultDownload(client, await urlOf(), urlOf, { ...options, decode: false });
}

const transcriptLanguageCheck = languageRef();

/** The path segment of a language: an id as is, a tag converted through the language lists. */
async function languageSegment(client: HttpRequester, language: Language, options: RequestOptions): Promise<number> {
  if (typeof language === 'number') return validate<number>(transcriptLanguageCheck, language, ['language']);
  validate(transcriptLanguageCheck, language, ['language']);
  return catalogOf(client).idOf(language, 'target', 'language', options);
}

/**
 * `GET /transcript/{run_id}/{language}`: the transcript of a dubbing or subtitle run in the
 * source language or one of its targets, as text (`raw_data`) or as a presigned file URL.
 */
export async function getRunTranscript(client: HttpRequester, runId: number, language: Language, options: RunTranscriptOptions = {}): Promise<RunTranscript> {
  const format = validate<TranscriptFormat>(transcriptFormatParam, options.format ?? 'txt', ['format']);
  const dataType = validate<TranscriptDataType>(transcriptDataTypeParam, options.dataType ?? 'raw_data', ['dataType']);
  const path = `${runPath('/transcript', runId)}/${await languageSegment(client, language, callOptions(options))}`;
  const raw = asObject(await call(client, 'GET', path, 'read', options, { query: { format_type: format, data_type: dataType } }), 'GET /transcript');
  if (dataType === 'file') return { format, text: undefined, url: pickFileUrl({ ...raw, url: raw.transcript_url ?? raw.url }, runId), raw };
  const text = [raw.transcript, raw.text, raw.data, raw.content].find((v): v is string => typeof v === 'string');
  if (text === undefined) throw new ProtocolError(`The transcript of run ${runId} came without its text (transcript).`);
  return { format, text, url: undefined, raw };
}

/** `POST /dub-alt-format/{run_id}/{language}`: asks for a dubbed output in another format. */
export async function requestDubAltFormat(
  client: HttpRequester,
  runId: number,
  language: Language,
  format: DubAltFormat,
  options: RequestOptions = {},
): Promise<DubAltFormatAnswer> {
  const json = validate(dubAltFormatSchema, { outputFormat: format });
  const path = `${runPath('/dub-alt-format', runId)}/${await languageSegment(client, language, callOptions(options))}`;
  const raw = asObject(await call(client, 'POST', path, 'create', options, { json }), 'POST /dub-alt-format');
  if (raw.task_id !== undefined && raw.task_id !== null) return { kind: 'task', taskId: parseCreated(raw, 'POST /dub-alt-format').taskId, raw };
  return { kind: 'ready', url: pickFileUrl(raw, runId), raw };
}

export function getDubAltFormatStatus(client: HttpRequester, taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
  return getTaskStatus(client, 'dub-alt-format', taskId, options);
}

/**
 * The converted file's URL of a finished conversion run (the `runId` its task ended with), read
 * from `GET /dub-result/{run_id}`: for a caller who left the task to finish (`--no-wait`) and
 * must not start a new, paid conversion to learn where the file is.
 */
export async function getDubAltFormatResult(client: HttpRequester, runId: number, options?: RequestOptions): Promise<string> {
  return pickFileUrl(asObject(await call(client, 'GET', runPath('/dub-result', runId), 'read', options), 'GET /dub-result'), runId);
}

/** The converted file's URL: at once, or after waiting for the conversion task and reading its run's result. */
export async function dubAltFormat(
  client: HttpRequester,
  runId: number,
  language: Language,
  format: DubAltFormat,
  options: TaskCallOptions = {},
): Promise<{ url: string; runId: number | undefined }> {
  const answer = await requestDubAltFormat(client, runId, language, format, callOptions(options));
  if (answer.kind === 'ready') return { url: answer.url, runId: undefined };
  const run: CompletedTask = await waitForTaskOf(client, 'dub-alt-format', answer.taskId, options);
  return { url: await getDubAltFormatResult(client, run.runId, callOptions(options)), runId: run.runId };
}

/** `POST /sub`: starts making subtitles of a media URL (its transcript per language: `getRunTranscript`). */
export async function createSubtitles(client: HttpRequester, request: SubtitlesRequest, options?: RequestOptions): Promise<CreatedTask> {
  return createTask(client, '/sub', options, { json: validate(subtitlesSchema, request) });
}

/* ----------------------------------------------------------------------------------------- */
/* Tasks started from the service's own bots                                                 */

/** `GET /discord/dub/{task_id}`: a dubbing started from the service's Discord bot. */
export function getDiscordDubStatus(client: HttpRequester, taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
  return getTaskStatus(client, 'discord-dub', taskId, options);
}

/** `GET /twitter/dub/{task_id}`: a dubbing started from the service's X (Twitter) bot. */
export function getTwitterDubStatus(client: HttpRequester, taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
  return getTaskStatus(client, 'twitter-dub', taskId, options);
}

/** `GET /discord/tts/{task_id}`: text to speech started from the service's Discord bot. */
export function getDiscordTtsStatus(client: HttpRequester, taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
  return getTaskStatus(client, 'discord-tts', taskId, options);
}
