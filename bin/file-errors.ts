/**
 * Files and directories named on the command line, and what is said when one cannot be used:
 * every command reports a missing input, a missing directory, a directory where a file is
 * expected (or a file where a directory is), a path through a regular file and a permission
 * denied with the same words and the same code, `RTT_FILE`, naming the flag and the path as
 * typed (`cannot write -o nodir/out.wav: the directory nodir does not exist; create it, or pass
 * --create-dirs.`). All of it is a usage error (exit status 2), found before any traffic.
 *
 * The checks here read the file system and create nothing, except the directories that
 * `--create-dirs` asks for (as curl's flag of that name does), made before anything is sent.
 */
import { constants } from 'node:fs';
import { access, mkdir, open, stat } from 'node:fs/promises';
import { dirname, sep } from 'node:path';
import { UsageError, resolvePath, type CliIo } from './cli.js';

/** The code of every file problem. */
export const FILE_ERROR_CODE = 'RTT_FILE';

/** What is wrong with a path. */
export type FileProblem = 'missing' | 'missing-directory' | 'is-directory' | 'not-directory' | 'permission' | 'other';

/** How a command uses a path: reads a file, writes a file, or writes files into a directory. */
export type FileRole = 'input' | 'output' | 'directory';

/** A path given with `flag` (`-i`, `-o`, `--events`, ...) and how it is used. */
export interface FileUse {
  flag: string;
  /** The path as typed. */
  path: string;
  role: FileRole;
}

/** A file or directory named on the command line cannot be used: a usage error with code `RTT_FILE`. */
export class FileError extends UsageError {
  readonly problem: FileProblem;
  readonly flag: string;
  readonly path: string;
  constructor(problem: FileProblem, use: FileUse, message: string, options?: { cause?: unknown }) {
    super(message, FILE_ERROR_CODE, options);
    this.name = 'FileError';
    this.problem = problem;
    this.flag = use.flag;
    this.path = use.path;
  }
}

/** The flag that creates missing directories, on every command that writes files (`parseArgs` form). */
export const CREATE_DIRS_OPTION = { 'create-dirs': { type: 'boolean' } } as const;

/** Its help line: `what` it creates when missing (`the directories of -o`). */
export function createDirsUsage(what = 'the directories of -o'): string {
  return `  --create-dirs         create ${what} when missing`;
}

function errnoOf(error: unknown): string | undefined {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** The nearest ancestor of `absolute` that exists and is not a directory (for ENOTDIR), typed as in `typed`. */
async function fileInPath(absolute: string, typed: string): Promise<string | undefined> {
  let dir = dirname(absolute);
  let shown = dirname(typed);
  for (;;) {
    const info = await stat(dir).catch(() => undefined);
    if (info !== undefined && !info.isDirectory()) return shown;
    const parent = dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
    shown = dirname(shown);
  }
}

/**
 * The one wording of a file-system failure `error` (an errno error, or one of this module's
 * findings) for `use`; `absolute` is the path resolved, to name the part of it at fault.
 */
export async function fileError(error: unknown, use: FileUse, absolute = use.path): Promise<FileError> {
  if (error instanceof FileError) return error;
  const { flag, path, role } = use;
  const subject = role === 'input' ? `cannot read ${flag} ${path}` : role === 'output' ? `cannot write ${flag} ${path}` : `cannot write into ${flag} ${path}`;
  const fail = (problem: FileProblem, what: string): FileError => new FileError(problem, use, `${subject}: ${what}.`, { cause: error });
  switch (errnoOf(error)) {
    case 'ENOENT':
      if (role === 'input') return fail('missing', 'no such file');
      if (role === 'directory') return fail('missing-directory', 'no such directory; create it, or pass --create-dirs');
      return fail('missing-directory', `the directory ${dirname(path)} does not exist; create it, or pass --create-dirs`);
    case 'EISDIR': {
      const what = path.endsWith('/') || path.endsWith(sep) ? 'it names a directory' : 'it is a directory';
      return fail('is-directory', `${what}; ${flag} takes a ${role === 'input' ? 'file' : 'file name'} here`);
    }
    case 'ENOTDIR': {
      if (
        role === 'directory' &&
        (await stat(absolute).then(
          (info) => !info.isDirectory(),
          () => false,
        ))
      ) {
        return fail('not-directory', `it is a file; ${flag} takes a directory here`);
      }
      const file = await fileInPath(absolute, path);
      return fail('not-directory', file === undefined ? 'a part of the path is not a directory' : `${file} is a file, not a directory`);
    }
    case 'EACCES':
    case 'EPERM':
      return fail('permission', 'permission denied');
    default: {
      const code = errnoOf(error);
      const message = error instanceof Error ? error.message : String(error);
      return fail('other', code === undefined ? message.replace(/\.$/, '') : code);
    }
  }
}

/** An errno error with `code`, for a finding the file system did not report itself. */
function errno(code: string): NodeJS.ErrnoException {
  return Object.assign(new Error(code), { code });
}

/**
 * Checks that the file `path` (given with `flag`) can be read: it exists, is not a directory
 * (with `regular`, is a regular file) and opens for reading. Returns the resolved path.
 */
export async function checkInputFile(io: CliIo, path: string, flag: string, regular = false): Promise<string> {
  const use: FileUse = { flag, path, role: 'input' };
  const absolute = resolvePath(io, path);
  try {
    const handle = await open(absolute, 'r');
    try {
      const info = await handle.stat();
      if (info.isDirectory()) throw errno('EISDIR');
      if (regular && !info.isFile())
        throw new FileError('other', use, `cannot read ${flag} ${path}: it is not a regular file (a device or a pipe); ${flag} takes a file here.`);
    } finally {
      await handle.close();
    }
  } catch (error) {
    throw await fileError(error, use, absolute);
  }
  return absolute;
}

/** Creates `dir` and its parents for `use` (`--create-dirs`). */
async function createDirectory(dir: string, use: FileUse, absolute: string): Promise<void> {
  try {
    await mkdir(dir, { recursive: true });
  } catch (error) {
    throw await fileError(error, use, absolute);
  }
}

/**
 * Checks that files can be written into the directory `path` (given with `flag`): it exists
 * (with `createDirs`, it is created when missing), is a directory, and is writable. Returns the
 * resolved path.
 */
export async function checkOutputDirectory(io: CliIo, path: string, flag: string, createDirs = false): Promise<string> {
  const use: FileUse = { flag, path, role: 'directory' };
  const absolute = resolvePath(io, path);
  try {
    const info = await stat(absolute).catch(async (error: unknown) => {
      if (errnoOf(error) !== 'ENOENT' || !createDirs) throw error;
      await createDirectory(absolute, use, absolute);
      return stat(absolute);
    });
    if (!info.isDirectory()) throw errno('ENOTDIR');
    await access(absolute, constants.W_OK);
  } catch (error) {
    throw await fileError(error, use, absolute);
  }
  return absolute;
}

/**
 * Makes sure the directory that will hold the output file `absolute` exists: with `createDirs`
 * a missing one is created; otherwise nothing is done (the file's own check reports it).
 */
export async function prepareOutputDirectory(absolute: string, use: FileUse, createDirs: boolean): Promise<void> {
  if (!createDirs) return;
  const dir = dirname(absolute);
  const info = await stat(dir).catch(() => undefined);
  if (info === undefined) await createDirectory(dir, use, absolute);
}
