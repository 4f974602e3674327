/**
 * Output files that are whole or absent: every command that writes a file (`tts`,
 * `translated-tts`, `transcribe`, `dub`, `subtitles`, `separate-results`, `listen`, the realtime
 * command's `-o`) writes it as `NAME.partial` beside its target and renames it to `NAME` once it
 * is complete. After a failure, that file is removed, or kept under its `.partial` name when it
 * holds something received (audio up to a cut, a download's bytes) and the command says so on
 * stderr: a failure never leaves an empty or half file under the name the user asked for.
 *
 * A target that is not a regular file (`/dev/null`, a FIFO, a terminal) is written directly:
 * there is nothing to rename there. Standard output never goes through here. `open` checks that
 * the file can be written without creating it, and a command that fails before its first write
 * leaves nothing behind (the realtime command's WAV output is created before it connects, and
 * removed again when the session fails).
 */
import { access, constants, lstat, realpath, rename, rm, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { UsageError } from './cli.js';

/** What a failed write left: the `.partial` file and its size. */
export interface PartialFile {
  path: string;
  bytes: number;
}

/** Suffix of a file being written, and of what a failure kept. */
export const PARTIAL_SUFFIX = '.partial';

function errnoOf(error: unknown): string {
  return (error as NodeJS.ErrnoException).code ?? (error as Error).message;
}

/** An output file in the making: write to `path`, then `commit()` or `abandon()`. */
export class OutputFile {
  /** The name the user gave. */
  readonly target: string;
  /** Where the bytes go until `commit`: `TARGET.partial`, or the target itself when it is not a regular file. */
  readonly path: string;
  #settled = false;

  private constructor(target: string, path: string) {
    this.target = target;
    this.path = path;
  }

  /** True when the target is written directly (a device, a FIFO): nothing is renamed or removed. */
  get direct(): boolean {
    return this.path === this.target;
  }

  /**
   * Checks that `target` can be written (its directory exists and is writable; an existing file
   * is writable and not a directory) without creating anything. Throws an `Error` whose `code`
   * says why (`ENOENT`, `EACCES`, `EISDIR`). A symbolic link is followed: the file it names is
   * the one replaced.
   */
  static async open(target: string): Promise<OutputFile> {
    const link = await lstat(target).catch(() => undefined);
    const real = link?.isSymbolicLink() ? await realpath(target).catch(() => target) : target;
    let info;
    try {
      info = await stat(real);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    if (info?.isDirectory()) throw Object.assign(new Error(`${target} is a directory`), { code: 'EISDIR' });
    if (info !== undefined && !info.isFile()) {
      await access(real, constants.W_OK);
      return new OutputFile(target, target);
    }
    await access(dirname(real), constants.W_OK);
    if (info !== undefined) await access(real, constants.W_OK);
    return new OutputFile(real, `${real}${PARTIAL_SUFFIX}`);
  }

  /** The complete file takes the target's name (replacing an older file of that name). */
  async commit(): Promise<void> {
    if (this.#settled) return;
    this.#settled = true;
    if (!this.direct) await rename(this.path, this.target);
  }

  /**
   * After a failure: with `keep`, a file holding more than `minBytes` bytes stays as
   * `TARGET.partial` and is returned; otherwise it is removed (an absent one is fine).
   */
  async abandon(keep: boolean, minBytes = 0): Promise<PartialFile | undefined> {
    if (this.#settled || this.direct) return undefined;
    this.#settled = true;
    const bytes = await stat(this.path).then(
      (info) => info.size,
      () => undefined,
    );
    if (bytes === undefined) return undefined;
    if (keep && bytes > minBytes) return { path: this.path, bytes };
    await rm(this.path, { force: true });
    return undefined;
  }
}

/** `OutputFile.open`, a problem being a usage error: `cannot write output LABEL: CODE` (`label` default the target). */
export async function openOutputFile(target: string, label = target): Promise<OutputFile> {
  try {
    return await OutputFile.open(target);
  } catch (error) {
    throw new UsageError(`cannot write output ${label}: ${errnoOf(error)}`);
  }
}

/**
 * Runs `write(path)` for the file `target` names and renames it to `target` once `write`
 * resolved. When `write` fails, the file is removed, or, with `keep`, kept as `TARGET.partial`
 * when it holds more than `keep.minBytes` bytes, and `keep.report(partial)` is called (to say so
 * on stderr); then the failure is rethrown as it was.
 */
export async function writeOutputFile<T>(
  file: OutputFile,
  write: (path: string) => Promise<T>,
  keep?: { minBytes?: number; report: (partial: PartialFile) => void },
): Promise<T> {
  let result: T;
  try {
    result = await write(file.path);
  } catch (error) {
    const partial = await file.abandon(keep !== undefined, keep?.minBytes).catch(() => undefined);
    if (partial) keep!.report(partial);
    throw error;
  }
  await file.commit();
  return result;
}
