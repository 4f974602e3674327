/**
 * Dubbing and subtitles against the emulator: the long-media polling (15 s growing to 60 s, with
 * fake timers), one and several target languages, both result shapes, dubbed files downloaded
 * and resumed, transcripts as text and as files, other formats (a task, or an answer at once),
 * bulk results, subtitle tasks, validation before any request.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { encodeFlac } from '../lib/audio/flac-encoder.js';
import type { RunningEmulator } from '../lib/emulator/server.js';
import { synthesizeSpeechPcm } from '../lib/emulator/synth.js';
import { ValidationError } from '../lib/errors.js';
import type { LocalizationClient } from '../lib/http/client.js';
import { parseDubbingResult } from '../lib/http/dubbing.js';
import { TaskFailedError } from '../lib/http/errors.js';
import type { TaskProgress } from '../lib/http/tasks.js';
import { KEY, clientFor, collect, control, emulator, logged, raw } from './http-test-helpers.js';

const SENTENCES = ['Hello, this is a test of live translation.', 'The weather is nice today.', 'Thank you for listening.'];
const MEDIA = 'https://media.example.com/talks/speech-en-24k.wav';

let emu: RunningEmulator;
let client: LocalizationClient;

beforeAll(async () => {
  emu = await emulator();
  client = clientFor(emu);
});

afterEach(() => {
  vi.useRealTimers();
});

afterAll(async () => {
  await client.close();
  await emu.close();
});

function dubbedFlac(tag: string): Buffer {
  return encodeFlac(synthesizeSpeechPcm(SENTENCES.map((s) => `[${tag}] ${s}`).join(' '), { sampleRate: 24_000 }), { sampleRate: 24_000, channels: 1 });
}

describe('dub', () => {
  it('one target language: the dubbed audio and the translated transcript', async () => {
    const result = await client.dub.run({ videoUrl: MEDIA, sourceLanguage: 'en-us', targetLanguage: 'es-es' });
    expect(result.outputs).toHaveLength(1);
    const output = result.outputs[0]!;
    expect(output).toMatchObject({ language: undefined, videoUrl: undefined });
    expect(output.segments.map((s) => s.text)).toEqual(SENTENCES.map((s) => `[es-es] ${s}`));
    expect(output.segments[0]).toMatchObject({ startMs: 320, endMs: 2620 });
    const audio = await collect((await fetch(output.audioUrl!)).body as unknown as AsyncIterable<Uint8Array>);
    expect(audio.equals(dubbedFlac('es-es'))).toBe(true);
  });

  it('several target languages: one output per language', async () => {
    const result = await client.dub.run({ videoUrl: MEDIA, sourceLanguage: 1, targetLanguages: ['fr-fr', 'de-de'] });
    expect(result.outputs.map((o) => o.language)).toEqual(['fr-fr', 'de-de']);
    expect(result.outputs[1]!.segments[2]!.text).toBe('[de-de] Thank you for listening.');
  });

  it('polls 15 s growing to 60 s (long media), with fake timers', async () => {
    // Answering as the service does: no word of its pace.
    const slow = await emulator({ taskPolls: 6, announce: false });
    const c = clientFor(slow, { polling: {} });
    try {
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
      const progress: TaskProgress[] = [];
      const done = c.dub.run({ videoUrl: MEDIA, sourceLanguage: 'en-us', targetLanguage: 'es-es' }, { onProgress: (p) => progress.push(p) });
      let settled = false;
      void done.finally(() => (settled = true)).catch(() => undefined);
      for (let i = 0; i < 400 && !settled; i++) await vi.advanceTimersByTimeAsync(1000);
      const result = await done;
      expect(result.outputs).toHaveLength(1);
      expect(progress.map((p) => p.status)).toEqual(['PENDING', 'PENDING', 'PENDING', 'PENDING', 'PENDING', 'PENDING', 'SUCCESS']);
      expect(progress.map((p) => p.nextPollInMs)).toEqual([22_500, 33_750, 50_625, 60_000, 60_000, 60_000, undefined]);
      // The first poll after 15 s, then each after the previous interval.
      expect(progress[0]!.elapsedMs).toBeGreaterThanOrEqual(15_000);
      expect(progress[0]!.elapsedMs).toBeLessThanOrEqual(16_000);
      expect(progress[6]!.elapsedMs - progress[5]!.elapsedMs).toBeGreaterThanOrEqual(60_000);
    } finally {
      vi.useRealTimers();
      await c.close();
      await slow.close();
    }
  });

  it('the interface paths answer too: /end-to-end-dubbing and /dubbed-run-info', async () => {
    const created = await raw(emu, 'POST', '/end-to-end-dubbing', { json: { video_url: MEDIA, source_language: 1, target_language: 54 } });
    expect(created.status).toBe(200);
    await raw(emu, 'GET', `/end-to-end-dubbing/${created.json.task_id}`);
    const status = await raw(emu, 'GET', `/dub/${created.json.task_id}`);
    expect(status.json.status).toBe('SUCCESS');
    const info = await raw(emu, 'GET', `/dubbed-run-info/${status.json.run_id}`);
    expect(info.json).toMatchObject({ run_id: status.json.run_id, video_url: null, transcript: expect.any(Array) });
  });

  it('a failed dubbing is TaskFailedError', async () => {
    await expect(client.dub.run({ videoUrl: 'https://e.com/[[ERROR]].mp4', sourceLanguage: 'en-us', targetLanguage: 'es-es' })).rejects.toBeInstanceOf(
      TaskFailedError,
    );
  });
});

describe('dubbed files', () => {
  it('download resumes after a cut, and an expired URL is looked up again', async () => {
    let now = 1_700_000_000_000;
    const timed = await emulator({ urlTtlS: 60, clock: () => now });
    const c = clientFor(timed);
    try {
      const result = await c.dub.run({ videoUrl: MEDIA, sourceLanguage: 'en-us', targetLanguages: ['es-es', 'it-it'] });
      await control(timed, 'POST', 'file-faults', { dropAfterBytes: 5000, count: 1 });
      const audio = await c.dub.openFile(result.runId, 'audio', { language: 'it-it' });
      const retries: string[] = [];
      audio.on('retry', (info) => retries.push(info.reason));
      const first = await collect(audio);
      expect(first.equals(dubbedFlac('it-it'))).toBe(true);
      expect(retries).toEqual(['interrupted']);
      now += 61_000;
      const again = await collect(await c.dub.openFile(result.runId, 'audio', { language: 'es-es' }));
      expect(again.equals(dubbedFlac('es-es'))).toBe(true);
      await expect(c.dub.openFile(result.runId, 'audio')).rejects.toBeInstanceOf(ValidationError);
      await expect(c.dub.openFile(result.runId, 'video', { language: 'es-es' })).rejects.toMatchObject({ code: 'RTT_PROTOCOL' });
    } finally {
      await c.close();
      await timed.close();
    }
  });
});

describe('transcripts of a run', () => {
  it('as text in SRT, WebVTT and plain text, in the source language and a target', async () => {
    const result = await client.dub.run({ videoUrl: MEDIA, sourceLanguage: 'en-us', targetLanguage: 'es-es' });
    const srt = await client.dub.getTranscript(result.runId, 'es-es', { format: 'srt' });
    expect(srt.text).toBe(
      '1\n00:00:00,320 --> 00:00:02,620\n[es-es] Hello, this is a test of live translation.\n\n' +
        '2\n00:00:03,820 --> 00:00:05,040\n[es-es] The weather is nice today.\n\n' +
        '3\n00:00:06,260 --> 00:00:07,340\n[es-es] Thank you for listening.\n',
    );
    const vtt = await client.dub.getTranscript(result.runId, 1, { format: 'vtt' });
    expect(vtt.text!.startsWith('WEBVTT\n\n00:00:00.320 --> 00:00:02.620\nHello, this is a test')).toBe(true);
    expect((await client.dub.getTranscript(result.runId, 'en-us')).text).toBe(`${SENTENCES.join('\n')}\n`);
  });

  it('as a presigned file', async () => {
    const result = await client.dub.run({ videoUrl: MEDIA, sourceLanguage: 'en-us', targetLanguage: 'es-es' });
    const file = await client.dub.getTranscript(result.runId, 'es-es', { format: 'txt', dataType: 'file' });
    expect(file.text).toBeUndefined();
    const body = await (await fetch(file.url!)).text();
    expect(body.split('\n')[0]).toBe('[es-es] Hello, this is a test of live translation.');
  });

  it('a language the run does not have is 404; a bad format is refused before sending', async () => {
    const result = await client.dub.run({ videoUrl: MEDIA, sourceLanguage: 'en-us', targetLanguage: 'es-es' });
    await expect(client.dub.getTranscript(result.runId, 'ja-jp')).rejects.toMatchObject({ status: 404 });
    await expect(client.dub.getTranscript(result.runId, 'es-es', { format: 'ass' as 'srt' })).rejects.toMatchObject({ field: 'format' });
  });
});

describe('other formats', () => {
  it('wav through a task; the file is the dubbed speech as WAV', async () => {
    const result = await client.dub.run({ videoUrl: MEDIA, sourceLanguage: 'en-us', targetLanguage: 'es-es' });
    const answer = await client.dub.altFormat.create({ runId: result.runId, language: 'es-es', format: 'wav' });
    expect(answer.kind).toBe('task');
    const converted = await client.dub.altFormat.run({ runId: result.runId, language: 'es-es', format: 'wav' });
    const wav = Buffer.from(await (await fetch(converted.url)).arrayBuffer());
    expect(wav.toString('latin1', 0, 4)).toBe('RIFF');
    expect(wav.subarray(44).equals(synthesizeSpeechPcm(SENTENCES.map((s) => `[es-es] ${s}`).join(' '), { sampleRate: 24_000 }))).toBe(true);
    expect(converted.runId).toBeGreaterThan(result.runId);
  });

  it('a conversion left to finish by itself: its result read by run id, without starting another', async () => {
    const result = await client.dub.run({ videoUrl: MEDIA, sourceLanguage: 'en-us', targetLanguage: 'es-es' });
    const answer = await client.dub.altFormat.create({ runId: result.runId, language: 'es-es', format: 'wav' });
    expect(answer.kind).toBe('task');
    const done = await client.tasks.wait('dub-alt-format', (answer as { taskId: string }).taskId);
    const url = await client.dub.altFormat.result(done.runId);
    const wav = Buffer.from(await (await fetch(url)).arrayBuffer());
    expect(wav.toString('latin1', 0, 4)).toBe('RIFF');
    expect(wav.subarray(44).equals(synthesizeSpeechPcm(SENTENCES.map((s) => `[es-es] ${s}`).join(' '), { sampleRate: 24_000 }))).toBe(true);
  });

  it('mp3 is made too; a format the emulator cannot make ends in ERROR saying so', async () => {
    const result = await client.dub.run({ videoUrl: MEDIA, sourceLanguage: 'en-us', targetLanguage: 'es-es' });
    const mp3 = await client.dub.altFormat.run({ runId: result.runId, language: 'es-es', format: 'mp3' });
    const bytes = Buffer.from(await (await fetch(mp3.url)).arrayBuffer());
    expect(bytes[0]).toBe(0xff);
    const error = await client.dub.altFormat.run({ runId: result.runId, language: 'es-es', format: 'mp4' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TaskFailedError);
    expect((error as TaskFailedError).taskMessage).toMatch(/mp4 \(video\) needs the service/);
    await expect(client.dub.altFormat.create({ runId: result.runId, language: 'es-es', format: 'ogg' as 'wav' })).rejects.toMatchObject({
      field: 'outputFormat',
    });
  });

  it('an answer with the URL at once is read as ready', () => {
    expect(
      parseDubbingResult({
        output_audio_url: 'https://a/x.mp3',
        output_video_url: 'https://a/x.mp4',
        transcript: [{ start: 0, end: 5000, text: 'Hi', speaker: 'S' }],
      }).outputs[0],
    ).toMatchObject({
      audioUrl: 'https://a/x.mp3',
      videoUrl: 'https://a/x.mp4',
      segments: [{ startMs: 0, endMs: 5000, text: 'Hi' }],
    });
  });
});

describe('bulk results', () => {
  it('parses the finished runs, leaves the others undefined', async () => {
    const a = await client.dub.run({ videoUrl: MEDIA, sourceLanguage: 'en-us', targetLanguage: 'es-es' });
    const b = await client.dub.run({ videoUrl: MEDIA, sourceLanguage: 'en-us', targetLanguages: ['fr-fr', 'ja-jp'] });
    const pending = await control(emu, 'POST', 'tasks', { kind: 'dub', apiKey: KEY, taskMs: 60_000 });
    const results = await client.dub.getResults([a.runId, b.runId, pending.run_id]);
    expect(results.get(a.runId)?.outputs).toHaveLength(1);
    expect(results.get(b.runId)?.outputs.map((o) => o.language)).toEqual(['fr-fr', 'ja-jp']);
    expect(results.get(pending.run_id)).toBeUndefined();
  });
});

describe('subtitles', () => {
  it('a subtitle task, then its SRT per language', async () => {
    const task = await client.tasks.subtitles.create({ mediaUrl: MEDIA, sourceLanguage: 'en-us', targetLanguages: ['de-de'] });
    const done = await client.tasks.subtitles.wait(task.taskId);
    expect((await client.dub.getTranscript(done.runId, 'de-de', { format: 'srt' })).text!.split('\n').slice(0, 3)).toEqual([
      '1',
      '00:00:00,320 --> 00:00:02,620',
      '[de-de] Hello, this is a test of live translation.',
    ]);
    await expect(client.tasks.subtitles.create({ mediaUrl: MEDIA, sourceLanguage: 'en-us', targetLanguages: ['xx-yy'] })).rejects.toMatchObject({
      status: 422,
    });
  });
});

describe('validation before any request', () => {
  it.each([
    [{ videoUrl: MEDIA, sourceLanguage: 'en-us' }, 'targetLanguages'],
    [{ videoUrl: 'not a url', sourceLanguage: 'en-us', targetLanguage: 'es-es' }, 'videoUrl'],
    [{ videoUrl: MEDIA, sourceLanguage: 'en-us', targetLanguages: [] }, 'targetLanguages'],
    [{ videoUrl: MEDIA, sourceLanguage: 'en-us', targetLanguage: 'es-es', selectedAudioTracks: [0, 1, 2] }, 'selectedAudioTracks'],
    [{ videoUrl: MEDIA, sourceLanguage: 'en-us', targetLanguage: 'zz-zz' }, 'targetLanguage'],
  ])('%j is refused at %s', async (request, field) => {
    await control(emu, 'DELETE', 'requests');
    const error = await client.dub.create(request as never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).field).toBe(field);
    expect(await logged(emu, 'POST', '/dub')).toEqual([]);
  });
});
