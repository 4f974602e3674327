/**
 * `rt-translate/batch`: thousands of service tasks from a job file (JSON Lines or CSV), run with
 * bounded concurrency and one rate limiter, resumable after a crash without paying twice.
 *
 * - `runBatch` runs a job file and yields each job's result as it finishes (`run-batch.ts`);
 * - `checkJob` and `BATCH_KINDS`: the kinds of job and their fields (`kinds.ts`);
 * - `readJobFile`: the job file's records, streamed (`job-file.ts`);
 * - `BatchJournal`: the journal that makes a rerun resume (`journal.ts`);
 * - `enqueueBatch` and `runWorker`: the same batch across machines, on a BullMQ queue in Redis
 *   (`queue.ts`; BullMQ is loaded only when they run);
 * - `RateLimiter` (also on `rt-translate/http`): one 429 pauses every request of the client.
 *
 * The guide is docs/batch.md.
 */
export { JOURNAL_FILE, RESULTS_FILE, runBatch, type BatchJobResult, type BatchJobStatus, type BatchOptions, type BatchPlan } from './run-batch.js';
export { QUEUE_NAME, parseQueueUrl, type QueueConnectionOptions } from './queue-jobs.js';
export { enqueueBatch, type QueueBatchOptions } from './queue-producer.js';
export { runWorker, type QueueWorker, type QueueWorkerOptions } from './queue-worker.js';
export { BATCH_KINDS, checkJob, type BatchJob, type BatchKind } from './kinds.js';
export { jobFileFormat, readJobFile, type JobFileFormat, type JobLineProblem, type JobRecord, type ReadJobFileOptions } from './job-file.js';
export { BatchJournal, JournalError, type JobState, type JournalEntry } from './journal.js';
export { RateLimiter, type RateLimiterOptions } from '../http/rate-limiter.js';
