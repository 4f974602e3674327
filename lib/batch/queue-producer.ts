/**
 * The producer of a batch on a BullMQ queue in Redis (`rt-translate batch --queue`):
 * `enqueueBatch` checks the job file as `runBatch` does, puts each task job on the queue (a dub
 * into several languages as a flow), runs the `tts` jobs itself (one streamed request, no task
 * to hand over), and writes each job's files and `results.jsonl` line as the workers finish it,
 * keeping `journal.jsonl` so that a rerun skips jobs done and picks up jobs finished meanwhile.
 * BullMQ is loaded only here and in `queue-worker.ts`, with `import('bullmq')`, when one runs.
 */
import { join } from 'node:path';
import type { Job } from 'bullmq';
import { intOption } from '../options.js';
import { readJobFile } from './job-file.js';
import { kindOf, writeDubParts, type BatchJob, type TaskKindSpec } from './kinds.js';
import {
  admitRecord,
  checkFile,
  describe,
  relativeNames,
  openOutputs,
  streamJob,
  type BatchJobResult,
  type BatchOptions,
  type BatchPlan,
  type JobContext,
} from './run-batch.js';
import {
  DUB_FLOW,
  JOB_OPTIONS,
  QUEUE_NAME,
  bullIdOf,
  connectionOf,
  flowLanguages,
  flowOf,
  outcomeOf,
  queuedJob,
  type QueueConnectionOptions,
  type QueuedData,
  type QueuedOutcome,
  type QueuedResult,
  type QueuedState,
  type TaskRun,
} from './queue-jobs.js';

export interface QueueBatchOptions extends BatchOptions, QueueConnectionOptions {}

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
  const { journal, results } = await openOutputs(options.outDir);
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
        yield await results.report(admitted);
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
      while (ready.length > 0) yield await results.report(ready.shift()!);
    }
    await flush();
    // Jobs already finished (an earlier producer's, or finished before this one listened): looked at once.
    for (const id of [...waiting.keys()]) {
      const state = await queue.getJobState(id);
      if (state === 'completed' || state === 'failed') {
        const result = await conclude(id, true);
        if (result !== undefined) yield await results.report(result);
      }
      while (ready.length > 0) yield await results.report(ready.shift()!);
    }
    // Then each job as the queue finishes it, until none is left or the run is stopped.
    for (;;) {
      while (ready.length > 0) yield await results.report(ready.shift()!);
      if (options.signal?.aborted === true) break;
      const id = finished.shift();
      if (id !== undefined) {
        if (waiting.has(id)) {
          const result = await conclude(id, false);
          if (result !== undefined) yield await results.report(result);
        }
        continue;
      }
      if (waiting.size === 0 && inFlight.size === 0) break;
      await new Promise<void>((resolve) => (wake = resolve));
    }
    await Promise.all(inFlight);
    while (ready.length > 0) yield await results.report(ready.shift()!);
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
    await Promise.allSettled(inFlight);
    await results.close();
    await journal.close();
    await Promise.allSettled([events.close(), flows.close(), queue.close()]);
  }
}
