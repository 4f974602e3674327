/**
 * `rt-translate batch JOBS --out DIR`: runs a file of jobs (JSON Lines or CSV; see
 * lib/batch/kinds.ts for the kinds and their fields) with a bounded number in flight, one rate
 * limiter for all of them, each job's files in DIR named by its id, one line per job in
 * DIR/results.jsonl, and a journal in DIR that makes running the same command again after a crash
 * resume instead of paying twice. A progress line on stderr (done, running, failed, the time
 * left), a summary at the end. With --queue, the jobs run on `rt-translate worker`s through a
 * BullMQ queue in Redis; this command still checks them, writes their files and waits for the end.
 */
import {
  RateLimiter,
  enqueueBatch,
  parseQueueUrl,
  runBatch,
  type BatchOptions,
  type BatchJobResult,
  type BatchJobStatus,
  type BatchPlan,
} from '../../lib/batch/index.js';
import { EXIT_OK, EXIT_USAGE, UsageError, intFlag, type CliIo } from '../cli.js';
import { POLL_OPTIONS, POLL_USAGE, SERVICE_OPTIONS, SERVICE_USAGE, parseCommand, serviceSettings, withService } from './service.js';

/** Some jobs did not end done (failed, invalid, uncertain or pending). */
export const EXIT_SOME_FAILED = 3;

export const BATCH_USAGE = `Usage: rt-translate batch JOBS --out DIR [options]      run a file of jobs

  JOBS                  the jobs: JSON Lines (one object per line) or CSV with a header row;
                        each job has an id (it names its files), a kind, and that kind's
                        fields, the flags of the command of the same name in camelCase:
                          tts              text, language, voice, format (wav, flac, mp3, adts,
                                           pcm_s16le, ...), sampleRate, model
                          translated-tts   text, from, to, voice, format (flac, wav)
                          translate-text   text (or texts, a list), from, to, formal, casual
                          transcribe       url or input (a file to upload), language, format
                                           (json, srt, vtt, txt), mode
                          subtitles        url, from, language, format (srt, vtt, txt)
                          dub              url, from, to (a list), mode
  --out DIR             each job's files (DIR/ID.flac, DIR/ID.json, ...), DIR/results.jsonl
                        (one line per job: id, status, task and run ids, files, error) and
                        DIR/journal.jsonl (what was created: keep it to resume)
  --format jsonl|csv    the job file's format (default: from its name, else its first byte)
  --concurrency N       jobs in flight at once (default 8)
  --rate N              requests per second at most, all jobs together (default: no limit;
                        a 429 pauses every job for the wait the service names, either way)
  --deadline-ms MS      longest wait for one job's task (default: its kind's guidance)
  --strict              start nothing when a line is invalid (default: report it, run the rest)
  --retry-uncertain     create again the jobs whose create may have started a task (its answer
                        was lost); without it they are reported and left alone
  --retry-failed        run again the jobs an earlier run saw fail
  --queue redis://HOST:PORT
                        put the jobs on a BullMQ queue in Redis for \`rt-translate worker\`s
                        (on any machine) to run, and write their files here as they finish;
                        enqueuing the same jobs again adds nothing (rediss:// for TLS; plain
                        redis:// to another host only with --allow-insecure). tts jobs stream
                        here, --concurrency at a time
  --queue-name NAME     the queue's name (default rt-translate-batch)
${POLL_USAGE}
${SERVICE_USAGE}

Every line is checked before the first request. Run the same command again after a crash or
Ctrl-C: jobs done are skipped, jobs whose task exists are waited for, only jobs never created
are created.

Exit status: 0 every job done; 3 some job failed, was invalid, uncertain or still pending (see
DIR/results.jsonl); 1 service or network failure; 2 usage error, or with --strict an invalid
line, before any request.`;

const OPTIONS = {
  ...SERVICE_OPTIONS,
  ...POLL_OPTIONS,
  out: { type: 'string' },
  format: { type: 'string' },
  concurrency: { type: 'string' },
  rate: { type: 'string' },
  'deadline-ms': { type: 'string' },
  strict: { type: 'boolean' },
  'retry-uncertain': { type: 'boolean' },
  'retry-failed': { type: 'boolean' },
  queue: { type: 'string' },
  'queue-name': { type: 'string' },
} as const;

export async function runBatchCommand(args: string[], io: CliIo): Promise<number> {
  const parsed = parseCommand(args, OPTIONS, BATCH_USAGE, io, true);
  if (!parsed) return EXIT_OK;
  const { values, positionals } = parsed;
  if (positionals.length !== 1) throw new UsageError(`batch expects one JOBS file (got ${positionals.length} argument(s); see --help).`);
  const jobs = positionals[0]!;
  if (values.out === undefined || values.out === '') throw new UsageError('--out DIR is required (see --help).');
  const format = values.format;
  if (format !== undefined && format !== 'jsonl' && format !== 'csv') throw new UsageError(`--format expects jsonl or csv (got "${format}").`);
  const concurrency = intFlag(values.concurrency, '--concurrency', 1);
  const rate = values.rate === undefined ? undefined : Number(values.rate);
  if (rate !== undefined && !(Number.isFinite(rate) && rate > 0))
    throw new UsageError(`--rate expects a number of requests per second > 0 (got "${values.rate}").`);
  const deadlineMs = intFlag(values['deadline-ms'], '--deadline-ms', 1);
  if (values['queue-name'] !== undefined && values.queue === undefined) throw new UsageError('--queue-name goes with --queue redis://HOST:PORT (see --help).');
  if (values.queue !== undefined) parseQueueUrl(values.queue, { allowInsecure: values['allow-insecure'] === true });
  const settings = await serviceSettings(values, io);
  const rateLimiter = new RateLimiter(rate !== undefined ? { requestsPerSecond: rate } : {});

  return withService(
    settings,
    io,
    async (service) => {
      const counts: Record<BatchJobStatus, number> = { done: 0, failed: 0, invalid: 0, uncertain: 0, pending: 0 };
      let plan: BatchPlan = { jobs: 0, invalid: 0 };
      let resumed = 0;
      const running = new Set<string>();
      const started = Date.now();
      const line = (): string => progressText(plan, counts, running.size, resumed, started);
      service.progress.show(line);
      const batchOptions: BatchOptions = {
        jobs,
        outDir: values.out!,
        client: service.client,
        format,
        concurrency,
        jobDeadlineMs: deadlineMs,
        strict: values.strict === true,
        retryUncertain: values['retry-uncertain'] === true,
        retryFailed: values['retry-failed'] === true,
        signal: service.signal,
        onStart: (job) => {
          running.add(job.id);
          service.progress.refresh();
        },
      };
      const onPlan = (found: BatchPlan): void => void (plan = found);
      const results =
        values.queue === undefined
          ? runBatch(batchOptions, onPlan)
          : enqueueBatch({ ...batchOptions, queue: values.queue, queueName: values['queue-name'], allowInsecure: values['allow-insecure'] === true }, onPlan);
      for await (const result of results) {
        counts[result.status] += 1;
        if (result.resumed === true) resumed += 1;
        if (result.id !== undefined) running.delete(result.id);
        if (result.status !== 'done') service.progress.print(problemLine(result));
        service.progress.refresh();
      }
      service.progress.stop();
      if (values.strict === true && plan.invalid > 0) {
        io.stderr.write(`rt-translate: batch of ${plan.jobs + plan.invalid} job(s): nothing started, ${plan.invalid} invalid (--strict)\n`);
        return EXIT_USAGE;
      }
      io.stderr.write(`${summary(plan, counts, resumed, rateLimiter.pauses, values.out!)}\n`);
      if (service.signal.aborted) throw new Error('interrupted');
      return counts.done === plan.jobs + plan.invalid ? EXIT_OK : EXIT_SOME_FAILED;
    },
    { rateLimiter },
  );
}

function progressText(plan: BatchPlan, counts: Record<BatchJobStatus, number>, running: number, resumed: number, started: number): string {
  const finished = counts.done + counts.failed + counts.invalid + counts.uncertain + counts.pending;
  const total = plan.jobs + plan.invalid;
  const worked = counts.done - resumed;
  const elapsed = Date.now() - started;
  const left = total - finished;
  const eta = worked > 0 && left > 0 ? ` · about ${formatDuration((elapsed / worked) * left)} left` : '';
  const failed = counts.failed + counts.invalid + counts.uncertain + counts.pending;
  return `batch: ${counts.done}/${total} done · ${running} running · ${failed} not done${eta}`;
}

function problemLine(result: BatchJobResult): string {
  const who = result.id !== undefined ? `job ${result.id} (line ${result.line})` : `line ${result.line}`;
  return `rt-translate: ${who}: ${result.status}${result.error ? `: ${result.error.message}` : ''}`;
}

function summary(plan: BatchPlan, counts: Record<BatchJobStatus, number>, resumed: number, pauses: number, out: string): string {
  const parts = [`${counts.done} done${resumed > 0 ? ` (${resumed} by an earlier run)` : ''}`];
  for (const status of ['failed', 'invalid', 'uncertain', 'pending'] as const) if (counts[status] > 0) parts.push(`${counts[status]} ${status}`);
  const paused = pauses > 0 ? `; the service asked to slow down ${pauses} time(s)` : '';
  return `rt-translate: batch of ${plan.jobs + plan.invalid} job(s): ${parts.join(', ')}${paused}; results in ${out}/results.jsonl`;
}

function formatDuration(ms: number): string {
  const seconds = Math.round(ms / 1000);
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${seconds % 60} s`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}
