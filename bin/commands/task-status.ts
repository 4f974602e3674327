/**
 * `rt-translate task-status KIND TASK_ID`: the status of a task as JSON on stdout; with `--wait`,
 * polled until final (a progress line on a terminal), then the final status is printed and the
 * exit status says how the task ended.
 */
import { parseArgs } from 'node:util';
import * as endpoints from '../../lib/http/endpoints.js';
import { waitFor } from '../../lib/http/endpoint-kit.js';
import type { HttpRequester, RequestOptions } from '../../lib/http/client.js';
import type { TaskStatusResponse } from '../../lib/http/tasks.js';
import { EXIT_OK, UsageError, parseCommandLine, type CliIo } from '../cli.js';
import { EXIT_USAGE_TEXT, POLL_OPTIONS, POLL_USAGE, SERVICE_OPTIONS, SERVICE_USAGE, serviceSettings, taskProgress, withService } from './http-common.js';

type StatusGetter = (client: HttpRequester, taskId: string, options: RequestOptions) => Promise<TaskStatusResponse>;

/** The task kinds, with their status endpoint and polling profile. */
const KINDS: Record<string, { status: StatusGetter; profile: 'speech' | 'longMedia' }> = {
  'translated-tts': { status: endpoints.getTranslatedTtsStatus, profile: 'speech' },
  // eslint-disable-next-line @typescript-eslint/no-deprecated
  tts: { status: endpoints.getTtsStatus, profile: 'speech' },
  sub: { status: endpoints.getSubtitleStatus, profile: 'longMedia' },
  'audio-separation': { status: endpoints.getAudioSeparationStatus, profile: 'longMedia' },
};

export const TASK_STATUS_USAGE = `Usage: rt-translate task-status KIND TASK_ID [options]      status of a task

  KIND                  ${Object.keys(KINDS).join(' | ')} (tts: the deprecated
                        asynchronous flow)
  TASK_ID               the task id its creation answered
  --wait                poll until the task is final (SUCCESS, ERROR, TIMEOUT, PAYMENT_REQUIRED)
${POLL_USAGE}
${SERVICE_USAGE}

Prints the status as one JSON line ({"status":...,"run_id":...}). With --wait the exit status
is 1 when the task ended in ERROR, TIMEOUT or PAYMENT_REQUIRED (the cause on stderr).

${EXIT_USAGE_TEXT}`;

const OPTIONS = {
  ...SERVICE_OPTIONS,
  ...POLL_OPTIONS,
  wait: { type: 'boolean' },
} as const;

export async function runTaskStatus(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommandLine(() => parseArgs({ args, options: OPTIONS, strict: true, allowPositionals: true }));
  if (values.help) {
    io.stdout.write(`${TASK_STATUS_USAGE}\n`);
    return EXIT_OK;
  }
  if (positionals.length !== 2) throw new UsageError(`task-status expects KIND and TASK_ID (got ${positionals.length} argument(s); see --help).`);
  const [kindName, taskId] = positionals as [string, string];
  const kind = KINDS[kindName];
  if (!Object.hasOwn(KINDS, kindName) || kind === undefined) {
    throw new UsageError(`KIND expects one of ${Object.keys(KINDS).join(', ')} (got "${kindName}").`);
  }
  if (taskId === '') throw new UsageError('TASK_ID must not be empty.');
  const settings = serviceSettings(values, io);

  return withService(settings, io, async ({ client, signal }) => {
    if (values.wait !== true) {
      const status = await kind.status(client, taskId, { signal });
      io.stdout.write(`${JSON.stringify(status.raw)}\n`);
      return EXIT_OK;
    }
    const progress = taskProgress(io, `task ${taskId}`);
    try {
      const done = await waitFor(
        client,
        taskId,
        (id, options) => kind.status(client, id, options),
        { signal, onProgress: progress.onProgress },
        kind.profile,
      );
      progress.stop();
      io.stdout.write(`${JSON.stringify(done.response.raw)}\n`);
      return EXIT_OK;
    } catch (error) {
      progress.stop();
      // A task that ended badly: its final status first, then the cause (exit 1).
      const last = progress.last();
      if (last && last.status !== 'PENDING') io.stdout.write(`${JSON.stringify(last.response.raw)}\n`);
      throw error;
    }
  });
}
