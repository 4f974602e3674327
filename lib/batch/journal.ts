/**
 * The batch journal: what happened to each job, on disk before anything depends on it, so that
 * a batch killed at any moment and run again never pays for a job twice and never loses a
 * result. It is an append-only file of JSON lines (`journal.jsonl` in the output directory):
 * a job's `creating` line is durable before its create request is sent, its `created` line
 * (with the task id) before the first status read, `done` once its files are in place.
 *
 * Durability: a line is written and the file `fdatasync`ed before `record` resolves. Lines
 * that arrive while a sync is under way wait for the next one and share it (group commit), so
 * a batch running 32 jobs at once pays about one sync per round, not one per line.
 *
 * Reading back: the last line of a job wins. A line cut short or garbled by a crash can only be
 * the last of the file (nothing is written after an unfinished write, and a line is only
 * acknowledged once synced); it is dropped and the file cut back to the whole lines before it.
 * A damaged line followed by good ones is a `JournalError`: the journal is not guessed at.
 *
 * One writer: `journal.lock` beside the journal holds the process id of the batch using it; a
 * second batch on the same directory is refused (a lock left by a process that no longer runs,
 * or by an earlier one with this process's id, is taken over). When the file holds more than twice as many lines as jobs, opening it rewrites
 * it with one line per job (a new file synced, then renamed over the old one).
 */
import { once } from 'node:events';
import { createReadStream } from 'node:fs';
import { mkdir, open, readFile, rename, truncate, unlink, writeFile, type FileHandle } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { RtTranslateError } from '../errors.js';

/** What the journal says about a job. */
export type JobState =
  /** The create request may have been sent: its outcome is known once `created` follows. */
  | { state: 'creating' }
  | { state: 'created'; taskId: string }
  | { state: 'done'; taskId?: string; runId?: number; files: string[] }
  /**
   * The job failed: refused, or its task failed (`taskId` when a task existed). `retryable`: the
   * service refused it before acting, for now (429, 503): the next run creates it again.
   */
  | { state: 'failed'; taskId?: string; runId?: number; code: string; message: string; retryable?: boolean }
  /** The create was sent and its answer lost: the task may exist. Not created again unless asked. */
  | { state: 'uncertain'; code: string; message: string };

/** One journal line: a job, the digest of its fields, and its state. */
export type JournalEntry = { id: string; digest: string; at: string } & JobState;

/** The journal is damaged, or is not a batch journal. */
export class JournalError extends RtTranslateError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('RTT_INPUT', message, { ...options, retryable: false });
    this.name = 'JournalError';
  }
}

const HEADER = { journal: 'rt-translate batch', version: 1 } as const;

/**
 * The locks this process holds (resolved paths). A lock naming this process's id that is not
 * here was left by an earlier process that had the same id (a container starts its command as
 * the same process id every time), killed before it could remove it.
 */
const heldLocks = new Set<string>();

interface Pending {
  line: string;
  resolve: () => void;
  reject: (error: unknown) => void;
}

export class BatchJournal {
  readonly path: string;
  readonly #handle: FileHandle;
  readonly #jobs: Map<string, JournalEntry>;
  readonly #lock: string;
  #queue: Pending[] = [];
  #flushing: Promise<void> | undefined;
  #closed = false;
  /** Bytes of whole, synced lines: where a failed write is cut back to. */
  #size: number;
  /** Set when a failed write could not be cut back: later lines would follow a torn one. */
  #broken: JournalError | undefined;

  private constructor(path: string, handle: FileHandle, jobs: Map<string, JournalEntry>, lock: string, size: number) {
    this.path = path;
    this.#handle = handle;
    this.#jobs = jobs;
    this.#lock = lock;
    this.#size = size;
  }

  /** Opens the journal at `path`, reading what it holds, or starts one. Refused while another process uses it. */
  static async open(path: string): Promise<BatchJournal> {
    const dir = dirname(path);
    await mkdir(dir, { recursive: true });
    const lock = join(dir, 'journal.lock');
    await takeLock(lock, path);
    try {
      const { jobs, goodBytes, totalBytes, lines } = await replay(path);
      if (goodBytes < totalBytes) await truncate(path, goodBytes);
      if (lines > 2 * jobs.size + 1) await compact(path, jobs.values());
      const handle = await open(path, 'a');
      const journal = new BatchJournal(path, handle, jobs, lock, (await handle.stat()).size);
      if (goodBytes === 0) {
        await journal.#append(`${JSON.stringify(HEADER)}\n`);
        await syncDirectory(dir);
      }
      return journal;
    } catch (error) {
      await unlink(lock).catch(() => undefined);
      heldLocks.delete(resolve(lock));
      throw error;
    }
  }

  /** The job's last state, if the journal has one. */
  get(id: string): JournalEntry | undefined {
    return this.#jobs.get(id);
  }

  /** Jobs the journal knows. */
  get size(): number {
    return this.#jobs.size;
  }

  entries(): IterableIterator<JournalEntry> {
    return this.#jobs.values();
  }

  /** Records the job's new state; resolves once it is on disk. */
  async record(id: string, digest: string, state: JobState): Promise<JournalEntry> {
    const entry = { id, digest, at: new Date().toISOString(), ...state } as JournalEntry;
    await this.#append(`${JSON.stringify(entry)}\n`);
    this.#jobs.set(id, entry);
    return entry;
  }

  /** Waits for lines being written, then closes the file. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    while (this.#flushing) await this.#flushing.catch(() => undefined);
    await this.#handle.close();
    await unlink(this.#lock).catch(() => undefined);
    heldLocks.delete(resolve(this.#lock));
  }

  #append(line: string): Promise<void> {
    if (this.#closed) return Promise.reject(new JournalError(`The batch journal ${this.path} is closed.`));
    if (this.#broken !== undefined) return Promise.reject(this.#broken);
    return new Promise((resolve, reject) => {
      this.#queue.push({ line, resolve, reject });
      this.#flushing ??= this.#flush();
    });
  }

  /** Writes and syncs every queued line, a round at a time, until none is left. */
  async #flush(): Promise<void> {
    while (this.#queue.length > 0) {
      const round = this.#queue;
      this.#queue = [];
      try {
        const bytes = Buffer.from(round.map((pending) => pending.line).join(''), 'utf8');
        let written = 0;
        while (written < bytes.length) written += (await this.#handle.write(bytes, written)).bytesWritten;
        await this.#handle.datasync();
        this.#size += bytes.length;
        for (const pending of round) pending.resolve();
      } catch (error) {
        const failure = new JournalError(`Could not write the batch journal ${this.path}: ${(error as Error).message}`, { cause: error });
        // A write cut short (a full disk) leaves part of a line: cut it off, so that the lines of
        // later rounds do not follow a torn one and make the whole journal unreadable.
        await this.#handle.truncate(this.#size).catch(() => {
          this.#broken = failure;
        });
        for (const pending of this.#broken !== undefined ? [...round, ...this.#queue.splice(0)] : round) pending.reject(failure);
      }
    }
    this.#flushing = undefined;
  }
}

/** Reads a journal: each job's last entry, its line count, and how many leading bytes are whole, good lines. */
async function replay(path: string): Promise<{ jobs: Map<string, JournalEntry>; goodBytes: number; totalBytes: number; lines: number }> {
  const jobs = new Map<string, JournalEntry>();
  let goodBytes = 0;
  let totalBytes = 0;
  let lineNumber = 0;
  /** A damaged line, forgiven only if nothing but damage follows it (a crash's garbled tail). */
  let damaged: JournalError | undefined;
  let carry = Buffer.alloc(0);
  const stream = createReadStream(path);
  const opened = once(stream, 'open').then(
    () => true,
    (error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return false;
      throw new JournalError(`Could not read the batch journal ${path}: ${error.message}`, { cause: error });
    },
  );
  if (!(await opened)) return { jobs, goodBytes, totalBytes, lines: 0 };
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    totalBytes += chunk.length;
    const data = carry.length > 0 ? Buffer.concat([carry, chunk]) : chunk;
    let start = 0;
    for (let end = data.indexOf(10, start); end !== -1; end = data.indexOf(10, start)) {
      lineNumber += 1;
      const problem = readLine(path, data.subarray(start, end).toString('utf8'), lineNumber, jobs);
      if (problem !== undefined) damaged ??= problem;
      else if (damaged !== undefined) throw damaged;
      else goodBytes += end + 1 - start;
      start = end + 1;
    }
    carry = Buffer.from(data.subarray(start));
  }
  // `carry` is a line without its newline: a write the crash cut short, never acknowledged.
  return { jobs, goodBytes, totalBytes, lines: lineNumber };
}

/** Reads one line into `jobs`; a damaged line is returned as the error it would be, for the caller to judge. */
function readLine(path: string, text: string, lineNumber: number, jobs: Map<string, JournalEntry>): JournalError | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return new JournalError(`The batch journal ${path} is damaged at line ${lineNumber}: not JSON. Move it away to start the batch afresh.`, { cause: error });
  }
  if (lineNumber === 1) {
    const header = value as Partial<typeof HEADER> | null;
    if (header?.journal !== HEADER.journal || header.version !== HEADER.version) {
      throw new JournalError(`${path} is not a batch journal of this version (its first line is not ${JSON.stringify(HEADER)}).`);
    }
    return undefined;
  }
  const entry = value as Partial<JournalEntry> | null;
  if (entry === null || typeof entry !== 'object' || typeof entry.id !== 'string' || typeof entry.state !== 'string') {
    return new JournalError(`The batch journal ${path} is damaged at line ${lineNumber}: not a job entry. Move it away to start the batch afresh.`);
  }
  jobs.set(entry.id, entry as JournalEntry);
  return undefined;
}

/** Rewrites the journal with one line per job: a new file, synced, renamed over the old one. */
async function compact(path: string, entries: Iterable<JournalEntry>): Promise<void> {
  const fresh = `${path}.compact`;
  const handle = await open(fresh, 'w');
  try {
    const lines = [JSON.stringify(HEADER)];
    for (const entry of entries) lines.push(JSON.stringify(entry));
    await handle.writeFile(`${lines.join('\n')}\n`);
    await handle.datasync();
  } finally {
    await handle.close();
  }
  await rename(fresh, path);
  await syncDirectory(dirname(path));
}

/** Makes a new or renamed file's name durable. */
async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } catch {
    // Some file systems refuse to sync a directory; the file's own sync still stands.
  } finally {
    await handle.close();
  }
}

/** Takes the journal's lock file, or refuses with the process that holds it. */
async function takeLock(lock: string, path: string): Promise<void> {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      await writeFile(lock, `${process.pid}\n`, { flag: 'wx' });
      heldLocks.add(resolve(lock));
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST')
        throw new JournalError(`Could not lock the batch journal ${path}: ${(error as Error).message}`, { cause: error });
    }
    const holder = Number((await readFile(lock, 'utf8').catch(() => '')).trim());
    const valid = Number.isSafeInteger(holder) && holder > 0;
    if (valid && (holder === process.pid ? heldLocks.has(resolve(lock)) : isRunning(holder))) {
      throw new JournalError(`Another batch (process ${holder}) is using ${path}; wait for it to end, or use another output directory.`);
    }
    // Left by a process that no longer runs, or by an earlier one with this process's id (or unreadable): take it over.
    await unlink(lock).catch(() => undefined);
  }
  throw new JournalError(`Could not lock the batch journal ${path}: another batch keeps taking ${lock}.`);
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
