/**
 * A worker of a batch on a BullMQ queue in Redis (`rt-translate worker`, any number, on any
 * machine): `runWorker` takes the queue's jobs, creates each task once and waits for it. The
 * job's data is its journal: `state: {creating: true}` is saved before the create is sent and
 * `state: {taskId}` before the first status read, so a worker that dies mid-poll is replaced
 * (once BullMQ sees its lock expire) by one that resumes the same task, and one that dies
 * mid-create leaves the job `uncertain`. A refusal for now (429, 503) pauses every worker of the
 * queue for the wait the service named (BullMQ's queue rate limit); `requestsPerSecond` is
 * BullMQ's limiter (jobs started per second).
 */
import { setMaxListeners } from 'node:events';
import type { Job, Queue as BullQueue, Worker as BullWorker } from 'bullmq';
import { intOption, numberOption } from '../options.js';
import type { LocalizationClient } from '../http/client.js';
import { TaskFailedError } from '../http/errors.js';
import { serviceDidNotAct } from '../http/retry.js';
import { kindOf } from './kinds.js';
import { createOutcomeKnown, describe, isGone } from './run-batch.js';
import {
  DUB_FLOW,
  QUEUE_NAME,
  connectionOf,
  type QueueConnectionOptions,
  type QueuedData,
  type QueuedOutcome,
  type QueuedResult,
  type TaskRun,
} from './queue-jobs.js';

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
      if (error instanceof TaskFailedError || isGone(error)) return give(job, current, { status: 'failed', taskId, ...describe(error) }, true);
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
