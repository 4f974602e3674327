/**
 * What every endpoint function shares: the request options a call passes on, paths with
 * checked ids, the answer of a creation (`CreatedTask`), the generic task status and wait of
 * `task-kinds.ts`, bulk lookups (`POST /*-results`), camelCase results with the wire body in
 * `raw`, and result downloads (resumable, opened once their first bytes arrived).
 *
 * Request kinds (see `retry.ts`): `create` for requests that start paid work, `delete` for
 * removals, `read` for everything else (bulk lookups included: they change nothing).
 */
import { Readable } from 'node:stream';
import { AbortError, ProtocolError, ValidationError } from '../errors.js';
import type { AudioDownloadOptions, FlacDownloadRequest, HttpMethod, HttpRequester, RequestOptions, RequestSpec } from './requester.js';
import type { FlacDownloadStream } from './flac-download-stream.js';
import { runIdParam, runIdsSchema, taskIdParam } from './schemas.js';
import { TASK_KIND_SPECS, type TaskKind } from './task-kinds.js';
import { parseTaskStatus, readyInMsOf, waitForTask, type CompletedTask, type TaskStatusResponse, type WaitOptions } from './tasks.js';
import type { Check } from './validation.js';
import { validate } from './validation.js';
import { camelizeKeys, isPlainObject } from './wire.js';

/** Options of a call that creates a task and waits for it. */
export interface TaskCallOptions extends RequestOptions, Omit<WaitOptions, 'signal'> {}

/** The answer of a creation endpoint. */
export interface CreatedTask {
  taskId: string;
  /** Some creation answers carry a run id already; usually null. */
  runId: number | null;
  raw: Record<string, unknown>;
}

/** The request options of `options` (and nothing else), to pass on to a request. */
export function callOptions(options: RequestOptions = {}): RequestOptions {
  const { signal, headersTimeoutMs, bodyTimeoutMs, retry, onUploadProgress } = options;
  return { signal, headersTimeoutMs, bodyTimeoutMs, retry, onUploadProgress };
}

export function asObject(value: unknown, what: string): Record<string, unknown> {
  if (!isPlainObject(value)) {
    throw new ProtocolError(`${what} answered ${value === null ? 'null' : Array.isArray(value) ? 'a list' : typeof value} where a JSON object was expected.`);
  }
  return value;
}

export function asArray(value: unknown, what: string): unknown[] {
  if (!Array.isArray(value)) throw new ProtocolError(`${what} answered ${value === null ? 'null' : typeof value} where a JSON list was expected.`);
  return value;
}

/** A JSON answer in camelCase, with the wire body kept in `raw`. */
export function camelResult<T>(raw: Record<string, unknown>): T & { raw: Record<string, unknown> } {
  return { ...(camelizeKeys(raw) as T), raw };
}

export function parseCreated(raw: unknown, what: string): CreatedTask {
  const body = asObject(raw, what);
  const id = body.task_id;
  if ((typeof id !== 'string' || id === '') && typeof id !== 'number') {
    throw new ProtocolError(`${what} answered without a task_id.`);
  }
  const runId = body.run_id;
  return { taskId: String(id), runId: typeof runId === 'number' ? runId : null, raw: body };
}

/** `prefix/{task_id}`, the id checked and percent-encoded. */
export function taskPath(prefix: string, taskId: string): string {
  validate(taskIdParam, taskId, ['taskId']);
  return `${prefix}/${encodeURIComponent(taskId)}`;
}

/** `prefix/{run_id}`, the id checked. */
export function runPath(prefix: string, runId: number): string {
  validate(runIdParam, runId, ['runId']);
  return `${prefix}/${runId}`;
}

/** A path parameter checked by `check`, named `field` in errors. */
export function checkedParam<T>(check: Check, value: T, field: string): T {
  return validate<T>(check, value, [field]);
}

/** One JSON request: the answer as the service sent it (redacted). */
export function call(
  client: HttpRequester,
  method: HttpMethod,
  path: string,
  kind: RequestSpec['kind'],
  options: RequestOptions | undefined,
  extra: Pick<RequestSpec, 'json' | 'multipart' | 'query' | 'onHeaders'> = {},
): Promise<unknown> {
  return client.requestJson<unknown>({ method, path, kind, ...extra, ...callOptions(options) });
}

/** A creation: sends the request and reads the task id of its answer. */
export async function createTask(
  client: HttpRequester,
  path: string,
  options: RequestOptions | undefined,
  body: Pick<RequestSpec, 'json' | 'multipart' | 'query'>,
): Promise<CreatedTask> {
  return parseCreated(await call(client, 'POST', path, 'create', options, body), `POST ${path}`);
}

/** `GET {path}/{task_id}` of a task kind (see `task-kinds.ts`). */
export async function getTaskStatus(client: HttpRequester, kind: TaskKind, taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
  const spec = TASK_KIND_SPECS[kind];
  if (spec === undefined) throw new ValidationError('kind', `one of ${Object.keys(TASK_KIND_SPECS).join(', ')}`, String(kind));
  let readyInMs: number | undefined;
  const raw = await call(client, 'GET', taskPath(spec.path, taskId), 'read', options, { onHeaders: (headers) => (readyInMs = readyInMsOf(headers)) });
  const status = parseTaskStatus(taskId, raw);
  return readyInMs === undefined || status.status !== 'PENDING' ? status : { ...status, readyInMs };
}

/**
 * The wait of a task: the client's polling for `profile`, with the call's overrides, and the
 * call's retry setting (else the client's) spacing status reads after a failure.
 */
export function waitSettings(client: HttpRequester, options: TaskCallOptions, profile: 'speech' | 'longMedia'): WaitOptions {
  const base = client.pollingFor(options.profile ?? profile);
  return {
    ...base,
    initialIntervalMs: options.initialIntervalMs ?? base.initialIntervalMs,
    maxIntervalMs: options.maxIntervalMs ?? Math.max(base.maxIntervalMs, options.initialIntervalMs ?? 0),
    factor: options.factor ?? base.factor,
    maxWaitMs: options.maxWaitMs ?? base.maxWaitMs,
    // A server that announced itself paces the polls: its first status read tells when to read again.
    readAtOnce: options.readAtOnce ?? client.emulatorVersion !== undefined,
    signal: options.signal,
    onProgress: options.onProgress,
    onReadFailure: options.onReadFailure,
    retry: options.retry !== undefined ? options.retry : client.retrySetting?.(),
  };
}

/**
 * Waits for a task whose status is read with `getStatus` (any feature), with the client's
 * polling. Each status request is one attempt (`retry: false`): the wait itself repeats a failed
 * read, until its deadline rather than a count (see `tasks.ts`).
 */
export function waitFor(
  client: HttpRequester,
  taskId: string,
  getStatus: (taskId: string, options: RequestOptions) => Promise<TaskStatusResponse>,
  options: TaskCallOptions = {},
  profile: 'speech' | 'longMedia' = 'speech',
): Promise<CompletedTask> {
  const req = callOptions(options);
  return waitForTask(taskId, (id, signal) => getStatus(id, { ...req, retry: false, signal }), waitSettings(client, options, profile));
}

/** Waits for a task of `kind`, polled with its profile (unless `options.profile` says otherwise). */
export function waitForTaskOf(client: HttpRequester, kind: TaskKind, taskId: string, options: TaskCallOptions = {}): Promise<CompletedTask> {
  return waitFor(client, taskId, (id, o) => getTaskStatus(client, kind, id, o), options, TASK_KIND_SPECS[kind].profile);
}

/** Creates a task of `kind` with `create`, then waits for its run. */
export async function createAndWait(
  client: HttpRequester,
  kind: TaskKind,
  create: (options: RequestOptions) => Promise<CreatedTask>,
  options: TaskCallOptions = {},
): Promise<CompletedTask> {
  const task = await create(callOptions(options));
  return waitForTaskOf(client, kind, task.taskId, options);
}

/**
 * The entries of a bulk answer by integer run id: an object answer is keyed by run id (keys
 * are trimmed; an entry whose key is not a number is kept when it names its `run_id`), a list
 * answer by each entry's `run_id`. A value that is not an object is kept as `{value}`.
 */
export function parseBulkAnswer(raw: unknown, what: string): Map<number, Record<string, unknown>> {
  const out = new Map<number, Record<string, unknown>>();
  const entries: [string | undefined, unknown][] = Array.isArray(raw) ? raw.map((v) => [undefined, v]) : Object.entries(asObject(raw, what));
  for (const [key, value] of entries) {
    const entry = isPlainObject(value) ? value : { value };
    const fromKey = key !== undefined && /^\d+$/.test(key.trim()) ? Number(key.trim()) : undefined;
    const runId = fromKey ?? (typeof entry.run_id === 'number' ? entry.run_id : undefined);
    if (runId !== undefined) out.set(runId, entry);
  }
  return out;
}

/** `POST {path}` with `{run_ids}` (2 to 5 distinct ids): the answer's entries by integer run id. */
export async function bulkLookup(
  client: HttpRequester,
  path: string,
  runIds: number[],
  options?: RequestOptions,
): Promise<Map<number, Record<string, unknown>>> {
  const json = validate<Record<string, unknown>>(runIdsSchema, { runIds });
  return parseBulkAnswer(await call(client, 'POST', path, 'read', options, { json }), `POST ${path}`);
}

/**
 * A bulk lookup's results parsed by `parse`: a run whose entry does not parse (unknown,
 * unfinished, failed: `{run_id, status, error}`) maps to undefined.
 */
export async function bulkResultsOf<T>(
  client: HttpRequester,
  path: string,
  runIds: number[],
  parse: (entry: Record<string, unknown>, runId: number) => T | undefined,
  options?: RequestOptions,
): Promise<Map<number, T | undefined>> {
  const out = new Map<number, T | undefined>();
  for (const [runId, entry] of await bulkLookup(client, path, runIds, options)) {
    let result: T | undefined;
    try {
      result = parse(entry, runId);
    } catch {
      result = undefined;
    }
    out.set(runId, result);
  }
  return out;
}

/** A string field, or undefined when absent or empty. */
export function optionalString(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/* ----------------------------------------------------------------------------------------- */
/* Downloads                                                                                 */

/** URL field names of `file_url`-style answers, in order of preference. */
const URL_FIELDS = ['output_url', 'audio_url', 'file_url', 'url'] as const;

/** The URL of a `file_url` answer, whichever field it is in. */
export function pickFileUrl(raw: Record<string, unknown>, runId: number): string {
  for (const field of URL_FIELDS) {
    const value = raw[field];
    if (typeof value === 'string' && value !== '') return value;
  }
  throw new ProtocolError(`The file_url answer for run ${runId} has none of ${URL_FIELDS.join(', ')}.`);
}

/** A bulk entry's presigned URL (`output_url`, `audio_url`, ...) as an `AudioFileUrl`-shaped value. */
export function fileUrlEntry(entry: Record<string, unknown>, runId: number): { url: string; raw: Record<string, unknown> } {
  return { url: pickFileUrl(entry, runId), raw: entry };
}

export function downloadOptions(options: AudioDownloadOptions): Omit<FlacDownloadRequest, 'url'> {
  const { signal, headersTimeoutMs, bodyTimeoutMs, retry, decode, maxAttempts, retryDelayMs } = options;
  return { signal, headersTimeoutMs, bodyTimeoutMs, retry, decode, maxAttempts, retryDelayMs };
}

/**
 * Starts `stream` and waits until its first bytes arrived (for a FLAC, its header), or it ended
 * empty. A failure before that rejects with the stream's error (the stream is destroyed by then).
 */
export function firstBytes(stream: FlacDownloadStream): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const done = (error?: unknown): void => {
      stream.off('format', onReady);
      stream.off('readable', onReady);
      stream.off('error', onError);
      stream.off('close', onClose);
      if (error === undefined) resolve();
      else reject(error);
    };
    const onReady = (): void => done();
    const onError = (error: Error): void => done(error);
    const onClose = (): void => done(new AbortError('The download was closed before its first bytes arrived.'));
    stream.on('format', onReady);
    stream.on('readable', onReady);
    stream.on('error', onError);
    stream.on('close', onClose);
    stream.read(0);
  });
}

/**
 * A result file of any format (dubbed audio or video, a transcript file, a story's narration) at
 * `url`, byte for byte, as a resumable download opened once its first bytes arrived. `refreshUrl` gives a fresh URL when the one in
 * hand expired (403). Without a requester that opens resumable downloads, a `ValidationError`.
 */
export async function openResultDownload(
  client: HttpRequester,
  url: string,
  refreshUrl: (() => Promise<string>) | undefined,
  options: AudioDownloadOptions = {},
): Promise<FlacDownloadStream> {
  if (!client.openFlacDownload) {
    throw new ValidationError('client', 'a requester that opens downloads (openFlacDownload), such as LocalizationClient', 'one without');
  }
  const audio = client.openFlacDownload({ url, ...(refreshUrl ? { refreshUrl } : {}), ...downloadOptions(options), decode: false, content: 'any' });
  await firstBytes(audio);
  return audio;
}

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
