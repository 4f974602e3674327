/**
 * `rt-translate translated-tts`: translate a text, then speak it (`POST /translated-tts`, polled
 * until done, its task and run named on stderr; `--no-wait` only creates it, `--run` fetches an
 * earlier run). The translated text goes to stdout (to stderr when the audio does), the audio
 * (FLAC, or PCM16/WAV with `--decode`) to a file or stdout, resuming if the download breaks.
 */
import type { TranslatedTtsRequest } from '../../lib/index.js';
import { DEFAULT_VOICE_ID, translatedTtsSchema } from '../../lib/protocol.js';
import { EXIT_OK, UsageError, checkOutputName, intFlag, type CliIo } from '../cli.js';
import {
  EXIT_USAGE_TEXT,
  SERVICE_OPTIONS,
  SERVICE_USAGE,
  TASK_OPTIONS,
  TASK_USAGE,
  checkRequest,
  parseCommand,
  runFlag,
  taskSettings,
  withService,
} from './service.js';
import { taskRun } from './task-waits.js';
import { audioOutput, checkOutput, isStdout } from './outputs.js';
import { describeRetry, downloadSource, withTransfer } from './transfers.js';
import { CREATE_DIRS_OPTION, createDirsUsage } from '../file-errors.js';

export const TRANSLATED_TTS_USAGE = `Usage: rt-translate translated-tts --text TEXT --from TAG --to TAG [options]      translate, then speak

  --text TEXT           the text to translate
  --from TAG            its language, a locale tag such as en-us
  --to TAG              the language to translate into and speak, such as es-es
  --voice ID            voice id (default ${DEFAULT_VOICE_ID})
  -o, --output PATH     audio out, FLAC (a .flac name); '-' or absent: stdout (then the text
                        goes to stderr)
  --decode              write PCM16 LE instead of FLAC (a WAV file when PATH ends in .wav;
                        .pcm or .raw: raw), checked against the FLAC's MD5
${createDirsUsage()}
${TASK_USAGE}
${SERVICE_USAGE}

Says on stderr which task it created and, once done, its run; waits for the task (the progress
line says its status, when the next check is and the time waited), prints the translated text
on stdout, then writes the audio (the progress line says how much came, of how much), resuming
the download if the connection drops.
--text, --from and --to are not needed with --run.

${EXIT_USAGE_TEXT}`;

/** What `--decode` writes: a WAV file for .wav, else raw PCM16 LE. */
const DECODED_EXTENSIONS = ['.wav', '.pcm', '.raw'];

const OPTIONS = {
  ...SERVICE_OPTIONS,
  ...TASK_OPTIONS,
  text: { type: 'string' },
  from: { type: 'string' },
  to: { type: 'string' },
  voice: { type: 'string' },
  output: { type: 'string', short: 'o' },
  decode: { type: 'boolean' },
  ...CREATE_DIRS_OPTION,
} as const;

export async function runTranslatedTts(args: string[], io: CliIo): Promise<number> {
  const parsed = parseCommand(args, OPTIONS, TRANSLATED_TTS_USAGE, io);
  if (!parsed) return EXIT_OK;
  const { values } = parsed;
  const runId = runFlag(values);
  let body: TranslatedTtsRequest | undefined;
  if (runId === undefined) {
    if (values.text === undefined) throw new UsageError('--text TEXT is required (see --help).');
    if (values.from === undefined) throw new UsageError('--from TAG is required (see --help).');
    if (values.to === undefined) throw new UsageError('--to TAG is required (see --help).');
    const voiceId = intFlag(values.voice, '--voice', 1);
    body = { text: values.text, sourceLanguage: values.from, targetLanguage: values.to, ...(voiceId !== undefined ? { voiceId } : {}) };
    checkRequest(translatedTtsSchema, body);
  }
  const settings = await taskSettings(values, io);
  const output = values.output;
  const decode = values.decode === true;
  const ext = decode
    ? checkOutputName(output, DECODED_EXTENSIONS, 'with --decode, translated-tts writes PCM16 LE')
    : checkOutputName(output, ['.flac'], 'translated-tts writes FLAC', `, or with --decode ${DECODED_EXTENSIONS.join(' ')}`);
  const wav = ext === '.wav';
  if (!values['no-wait']) await checkOutput(output, io, values['create-dirs'] === true);

  return withService(settings, io, async (service) => {
    const { client, signal, progress } = service;
    const run = await taskRun(io, service, 'translated-tts', values, (s) => client.translatedTts.create(body!, { signal: s }));
    if (run === undefined) return EXIT_OK;
    const { translatedText } = await client.translation.result(run, { signal });
    const textOut = isStdout(output) ? io.stderr : io.stdout;
    textOut.write(`${translatedText}\n`);

    const write = await audioOutput(service, output);
    const label = `audio of run ${run}`;
    const where = isStdout(output) ? 'standard output' : output;
    await withTransfer(progress, { what: `receiving the ${label}`, done: `received the ${label} into ${where}` }, async (transfer) => {
      const result = await client.textToSpeech.result(run, { signal, decode });
      transfer.source(downloadSource(result.audio, decode));
      result.audio.on('retry', (info) => progress.print(describeRetry(label, info)));
      const format = result.audio.format!;
      const pcm = decode ? ({ rate: format.sampleRate, channels: format.channels, container: wav ? 'wav' : 'raw' } as const) : undefined;
      return write(result.audio, pcm, (chunk) => transfer.add(chunk.length));
    });
    return EXIT_OK;
  });
}
