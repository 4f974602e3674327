/**
 * Project-like results: a dubbing project's setup (status, result, bulk results), text to sound
 * (`POST /text-to-sound`, its status, the sound as WAV bytes or a presigned URL, bulk results,
 * `textToSound()` in one call), stories (a document narrated: `POST /story` as a task,
 * `POST /story-setup` at once, status, result with an optional transcript, bulk results) and
 * translated stories (`POST /translated-story/{run_id}`, status, result per language).
 */
import { ProtocolError } from '../errors.js';
import type { AudioDownloadOptions, HttpRequester, RequestOptions, TtsResultAudioOptions } from './requester.js';
import type { FlacDownloadStream } from './flac-download-stream.js';
import {
  asObject,
  bulkResultsOf,
  call,
  fileUrlEntry,
  callOptions,
  camelResult,
  createAndWait,
  createTask,
  getTaskStatus,
  openResultDownload,
  optionalString,
  parseCreated,
  runPath,
  type CreatedTask,
  type TaskCallOptions,
} from './endpoint-kit.js';
import { runResultAudio, type AudioFileUrl, type AudioResult, type Language, type ProjectFields } from './endpoints.js';
import { catalogOf, tagsToIds } from './languages.js';
import { multipartBody, type FieldValue, type Upload } from './multipart.js';
import { languageRef, storySchema, textToSoundSchema, translatedStorySchema, type SoundType } from './schemas.js';
import type { TaskStatusResponse } from './tasks.js';
import { parseTranscript, type ParseTranscriptOptions, type TranscriptSegment } from './transcript.js';
import { validate } from './validation.js';
import { isPlainObject } from './wire.js';

/* ----------------------------------------------------------------------------------------- */
/* Project setup                                                                             */

/** A dubbing project's details (`project_details`), in camelCase. */
export interface ProjectDetails {
  projectName: string;
  projectDescription: string | null;
  createdAt: string;
  /** Language ids. */
  sourceLanguage: number;
  targetLanguages: number[];
  duration: number | null;
  folderId: number | null;
  /** Where the project is edited in the service's workspace. */
  studioUrl: string;
}

export interface ProjectSetupResult {
  runId: number;
  projectDetails: ProjectDetails;
  raw: Record<string, unknown>;
}

export function getProjectSetupStatus(client: HttpRequester, taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
  return getTaskStatus(client, 'project-setup', taskId, options);
}

function projectResult(raw: Record<string, unknown>, runId: number): ProjectSetupResult {
  const camel = camelResult<{ runId?: number; projectDetails: ProjectDetails }>(raw);
  return { runId: typeof camel.runId === 'number' ? camel.runId : runId, projectDetails: camel.projectDetails, raw };
}

/** `GET /project-setup-result/{run_id}`: the project, or null when the service answers null. */
export async function getProjectSetupResult(client: HttpRequester, runId: number, options?: RequestOptions): Promise<ProjectSetupResult | null> {
  const raw = await call(client, 'GET', runPath('/project-setup-result', runId), 'read', options);
  return raw === null ? null : projectResult(asObject(raw, 'GET /project-setup-result'), runId);
}

/** `POST /project-setup-results` (answered as a list): the projects of 2 to 5 runs by run id. */
export function getProjectSetupResults(
  client: HttpRequester,
  runIds: number[],
  options?: RequestOptions,
): Promise<Map<number, ProjectSetupResult | undefined>> {
  return bulkResultsOf(
    client,
    '/project-setup-results',
    runIds,
    (entry, runId) => (isPlainObject(entry.project_details) ? projectResult(entry, runId) : undefined),
    options,
  );
}

/* ----------------------------------------------------------------------------------------- */
/* Text to sound                                                                             */

/** `POST /text-to-sound`. */
export interface TextToSoundRequest extends ProjectFields {
  /** What to hear. */
  prompt: string;
  /** Seconds. */
  duration?: number;
  /** `sound` (effects, ambience) or `music`. */
  audioType?: SoundType;
}

export async function createTextToSound(client: HttpRequester, request: TextToSoundRequest, options?: RequestOptions): Promise<CreatedTask> {
  return createTask(client, '/text-to-sound', options, { json: validate(textToSoundSchema, request) });
}

export function getTextToSoundStatus(client: HttpRequester, taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
  return getTaskStatus(client, 'text-to-sound', taskId, options);
}

/**
 * `GET /text-to-sound-result/{run_id}`: the sound (WAV, as the service's documentation says) as a
 * resumable download (`raw_bytes` with the key, or the presigned URL of `file_url`, looked up
 * again when it expires). Resolves once its first bytes arrived.
 */
export function getTextToSoundResultAudio(client: HttpRequester, runId: number, options: Omit<TtsResultAudioOptions, 'decode'> = {}): Promise<AudioResult> {
  return runResultAudio(client, '/text-to-sound-result', runId, { ...options, decode: false }, 'any');
}

/** `POST /text-to-sound-results`: the presigned URLs of 2 to 5 runs by run id. */
export function getTextToSoundResults(client: HttpRequester, runIds: number[], options?: RequestOptions): Promise<Map<number, AudioFileUrl | undefined>> {
  return bulkResultsOf(client, '/text-to-sound-results', runIds, fileUrlEntry, options);
}

/** Text to sound in one call: creates the task, waits (speech polling), opens the sound. */
export async function textToSound(
  client: HttpRequester,
  request: TextToSoundRequest,
  options: TaskCallOptions & Pick<AudioDownloadOptions, 'maxAttempts' | 'retryDelayMs'> = {},
): Promise<AudioResult & { taskId: string; runId: number }> {
  const run = await createAndWait(client, 'text-to-sound', (o) => createTextToSound(client, request, o), options);
  const audio = await getTextToSoundResultAudio(client, run.runId, {
    ...callOptions(options),
    maxAttempts: options.maxAttempts,
    retryDelayMs: options.retryDelayMs,
  });
  return { taskId: run.taskId, runId: run.runId, ...audio };
}

/* ----------------------------------------------------------------------------------------- */
/* Stories                                                                                   */

/** `POST /story` and `POST /story-setup`: a document to narrate. */
export interface StoryRequest {
  /** The document (text, PDF, ...): a file path, Buffer, Blob, Readable, or one with a `filename`. */
  file: Upload;
  sourceLanguage: Language;
  title?: string | null;
  description?: string | null;
  narratorVoiceId?: number | null;
  folderId?: number | null;
  chosenDictionaries?: number[] | null;
}

/** A story set up (`POST /story-setup`, or `POST /story` when it answers at once). */
export interface StorySetup {
  runId: number;
  storyDetails: {
    storyTitle: string;
    storyDescription: string | null;
    createdAt: string;
    sourceLanguage: number;
    targetLanguages: number[] | null;
    folderId: number | null;
    studioUrl: string;
  };
  raw: Record<string, unknown>;
}

/** A story's (or a translated story's) result. Fields beyond these are in `raw`, camelCase in `details`. */
export interface StoryResult {
  audioUrl: string | undefined;
  /** With `includeTranscript`. */
  segments: TranscriptSegment[] | undefined;
  details: Record<string, unknown>;
  raw: Record<string, unknown>;
}

export interface StoryResultOptions extends RequestOptions, ParseTranscriptOptions {
  includeTranscript?: boolean;
}

async function storyBody(client: HttpRequester, request: StoryRequest, options: RequestOptions) {
  const { file, ...fields } = request;
  const wire = await tagsToIds(client, validate(storySchema, fields), [{ wire: 'source_language', side: 'source', field: 'sourceLanguage' }], options);
  return multipartBody(wire as Record<string, FieldValue>, [{ name: 'file', upload: file }]);
}

function storySetup(raw: Record<string, unknown>): StorySetup {
  const camel = camelResult<Omit<StorySetup, 'raw'>>(raw);
  return { runId: camel.runId, storyDetails: camel.storyDetails, raw };
}

/** What `POST /story` answers: a task, or (as its description allows) the story set up at once. */
export type StoryCreated = (CreatedTask & { setup: undefined }) | { taskId: undefined; runId: number; raw: Record<string, unknown>; setup: StorySetup };

/** `POST /story`: uploads a document and starts narrating it. */
export async function createStory(client: HttpRequester, request: StoryRequest, options?: RequestOptions): Promise<StoryCreated> {
  const multipart = await storyBody(client, request, callOptions(options));
  const raw = asObject(await call(client, 'POST', '/story', 'create', options, { multipart }), 'POST /story');
  if (raw.task_id === undefined && typeof raw.run_id === 'number' && isPlainObject(raw.story_details)) {
    return { taskId: undefined, runId: raw.run_id, raw, setup: storySetup(raw) };
  }
  return { ...parseCreated(raw, 'POST /story'), setup: undefined };
}

/** `POST /story-setup`: uploads a document and sets the story up at once (its run exists). */
export async function setupStory(client: HttpRequester, request: StoryRequest, options?: RequestOptions): Promise<StorySetup> {
  const multipart = await storyBody(client, request, callOptions(options));
  return storySetup(asObject(await call(client, 'POST', '/story-setup', 'create', options, { multipart }), 'POST /story-setup'));
}

export function getStoryStatus(client: HttpRequester, taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
  return getTaskStatus(client, 'story', taskId, options);
}

function storyResult(raw: Record<string, unknown>, options: ParseTranscriptOptions): StoryResult {
  return {
    audioUrl: optionalString(raw.audio_url) ?? optionalString(raw.output_audio_url),
    segments: Array.isArray(raw.transcript) ? parseTranscript(raw.transcript, options) : undefined,
    details: camelResult<Record<string, unknown>>(raw),
    raw,
  };
}

/** `GET /story-result/{run_id}`. */
export async function getStoryResult(client: HttpRequester, runId: number, options: StoryResultOptions = {}): Promise<StoryResult> {
  const query = options.includeTranscript === undefined ? undefined : { include_transcript: String(options.includeTranscript) };
  return storyResult(
    asObject(await call(client, 'GET', runPath('/story-result', runId), 'read', options, query ? { query } : {}), 'GET /story-result'),
    options,
  );
}

/**
 * A story's narration as a resumable download (its bytes as the service serves them), opened
 * once its run is done; an expired link is refreshed by reading the run's result again.
 */
export async function openStoryAudio(client: HttpRequester, runId: number, options: AudioDownloadOptions = {}): Promise<FlacDownloadStream> {
  const req = callOptions(options);
  const urlOf = async (): Promise<string> => {
    const { audioUrl } = await getStoryResult(client, runId, req);
    if (audioUrl === undefined) throw new ProtocolError(`Story run ${runId} has no audio URL.`);
    return audioUrl;
  };
  return openResultDownload(client, await urlOf(), urlOf, { ...options, decode: false });
}

/** `POST /stories-results`: 2 to 5 story runs by run id. */
export function getStoriesResults(
  client: HttpRequester,
  runIds: number[],
  options: RequestOptions & ParseTranscriptOptions = {},
): Promise<Map<number, StoryResult | undefined>> {
  return bulkResultsOf(
    client,
    '/stories-results',
    runIds,
    (entry) => (entry.error !== undefined && entry.audio_url === undefined ? undefined : storyResult(entry, options)),
    options,
  );
}

/** `POST /translated-story/{run_id}`: starts translating a story's narration. */
export async function createTranslatedStory(
  client: HttpRequester,
  runId: number,
  targetLanguage: Language,
  options?: RequestOptions,
): Promise<CreatedTask & { message: string | undefined }> {
  const json = await tagsToIds(
    client,
    validate(translatedStorySchema, { targetLanguage }),
    [{ wire: 'target_language', side: 'target', field: 'targetLanguage' }],
    callOptions(options),
  );
  const raw = asObject(await call(client, 'POST', runPath('/translated-story', runId), 'create', options, { json }), 'POST /translated-story');
  return { ...parseCreated(raw, 'POST /translated-story'), message: optionalString(raw.message) };
}

export function getTranslatedStoryStatus(client: HttpRequester, taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
  return getTaskStatus(client, 'translated-story', taskId, options);
}

/** `GET /translated-story-result/{run_id}/{target_language}`. */
export async function getTranslatedStoryResult(
  client: HttpRequester,
  runId: number,
  targetLanguage: Language,
  options: StoryResultOptions = {},
): Promise<StoryResult> {
  validate(languageRef(), targetLanguage, ['targetLanguage']);
  const id = await catalogOf(client).idOf(targetLanguage, 'target', 'targetLanguage', callOptions(options));
  const query = options.includeTranscript === undefined ? undefined : { include_transcript: String(options.includeTranscript) };
  const raw = asObject(
    await call(client, 'GET', `${runPath('/translated-story-result', runId)}/${id}`, 'read', options, query ? { query } : {}),
    'GET /translated-story-result',
  );
  return storyResult(raw, options);
}
