/**
 * `rt-translate subtitles`: subtitles of a media URL made by the service (`POST /sub`, polled as
 * long media), written as SRT, WebVTT or text: one language to a file or stdout, or every
 * language into a directory.
 */
import { stat } from 'node:fs/promises';
import { join, sep } from 'node:path';
import type { SubtitlesRequest } from '../../lib/index.js';
import { subtitlesSchema } from '../../lib/protocol.js';
import { EXIT_OK, UsageError, resolvePath, type CliIo } from '../cli.js';
import { CREATE_DIRS_OPTION, createDirsUsage, checkOutputDirectory } from '../file-errors.js';
import { languageValue } from './dub.js';
import {
  EXIT_USAGE_TEXT,
  SERVICE_OPTIONS,
  SERVICE_USAGE,
  TASK_OPTIONS,
  TASK_USAGE,
  checkRequest,
  listFlag,
  parseCommand,
  taskSettings,
  withService,
} from './service.js';
import { taskRun } from './task-waits.js';
import { checkOutput, writeTextOutput } from './outputs.js';
import { transcriptFormat } from './transcribe.js';

export const SUBTITLES_USAGE = `Usage: rt-translate subtitles --url URL --from TAG [--to TAG,...] [options]      subtitles of a media

  --url URL             the media: a video page, a file-sharing link or a direct media URL
  --from TAG            its language, a locale tag such as en-us
  --to TAG[,TAG...]     languages to translate the subtitles into (default: none, the source only)
  -f, --format F        srt vtt txt (default: from the output's extension, else srt)
  --language TAG        the language to write (default: the first of --to, else --from)
  -o, --output PATH     the subtitles; '-' or absent: stdout. A directory (or a path ending in
                        /): every language, as sub-RUN-LANG.F (paths on stdout)
${createDirsUsage()}
${TASK_USAGE}
${SERVICE_USAGE}

The task is polled as long media (15 s growing to 60 s); --poll-ms changes that. Says on stderr
which task it created and, once done, its run.

${EXIT_USAGE_TEXT}`;

const OPTIONS = {
  ...SERVICE_OPTIONS,
  ...TASK_OPTIONS,
  url: { type: 'string' },
  from: { type: 'string' },
  to: { type: 'string' },
  format: { type: 'string', short: 'f' },
  language: { type: 'string' },
  output: { type: 'string', short: 'o' },
  ...CREATE_DIRS_OPTION,
} as const;

/** True when `-o` names a directory: one that exists, or a path ending in a separator. */
async function isDirectory(io: CliIo, path: string | undefined): Promise<boolean> {
  if (path === undefined || path === '-') return false;
  if (path.endsWith('/') || path.endsWith(sep)) return true;
  try {
    return (await stat(resolvePath(io, path))).isDirectory();
  } catch {
    return false;
  }
}

export async function runSubtitles(args: string[], io: CliIo): Promise<number> {
  const parsed = parseCommand(args, OPTIONS, SUBTITLES_USAGE, io);
  if (!parsed) return EXIT_OK;
  const { values } = parsed;
  const settings = await taskSettings(values, io);
  const targets = listFlag(values.to);
  const toDirectory = await isDirectory(io, values.output);
  const format = transcriptFormat(values.format, toDirectory ? undefined : values.output, 'srt');
  if (format === 'json') throw new UsageError('subtitles are srt, vtt or txt (-f).');
  let request: SubtitlesRequest | undefined;
  if (values.run === undefined) {
    if (values.url === undefined) throw new UsageError('--url URL is required (see --help).');
    if (values.from === undefined) throw new UsageError('--from TAG is required (see --help).');
    request = { mediaUrl: values.url, sourceLanguage: values.from, ...(targets.length > 0 ? { targetLanguages: targets } : {}) };
    checkRequest(subtitlesSchema, request);
  }
  const languages = toDirectory ? [values.from, ...targets] : [values.language ?? targets[0] ?? values.from];
  if (languages.some((l) => l === undefined)) throw new UsageError("give --language (or --from and --to) with --run to name the subtitles' language.");
  const createDirs = values['create-dirs'] === true;
  if (!values['no-wait']) {
    if (toDirectory) await checkOutputDirectory(io, values.output!, '-o', createDirs);
    else await checkOutput(values.output, io, createDirs);
  }

  return withService(settings, io, async (service) => {
    const { client, signal } = service;
    const run = await taskRun(io, service, 'sub', values, (s) => client.tasks.subtitles.create(request!, { signal: s }));
    if (run === undefined) return EXIT_OK;
    for (const language of languages as string[]) {
      const { text } = await client.dub.getTranscript(run, languageValue(language), { signal, format });
      const path = toDirectory ? join(values.output!, `sub-${run}-${language}.${format}`) : values.output;
      await writeTextOutput(path, io, text ?? '');
      if (toDirectory) io.stdout.write(`${path}\n`);
    }
    return EXIT_OK;
  });
}
