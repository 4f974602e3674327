/**
 * `rt-translate tts`: streaming text to speech (`POST /tts-stream`), the audio written to a file
 * or standard output as it arrives. A file is written as `OUT.partial` and renamed once the
 * stream ended; a failure keeps what arrived there (none, for a failure before the headers).
 */
import { DEFAULT_VOICE_ID, OUTPUT_FORMATS, TTS_STREAM_TEXT_LENGTH, ttsStreamSchema, type OutputFormat } from '../../lib/http/schemas.js';
import type { TtsStreamRequest } from '../../lib/http/tts-stream-readable.js';
import { EXIT_OK, UsageError, checkOutputName, intFlag, type CliIo } from '../cli.js';
import {
  EXIT_USAGE_TEXT,
  SERVICE_OPTIONS,
  SERVICE_USAGE,
  audioOutput,
  checkOutput,
  checkRequest,
  parseCommand,
  serviceSettings,
  withService,
} from './http-common.js';
import { CREATE_DIRS_OPTION, createDirsUsage } from '../file-errors.js';

export const FORMAT_BY_EXTENSION: Record<string, OutputFormat> = {
  '.wav': 'wav',
  '.flac': 'flac',
  '.mp3': 'mp3',
  '.aac': 'adts',
  '.adts': 'adts',
  '.pcm': 'pcm_s16le',
  '.raw': 'pcm_s16le',
};

export const TTS_USAGE = `Usage: rt-translate tts --text TEXT --language TAG [options]      streaming text to speech

  --text TEXT           what to say (${TTS_STREAM_TEXT_LENGTH.min} to ${TTS_STREAM_TEXT_LENGTH.max} characters)
  --language TAG        locale tag of the text, for example en-us
  --voice ID            voice id (default ${DEFAULT_VOICE_ID})
  -o, --output PATH     audio out, written as it arrives; '-' or absent: stdout
  --format F            ${OUTPUT_FORMATS.join(' ')}
                        (default: from the output's extension, ${Object.keys(FORMAT_BY_EXTENSION).join(' ')};
                        wav for stdout or a name without extension; another extension is refused)
  --sample-rate HZ      ask for this sample rate
  --model M             speech model (auto, mars-pro, mars-flash, mars-instruct, ...)
${createDirsUsage()}
${SERVICE_USAGE}

${EXIT_USAGE_TEXT}`;

const OPTIONS = {
  ...SERVICE_OPTIONS,
  text: { type: 'string' },
  voice: { type: 'string' },
  language: { type: 'string' },
  output: { type: 'string', short: 'o' },
  format: { type: 'string' },
  'sample-rate': { type: 'string' },
  model: { type: 'string' },
  ...CREATE_DIRS_OPTION,
} as const;


function outputFormat(flag: string | undefined, output: string | undefined): OutputFormat {
  if (flag !== undefined) {
    if (!(OUTPUT_FORMATS as readonly string[]).includes(flag)) {
      throw new UsageError(`--format expects one of ${OUTPUT_FORMATS.join(', ')} (got "${flag}").`);
    }
    return flag as OutputFormat;
  }
  const ext = checkOutputName(output, Object.keys(FORMAT_BY_EXTENSION), 'tts writes the audio the service streams', `, or pass --format (${OUTPUT_FORMATS.join(', ')})`);
  return FORMAT_BY_EXTENSION[ext] ?? 'wav';
}

export async function runTts(args: string[], io: CliIo): Promise<number> {
  const parsed = parseCommand(args, OPTIONS, TTS_USAGE, io);
  if (!parsed) return EXIT_OK;
  const { values } = parsed;
  if (values.text === undefined) throw new UsageError('--text TEXT is required (see --help).');
  if (values.language === undefined) throw new UsageError('--language TAG is required (see --help).');
  const voiceId = intFlag(values.voice, '--voice', 1) ?? DEFAULT_VOICE_ID;
  const sampleRate = intFlag(values['sample-rate'], '--sample-rate', 1);
  const format = outputFormat(values.format, values.output);
  const request: TtsStreamRequest = {
    text: values.text,
    language: values.language,
    voiceId,
    ...(values.model !== undefined ? { speechModel: values.model } : {}),
    outputConfiguration: { format, ...(sampleRate !== undefined ? { sampleRate } : {}) },
  };
  // The library's checks (text length, locale tag, ...) before anything is opened or sent.
  checkRequest(ttsStreamSchema, request);
  const settings = await serviceSettings(values, io);
  await checkOutput(values.output, io, values['create-dirs'] === true);

  return withService(settings, io, async (service) => {
    const { client, signal } = service;
    const write = await audioOutput(service, values.output);
    const audio = client.ttsStream(request, { signal });
    audio.on('warning', (warning: Error) => io.stderr.write(`rt-translate: warning: ${warning.message}\n`));
    await write(audio);
    return EXIT_OK;
  });
}
