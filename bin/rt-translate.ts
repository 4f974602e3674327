#!/usr/bin/env node
/**
 * The `rt-translate` command: realtime speech translation for shell pipelines, the HTTP
 * interface's tasks and downloads, and the local emulator of the service. Argument parsing and
 * composition only; the work is in lib/.
 */
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, describeFailure, isUsageError, packageVersion, type CliIo } from './cli.js';
import { runTranslate, TRANSLATE_USAGE } from './commands/translate.js';
import { runEmulator } from './commands/emulator.js';
import { runTts } from './commands/tts.js';
import { runTranslatedTts } from './commands/translated-tts.js';
import { runSeparateResults } from './commands/separate-results.js';
import { runDeleteVoice } from './commands/delete-voice.js';
import { runTaskStatus } from './commands/task-status.js';
import { runVoices } from './commands/voices.js';
import { runLanguages } from './commands/languages.js';
import { runTranslateText } from './commands/translate-text.js';
import { runTranscribe } from './commands/transcribe.js';
import { runDub } from './commands/dub.js';
import { runSubtitles } from './commands/subtitles.js';

const COMMANDS: Record<string, (args: string[], io: CliIo) => Promise<number>> = {
  emulator: runEmulator,
  tts: runTts,
  'translated-tts': runTranslatedTts,
  'separate-results': runSeparateResults,
  'delete-voice': runDeleteVoice,
  'task-status': runTaskStatus,
  voices: runVoices,
  languages: runLanguages,
  'translate-text': runTranslateText,
  transcribe: runTranscribe,
  dub: runDub,
  subtitles: runSubtitles,
};

/** The top-level usage: the realtime command's, then the other commands. */
const USAGE = `${TRANSLATE_USAGE}

HTTP interface (each command has --help):
  rt-translate tts --text TEXT --language TAG -o OUT                 streaming text to speech
  rt-translate translated-tts --text TEXT --from TAG --to TAG -o OUT translate, then speak
  rt-translate translate-text --from TAG --to TAG TEXT...            translate texts
  rt-translate transcribe -i FILE --language TAG [-f srt] [-o OUT]   speech to text
  rt-translate dub --url URL --from TAG --to TAG[,TAG] [-o DIR]      dub a video or recording
  rt-translate subtitles --url URL --from TAG [--to TAG] [-o OUT]    subtitles of a media
  rt-translate voices [list|create|delete|design]                    voices, cloned voices
  rt-translate languages [--source|--target]                         the service's languages
  rt-translate separate-results RUN_ID... [-o DIR]                   download separated tracks
  rt-translate delete-voice ID                                       delete a custom voice
  rt-translate task-status KIND TASK_ID [--wait]                     status of a task`;

export async function main(argv: string[], io: CliIo): Promise<number> {
  const [first, ...rest] = argv;
  try {
    if (first === '--version') {
      io.stdout.write(`${packageVersion()}\n`);
      return EXIT_OK;
    }
    if (argv.length === 0) {
      io.stderr.write(`${USAGE}\n`);
      return EXIT_USAGE;
    }
    if (first === '--help' || first === '-h') {
      io.stdout.write(`${USAGE}\n`);
      return EXIT_OK;
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
