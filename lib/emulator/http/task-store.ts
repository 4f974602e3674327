/**
 * Tasks and runs of the emulator. A task is PENDING for `taskMs` after creation, then reaches
 * its outcome: SUCCESS unless an outcome was chosen, by a marker in the text (`[[ERROR]]`,
 * `[[TIMEOUT]]`, `[[PAYMENT_REQUIRED]]`) or by `POST /_emulator/task-outcomes` (any status
 * string, so clients can be tested against a status they do not know). Each task gets a run id
 * at creation; its status shows it only once SUCCESS.
 */
import { randomUUID } from 'node:crypto';

import type { TaskKind } from '../../http/task-kinds.js';

export { TASK_KINDS, type TaskKind } from '../../http/task-kinds.js';

export interface TaskOutcome {
  status: string;
  message?: string;
  exception_reason?: string;
}

export interface EmulatedTask {
  id: string;
  kind: TaskKind;
  /** The API key that created it. */
  owner: string;
  runId: number;
  readyAt: number;
  /** Status reads answered so far, and how many answer PENDING whatever the time. */
  polls: number;
  pollsNeeded: number;
  outcome: TaskOutcome;
  /** What the result needs (text, language, upload name, ...). */
  payload: Record<string, unknown>;
  /** Results made on first request, kept for the next ones. */
  cache: Map<string, unknown>;
}

interface QueuedOutcome extends TaskOutcome {
  kind?: TaskKind;
  remaining: number;
}

const MARKERS: Record<string, string> = {
  '[[ERROR]]': 'ERROR',
  '[[TIMEOUT]]': 'TIMEOUT',
  '[[PAYMENT_REQUIRED]]': 'PAYMENT_REQUIRED',
};

/** The final status chosen by a marker in `text` (or in any string of a list), if any. */
export function markerOutcome(text: unknown): TaskOutcome | undefined {
  if (Array.isArray(text)) return text.map(markerOutcome).find((o) => o !== undefined);
  if (typeof text !== 'string') return undefined;
  for (const [marker, status] of Object.entries(MARKERS)) {
    if (text.includes(marker)) {
      return status === 'ERROR' ? { status, message: 'The emulator failed this task because its text asked for it.' } : { status };
    }
  }
  return undefined;
}

/** The outcome a marker in any text field of a payload asks for (`text`, `texts`, `prompt`, a URL, a name). */
function payloadMarker(payload: Record<string, unknown>): TaskOutcome | undefined {
  return Object.values(payload).map(markerOutcome).find((o) => o !== undefined);
}

export class TaskStore {
  readonly #tasks = new Map<string, EmulatedTask>();
  readonly #runs = new Map<number, EmulatedTask>();
  #queued: QueuedOutcome[] = [];
  #nextRunId = 1001;
  readonly #maxTasks: number;

  constructor(
    readonly taskMs: number,
    readonly now: () => number,
    maxTasks = 10_000,
    /** Status reads of a created task that answer PENDING before its outcome (see `create`). */
    readonly taskPolls = 0,
  ) {
    this.#maxTasks = maxTasks;
  }

  /** The next `count` created tasks (of `kind`, if given) end with `outcome`. */
  queueOutcome(outcome: TaskOutcome, count: number, kind?: TaskKind): void {
    this.#queued.push({ ...outcome, kind, remaining: count });
  }

  clearOutcomes(): void {
    this.#queued = [];
  }

  #takeQueued(kind: TaskKind): TaskOutcome | undefined {
    const index = this.#queued.findIndex((q) => q.kind === undefined || q.kind === kind);
    if (index < 0) return undefined;
    const queued = this.#queued[index]!;
    queued.remaining -= 1;
    if (queued.remaining <= 0) this.#queued.splice(index, 1);
    const { status, message, exception_reason } = queued;
    return { status, message, exception_reason };
  }

  /**
   * A new task, PENDING until `pendingMs` have passed and its status was read `pollsNeeded`
   * times (an answer cut before it was sent does not count), then ending with `outcome` (or a
   * queued outcome, a marker in its text, or SUCCESS).
   */
  create(kind: TaskKind, owner: string, payload: Record<string, unknown>, outcome?: TaskOutcome, pendingMs = this.taskMs, pollsNeeded = this.taskPolls): EmulatedTask {
    const task: EmulatedTask = {
      id: randomUUID(),
      kind,
      owner,
      runId: this.#nextRunId++,
      readyAt: this.now() + pendingMs,
      polls: 0,
      pollsNeeded,
      outcome: outcome ?? this.#takeQueued(kind) ?? payloadMarker(payload) ?? { status: 'SUCCESS' },
      payload,
      cache: new Map(),
    };
    this.#tasks.set(task.id, task);
    this.#runs.set(task.runId, task);
    while (this.#tasks.size > this.#maxTasks) {
      const oldest = this.#tasks.values().next().value as EmulatedTask;
      this.#tasks.delete(oldest.id);
      this.#runs.delete(oldest.runId);
    }
    return task;
  }

  task(id: string): EmulatedTask | undefined {
    return this.#tasks.get(id);
  }

  run(runId: number): EmulatedTask | undefined {
    return this.#runs.get(runId);
  }

  /** PENDING until `readyAt` and `pollsNeeded` status reads, then the outcome's status. */
  status(task: EmulatedTask): string {
    return this.now() < task.readyAt || task.polls < task.pollsNeeded ? 'PENDING' : task.outcome.status;
  }

  /**
   * Time until a PENDING task's outcome, ms: what is left of its PENDING time, or 0 when only
   * status reads still hold it (the next read may end it).
   */
  readyInMs(task: EmulatedTask): number {
    return Math.max(0, Math.ceil(task.readyAt - this.now()));
  }

  /** Counts a status read that was answered in full. */
  polled(task: EmulatedTask): void {
    task.polls += 1;
  }

  /** The status endpoint's body. */
  statusBody(task: EmulatedTask): Record<string, unknown> {
    const status = this.status(task);
    const body: Record<string, unknown> = { status, run_id: status === 'SUCCESS' ? task.runId : null };
    if (status === task.outcome.status && status !== 'SUCCESS') {
      if (task.outcome.message !== undefined) body.message = task.outcome.message;
      if (task.outcome.exception_reason !== undefined) body.exception_reason = task.outcome.exception_reason;
    }
    return body;
  }
}
