/**
 * Tasks and runs of the emulator. A task is PENDING for `taskMs` after creation, then reaches
 * its outcome: SUCCESS unless an outcome was chosen, by a marker in the text (`[[ERROR]]`,
 * `[[TIMEOUT]]`, `[[PAYMENT_REQUIRED]]`) or by `POST /_emulator/task-outcomes` (any status
 * string, so clients can be tested against a status they do not know). Each task gets a run id
 * at creation; its status shows it only once SUCCESS.
 */
import { randomUUID } from 'node:crypto';

export type TaskKind = 'translated-tts' | 'tts' | 'project-setup' | 'audio-separation' | 'sub';

export const TASK_KINDS: readonly TaskKind[] = ['translated-tts', 'tts', 'project-setup', 'audio-separation', 'sub'];

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

/** The final status chosen by a marker in `text`, if any. */
export function markerOutcome(text: unknown): TaskOutcome | undefined {
  if (typeof text !== 'string') return undefined;
  for (const [marker, status] of Object.entries(MARKERS)) {
    if (text.includes(marker)) {
      return status === 'ERROR' ? { status, message: 'The emulator failed this task because its text asked for it.' } : { status };
    }
  }
  return undefined;
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

  create(kind: TaskKind, owner: string, payload: Record<string, unknown>, outcome?: TaskOutcome, pendingMs = this.taskMs): EmulatedTask {
    const task: EmulatedTask = {
      id: randomUUID(),
      kind,
      owner,
      runId: this.#nextRunId++,
      readyAt: this.now() + pendingMs,
      outcome: outcome ?? this.#takeQueued(kind) ?? markerOutcome(payload.text) ?? { status: 'SUCCESS' },
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

  /** PENDING until `readyAt`, then the outcome's status. */
  status(task: EmulatedTask): string {
    return this.now() < task.readyAt ? 'PENDING' : task.outcome.status;
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
