/**
 * `rt-translate translated-tts`: translate a text, then speak it (`POST /translated-tts`, polled
 * until done). The translated text goes to stdout (to stderr when the audio does), the audio
 * (FLAC, or PCM16/WAV with `--decode`) to a file or stdout, resuming if the download breaks.
 */
import { parseArgs } from 'node:util';
import { DEFAULT_VOICE_ID, translatedTtsSchema } from '../../lib/http/schemas.js';
import type { TranslatedTtsRequest } from '../../lib/http/endpoints.js';
import { EXIT_OK, UsageError, intFlag, parseCommandLine, type CliIo } from '../cli.js';
import {
  EXIT_USAGE_TEXT,
  POLL_OPTIONS,
  POLL_USAGE,
  SERVICE_OPTIONS,
  SERVICE_USAGE,
  checkOutput,
  checkRequest,
  copyToSink,
  describeRetry,
  isStdout,
  openRawSink,
  openWavSink,
  serviceSettings,
  taskProgress,
  withService,
} from './http-common.js';

export const TRANSLATED_TTS_USAGE = `Usage: rt-translate translated-tts --text TEXT --from TAG --to TAG [options]      translate, then speak

  --text TEXT           the text to translate
  --from TAG            its language, a locale tag such as en-us
  --to TAG              the language to translate into and speak, such as es-es
  --voice ID            voice id (default ${DEFAULT_VOICE_ID})
  -o, --output PATH     audio out; '-' or absent: stdout (then the text goes to stderr)
  --decode              write PCM16 LE instead of FLAC (a WAV file when PATH ends in .wav),
                        checked against the FLAC's MD5
${POLL_USAGE}
${SERVICE_USAGE}

Waits for the task (a progress line with its status and the time waited when stderr is a
terminal), prints the translated text on stdout, then writes the audio, resuming the download
if the connection drops.

${EXIT_USAGE_TEXT}`;

const OPTIONS = {
  ...SERVICE_OPTIONS,
  ...POLL_OPTIONS,
  text: { type: 'string' },
  from: { type: 'string' },
  to: { type: 'string' },
  voice: { type: 'string' },
  output: { type: 'string', short: 'o' },
  decode: { type: 'boolean' },
} as const;

export async function runTranslatedTts(args: string[], io: CliIo): Promise<number> {
  const { values } = parseCommandLine(() => parseArgs({ args, options: OPTIONS, strict: true }));
  if (values.help) {
    io.stdout.write(`${TRANSLATED_TTS_USAGE}\n`);
    return EXIT_OK;
  }
  if (values.text === undefined) throw new UsageError('--text TEXT is required (see --help).');
  if (values.from === undefined) throw new UsageError('--from TAG is required (see --help).');
  if (values.to === undefined) throw new UsageError('--to TAG is required (see --help).');
  const voiceId = intFlag(values.voice, '--voice', 1);
  const body: TranslatedTtsRequest = {
    text: values.text,
    sourceLanguage: values.from,
    targetLanguage: values.to,
    ...(voiceId !== undefined ? { voiceId } : {}),
  };
  checkRequest(translatedTtsSchema, body, { text: '--text', sourceLanguage: '--from', targetLanguage: '--to', voiceId: '--voice' });
  const settings = serviceSettings(values, io);
  const output = values.output;
  const decode = values.decode === true;
  const wav = decode && !isStdout(output) && output!.toLowerCase().endsWith('.wav');
  await checkOutput(output, io);

  return withService(settings, io, async ({ client, signal }) => {
    const task = await client.createTranslatedTts(body, { signal });
    const progress = taskProgress(io, `task ${task.taskId}`);
    let run;
    try {
      run = await client.waitForTranslatedTts(task.taskId, { signal, onProgress: progress.onProgress });
    } finally {
      progress.stop();
    }
    const { translatedText } = await client.getTranslationResult(run.runId, { signal });
    const textOut = isStdout(output) ? io.stderr : io.stdout;
    textOut.write(`${translatedText}\n`);

    const result = await client.getTtsResultAudio(run.runId, { signal, decode });
    result.audio.on('retry', (info) => io.stderr.write(`${describeRetry(`audio of run ${run.runId}`, info)}\n`));
    const format = result.audio.format!;
    const sink = wav ? openWavSink(output!, format.sampleRate, format.channels) : openRawSink(output, io);
    await copyToSink(result.audio, sink);
    return EXIT_OK;
  });
}
