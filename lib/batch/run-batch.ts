/**
 * Runs a job file against the service: every line checked before the first paid call, then up to
 * `concurrency` jobs at a time, each created once, polled to the end (the task kind's polling
 * guidance, backing off) and its files written to the output directory, named by the job's id.
 * Results come out as an async iterable, in the order jobs finish, and as `results.jsonl` in the
 * output directory; memory stays bounded by `concurrency`, not by the file.
 *
 * Never paying twice: `journal.jsonl` in the output directory (see `journal.ts`) holds each job's
 * state on disk before the step that depends on it. Run again after a crash, the batch skips
 * jobs done, resumes the wait of jobs whose task exists, and creates only the jobs never created.
 * A create whose answer was lost (the connection dropped or timed out after the request left, or
 * the service answered 5xx) may have started a task: that job is `uncertain`, reported, and
 * created again only with `retryUncertain`. A job whose wait ended without an outcome (its
 * deadline, an abort, a status read that kept failing) is `pending`: its task id is journaled and
 * the next run resumes the wait.
 */
import { dirname, join, relative, resolve } from 'node:path';
import { mkdir, open, type FileHandle } from 'node:fs/promises';
import { setMaxListeners } from 'node:events';
import { RtTranslateError, ValidationError } from '../errors.js';
import { TaskFailedError } from '../http/errors.js';
import { intOption, numberOption } from '../options.js';
import type { LocalizationClient } from '../http/client.js';
import { serviceDidNotAct } from '../http/retry.js';
import { readJobFile, type JobFileFormat } from './job-file.js';
import { BatchJournal, type JournalEntry } from './journal.js';
import { checkJob, kindOf, type BatchJob, type BatchKind, type StreamKindSpec } from './kinds.js';

export interface BatchOptions {
  /** The job file: JSON Lines or CSV (see `job-file.ts`). */
  jobs: string;
  /** Where each job's files, `results.jsonl` and `journal.jsonl` go. Created when missing. */
  outDir: string;
  /** The client jobs run on; give it a `RateLimiter` so that one 429 pauses every job. */
  client: LocalizationClient;
  /** The job file's format. Default: from its name or first byte. */
  format?: JobFileFormat;
  /** Jobs in flight at once. Default 8. */
  concurrency?: number;
  /** Longest wait for one job's task, ms. Default: the kind's polling guidance (10 minutes for speech, 2 hours for media). */
  jobDeadlineMs?: number;
  /** Start nothing when a line is invalid. Default false: invalid lines are reported, the rest run. */
  strict?: boolean;
  /** Create again the jobs whose create may have reached the service (`uncertain`). Default false. */
  retryUncertain?: boolean;
  /** Run again the jobs that failed (refused, or their task failed). Default false. */
  retryFailed?: boolean;
  /** Stops starting jobs and ends the waits (their tasks stay journaled). Creates in flight finish. */
  signal?: AbortSignal;
  /** Told when a job starts running (not for lines settled at once: invalid, or done by an earlier run). */
  onStart?: (job: { id: string; line: number; kind: BatchKind }) => void;
}

/**
 * - `done`: the files are written (`resumed` when a previous run had finished it);
 * - `failed`: refused by the service, or its task failed (a refusal for now, 429 or 503 after
 *   every retry, is tried again by the next run; others need `retryFailed`);
 * - `invalid`: the line cannot be a job (nothing was sent);
 * - `uncertain`: its create may have started a task; not created again without `retryUncertain`;
 * - `pending`: its task exists, its wait did not end; the next run resumes it.
 */
export type BatchJobStatus = 'done' | 'failed' | 'invalid' | 'uncertain' | 'pending';

export interface BatchJobResult {
  /** The job's id; undefined for a line whose id could not be read. */
  id: string | undefined;
  line: number;
  kind: BatchKind | undefined;
  status: BatchJobStatus;
  taskId?: string;
  runId?: number;
  /** Files written, relative to the output directory. */
  files?: string[];
  error?: { code: string; message: string; field?: string };
  /** Done by an earlier run: nothing was requested this time. */
  resumed?: boolean;
}

/** What the checking pass found before any job started. */
export interface BatchPlan {
  jobs: number;
  invalid: number;
}

export const RESULTS_FILE = 'results.jsonl';
export const JOURNAL_FILE = 'journal.jsonl';

/** Runs the batch; see the module doc. `onPlan` is told what the checking pass found. */
export async function* runBatch(options: BatchOptions, onPlan?: (plan: BatchPlan) => void): AsyncGenerator<BatchJobResult> {
  const concurrency = intOption(options.concurrency, 'concurrency', { min: 1, max: 1000, fallback: 8 });
  const deadline = options.jobDeadlineMs === undefined ? undefined : numberOption(options.jobDeadlineMs, 'jobDeadlineMs', { above: 0 });
  const { firstLines, plan, problems } = await checkFile(options);
  onPlan?.(plan);
  if (options.strict === true && plan.invalid > 0) {
    yield* problems;
    return;
  }
  const { journal, results } = await openOutputs(options.outDir);
  // Ends the waits of the jobs in flight when the caller aborts, stops iterating, or a job fails
  // to be journaled; creates in flight finish (their outcome is what the journal must know).
  const stop = new AbortController();
  // Each job in flight listens on it a few times over (its wait, its requests, their timers).
  setMaxListeners(Math.max(10, concurrency * 8), stop.signal);
  const onAbort = (): void => stop.abort(options.signal?.reason);
  options.signal?.addEventListener('abort', onAbort, { once: true });
  if (options.signal?.aborted === true) onAbort();
  const context: JobContext = { options, journal, deadline, signal: stop.signal };
  const inFlight = new Map<number, Promise<{ line: number; result: BatchJobResult }>>();
  const records = readJobFile(options.jobs, { format: options.format });
  try {
    let exhausted = false;
    for (;;) {
      while (!exhausted && inFlight.size < concurrency && !stop.signal.aborted) {
        const next = await records.next();
        if (next.done === true) {
          exhausted = true;
          break;
        }
        const record = next.value;
        const started = startRecord(context, record, firstLines);
        if (started instanceof Promise)
          inFlight.set(
            record.line,
            started.then((result) => ({ line: record.line, result })),
          );
        else yield await results.report(started);
      }
      if (inFlight.size === 0) break;
      const { line, result } = await Promise.race(inFlight.values());
      inFlight.delete(line);
      yield await results.report(result);
    }
  } finally {
    stop.abort();
    options.signal?.removeEventListener('abort', onAbort);
    // Every job still running settles (its state journaled) before the journal closes.
    await Promise.allSettled(inFlight.values());
    await records.return(undefined);
    await results.close();
    await journal.close();
  }
}

/** What a running batch shares with its jobs (also the queue producer's, for its streamed jobs). */
export interface JobContext {
  options: BatchOptions;
  journal: BatchJournal;
  deadline: number | undefined;
  /** Aborted when the batch stops: ends waits and downloads, not creates. */
  signal: AbortSignal;
}

/** The checking pass: every line read and checked, ids unique; nothing is kept but each id's first line. */
export async function checkFile(options: BatchOptions): Promise<{ firstLines: Map<string, number>; plan: BatchPlan; problems: BatchJobResult[] }> {
  const firstLines = new Map<string, number>();
  const problems: BatchJobResult[] = [];
  let jobs = 0;
  for await (const record of readJobFile(options.jobs, { format: options.format, signal: options.signal })) {
    if ('message' in record) {
      problems.push(invalid(record.line, undefined, undefined, { code: 'RTT_INPUT', message: record.message }));
      continue;
    }
    try {
      const job = checkJob(record.fields, record.line, dirname(resolve(options.jobs)));
      // Ids name files: two that differ only in case would collide where names ignore case.
      const first = firstLines.get(job.id.toLowerCase());
      if (first !== undefined) {
        problems.push(
          invalid(record.line, job.id, job.kind, {
            code: 'RTT_VALIDATION',
            message: `The id ${job.id} is used again (first at line ${first}; ids that differ only in case count as the same).`,
            field: 'id',
          }),
        );
      } else {
        firstLines.set(job.id.toLowerCase(), record.line);
        jobs += 1;
      }
    } catch (error) {
      problems.push(invalidFrom(record.line, record.fields, error));
    }
  }
  // Only the strict mode reports the problems from this pass; the run reports them as it passes them.
  return { firstLines, plan: { jobs, invalid: problems.length }, problems: options.strict === true ? problems : [] };
}

/** A record's result at once (invalid, or settled by an earlier run), or its running job. */
function startRecord(
  context: JobContext,
  record: { line: number; fields: Record<string, unknown> } | { line: number; message: string },
  firstLines: Map<string, number>,
): BatchJobResult | Promise<BatchJobResult> {
  const admitted = admitRecord(context, record, firstLines);
  if ('status' in admitted) return admitted;
  const { job, entry } = admitted;
  context.options.onStart?.({ id: job.id, line: job.line, kind: job.kind });
  return runJob(context, job, entry?.state === 'created' ? entry.taskId : undefined);
}

/**
 * A record's result at once (invalid, changed since the journal saw it, or settled by an earlier
 * run), or the checked job to run, with what the journal knows of it.
 */
export function admitRecord(
  context: Pick<JobContext, 'options' | 'journal'>,
  record: { line: number; fields: Record<string, unknown> } | { line: number; message: string },
  firstLines: Map<string, number>,
): BatchJobResult | { job: BatchJob; entry: JournalEntry | undefined } {
  if ('message' in record) return invalid(record.line, undefined, undefined, { code: 'RTT_INPUT', message: record.message });
  let job: BatchJob;
  try {
    job = checkJob(record.fields, record.line, dirname(resolve(context.options.jobs)));
  } catch (error) {
    return invalidFrom(record.line, record.fields, error);
  }
  const first = firstLines.get(job.id.toLowerCase());
  if (first !== job.line) {
    const message =
      first === undefined
        ? `The job file changed while the batch ran: line ${job.line} was not there when it was checked.`
        : `The id ${job.id} is used again (first at line ${first}; ids that differ only in case count as the same).`;
    return invalid(job.line, job.id, job.kind, { code: 'RTT_VALIDATION', message, field: 'id' });
  }
  const entry = context.journal.get(job.id);
  if (entry !== undefined && entry.digest !== job.digest) {
    return invalid(job.line, job.id, job.kind, {
      code: 'RTT_VALIDATION',
      message: `Job ${job.id} changed since an earlier run journaled it; give the changed job a new id, or use a new output directory.`,
      field: 'id',
    });
  }
  return settledResult(context.options, job, entry) ?? { job, entry };
}

/** What an earlier run settled for the job, unless this run is asked to try again. */
function settledResult(options: BatchOptions, job: BatchJob, entry: JournalEntry | undefined): BatchJobResult | undefined {
  const base = { id: job.id, line: job.line, kind: job.kind };
  switch (entry?.state) {
    case 'done':
      return { ...base, status: 'done', taskId: entry.taskId, runId: entry.runId, files: entry.files, resumed: true };
    case 'failed':
      if (options.retryFailed === true || entry.retryable === true) return undefined;
      return { ...base, status: 'failed', taskId: entry.taskId, runId: entry.runId, error: { code: entry.code, message: entry.message } };
    case 'creating':
    case 'uncertain': {
      if (options.retryUncertain === true) return undefined;
      const message =
        entry.state === 'uncertain'
          ? entry.message
          : "An earlier run stopped while creating this job: the service may have started a task for it (a streamed job's file may even be complete).";
      return {
        ...base,
        status: 'uncertain',
        error: {
          code: entry.state === 'uncertain' ? entry.code : 'RTT_CONNECTION',
          message: `${message} Run again with retryUncertain (--retry-uncertain) to create it again.`,
        },
      };
    }
    default:
      return undefined;
  }
}

async function runJob(context: JobContext, job: BatchJob, knownTaskId: string | undefined): Promise<BatchJobResult> {
  const { options, journal } = context;
  const kind = kindOf(job.kind);
  const base = { id: job.id, line: job.line, kind: job.kind };
  if ('stream' in kind) return streamJob(context, job, kind);
  let taskId = knownTaskId;
  if (taskId === undefined) {
    await journal.record(job.id, job.digest, { state: 'creating' });
    try {
      // A create in flight is not aborted: its outcome is what the journal must know.
      taskId = (await kind.create(options.client, job.request, {})).taskId;
    } catch (error) {
      const described = describe(error);
      if (createOutcomeKnown(error)) {
        // Refused for now (429, 503 after every retry): no task exists, the next run tries again.
        const retryable = serviceDidNotAct(error) ? { retryable: true } : {};
        await journal.record(job.id, job.digest, { state: 'failed', ...described, ...retryable });
        return { ...base, status: 'failed', error: described };
      }
      await journal.record(job.id, job.digest, { state: 'uncertain', ...described });
      return { ...base, status: 'uncertain', error: described };
    }
    await journal.record(job.id, job.digest, { state: 'created', taskId });
  }
  const waitOptions = {
    signal: context.signal,
    readAtOnce: knownTaskId !== undefined,
    ...(context.deadline !== undefined ? { maxWaitMs: context.deadline } : {}),
  };
  let run;
  try {
    run = await kind.wait(options.client, taskId, waitOptions);
  } catch (error) {
    const described = describe(error);
    if (error instanceof TaskFailedError || isGone(error)) {
      await journal.record(job.id, job.digest, { state: 'failed', taskId, ...described });
      return { ...base, status: 'failed', taskId, error: described };
    }
    return { ...base, status: 'pending', taskId, error: described };
  }
  let files: string[];
  try {
    files = await kind.write(options.client, run, job, join(options.outDir, job.id), { signal: context.signal });
  } catch (error) {
    const described = describe(error);
    if (isGone(error)) {
      await journal.record(job.id, job.digest, { state: 'failed', taskId, runId: run.runId, ...described });
      return { ...base, status: 'failed', taskId, runId: run.runId, error: described };
    }
    return { ...base, status: 'pending', taskId, runId: run.runId, error: described };
  }
  const names = relativeNames(options.outDir, files);
  await journal.record(job.id, job.digest, { state: 'done', taskId, runId: run.runId, files: names });
  return { ...base, status: 'done', taskId, runId: run.runId, files: names };
}

/** A job whose one request streams its result: journaled before it is sent, done once its files are whole. */
export async function streamJob(context: JobContext, job: BatchJob, kind: StreamKindSpec): Promise<BatchJobResult> {
  const { options, journal } = context;
  const base = { id: job.id, line: job.line, kind: job.kind };
  await journal.record(job.id, job.digest, { state: 'creating' });
  let files: string[];
  try {
    // The stream is the job's create: like a create in flight, it finishes when the batch stops.
    files = await kind.stream(options.client, job, join(options.outDir, job.id), undefined);
  } catch (error) {
    const described = describe(error);
    if (createOutcomeKnown(error)) {
      await journal.record(job.id, job.digest, { state: 'failed', ...described, ...(serviceDidNotAct(error) ? { retryable: true } : {}) });
      return { ...base, status: 'failed', error: described };
    }
    await journal.record(job.id, job.digest, { state: 'uncertain', ...described });
    return { ...base, status: 'uncertain', error: described };
  }
  const names = relativeNames(options.outDir, files);
  await journal.record(job.id, job.digest, { state: 'done', files: names });
  return { ...base, status: 'done', files: names };
}

/**
 * Whether a failed create surely started nothing: the service refused it before acting (429,
 * 503 with a wait, no connection), or answered it with a 4xx, or the library refused it before
 * sending. A lost answer, a timeout after the request left, or a 5xx may hide a task.
 */
export function createOutcomeKnown(error: unknown): boolean {
  if (error instanceof ValidationError) return true;
  if (serviceDidNotAct(error)) return true;
  return error instanceof RtTranslateError && error.status !== undefined && error.status >= 400 && error.status < 500;
}

/** The service no longer knows the task or its result (404, 410): waiting again cannot help. */
export function isGone(error: unknown): boolean {
  return error instanceof RtTranslateError && (error.status === 404 || error.status === 410);
}

export function relativeNames(outDir: string, files: string[]): string[] {
  return files.map((file) => relative(outDir, file));
}

export function describe(error: unknown): { code: string; message: string } {
  if (error instanceof RtTranslateError) return { code: error.code, message: error.message };
  return { code: 'RTT_UNKNOWN', message: error instanceof Error ? error.message : String(error) };
}

function invalid(line: number, id: string | undefined, kind: BatchKind | undefined, error: BatchJobResult['error']): BatchJobResult {
  return { id, line, kind, status: 'invalid', error };
}

function invalidFrom(line: number, fields: Record<string, unknown>, error: unknown): BatchJobResult {
  const id = typeof fields.id === 'string' || typeof fields.id === 'number' ? String(fields.id) : undefined;
  const kind = typeof fields.kind === 'string' ? (fields.kind as BatchKind) : undefined;
  const described = describe(error);
  return invalid(line, id, kind, error instanceof ValidationError ? { ...described, field: error.field } : described);
}

/** The output directory (made when missing) with its journal and results file open; neither is left open when the other fails. */
export async function openOutputs(outDir: string): Promise<{ journal: BatchJournal; results: ResultsFile }> {
  await mkdir(outDir, { recursive: true });
  const journal = await BatchJournal.open(join(outDir, JOURNAL_FILE));
  try {
    return { journal, results: await ResultsFile.open(outDir) };
  } catch (error) {
    await journal.close();
    throw error;
  }
}

/**
 * `results.jsonl`: emptied and opened before the first job starts (an output directory where it
 * cannot be written fails the batch there, with its path, before anything is paid for), then one
 * line per job as it finishes; a failed write (a full disk) ends the batch with a typed error.
 */
export class ResultsFile {
  readonly path: string;
  readonly #handle: FileHandle;

  private constructor(path: string, handle: FileHandle) {
    this.path = path;
    this.#handle = handle;
  }

  static async open(outDir: string): Promise<ResultsFile> {
    const path = join(outDir, RESULTS_FILE);
    try {
      return new ResultsFile(path, await open(path, 'w'));
    } catch (error) {
      throw resultsError(path, error);
    }
  }

  /** Appends the result's line; resolves with the result once written. */
  async report(result: BatchJobResult): Promise<BatchJobResult> {
    const bytes = Buffer.from(`${JSON.stringify(result)}\n`, 'utf8');
    try {
      let written = 0;
      while (written < bytes.length) written += (await this.#handle.write(bytes, written)).bytesWritten;
    } catch (error) {
      throw resultsError(this.path, error);
    }
    return result;
  }

  async close(): Promise<void> {
    await this.#handle.close().catch(() => undefined);
  }
}

function resultsError(path: string, error: unknown): RtTranslateError {
  return new RtTranslateError('RTT_INPUT', `Could not write the batch results ${path}: ${(error as Error).message}`, { cause: error, retryable: false });
}
