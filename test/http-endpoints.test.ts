import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { request } from 'undici';
import type { RunningEmulator } from '../lib/emulator/server.js';
import { LocalizationClient } from '../lib/http/client.js';
import { separateTracks, synthesizeFlac } from '../lib/emulator/synth.js';
import { BillingError, ProtocolError, ValidationError } from '../lib/errors.js';
import { HttpForbiddenError, HttpStatusError, PaymentRequiredError, TaskFailedError, TaskTimeoutError } from '../lib/http/errors.js';
import { parseAudioSeparationResults } from '../lib/http/audio-separation.js';
import { pickFileUrl } from '../lib/http/endpoint-kit.js';
import type { TaskProgress } from '../lib/http/tasks.js';
import { KEY, OTHER_KEY, clientFor, collect, control, emulator } from './http-test-helpers.js';

const WAV = await readFile(new URL('./fixtures/speech-en-24k.wav', import.meta.url));

let emu: RunningEmulator;
let client: LocalizationClient;
/** The process warnings the library emits here, captured (and so not printed). */
const warnings: Array<{ message: string; type?: string; code?: string }> = [];

beforeAll(async () => {
  vi.spyOn(process, 'emitWarning').mockImplementation((message: string | Error, options?: unknown) => {
    warnings.push({ message: String(message), ...(options as { type?: string; code?: string }) });
  });
  emu = await emulator({ clonedVoices: { [KEY]: [5001, 5002], [OTHER_KEY]: [6001] } });
  client = clientFor(emu);
});

afterAll(async () => {
  vi.restoreAllMocks();
  await client.close();
  await emu.close();
});

async function download(url: string): Promise<{ status: number; bytes: Buffer }> {
  const response = await request(url);
  return { status: response.statusCode, bytes: Buffer.from(await response.body.arrayBuffer()) };
}

function warningsWith(code: string): typeof warnings {
  return warnings.filter((w) => w.code === code);
}

describe('translated TTS', () => {
  it('translateAndSpeak creates, polls with progress, and returns text and FLAC audio', async () => {
    const progress: TaskProgress[] = [];
    const result = await client.translatedTts.run(
      { text: 'Hello there, friend.', sourceLanguage: 'en-us', targetLanguage: 'ES-ES' },
      { onProgress: (p) => progress.push(p) },
    );
    expect(result.translatedText).toBe('[es-es] Hello there, friend.');
    expect(result.contentType).toBe('audio/flac');
    const audio = await collect(result.audio);
    expect(audio.equals(synthesizeFlac('[es-es] Hello there, friend.', { sampleRate: 24_000 }))).toBe(true);
    expect(progress.at(-1)?.status).toBe('SUCCESS');
    expect(progress.at(-1)?.response.runId).toBe(result.runId);
    expect(progress.every((p) => p.taskId === result.taskId)).toBe(true);
  });

  it('step by step: PENDING first, then SUCCESS with a run id, text and a presigned audio_url', async () => {
    const task = await client.translatedTts.create({ text: 'Good morning', sourceLanguage: 'en-us', targetLanguage: 'fr-fr', voiceId: 20_305 });
    expect(typeof task.taskId).toBe('string');
    const first = await client.translatedTts.status(task.taskId);
    expect(first).toMatchObject({ status: 'PENDING', runId: null, raw: { status: 'PENDING', run_id: null } });
    const done = await client.translatedTts.wait(task.taskId);
    expect(done.runId).toBeGreaterThan(0);
    expect((await client.translation.result(done.runId)).translatedText).toBe('[fr-fr] Good morning');
    const file = await client.textToSpeech.getResultUrl(done.runId);
    expect(Object.keys(file.raw)).toEqual(['audio_url']);
    const fetched = await download(file.url);
    expect(fetched.status).toBe(200);
    expect(fetched.bytes.equals(synthesizeFlac('[fr-fr] Good morning', { sampleRate: 24_000 }))).toBe(true);
  });

  it('a result of a run that is still pending answers 404 (HttpStatusError, not retryable)', async () => {
    const slow = await emulator({ taskMs: 60_000 });
    const c = clientFor(slow);
    try {
      const task = await c.translatedTts.create({ text: 'later', sourceLanguage: 'en-us', targetLanguage: 'de-de' });
      const { requests } = await control(slow, 'GET', 'requests');
      expect(requests.at(-1)).toMatchObject({ method: 'POST', path: '/translated-tts', status: 200 });
      const seeded = await control(slow, 'POST', 'tasks', { kind: 'translated-tts', apiKey: KEY });
      const error = await c.translation.result(seeded.run_id).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(HttpStatusError);
      expect(error).toMatchObject({ code: 'RTT_HTTP', status: 404, retryable: false });
      expect(task.taskId).not.toBe(seeded.task_id);
    } finally {
      await c.close();
      await slow.close();
    }
  });
});

describe('task outcomes', () => {
  const base = { sourceLanguage: 'en-us', targetLanguage: 'es-es' };

  it('ERROR ends in TaskFailedError with the message', async () => {
    const error = await client.translatedTts.run({ ...base, text: 'please fail [[ERROR]]' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TaskFailedError);
    expect(error).toMatchObject({ code: 'RTT_TASK_FAILED', retryable: true });
    expect((error as TaskFailedError).taskMessage).toMatch(/asked for it/);
  });

  it('ERROR with exception_reason only uses that reason', async () => {
    await control(emu, 'POST', 'task-outcomes', { status: 'ERROR', exception_reason: 'GPU on fire', kind: 'translated-tts' });
    const error = await client.translatedTts.run({ ...base, text: 'hello' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TaskFailedError);
    expect((error as TaskFailedError).taskMessage).toBe('GPU on fire');
    expect((error as Error).message).toContain('GPU on fire');
  });

  it('TIMEOUT ends in TaskTimeoutError', async () => {
    const error = await client.translatedTts.run({ ...base, text: 'too long [[TIMEOUT]]' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TaskTimeoutError);
    expect(error).toMatchObject({ code: 'RTT_TASK_TIMEOUT', retryable: false });
  });

  it('PAYMENT_REQUIRED ends in PaymentRequiredError', async () => {
    const error = await client.translatedTts.run({ ...base, text: 'no money [[PAYMENT_REQUIRED]]' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PaymentRequiredError);
    // One family for out of credits, whatever the transport: a realtime billing stop is a
    // BillingError too, so one catch handles them all.
    expect(error).toBeInstanceOf(BillingError);
    expect(error).toMatchObject({ code: 'RTT_BILLING', retryable: false });
  });

  it('a status the client does not know is a ProtocolError naming it', async () => {
    await control(emu, 'POST', 'task-outcomes', { status: 'EXPLODED', kind: 'translated-tts' });
    const error = await client.translatedTts.run({ ...base, text: 'hello' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProtocolError);
    expect((error as Error).message).toContain('"EXPLODED"');
  });
});

describe('legacy TTS (deprecated)', () => {
  it('creates, polls and fetches the audio as raw bytes and as output_url, warning once', async () => {
    const task = await client.textToSpeech.create({ text: 'Legacy speech', language: 'en-us' });
    const done = await client.textToSpeech.wait(task.taskId);
    const audio = await client.textToSpeech.result(done.runId);
    const bytes = await collect(audio.audio);
    const expected = synthesizeFlac('Legacy speech', { sampleRate: 24_000 });
    expect(bytes.equals(expected)).toBe(true);
    expect(audio.contentType).toBe('audio/flac');
    expect(audio.contentLength).toBe(expected.length);
    const file = await client.textToSpeech.getResultUrl(done.runId);
    expect(Object.keys(file.raw)).toEqual(['output_url']);
    expect((await download(file.url)).bytes.equals(expected)).toBe(true);
    await client.textToSpeech.create({ text: 'Again', language: 'en-us' });
    expect(warningsWith('RTT_DEP_ASYNC_TTS')).toHaveLength(1);
    expect(warningsWith('RTT_DEP_ASYNC_TTS')[0]).toEqual({
      type: 'DeprecationWarning',
      code: 'RTT_DEP_ASYNC_TTS',
      message: 'The asynchronous POST /tts flow is deprecated by the service; use TtsStreamReadable (POST /tts-stream).',
    });
  });
});

describe('project setup', () => {
  it('creates a task from a media URL; numeric language ids pass with one deprecation warning', async () => {
    const task = await client.projectSetup.create({
      mediaUrl: 'https://media.example.com/talk.mp4',
      sourceLanguage: 1,
      targetLanguages: [54, 'es-es'],
      projectName: 'Talk',
      selectedAudioTracks: [0, 1],
      folderId: 3,
      chosenDictionaries: [9],
    });
    expect(task.taskId).toMatch(/^[0-9a-f-]{36}$/);
    expect(warningsWith('RTT_DEP_NUMERIC_LANGUAGE')).toHaveLength(1);
    await client.projectSetup.create({ mediaUrl: 'http://media.example.com/a.mxf', sourceLanguage: 31, targetLanguages: ['en-us'] });
    expect(warningsWith('RTT_DEP_NUMERIC_LANGUAGE')).toHaveLength(1);
  });

  it('refuses a relative media_url before sending', async () => {
    await expect(client.projectSetup.create({ mediaUrl: '/talk.mp4', sourceLanguage: 'en-us', targetLanguages: ['es-es'] })).rejects.toMatchObject({
      code: 'RTT_VALIDATION',
      field: 'mediaUrl',
    });
  });
});

describe('subtitle status', () => {
  it('polls GET /sub/{task_id} to SUCCESS with the long-media profile', async () => {
    const seeded = await control(emu, 'POST', 'tasks', { kind: 'sub', apiKey: KEY, polls: 1 });
    expect((await client.tasks.subtitles.status(seeded.task_id)).status).toBe('PENDING');
    const done = await client.tasks.subtitles.wait(seeded.task_id);
    expect(done.runId).toBe(seeded.run_id);
  });

  it("another key's subtitle task answers 403", async () => {
    const seeded = await control(emu, 'POST', 'tasks', { kind: 'sub', apiKey: OTHER_KEY });
    await expect(client.tasks.subtitles.status(seeded.task_id)).rejects.toBeInstanceOf(HttpForbiddenError);
  });
});

describe('audio separation', () => {
  it('uploads, waits, and reads mixed per-run outcomes from the bulk endpoint', async () => {
    const done = await client.audioSeparation.run({ mediaFile: { data: new Blob([WAV]), filename: 'speech.wav' } });
    const pending = await control(emu, 'POST', 'tasks', { kind: 'audio-separation', apiKey: KEY, taskMs: 60_000 });
    const failed = await control(emu, 'POST', 'tasks', { kind: 'audio-separation', apiKey: KEY, taskMs: 0, status: 'ERROR', message: 'unreadable audio' });
    const foreign = await control(emu, 'POST', 'tasks', { kind: 'audio-separation', apiKey: OTHER_KEY, taskMs: 0 });
    const ids = [done.runId, pending.run_id, failed.run_id, foreign.run_id, 999_999];
    const results = await client.audioSeparation.getResults(ids);
    expect([...results.keys()]).toEqual(ids);

    const ok = results.get(done.runId)!;
    expect(ok).toMatchObject({ ready: true, status: 'SUCCESS', error: undefined });
    const tracks = separateTracks('speech.wav', { sampleRate: 24_000 });
    expect((await download(ok.foregroundAudioUrl!)).bytes.equals(tracks.foreground)).toBe(true);
    expect((await download(ok.backgroundAudioUrl!)).bytes.equals(tracks.background)).toBe(true);

    expect(results.get(pending.run_id)).toMatchObject({ ready: false, status: 'PENDING', foregroundAudioUrl: undefined });
    expect(results.get(pending.run_id)!.error).toMatch(/not finished/);
    expect(results.get(failed.run_id)).toMatchObject({ ready: false, status: 'ERROR', error: 'unreadable audio' });
    expect(results.get(foreign.run_id)).toMatchObject({ ready: false, status: 'ERROR' });
    expect(results.get(999_999)).toMatchObject({ ready: false, status: 'ERROR' });
    expect(results.get(999_999)!.error).toMatch(/does not exist/);
  });

  it('a failed separation task ends in TaskFailedError with its message', async () => {
    await control(emu, 'POST', 'task-outcomes', { status: 'ERROR', message: 'unreadable audio', kind: 'audio-separation' });
    const error = await client.audioSeparation.run({ mediaFile: { data: WAV, filename: 'bad.wav' } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TaskFailedError);
    expect((error as TaskFailedError).taskMessage).toBe('unreadable audio');
    const task = await client.audioSeparation.create({ mediaFile: { data: WAV, filename: 'good.wav' } });
    expect((await client.audioSeparation.status(task.taskId)).status).toBe('PENDING');
  });

  it('refuses an upload that is not audio (422 from the service)', async () => {
    await expect(client.audioSeparation.create({ mediaFile: { data: Buffer.from('plain text, not audio'), filename: 'a.txt' } })).rejects.toMatchObject({
      code: 'RTT_VALIDATION',
      status: 422,
      field: 'mediaFile',
    });
  });

  it('refuses run_ids outside 2..5 unique positive integers before sending', async () => {
    for (const ids of [[1], [1, 2, 3, 4, 5, 6], [1, 1], [0, 2], [1.5, 2]]) {
      await expect(client.audioSeparation.getResults(ids)).rejects.toBeInstanceOf(ValidationError);
    }
  });
});

describe('presigned URLs', () => {
  it('expire after urlTtlS (403), and a new request gives a fresh one', async () => {
    let now = 1_700_000_000_000;
    const timed = await emulator({ taskMs: 0, urlTtlS: 60, clock: () => now });
    const c = clientFor(timed);
    try {
      const task = await c.translatedTts.create({ text: 'expiring', sourceLanguage: 'en-us', targetLanguage: 'es-es' });
      const done = await c.translatedTts.wait(task.taskId);
      const first = await c.textToSpeech.getResultUrl(done.runId);
      expect((await download(first.url)).status).toBe(200);
      now += 61_000;
      expect((await download(first.url)).status).toBe(403);
      const fresh = await c.textToSpeech.getResultUrl(done.runId);
      expect(fresh.url).not.toBe(first.url);
      const again = await download(fresh.url);
      expect(again.status).toBe(200);
      expect(again.bytes.subarray(0, 4).toString('latin1')).toBe('fLaC');
    } finally {
      await c.close();
      await timed.close();
    }
  });
});

describe('voices', () => {
  it("deletes the key's own voice once; another key's voice or a deleted one is 403", async () => {
    expect(await client.voices.delete(5001)).toEqual({ status: 'ok' });
    const again = await client.voices.delete(5001).catch((e: unknown) => e);
    expect(again).toBeInstanceOf(HttpForbiddenError);
    const foreign = await client.voices.delete(6001).catch((e: unknown) => e);
    expect(foreign).toBeInstanceOf(HttpForbiddenError);
    expect(foreign).toMatchObject({ code: 'RTT_FORBIDDEN', status: 403, retryable: false, method: 'DELETE', path: '/delete-voice/6001' });
    expect((foreign as HttpForbiddenError).serverMessage).toMatch(/only your own voices/);
    const other = new LocalizationClient({ baseUrl: emu.baseUrl, apiKey: OTHER_KEY, retry: false });
    try {
      expect(await other.voices.delete(6001)).toEqual({ status: 'ok' });
    } finally {
      await other.close();
    }
  });

  it('refuses a voice id that is not a positive integer before sending', async () => {
    await expect(client.voices.delete(-1)).rejects.toMatchObject({ code: 'RTT_VALIDATION', field: 'voiceId' });
  });
});

describe('answer parsing', () => {
  it('separation results: keys become integers, absent and extra fields are tolerated', () => {
    const runs = parseAudioSeparationResults({
      '12': { foreground_audio_url: 'https://f/1.flac', background_audio_url: 'https://f/2.flac', extra: true },
      '13': {},
      ' 14 ': { status: 'ERROR', message: 'failed' },
      weird: { run_id: 15, status: 'PENDING' },
      nothing: 'x',
    });
    expect([...runs.keys()]).toEqual([12, 13, 14, 15]);
    expect(runs.get(12)).toMatchObject({ ready: true, foregroundAudioUrl: 'https://f/1.flac', raw: { extra: true } });
    expect(runs.get(13)).toMatchObject({ ready: false, status: undefined, error: undefined });
    expect(runs.get(14)).toMatchObject({ status: 'ERROR', error: 'failed' });
    expect(runs.get(15)).toMatchObject({ status: 'PENDING' });
  });

  it('file_url answers: output_url or audio_url', () => {
    expect(pickFileUrl({ output_url: 'https://a' }, 1)).toBe('https://a');
    expect(pickFileUrl({ audio_url: 'https://b' }, 1)).toBe('https://b');
    expect(() => pickFileUrl({ link: 'https://c' }, 7)).toThrow(/run 7/);
  });
});
