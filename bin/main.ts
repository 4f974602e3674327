/**
 * The `rt-translate` command line: picks the subcommand and runs it with a `CliIo`. Each
 * subcommand's module is imported only when it runs, so `--version` loads nothing of the
 * library, and a command loads the package's entry points it uses but no codec or emulator it
 * never uses. A new subcommand is one line in `COMMANDS`; a renamed one keeps its old name in
 * `DEPRECATED_COMMANDS`.
 *
 * Every command runs with `DeprecationNotices`: what it meets that is deprecated (a flag, an
 * old command name, a form of value) is said once in a plain line on stderr, and Node prints no
 * `DeprecationWarning` of its own.
 */
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, UsageError, didYouMean, packageVersion, type CliIo } from './cli.js';

/** A subcommand: its arguments (after its name) and the process's outside world; the exit status. */
export type Command = (args: string[], io: CliIo) => Promise<number>;

/** The subcommands by name, each loaded on first use. */
export const COMMANDS: Readonly<Record<string, () => Promise<Command>>> = {
  translate: async () => (await import('./commands/translate.js')).runTranslate,
  listen: async () => (await import('./commands/listen.js')).runListen,
  emulator: async () => (await import('./commands/emulator.js')).runEmulator,
  tts: async () => (await import('./commands/tts.js')).runTts,
  'translated-tts': async () => (await import('./commands/translated-tts.js')).runTranslatedTts,
  separate: async () => (await import('./commands/separate.js')).runSeparate,
  'separate-results': async () => (await import('./commands/separate-results.js')).runSeparateResults,
  'task-status': async () => (await import('./commands/task-status.js')).runTaskStatus,
  voices: async () => (await import('./commands/voices.js')).runVoices,
  languages: async () => (await import('./commands/languages.js')).runLanguages,
  'translate-text': async () => (await import('./commands/translate-text.js')).runTranslateText,
  transcribe: async () => (await import('./commands/transcribe.js')).runTranscribe,
  dub: async () => (await import('./commands/dub.js')).runDub,
  subtitles: async () => (await import('./commands/subtitles.js')).runSubtitles,
  serve: async () => (await import('./commands/serve.js')).runServe,
  batch: async () => (await import('./commands/batch.js')).runBatchCommand,
  worker: async () => (await import('./commands/worker.js')).runWorkerCommand,
};

/** Old command names that still work: the command and arguments each now is, said when used. */
export const DEPRECATED_COMMANDS: Readonly<Record<string, { runs: readonly string[]; use: string }>> = {
  'delete-voice': { runs: ['voices', 'delete'], use: 'rt-translate voices delete ID' },
};

/** The top-level usage: the realtime command's, then the other commands. */
async function usage(): Promise<string> {
  const { TRANSLATE_USAGE } = await import('./commands/translate.js');
  return `${TRANSLATE_USAGE}

Live transcription:
  rt-translate listen [-i FILE] [--language TAG] [--json]            one line per sentence
  rt-translate serve [--port N] [--host H] [--origin O ...]          translation in a web page

HTTP interface (each command has --help):
  rt-translate tts --text TEXT --language TAG -o OUT                 streaming text to speech
  rt-translate translated-tts --text TEXT --from TAG --to TAG -o OUT translate, then speak
  rt-translate translate-text --from TAG --to TAG TEXT...            translate texts
  rt-translate transcribe -i FILE --language TAG [-f srt] [-o OUT]   speech to text
  rt-translate dub --url URL --from TAG --to TAG[,TAG] [-o DIR]      dub a video or recording
  rt-translate subtitles --url URL --from TAG [--to TAG] [-o OUT]    subtitles of a media
  rt-translate voices [list|create|delete|design]                    voices, cloned voices
  rt-translate languages [--source|--target]                         the service's languages
  rt-translate separate -i FILE [-o DIR]                             voice and background apart
  rt-translate separate-results RUN_ID... [-o DIR]                   download separated tracks
  rt-translate task-status KIND TASK_ID [--wait]                     status of a task
  rt-translate batch JOBS --out DIR                                  a file of jobs, resumable
  rt-translate worker --queue redis://HOST:PORT                      run batch jobs from Redis

Deprecated (they still work, and say so when used):
  rt-translate delete-voice ID                                       now rt-translate voices delete ID
  rt-translate translate-text --stream ...                           deprecated by the service`;
}

/**
 * Runs `rt-translate ARGV` and resolves with its exit status. Without a subcommand name the
 * arguments are the realtime command's (`rt-translate --from en-us --to es-es` is
 * `rt-translate translate --from en-us --to es-es`).
 */
export async function main(argv: string[], io: CliIo): Promise<number> {
  const [first, ...rest] = argv;
  // A reader that goes away (`rt-translate languages | head -1`) ends the output, not the
  // command's success: every command then ends quietly with status 0 (the realtime command also
  // stops sending). Any other failure of standard output is reported. The listener stays: an
  // error can still arrive after the command has returned.
  let stdoutFailure: NodeJS.ErrnoException | undefined;
  io.stdout.on('error', (error: NodeJS.ErrnoException) => (stdoutFailure ??= error));
  const brokenPipe = (error?: unknown): boolean => stdoutFailure?.code === 'EPIPE' || (error as NodeJS.ErrnoException | undefined)?.code === 'EPIPE';
  try {
    if (first === '--version') {
      io.stdout.write(`${packageVersion()}\n`);
      return EXIT_OK;
    }
    if (argv.length === 0) {
      io.stderr.write(`${await usage()}\n`);
      return EXIT_USAGE;
    }
    if (first === '--help' || first === '-h') {
      io.stdout.write(`${await usage()}\n`);
      return EXIT_OK;
    }
    const { DeprecationNotices } = await import('./deprecations.js');
    const notices = new DeprecationNotices(io);
    let name = first!;
    let args = rest;
    if (Object.hasOwn(DEPRECATED_COMMANDS, name)) {
      const { runs, use } = DEPRECATED_COMMANDS[name]!;
      notices.say(name, `${name} is deprecated; use ${use} (the same command).`);
      name = runs[0]!;
      args = [...runs.slice(1), ...rest];
    } else if (!Object.hasOwn(COMMANDS, name)) {
      // Without a command name the arguments are the realtime command's flags: a word that is
      // not a flag can only be a command name, mistyped.
      if (!name.startsWith('-')) throw new UsageError(`unknown command '${name}'.${didYouMean(name, Object.keys(COMMANDS))} See rt-translate --help.`);
      [name, args] = ['translate', argv];
    }
    const command = await COMMANDS[name]!();
    const status = await notices.run(() => command(args, io));
    if (stdoutFailure && !brokenPipe()) throw stdoutFailure;
    return brokenPipe() ? EXIT_OK : status;
  } catch (error) {
    if (brokenPipe(error)) return EXIT_OK;
    // Loaded here, not at start: it brings the library's errors, which `--version` never needs.
    const { describeFailure, isUsageError } = await import('./failures.js');
    io.stderr.write(`${describeFailure(error)}\n`);
    if (isUsageError(error)) return EXIT_USAGE;
    return EXIT_FAILURE;
  }
}
