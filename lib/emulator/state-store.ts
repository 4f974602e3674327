/**
 * What an emulator remembers between runs (`stateDir`): its custom voices, tasks, runs and result
 * files, as records in a directory that several emulators (several commands at once) may share.
 *
 * Layout under the directory:
 *   voices/ID.json        a custom voice
 *   tasks/TASK_ID.json    a task and its run
 *   runs/RUN_ID.json      the task of a run: claimed when the run id is given out
 *   files/ID.json         a stored file's description; files/ID/NAME holds its bytes
 *
 * - Every record is written whole: to a temporary file beside it, then renamed over it, so a
 *   reader sees the old record or the new one, never a part.
 * - A new id (a run id, a voice id) is claimed with an exclusive hard link of such a file: of two
 *   emulators that pick the same id, one gets it and the other takes the next, so ids are unique
 *   across commands. Two writers of one record: the last one wins (only a task's count of status
 *   reads is ever written by two emulators at once).
 * - Owners are kept as `sha256:` of their API key (`ownerId`), never the key: a hash of a key
 *   cannot be turned back into it, and the emulator only ever compares owners.
 * - Files are capped in bytes: storing one that takes them past the cap removes the oldest first
 *   (never the one just stored).
 *
 * Reads and writes are synchronous: records are a few hundred bytes, result files a few hundred
 * KB, and the emulator answers one developer's commands.
 */
import { createHash, randomBytes } from 'node:crypto';
import { linkSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { ValidationError } from '../errors.js';

/** The owner of a voice or task as kept: `sha256:` and the hex digest of its API key. */
export function ownerId(apiKey: string): string {
  return `sha256:${createHash('sha256').update(apiKey).digest('hex')}`;
}

/** Records of one kind by name: in memory, or in a directory (`StateDir.records`). */
export interface Records<T> {
  get(name: string): T | undefined;
  /** Writes `value` whole, replacing any record of that name. */
  put(name: string, value: T): void;
  /** Writes `value` only if no record has that name; false when one has. */
  claim(name: string, value: T): boolean;
  /** Removes the record; false when there was none. */
  delete(name: string): boolean;
  names(): string[];
}

/** Records kept in a Map, for an emulator that remembers nothing. */
export function memoryRecords<T>(): Records<T> {
  const map = new Map<string, T>();
  return {
    get: (name) => map.get(name),
    put: (name, value) => void map.set(name, value),
    claim(name, value) {
      if (map.has(name)) return false;
      map.set(name, value);
      return true;
    },
    delete: (name) => map.delete(name),
    names: () => [...map.keys()],
  };
}

/** Record names are ids the emulator makes: letters, digits, `-` and `_`, never a path. */
const NAME = /^[A-Za-z0-9_-]{1,128}$/;
const TEMP_PREFIX = '.tmp-';
const JSON_SUFFIX = '.json';

function missing(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

/** A stored file's description (`files/ID.json`). */
export interface FileRecord {
  /** `/_files/ID/NAME`. */
  path: string;
  /** NAME as stored on disk (the decoded file name). */
  name: string;
  contentType: string;
  etag: string;
  size: number;
  /** When it was stored, ms since the epoch: the oldest go first past the cap. */
  storedAt: number;
}

/** The emulator's state directory (see the module doc). */
export class StateDir {
  readonly dir: string;
  /** The files' descriptions. */
  readonly fileRecords: Records<FileRecord>;

  constructor(dir: string) {
    this.dir = dir;
    this.fileRecords = this.records<FileRecord>('files');
  }

  /** Writes `bytes` to `path` whole: a temporary file beside it, renamed over it. */
  #writeWhole(path: string, bytes: Buffer | string): string {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    const temp = join(dirname(path), `${TEMP_PREFIX}${process.pid}-${randomBytes(6).toString('hex')}`);
    writeFileSync(temp, bytes, { mode: 0o600 });
    return temp;
  }

  #put(path: string, bytes: Buffer | string): void {
    const temp = this.#writeWhole(path, bytes);
    try {
      renameSync(temp, path);
    } catch (error) {
      rmSync(temp, { force: true });
      throw error;
    }
  }

  /** Creates `path` whole unless it exists: false when it does. */
  #claim(path: string, bytes: Buffer | string): boolean {
    const temp = this.#writeWhole(path, bytes);
    try {
      linkSync(temp, path);
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
      throw error;
    } finally {
      rmSync(temp, { force: true });
    }
  }

  /** JSON records of `collection` (a directory under the state directory). */
  records<T>(collection: string): Records<T> {
    const dir = join(this.dir, collection);
    const path = (name: string): string => {
      if (!NAME.test(name)) throw new ValidationError('name', `a record name (${NAME.source})`, JSON.stringify(name));
      return join(dir, `${name}${JSON_SUFFIX}`);
    };
    return {
      get: (name) => {
        if (!NAME.test(name)) return undefined;
        try {
          return JSON.parse(readFileSync(path(name), 'utf8')) as T;
        } catch (error) {
          if (missing(error) || error instanceof SyntaxError) return undefined;
          throw error;
        }
      },
      put: (name, value) => this.#put(path(name), JSON.stringify(value)),
      claim: (name, value) => this.#claim(path(name), JSON.stringify(value)),
      delete: (name) => {
        if (!NAME.test(name)) return false;
        try {
          unlinkSync(path(name));
          return true;
        } catch (error) {
          if (missing(error)) return false;
          throw error;
        }
      },
      names: () => {
        try {
          return readdirSync(dir)
            .filter((entry) => entry.endsWith(JSON_SUFFIX) && !entry.startsWith(TEMP_PREFIX))
            .map((entry) => entry.slice(0, -JSON_SUFFIX.length));
        } catch (error) {
          if (missing(error)) return [];
          throw error;
        }
      },
    };
  }

  /** Where the bytes of stored file `id` named `name` are. */
  filePath(id: string, name: string): string {
    if (!NAME.test(id) || name === '' || name === '.' || name === '..' || /[/\\\0]/.test(name)) {
      throw new ValidationError('file', 'a stored file id and a plain file name', JSON.stringify(`${id}/${name}`));
    }
    return join(this.dir, 'files', id, name);
  }

  /** Stores a file's bytes, then its description, then removes the oldest files past `maxBytes`. */
  putFile(id: string, record: FileRecord, bytes: Buffer, maxBytes: number): void {
    this.#put(this.filePath(id, record.name), bytes);
    this.fileRecords.put(id, record);
    this.#evictFiles(id, maxBytes);
  }

  /** A stored file's description and bytes, if it is still kept. */
  readFile(id: string): { record: FileRecord; bytes: Buffer } | undefined {
    const record = this.fileRecords.get(id);
    if (!record) return undefined;
    try {
      return { record, bytes: readFileSync(this.filePath(id, record.name)) };
    } catch (error) {
      if (missing(error)) return undefined;
      throw error;
    }
  }

  /** Removes the oldest files until the files take at most `maxBytes`, keeping `keep`. */
  #evictFiles(keep: string, maxBytes: number): void {
    const files = this.fileRecords
      .names()
      .map((id) => ({ id, record: this.fileRecords.get(id) }))
      .filter((f): f is { id: string; record: FileRecord } => f.record !== undefined)
      .sort((a, b) => a.record.storedAt - b.record.storedAt || a.id.localeCompare(b.id));
    let total = files.reduce((sum, f) => sum + f.record.size, 0);
    for (const { id, record } of files) {
      if (total <= maxBytes) break;
      if (id === keep) continue;
      this.fileRecords.delete(id);
      rmSync(join(this.dir, 'files', id), { recursive: true, force: true });
      total -= record.size;
    }
  }
}
