/**
 * `rt-translate worker --queue redis://HOST:PORT`: runs the jobs `rt-translate batch JOBS --out DIR
 * --queue ...` put on a BullMQ queue in Redis, on this machine, as many workers as wanted on as
 * many machines. Each job's task id is saved in the job before its wait, so a worker that dies is
 * replaced by one that resumes the task; a 429 pauses every worker of the queue. SIGINT or SIGTERM
 * stops taking jobs: creates in flight finish, waits stop, and their jobs go back to the queue.
 */
import { RateLimiter, parseQueueUrl, runWorker, type QueueWorker } from '../../lib/batch/index.js';
import { EXIT_OK, UsageError, intFlag, type CliIo } from '../cli.js';
import { POLL_OPTIONS, POLL_USAGE, SERVICE_OPTIONS, SERVICE_USAGE, parseCommand, serviceSettings, withService } from './service.js';

export const WORKER_USAGE = `Usage: rt-translate worker --queue redis://HOST:PORT [options]   run a queue's batch jobs

  --queue redis://HOST:PORT
                        the Redis server \`rt-translate batch --queue\` put the jobs on
                        (rediss:// for TLS; plain redis:// to another host only with
                        --allow-insecure)
  --queue-name NAME     the queue's name (default rt-translate-batch)
  --concurrency N       jobs this worker runs at once (default 8)
  --rate N              jobs started per second at most, every worker of the queue together
                        (default: no limit; a 429 pauses every worker for the wait the
                        service names, either way)
  --deadline-ms MS      longest wait for one job's task (default: its kind's guidance)
  --lock-ms MS          how long a worker that stops answering keeps its jobs before another
                        worker takes them over (default 30000)
${POLL_USAGE}
${SERVICE_USAGE}

It runs until SIGINT or SIGTERM: then it takes no more jobs, lets creates in flight finish, stops
the waits, and puts their jobs back on the queue for any worker to resume.

Exit status: 130 after SIGINT, 143 after SIGTERM; 1 service, network or Redis failure; 2 usage
error.`;

const OPTIONS = {
  ...SERVICE_OPTIONS,
  ...POLL_OPTIONS,
  queue: { type: 'string' },
  'queue-name': { type: 'string' },
  concurrency: { type: 'string' },
  rate: { type: 'string' },
  'deadline-ms': { type: 'string' },
  'lock-ms': { type: 'string' },
} as const;

export async function runWorkerCommand(args: string[], io: CliIo): Promise<number> {
  const parsed = parseCommand(args, OPTIONS, WORKER_USAGE, io, false);
  if (!parsed) return EXIT_OK;
  const { values } = parsed;
  if (values.queue === undefined || values.queue === '') throw new UsageError('--queue redis://HOST:PORT is required (see --help).');
  parseQueueUrl(values.queue, { allowInsecure: values['allow-insecure'] === true });
  const concurrency = intFlag(values.concurrency, '--concurrency', 1);
  const rate = values.rate === undefined ? undefined : Number(values.rate);
  if (rate !== undefined && !(Number.isFinite(rate) && rate > 0))
    throw new UsageError(`--rate expects a number of jobs per second > 0 (got "${values.rate}").`);
  const deadlineMs = intFlag(values['deadline-ms'], '--deadline-ms', 1);
  const lockMs = intFlag(values['lock-ms'], '--lock-ms', 100);
  const settings = await serviceSettings(values, io);
  let worker: QueueWorker | undefined;
  // A refusal seen here pauses every worker of the queue, not only this one.
  const rateLimiter = new RateLimiter({ onRefused: (ms) => void worker?.rateLimit(ms).catch(() => undefined) });

  return withService(
    settings,
    io,
    async (service) => {
      worker = await runWorker({
        queue: values.queue!,
        queueName: values['queue-name'],
        allowInsecure: values['allow-insecure'] === true,
        client: service.client,
        concurrency,
        requestsPerSecond: rate,
        jobDeadlineMs: deadlineMs,
        lockMs,
        signal: service.signal,
      });
      io.stderr.write(`rt-translate: worker ready on queue ${values['queue-name'] ?? 'rt-translate-batch'}\n`);
      await worker.closed;
      throw new Error('interrupted');
    },
    { rateLimiter },
  );
}
