/**
 * Live stream dubbing as the emulator answers it: `POST /stream` (and the deprecated
 * `/v1/stream`) records a stream for the key and answers its id, a task id and the output URL
 * per language set (the targets' own URLs: the emulator relays nothing); `GET`, `PATCH` and
 * `DELETE /stream/{id}` read, reschedule and remove it; `GET /v1/stream/{id}/stop` stops it;
 * `POST /stream/probe` describes a source as one H.264 video track and one AAC stereo track.
 * Another key's stream answers 403, an unknown one 404.
 */
import { randomUUID } from 'node:crypto';
import { streamProbeSchema, streamSchema, streamUpdateSchema } from '../../http/schemas.js';
import { sendError, sendJson } from './respond.js';
import { intParam, jsonBody, knownLanguages, route, usableVoices, type Handler, type Route, type RouteContext, type RouteRequest } from './route-kit.js';
import type { EmulatedStream } from './stream-store.js';

/** The key's stream of path parameter 0, or undefined after answering 403/404/422. */
function ownStream(ctx: RouteContext, r: RouteRequest): EmulatedStream | undefined {
  const id = intParam(r, 0, 'stream_id');
  if (id === undefined) return undefined;
  const stream = ctx.streams.streams.get(id);
  if (!stream) sendError(r.res, 404, `No stream ${id}.`);
  else if (stream.owner !== r.key) sendError(r.res, 403, `Stream ${id} belongs to another API key.`);
  else return stream;
  return undefined;
}

const createStream: Handler = async (ctx, r) => {
  const body = await jsonBody(ctx, r, streamSchema);
  if (!body) return;
  const source = body.source_stream as Record<string, unknown>;
  const targets = body.target_streams as Array<Record<string, unknown>>;
  const languages = { 'source_stream.language': source.language, ...Object.fromEntries(targets.map((t, i) => [`target_streams.${i}.languages`, t.languages])) };
  if (!knownLanguages(r, languages, Object.keys(languages)) || !usableVoices(ctx, r, body, ['voices'])) return;
  const id = ctx.streams.next();
  const urls = targets.map((t) => ({ languages: t.languages, url: t.url }));
  const record = { ...body, stream_id: id, status: body.start_time ? 'SCHEDULED' : 'RUNNING', created_at: new Date(ctx.now()).toISOString() };
  ctx.streams.streams.set(id, { owner: r.key, record });
  sendJson(r.res, 200, { stream_id: id, stream_url_for_languages: urls, task_id: randomUUID() });
};

const getStream: Handler = (ctx, r) => {
  const stream = ownStream(ctx, r);
  if (stream) sendJson(r.res, 200, stream.record);
};

const updateStream: Handler = async (ctx, r) => {
  const stream = ownStream(ctx, r);
  if (!stream) return void r.req.resume();
  const body = await jsonBody(ctx, r, streamUpdateSchema);
  if (!body) return;
  const { payload, ...times } = body;
  Object.assign(stream.record, times, payload ?? {});
  sendJson(r.res, 200, stream.record);
};

const deleteStream: Handler = (ctx, r) => {
  const stream = ownStream(ctx, r);
  if (!stream) return;
  ctx.streams.streams.delete(stream.record.stream_id as number);
  sendJson(r.res, 200, { status: 'ok', stream_id: stream.record.stream_id });
};

const stopStream: Handler = (ctx, r) => {
  const stream = ownStream(ctx, r);
  if (!stream) return;
  stream.record.status = 'STOPPED';
  sendJson(r.res, 200, stream.record);
};

const probe: Handler = async (ctx, r) => {
  const body = await jsonBody(ctx, r, streamProbeSchema);
  if (!body) return;
  sendJson(r.res, 200, {
    video_streams: [
      { index: 0, codec_name: 'h264', codec_long_name: 'H.264 / AVC / MPEG-4 AVC / MPEG-4 part 10', profile: 'High', width: 1920, height: 1080, is_avc: true },
    ],
    audio_streams: [
      {
        index: 1,
        codec_name: 'aac',
        codec_long_name: 'AAC (Advanced Audio Coding)',
        profile: 'LC',
        sample_fmt: 'fltp',
        sample_rate: 48_000,
        channels: 2,
        channel_layout: 'stereo',
        bit_rate: 128_000,
      },
    ],
    data_streams: [],
  });
};

export const STREAM_ROUTES: readonly Route[] = [
  route('POST', '/stream/probe', probe),
  route('POST', '/stream', createStream),
  route('GET', '/stream/{}', getStream),
  route('PATCH', '/stream/{}', updateStream),
  route('DELETE', '/stream/{}', deleteStream),
  route('POST', '/v1/stream/probe', probe),
  route('POST', '/v1/stream', createStream),
  route('GET', '/v1/stream/{}', getStream),
  route('GET', '/v1/stream/{}/stop', stopStream),
];
