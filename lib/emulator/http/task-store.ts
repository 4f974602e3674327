/**
 * Tasks and runs of the emulator. A task is PENDING for `taskMs` after creation, then reaches
 * its outcome: SUCCESS unless an outcome was chosen, by a marker in the text (`[[ERROR]]`,
 * `[[TIMEOUT]]`, `[[PAYMENT_REQUIRED]]`) or by `POST /_emulator/task-outcomes` (any status
 * string, so clients can be tested against a status they do not know). Each task gets a run id
 * at creation; its status shows it only once SUCCESS.
 *
 * With a state directory (`StoredTasks`), tasks and runs are kept there too, so a later emulator
 * on it (the next command) knows them: a run id is claimed there, unique across every emulator
 * on the directory; a task is written whole when made and at each change (a status read, a
 * note). What a task keeps is its record; results made from it (`cache`) are made again when
 * asked for after a restart, and what must stay the same (a stored file's path, a date) is a
 * `note`, kept with the record.
 */
import { randomUUID } from 'node:crypto';

import type { TaskKind } from '../../http/task-kinds.js';
import { ownerId, type Records } from '../state-store.js';

export { TASK_KINDS, type TaskKind } from '../../http/task-kinds.js';

export interface TaskOutcome {
  status: string;
  message?: string;
  exception_reason?: string;
}

/** A value a task keeps with its record (`TaskStore.note`). */
export type TaskNote = string | number | number[];

/** What is kept of a task: everything but the results made from it. */
export interface TaskRecord {
  id: string;
  kind: TaskKind;
  /** `ownerId` of the API key that created it. */
  owner: string;
  runId: number;
  readyAt: number;
  /** Status reads answered so far, and how many answer PENDING whatever the time. */
  polls: number;
  pollsNeeded: number;
  outcome: TaskOutcome;
  /** What the result needs (text, language, upload name, ...): JSON, other tasks by run id. */
  payload: Record<string, unknown>;
  /** What must stay the same for its results (a stored file's path, a date), kept with it. */
  notes: Record<string, TaskNote>;
}

export interface EmulatedTask extends TaskRecord {
  /** Results made on first request, kept for the next ones while the emulator runs. */
  cache: Map<string, unknown>;
}

/** Where tasks and runs are kept between emulators: records by task id, and each run's task by run id. */
export interface StoredTasks {
  tasks: Records<TaskRecord>;
  runs: Records<{ task_id: string }>;
}

/** A task id the emulator makes (a UUID): anything else names no task. */
const TASK_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** The first run id. */
const FIRST_RUN_ID = 1001;

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
  return Object.values(payload)
    .map(markerOutcome)
    .find((o) => o !== undefined);
}

export class TaskStore {
  /** Tasks in use, by id and by run id (all of them without a state directory; those asked for with one). */
  readonly #tasks = new Map<string, EmulatedTask>();
  readonly #runs = new Map<number, EmulatedTask>();
  #queued: QueuedOutcome[] = [];
  #nextRunId = FIRST_RUN_ID;
  readonly #maxTasks: number;
  readonly #stored: StoredTasks | undefined;

  constructor(
    readonly taskMs: number,
    readonly now: () => number,
    maxTasks = 10_000,
    /** Status reads of a created task that answer PENDING before its outcome (see `create`). */
    readonly taskPolls = 0,
    /** Where tasks are kept for later emulators; default: nowhere. */
    stored?: StoredTasks,
  ) {
    this.#maxTasks = maxTasks;
    this.#stored = stored;
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
   * queued outcome, a marker in its text, or SUCCESS). `owner` is the API key that made it.
   */
  create(
    kind: TaskKind,
    owner: string,
    payload: Record<string, unknown>,
    outcome?: TaskOutcome,
    pendingMs = this.taskMs,
    pollsNeeded = this.taskPolls,
  ): EmulatedTask {
    const task: EmulatedTask = {
      id: randomUUID(),
      kind,
      owner: ownerId(owner),
      runId: 0,
      readyAt: this.now() + pendingMs,
      polls: 0,
      pollsNeeded,
      outcome: outcome ?? this.#takeQueued(kind) ?? payloadMarker(payload) ?? { status: 'SUCCESS' },
      payload,
      notes: {},
      cache: new Map(),
    };
    task.runId = this.#claimRunId(task.id);
    this.#save(task);
    this.#remember(task);
    if (this.#stored) this.#evictStored();
    return task;
  }

  /** The next run id: from this store's count, or past every run kept in the state directory, claimed there. */
  #claimRunId(taskId: string): number {
    if (!this.#stored) return this.#nextRunId++;
    const kept = this.#stored.runs.names().map(Number).filter(Number.isSafeInteger);
    for (let runId = Math.max(this.#nextRunId, ...kept.map((n) => n + 1)); ; runId++) {
      if (this.#stored.runs.claim(String(runId), { task_id: taskId })) {
        this.#nextRunId = runId + 1;
        return runId;
      }
    }
  }

  /** Keeps `task` in use, forgetting the oldest past `maxTasks`. */
  #remember(task: EmulatedTask): void {
    this.#tasks.set(task.id, task);
    this.#runs.set(task.runId, task);
    while (this.#tasks.size > this.#maxTasks) {
      const oldest = this.#tasks.values().next().value as EmulatedTask;
      this.#tasks.delete(oldest.id);
      this.#runs.delete(oldest.runId);
    }
  }

  /** Writes `task`'s record to the state directory, if there is one. */
  #save(task: EmulatedTask): void {
    if (!this.#stored) return;
    const { cache: _cache, ...record } = task;
    this.#stored.tasks.put(task.id, record);
  }

  /** Past `maxTasks` runs in the state directory, the oldest runs and their tasks are removed. */
  #evictStored(): void {
    const stored = this.#stored!;
    const runs = stored.runs
      .names()
      .map(Number)
      .filter(Number.isSafeInteger)
      .sort((a, b) => a - b);
    for (const runId of runs.slice(0, Math.max(0, runs.length - this.#maxTasks))) {
      const taskId = stored.runs.get(String(runId))?.task_id;
      if (taskId !== undefined && TASK_ID.test(taskId)) stored.tasks.delete(taskId);
      stored.runs.delete(String(runId));
    }
  }

  task(id: string): EmulatedTask | undefined {
    const known = this.#tasks.get(id);
    if (known || !this.#stored || !TASK_ID.test(id)) return known;
    const record = this.#stored.tasks.get(id);
    if (!record) return undefined;
    const task: EmulatedTask = { ...record, notes: record.notes ?? {}, cache: new Map() };
    this.#remember(task);
    return task;
  }

  run(runId: number): EmulatedTask | undefined {
    const known = this.#runs.get(runId);
    if (known || !this.#stored) return known;
    const taskId = this.#stored.runs.get(String(runId))?.task_id;
    return taskId === undefined ? undefined : this.task(taskId);
  }

  /** True when `apiKey` made `task`. */
  ownedBy(task: EmulatedTask, apiKey: string): boolean {
    return task.owner === ownerId(apiKey);
  }

  /** Keeps `value` with `task`'s record (in the state directory too) under `key`. */
  note(task: EmulatedTask, key: string, value: TaskNote): void {
    task.notes[key] = value;
    this.#save(task);
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
    this.#save(task);
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
