/**
 * `rt-translate tts`: streaming text to speech (`POST /tts-stream`), the audio written to a file
 * or standard output as it arrives. A file is written as `OUT.partial` and renamed once the
 * stream ended; a failure keeps what arrived there (none, for a failure before the headers).
 */
import type { OutputFormat, TtsStreamRequest } from '../../lib/index.js';
import { wavDataLayout, type WavDataLayout } from '../../lib/dsp.js';
import { DEFAULT_VOICE_ID, ttsStreamSchema } from '../../lib/protocol.js';
import { OUTPUT_FORMATS, TTS_STREAM_TEXT_LENGTH } from '../../lib/http/index.js';
import { EXIT_OK, UsageError, checkOutputName, intFlag, type CliIo } from '../cli.js';
import {
  EXIT_USAGE_TEXT,
  PROGRESS_OPTIONS,
  PROGRESS_USAGE,
  SERVICE_OPTIONS,
  SERVICE_USAGE,
  checkRequest,
  parseCommand,
  serviceSettings,
  withService,
} from './service.js';
import { audioOutput, checkOutput } from './outputs.js';
import { withTransfer, type TransferSource } from './transfers.js';
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
${PROGRESS_USAGE}
${createDirsUsage()}
${SERVICE_USAGE}

While the audio arrives, a progress line says how much came (bytes, and seconds of audio for
WAV) and the time taken; a summary line follows it.

${EXIT_USAGE_TEXT}`;

const OPTIONS = {
  ...SERVICE_OPTIONS,
  ...PROGRESS_OPTIONS,
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
  const ext = checkOutputName(
    output,
    Object.keys(FORMAT_BY_EXTENSION),
    'tts writes the audio the service streams',
    `, or pass --format (${OUTPUT_FORMATS.join(', ')})`,
  );
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
    const { client, signal, progress } = service;
    const write = await audioOutput(service, values.output);
    const audio = client.ttsStream(request, { signal });
    audio.on('warning', (warning: Error) => progress.print(`rt-translate: warning: ${warning.message}`));
    const where = values.output === undefined || values.output === '-' ? 'standard output' : values.output;
    await withTransfer(progress, { what: 'receiving the audio', done: `received the audio into ${where}` }, (transfer) => {
      const wav = format === 'wav' ? wavSeconds() : undefined;
      if (wav) transfer.source(wav.source);
      return write(audio, undefined, (chunk) => {
        wav?.see(chunk);
        transfer.add(chunk.length);
      });
    });
    return EXIT_OK;
  });
}

/** Longest WAV header looked at for the audio's layout, bytes. */
const MAX_WAV_HEAD = 4096;

/** The seconds of audio in a WAV stream, from its header: `see` each piece as it passes. */
function wavSeconds(): { see(chunk: Buffer): void; source: TransferSource } {
  let head: Buffer | undefined = Buffer.alloc(0);
  let layout: WavDataLayout | undefined;
  return {
    see(chunk) {
      if (head === undefined) return;
      head = Buffer.concat([head, chunk.subarray(0, MAX_WAV_HEAD - head.length)]);
      layout = wavDataLayout(head);
      if (layout || head.length >= MAX_WAV_HEAD) head = undefined;
    },
    source: {
      audioSeconds: (bytes) => (layout ? Math.max(0, bytes - layout.dataOffset) / layout.byteRate : undefined),
    },
  };
}
