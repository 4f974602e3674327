/**
 * Task waits for the HTTP subcommands: the task and its run named on stderr, failed status reads
 * said when they start and stop failing, and after a wait that ended without the task's final
 * status, the command that resumes it (`taskRun`, `waitForRun`, `--run`).
 */
import {
  HttpStatusError,
  PaymentRequiredError,
  TaskFailedError,
  type CompletedTask,
  type TaskProgress,
  type TaskReadFailure,
  type CreatedTask,
  type TaskKind,
} from '../../lib/index.js';
import { TASK_KIND_SPECS } from '../../lib/http/index.js';
import type { CliIo } from '../cli.js';
import { runFlag, type Service, type TaskValues } from './service.js';
import { waitText, type WaitProgress } from './transfers.js';

/**
 * The run a command's result comes from: `--run ID` as given; else the task `create` makes,
 * announced on stderr and waited for (a progress line on a terminal), its run announced too.
 * With `--no-wait`, prints `{"task_id","kind"}` on stdout and how to go on on stderr, and
 * returns undefined.
 */
export async function taskRun(
  io: CliIo,
  service: Service,
  kind: TaskKind,
  values: TaskValues,
  create: (signal: AbortSignal) => Promise<CreatedTask>,
): Promise<number | undefined> {
  const given = runFlag(values);
  if (given !== undefined) return given;
  const task = await create(service.signal);
  if (values['no-wait']) {
    io.stdout.write(`${JSON.stringify({ task_id: task.taskId, kind })}\n`);
    service.progress.print(
      `rt-translate: task ${task.taskId} (${kind}) created; wait for it with \`rt-translate task-status ${kind} ${task.taskId} --wait\`, ` +
        'then fetch its result with --run RUN_ID',
    );
    return undefined;
  }
  service.progress.print(`rt-translate: task ${task.taskId} (${kind}) created`);
  const run = await waitForRun(io, service, kind, task.taskId);
  service.progress.print(`rt-translate: task ${task.taskId}: run ${run.runId}`);
  return run.runId;
}

/** The task's own final statuses, or a task the service does not know (404): nothing is left to resume. */
function nothingToResume(error: unknown): boolean {
  return (
    error instanceof TaskFailedError ||
    (error instanceof PaymentRequiredError && error.taskId !== undefined) ||
    (error instanceof HttpStatusError && error.status === 404)
  );
}

/**
 * Waits for task `taskId` of `kind`, with its progress on the command's line (`waitText`). A status read that fails
 * is said on stderr when a run of failures starts and when it ends (the wait goes on until its
 * limit). When the wait ends without the task's final status (its limit passed, a failure no
 * retry fixes, Ctrl-C), stderr says that the task may still be running and how to resume: with
 * `task-status KIND TASK_ID --wait`, then `--run` (not for an embedded emulator that remembers
 * nothing, whose tasks end with the command). `seen` gets each status read; `readAtOnce` reads
 * the status at once (a task created earlier may be final already), then polls.
 */
export async function waitForRun(
  io: CliIo,
  service: Pick<Service, 'client' | 'emulator' | 'signal' | 'progress'>,
  kind: TaskKind,
  taskId: string,
  seen?: (progress: TaskProgress) => void,
  readAtOnce?: boolean,
): Promise<CompletedTask> {
  const { progress } = service;
  const start = Date.now();
  // As the wait does: a server that announced its pace (the emulator) is read at once, the service after the schedule's first interval.
  const atOnce = readAtOnce === true || service.client.emulatorVersion !== undefined;
  const wait: WaitProgress = {
    kind,
    status: undefined,
    failedReads: 0,
    nextCheckAt: start + (atOnce ? 0 : service.client.pollingFor(TASK_KIND_SPECS[kind].profile).initialIntervalMs),
    now: start,
    start,
  };
  progress.show(() => waitText({ ...wait, now: Date.now() }));
  let failing = 0;
  const onReadFailure = (failure: TaskReadFailure): void => {
    wait.failedReads = failure.failedReads;
    wait.nextCheckAt = Date.now() + failure.retryInMs;
    progress.refresh();
    if (failing++ > 0) return;
    progress.print(
      `rt-translate: task ${taskId}: reading its status failed (${failure.error.message.replace(/\.$/, '')} [${failure.error.code}]); ` +
        `trying again in ${(failure.retryInMs / 1000).toFixed(1)} s, until the wait's limit`,
    );
  };
  const onProgress = (p: TaskProgress): void => {
    if (failing > 0) progress.print(`rt-translate: task ${taskId}: status read again after ${failing} failed ${failing === 1 ? 'read' : 'reads'}`);
    failing = 0;
    wait.status = p.status;
    wait.failedReads = p.failedReads;
    wait.nextCheckAt = p.nextPollInMs === undefined ? undefined : Date.now() + p.nextPollInMs;
    progress.refresh();
    seen?.(p);
  };
  try {
    return await service.client.tasks.wait(kind, taskId, { signal: service.signal, onProgress, onReadFailure, ...(readAtOnce ? { readAtOnce } : {}) });
  } catch (error) {
    progress.stop();
    // An embedded emulator without a state directory forgets the task with this command.
    const remembered = service.emulator === undefined || service.emulator.stateDir !== undefined;
    if (!nothingToResume(error) && remembered) {
      progress.print(
        `rt-translate: task ${taskId} (${kind}) may still be running${service.emulator === undefined ? ', and the service bills it' : ''}: wait for it again with ` +
          `\`rt-translate task-status ${kind} ${taskId} --wait\`, then fetch its result with --run RUN_ID`,
      );
    }
    throw error;
  } finally {
    progress.stop();
  }
}

/**
 * Where a result of the embedded emulator is on disk, given the presigned URL it answered: its
 * URL dies with the command, its file stays in the state directory (until the cap removes it).
 * Undefined for the service, a running \`rt-translate emulator\`, or an embedded emulator that
 * remembers nothing: their URLs are printed as they are.
 */
export function localResult(service: Service, url: string): string | undefined {
  return service.emulator?.localFilePath(url);
}

/* ----------------------------------------------------------------------------------------- */
/* Output                                                                                    */
