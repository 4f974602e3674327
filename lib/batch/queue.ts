/**
 * Batches across machines, on a BullMQ queue in Redis: `enqueueBatch` (the producer) checks the
 * job file as `runBatch` does, puts each task job on the queue and writes each job's files and
 * `results.jsonl` line as it completes; `runWorker` (any number, on any machine) creates and
 * waits for the tasks. BullMQ is loaded only here, with `import('bullmq')`, when one of the two runs.
 *
 * - A job's BullMQ id is `${id}-${digest}`: enqueuing the same file again adds nothing, and a
 *   changed job is a new one.
 * - The journal is the job's data: `state: {creating: true}` is saved before the create is sent,
 *   `state: {taskId}` before the first status read. A worker that dies mid-poll is replaced (once
 *   BullMQ sees its lock expire) by one that resumes the same task; a worker that dies mid-create
 *   leaves the job `uncertain`, created again only when the producer is run with `retryUncertain`.
 * - A `dub` job with several target languages is a flow: one child job (one task) per language
 *   and a parent that completes once every child has; its file holds every language's outputs.
 * - `tts` jobs (one streamed request, no task to hand over) run in the producer, as in `runBatch`.
 * - A refusal for now (429, 503) pauses every worker of the queue for the wait the service named
 *   (BullMQ's queue rate limit); `requestsPerSecond` is BullMQ's limiter (jobs started per second).
 */
import { join } from 'node:path';
import { createWriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { once, setMaxListeners } from 'node:events';
import type { FlowJob, Job, Queue as BullQueue, Worker as BullWorker } from 'bullmq';
import { ValidationError } from '../errors.js';
import { isLoopbackHost } from '../config.js';
import { intOption, numberOption } from '../options.js';
import type { LocalizationClient } from '../http/client.js';
import { TaskFailedError } from '../http/errors.js';
import { serviceDidNotAct } from '../http/retry.js';
import { readJobFile } from './job-file.js';
import { BatchJournal } from './journal.js';
import { kindOf, writeDubParts, type BatchJob, type TaskKindSpec } from './kinds.js';
import {
  JOURNAL_FILE,
  RESULTS_FILE,
  admitRecord,
  checkFile,
  createOutcomeKnown,
  describe,
  relativeNames,
  report,
  streamJob,
  type BatchJobResult,
  type BatchOptions,
  type BatchPlan,
  type JobContext,
} from './run-batch.js';

/** The queue's name unless told otherwise. */
export const QUEUE_NAME = 'rt-translate-batch';
/** The BullMQ job name of a dub flow's parent. */
const DUB_FLOW = 'dub-flow';

export interface QueueConnectionOptions {
  /** The Redis server: `redis://HOST:PORT` or `rediss://HOST:PORT` (TLS), with `/DB` and a password if needed. */
  queue: string;
  /** The queue's name. Default `rt-translate-batch`. */
  queueName?: string;
  /** Accept plain-text `redis://` to a host that is not loopback. Default false. */
  allowInsecure?: boolean;
}

export interface QueueBatchOptions extends BatchOptions, QueueConnectionOptions {}

export interface QueueWorkerOptions extends QueueConnectionOptions {
  /** The client tasks are created and waited for on. */
  client: LocalizationClient;
  /** Jobs this worker runs at once. Default 8. */
  concurrency?: number;
  /** Jobs started per second at most, all workers of the queue together. Default: no limit. */
  requestsPerSecond?: number;
  /** Longest wait for one job's task, ms. Default: the kind's polling guidance. */
  jobDeadlineMs?: number;
  /** How long a worker that stops answering keeps its jobs before another takes them over, ms. Default 30000. */
  lockMs?: number;
  /** Stops taking jobs; jobs being created finish, waits stop and their jobs go back to the queue. */
  signal?: AbortSignal;
}

/** A running worker. */
export interface QueueWorker {
  /** Pauses every worker of the queue for `ms` (a refusal the service asked everyone to respect). */
  rateLimit(ms: number): Promise<void>;
  /** Resolves once the worker has stopped (its signal aborted, or `close` called) and its jobs are back. */
  readonly closed: Promise<void>;
  close(): Promise<void>;
}

/** The journal a queued job carries in its data. */
type QueuedState = { creating: true } | { taskId: string };

interface QueuedOutcome {
  status: 'failed' | 'uncertain' | 'pending';
  code: string;
  message: string;
  taskId?: string;
  retryable?: boolean;
}

interface QueuedData {
  job: Omit<BatchJob, 'line'> & { line: number };
  /** A dub flow's child: its one target language. */
  language?: string;
  /** Cleared by the producer to create the job again (asked to, with `retryUncertain` or `retryFailed`). */
  state?: QueuedState;
  /** Why the job failed, for the producer. */
  outcome?: QueuedOutcome;
}

interface TaskRun {
  taskId: string;
  runId: number;
  language?: string;
}

type QueuedResult = TaskRun | { parts: TaskRun[] };

/** Checks a `redis://` URL; plain text only to a loopback host unless `allowInsecure`. */
export function parseQueueUrl(raw: string, options: { allowInsecure?: boolean } = {}): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ValidationError('queue', 'a redis:// or rediss:// URL (redis://HOST:PORT)', JSON.stringify(raw.length > 200 ? `${raw.slice(0, 20)}...` : raw));
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:')
    throw new ValidationError('queue', 'a redis:// or rediss:// URL (redis://HOST:PORT)', `${url.protocol}//`);
  if (url.hostname === '') throw new ValidationError('queue', 'a redis:// URL naming a host (redis://HOST:PORT)', 'no host');
  if (url.protocol === 'redis:' && !isLoopbackHost(url.hostname) && options.allowInsecure !== true) {
    throw new ValidationError(
      'queue',
      `rediss:// for ${url.hostname}, which is not a loopback host (plain-text redis:// only with allowInsecure, --allow-insecure)`,
      'redis://',
    );
  }
  return url;
}

function connectionOf(options: QueueConnectionOptions): { url: string; maxRetriesPerRequest: null } {
  return { url: parseQueueUrl(options.queue, options).href, maxRetriesPerRequest: null };
}

function bullIdOf(job: Pick<BatchJob, 'id' | 'digest'>): string {
  return `${job.id}-${job.digest}`;
}

/** The job as the queue carries it (its checked request included, so workers check nothing again). */
function queuedJob(job: BatchJob): QueuedData['job'] {
  return { id: job.id, kind: job.kind, line: job.line, fields: job.fields, digest: job.digest, request: job.request };
}

/** A dub job's target languages when it runs as a flow (more than one), else undefined. */
function flowLanguages(job: BatchJob): string[] | undefined {
  if (job.kind !== 'dub') return undefined;
  const languages = job.fields.to as string[];
  return languages.length > 1 ? languages : undefined;
}

/** What a worker leaves in a job it cannot finish: attempts left, BullMQ tries it again, else the producer reports it. */
const JOB_OPTIONS = { attempts: 5, backoff: { type: 'exponential', delay: 1000 } } as const;

function flowOf(queueName: string, job: BatchJob, languages: string[], states: Map<string, QueuedState | undefined> = new Map()): FlowJob {
  const id = bullIdOf(job);
  return {
    name: DUB_FLOW,
    queueName,
    data: { job: queuedJob(job) } satisfies QueuedData,
    opts: { jobId: id },
    children: languages.map((language) => ({
      name: job.kind,
      queueName,
      data: {
        job: { ...queuedJob(job), request: { ...job.request, targetLanguages: [language] } },
        language,
        state: states.get(language),
      } satisfies QueuedData,
      opts: { jobId: `${id}-${language}`, failParentOnFailure: true, ...JOB_OPTIONS },
    })),
  };
}

/**
 * Runs a job file on the queue: checked as `runBatch` checks it, task jobs enqueued (nothing added
 * for jobs already there), `tts` jobs streamed here; yields each job's result as it completes,
 * its files and `results.jsonl` line written here. A rerun skips jobs done (`journal.jsonl`
 * keeps them) and picks up jobs the queue finished meanwhile.
 */
export async function* enqueueBatch(options: QueueBatchOptions, onPlan?: (plan: BatchPlan) => void): AsyncGenerator<BatchJobResult> {
  const concurrency = intOption(options.concurrency, 'concurrency', { min: 1, max: 1000, fallback: 8 });
  const connection = connectionOf(options);
  const queueName = options.queueName ?? QUEUE_NAME;
  const { firstLines, plan, problems } = await checkFile(options);
  onPlan?.(plan);
  if (options.strict === true && plan.invalid > 0) {
    yield* problems;
    return;
  }
  const { Queue, QueueEvents, FlowProducer, Job: BullJob } = await import('bullmq');
  await mkdir(options.outDir, { recursive: true });
  const journal = await BatchJournal.open(join(options.outDir, JOURNAL_FILE));
  const results = createWriteStream(join(options.outDir, RESULTS_FILE));
  const context: JobContext = { options, journal, deadline: undefined, signal: options.signal ?? new AbortController().signal };
  const queue = new Queue(queueName, { connection });
  const events = new QueueEvents(queueName, { connection });
  const flows = new FlowProducer({ connection });

  /** Jobs on the queue this run waits for, by BullMQ id. */
  const waiting = new Map<string, BatchJob>();
  /** Ids the queue finished, to be written. */
  const finished: string[] = [];
  /** Results ready to yield. */
  const ready: BatchJobResult[] = [];
  let wake: (() => void) | undefined;
  const poke = (): void => {
    wake?.();
    wake = undefined;
  };
  const inFlight = new Set<Promise<void>>();
  const start = (work: Promise<BatchJobResult>): void => {
    const running: Promise<void> = work
      .then((result) => void ready.push(result))
      .finally(() => {
        inFlight.delete(running);
        poke();
      });
    inFlight.add(running);
  };
  const settle = (id: string): void => {
    if (!waiting.has(id)) return;
    finished.push(id);
    poke();
  };
  events.on('completed', ({ jobId }) => settle(jobId));
  events.on('failed', ({ jobId }) => settle(jobId));
  const onAbort = (): void => poke();
  options.signal?.addEventListener('abort', onAbort);

  /** Writes a finished job's files, or reports why it did not finish; `retry` first tries again a failure the options ask for. */
  const conclude = async (id: string, retry: boolean): Promise<BatchJobResult | undefined> => {
    const job = waiting.get(id)!;
    const base = { id: job.id, line: job.line, kind: job.kind };
    const queued = await BullJob.fromId<QueuedData, QueuedResult>(queue, id);
    if (queued === undefined) {
      waiting.delete(id);
      return {
        ...base,
        status: 'pending',
        error: { code: 'RTT_INPUT', message: 'The job was removed from the queue; run the batch again to enqueue it again.' },
      };
    }
    const state = await queued.getState();
    if (state === 'completed') {
      waiting.delete(id);
      const value = queued.returnvalue;
      const out = join(options.outDir, job.id);
      try {
        const written =
          'parts' in value
            ? await writeDubParts(options.client, value.parts as Array<{ language: string; runId: number }>, out, { signal: options.signal })
            : await (kindOf(job.kind) as TaskKindSpec).write(
                options.client,
                // Writing reads the result by its run id; the final status is not needed again.
                { taskId: value.taskId, runId: value.runId, response: { status: 'completed' } as never },
                job,
                out,
                { signal: options.signal },
              );
        const files = relativeNames(options.outDir, written);
        const run = 'parts' in value ? {} : { taskId: value.taskId, runId: value.runId };
        await journal.record(job.id, job.digest, { state: 'done', ...run, files });
        return { ...base, status: 'done', ...run, files };
      } catch (error) {
        const run = 'parts' in value ? {} : { taskId: value.taskId, runId: value.runId };
        return { ...base, status: 'pending', ...run, error: describe(error) };
      }
    }
    if (state !== 'failed') return undefined; // retried by BullMQ meanwhile: its next end is awaited
    const outcome = queued.name === DUB_FLOW ? await flowOutcome(queued, job) : outcomeOf(queued);
    const again = outcome.status === 'pending' || outcome.retryable === true;
    const wanted =
      again || (outcome.status === 'uncertain' && options.retryUncertain === true) || (outcome.status === 'failed' && options.retryFailed === true);
    if (retry && wanted) {
      if (queued.name === DUB_FLOW) await retryFlow(queued, job);
      else {
        // A pending job keeps its task (resumed); the others are created again.
        const keep = outcome.status === 'pending';
        await queued.updateData({ ...queued.data, state: keep ? queued.data.state : undefined, outcome: undefined });
        await queued.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true });
      }
      return undefined;
    }
    waiting.delete(id);
    const status = outcome.status;
    const error = {
      code: outcome.code,
      message: status === 'uncertain' ? `${outcome.message} Run again with retryUncertain (--retry-uncertain) to create it again.` : outcome.message,
    };
    return { ...base, status, ...(outcome.taskId !== undefined ? { taskId: outcome.taskId } : {}), error };
  };

  const flowOutcome = async (parent: Job<QueuedData>, job: BatchJob): Promise<QueuedOutcome> => {
    const order: QueuedOutcome['status'][] = ['uncertain', 'failed', 'pending'];
    let worst: QueuedOutcome | undefined;
    for (const language of flowLanguages(job)!) {
      const child = await BullJob.fromId<QueuedData>(queue, `${parent.id}-${language}`);
      if (child === undefined || (await child.getState()) !== 'failed') continue;
      const outcome = outcomeOf(child);
      if (worst === undefined || order.indexOf(outcome.status) < order.indexOf(worst.status)) worst = outcome;
    }
    return worst ?? { status: 'failed', code: 'RTT_UNKNOWN', message: parent.failedReason };
  };

  /** A failed flow added again: children that have a task keep it (resumed, not created again), the others are created. */
  const retryFlow = async (parent: Job<QueuedData>, job: BatchJob): Promise<void> => {
    const states = new Map<string, QueuedState | undefined>();
    for (const language of flowLanguages(job)!) {
      const child = await BullJob.fromId<QueuedData, TaskRun>(queue, `${parent.id}-${language}`);
      if (child === undefined) continue;
      if ((await child.getState()) === 'completed') states.set(language, { taskId: child.returnvalue.taskId });
      else if (child.data.state !== undefined && 'taskId' in child.data.state && child.data.outcome?.status === 'pending')
        states.set(language, child.data.state);
    }
    await parent.remove();
    await flows.add(flowOf(queueName, job, flowLanguages(job)!, states));
  };

  try {
    await events.waitUntilReady();
    // Enqueue: jobs a rerun finds done are reported; streamed jobs run here; the others go on the queue.
    let batch: Array<{ name: string; data: QueuedData; opts: { jobId: string } & typeof JOB_OPTIONS }> = [];
    const flush = async (): Promise<void> => {
      if (batch.length > 0) await queue.addBulk(batch);
      batch = [];
    };
    for await (const record of readJobFile(options.jobs, { format: options.format })) {
      if (options.signal?.aborted === true) break;
      const admitted = admitRecord(context, record, firstLines);
      if ('status' in admitted) {
        yield await report(results, admitted);
        continue;
      }
      const { job } = admitted;
      const kind = kindOf(job.kind);
      if ('stream' in kind) {
        while (inFlight.size >= concurrency) await Promise.race(inFlight);
        start(streamJob(context, job, kind));
      } else {
        const id = bullIdOf(job);
        waiting.set(id, job);
        const languages = flowLanguages(job);
        if (languages === undefined) batch.push({ name: job.kind, data: { job: queuedJob(job) }, opts: { jobId: id, ...JOB_OPTIONS } });
        else if ((await BullJob.fromId(queue, id)) === undefined) await flows.add(flowOf(queueName, job, languages));
        if (batch.length >= 500) await flush();
      }
      while (ready.length > 0) yield await report(results, ready.shift()!);
    }
    await flush();
    // Jobs already finished (an earlier producer's, or finished before this one listened): looked at once.
    for (const id of [...waiting.keys()]) {
      const state = await queue.getJobState(id);
      if (state === 'completed' || state === 'failed') {
        const result = await conclude(id, true);
        if (result !== undefined) yield await report(results, result);
      }
      while (ready.length > 0) yield await report(results, ready.shift()!);
    }
    // Then each job as the queue finishes it, until none is left or the run is stopped.
    for (;;) {
      while (ready.length > 0) yield await report(results, ready.shift()!);
      if (options.signal?.aborted === true) break;
      const id = finished.shift();
      if (id !== undefined) {
        if (waiting.has(id)) {
          const result = await conclude(id, false);
          if (result !== undefined) yield await report(results, result);
        }
        continue;
      }
      if (waiting.size === 0 && inFlight.size === 0) break;
      await new Promise<void>((resolve) => (wake = resolve));
    }
    await Promise.all(inFlight);
    while (ready.length > 0) yield await report(results, ready.shift()!);
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
    await Promise.allSettled(inFlight);
    results.end();
    await once(results, 'close').catch(() => undefined);
    await journal.close();
    await Promise.allSettled([events.close(), flows.close(), queue.close()]);
  }
}

function outcomeOf(job: Job<QueuedData>): QueuedOutcome {
  return job.data.outcome ?? { status: 'failed', code: 'RTT_UNKNOWN', message: job.failedReason };
}

/**
 * Runs a worker: takes the queue's jobs, `concurrency` at a time, creating each task once and
 * waiting for it, its task id saved in the job's data first. Stop it with `signal` or `close()`.
 */
export async function runWorker(options: QueueWorkerOptions): Promise<QueueWorker> {
  const concurrency = intOption(options.concurrency, 'concurrency', { min: 1, max: 1000, fallback: 8 });
  const perSecond = options.requestsPerSecond === undefined ? undefined : numberOption(options.requestsPerSecond, 'requestsPerSecond', { above: 0 });
  const deadline = options.jobDeadlineMs === undefined ? undefined : numberOption(options.jobDeadlineMs, 'jobDeadlineMs', { above: 0 });
  const lockMs = intOption(options.lockMs, 'lockMs', { min: 100, max: 3_600_000, fallback: 30_000 });
  const connection = connectionOf(options);
  const queueName = options.queueName ?? QUEUE_NAME;
  const { Queue, Worker, UnrecoverableError, DelayedError } = await import('bullmq');
  const stop = new AbortController();
  // Every job's wait listens to it: as many listeners as jobs at once, which is no leak.
  setMaxListeners(concurrency + 10, stop.signal);
  const { client } = options;

  /** Puts the job back on the queue as it is (its state kept), without spending an attempt. */
  const putBack = async (job: Job<QueuedData>, token: string | undefined): Promise<never> => {
    await job.moveToDelayed(Date.now(), token);
    throw new DelayedError();
  };
  const give = async (job: Job<QueuedData>, data: QueuedData, outcome: QueuedOutcome, final: boolean): Promise<never> => {
    await job.updateData({ ...data, outcome });
    throw final ? new UnrecoverableError(outcome.message) : new Error(outcome.message);
  };

  const processor = async (job: Job<QueuedData>, token?: string): Promise<QueuedResult> => {
    if (job.name === DUB_FLOW) {
      const values = await job.getChildrenValues<TaskRun>();
      const order = job.data.job.fields.to as string[];
      const parts = Object.values(values).sort((a, b) => order.indexOf(a.language!) - order.indexOf(b.language!));
      return { parts };
    }
    const data = job.data;
    const kind = kindOf(data.job.kind);
    if ('stream' in kind) throw new UnrecoverableError(`${data.job.kind} jobs run in the producer, not on the queue.`);
    if (stop.signal.aborted) return putBack(job, token);
    let taskId = data.state !== undefined && 'taskId' in data.state ? data.state.taskId : undefined;
    const resumed = taskId !== undefined;
    if (taskId === undefined) {
      if (data.state !== undefined) {
        return give(
          job,
          data,
          { status: 'uncertain', code: 'RTT_CONNECTION', message: 'A worker stopped while creating this job: the service may have started a task for it.' },
          true,
        );
      }
      await job.updateData({ ...data, state: { creating: true }, outcome: undefined });
      try {
        // A create in flight is not aborted: its outcome is what the job's data must know.
        taskId = (await kind.create(client, data.job.request, {})).taskId;
      } catch (error) {
        const described = describe(error);
        if (!createOutcomeKnown(error)) return give(job, { ...data, state: { creating: true } }, { status: 'uncertain', ...described }, true);
        // Refused for now (429, 503 after every retry): no task exists; BullMQ tries again after its back-off.
        const retryable = serviceDidNotAct(error);
        return give(job, { ...data, state: undefined }, { status: 'failed', ...described, ...(retryable ? { retryable } : {}) }, !retryable);
      }
      await job.updateData({ ...data, state: { taskId }, outcome: undefined });
    }
    let run;
    try {
      run = await kind.wait(client, taskId, { signal: stop.signal, readAtOnce: resumed, ...(deadline !== undefined ? { maxWaitMs: deadline } : {}) });
    } catch (error) {
      const current = { ...data, state: { taskId } };
      if (error instanceof TaskFailedError) return give(job, current, { status: 'failed', taskId, ...describe(error) }, true);
      if (stop.signal.aborted) return putBack(job, token);
      return give(job, current, { status: 'pending', taskId, ...describe(error) }, false);
    }
    return { taskId, runId: run.runId, ...(data.language !== undefined ? { language: data.language } : {}) };
  };

  const worker: BullWorker<QueuedData, QueuedResult> = new Worker(queueName, processor, {
    connection,
    concurrency,
    lockDuration: lockMs,
    stalledInterval: lockMs,
    maxStalledCount: 100,
    ...(perSecond !== undefined ? { limiter: { max: perSecond, duration: 1000 } } : {}),
  });
  const queue: BullQueue = new Queue(queueName, { connection });
  worker.on('error', () => undefined); // connection trouble: BullMQ reconnects; the jobs stay on the queue
  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      stop.abort(new Error('The worker is stopping.'));
      await worker.close();
      await queue.close();
    })();
    return closing;
  };
  let resolveClosed!: () => void;
  const closed = new Promise<void>((resolve) => (resolveClosed = resolve));
  const onAbort = (): void => void close().then(resolveClosed, resolveClosed);
  if (options.signal?.aborted === true) onAbort();
  else options.signal?.addEventListener('abort', onAbort, { once: true });
  await worker.waitUntilReady();
  return {
    rateLimit: (ms) => queue.rateLimit(ms),
    closed,
    close: () => close().then(resolveClosed, resolveClosed),
  };
}
