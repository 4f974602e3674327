/**
 * What the producer (`queue-producer.ts`) and the workers (`queue-worker.ts`) of a batch on a
 * BullMQ queue agree on: the Redis URL and its check, a job's BullMQ id (`${id}-${digest}`: the
 * same file enqueued again adds nothing, a changed job is a new one), the data a queued job
 * carries (the checked job and its journal: `state: {creating: true}` before the create is sent,
 * `state: {taskId}` before the first status read, `outcome` when it cannot finish), and the flow
 * a `dub` into several languages becomes (one child job, one task, per language).
 */
import type { FlowJob, Job } from 'bullmq';
import { ValidationError } from '../errors.js';
import { isLoopbackHost } from '../config.js';
import type { BatchJob } from './kinds.js';

export const QUEUE_NAME = 'rt-translate-batch';
/** The BullMQ job name of a dub flow's parent. */
export const DUB_FLOW = 'dub-flow';

export interface QueueConnectionOptions {
  /** The Redis server: `redis://HOST:PORT` or `rediss://HOST:PORT` (TLS), with `/DB` and a password if needed. */
  queue: string;
  /** The queue's name. Default `rt-translate-batch`. */
  queueName?: string;
  /** Accept plain-text `redis://` to a host that is not loopback. Default false. */
  allowInsecure?: boolean;
}

/** The journal a queued job carries in its data. */
export type QueuedState = { creating: true } | { taskId: string };

export interface QueuedOutcome {
  status: 'failed' | 'uncertain' | 'pending';
  code: string;
  message: string;
  taskId?: string;
  retryable?: boolean;
}

export interface QueuedData {
  job: Omit<BatchJob, 'line'> & { line: number };
  /** A dub flow's child: its one target language. */
  language?: string;
  /** Cleared by the producer to create the job again (asked to, with `retryUncertain` or `retryFailed`). */
  state?: QueuedState;
  /** Why the job failed, for the producer. */
  outcome?: QueuedOutcome;
}

export interface TaskRun {
  taskId: string;
  runId: number;
  language?: string;
}

export type QueuedResult = TaskRun | { parts: TaskRun[] };

/** Checks a `redis://` URL; plain text only to a loopback host unless `allowInsecure`. */
export function parseQueueUrl(raw: string, options: { allowInsecure?: boolean } = {}): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    // Not the text itself: a Redis URL may carry a password.
    throw new ValidationError('queue', 'a redis:// or rediss:// URL (redis://HOST:PORT)', `text that is not a URL (${raw.length} characters)`);
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

export function connectionOf(options: QueueConnectionOptions): { url: string; maxRetriesPerRequest: null } {
  return { url: parseQueueUrl(options.queue, options).href, maxRetriesPerRequest: null };
}

export function bullIdOf(job: Pick<BatchJob, 'id' | 'digest'>): string {
  return `${job.id}-${job.digest}`;
}

/** The job as the queue carries it (its checked request included, so workers check nothing again). */
export function queuedJob(job: BatchJob): QueuedData['job'] {
  return { id: job.id, kind: job.kind, line: job.line, fields: job.fields, digest: job.digest, request: job.request };
}

/** A dub job's target languages when it runs as a flow (more than one), else undefined. */
export function flowLanguages(job: BatchJob): string[] | undefined {
  if (job.kind !== 'dub') return undefined;
  const languages = job.fields.to as string[];
  return languages.length > 1 ? languages : undefined;
}

/** What a worker leaves in a job it cannot finish: attempts left, BullMQ tries it again, else the producer reports it. */
export const JOB_OPTIONS = { attempts: 5, backoff: { type: 'exponential', delay: 1000 } } as const;

export function flowOf(queueName: string, job: BatchJob, languages: string[], states: Map<string, QueuedState | undefined> = new Map()): FlowJob {
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

/** Why a queued job failed, as its worker recorded it (or BullMQ's reason when none did). */
export function outcomeOf(job: Job<QueuedData>): QueuedOutcome {
  return job.data.outcome ?? { status: 'failed', code: 'RTT_UNKNOWN', message: job.failedReason };
}
