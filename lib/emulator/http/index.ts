/**
 * The emulator's HTTP side: every endpoint of the interface's HTTP part and every one the
 * official SDK calls beyond it, at the root of the emulator's base URL and under `/apis` too
 * (the production base URL ends in `/apis`; clients treat the base URL as a prefix). The routes
 * are in `routes-*.ts` by area; `routes.ts` lists them. This file holds the order of checks
 * (control endpoint, armed fault, presigned files, API key, rate limit, route) and the control
 * endpoint (`/_emulator/...`: faults, task outcomes, tasks, file and realtime faults, the
 * request log). What each endpoint answers, the options and the control endpoint's fields are
 * in docs/emulator.md ("The HTTP side").
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
        // A seeded task is PENDING for its own taskMs (default: the emulator's) and for its
        // first `polls` status reads (default 0).
        const task = tasks.create(
          body.kind as TaskKind,
          owner,
          { text: body.text },
          outcome,
          body.taskMs as number | undefined,
          (body.polls as number | undefined) ?? 0,
        );
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
