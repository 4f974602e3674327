/**
 * Audio separation (`/audio-separation`, `/audio-separation-result(s)`): an audio file uploaded
 * as it is read, split by a task into its foreground (voice) and background tracks; the runs
 * read one at a time or in bulk, each track's URL, and a track opened as a download.
 */
import { ProtocolError, ValidationError } from '../errors.js';
import type { FlacDownloader, HttpRequester, RequestOptions, SeparationTrack, SeparationTrackOptions } from './requester.js';
import type { FlacDownloadStream } from './flac-download-stream.js';
import {
  asObject,
  bulkLookup,
  call,
  callOptions,
  createTask,
  downloadOptions,
  firstBytes,
  getTaskStatus,
  optionalString,
  parseBulkAnswer,
  runPath,
  waitForTaskOf,
  type CreatedTask,
  type TaskCallOptions,
} from './endpoint-kit.js';
import { multipartBody, type FieldValue, type Upload } from './multipart.js';
import { audioSeparationSchema, runIdParam } from './schemas.js';
import { type CompletedTask, type TaskStatusResponse } from './tasks.js';
import { validate } from './validation.js';

export type { CreatedTask, TaskCallOptions } from './endpoint-kit.js';
import type { ProjectFields } from './endpoints.js';

/** One run of `POST /audio-separation-results`. Every field but `runId` may be absent. */
export interface AudioSeparationRun {
  runId: number;
  /** Per-run status, when the service reports one. */
  status: string | undefined;
  /** Per-run error, when the service reports one. */
  error: string | undefined;
  foregroundAudioUrl: string | undefined;
  backgroundAudioUrl: string | undefined;
  /** Both URLs present. */
  ready: boolean;
  raw: Record<string, unknown>;
}

/** `POST /audio-separation`: an audio file (WAV, MP3, FLAC or AAC), uploaded as it is read. */
export interface AudioSeparationRequest extends ProjectFields {
  /** A file path, a Buffer, a Blob, a Readable, or one of these with a `filename`. */
  mediaFile: Upload;
}

/** `POST /audio-separation`: uploads an audio file (multipart, streamed) and starts a separation task. */
export async function createAudioSeparation(client: HttpRequester, request: AudioSeparationRequest, options?: RequestOptions): Promise<CreatedTask> {
  if (request === null || typeof request !== 'object' || request.mediaFile === undefined) {
    throw new ValidationError('mediaFile', 'an audio file (WAV, MP3, FLAC or AAC): a path, Buffer, Blob or Readable', 'nothing');
  }
  const { mediaFile, ...fields } = request;
  const wire = validate<Record<string, FieldValue>>(audioSeparationSchema, fields);
  const multipart = await multipartBody(wire, [{ name: 'media_file', field: 'mediaFile', upload: mediaFile }]);
  return createTask(client, '/audio-separation', options, { multipart });
}

export function getAudioSeparationStatus(client: HttpRequester, taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
  return getTaskStatus(client, 'audio-separation', taskId, options);
}

/** One separation run's entry, tolerant of absent and extra fields. */
function separationRun(runId: number, entry: Record<string, unknown>): AudioSeparationRun {
  const foreground = optionalString(entry.foreground_audio_url);
  const background = optionalString(entry.background_audio_url);
  return {
    runId,
    status: optionalString(entry.status),
    error: optionalString(entry.error) ?? optionalString(entry.message),
    foregroundAudioUrl: foreground,
    backgroundAudioUrl: background,
    ready: foreground !== undefined && background !== undefined,
    raw: entry,
  };
}

/** `GET /audio-separation-result/{run_id}`: the two presigned track URLs of one run. */
export async function getAudioSeparationResult(client: HttpRequester, runId: number, options?: RequestOptions): Promise<AudioSeparationRun> {
  const raw = asObject(await call(client, 'GET', runPath('/audio-separation-result', runId), 'read', options), 'GET /audio-separation-result');
  return separationRun(runId, raw);
}

/** Reads a separation bulk answer: keys become integers; absent or extra per-run fields are tolerated. */
export function parseAudioSeparationResults(raw: unknown): Map<number, AudioSeparationRun> {
  return separationRuns(parseBulkAnswer(raw, 'POST /audio-separation-results'));
}

function separationRuns(entries: Map<number, Record<string, unknown>>): Map<number, AudioSeparationRun> {
  const runs = new Map<number, AudioSeparationRun>();
  for (const [runId, entry] of entries) runs.set(runId, separationRun(runId, entry));
  return runs;
}

/** `POST /audio-separation-results` for 2 to 5 distinct run ids; keyed by integer run id. */
export async function getAudioSeparationResults(client: HttpRequester, runIds: number[], options?: RequestOptions): Promise<Map<number, AudioSeparationRun>> {
  return separationRuns(await bulkLookup(client, '/audio-separation-results', runIds, options));
}

/**
 * The runs `runIds` looked up afresh: one run through `GET /audio-separation-result/{run_id}`,
 * 2 to 5 through `POST /audio-separation-results`.
 */
export async function lookUpSeparationRuns(client: HttpRequester, runIds: number[], options?: RequestOptions): Promise<Map<number, AudioSeparationRun>> {
  if (Array.isArray(runIds) && runIds.length === 1) return new Map([[runIds[0]!, await getAudioSeparationResult(client, runIds[0]!, options)]]);
  return getAudioSeparationResults(client, runIds, options);
}

/** The presigned URL of `track` of `runId` in a fresh lookup of `runIds`, or a clear error. */
async function separationTrackUrl(client: HttpRequester, runIds: number[], runId: number, track: SeparationTrack, options: RequestOptions): Promise<string> {
  const run = (await lookUpSeparationRuns(client, runIds, options)).get(runId);
  const url = track === 'foreground' ? run?.foregroundAudioUrl : run?.backgroundAudioUrl;
  if (url !== undefined) return url;
  const state =
    run === undefined ? 'is missing from the answer' : `has no ${track} track (status ${run.status ?? 'not given'}${run.error ? `: ${run.error}` : ''})`;
  throw new ProtocolError(`Audio separation run ${runId} ${state}.`, { serverMessage: run?.error });
}

/**
 * One track of a finished audio separation run, as a resumable `FlacDownloadStream` (FLAC, or
 * PCM16 with `decode`) that resolves once the FLAC header arrived.
 *
 * The track's URL is presigned (no API key is sent with it) and expires. When it is refused
 * with 403, the stream looks `runIds` up again and goes on from where it stopped: `[runId]`
 * alone through `GET /audio-separation-result/{run_id}`, or the batch of 2 to 5 runs `runId`
 * was looked up in through `POST /audio-separation-results`. `options.url` skips the first
 * lookup when the URL is known.
 */
export async function openSeparationTrack(
  client: FlacDownloader,
  runIds: number[],
  runId: number,
  track: SeparationTrack,
  options: SeparationTrackOptions = {},
): Promise<FlacDownloadStream> {
  validate(runIdParam, runId, ['runId']);
  if (track !== 'foreground' && track !== 'background') throw new ValidationError('track', "'foreground' or 'background'", String(track));
  if (!Array.isArray(runIds) || !runIds.includes(runId)) {
    const received = Array.isArray(runIds) ? `[${runIds.join(', ')}]` : typeof runIds;
    throw new ValidationError('runIds', `[${runId}], or the lookup batch of 2 to 5 run ids that includes run ${runId}`, received);
  }
  const req = callOptions(options);
  const url = options.url ?? (await separationTrackUrl(client, runIds, runId, track, req));
  const audio = client.openFlacDownload({
    url,
    refreshUrl: () => separationTrackUrl(client, runIds, runId, track, req),
    ...downloadOptions(options),
  });
  await firstBytes(audio);
  return audio;
}

/** Uploads audio for separation and waits for the run (long-media profile). */
export async function separateAudio(client: HttpRequester, request: AudioSeparationRequest, options: TaskCallOptions = {}): Promise<CompletedTask> {
  const task = await createAudioSeparation(client, request, callOptions(options));
  return waitForTaskOf(client, 'audio-separation', task.taskId, options);
}
