/**
 * Voices against the emulator: listing, cloning from a path, a Buffer and a Readable (multipart,
 * streamed), validation before any request, the service's 422, deletion, the text-to-voice flow,
 * a creation never re-sent after an ambiguous failure, and a cloned voice used at once by
 * `RealtimeTranslateStream({ voiceId })` on the same emulator, end to end.
 */
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { STOCK_VOICES } from '../lib/emulator/voices.js';
import { synthesizeFlac } from '../lib/emulator/synth.js';
import type { LocalizationClient } from '../lib/http/client.js';
import { HttpConnectionError, HttpForbiddenError, ServiceValidationError } from '../lib/http/errors.js';
import { ValidationError } from '../lib/errors.js';
import { RealtimeTranslateStream } from '../lib/realtime/realtime-translate-stream.js';
import { KEY, OTHER_KEY, VOICE_DESCRIPTION, clientFor, collect, control, sharedEmulator, logged } from './http-test-helpers.js';
import { expectedTranslation, loadSpeechFixture } from './helpers/speech.js';

const FIXTURE_PATH = fileURLToPath(new URL('./fixtures/speech-en-24k.wav', import.meta.url));
const fixture = loadSpeechFixture();

const env = sharedEmulator();

describe('listing and cloning', () => {
  it('lists the stock voices, typed in camelCase with the wire record in raw', async () => {
    const voices = await env.client.voices.list();
    expect(voices.map((v) => v.id)).toEqual(STOCK_VOICES.map((v) => v.id).sort((a, b) => a - b));
    expect(voices.find((v) => v.id === 147_320)).toMatchObject({
      id: 147_320,
      voiceName: 'Alice',
      gender: 2,
      age: 28,
      language: 1,
      isPublished: true,
      raw: { voice_name: 'Alice', is_published: true },
    });
  });

  it('clones from a path, a Buffer and a Readable; each new voice is listed for its key only', async () => {
    const fromPath = await env.client.voices.create({
      file: FIXTURE_PATH,
      voiceName: 'From a path',
      gender: 1,
      language: 'en-us',
      age: 40,
      enhanceAudio: true,
    });
    const fromBuffer = await env.client.voices.create({
      file: { data: fixture.wav, filename: 'me.wav' },
      voiceName: 'From a Buffer',
      gender: 2,
      description: 'calm',
    });
    const fromStream = await env.client.voices.create({
      file: { data: Readable.from([fixture.wav.subarray(0, 1000), fixture.wav.subarray(1000)]), filename: 'me.wav' },
      voiceName: 'From a stream',
      gender: 9,
    });
    const ids = [fromPath.voiceId, fromBuffer.voiceId, fromStream.voiceId];
    expect(new Set(ids).size).toBe(3);
    const mine = await env.client.voices.list();
    expect(mine.filter((v) => ids.includes(v.id))).toEqual([
      expect.objectContaining({ voiceName: 'From a path', gender: 1, age: 40, language: 1, isPublished: false }),
      expect.objectContaining({ voiceName: 'From a Buffer', gender: 2, description: 'calm' }),
      expect.objectContaining({ voiceName: 'From a stream', gender: 9 }),
    ]);
    const other = clientFor(env.emu, { apiKey: OTHER_KEY });
    try {
      expect((await other.voices.list()).some((v) => ids.includes(v.id))).toBe(false);
    } finally {
      await other.close();
    }
  });

  it('refuses bad input before any request, naming the field', async () => {
    await control(env.emu, 'DELETE', 'requests');
    const cases: Array<[Parameters<LocalizationClient['voices']['create']>[0], string]> = [
      [{ file: FIXTURE_PATH, voiceName: '', gender: 1 }, 'voiceName'],
      [{ file: FIXTURE_PATH, voiceName: 'x', gender: 3 as 1 }, 'gender'],
      [{ file: '/no/such/file.wav', voiceName: 'x', gender: 1 }, 'file'],
      [{ file: Buffer.alloc(0), voiceName: 'x', gender: 1 }, 'file'],
      [{ file: FIXTURE_PATH, voiceName: 'x', gender: 1, language: 'not a tag!' }, 'language'],
    ];
    for (const [request, field] of cases) {
      const error = await env.client.voices.create(request).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).field).toBe(field);
    }
    expect(await logged(env.emu, 'POST', '/create-custom-voice')).toEqual([]);
  });

  it('a language tag the service does not list is refused after the lookup, before the upload', async () => {
    const error = await env.client.voices.create({ file: FIXTURE_PATH, voiceName: 'x', gender: 1, language: 'xx-yy' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).field).toBe('language');
    expect((error as Error).message).toMatch(/language the service lists/);
    expect(await logged(env.emu, 'POST', '/create-custom-voice')).toEqual([]);
  });

  it("a reference that is not audio is the service's 422, naming the file field", async () => {
    const error = await env.client.voices
      .create({ file: { data: Buffer.from('just text'), filename: 'notes.txt' }, voiceName: 'x', gender: 1 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ServiceValidationError);
    expect(error).toMatchObject({ status: 422, field: 'file' });
  });

  it('a new voice can be deleted by its owner only, once', async () => {
    const { voiceId } = await env.client.voices.create({ file: fixture.wav, voiceName: 'Short-lived', gender: 1 });
    const other = clientFor(env.emu, { apiKey: OTHER_KEY });
    try {
      await expect(other.voices.delete(voiceId)).rejects.toBeInstanceOf(HttpForbiddenError);
    } finally {
      await other.close();
    }
    expect(await env.client.voices.delete(voiceId)).toEqual({ status: 'ok' });
    await expect(env.client.voices.delete(voiceId)).rejects.toBeInstanceOf(HttpForbiddenError);
    expect((await env.client.voices.list()).some((v) => v.id === voiceId)).toBe(false);
  });
});

describe('retries of a creation', () => {
  it('is not re-sent after the connection drops once the request may have been received', async () => {
    await control(env.emu, 'DELETE', 'requests');
    await control(env.emu, 'POST', 'faults', { dropAfterBytes: 0, count: 1, path: '/create-custom-voice' });
    const error = await env.client.voices.create({ file: fixture.wav, voiceName: 'Once', gender: 1 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HttpConnectionError);
    expect(await logged(env.emu, 'POST', '/create-custom-voice')).toHaveLength(1);
  });

  it('is re-sent after a 429 (the service did not act), from a path or a Buffer', async () => {
    await control(env.emu, 'DELETE', 'requests');
    await control(env.emu, 'POST', 'faults', { status: 429, count: 1, retryAfter: 0, path: '/create-custom-voice' });
    const created = await env.client.voices.create({ file: FIXTURE_PATH, voiceName: 'Twice', gender: 1 });
    expect(created.voiceId).toBeGreaterThan(0);
    expect((await logged(env.emu, 'POST', '/create-custom-voice')).map((r) => r.status)).toEqual([429, 200]);
  });

  it('a Readable already sent is never sent again, even after a 429', async () => {
    await control(env.emu, 'DELETE', 'requests');
    await control(env.emu, 'POST', 'faults', { status: 429, count: 1, retryAfter: 0, path: '/create-custom-voice' });
    const error = await env.client.voices.create({ file: Readable.from([fixture.wav]), voiceName: 'Stream', gender: 1 }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'RTT_RATE_LIMIT', status: 429 });
    expect(await logged(env.emu, 'POST', '/create-custom-voice')).toHaveLength(1);
  });
});

describe('text to voice', () => {
  it('creates, waits and returns preview URLs of FLAC speech', async () => {
    const result = await env.client.textToVoice.run({ text: 'A voice for the morning news.', voiceDescription: VOICE_DESCRIPTION });
    expect(result.previews).toHaveLength(3);
    const first = await collect((await fetch(result.previews[0]!)).body as unknown as AsyncIterable<Uint8Array>);
    expect(first.equals(synthesizeFlac('A voice for the morning news.', { sampleRate: 24_000, seed: 1 }))).toBe(true);
    expect(await env.client.textToVoice.status(result.taskId)).toMatchObject({ status: 'SUCCESS', runId: result.runId });
  });

  it('step by step: PENDING first; a failed task is TaskFailedError', async () => {
    const task = await env.client.textToVoice.create({ text: 'hello there', voiceDescription: VOICE_DESCRIPTION });
    expect((await env.client.textToVoice.status(task.taskId)).status).toBe('PENDING');
    expect((await env.client.textToVoice.status(task.taskId)).status).toBe('SUCCESS');
    await expect(env.client.textToVoice.run({ text: 'fail [[ERROR]]', voiceDescription: VOICE_DESCRIPTION })).rejects.toMatchObject({
      code: 'RTT_TASK_FAILED',
    });
  });
});

describe('a voice cloned over HTTP, used by the realtime stream', () => {
  it('is accepted for the key that created it, end to end', async () => {
    const { voiceId } = await env.client.voices.create({ file: FIXTURE_PATH, voiceName: 'Realtime', gender: 1, language: 'en-us' });
    const stream = new RealtimeTranslateStream({ from: 'en-us', to: 'es-es', apiKey: KEY, realtimeUrl: env.emu.realtimeUrl, voiceId, quietPeriodMs: 300 });
    const audio: Buffer[] = [];
    await pipeline(
      Readable.from([fixture.pcm]),
      stream,
      new Writable({
        write(chunk: Buffer, _encoding, callback) {
          audio.push(chunk);
          callback();
        },
      }),
    );
    expect(stream.session?.voice).toEqual({ type: 'cloned', voiceId: voiceId });
    expect(Buffer.concat(audio).equals(expectedTranslation(fixture.pcm, fixture.utterances))).toBe(true);
  });

  it('is rejected for another key, and after its deletion', async () => {
    const { voiceId } = await env.client.voices.create({ file: FIXTURE_PATH, voiceName: 'Mine only', gender: 1 });
    const run = (apiKey: string) =>
      pipeline(
        Readable.from([fixture.pcm.subarray(0, 48_000)]),
        new RealtimeTranslateStream({ from: 'en-us', to: 'es-es', apiKey, realtimeUrl: env.emu.realtimeUrl, voiceId, quietPeriodMs: 100 }),
        new Writable({ write: (_c, _e, cb) => cb() }),
      );
    await expect(run(OTHER_KEY)).rejects.toMatchObject({ code: 'RTT_VOICE_REJECTED' });
    await env.client.voices.delete(voiceId);
    await expect(run(KEY)).rejects.toMatchObject({ code: 'RTT_VOICE_REJECTED' });
  });
});
