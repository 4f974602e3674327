/**
 * Live stream dubbing against the emulator: creation with languages as tags (converted to ids in
 * the source and every target), reading, rescheduling, deleting, probing, another key refused,
 * validation before any request, and the deprecated `/v1/stream` family.
 */
import { describe, expect, it, vi } from 'vitest';
import { ValidationError } from '../lib/errors.js';
import { HttpForbiddenError } from '../lib/http/errors.js';
import { createStreamV1, getStreamV1, probeStreamV1, stopStreamV1, type StreamRequest } from '../lib/http/streams.js';
import { OTHER_KEY, STREAM_REQUEST, clientFor, control, logged, sharedEmulator } from './http-test-helpers.js';

const env = sharedEmulator();

const request: StreamRequest = STREAM_REQUEST;

describe('live streams', () => {
  it('created with ids for every language; read, rescheduled and deleted', async () => {
    const created = await env.client.streams.create(request);
    expect(created.streamId).toBeGreaterThan(0);
    expect(created.taskId).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.urls).toEqual([
      { languages: [54], url: 'rtmp://out.example.com/live/es' },
      { languages: [76, 31], url: 'srt://out.example.com:9001' },
    ]);
    const read = await env.client.streams.get(created.streamId);
    expect(read).toMatchObject({
      name: 'Morning show',
      status: 'RUNNING',
      sourceStream: { language: 1, url: 'srt://ingest.example.com:9000', latency: 200 },
      config: { mixing: { backgroundAudioGain: -6, fadeTime: 0.5 } },
      raw: { source_stream: { language: 1 }, target_streams: [{ languages: [54] }, { languages: [76, 31], embed_subtitles: true }] },
    });
    const moved = await env.client.streams.update(created.streamId, { endTime: '2030-01-01T10:00:00Z', payload: { note: 'extended' } });
    expect(moved).toMatchObject({ endTime: '2030-01-01T10:00:00Z', note: 'extended' });
    expect(await env.client.streams.delete(created.streamId)).toMatchObject({ status: 'ok' });
    await expect(env.client.streams.get(created.streamId)).rejects.toMatchObject({ status: 404 });
  });

  it("another key's stream is 403", async () => {
    const created = await env.client.streams.create(request);
    const other = clientFor(env.emu, { apiKey: OTHER_KEY });
    try {
      await expect(other.streams.get(created.streamId)).rejects.toBeInstanceOf(HttpForbiddenError);
      await expect(other.streams.delete(created.streamId)).rejects.toBeInstanceOf(HttpForbiddenError);
    } finally {
      await other.close();
    }
  });

  it("a probe lists the source's tracks in camelCase", async () => {
    const probe = await env.client.streams.probe({ url: 'rtmp://ingest.example.com/live/abc', streamId: 'abc' });
    expect(probe.videoStreams).toEqual([expect.objectContaining({ codecName: 'h264', width: 1920, height: 1080 })]);
    expect(probe.audioStreams).toEqual([expect.objectContaining({ codecName: 'aac', sampleRate: 48_000, channels: 2 })]);
    expect(probe.dataStreams).toEqual([]);
  });

  it('refuses bad input before any request, naming the field', async () => {
    await control(env.emu, 'DELETE', 'requests');
    const cases: Array<[StreamRequest, string]> = [
      [{ ...request, sourceStream: { ...request.sourceStream, url: 'ftp://x' } }, 'sourceStream.url'],
      [{ ...request, targetStreams: [] }, 'targetStreams'],
      [{ ...request, targetStreams: [{ ...request.targetStreams[0]!, languages: [] }] }, 'targetStreams.0.languages'],
      [{ ...request, config: { pipeline: { demixing: 'best' as 'none' } } }, 'config.pipeline.demixing'],
      [{ ...request, voices: [0] }, 'voices.0'],
    ];
    for (const [bad, field] of cases) {
      const error = await env.client.streams.create(bad).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).field).toBe(field);
    }
    await expect(env.client.streams.probe({ url: 'mailto:x' })).rejects.toMatchObject({ field: 'url' });
    await expect(env.client.streams.create({ ...request, sourceStream: { ...request.sourceStream, language: 'xx-yy' } })).rejects.toMatchObject({
      field: 'sourceStream.language',
    });
    expect(await logged(env.emu, 'POST', '/stream')).toEqual([]);
  });

  it('the deprecated /v1/stream family, with one deprecation warning', async () => {
    const emit = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    try {
      const created = await createStreamV1(env.client, request);
      expect((await getStreamV1(env.client, created.streamId)).status).toBe('RUNNING');
      expect((await stopStreamV1(env.client, created.streamId)).status).toBe('STOPPED');
      expect((await probeStreamV1(env.client, { url: 'srt://x.example.com:1' })).audioStreams).toHaveLength(1);
      expect(emit.mock.calls.filter((c) => (c[1] as { code?: string })?.code === 'RTT_DEP_STREAM_V1')).toHaveLength(1);
    } finally {
      emit.mockRestore();
    }
  });

  it('the /v1/stream family as client methods, each on its /v1 path', async () => {
    const emit = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    try {
      await control(env.emu, 'DELETE', 'requests');
      const created = await env.client.streams.createV1(request);
      expect(created.urls).toEqual([
        { languages: [54], url: 'rtmp://out.example.com/live/es' },
        { languages: [76, 31], url: 'srt://out.example.com:9001' },
      ]);
      expect(await env.client.streams.getV1(created.streamId)).toMatchObject({ status: 'RUNNING', name: 'Morning show' });
      expect((await env.client.streams.stopV1(created.streamId)).status).toBe('STOPPED');
      expect((await env.client.streams.probeV1({ url: 'srt://x.example.com:1' })).audioStreams).toHaveLength(1);
      const paths = (await control(env.emu, 'GET', 'requests')).requests.map((r: { method: string; path: string }) => `${r.method} ${r.path}`);
      expect(paths.filter((p: string) => !p.includes('-languages'))).toEqual([
        'POST /v1/stream',
        `GET /v1/stream/${created.streamId}`,
        `GET /v1/stream/${created.streamId}/stop`,
        'POST /v1/stream/probe',
      ]);
    } finally {
      emit.mockRestore();
    }
  });
});
