/**
 * Output files that are whole or absent: every command that writes a file (`tts`,
 * `translated-tts`, `transcribe`, `dub`, `subtitles`, `separate-results`, `listen`, the realtime
 * command's `-o`) writes it as `NAME.partial` beside its target and renames it to `NAME` once it
 * is complete. After a failure or an interruption (SIGINT, SIGTERM), that file is removed, or
 * kept under its `.partial` name when it holds something received (audio up to a cut, a
 * download's bytes, lines), made valid as far as it goes (a WAV file's sizes, a FLAC file's last
 * frame and STREAMINFO), and the command says on stderr what it holds (`keptLine`): a failure
 * never leaves an empty or half file under the name the user asked for.
 *
 * A target that is not a regular file (`/dev/null`, a FIFO, a terminal) is written directly:
 * there is nothing to rename there. Standard output never goes through here. `open` checks that
 * the file can be written without creating it, and a command that fails before its first write
 * leaves nothing behind (the realtime command's WAV output is created before it connects, and
 * removed again when the session fails).
 */
import { access, constants, lstat, readFile, realpath, rename, rm, stat } from 'node:fs/promises';
import { dirname, sep } from 'node:path';
import { resolvePath, type CliIo } from './cli.js';
import { fileError, prepareOutputDirectory, type FileUse } from './file-errors.js';

/** What a failed or interrupted write left: the `.partial` file, its size and what it holds. */
export interface PartialFile {
  /** Its absolute path. */
  path: string;
  /** Its name as the user gave the target, with the suffix (`out.wav.partial`). */
  label: string;
  bytes: number;
  /** What it holds, in words: `the first 2.8 s of audio`, `the first 3 lines`, `the first 2048 bytes`. */
  holds: string;
}

/**
 * What an output file holds, for `abandon` to finish what a cut left and to say what that is:
 * - `file`: a file as received or written (a WAV or FLAC file is made valid as far as it goes
 *   and measured in seconds, by `finishCutAudioFile`; anything else is counted in bytes);
 * - `pcm`: raw samples, `bytesPerSecond` of them a second;
 * - `lines`: text, one result per line.
 */
export type OutputContent = { kind: 'file' } | { kind: 'pcm'; bytesPerSecond: number } | { kind: 'lines' };

/** Suffix of a file being written, and of what a failure kept. */
export const PARTIAL_SUFFIX = '.partial';

function count(n: number, one: string, many: string): string {
  return n === 1 ? `the first ${one}` : `the first ${n} ${many}`;
}

/**
 * Finishes the cut file at `path` as `content` says and describes what it holds; undefined when
 * it holds nothing worth keeping (no audio, no line).
 */
async function finishCut(path: string, bytes: number, content: OutputContent): Promise<{ bytes: number; holds: string } | undefined> {
  if (bytes === 0) return undefined;
  if (content.kind === 'lines') {
    const text = await readFile(path, 'utf8');
    const lines = text.split('\n').filter((line) => line !== '').length;
    return lines === 0 ? undefined : { bytes, holds: count(lines, 'line', 'lines') };
  }
  const seconds = (value: number): string => `the first ${value.toFixed(1)} s of audio`;
  if (content.kind === 'pcm') return { bytes, holds: seconds(bytes / content.bytesPerSecond) };
  // Loaded only for a file kept after a cut: it brings the FLAC frame parser.
  const { finishCutAudioFile } = await import('../lib/dsp.js');
  const audio = await finishCutAudioFile(path);
  if (audio === undefined) return { bytes, holds: count(bytes, 'byte', 'bytes') };
  return audio.seconds === 0 ? undefined : { bytes: audio.bytes, holds: seconds(audio.seconds) };
}

/** An output file in the making: write to `path`, then `commit()` or `abandon()`. */
export class OutputFile {
  /** The file the complete output replaces (a symbolic link resolved). */
  readonly target: string;
  /** Where the bytes go until `commit`: `TARGET.partial`, or the target itself when it is not a regular file. */
  readonly path: string;
  /** How messages name the target: as the user gave it. */
  readonly label: string;
  #settled = false;

  private constructor(target: string, path: string, label: string) {
    this.target = target;
    this.path = path;
    this.label = label;
  }

  /** True when the target is written directly (a device, a FIFO): nothing is renamed or removed. */
  get direct(): boolean {
    return this.path === this.target;
  }

  /** How messages name `path`. */
  get pathLabel(): string {
    return this.direct ? this.label : `${this.label}${PARTIAL_SUFFIX}`;
  }

  /**
   * Checks that `target` (absolute; `label` as the user gave it) can be written: its directory
   * exists and is writable; an existing file is writable and not a directory. Creates nothing.
   * Throws an `Error` whose `code` says why (`ENOENT`, `EACCES`, `EISDIR`, `ENOTDIR`). A
   * symbolic link is followed: the file it names is the one replaced.
   */
  static async open(target: string, label = target): Promise<OutputFile> {
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
      return new OutputFile(target, target, label);
    }
    await access(dirname(real), constants.W_OK);
    if (info !== undefined) await access(real, constants.W_OK);
    return new OutputFile(real, `${real}${PARTIAL_SUFFIX}`, label);
  }

  /** The complete file takes the target's name (replacing an older file of that name). */
  async commit(): Promise<void> {
    if (this.#settled) return;
    this.#settled = true;
    if (!this.direct) await rename(this.path, this.target);
  }

  /**
   * After a failure or an interruption: with `keep`, the file stays as `TARGET.partial`, made
   * valid as far as it goes (`content`), and is returned, unless it holds nothing (no audio, no
   * line); otherwise it is removed (an absent one is fine).
   */
  async abandon(keep: boolean, content: OutputContent = { kind: 'file' }): Promise<PartialFile | undefined> {
    if (this.#settled || this.direct) return undefined;
    this.#settled = true;
    const bytes = await stat(this.path).then(
      (info) => info.size,
      () => undefined,
    );
    if (bytes === undefined) return undefined;
    const kept = keep ? await finishCut(this.path, bytes, content) : undefined;
    if (kept) return { path: this.path, label: this.pathLabel, ...kept };
    await rm(this.path, { force: true });
    return undefined;
  }
}

/**
 * `OutputFile.open` for the path given with `flag` (default `-o`), a problem being a `FileError`
 * (`./file-errors.ts`); with `createDirs`, a missing directory is created first.
 */
export async function openOutputFile(io: CliIo, path: string, options: { flag?: string; createDirs?: boolean } = {}): Promise<OutputFile> {
  const use: FileUse = { flag: options.flag ?? '-o', path, role: 'output' };
  const absolute = resolvePath(io, path);
  try {
    // `out/` names a directory, whether or not one exists.
    if (path.endsWith('/') || path.endsWith(sep)) throw Object.assign(new Error(`${path} names a directory`), { code: 'EISDIR' });
    await prepareOutputDirectory(absolute, use, options.createDirs === true);
    return await OutputFile.open(absolute, path);
  } catch (error) {
    throw await fileError(error, use, absolute);
  }
}

/**
 * The stderr line for what `file`'s failed or `interrupted` write kept:
 * `rt-translate: interrupted: out.wav.partial holds the first 2.8 s of audio`, or
 * `rt-translate: out.wav was not written: out.wav.partial holds the first 2.8 s of audio received before the failure`.
 */
export function keptLine(file: Pick<OutputFile, 'label'>, partial: PartialFile, interrupted: boolean): string {
  if (interrupted) return `rt-translate: interrupted: ${partial.label} holds ${partial.holds}\n`;
  return `rt-translate: ${file.label} was not written: ${partial.label} holds ${partial.holds} received before the failure\n`;
}

/**
 * Runs `write(path)` for the file `file` names and renames it to its target once `write`
 * resolved. When `write` fails, the file is removed, or, with `keep`, kept as `TARGET.partial`
 * (finished as `keep.content` says) when it holds something, and `keep.report(partial, failure)`
 * is called (to say so on stderr); then the failure is rethrown as it was.
 */
export async function writeOutputFile<T>(
  file: OutputFile,
  write: (path: string) => Promise<T>,
  keep?: { content?: OutputContent; report: (partial: PartialFile, failure: unknown) => void },
): Promise<T> {
  let result: T;
  try {
    result = await write(file.path);
  } catch (error) {
    const partial = await file.abandon(keep !== undefined, keep?.content).catch(() => undefined);
    if (partial) keep!.report(partial, error);
    throw error;
  }
  await file.commit();
  return result;
}
