/**
 * `rt-translate separate -i PATH [-o DIR]`: a recording's voice and background apart. The file is
 * uploaded as it is read (`POST /audio-separation`), the task waited for, and both tracks of its
 * run downloaded as `separate-results RUN` does (`foreground-RUN.flac`, `background-RUN.flac`),
 * their paths printed on stdout.
 */
import { open } from 'node:fs/promises';
import { basename } from 'node:path';
import type { Readable } from 'node:stream';
import { isSniffResult, sniffAudio } from '../../lib/dsp.js';
import { EXIT_OK, UsageError, type CliIo } from '../cli.js';
import { EXIT_USAGE_TEXT, SERVICE_OPTIONS, SERVICE_USAGE, TASK_OPTIONS, TASK_USAGE, parseCommand, taskSettings, withService } from './service.js';
import { taskRun } from './task-waits.js';
import { withUploadProgress } from './transfers.js';
import { CREATE_DIRS_OPTION, createDirsUsage, checkOutputDirectory } from '../file-errors.js';
import { checkMediaInput } from '../media-input.js';
import { downloadRuns, outputDirectory } from './separate-results.js';

export const SEPARATE_USAGE = `Usage: rt-translate separate -i PATH [options]      voice and background of a recording, apart

  -i, --input PATH      the recording: WAV, MP3, FLAC or AAC, uploaded as it is read (- for
                        standard input)
  -o, --output DIR      directory for foreground-RUN.flac (the voice) and background-RUN.flac
                        (everything else); default: the current directory
${createDirsUsage('DIR and its parents')}
${TASK_USAGE}
${SERVICE_USAGE}

Says on stderr which task it created and, once done, its run; then prints the path of each
track written on stdout. A track whose download fails keeps what it received in
NAME.flac.partial, named in the message; \`rt-translate separate-results RUN\` downloads the
tracks of a finished run again.

${EXIT_USAGE_TEXT}`;

const OPTIONS = {
  ...SERVICE_OPTIONS,
  ...TASK_OPTIONS,
  input: { type: 'string', short: 'i' },
  output: { type: 'string', short: 'o' },
  ...CREATE_DIRS_OPTION,
} as const;

/** What the service separates: its creation takes WAV, MP3, FLAC or AAC (also in MP4/M4A). */
const SEPARABLE = new Set(['WAV', 'FLAC', 'MP3', 'AAC (ADTS)', 'MP4/M4A/MOV']);
const ACCEPTED = 'WAV, MP3, FLAC or AAC audio';
/** The start of a file read to recognise it. */
const HEAD_BYTES = 4096;

/**
 * The recording of `-i`, checked before the upload (`checkMediaInput`: readable, a media file),
 * and refused when the library recognises it as media the service does not separate (Ogg, WebM,
 * AIFF, ...). Returns the resolved path, or standard input to upload.
 */
async function separableInput(io: CliIo, path: string): Promise<string | Readable> {
  const media = await checkMediaInput(io, path, '-i', ACCEPTED);
  if (typeof media !== 'string') return media;
  const file = await open(media, 'r');
  let head: Buffer;
  try {
    const { buffer, bytesRead } = await file.read(Buffer.alloc(HEAD_BYTES), 0, HEAD_BYTES, 0);
    head = buffer.subarray(0, bytesRead);
  } finally {
    await file.close();
  }
  const found = sniffAudio(head, head.length < HEAD_BYTES);
  if (isSniffResult(found) && found.kind !== 'unknown' && !SEPARABLE.has(found.name)) {
    throw new UsageError(`-i ${path} is ${found.name}: the service separates ${ACCEPTED}; convert it first (for example ffmpeg -i ${path} song.wav).`);
  }
  return media;
}

export async function runSeparate(args: string[], io: CliIo): Promise<number> {
  const parsed = parseCommand(args, OPTIONS, SEPARATE_USAGE, io);
  if (!parsed) return EXIT_OK;
  const { values } = parsed;
  const settings = await taskSettings(values, io);
  const dir = outputDirectory(values.output);
  const input = values.input;
  let media: string | Readable | undefined;
  if (values.run === undefined) {
    if (input === undefined) throw new UsageError('-i PATH is required: the recording to separate (see rt-translate separate --help).');
    media = await separableInput(io, input);
  } else if (input !== undefined) {
    throw new UsageError('give -i PATH (a recording to separate) or --run ID (the tracks of a finished run), not both.');
  }
  if (!values['no-wait']) await checkOutputDirectory(io, dir, '-o', values['create-dirs'] === true);

  return withService(settings, io, async (service) => {
    const mediaFile = typeof media === 'string' ? media : { data: media!, filename: 'stdin' };
    const shown = typeof media === 'string' ? basename(media) : 'standard input';
    const run = await taskRun(io, service, 'audio-separation', values, (signal) =>
      withUploadProgress(service.progress, shown, (onUploadProgress) => service.client.audioSeparation.create({ mediaFile }, { signal, onUploadProgress })),
    );
    if (run === undefined) return EXIT_OK;
    return downloadRuns(io, service, [run], dir);
  });
}
