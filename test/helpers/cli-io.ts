/**
 * Runs a CLI command in-process: its `run...(args, io)` entry point with an injected `CliIo`
 * (stdin from a Buffer or a Readable, stdout and stderr collected, an environment of the test's
 * choosing), its deprecations said on stderr and a thrown error mapped to stderr and an exit
 * status, exactly as `bin/main.ts` does. No process is spawned, so a case costs milliseconds rather than seconds.
 *
 * ```ts
 * const result = await runCommand(runTts, ['--text', 'Hello there', '-o', out], { env });
 * expect(result.code).toBe(0);
 * ```
 */
import { Readable, Writable } from 'node:stream';
import { EXIT_FAILURE, EXIT_USAGE, type CliIo } from '../../bin/cli.js';
import { describeFailure, isUsageError } from '../../bin/failures.js';
import { DeprecationNotices } from '../../bin/deprecations.js';

/** A command's entry point, as the dispatcher of `bin/rt-translate.ts` calls it. */
export type CommandEntry = (args: string[], io: CliIo) => Promise<number>;

export interface CommandOptions {
  /** The command's environment (`io.env`); nothing of the test's own is passed. Default `{}`. */
  env?: Record<string, string>;
  /** Standard input. Default: empty. */
  stdin?: Buffer | Readable;
  /** Pretend standard output (or error) is a terminal. Default false. */
  stdoutIsTTY?: boolean;
  stderrIsTTY?: boolean;
  /** Called with each piece of stderr as it is written. */
  onStderr?: (text: string) => void;
}

export interface CommandResult {
  /** The exit status `main` would give. */
  code: number;
  stdout: Buffer;
  stderr: string;
}

/** Runs `entry(args, io)` to completion and collects what it wrote. */
export async function runCommand(entry: CommandEntry, args: string[], options: CommandOptions = {}): Promise<CommandResult> {
  const out: Buffer[] = [];
  let err = '';
  const stdout = Object.assign(
    new Writable({
      write(chunk: Buffer, _encoding, callback) {
        out.push(Buffer.from(chunk));
        callback();
      },
    }),
    { isTTY: options.stdoutIsTTY === true },
  );
  const stderr = Object.assign(
    new Writable({
      decodeStrings: false,
      write(chunk: Buffer | string, _encoding, callback) {
        const text = chunk.toString();
        err += text;
        options.onStderr?.(text);
        callback();
      },
    }),
    { isTTY: options.stderrIsTTY === true, columns: 80 },
  );
  const stdin = options.stdin instanceof Readable ? options.stdin : Readable.from(options.stdin === undefined ? [] : [options.stdin]);
  const io: CliIo = { stdin, stdout, stderr, env: { ...options.env } };
  let code: number;
  try {
    code = await new DeprecationNotices(io).run(() => entry(args, io));
  } catch (error) {
    err += `${describeFailure(error)}\n`;
    code = isUsageError(error) ? EXIT_USAGE : EXIT_FAILURE;
  }
  return { code, stdout: Buffer.concat(out), stderr: err };
}
