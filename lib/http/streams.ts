/**
 * Live stream dubbing: the service takes a live source stream (SRT, RTMP, HLS) and relays it
 * dubbed to target streams. `POST /stream` creates one (languages as tags or ids; the answer
 * gives the output URL per language set), `GET`/`PATCH`/`DELETE /stream/{id}` read, reschedule
 * and remove it, `POST /stream/probe` lists the tracks of a source before you create. The SDK's
 * deprecated `/v1/stream` family (with `GET .../stop`) is here too, marked deprecated.
 *
 * Kinds (see `retry.ts`): a creation is `create`; a deletion `delete`; a reschedule (`PATCH`),
 * a stop and a probe are retried like reads (repeating them changes nothing more).
 */
import type { HttpRequester, RequestOptions } from './requester.js';
import { asObject, call, callOptions, camelResult, checkedParam } from './endpoint-kit.js';
import type { Language } from './endpoints.js';
import { catalogOf } from './languages.js';
import type { LooseAnswer } from './library.js';
import { idParam, streamProbeSchema, streamSchema, streamUpdateSchema, type STREAM_DEMIXING_OPTIONS, type STREAM_SEGMENTING_OPTIONS } from './schemas.js';
import { validate } from './validation.js';
import { reportDeprecation } from '../deprecations.js';
import { isPlainObject } from './wire.js';

type PipelineOption = 'none' | 'best_model' | 'fast_model';

/** `POST /stream`. */
export interface StreamRequest {
  name?: string | null;
  description?: string | null;
  /** Seconds before the service starts creating the stream. */
  initialDelay?: number;
  /** Longest the creation may take, minutes. */
  timeoutInMins?: number | null;
  /** Voice ids to dub with. */
  voices: number[];
  /** Dictionary ids. */
  dictionaries: number[];
  config: {
    pipeline?: {
      demixing?: (typeof STREAM_DEMIXING_OPTIONS)[number];
      segmenting?: (typeof STREAM_SEGMENTING_OPTIONS)[number];
      transcribing?: PipelineOption;
      translating?: PipelineOption;
      revoicing?: PipelineOption;
    };
    mixing?: { originalAudioGain?: number | null; backgroundAudioGain?: number | null; fadeTime?: number; fallbackAudioGain?: number | null };
  };
  sourceStream: {
    language: Language;
    /** `srt://`, `rtmp(s)://`, `http(s)://` (HLS), ... */
    url: string;
    category?: number | null;
    passphrase?: string | null;
    streamid?: string | null;
    numberOfStreams?: number | null;
    audioStream?: number | null;
    backgroundAudioStream?: number | null;
    latency?: number | null;
    relayInput?: boolean | null;
  };
  targetStreams: Array<{
    languages: Language[];
    url: string;
    type: number;
    passphrase?: string | null;
    streamid?: string | null;
    pids?: (number | null)[] | null;
    transcodeVideo?: boolean | null;
    embedSubtitles?: boolean | null;
    audioCodec?: string | null;
    audioBitrate?: string | null;
    audioChannelLayout?: string | null;
    latency?: number | null;
    constantBitrate?: boolean | null;
    relayOutput?: boolean | null;
  }>;
  startTime?: string | null;
  endTime?: string | null;
  timezone?: string | null;
}

export interface CreatedStream {
  streamId: number;
  taskId: string | undefined;
  /** Where each set of languages is published. */
  urls: Array<{ languages: number[]; url: string }>;
  raw: Record<string, unknown>;
}

export interface StreamProbe {
  videoStreams: Array<Record<string, unknown>>;
  audioStreams: Array<Record<string, unknown>>;
  dataStreams: Array<Record<string, unknown>>;
  raw: Record<string, unknown>;
}

/** The wire body with its languages (the source's, each target's) as the service's ids. */
async function withLanguageIds(client: HttpRequester, wire: Record<string, unknown>, options: RequestOptions): Promise<Record<string, unknown>> {
  const catalog = catalogOf(client);
  const source = wire.source_stream as Record<string, unknown>;
  const targets = wire.target_streams as Array<Record<string, unknown>>;
  return {
    ...wire,
    source_stream: { ...source, language: await catalog.idOf(source.language as string | number, 'source', 'sourceStream.language', options) },
    target_streams: await Promise.all(
      targets.map(async (target, i) => ({
        ...target,
        languages: await Promise.all(
          (target.languages as (string | number)[]).map((l, j) => catalog.idOf(l, 'target', `targetStreams.${i}.languages.${j}`, options)),
        ),
      })),
    ),
  };
}

function loose(raw: unknown): LooseAnswer {
  return camelResult<Record<string, unknown>>(isPlainObject(raw) ? raw : { value: raw });
}

function streamPath(prefix: string, streamId: number, suffix = ''): string {
  return `${prefix}/${checkedParam(idParam, streamId, 'streamId')}${suffix}`;
}

async function create(client: HttpRequester, prefix: string, request: StreamRequest, options?: RequestOptions): Promise<CreatedStream> {
  const json = await withLanguageIds(client, validate(streamSchema, request), callOptions(options));
  const raw = asObject(await call(client, 'POST', prefix, 'create', options, { json }), `POST ${prefix}`);
  const urls = (Array.isArray(raw.stream_url_for_languages) ? raw.stream_url_for_languages : [])
    .filter(isPlainObject)
    .map((u) => ({ languages: Array.isArray(u.languages) ? (u.languages as number[]) : [], url: String(u.url ?? '') }));
  return { streamId: Number(raw.stream_id), taskId: typeof raw.task_id === 'string' ? raw.task_id : undefined, urls, raw };
}

async function probe(
  client: HttpRequester,
  prefix: string,
  request: { url: string; passphrase?: string | null; streamId?: string | null },
  options?: RequestOptions,
): Promise<StreamProbe> {
  const raw = asObject(await call(client, 'POST', `${prefix}/probe`, 'read', options, { json: validate(streamProbeSchema, request) }), `POST ${prefix}/probe`);
  const list = (value: unknown): Array<Record<string, unknown>> =>
    Array.isArray(value) ? value.filter(isPlainObject).map((v) => camelResult<Record<string, unknown>>(v)) : [];
  return { videoStreams: list(raw.video_streams), audioStreams: list(raw.audio_streams), dataStreams: list(raw.data_streams), raw };
}

/** `POST /stream`: starts dubbing a live stream. */
export function createStream(client: HttpRequester, request: StreamRequest, options?: RequestOptions): Promise<CreatedStream> {
  return create(client, '/stream', request, options);
}

/** `GET /stream/{id}`: the stream as the service describes it. */
export async function getStream(client: HttpRequester, streamId: number, options?: RequestOptions): Promise<LooseAnswer> {
  return loose(await call(client, 'GET', streamPath('/stream', streamId), 'read', options));
}

/** `PATCH /stream/{id}`: new start or end time, or a payload of settings (sent as given). */
export async function updateStream(
  client: HttpRequester,
  streamId: number,
  update: { startTime?: string | null; endTime?: string | null; payload?: Record<string, unknown> | null },
  options?: RequestOptions,
): Promise<LooseAnswer> {
  const path = streamPath('/stream', streamId);
  return loose(await call(client, 'PATCH', path, 'read', options, { json: validate(streamUpdateSchema, update) }));
}

/** `DELETE /stream/{id}`. */
export async function deleteStream(client: HttpRequester, streamId: number, options?: RequestOptions): Promise<LooseAnswer> {
  return loose(await call(client, 'DELETE', streamPath('/stream', streamId), 'delete', options));
}

/** `POST /stream/probe`: the video, audio and data tracks of a source stream. */
export function probeStream(
  client: HttpRequester,
  request: { url: string; passphrase?: string | null; streamId?: string | null },
  options?: RequestOptions,
): Promise<StreamProbe> {
  return probe(client, '/stream', request, options);
}

function warnV1(): void {
  reportDeprecation('RTT_DEP_STREAM_V1');
}

/** `POST /v1/stream`. @deprecated Use `createStream` (`POST /stream`). */
export function createStreamV1(client: HttpRequester, request: StreamRequest, options?: RequestOptions): Promise<CreatedStream> {
  warnV1();
  return create(client, '/v1/stream', request, options);
}

/** `GET /v1/stream/{id}`. @deprecated Use `getStream`. */
export async function getStreamV1(client: HttpRequester, streamId: number, options?: RequestOptions): Promise<LooseAnswer> {
  warnV1();
  return loose(await call(client, 'GET', streamPath('/v1/stream', streamId), 'read', options));
}

/** `GET /v1/stream/{id}/stop`: stops a stream. @deprecated Use `deleteStream`. */
export async function stopStreamV1(client: HttpRequester, streamId: number, options?: RequestOptions): Promise<LooseAnswer> {
  warnV1();
  return loose(await call(client, 'GET', streamPath('/v1/stream', streamId, '/stop'), 'read', options));
}

/** `POST /v1/stream/probe`. @deprecated Use `probeStream`. */
export function probeStreamV1(
  client: HttpRequester,
  request: { url: string; passphrase?: string | null; streamId?: string | null },
  options?: RequestOptions,
): Promise<StreamProbe> {
  warnV1();
  return probe(client, '/v1/stream', request, options);
}
