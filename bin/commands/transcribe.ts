/**
 * `rt-translate transcribe`: a recording (a file or stdin, uploaded as it is read) or a media URL
 * transcribed by the service, written as JSON, SRT, WebVTT or text to a file or stdout.
 */
import { basename, extname } from 'node:path';
import type { TranscriptionMode, TranscriptSegment, TranscriptionRequest } from '../../lib/index.js';
import { transcriptionSchema } from '../../lib/protocol.js';
import { TRANSCRIPTION_MODES, renderTranscript } from '../../lib/http/index.js';
import { EXIT_OK, UsageError, type CliIo } from '../cli.js';
import { EXIT_USAGE_TEXT, SERVICE_OPTIONS, SERVICE_USAGE, TASK_OPTIONS, TASK_USAGE, checkRequest, parseCommand, taskSettings, withService } from './service.js';
import { taskRun } from './task-waits.js';
import { checkOutput, writeTextOutput } from './outputs.js';
import { withUploadProgress } from './transfers.js';
import { CREATE_DIRS_OPTION, createDirsUsage } from '../file-errors.js';
import { checkMediaInput } from '../media-input.js';

/** What `-i` takes, in words. */
const RECORDINGS = 'audio or video files (WAV, MP3, FLAC, AAC, Ogg, MP4, WebM, ...)';

export const TRANSCRIPT_OUTPUTS = ['json', 'srt', 'vtt', 'txt'] as const;
export type TranscriptOutput = (typeof TRANSCRIPT_OUTPUTS)[number];

export const TRANSCRIBE_USAGE = `Usage: rt-translate transcribe (-i PATH | --url URL) --language TAG [options]      speech to text

  -i, --input PATH      the recording (audio or video; '-': stdin), uploaded as it is read
  --url URL             or a media URL the service fetches
  --language TAG        the spoken language, a locale tag such as en-us (or the service's id)
  -f, --format F        ${TRANSCRIPT_OUTPUTS.join(' ')} (default: from the output's extension, else json)
  --words               word timings (json output)
  --speakers            speaker labels in srt, vtt and txt
  --mode M              ${TRANSCRIPTION_MODES.join(' or ')} (the service's default: fast)
  -o, --output PATH     the transcript; '-' or absent: stdout
${createDirsUsage()}
${TASK_USAGE}
${SERVICE_USAGE}

JSON is {"segments":[{"startMs","endMs","text","speaker","words"}]}. Says on stderr which task
it created and, once done, its run; the progress line follows the upload, then the wait.

${EXIT_USAGE_TEXT}`;

const OPTIONS = {
  ...SERVICE_OPTIONS,
  ...TASK_OPTIONS,
  input: { type: 'string', short: 'i' },
  url: { type: 'string' },
  language: { type: 'string' },
  format: { type: 'string', short: 'f' },
  words: { type: 'boolean' },
  speakers: { type: 'boolean' },
  mode: { type: 'string' },
  output: { type: 'string', short: 'o' },
  ...CREATE_DIRS_OPTION,
} as const;

/** `-f`, else the output's extension, else `fallback`. */
export function transcriptFormat(flag: string | undefined, output: string | undefined, fallback: TranscriptOutput): TranscriptOutput {
  const chosen = flag ?? (output === undefined || output === '-' ? '' : extname(output).slice(1).toLowerCase());
  if (chosen === '') return fallback;
  if (!(TRANSCRIPT_OUTPUTS as readonly string[]).includes(chosen)) {
    throw new UsageError(`${flag !== undefined ? '-f' : `the extension of ${output}`} expects one of ${TRANSCRIPT_OUTPUTS.join(', ')} (got "${chosen}").`);
  }
  return chosen as TranscriptOutput;
}

/** A transcript as the command writes it. */
export function transcriptText(segments: TranscriptSegment[], format: TranscriptOutput, speakers: boolean): string {
  return format === 'json' ? `${JSON.stringify({ segments })}\n` : renderTranscript(segments, format, { speakers });
}

export async function runTranscribe(args: string[], io: CliIo): Promise<number> {
  const parsed = parseCommand(args, OPTIONS, TRANSCRIBE_USAGE, io);
  if (!parsed) return EXIT_OK;
  const { values } = parsed;
  const settings = await taskSettings(
    values,
    io,
    values.run === undefined && values.input === '-' ? 'the recording must come from a file: pass -i PATH' : undefined,
  );
  const format = transcriptFormat(values.format, values.output, 'json');
  let request: TranscriptionRequest | undefined;
  if (values.run === undefined) {
    if (values.language === undefined) throw new UsageError('--language TAG is required (see --help).');
    if ((values.input === undefined) === (values.url === undefined)) throw new UsageError('give -i PATH (a recording) or --url URL, one of them (see --help).');
    const language = /^\d+$/.test(values.language) ? Number(values.language) : values.language;
    const fields = {
      language,
      ...(values.url !== undefined ? { mediaUrl: values.url } : {}),
      ...(values.mode !== undefined ? { transcriptionMode: values.mode as TranscriptionMode } : {}),
    };
    checkRequest(transcriptionSchema, fields);
    if (values.input === undefined) request = fields;
    else {
      // Read and checked before any request: a recording the service could not read is refused here.
      const media = await checkMediaInput(io, values.input, '-i', RECORDINGS);
      request = { ...fields, mediaFile: typeof media === 'string' ? media : { data: media, filename: 'stdin' } };
    }
  }
  if (!values['no-wait']) await checkOutput(values.output, io, values['create-dirs'] === true);

  return withService(settings, io, async (service) => {
    const { client, signal } = service;
    const run = await taskRun(io, service, 'transcription', values, (s) =>
      request!.mediaFile === undefined
        ? client.transcription.create(request!, { signal: s })
        : withUploadProgress(service.progress, values.input === '-' ? 'standard input' : basename(values.input!), (onUploadProgress) =>
            client.transcription.create(request!, { signal: s, onUploadProgress }),
          ),
    );
    if (run === undefined) return EXIT_OK;
    const result = await client.transcription.result(run, { signal, wordLevelTimestamps: values.words === true ? true : undefined });
    await writeTextOutput(values.output, io, transcriptText(result.segments, format, values.speakers === true));
    return EXIT_OK;
  });
}
