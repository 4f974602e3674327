/**
 * What the emulator's route handlers share: the context they run in (tasks, files, voices,
 * dictionaries and folders, audio caches, limits, a sleep tied to the response), the steps every
 * endpoint takes (a JSON or multipart body validated by the client's own schemas, path ids, the
 * caller's tasks and runs with 404/403 as the service answers them, known languages), and the
 * results' building blocks (the "translation" of a text, presigned result files, bulk lookups).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { collectIssues, type Check } from '../../http/validation.js';
import { outputTypeParam } from '../../http/schemas.js';
import { TASK_KIND_SPECS, type TaskKind } from '../../http/task-kinds.js';
import { EMULATOR_READY_IN_HEADER } from '../../http/tasks.js';
import { languageTag } from '../languages.js';
import { withArticle } from '../../options.js';
import type { VoiceRegistry } from '../voices.js';
import type { PcmCache } from './audio.js';
import type { FileStore } from './files.js';
import type { LibraryStore } from './library-store.js';
import type { StreamStore } from './stream-store.js';
import { MultipartError, multipartBoundary, readMultipart, type FormFile, type ParsedForm } from './multipart.js';
import {
  BodyTooLargeError,
  issuesToDetail,
  parseJsonBody,
  readBody,
  sendDetail,
  sendError,
  sendJson,
  sendTooLarge,
  writeWithBackpressure,
  type DetailEntry,
} from './respond.js';
import type { EmulatedTask, TaskNote, TaskStore } from './task-store.js';

export interface RouteContext {
  /** Say in status answers when a PENDING task will be final (`x-rt-translate-emulator-ready-in-ms`). */
  announce: boolean;
  tasks: TaskStore;
  files: FileStore;
  /** Stock and custom voices, shared with the realtime side. */
  voices: VoiceRegistry;
  /** Dictionaries and folders per API key. */
  library: LibraryStore;
  /** Live streams. */
  streams: StreamStore;
  pcm: PcmCache;
  /** Sample rate of task results (FLAC). */
  resultSampleRate: number;
  /** Default sample rate of `/tts-stream`. */
  streamSampleRate: number;
  streamChunkMs: number;
  streamDelayMs: number;
  maxJsonBytes: number;
  maxUploadBytes: number;
  /** The emulator's clock, ms since the epoch. */
  now(): number;
  /** Resolves after `ms`, or at once when `res` closes or the emulator shuts down. */
  sleep(ms: number, res: ServerResponse): Promise<void>;
}

/** A file of a multipart upload as the emulator received it (for `GET /_emulator/requests`). */
export interface UploadRecord {
  name: string;
  filename: string;
  size: number;
  sha256: string;
}

export interface RouteRequest {
  req: IncomingMessage;
  res: ServerResponse;
  key: string;
  url: URL;
  params: string[];
  /** The request's entry in the emulator's log, where uploads are noted. */
  log?: { uploads?: UploadRecord[] };
}

export type Handler = (ctx: RouteContext, r: RouteRequest) => Promise<void> | void;

export interface Route {
  method: string;
  pattern: RegExp;
  handler: Handler;
}

/** One path segment of a route pattern. */
export const SEGMENT = '([^/]+)';

/** A route on `path`, a pattern where each `{}` is one path segment. */
export function route(method: string, path: string, handler: Handler): Route {
  const pattern = new RegExp(`^${path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{\}/g, SEGMENT)}$`);
  return { method, pattern, handler };
}

/* ----------------------------------------------------------------------------------------- */
/* Bodies                                                                                    */

/** The JSON body checked by `schema` (wire names), or undefined after answering 413/422. */
export async function jsonBody(ctx: RouteContext, r: RouteRequest, schema: Check): Promise<Record<string, unknown> | undefined> {
  let body: Buffer;
  try {
    body = await readBody(r.req, ctx.maxJsonBytes);
  } catch (error) {
    if (error instanceof BodyTooLargeError) sendTooLarge(r.req, r.res, error.limit);
    else r.res.destroy();
    return undefined;
  }
  const parsed = parseJsonBody(body);
  if ('detail' in parsed) {
    sendDetail(r.res, parsed.detail);
    return undefined;
  }
  const { value, issues } = collectIssues(schema, parsed.value);
  if (issues.length > 0) {
    sendDetail(r.res, issuesToDetail(issues, 'body'));
    return undefined;
  }
  return value as Record<string, unknown>;
}

/** A multipart body's text fields checked by `schema` (form mode), and its files. */
export interface FormBody {
  fields: Record<string, unknown>;
  files: FormFile[];
}

/**
 * A `multipart/form-data` body, read as it streams (see `multipart.ts`), its text fields checked
 * by `schema`. `fileFields` names the file parts the endpoint reads, in order of preference;
 * `requireFile` answers 422 `Field required` at the first name when none came. Undefined after
 * answering 413/422.
 */
export async function formBody(ctx: RouteContext, r: RouteRequest, schema: Check, fileFields: string[], requireFile = true): Promise<FormBody | undefined> {
  const boundary = multipartBoundary(r.req.headers['content-type']);
  if (!boundary) {
    r.req.resume();
    sendDetail(r.res, [{ loc: ['body', fileFields[0] ?? 'file'], msg: 'Field required (send multipart/form-data)', type: 'missing' }]);
    return undefined;
  }
  let form: ParsedForm;
  try {
    form = await readMultipart(r.req, boundary, ctx.maxUploadBytes);
  } catch (error) {
    if (error instanceof BodyTooLargeError) sendTooLarge(r.req, r.res, error.limit);
    else if (error instanceof MultipartError) {
      sendDetail(r.res, [{ loc: ['body'], msg: `There was an error parsing the body: ${error.message}`, type: 'value_error' }]);
      r.res.once('finish', () => r.req.destroy());
    } else r.res.destroy();
    return undefined;
  }
  if (r.log) r.log.uploads = form.files.map(({ name, filename, size, sha256 }) => ({ name, filename, size, sha256 }));
  const raw: Record<string, unknown> = {};
  for (const [name, values] of form.fields) raw[name] = values.length === 1 ? values[0] : values;
  const { value, issues } = collectIssues(schema, raw, { form: true });
  const files = fileFields.flatMap((name) => form.files.filter((f) => f.name === name));
  const detail: DetailEntry[] = issuesToDetail(issues, 'body');
  if (requireFile && files.length === 0) detail.unshift({ loc: ['body', fileFields[0]!], msg: 'Field required', type: 'missing' });
  if (detail.length > 0) {
    sendDetail(r.res, detail);
    return undefined;
  }
  return { fields: value as Record<string, unknown>, files };
}

/* ----------------------------------------------------------------------------------------- */
/* Path parameters, tasks, runs                                                              */

/** A positive integer path parameter, or a 422 answered. */
export function intParam(r: RouteRequest, index: number, name: string): number | undefined {
  const raw = r.params[index] ?? '';
  if (!/^\d+$/.test(raw)) {
    sendDetail(r.res, [{ loc: ['path', name], msg: 'Input should be a valid integer, unable to parse string as an integer', type: 'int_parsing' }]);
    return undefined;
  }
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < 1) {
    sendDetail(r.res, [{ loc: ['path', name], msg: 'Input should be greater than or equal to 1', type: 'greater_than_equal' }]);
    return undefined;
  }
  return value;
}

/** A percent-encoded path segment decoded, or undefined when its encoding is malformed. */
export function decodeSegment(raw: string): string | undefined {
  try {
    return decodeURIComponent(raw);
  } catch {
    return undefined;
  }
}

/** The task named in the path, if it exists and belongs to the key (else 404/403 answered). */
export function ownedTask(ctx: RouteContext, r: RouteRequest, kind: TaskKind): EmulatedTask | undefined {
  const raw = r.params[0] ?? '';
  const id = decodeSegment(raw);
  if (id === undefined) {
    // No task has an id that is not valid percent-encoding: unknown, like any other id.
    sendError(r.res, 404, `No ${kind} task ${raw} (the task id is not valid percent-encoding).`);
    return undefined;
  }
  const task = ctx.tasks.task(id);
  if (!task || task.kind !== kind) {
    sendError(r.res, 404, `No ${kind} task ${id}.`);
    return undefined;
  }
  if (!ctx.tasks.ownedBy(task, r.key)) {
    sendError(r.res, 403, `Task ${id} belongs to another API key.`);
    return undefined;
  }
  return task;
}

/** Why a run has no result (`reason`, for bulk answers; `message`, for a 404/403), or undefined when it has one. */
function runProblem(
  ctx: RouteContext,
  task: EmulatedTask | undefined,
  key: string,
  kinds: readonly TaskKind[],
  runId: number,
): { status: 403 | 404; reason: string; message: string; state?: string } | undefined {
  if (!task) return { status: 404, reason: `Run ${runId} does not exist.`, message: `No run ${runId} with this result.` };
  if (!ctx.tasks.ownedBy(task, key)) return { status: 403, reason: `Run ${runId} does not exist.`, message: `Run ${runId} belongs to another API key.` };
  if (!kinds.includes(task.kind)) {
    const reason = `Run ${runId} is not ${withArticle(kinds.join(' or '))} run.`;
    return { status: 404, reason, message: `No run ${runId} with this result: ${reason}` };
  }
  const state = ctx.tasks.status(task);
  if (state !== 'SUCCESS') {
    const reason = state === 'PENDING' ? 'The run is not finished yet.' : (task.outcome.message ?? `The run ended with ${state}.`);
    return { status: 404, reason, message: `Run ${runId} has no result: its task is ${state}.`, state };
  }
  return undefined;
}

/** The finished, successful run named by path parameter `index` (else 404/403 answered). */
export function successfulRun(ctx: RouteContext, r: RouteRequest, kinds: readonly TaskKind[], index = 0): EmulatedTask | undefined {
  const runId = intParam(r, index, 'run_id');
  if (runId === undefined) return undefined;
  const task = ctx.tasks.run(runId);
  const problem = runProblem(ctx, task, r.key, kinds, runId);
  if (problem) {
    sendError(r.res, problem.status, problem.message);
    return undefined;
  }
  return task;
}

/** `{task_id, run_id: null}`: a creation's answer. */
export function created(r: RouteRequest, task: EmulatedTask): void {
  sendJson(r.res, 200, { task_id: task.id, run_id: null });
}

/** `GET {status path}/{task_id}` of a task kind. */
export function statusOf(kind: TaskKind): Handler {
  return (ctx, r) => {
    const task = ownedTask(ctx, r, kind);
    if (!task) return;
    r.res.once('finish', () => ctx.tasks.polled(task));
    const body = ctx.tasks.statusBody(task);
    if (ctx.announce && body.status === 'PENDING') r.res.setHeader(EMULATOR_READY_IN_HEADER, String(ctx.tasks.readyInMs(task)));
    sendJson(r.res, 200, body);
  };
}

/** A status route per task kind, at its path and every alias (see `task-kinds.ts`). */
export function statusRoutes(): Route[] {
  return Object.entries(TASK_KIND_SPECS).flatMap(([kind, spec]) =>
    [spec.path, ...('aliases' in spec ? spec.aliases : [])].map((path) => route('GET', `${path}/{}`, statusOf(kind as TaskKind))),
  );
}

/**
 * `POST {path}` bulk lookup of `kinds` runs: `{run_id: result}` for the finished runs of the
 * key, `{run_id, status, error}` for the others (unknown, another key's, another kind's,
 * unfinished, failed). `list` answers a list of the results instead (project setup does).
 */
export function bulkResults(
  schema: Check,
  kinds: readonly TaskKind[],
  result: (ctx: RouteContext, task: EmulatedTask) => Record<string, unknown>,
  list = false,
): Handler {
  return async (ctx, r) => {
    const body = await jsonBody(ctx, r, schema);
    if (!body) return;
    const out: Record<string, Record<string, unknown>> = {};
    const found: Record<string, unknown>[] = [];
    for (const runId of body.run_ids as number[]) {
      const task = ctx.tasks.run(runId);
      const problem = runProblem(ctx, task, r.key, kinds, runId);
      if (problem) {
        out[String(runId)] = { run_id: runId, status: problem.state ?? 'ERROR', error: problem.reason };
        continue;
      }
      const value = result(ctx, task!);
      out[String(runId)] = value;
      found.push(value);
    }
    sendJson(r.res, 200, list ? found : out);
  };
}

/* ----------------------------------------------------------------------------------------- */
/* Languages                                                                                 */

/**
 * Answers 422 when a value of `fields` of a valid body is not one `known` accepts, each with
 * `message(value)`. `fields` are wire names; list values are checked item by item. Returns false
 * after answering.
 */
function knownValues(
  r: RouteRequest,
  body: Record<string, unknown>,
  fields: string[],
  known: (value: unknown) => boolean,
  message: (value: unknown) => string,
): boolean {
  const detail: DetailEntry[] = [];
  for (const field of fields) {
    const value = body[field];
    const items = Array.isArray(value) ? value.map((v, i) => [v, [field, i]] as const) : [[value, [field]] as const];
    for (const [item, loc] of items) {
      if (item === undefined || item === null || known(item)) continue;
      detail.push({ loc: ['body', ...loc], msg: message(item), type: 'value_error' });
    }
  }
  if (detail.length > 0) sendDetail(r.res, detail);
  return detail.length === 0;
}

/**
 * Answers 422 when a language field of a valid body names a language the emulator does not
 * know (an id not in its lists, a well-formed tag such as `xx-yy`), as the service does.
 * Returns false after answering.
 */
export function knownLanguages(r: RouteRequest, body: Record<string, unknown>, fields: string[]): boolean {
  return knownValues(
    r,
    body,
    fields,
    (value) => languageTag(value) !== undefined,
    (value) => `Value error, unsupported language ${JSON.stringify(value)}: see /source-languages and /target-languages`,
  );
}

/**
 * Answers 422 when a voice field of a valid body names a voice the key cannot speak with: the
 * interface takes "a public or custom voice", so an id that is neither, or another key's custom
 * voice (which the key cannot see either), is refused. Returns false after answering.
 */
export function usableVoices(ctx: RouteContext, r: RouteRequest, body: Record<string, unknown>, fields: string[]): boolean {
  return knownValues(
    r,
    body,
    fields,
    (value) => typeof value === 'number' && ctx.voices.usableBy(r.key, value),
    (value) => `Value error, voice ${JSON.stringify(value)} is not a voice of this API key: give a public voice or one of its custom voices (see /list-voices)`,
  );
}

/** The emulator's "translation": the text, tagged with the target language's tag. */
export function emulatedTranslation(text: string, target: unknown): string {
  return `[${languageTag(target) ?? String(target)}] ${text}`;
}

/* ----------------------------------------------------------------------------------------- */
/* Result files                                                                              */

/**
 * A presigned URL of a stored result, storing it on first use (its path a note of the task, so a
 * later emulator on the same state directory finds it); fresh expiry each call.
 */
export function storedUrl(ctx: RouteContext, task: EmulatedTask, slot: string, bytes: () => Buffer, name: string, contentType = 'audio/flac'): string {
  const path = task.notes[`file:${slot}`];
  if (typeof path === 'string' && ctx.files.get(path)) return ctx.files.presign(path);
  const file = ctx.files.put(bytes(), contentType, name);
  ctx.tasks.note(task, `file:${slot}`, file.path);
  return file.url;
}

/** A value kept with a task's record (`TaskStore.note`), made on first use. */
export function noted<T extends TaskNote>(ctx: RouteContext, task: EmulatedTask, key: string, make: () => T): T {
  if (!(key in task.notes)) ctx.tasks.note(task, key, make());
  return task.notes[key] as T;
}

/**
 * `GET {prefix}/{run_id}?output_type=raw_bytes|file_url`: the result audio as bytes, or a
 * presigned URL in `urlField`. Shared by `/tts-result` and `/text-to-sound-result`.
 */
export function resultAudio(
  kinds: EmulatedTask['kind'][],
  audio: (ctx: RouteContext, task: EmulatedTask) => { bytes: Buffer; contentType: string; name: string },
  urlField: (task: EmulatedTask) => string,
): Handler {
  return async (ctx, r) => {
    const outputType = r.url.searchParams.get('output_type') ?? 'raw_bytes';
    const { issues } = collectIssues(outputTypeParam, outputType, { loc: ['output_type'] });
    if (issues.length > 0) {
      sendDetail(r.res, issuesToDetail(issues, 'query'));
      return;
    }
    const task = successfulRun(ctx, r, kinds);
    if (!task) return;
    const file = audio(ctx, task);
    if (outputType === 'file_url') {
      sendJson(r.res, 200, { [urlField(task)]: storedUrl(ctx, task, 'result', () => file.bytes, file.name, file.contentType) });
      return;
    }
    r.res.writeHead(200, { 'content-type': file.contentType, 'content-length': file.bytes.length });
    await streamBytes(ctx, r.res, file.bytes, 16 * 1024, 0);
  };
}

/** A value made once per task and kept in its cache. */
export function cached<T>(task: EmulatedTask, slot: string, make: () => T): T {
  if (!task.cache.has(slot)) task.cache.set(slot, make());
  return task.cache.get(slot) as T;
}

/** Streams `bytes` in `chunk`-byte pieces with `delayMs` between them; stops if the client goes. */
export async function streamBytes(ctx: RouteContext, res: ServerResponse, bytes: Buffer, chunk: number, delayMs: number): Promise<void> {
  for (let offset = 0; offset < bytes.length; offset += chunk) {
    if (!(await writeWithBackpressure(res, bytes.subarray(offset, offset + chunk)))) return;
    if (delayMs > 0 && offset + chunk < bytes.length) await ctx.sleep(delayMs, res);
    if (res.destroyed) return;
  }
  res.end();
}

/** A query parameter checked by `check` (text read as in a form): null when absent, undefined after answering 422. */
export function queryParam<T>(r: RouteRequest, name: string, check: Check): T | null | undefined {
  const raw = r.url.searchParams.get(name);
  if (raw === null) return null;
  const { value, issues } = collectIssues(check, raw, { loc: [name], form: true });
  if (issues.length > 0) {
    sendDetail(r.res, issuesToDetail(issues, 'query'));
    return undefined;
  }
  return value as T;
}
