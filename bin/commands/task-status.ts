/**
 * `rt-translate task-status KIND TASK_ID`: the status of a task of any kind (`task-kinds.ts`) as
 * JSON on stdout; with `--wait`, polled as its kind advises until final (a progress line on a
 * terminal), then the final status is printed and the exit status says how the task ended.
 */
import type { TaskProgress } from '../../lib/index.js';
import { TASK_KINDS, TASK_KIND_SPECS, isTaskKind } from '../../lib/http/index.js';
import { EXIT_OK, UsageError, didYouMean, type CliIo } from '../cli.js';
import {
  EXIT_USAGE_TEXT,
  POLL_OPTIONS,
  POLL_USAGE,
  SERVICE_OPTIONS,
  SERVICE_USAGE,
  parseCommand,
  requirePersistentService,
  serviceSettings,
  withService,
} from './service.js';
import { waitForRun } from './task-waits.js';

const KIND_LINES = TASK_KINDS.map((kind) => `    ${kind.padEnd(20)}${TASK_KIND_SPECS[kind].label}`).join('\n');

export const TASK_STATUS_USAGE = `Usage: rt-translate task-status KIND TASK_ID [options]      status of a task

  KIND                  what the task does:
${KIND_LINES}
  TASK_ID               the task id its creation answered
  --wait                read the status at once, then poll until the task is final (SUCCESS,
                        ERROR, TIMEOUT, PAYMENT_REQUIRED)
${POLL_USAGE}
${SERVICE_USAGE}

Prints the status as one JSON line ({"status":...,"run_id":...}). With --wait the exit status
is 1 when the task ended in ERROR, TIMEOUT or PAYMENT_REQUIRED (the cause on stderr). The task
must be known to the service the command talks to: the one that made it (the embedded emulator
remembers the tasks of earlier commands; see rt-translate emulator --help).

${EXIT_USAGE_TEXT}`;

const OPTIONS = {
  ...SERVICE_OPTIONS,
  ...POLL_OPTIONS,
  wait: { type: 'boolean' },
} as const;

export async function runTaskStatus(args: string[], io: CliIo): Promise<number> {
  const parsed = parseCommand(args, OPTIONS, TASK_STATUS_USAGE, io, true);
  if (!parsed) return EXIT_OK;
  const { values, positionals } = parsed;
  if (positionals.length !== 2) throw new UsageError(`task-status expects KIND and TASK_ID (got ${positionals.length} argument(s); see --help).`);
  const [kind, taskId] = positionals as [string, string];
  if (!isTaskKind(kind)) throw new UsageError(`KIND expects one of ${TASK_KINDS.join(', ')} (got "${kind}").${didYouMean(kind, TASK_KINDS)}`);
  if (taskId === '') throw new UsageError('TASK_ID must not be empty.');
  const settings = await serviceSettings(values, io);
  requirePersistentService(settings, `task ${taskId} needs the service that made it`);

  return withService(settings, io, async (service) => {
    if (values.wait !== true) {
      const status = await service.client.tasks.status(kind, taskId, { signal: service.signal });
      io.stdout.write(`${JSON.stringify(status.raw)}\n`);
      return EXIT_OK;
    }
    let last: TaskProgress | undefined;
    try {
      // The task was made earlier, by another command: it may well be final, so its status is read at once.
      const done = await waitForRun(io, service, kind, taskId, (p) => (last = p), true);
      io.stdout.write(`${JSON.stringify(done.response.raw)}\n`);
      return EXIT_OK;
    } catch (error) {
      // A task that ended badly: its final status first, then the cause (exit 1).
      if (last && last.status !== 'PENDING') io.stdout.write(`${JSON.stringify(last.response.raw)}\n`);
      throw error;
    }
  });
}
