/**
 * The asynchronous task pattern, once for every feature: create a task, poll its status until
 * it is final, fetch the result with its `run_id`.
 *
 * Polling follows the interface's guidance: the `speech` profile polls every 2 s growing to
 * 5 s; the `longMedia` profile (subtitles, dubbing, separation of long files) starts at 15 s
 * and grows to 60 s. The interval grows by `factor` after each PENDING answer and each poll
 * calls `onProgress`. SUCCESS resolves with the `run_id`; ERROR, TIMEOUT and PAYMENT_REQUIRED
 * reject with `TaskFailedError`, `TaskTimeoutError`, `PaymentRequiredError`; any other status
 * is a `ProtocolError` that names it (statuses are compared case-insensitively).
 *
 * The wait is bounded by its deadline, not by a count of failed reads: a status read that fails
 * the way a read is retried after (429, 5xx, a reset, a timeout: `statusReadDelay` of
 * `retry.ts`) is made again after the service's `Retry-After` or a jittered back-off that grows
 * to the polling interval, for as long as `maxWaitMs` leaves time. Failures are counted only to
 * be reported (`onReadFailure`, `failedReads` of each progress, the final error); one that no
 * retry can fix (401, 403, 404, 422) ends the wait at once, with its own error. `maxWaitMs` is
 * a hard limit: a status request still running when it passes is aborted, and the wait ends
 * with `TaskWaitTimeoutError` (its task id, the time waited, the reads that failed, the last
 * failure), never later.
 *
 * A server that paces the polls itself (the emulator of this package, which announces itself
 * with `EMULATOR_HEADER` on every answer and gives a PENDING task's remaining time in
 * `EMULATOR_READY_IN_HEADER`) is polled at that pace: the first status read at once
 * (`readAtOnce`, which the client sets once its server announced itself), each next one when
 * the server said the task would be done, and never later than the schedule above would read.
 * The service sends neither header, so its waits keep the documented schedule.
 *
 * Server text (a task's `message`, an unknown status) goes into errors as the requester hands it
 * over: `LocalizationClient` redacts the API key from every JSON answer before anything reads it.
 */
import { AbortError, ProtocolError, RtTranslateError } from '../errors.js';
import { numberOption } from '../options.js';
import { abortableDelay } from '../delay.js';
import { headerValue, type HeaderBag } from '../retry-after.js';
import { PaymentRequiredError, TaskFailedError, TaskTimeoutError, TaskWaitTimeoutError } from './errors.js';
import { resolveRetry, statusReadDelay, type RetrySetting } from './retry.js';

export const TASK_STATUSES = ['SUCCESS', 'PENDING', 'TIMEOUT', 'ERROR', 'PAYMENT_REQUIRED'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

/** A status endpoint's answer, in camelCase; `raw` is the wire body. */
export interface TaskStatusResponse {
  status: TaskStatus;
  /** The run id once SUCCESS; null otherwise. */
  runId: number | null;
  /** Present on some ERROR answers (an object in some, flattened to its JSON text here). */
  message?: string;
  /** The failure reason some services give instead (`SOURCE_TOO_LONG`, ...). */
  exceptionReason?: string;
  /**
   * From a server that announced itself as the emulator (`EMULATOR_HEADER`): the time until a
   * PENDING task's outcome, ms. Never set by the service.
   */
  readyInMs?: number;
  raw: Record<string, unknown>;
}

/** The header by which the emulator of this package announces itself (its version), on every answer. */
export const EMULATOR_HEADER = 'x-rt-translate-emulator';
/** The emulator's word on a PENDING task: milliseconds until its outcome (a whole number, 0 or more). */
export const EMULATOR_READY_IN_HEADER = 'x-rt-translate-emulator-ready-in-ms';
/** The shortest wait between two status reads at a server's pace, ms: a server saying 0 is not read in a busy loop. */
export const MIN_PACED_POLL_MS = 10;

/** The emulator's version when `headers` announce it, else undefined. */
export function announcedEmulator(headers: HeaderBag): string | undefined {
  const version = headerValue(headers, EMULATOR_HEADER)?.trim();
  return version === undefined || version === '' ? undefined : version;
}

/**
 * The time until a PENDING task's outcome that a status answer gives, ms: only from a server that
 * announces itself as the emulator in the same answer; undefined otherwise.
 */
export function readyInMsOf(headers: HeaderBag): number | undefined {
  if (announcedEmulator(headers) === undefined) return undefined;
  const text = headerValue(headers, EMULATOR_READY_IN_HEADER)?.trim();
  return text !== undefined && /^\d{1,12}$/.test(text) ? Number(text) : undefined;
}

export interface PollingOptions {
  /** Wait before the first poll and between the first polls, ms. */
  initialIntervalMs: number;
  /** Cap of the interval, ms. */
  maxIntervalMs: number;
  /** Growth of the interval after each PENDING answer. 1 keeps it constant. */
  factor: number;
  /** Longest total wait, ms, before `TaskWaitTimeoutError`. */
  maxWaitMs: number;
}

/** Short tasks such as speech: 2 s growing to 5 s, give up after 10 minutes. */
export const SPEECH_POLLING: Readonly<PollingOptions> = Object.freeze({
  initialIntervalMs: 2_000,
  maxIntervalMs: 5_000,
  factor: 1.5,
  maxWaitMs: 10 * 60_000,
});

/** Subtitles and long media: 15 s growing to 60 s, give up after 2 hours. */
export const LONG_MEDIA_POLLING: Readonly<PollingOptions> = Object.freeze({
  initialIntervalMs: 15_000,
  maxIntervalMs: 60_000,
  factor: 1.5,
  maxWaitMs: 2 * 60 * 60_000,
});

export type PollingProfile = 'speech' | 'longMedia';

/** What `onProgress` receives after each poll that read a status. */
export interface TaskProgress {
  taskId: string;
  status: TaskStatus;
  /** The number of this status read, 1 for the first (failed reads count too). */
  poll: number;
  /** Status reads of this wait that failed so far (each was made again). */
  failedReads: number;
  /** Since polling started, ms. */
  elapsedMs: number;
  /** Wait before the next poll, ms; undefined when this answer was final. */
  nextPollInMs: number | undefined;
  response: TaskStatusResponse;
}

/** What `onReadFailure` receives after a status read failed; the wait goes on. */
export interface TaskReadFailure {
  taskId: string;
  /** The number of the failed read among the wait's status reads, 1 for the first. */
  poll: number;
  /** Status reads of this wait that failed so far, this one included. */
  failedReads: number;
  /** Failed reads in a row, this one included. */
  failuresInARow: number;
  /** Why it failed (a retryable `RtTranslateError`: 429, 5xx, a lost connection, a timeout). */
  error: RtTranslateError;
  /** Since polling started, ms. */
  elapsedMs: number;
  /** Wait before the next read, ms: the service's `Retry-After`, or the back-off. */
  retryInMs: number;
}

export interface WaitOptions extends Partial<PollingOptions> {
  /** Which guidance to start from. Default `speech`. */
  profile?: PollingProfile;
  /**
   * Read the status at once instead of after the first interval: for a server that paces the
   * polls (the client sets it once its server announced itself as the emulator), and for a wait
   * on a task created earlier, which may well be final already. Later reads keep the schedule
   * (or the server's pace). Default false.
   */
  readAtOnce?: boolean;
  signal?: AbortSignal;
  onProgress?: (progress: TaskProgress) => void;
  /** Called after each status read that failed and will be made again (see the module doc). */
  onReadFailure?: (failure: TaskReadFailure) => void;
  /**
   * The retry setting whose back-off (`minDelayMs`, `factor`, `maxDelayMs`) spaces status reads
   * after a failure; `retries` does not bound them, the deadline does. `false` (or `retries: 0`)
   * ends the wait at the first failed read. Default: the library's default setting.
   */
  retry?: RetrySetting;
}

/** A finished, successful task. */
export interface CompletedTask {
  taskId: string;
  runId: number;
  response: TaskStatusResponse;
}

/** The profile's values with any overrides, checked. */
export function resolvePolling(options: WaitOptions = {}): PollingOptions {
  const base = options.profile === 'longMedia' ? LONG_MEDIA_POLLING : SPEECH_POLLING;
  const initialIntervalMs = numberOption(options.initialIntervalMs, 'polling.initialIntervalMs', { min: 0, fallback: base.initialIntervalMs });
  return {
    initialIntervalMs,
    maxIntervalMs: numberOption(options.maxIntervalMs, 'polling.maxIntervalMs', {
      min: 0,
      fallback: Math.max(base.maxIntervalMs, options.initialIntervalMs === undefined ? 0 : initialIntervalMs),
    }),
    factor: numberOption(options.factor, 'polling.factor', { min: 1, fallback: base.factor }),
    maxWaitMs: numberOption(options.maxWaitMs, 'polling.maxWaitMs', { min: 0, fallback: base.maxWaitMs }),
  };
}

/** An answer `parseTaskStatus` already read (status getters of the client return those). */
function isParsedStatus(value: unknown): value is TaskStatusResponse {
  return (
    value !== null &&
    typeof value === 'object' &&
    'runId' in value &&
    'raw' in value &&
    typeof (value as { raw: unknown }).raw === 'object' &&
    (TASK_STATUSES as readonly unknown[]).includes((value as unknown as { status: unknown }).status)
  );
}

function reasonText(value: unknown): string | undefined {
  if (typeof value === 'string') return value === '' ? undefined : value;
  if (value !== null && typeof value === 'object') return JSON.stringify(value);
  return undefined;
}

/**
 * Checks a status answer: returns it in camelCase with `status` uppercased, or throws
 * `ProtocolError` for a missing or unknown status.
 */
export function parseTaskStatus(taskId: string, raw: unknown): TaskStatusResponse {
  if (isParsedStatus(raw)) return raw;
  if (raw === null || typeof raw !== 'object' || typeof (raw as { status?: unknown }).status !== 'string') {
    throw new ProtocolError(`The status of task ${taskId} came without a status field.`);
  }
  const response = raw as Record<string, unknown>;
  const status = (response.status as string).toUpperCase();
  if (!(TASK_STATUSES as readonly string[]).includes(status)) {
    throw new ProtocolError(
      `Task ${taskId} reported the unknown status ${JSON.stringify(response.status)} ` +
        `(known: ${TASK_STATUSES.join(', ')}). Update rt-translate, or poll the task yourself.`,
      { serverMessage: String(response.status) },
    );
  }
  const runId = response.run_id;
  const parsed: TaskStatusResponse = {
    status: status as TaskStatus,
    runId: typeof runId === 'number' ? runId : typeof runId === 'string' && /^\d+$/.test(runId) ? Number(runId) : null,
    raw: response,
  };
  const message = reasonText(response.message);
  const reason = reasonText(response.exception_reason);
  if (message !== undefined) parsed.message = message;
  if (reason !== undefined) parsed.exceptionReason = reason;
  return parsed;
}

/** Throws the typed error of a final failed status; returns for PENDING and SUCCESS. */
export function throwIfFailed(taskId: string, response: TaskStatusResponse): void {
  switch (response.status) {
    case 'ERROR':
      throw new TaskFailedError(response.message ?? response.exceptionReason, { taskId });
    case 'TIMEOUT':
      throw new TaskTimeoutError({ taskId });
    case 'PAYMENT_REQUIRED':
      throw new PaymentRequiredError({ taskId });
    default:
      return;
  }
}

/**
 * `signal` and a deadline in one signal: aborted when the caller aborts or `ms` have passed.
 * `expired` tells which; `release` clears the timer and the listener.
 */
function budget(ms: number, signal: AbortSignal | undefined): { signal: AbortSignal; expired: () => boolean; release: () => void } {
  const controller = new AbortController();
  let expired = false;
  const onAbort = (): void => controller.abort(signal?.reason);
  const timer = setTimeout(() => {
    expired = true;
    controller.abort(new AbortError('The time to wait for the task is up.'));
  }, ms);
  if (signal?.aborted) onAbort();
  else signal?.addEventListener('abort', onAbort, { once: true });
  return {
    signal: controller.signal,
    expired: () => expired,
    release: () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    },
  };
}

/**
 * One status request, given at most `ms`: the signal it receives is aborted when the time is up,
 * and its promise is not awaited beyond that (for a `getStatus` that ignores its signal).
 */
async function statusWithin(
  taskId: string,
  getStatus: (taskId: string, signal: AbortSignal | undefined) => Promise<unknown>,
  ms: number,
  signal: AbortSignal | undefined,
  timedOut: (cause: unknown) => RtTranslateError,
): Promise<unknown> {
  const limit = budget(ms, signal);
  try {
    const request = getStatus(taskId, limit.signal);
    const deadline = new Promise<never>((_, reject) => {
      limit.signal.addEventListener('abort', () => reject(limit.signal.reason), { once: true });
    });
    request.catch(() => undefined);
    deadline.catch(() => undefined);
    return await Promise.race([request, deadline]);
  } catch (error) {
    if (limit.expired() && !signal?.aborted) throw timedOut(error);
    if (signal?.aborted && !(error instanceof RtTranslateError)) throw new AbortError('Waiting for the task was aborted.', { cause: error });
    throw error;
  } finally {
    limit.release();
  }
}

/**
 * Polls `getStatus` until the task is final. Resolves with its `run_id` on SUCCESS; rejects with
 * the typed error of any other outcome, with the error of a status read that no retry can fix,
 * with `TaskWaitTimeoutError` once `maxWaitMs` has passed (a status request still running then
 * is aborted), or with `AbortError` when `signal` aborts (the wait between polls ends at once).
 * A status read that fails as reads are retried after is made again until the deadline (see
 * the module doc).
 */
export async function waitForTask(
  taskId: string,
  getStatus: (taskId: string, signal: AbortSignal | undefined) => Promise<unknown>,
  options: WaitOptions = {},
): Promise<CompletedTask> {
  const polling = resolvePolling(options);
  const policy = resolveRetry(options.retry);
  const { signal, onProgress, onReadFailure } = options;
  const start = Date.now();
  let interval = polling.initialIntervalMs;
  // A read at once comes before the schedule: the schedule's first interval follows it.
  let early = options.readAtOnce === true;
  let delay = early ? 0 : interval;
  let lastStatus = 'PENDING';
  let reads = 0;
  let failedReads = 0;
  let failuresInARow = 0;
  let lastFailure: RtTranslateError | undefined;
  const timedOut = (cause?: unknown): TaskWaitTimeoutError =>
    new TaskWaitTimeoutError(taskId, lastStatus, polling.maxWaitMs, {
      waitedMs: Date.now() - start,
      reads,
      failedReads,
      ...(lastFailure !== undefined ? { lastFailure } : cause !== undefined ? { cause } : {}),
    });
  for (;;) {
    const remaining = polling.maxWaitMs - (Date.now() - start);
    if (remaining <= 0) throw timedOut();
    await abortableDelay(Math.min(delay, remaining), signal, 'Waiting for the task was aborted.');
    const left = polling.maxWaitMs - (Date.now() - start);
    // A poll with no time left could not finish within maxWaitMs.
    if (left <= 0) throw timedOut();
    reads++;
    let answer: unknown;
    try {
      // A read still running at the deadline is abandoned. After a run of failed reads it
      // counts as one more (the message must not say that a read of that run succeeded).
      answer = await statusWithin(taskId, getStatus, left, signal, (cause) => {
        if (failuresInARow > 0) failedReads++;
        return timedOut(cause);
      });
    } catch (error) {
      if (error instanceof TaskWaitTimeoutError || signal?.aborted) throw error;
      const retryInMs = statusReadDelay(error, failuresInARow + 1, policy, interval);
      if (retryInMs === undefined) throw error;
      failedReads++;
      failuresInARow++;
      lastFailure = error as RtTranslateError;
      onReadFailure?.({ taskId, poll: reads, failedReads, failuresInARow, error: lastFailure, elapsedMs: Date.now() - start, retryInMs });
      delay = retryInMs;
      continue;
    }
    failuresInARow = 0;
    const response = parseTaskStatus(taskId, answer);
    lastStatus = response.status;
    const final = response.status !== 'PENDING';
    const next = early ? interval : Math.min(polling.maxIntervalMs, Math.round(interval * polling.factor));
    early = false;
    // A server that said when the task will be done is read then, never later than the schedule.
    const paced = response.readyInMs === undefined ? next : Math.max(MIN_PACED_POLL_MS, Math.min(response.readyInMs, next));
    onProgress?.({
      taskId,
      status: response.status,
      poll: reads,
      failedReads,
      elapsedMs: Date.now() - start,
      nextPollInMs: final ? undefined : paced,
      response,
    });
    throwIfFailed(taskId, response);
    if (response.status === 'SUCCESS') {
      if (response.runId === null || !Number.isSafeInteger(response.runId) || response.runId < 1) {
        throw new ProtocolError(`Task ${taskId} succeeded but its status carries no valid run_id.`);
      }
      return { taskId, runId: response.runId, response };
    }
    interval = next;
    delay = paced;
  }
}

export interface TaskSteps<R> {
  /** Submits the work; resolves with the new task's id. Not retried by this helper. */
  create: (signal: AbortSignal | undefined) => Promise<string>;
  /** One status request. */
  status: (taskId: string, signal: AbortSignal | undefined) => Promise<unknown>;
  /** Fetches the result of the finished run. */
  result: (run: CompletedTask, signal: AbortSignal | undefined) => Promise<R>;
}

/** Create, poll, result: the whole pattern in one call. */
export async function runTask<R>(steps: TaskSteps<R>, options: WaitOptions = {}): Promise<R> {
  const taskId = await steps.create(options.signal);
  const run = await waitForTask(taskId, steps.status, options);
  return steps.result(run, options.signal);
}
