#!/usr/bin/env node
/**
 * The `rt-translate` command: realtime speech translation for shell pipelines, and the local
 * emulator of the service. Argument parsing and composition only; the work is in lib/.
 */
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, describeFailure, isUsageError, packageVersion, type CliIo } from './cli.js';
import { runTranslate, TRANSLATE_USAGE } from './commands/translate.js';
import { runEmulator } from './commands/emulator.js';

const COMMANDS: Record<string, (args: string[], io: CliIo) => Promise<number>> = {
  emulator: runEmulator,
};

export async function main(argv: string[], io: CliIo): Promise<number> {
  const [first, ...rest] = argv;
  try {
    if (first === '--version') {
      io.stdout.write(`${packageVersion()}\n`);
      return EXIT_OK;
    }
    if (argv.length === 0) {
      io.stderr.write(`${TRANSLATE_USAGE}\n`);
      return EXIT_USAGE;
    }
    const command = first !== undefined ? COMMANDS[first] : undefined;
    return command ? await command(rest, io) : await runTranslate(argv, io);
  } catch (error) {
    io.stderr.write(`${describeFailure(error)}\n`);
    if (isUsageError(error)) return EXIT_USAGE;
    return EXIT_FAILURE;
  }
}

const code = await main(process.argv.slice(2), {
  stdin: process.stdin,
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
});
process.exitCode = code;
