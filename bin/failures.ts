/**
 * How the command line reports a failure: one line for stderr, and whether it is the user's
 * (exit status 2) or the service's and the network's (exit status 1). Apart from `cli.ts`
 * because it tells the library's errors apart: a command loads the library anyway, and
 * `--version` loads none of it.
 */
import { AudioInputError, ConfigError, ENV_API_KEY, RtTranslateError, ValidationError } from '../lib/index.js';
import { UsageError } from './cli.js';

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
