/**
 * `rt-translate separate-results RUN_ID...`: downloads both tracks of finished audio separation
 * runs (one run looked up with `GET /audio-separation-result/{run_id}`, several with `POST
 * /audio-separation-results`, then each presigned URL) into a directory, as
 * `foreground-RUN.flac` and `background-RUN.flac`. Downloads resume after a lost connection and
 * refresh an expired URL by looking the runs up again. Each run's failure is reported on its
 * own; the exit status is 1 when any run failed. A track is written to `NAME.partial` and renamed
 * once complete; after a failure the bytes received stay in `NAME.partial` and the message names it.
 */
import { join } from 'node:path';
import type { SeparationTrack } from '../../lib/index.js';
import { RUN_IDS_COUNT, lookUpSeparationRuns } from '../../lib/http/index.js';
import { EXIT_FAILURE, EXIT_OK, UsageError, type CliIo } from '../cli.js';
import { describeFailure } from '../failures.js';
import {
  EXIT_USAGE_TEXT,
  PROGRESS_OPTIONS,
  PROGRESS_USAGE,
  SERVICE_OPTIONS,
  SERVICE_USAGE,
  parseCommand,
  serviceSettings,
  withService,
  type Service,
} from './service.js';
import { DownloadError, downloadToFile } from './outputs.js';
import { CREATE_DIRS_OPTION, createDirsUsage, checkOutputDirectory } from '../file-errors.js';

export const SEPARATE_RESULTS_USAGE = `Usage: rt-translate separate-results RUN_ID... [options]      download separated tracks

  RUN_ID...             finished audio separation runs: one is looked up on its own, several
                        ${RUN_IDS_COUNT.min} to ${RUN_IDS_COUNT.max} at a time (more are split into such batches)
  -o, --output DIR      directory for foreground-RUN.flac and background-RUN.flac
                        (default: the current directory)
${PROGRESS_USAGE}
${createDirsUsage('DIR and its parents')}
${SERVICE_USAGE}

Prints the path of each file written on stdout; the progress line says how much of each
download came. A run that is unknown, unfinished or failed,
or whose download fails, is reported on stderr and the others go on; what a failed download
received is kept in NAME.flac.partial, named in the message.

${EXIT_USAGE_TEXT} Status 1 also when any run failed.`;

const OPTIONS = {
  ...SERVICE_OPTIONS,
  ...PROGRESS_OPTIONS,
  output: { type: 'string', short: 'o' },
  ...CREATE_DIRS_OPTION,
} as const;

const TRACKS: readonly SeparationTrack[] = ['foreground', 'background'];

function runIdsOf(positionals: string[]): number[] {
  const ids = positionals.map((text) => {
    const id = Number(text);
    if (!/^\d+$/.test(text) || !Number.isSafeInteger(id) || id < 1) throw new UsageError(`RUN_ID expects a positive integer (got "${text}").`);
    return id;
  });
  const duplicate = ids.find((id, i) => ids.indexOf(id) !== i);
  if (duplicate !== undefined) throw new UsageError(`run ${duplicate} is given twice.`);
  if (ids.length === 0) throw new UsageError('RUN_ID... is required: one audio separation run or more (see --help).');
  return ids;
}

/** Splits `ids` into as few batches as possible, each of 2 to 5 runs (one run alone is a batch of its own). */
export function batchesOf(ids: number[]): number[][] {
  const count = Math.ceil(ids.length / RUN_IDS_COUNT.max);
  const batches: number[][] = [];
  let start = 0;
  for (let i = 0; i < count; i++) {
    const size = Math.ceil((ids.length - start) / (count - i));
    batches.push(ids.slice(start, start + size));
    start += size;
  }
  return batches;
}

/** The directory `-o` names for the tracks (default the current one); `-` is a usage error. */
export function outputDirectory(output: string | undefined): string {
  if (output === '-') throw new UsageError('-o expects a directory: two files are written per run.');
  return output ?? '.';
}

export async function runSeparateResults(args: string[], io: CliIo): Promise<number> {
  const parsed = parseCommand(args, OPTIONS, SEPARATE_RESULTS_USAGE, io, true);
  if (!parsed) return EXIT_OK;
  const { values, positionals } = parsed;
  const ids = runIdsOf(positionals);
  const dir = outputDirectory(values.output);
  const settings = await serviceSettings(values, io);
  await checkOutputDirectory(io, dir, '-o', values['create-dirs'] === true);

  return withService(settings, io, (service) => downloadRuns(io, service, ids, dir));
}

/**
 * Downloads both tracks of each finished run of `ids` into the directory `dir` (as
 * `checkOutputDirectory` checked it), printing each path on stdout; a run that fails is reported
 * on stderr and the others go on. Status 1 when any failed.
 */
export async function downloadRuns(io: CliIo, service: Service, ids: number[], dir: string): Promise<number> {
  const { client, signal, progress } = service;
  const failed = new Set<number>();
  const report = (runId: number, text: string): void => {
    failed.add(runId);
    progress.print(`rt-translate: run ${runId}: ${text}`);
  };
  for (const batch of batchesOf(ids)) {
    let runs;
    try {
      runs = await lookUpSeparationRuns(client, batch, { signal });
    } catch (error) {
      if (signal.aborted) throw error;
      for (const runId of batch) report(runId, `lookup failed: ${describeFailure(error).replace(/^rt-translate: /, '')}`);
      continue;
    }
    for (const runId of batch) {
      const run = runs.get(runId);
      if (!run || !run.ready) {
        const status = run?.status ?? 'no result';
        report(runId, `no tracks (${status})${run?.error ? `: ${run.error}` : ''}`);
        continue;
      }
      for (const track of TRACKS) {
        const url = track === 'foreground' ? run.foregroundAudioUrl! : run.backgroundAudioUrl!;
        const path = join(dir, `${track}-${runId}.flac`);
        try {
          await downloadToFile(service, () => client.audioSeparation.openTrack(batch, runId, track, { url, signal }), path, `run ${runId} ${track}`);
          io.stdout.write(`${path}\n`);
        } catch (error) {
          const { failure, partial } = error instanceof DownloadError ? error : { failure: error, partial: undefined };
          if (signal.aborted) throw failure;
          const kept = partial ? `; ${partial.label} holds ${partial.holds} received` : '';
          report(runId, `${track} track failed: ${describeFailure(failure).replace(/^rt-translate: /, '')}${kept}`);
        }
      }
    }
  }
  if (failed.size === 0) return EXIT_OK;
  progress.print(`rt-translate: ${failed.size} of ${ids.length} run(s) failed`);
  return EXIT_FAILURE;
}
