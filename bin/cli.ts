/**
 * What every subcommand shares: exit codes, usage errors, argument parsing that turns
 * `node:util` parse errors into a usage error, and the process's outside world (standard
 * streams, environment, signals, working directory) as one injectable `CliIo`, so a command runs
 * in a test process exactly as it runs from a shell.
 */
import { readFileSync } from 'node:fs';
import { extname, resolve } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { ENV_API_KEY } from '../lib/env-names.js';
import { AudioInputError, ConfigError, RtTranslateError, ValidationError } from '../lib/errors.js';

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
 * Runs `parse` (a `parseArgs` call), turning its errors into a usage error that points to the
 * command's help (`help`, default the top-level `rt-translate --help`).
 */
export function parseCommandLine<R>(parse: () => R, help = 'rt-translate --help'): R {
  try {
    return parse();
  } catch (error) {
    const message = (error instanceof Error ? error.message : String(error)).replace(/\. To specify a positional argument.*$/s, '');
    throw new UsageError(`${message.replace(/\.$/, '')}. See ${help}.`);
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

/** The version in the package's `package.json`, found above this module (built or not). */
export function packageVersion(): string {
  for (let dir = new URL('./', import.meta.url); ; dir = new URL('../', dir)) {
    try {
      const pkg = JSON.parse(readFileSync(new URL('package.json', dir), 'utf8')) as { name?: string; version: string };
      if (pkg.name === 'rt-translate') return pkg.version;
    } catch {
      // no package.json here
    }
    if (dir.pathname === '/') throw new Error('the package.json of rt-translate was not found');
  }
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

/** Errors that mean the command line, the configuration or the input is wrong: exit status 2. */
export function isUsageError(error: unknown): boolean {
  return error instanceof UsageError || error instanceof ValidationError || error instanceof ConfigError || error instanceof AudioInputError;
}

/** One line for stderr describing a failure; never includes a stack for expected errors. */
export function describeFailure(error: unknown): string {
  if (error instanceof RtTranslateError) {
    // A refused key, from a handshake or an HTTP request: say how this command takes one.
    const hint = error.code === 'RTT_AUTH' ? ` Check the key in ${ENV_API_KEY} or --api-key-file.` : '';
    return `rt-translate: ${error.message}${hint} [${error.code}]`;
  }
  if (error instanceof UsageError) return `rt-translate: ${error.message}${error.code === undefined ? '' : ` [${error.code}]`}`;
  if (error instanceof Error) return `rt-translate: ${error.message}`;
  return `rt-translate: ${String(error)}`;
}
