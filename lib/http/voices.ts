/**
 * Voices: `GET /list-voices`, `POST /create-custom-voice` (a reference recording uploaded as
 * multipart, streamed from a path, Buffer, Blob or Readable), and the text-to-voice flow
 * (`POST /text-to-voice`: a voice from a description; its result is a list of preview URLs).
 * Deleting a custom voice is `deleteVoice` (below). A custom voice can be used at once
 * as `RealtimeTranslateStream({ voiceId })` with the key that created it.
 */
import { ProtocolError, ValidationError } from '../errors.js';
import type { HttpRequester, RequestOptions } from './requester.js';
import {
  asArray,
  asObject,
  call,
  callOptions,
  createAndWait,
  createTask,
  getTaskStatus,
  runPath,
  type CreatedTask,
  type TaskCallOptions,
} from './endpoint-kit.js';
import type { Language, ProjectFields } from './endpoints.js';
import { tagsToIds } from './languages.js';
import { multipartBody, type FieldValue, type Upload } from './multipart.js';
import { customVoiceSchema, textToVoiceSchema, voiceIdParam } from './schemas.js';
import type { TaskStatusResponse } from './tasks.js';
import { validate } from './validation.js';
import { camelizeKeys, isPlainObject } from './wire.js';

/** A voice of `GET /list-voices`. Fields other than `id` and `voiceName` may be null. */
export interface Voice {
  id: number;
  voiceName: string;
  /** 0 unknown, 1 male, 2 female, 9 not applicable. */
  gender: number | null;
  age: number | null;
  /** Numeric language id of the voice's reference. */
  language: number | null;
  description: string | null;
  transcript: string | null;
  isPublished: boolean | null;
  /** A URL of the voice's sample, when the service gives one. */
  signedUrl: string | null;
  raw: Record<string, unknown>;
}

/** `POST /create-custom-voice`. */
export interface CustomVoiceRequest {
  /** The reference recording: a file path, Buffer, Blob, Readable, or one with a `filename`. */
  file: Upload;
  voiceName: string;
  /** 0 unknown, 1 male, 2 female, 9 not applicable. */
  gender: 0 | 1 | 2 | 9;
  description?: string | null;
  /** Consent to offer the voice to others in the service's marketplace. */
  publishVoiceToMarketPlace?: boolean | null;
  age?: number;
  /** The recording's language: a locale tag (converted through the language lists) or an id. */
  language?: Language | null;
  /** Clean the reference recording up before cloning. */
  enhanceAudio?: boolean | null;
}

export interface CreatedVoice {
  voiceId: number;
  raw: Record<string, unknown>;
}

/** `POST /text-to-voice`: a voice made from a description, spoken with `text` in the previews. */
export interface TextToVoiceRequest extends ProjectFields {
  text: string;
  /** At least 100 characters (the service does not process shorter descriptions). */
  voiceDescription: string;
}

export interface TextToVoiceResult {
  /** URLs of the preview recordings (presigned, they expire). */
  previews: string[];
  raw: Record<string, unknown>;
}

function nullableNumber(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

function nullableString(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

/** Reads one voice record; undefined when it has no numeric id. */
export function parseVoice(raw: unknown): Voice | undefined {
  if (!isPlainObject(raw)) return undefined;
  const id = typeof raw.id === 'number' ? raw.id : typeof raw.voice_id === 'number' ? raw.voice_id : undefined;
  if (id === undefined || !Number.isSafeInteger(id)) return undefined;
  const camel = camelizeKeys(raw) as Record<string, unknown>;
  return {
    id,
    voiceName: nullableString(camel.voiceName) ?? nullableString(camel.name) ?? `Voice ${id}`,
    gender: nullableNumber(camel.gender),
    age: nullableNumber(camel.age),
    language: nullableNumber(camel.language),
    description: nullableString(camel.description),
    transcript: nullableString(camel.transcript),
    isPublished: typeof camel.isPublished === 'boolean' ? camel.isPublished : null,
    signedUrl: nullableString(camel.signedUrl),
    raw,
  };
}

/** `GET /list-voices`: the voices the key may use (library voices and its own); records without an id are skipped. */
export async function listVoices(client: HttpRequester, options?: RequestOptions): Promise<Voice[]> {
  const list = asArray(await call(client, 'GET', '/list-voices', 'read', options), 'GET /list-voices');
  return list.map(parseVoice).filter((v): v is Voice => v !== undefined);
}

/**
 * `POST /create-custom-voice`: clones a voice from a reference recording, uploaded as it is
 * read. A creation: retried only where the service surely did not act, and never once a
 * Readable's bytes were sent.
 */
export async function createCustomVoice(client: HttpRequester, request: CustomVoiceRequest, options?: RequestOptions): Promise<CreatedVoice> {
  if (request === null || typeof request !== 'object' || request.file === undefined) {
    throw new ValidationError('file', 'a reference recording: a file path, Buffer, Blob or Readable', 'nothing');
  }
  const { file, ...fields } = request;
  const wire = await tagsToIds(
    client,
    validate<Record<string, unknown>>(customVoiceSchema, fields),
    [{ wire: 'language', side: 'source', field: 'language' }],
    callOptions(options),
  );
  const multipart = await multipartBody(wire as Record<string, FieldValue>, [{ name: 'file', upload: file }]);
  const raw = asObject(await call(client, 'POST', '/create-custom-voice', 'create', options, { multipart }), 'POST /create-custom-voice');
  const voiceId = raw.voice_id;
  if (typeof voiceId !== 'number' || !Number.isSafeInteger(voiceId)) throw new ProtocolError('POST /create-custom-voice answered without a voice_id.');
  return { voiceId, raw };
}

/** `POST /text-to-voice`: starts making a voice from a description. */
export async function createTextToVoice(client: HttpRequester, request: TextToVoiceRequest, options?: RequestOptions): Promise<CreatedTask> {
  return createTask(client, '/text-to-voice', options, { json: validate(textToVoiceSchema, request) });
}

export function getTextToVoiceStatus(client: HttpRequester, taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
  return getTaskStatus(client, 'text-to-voice', taskId, options);
}

/** `GET /text-to-voice-result/{run_id}`: the preview URLs. */
export async function getTextToVoiceResult(client: HttpRequester, runId: number, options?: RequestOptions): Promise<TextToVoiceResult> {
  const raw = asObject(await call(client, 'GET', runPath('/text-to-voice-result', runId), 'read', options), 'GET /text-to-voice-result');
  const previews = Array.isArray(raw.previews) ? raw.previews.filter((p): p is string => typeof p === 'string' && p !== '') : [];
  return { previews, raw };
}

/** Text to voice in one call: creates the task, waits for it (speech polling), reads the previews. */
export async function textToVoice(
  client: HttpRequester,
  request: TextToVoiceRequest,
  options: TaskCallOptions = {},
): Promise<TextToVoiceResult & { taskId: string; runId: number }> {
  const run = await createAndWait(client, 'text-to-voice', (o) => createTextToVoice(client, request, o), options);
  return { taskId: run.taskId, runId: run.runId, ...(await getTextToVoiceResult(client, run.runId, callOptions(options))) };
}

/** `DELETE /delete-voice/{voice_id}`: permanent. 403 (`HttpForbiddenError`) for a voice the key does not own. */
export async function deleteVoice(client: HttpRequester, voiceId: number, options?: RequestOptions): Promise<{ status: 'ok' }> {
  validate(voiceIdParam, voiceId, ['voiceId']);
  // A deletion: retried only where the service surely did not act (a repeat after a lost
  // answer would be refused for a voice that was in fact deleted).
  const raw = asObject(await call(client, 'DELETE', `/delete-voice/${voiceId}`, 'delete', options), 'DELETE /delete-voice');
  if (raw.status !== 'ok') throw new ProtocolError(`DELETE /delete-voice/${voiceId} answered status ${JSON.stringify(raw.status)} instead of "ok".`);
  return { status: 'ok' };
}
