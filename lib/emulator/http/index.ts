/**
 * The emulator's HTTP side: every endpoint of the interface's HTTP part and every one the
 * official SDK calls beyond it, at the root of the emulator's base URL and under `/apis` too
 * (the production base URL ends in `/apis`; clients treat the base URL as a prefix). The routes
 * are in `routes-*.ts` by area; `routes.ts` lists them.
 *
 * Order of checks for a request: control endpoint (`/_emulator/...`, no key needed) → armed
 * fault → presigned files (`/_files/...`, no key) → API key (`x-api-key`; 401 `{error, status}`
 * when missing or unknown) → rate limit (429 `{error, status}` with `Retry-After`) → route
 * (404 unknown path, 405 wrong method, 422 `{detail: [{loc, msg, type}]}` for invalid input,
 * 403 `{error, status}` for a task, run or voice of another key).
 *
 * Behaviour:
 * - Every answer names the emulator and its version (`x-rt-translate-emulator`), and the status
 *   of a PENDING task says in how many ms it will be final (`x-rt-translate-emulator-ready-in-ms`),
 *   unless `announce` is false. The service sends neither.
 * - Tasks stay PENDING for `taskMs`, then reach SUCCESS, or the failure status chosen by a
 *   marker in the request text (`[[ERROR]]`, `[[TIMEOUT]]`, `[[PAYMENT_REQUIRED]]`) or by
 *   `POST /_emulator/task-outcomes`.
 * - Results are real FLAC from `synthesizeFlac` (length follows the text, STREAMINFO MD5 set);
 *   `file_url` answers and separated tracks are presigned `/_files/...` URLs that expire after
 *   `urlTtlS` (403 afterwards). The translated flow answers `{audio_url}`, the legacy flow
 *   `{output_url}` (both forms seen from the real service).
 * - The "translation" of text T into L is `[L] T`.
 * - `/tts-stream` streams wav, flac, pcm_* and mp3 progressively (chunks of `ttsStreamChunkMs`
 *   of audio, `ttsStreamDelayMs` apart, PCM chunks ending mid-sample as the real service's do),
 *   with `X-Credits-Required` = characters of text. No format means mp3, the service's default
 *   (LAME compiled to WebAssembly, 64 kbit/s CBR; the sample rate must be one MP3 carries).
 *   adts answers 422 "not supported by the emulator": there is no AAC encoder to make it.
 * - Languages: the emulator's table (`../languages.ts`, the documented ids: 1 en-us, 4 ar-sa,
 *   31 de-de, 54 es-es, 76 fr-fr, 88 ja-jp, 139 zh-cn); a tag or id not in it is 422.
 * - `media_url` must be an absolute http(s) URL; it is never fetched.
 * - `POST /audio-separation`: multipart/form-data with one audio file part (any field name;
 *   WAV, MP3, FLAC or AAC by content), at most `maxUploadBytes` (413 beyond).
 *   `POST /audio-separation-results` always answers 200; runs that are unknown, of another key,
 *   of another kind, unfinished or failed carry `{run_id, status, error}` instead of URLs.
 * - Voices live in the shared `VoiceRegistry` (`../voices.ts`): `clonedVoices` seeds it, and
 *   voices made with `POST /create-custom-voice` or text-to-voice belong to the key that made
 *   them, on the realtime side too. `DELETE /delete-voice/{id}`: 200 `{status: "ok"}` for a
 *   voice the key owns (then gone on both sides), 403 for any other voice.
 * - `POST /sub` has no published body: it takes the project fields (`media_url`,
 *   `source_language`, `target_languages`); its transcript is `GET /transcript/{run}/{lang}`.
 *
 * Control endpoint (JSON, no API key; for tests and users):
 * - `POST /_emulator/faults` with one fault or an array; `GET` lists, `DELETE` clears. Fields:
 *   `status` (answer the next `count` requests with it, before any work, with `Retry-After:
 *   retryAfter` seconds on 429/503, default 1, `null` for none; with `afterBody: true`, once the
 *   whole request body was read), `dropAfterBytes` (handle the
 *   request, then cut the connection after that many body bytes; 0: before the headers),
 *   `stallMs` (hold the request that long before handling it; with `stallAfterBytes`, pause
 *   the body after that many bytes instead), `count` (default 1), `path` (path prefix) and
 *   `method` filters. Examples: `{"status": 503, "count": 2, "retryAfter": 1}`,
 *   `{"dropAfterBytes": 1000, "count": 1}`, `{"stallMs": 2000, "count": 1}`.
 * - `POST /_emulator/task-outcomes` `{status, count?, kind?, message?, exception_reason?}`: the
 *   next tasks created end with `status` (any string); `DELETE` clears.
 * - `POST /_emulator/tasks` `{kind, apiKey?, status?, message?, taskMs?, polls?, text?}`:
 *   creates a task directly (any kind of `task-kinds.ts`), PENDING for `taskMs` (default the
 *   emulator's) and its first `polls` status reads (default 0), and answers `{task_id, run_id}`.
 * - `POST /_emulator/file-faults`: replaces the file store's fault switches (`dropAfterBytes`,
 *   `stallAfterBytes`, `count`, `ignoreRange`; see `files.ts`).
 * - `POST /_emulator/realtime-faults`: a realtime fault now, `{refuse: N, status?, retryAfterS?}`
 *   (the next N handshakes; status 503 by default, 401 for a key refused), `{stall: N}` (the
 *   next N handshakes unanswered), `{drop: true, code?, reset?}` or `{halfOpen: true}` (every
 *   open session).
 * - `GET /_emulator/requests`: the last 500 requests `{method, path, status, uploads?}` (status
 *   0 when the connection was cut; `uploads`: each file of a multipart body as received,
 *   `{name, filename, size, sha256}`); `DELETE` clears.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { finished } from 'node:stream/promises';
import type { EmulatorContext, EmulatorPart } from '../context.js';
import { DEFAULT_STATE_MAX_BYTES, createFileStore, type FileStore, type FileStoreFaults } from './files.js';
import { FaultSwitch, checkFault, type FaultSpec } from './faults.js';
import { createRateLimiter, type RateLimiter } from './rate-limit.js';
import { BodyTooLargeError, parseJsonBody, readBody, sendError, sendJson } from './respond.js';
import { matchRoute, type RouteContext } from './routes.js';
import { PcmCache } from './audio.js';
import { TASK_KINDS, TaskStore, type TaskKind, type TaskRecord } from './task-store.js';
import { LibraryStore } from './library-store.js';
import { StreamStore } from './stream-store.js';
import type { UploadRecord } from './route-kit.js';
import { triggerRealtimeFault, type RealtimeFaultControl } from '../realtime.js';
import { EMULATOR_HEADER } from '../../http/tasks.js';
import { packageVersion } from '../../version.js';
import { numberOption } from '../../options.js';

export interface HttpEmulatorOptions {
  /** Time a task stays PENDING, ms. Default 2000. CLI: `--task-ms`. */
  taskMs?: number;
  /**
   * Say that the emulator answers: its version in `x-rt-translate-emulator` on every answer, and
   * on the status of a PENDING task the time until its outcome (`x-rt-translate-emulator-ready-in-ms`),
   * so the library's client polls at the emulator's pace. `false` answers as the service does,
   * without either header: clients keep their documented schedule. Default true.
   */
  announce?: boolean;
  /**
   * Status reads of each created task that answer PENDING, whatever the time (a read whose
   * answer was cut does not count). Default 0. For tests that must see PENDING, then the
   * outcome, on any machine: `taskMs: 0, taskPolls: 1`.
   */
  taskPolls?: number;
  /** Lifetime of presigned result URLs, seconds. Default 3600. CLI: `--url-ttl-s`. */
  urlTtlS?: number;
  /** Requests per second per API key before 429; 0 or undefined: unlimited. CLI: `--rate-limit`. */
  rateLimit?: number;
  /** Audio per `/tts-stream` chunk, ms. Default 100. */
  ttsStreamChunkMs?: number;
  /** Pause between `/tts-stream` chunks, ms. Default 20. */
  ttsStreamDelayMs?: number;
  /** Largest upload (multipart, streamed, so it is never held whole), bytes. Default 1 GiB. */
  maxUploadBytes?: number;
  /** Clock of tasks, rate limits and URL expiry, ms since the epoch. Default `Date.now`. */
  clock?: () => number;
  /** With a state directory: bytes of result files kept before the oldest are removed. Default 100 MiB. */
  stateMaxBytes?: number;
}

const CONTROL_PREFIX = '/_emulator/';
/** The path prefix of the service's own base URL, answered like the root. */
const API_PREFIX = '/apis';
const MAX_JSON_BYTES = 1024 * 1024;
const LOG_SIZE = 500;

function nonNegative(name: string, value: number | undefined, fallback: number): number {
  return numberOption(value, name, { min: 0, fallback });
}

interface LogEntry {
  method: string;
  path: string;
  status: number;
  /** The files of a multipart upload, as received: name, file name, size and SHA-256. */
  uploads?: UploadRecord[];
}

/** The HTTP part of the emulator, as the server runs it. */
export interface HttpPart extends EmulatorPart {
  handle(req: IncomingMessage, res: ServerResponse): void;
  /** Where the bytes of the stored file at `path` (`/_files/...`) are on disk, if there. */
  localPath(path: string): string | undefined;
}

/** `realtimeFaults`: what `POST /_emulator/realtime-faults` triggers. */
export function createHttpEmulator(options: HttpEmulatorOptions, context: EmulatorContext, realtimeFaults?: RealtimeFaultControl): HttpPart {
  const clock = options.clock ?? Date.now;
  const taskMs = nonNegative('taskMs', options.taskMs, 2000);
  const urlTtlS = nonNegative('urlTtlS', options.urlTtlS, 3600);
  const rateLimit = nonNegative('rateLimit', options.rateLimit, 0);
  const { state } = context;
  const files: FileStore = createFileStore(
    { urlTtlMs: urlTtlS * 1000, now: clock, state, maxBytes: nonNegative('stateMaxBytes', options.stateMaxBytes, DEFAULT_STATE_MAX_BYTES) },
    context.baseUrl,
  );
  const faults = new FaultSwitch();
  const limiter: RateLimiter | undefined = rateLimit > 0 ? createRateLimiter(rateLimit, clock) : undefined;
  const stored = state ? { tasks: state.records<TaskRecord>('tasks'), runs: state.records<{ task_id: string }>('runs') } : undefined;
  const tasks = new TaskStore(taskMs, clock, undefined, nonNegative('taskPolls', options.taskPolls, 0), stored);
  const log: LogEntry[] = [];
  const announce = options.announce !== false;
  const version = packageVersion();
  const sleepers = new Set<() => void>();
  const responses = new Set<ServerResponse>();
  let closed = false;

  const routeContext: RouteContext = {
    announce,
    tasks,
    files,
    voices: context.voices,
    library: new LibraryStore(clock),
    streams: new StreamStore(),
    pcm: new PcmCache(),
    resultSampleRate: 24_000,
    streamSampleRate: 24_000,
    streamChunkMs: nonNegative('ttsStreamChunkMs', options.ttsStreamChunkMs, 100) || 100,
    streamDelayMs: nonNegative('ttsStreamDelayMs', options.ttsStreamDelayMs, 20),
    maxJsonBytes: MAX_JSON_BYTES,
    maxUploadBytes: nonNegative('maxUploadBytes', options.maxUploadBytes, 1024 * 1024 * 1024),
    now: clock,
    sleep(ms, res) {
      return new Promise((resolve) => {
        let timer: NodeJS.Timeout | undefined;
        const done = (): void => {
          if (timer) clearTimeout(timer);
          res.off('close', done);
          sleepers.delete(done);
          resolve();
        };
        timer = setTimeout(done, ms);
        res.once('close', done);
        sleepers.add(done);
      });
    },
  };

  const record = (req: IncomingMessage, res: ServerResponse, path: string): LogEntry => {
    const entry: LogEntry = { method: req.method ?? 'GET', path, status: 0 };
    log.push(entry);
    if (log.length > LOG_SIZE) log.shift();
    responses.add(res);
    res.once('finish', () => {
      entry.status = res.statusCode;
    });
    res.once('close', () => {
      responses.delete(res);
    });
    return entry;
  };

  async function control(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const method = req.method ?? 'GET';
    const readJson = async (): Promise<unknown> => {
      try {
        const parsed = parseJsonBody(await readBody(req, MAX_JSON_BYTES));
        if ('detail' in parsed) {
          sendError(res, 400, 'The control body is not valid JSON.');
          return undefined;
        }
        return parsed.value;
      } catch (error) {
        sendError(res, error instanceof BodyTooLargeError ? 413 : 400, 'The control body could not be read.');
        return undefined;
      }
    };
    const name = path.slice(CONTROL_PREFIX.length);
    if (name === 'faults') {
      if (method === 'GET') return sendJson(res, 200, { faults: faults.list() });
      if (method === 'DELETE') {
        faults.clear();
        return sendJson(res, 200, { faults: [] });
      }
      if (method === 'POST') {
        const body = await readJson();
        if (body === undefined) return;
        const list = Array.isArray(body) ? body : [body];
        for (const spec of list) {
          const problem = checkFault(spec);
          if (problem) return sendError(res, 400, `Invalid fault: ${problem}.`);
        }
        for (const spec of list) faults.add(spec as FaultSpec);
        return sendJson(res, 200, { faults: faults.list() });
      }
    } else if (name === 'task-outcomes') {
      if (method === 'DELETE') {
        tasks.clearOutcomes();
        return sendJson(res, 200, { ok: true });
      }
      if (method === 'POST') {
        const body = (await readJson()) as Record<string, unknown> | undefined;
        if (body === undefined) return;
        const problem = checkOutcome(body);
        if (problem) return sendError(res, 400, `Invalid task outcome: ${problem}.`);
        tasks.queueOutcome(
          { status: body.status as string, message: body.message as string | undefined, exception_reason: body.exception_reason as string | undefined },
          (body.count as number | undefined) ?? 1,
          body.kind as TaskKind | undefined,
        );
        return sendJson(res, 200, { ok: true });
      }
    } else if (name === 'tasks') {
      if (method === 'POST') {
        const body = (await readJson()) as Record<string, unknown> | undefined;
        if (body === undefined) return;
        const problem = checkOutcome({ ...body, status: body.status ?? 'SUCCESS', kind: body.kind ?? 'missing' });
        if (problem) return sendError(res, 400, `Invalid task: ${problem}.`);
        const owner = typeof body.apiKey === 'string' ? body.apiKey : [...context.apiKeys][0]!;
        const outcome = body.status === undefined ? undefined : { status: body.status as string, message: body.message as string | undefined };
        if (body.taskMs !== undefined && !(typeof body.taskMs === 'number' && body.taskMs >= 0)) {
          return sendError(res, 400, 'Invalid task: taskMs must be a number >= 0.');
        }
        if (body.polls !== undefined && !(Number.isSafeInteger(body.polls) && (body.polls as number) >= 0)) {
          return sendError(res, 400, 'Invalid task: polls must be an integer >= 0.');
        }
        // A seeded task is final at once unless it asks otherwise (taskMs, polls).
        const task = tasks.create(body.kind as TaskKind, owner, { text: body.text }, outcome, body.taskMs as number | undefined, (body.polls as number | undefined) ?? 0);
        return sendJson(res, 200, { task_id: task.id, run_id: task.runId });
      }
    } else if (name === 'file-faults') {
      if (method === 'POST') {
        const body = await readJson();
        if (body === undefined) return;
        if (body === null || typeof body !== 'object' || Array.isArray(body)) return sendError(res, 400, 'File faults are a JSON object.');
        files.faults = { ...(body as FileStoreFaults) };
        return sendJson(res, 200, { faults: files.faults });
      }
    } else if (name === 'realtime-faults') {
      if (method === 'POST') {
        const body = await readJson();
        if (body === undefined) return;
        const problem = realtimeFaults ? triggerRealtimeFault(realtimeFaults, body) : 'this emulator has no realtime side';
        if (problem) return sendError(res, 400, `Invalid realtime fault: ${problem}.`);
        return sendJson(res, 200, { ok: true });
      }
    } else if (name === 'requests') {
      if (method === 'GET') return sendJson(res, 200, { requests: log });
      if (method === 'DELETE') {
        log.length = 0;
        return sendJson(res, 200, { requests: [] });
      }
    } else {
      return sendError(res, 404, `No control endpoint ${path}.`);
    }
    return sendError(res, 405, `Method ${method} is not allowed on ${path}.`);
  }

  function apiKeyOf(req: IncomingMessage): string | undefined {
    const value = req.headers['x-api-key'];
    const key = Array.isArray(value) ? value[0] : value;
    return key !== undefined && context.apiKeys.has(key) ? key : undefined;
  }

  async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://emulator');
    const trimmed = url.pathname.length > 1 ? url.pathname.replace(/\/+$/, '') : url.pathname;
    // The service's base URL ends in /apis: a production-shaped base URL works here too.
    const path = trimmed === API_PREFIX ? '/' : trimmed.startsWith(`${API_PREFIX}/`) ? trimmed.slice(API_PREFIX.length) : trimmed;
    const method = (req.method ?? 'GET').toUpperCase();
    if (path.startsWith(CONTROL_PREFIX) || path === CONTROL_PREFIX.slice(0, -1)) {
      await control(req, res, path);
      return;
    }
    const entry = record(req, res, path);
    const fault = faults.take(method, path);
    if (fault?.stallMs !== undefined && fault.stallAfterBytes === undefined) {
      await routeContext.sleep(fault.stallMs, res);
      if (res.destroyed || closed) return;
    }
    if (fault?.status !== undefined) {
      const headers: Record<string, string> = {};
      const retryAfter = fault.retryAfter === undefined ? 1 : fault.retryAfter;
      if ((fault.status === 429 || fault.status === 503) && retryAfter !== null) headers['retry-after'] = String(retryAfter);
      req.resume();
      if (fault.afterBody === true) {
        try {
          await finished(req);
        } catch {
          return; // The client went away while sending.
        }
      }
      sendError(res, fault.status, `Injected fault: ${fault.status}.`, headers);
      return;
    }
    if (fault?.dropAfterBytes !== undefined) faults.limitBody(res, fault.dropAfterBytes, { drop: true });
    if (fault?.stallMs !== undefined && fault.stallAfterBytes !== undefined) {
      faults.limitBody(res, fault.stallAfterBytes, { stallMs: fault.stallMs });
    }
    if (files.handle(req, res)) return;

    const key = apiKeyOf(req);
    if (key === undefined) {
      req.resume();
      const given = req.headers['x-api-key'] !== undefined;
      sendError(res, 401, given ? 'Invalid API key.' : 'Missing API key: send it in the x-api-key header.');
      return;
    }
    if (limiter) {
      const decision = limiter.take(key);
      if (!decision.allowed) {
        req.resume();
        sendError(res, 429, 'Rate limit exceeded.', {
          'retry-after': String(decision.retryAfterS),
          'x-ratelimit-limit': String(rateLimit),
          'x-ratelimit-remaining': '0',
        });
        return;
      }
    }
    const match = matchRoute(method, path);
    if (match === 404 || match === 405) {
      req.resume();
      sendError(res, match, match === 404 ? `No route for ${method} ${path}.` : `Method ${method} is not allowed on ${path}.`);
      return;
    }
    await match.handler(routeContext, { req, res, key, url, params: match.params, log: entry });
  }

  return {
    handle(req, res) {
      if (announce) res.setHeader(EMULATOR_HEADER, version);
      serve(req, res).catch((error: unknown) => {
        if (!res.headersSent) sendError(res, 500, `Emulator failure: ${error instanceof Error ? error.message : String(error)}`);
        else res.destroy();
      });
    },
    localPath: (path) => files.localPath(path),
    async close() {
      closed = true;
      faults.close();
      for (const wake of [...sleepers]) wake();
      for (const res of responses) res.destroy();
    },
  };
}

function checkOutcome(body: Record<string, unknown>): string | undefined {
  if (body === null || typeof body !== 'object') return 'expected a JSON object';
  if (typeof body.status !== 'string' || body.status === '') return 'status must be a non-empty string';
  if (body.count !== undefined && !(Number.isSafeInteger(body.count) && (body.count as number) >= 1)) return 'count must be an integer >= 1';
  if (body.kind !== undefined && !TASK_KINDS.includes(body.kind as TaskKind)) return `kind must be one of ${TASK_KINDS.join(', ')}`;
  if (body.message !== undefined && typeof body.message !== 'string') return 'message must be a string';
  return undefined;
}
