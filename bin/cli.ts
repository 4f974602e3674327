/**
 * What every subcommand shares: exit codes, usage errors, argument parsing that turns
 * `node:util` parse errors into a usage error, and the process's outside world (standard
 * streams, environment, signals, working directory) as one injectable `CliIo`, so a command runs
 * in a test process exactly as it runs from a shell. Nothing here loads the library:
 * `rt-translate --version` runs on this module alone (how failures are described, which needs
 * the library's errors, is in `failures.ts`).
 */
import { once } from 'node:events';
import { extname, resolve } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { createRequire } from 'node:module';
import { parseArgs, type ParseArgsConfig } from 'node:util';

/** The package's version, read from the `package.json` it exports (`rt-translate/package.json`). */
export function packageVersion(): string {
  return (createRequire(import.meta.url)('rt-translate/package.json') as { version: string }).version;
}

export const EXIT_OK = 0;
/** A service or network failure, reported after everything received was written. */
export const EXIT_FAILURE = 1;
/** Usage or configuration error, reported before any connection. */
export const EXIT_USAGE = 2;

/** Where `SIGINT` and `SIGTERM` arrive: `process`, or an emitter a test drives. */
export type SignalSource = Pick<NodeJS.EventEmitter, 'on' | 'off' | 'once'>;

/** What a command sees of its process; `processIo()` gives the real one. */
export interface CliIo {
  stdin: Readable & { isTTY?: boolean };
  stdout: Writable & { isTTY?: boolean; columns?: number };
  stderr: Writable & { isTTY?: boolean; columns?: number };
  env: NodeJS.ProcessEnv;
  /** Default `process`. */
  signals?: SignalSource;
  /** The directory relative paths are taken from. Default `process.cwd()`. */
  cwd?: string;
}

/** The running process as a `CliIo`. */
export function processIo(): CliIo {
  return { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr, env: process.env, signals: process, cwd: process.cwd() };
}

/** Where signals arrive for `io`. */
export function signalsOf(io: CliIo): SignalSource {
  return io.signals ?? process;
}

/** The signals that interrupt a command. */
export type InterruptSignal = 'SIGINT' | 'SIGTERM';

/** The exit status after an interruption: 128 + the signal's number (130 for SIGINT, 143 for SIGTERM), as a shell reports it. */
export function interruptedStatus(signal: InterruptSignal): number {
  return signal === 'SIGINT' ? 130 : 143;
}

/**
 * Calls `handler` with each SIGINT and SIGTERM that arrives for `io` (while a handler is
 * installed the process is not ended by them); the function returned removes it.
 */
export function onInterrupt(io: CliIo, handler: (signal: InterruptSignal) => void): () => void {
  const signals = signalsOf(io);
  const onInt = (): void => handler('SIGINT');
  const onTerm = (): void => handler('SIGTERM');
  signals.on('SIGINT', onInt);
  signals.on('SIGTERM', onTerm);
  return () => {
    signals.off('SIGINT', onInt);
    signals.off('SIGTERM', onTerm);
  };
}

/** Resolves at the first SIGINT or SIGTERM of `io` (or when `signal` aborts): a server command's run. */
export async function untilStopped(io: CliIo, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return;
  const stop = new AbortController();
  const onStop = (): void => stop.abort();
  const remove = onInterrupt(io, onStop);
  signal?.addEventListener('abort', onStop, { once: true });
  try {
    await once(stop.signal, 'abort');
  } finally {
    remove();
    signal?.removeEventListener('abort', onStop);
  }
}

/** `path` (as given on the command line) resolved against the command's working directory. */
export function resolvePath(io: CliIo, path: string): string {
  return resolve(io.cwd ?? process.cwd(), path);
}

/**
 * The extension of output `path` (lower case; '' for a name without one and for standard
 * output), refused before any traffic when the command cannot write it: `accepted` lists those
 * it can, `writes` says what it writes and `otherwise` what else the user may do. The message
 * names -o and what it accepts.
 */
export function checkOutputName(path: string | undefined, accepted: readonly string[], writes: string, otherwise = ''): string {
  const ext = path === undefined || path === '-' ? '' : extname(path).toLowerCase();
  if (ext === '' || accepted.includes(ext)) return ext;
  throw new UsageError(`-o ${path}: ${writes}, not ${ext}; -o accepts ${accepted.join(' ')} or a name without extension${otherwise}.`);
}

/** A usage or configuration problem: exit status 2. `code`, when there is one, ends its line on stderr. */
export class UsageError extends Error {
  readonly code: string | undefined;
  constructor(message: string, code?: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'UsageError';
    this.code = code;
  }
}

/**
 * The edit distance between `a` and `b`: the fewest insertions, deletions, substitutions and
 * swaps of two neighbouring characters that turn one into the other (`translat` is 1 from
 * `translate`, `langauge` 1 from `language`).
 */
export function editDistance(a: string, b: string): number {
  // Rows i-2, i-1 and i of the table of distances between prefixes.
  let before: number[] = [];
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(previous[j]! + 1, row[j - 1]! + 1, previous[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, before[j - 2]! + 1);
      row.push(d);
    }
    before = previous;
    previous = row;
  }
  return previous[b.length]!;
}

/**
 * ` Did you mean X?` when `typed` looks like a slip for one of `candidates` (or `X or Y` for a
 * tie): one edit per four characters typed, at least one, and fewer edits than the word has
 * characters (`translat` for `translate`, `langauge` for `language`; not `rename` for
 * `create`). '' when nothing is that close.
 */
export function didYouMean(typed: string, candidates: readonly string[], show: (candidate: string) => string = (c) => c): string {
  const limit = Math.min(typed.length - 1, Math.max(1, Math.floor(typed.length / 4)));
  const close = [...new Set(candidates)]
    .map((candidate) => ({ candidate, distance: editDistance(typed.toLowerCase(), candidate.toLowerCase()) }))
    .filter(({ distance }) => distance <= limit);
  const nearest = Math.min(...close.map(({ distance }) => distance));
  const best = close.filter(({ distance }) => distance === nearest).map(({ candidate }) => show(candidate));
  return best.length === 0 ? '' : ` Did you mean ${best.join(' or ')}?`;
}

/** A command's `parseArgs` options. */
export type ParseArgsOptions = NonNullable<ParseArgsConfig['options']>;

/**
 * `parseArgs(config)`, its errors turned into a usage error that points to the command's help
 * (`help`, default the top-level `rt-translate --help`); an unknown flag close to one of the
 * command's flags gets a suggestion (`Did you mean --language?`).
 */
export function parseCommandLine<T extends ParseArgsConfig & { options: ParseArgsOptions }>(
  config: T,
  help = 'rt-translate --help',
): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config);
  } catch (error) {
    const message = (error instanceof Error ? error.message : String(error)).replace(/\. To specify a positional argument.*$/s, '');
    const unknown = (error as NodeJS.ErrnoException).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' ? /'([^']+)'/.exec(message)?.[1] : undefined;
    const suggestion = unknown === undefined ? '' : didYouMean(unknown.replace(/^-+/, ''), Object.keys(config.options), (name) => `--${name}`);
    throw new UsageError(`${message.replace(/\.$/, '')}.${suggestion} See ${help}.`);
  }
}

/** An integer flag value, or a usage error naming the flag. */
export function intFlag(value: string | undefined, flag: string, min = 0): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < min) throw new UsageError(`${flag} expects an integer >= ${min} (got "${value}").`);
  return n;
}

/** A number flag value (fractions allowed), or a usage error naming the flag. */
export function numberFlag(value: string | undefined, flag: string, min = 0): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n) || n < min) throw new UsageError(`${flag} expects a number >= ${min} (got "${value}").`);
  return n;
}

/** Where a command that reads live input is after SIGINT and SIGTERM (`stopThenAbort`). */
export interface StopThenAbort {
  /** A first Ctrl-C asked to stop reading the input. */
  readonly stopping: boolean;
  /** The signal that aborted the command, if one did. */
  readonly interruptedBy: InterruptSignal | undefined;
  /** Stops listening for the signals. */
  remove(): void;
}

/**
 * Ctrl-C as the realtime commands take it: the first SIGINT calls `stop` (stop reading the
 * input; the session finishes with what was sent), a second one or SIGTERM calls `abort`, once.
 */
export function stopThenAbort(io: CliIo, stop: () => void, abort: () => void): StopThenAbort {
  let stopping = false;
  let interruptedBy: InterruptSignal | undefined;
  const remove = onInterrupt(io, (signal) => {
    if (!stopping && signal === 'SIGINT') {
      stopping = true;
      stop();
    } else if (interruptedBy === undefined) {
      interruptedBy = signal;
      abort();
    }
  });
  return {
    get stopping() {
      return stopping;
    },
    get interruptedBy() {
      return interruptedBy;
    },
    remove,
  };
}
