/**
 * `rt-translate separate -i PATH [-o DIR]`: a recording's voice and background apart. The file is
 * uploaded as it is read (`POST /audio-separation`), the task waited for, and both tracks of its
 * run downloaded as `separate-results RUN` does (`foreground-RUN.flac`, `background-RUN.flac`),
 * their paths printed on stdout.
 */
import { open } from 'node:fs/promises';
import { isSniffResult, sniffAudio } from '../../lib/audio/sniff.js';
import { EXIT_OK, UsageError, type CliIo } from '../cli.js';
import {
  EXIT_USAGE_TEXT,
  SERVICE_OPTIONS,
  SERVICE_USAGE,
  TASK_OPTIONS,
  TASK_USAGE,
  checkDirectory,
  checkInputFile,
  parseCommand,
  taskRun,
  taskSettings,
  withService,
} from './http-common.js';
import { downloadRuns, outputDirectory } from './separate-results.js';

export const SEPARATE_USAGE = `Usage: rt-translate separate -i PATH [options]      voice and background of a recording, apart

  -i, --input PATH      the recording: WAV, MP3, FLAC or AAC, uploaded as it is read
  -o, --output DIR      directory for foreground-RUN.flac (the voice) and background-RUN.flac
                        (everything else); default: the current directory
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
} as const;

/** What the service separates: its creation takes WAV, MP3, FLAC or AAC (also in MP4/M4A). */
const SEPARABLE = new Set(['WAV', 'FLAC', 'MP3', 'AAC (ADTS)', 'MP4/M4A/MOV']);
/** The start of a file read to recognise it. */
const HEAD_BYTES = 4096;

/**
 * Refuses, before the upload, a file that is empty or that the library recognises as another
 * kind of media (Ogg, WebM, AIFF, ...); a file it does not recognise is left to the service.
 */
async function checkSeparable(path: string): Promise<void> {
  const file = await open(path, 'r');
  let head: Buffer;
  try {
    const { buffer, bytesRead } = await file.read(Buffer.alloc(HEAD_BYTES), 0, HEAD_BYTES, 0);
    head = buffer.subarray(0, bytesRead);
  } finally {
    await file.close();
  }
  const accepted = 'the service separates WAV, MP3, FLAC or AAC audio';
  if (head.length === 0) throw new UsageError(`-i ${path} is empty: ${accepted}.`);
  const found = sniffAudio(head, head.length < HEAD_BYTES);
  if (isSniffResult(found) && found.kind !== 'unknown' && !SEPARABLE.has(found.name)) {
    throw new UsageError(`-i ${path} is ${found.name}: ${accepted}; convert it first (for example ffmpeg -i ${path} song.wav).`);
  }
}

export async function runSeparate(args: string[], io: CliIo): Promise<number> {
  const parsed = parseCommand(args, OPTIONS, SEPARATE_USAGE, io);
  if (!parsed) return EXIT_OK;
  const { values } = parsed;
  const settings = await taskSettings(values, io);
  const dir = outputDirectory(values.output);
  const input = values.input;
  if (values.run === undefined) {
    if (input === undefined) throw new UsageError('-i PATH is required: the recording to separate (see rt-translate separate --help).');
    await checkInputFile(input, '-i');
    await checkSeparable(input);
  } else if (input !== undefined) {
    throw new UsageError('give -i PATH (a recording to separate) or --run ID (the tracks of a finished run), not both.');
  }
  if (!values['no-wait']) await checkDirectory(dir);

  return withService(settings, io, async (service) => {
    const run = await taskRun(io, service, 'audio-separation', values, (signal) => service.client.createAudioSeparation({ mediaFile: input! }, { signal }));
    if (run === undefined) return EXIT_OK;
    return downloadRuns(io, service, [run], dir);
  });
}
