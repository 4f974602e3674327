/**
 * `rt-translate dub`: a media URL dubbed by the service into one or more languages (polled as
 * long media: 15 s growing to 60 s). Prints each output's URLs, or with `-o DIR` downloads the
 * dubbed files (resuming, their URLs looked up again when they expire) and, with
 * `--transcript`, each language's transcript.
 */
import { extname, join } from 'node:path';
import type { DubbingRequest, DubbedOutput, TranscriptFormat } from '../../lib/index.js';
import { dubSchema } from '../../lib/protocol.js';
import { TRANSCRIPT_FORMATS } from '../../lib/http/index.js';
import { EXIT_FAILURE, EXIT_OK, UsageError, type CliIo } from '../cli.js';
import { describeFailure } from '../failures.js';
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
import { localResult, taskRun } from './task-waits.js';
import { DownloadError, downloadToFile, writeTextOutput } from './outputs.js';
import { CREATE_DIRS_OPTION, createDirsUsage, checkOutputDirectory } from '../file-errors.js';

export const DUB_USAGE = `Usage: rt-translate dub --url URL --from TAG --to TAG[,TAG...] [options]      dub a video or recording

  --url URL             the media: a video page, a file-sharing link or a direct media URL
  --from TAG            its language, a locale tag such as en-us (or the service's id)
  --to TAG[,TAG...]     the languages to dub into
  -o, --output DIR      download each dubbed file into DIR as dub-RUN-LANG.EXT (paths on stdout)
  --transcript F        with -o: also each language's transcript, F one of ${TRANSCRIPT_FORMATS.join(' ')}
  --mode M              transcription pass: fast (the service's default) or slow
${createDirsUsage('DIR and its parents')}
${TASK_USAGE}
${SERVICE_USAGE}

Without -o, prints one JSON line per language: {"language","audioUrl","videoUrl"} ("audioFile",
the path of the file, instead of "audioUrl" from the embedded emulator, whose URLs end with the
command). The task is
polled as long media (15 s growing to 60 s); --poll-ms changes that. Says on stderr which task
it created and, once done, its run.

${EXIT_USAGE_TEXT} Status 1 also when a download failed (what it received is kept in
NAME.partial; NAME itself is only ever written complete).`;

const OPTIONS = {
  ...SERVICE_OPTIONS,
  ...TASK_OPTIONS,
  url: { type: 'string' },
  from: { type: 'string' },
  to: { type: 'string' },
  output: { type: 'string', short: 'o' },
  transcript: { type: 'string' },
  mode: { type: 'string' },
  ...CREATE_DIRS_OPTION,
} as const;

/** A language flag value: a tag, or the service's numeric id. */
export function languageValue(text: string): string | number {
  return /^\d+$/.test(text) ? Number(text) : text;
}

/** The extension of a URL's path (`.mp4`), else `fallback`. */
function extensionOf(url: string | undefined, fallback: string): string {
  try {
    return extname(new URL(url ?? '').pathname) || fallback;
  } catch {
    return fallback;
  }
}

export async function runDub(args: string[], io: CliIo): Promise<number> {
  const parsed = parseCommand(args, OPTIONS, DUB_USAGE, io);
  if (!parsed) return EXIT_OK;
  const { values } = parsed;
  const settings = await taskSettings(values, io);
  const targets = listFlag(values.to);
  let request: DubbingRequest | undefined;
  if (values.run === undefined) {
    if (values.url === undefined) throw new UsageError('--url URL is required (see --help).');
    if (values.from === undefined) throw new UsageError('--from TAG is required (see --help).');
    if (targets.length === 0) throw new UsageError('--to TAG[,TAG...] is required (see --help).');
    request = {
      videoUrl: values.url,
      sourceLanguage: languageValue(values.from),
      targetLanguages: targets.map(languageValue),
      ...(values.mode !== undefined ? { transcriptionMode: values.mode as 'fast' | 'slow' } : {}),
    };
    checkRequest(dubSchema, request);
  }
  const transcript = values.transcript as TranscriptFormat | undefined;
  if (transcript !== undefined) {
    if (!(TRANSCRIPT_FORMATS as readonly string[]).includes(transcript))
      throw new UsageError(`--transcript expects one of ${TRANSCRIPT_FORMATS.join(', ')} (got "${transcript}").`);
    if (values.output === undefined) throw new UsageError('--transcript needs -o DIR to write the transcripts into.');
  }
  if (values.output !== undefined && !values['no-wait']) await checkOutputDirectory(io, values.output, '-o', values['create-dirs'] === true);

  return withService(settings, io, async (service) => {
    const { client, signal } = service;
    const run = await taskRun(io, service, 'dub', values, (s) => client.dub.create(request!, { signal: s }));
    if (run === undefined) return EXIT_OK;
    const result = await client.dub.result(run, { signal });
    // One output carries no language key: it is the one target asked for.
    const languageOf = (output: DubbedOutput): string | undefined => output.language ?? (targets.length === 1 ? targets[0] : undefined);
    if (values.output === undefined) {
      for (const output of result.outputs) {
        // The embedded emulator's URL dies with this command: its file on disk is given instead.
        const file = output.audioUrl === undefined ? undefined : localResult(service, output.audioUrl);
        const audio = file !== undefined ? { audioFile: file } : { audioUrl: output.audioUrl ?? null };
        io.stdout.write(`${JSON.stringify({ language: languageOf(output) ?? null, ...audio, videoUrl: output.videoUrl ?? null })}\n`);
      }
      return EXIT_OK;
    }
    const dir = values.output;
    let failures = 0;
    for (const output of result.outputs) {
      const language = languageOf(output);
      const stem = `dub-${run}${language ? `-${language}` : ''}`;
      for (const kind of ['audio', 'video'] as const) {
        const url = kind === 'audio' ? output.audioUrl : output.videoUrl;
        if (url === undefined) continue;
        const path = join(dir, `${stem}${kind === 'video' ? '-video' : ''}${extensionOf(url, kind === 'audio' ? '.audio' : '.video')}`);
        try {
          await downloadToFile(
            service,
            () => client.dub.openFile(run, kind, { signal, ...(output.language ? { language: output.language } : {}) }),
            path,
            `${kind} of run ${run}`,
          );
          io.stdout.write(`${path}\n`);
        } catch (error) {
          if (signal.aborted) throw error instanceof DownloadError ? error.failure : error;
          failures++;
          const { failure, partial } = error instanceof DownloadError ? error : { failure: error, partial: undefined };
          const kept = partial ? `; ${partial.label} holds ${partial.holds} received` : '';
          io.stderr.write(
            `rt-translate: ${kind} of run ${run}${language ? ` (${language})` : ''} failed: ${describeFailure(failure).replace(/^rt-translate: /, '')}${kept}\n`,
          );
        }
      }
      if (transcript !== undefined) {
        if (language === undefined) throw new UsageError('give --to with --run to name the language of the transcript.');
        const text = await client.dub.getTranscript(run, languageValue(language), { signal, format: transcript });
        const path = join(dir, `${stem}.${transcript}`);
        await writeTextOutput(path, io, text.text ?? '');
        io.stdout.write(`${path}\n`);
      }
    }
    return failures === 0 ? EXIT_OK : EXIT_FAILURE;
  });
}
