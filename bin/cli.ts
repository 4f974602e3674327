/**
 * What every subcommand shares: exit codes, usage errors, argument parsing that turns
 * `node:util` parse errors into a usage error, and the standard streams (injectable for tests).
 */
import { readFileSync } from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import { ConfigError, RtTranslateError, ValidationError } from '../lib/errors.js';

export const EXIT_OK = 0;
/** A service or network failure, reported after everything received was written. */
export const EXIT_FAILURE = 1;
/** Usage or configuration error, reported before any connection. */
export const EXIT_USAGE = 2;

export interface CliIo {
  stdin: Readable;
  stdout: Writable;
  stderr: Writable & { isTTY?: boolean; columns?: number };
  env: NodeJS.ProcessEnv;
}

/** A usage or configuration problem: exit status 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** Runs `parse` (a `parseArgs` call), turning its errors into a usage error. */
export function parseCommandLine<R>(parse: () => R): R {
  try {
    return parse();
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new UsageError(message.replace(/\. To specify a positional argument.*$/s, '.'));
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

export function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

/** Errors that mean the command line or configuration is wrong: exit status 2. */
export function isUsageError(error: unknown): boolean {
  return error instanceof UsageError || error instanceof ValidationError || error instanceof ConfigError;
}

/** One line for stderr describing a failure; never includes a stack for expected errors. */
export function describeFailure(error: unknown): string {
  if (error instanceof RtTranslateError) return `rt-translate: ${error.message} [${error.code}]`;
  if (error instanceof UsageError) return `rt-translate: ${error.message}`;
  if (error instanceof Error) return `rt-translate: ${error.message}`;
  return `rt-translate: ${String(error)}`;
}
