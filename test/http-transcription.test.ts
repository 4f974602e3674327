/**
 * Transcription against the emulator: uploads from a path, a Buffer and a Readable, a media URL,
 * word timings, bulk results, SRT of a result, validation before any request, every status.
 */
import { readFile } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../lib/errors.js';
import { PaymentRequiredError, ServiceValidationError, TaskFailedError } from '../lib/http/errors.js';
import { renderTranscript } from '../lib/http/transcript.js';
import { KEY, control, sharedEmulator, logged, raw } from './http-test-helpers.js';

const FIXTURE_PATH = fileURLToPath(new URL('./fixtures/speech-en-24k.wav', import.meta.url));
const SAMPLE_PATH = fileURLToPath(new URL('../examples/assets/sample-en.wav', import.meta.url));
const WAV = await readFile(FIXTURE_PATH);
const SENTENCES = ['Hello, this is a test of live translation.', 'The weather is nice today.', 'Thank you for listening.'];

const env = sharedEmulator();

describe('transcribe', () => {
  it("a file path: the recording's sentences at their times, in milliseconds", async () => {
    const result = await env.client.transcription.run({ language: 'en-us', mediaFile: FIXTURE_PATH });
    expect(result.segments.map((s) => s.text)).toEqual(SENTENCES);
    expect(result.segments.map((s) => [s.startMs, s.endMs])).toEqual([
      [320, 2620],
      [3820, 5040],
      [6260, 7340],
    ]);
    expect(result.segments[0]).toMatchObject({ speaker: 'SPEAKER_0', words: undefined });
  });

  it('a Buffer and a Readable give the same transcript; word timings on request cover each segment', async () => {
    const fromBuffer = await env.client.transcription.run({ language: 1, mediaFile: { data: WAV, filename: 'talk.wav' } }, { wordLevelTimestamps: true });
    const fromStream = await env.client.transcription.run({
      language: 1,
      mediaFile: { data: Readable.from([WAV.subarray(0, 7), WAV.subarray(7)]), filename: 'talk.wav' },
      transcriptionMode: 'slow',
    });
    expect(fromStream.segments.map((s) => s.text)).toEqual(SENTENCES);
    const first = fromBuffer.segments[0]!;
    expect(first.words?.map((w) => w.word)).toEqual(['Hello,', 'this', 'is', 'a', 'test', 'of', 'live', 'translation.']);
    expect(first.words![0]!.startMs).toBe(first.startMs);
    expect(first.words!.at(-1)!.endMs).toBe(first.endMs);
    for (const [a, b] of first.words!.slice(1).map((w, i) => [first.words![i]!, w] as const)) expect(b.startMs).toBe(a.endMs);
    expect(first.words!.every((w) => w.confidence! > 0.8 && w.confidence! <= 1)).toBe(true);
  });

  it('a media URL: the service fetches it (the emulator knows its sample by name)', async () => {
    const result = await env.client.transcription.run({ language: 'en-us', mediaUrl: 'https://media.example.com/audio/sample-en.wav' });
    expect(result.segments.map((s) => s.text)).toEqual([
      'Good morning. I would like to book a table for two people tonight.',
      'Is there anything available at eight?',
    ]);
    const unknown = await env.client.transcription.run({ language: 'en-us', mediaUrl: 'https://media.example.com/meeting.mp3' });
    expect(unknown.segments.map((s) => s.text)).toEqual(['Transcript of meeting.mp3.']);
  });

  it('speech the emulator does not know is segmented by voice activity', async () => {
    const silence = Buffer.alloc(24_000);
    const tone = Buffer.alloc(48_000);
    for (let i = 0; i < 24_000; i++) tone.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * 220 * i) / 24_000)), i * 2);
    const pcm = Buffer.concat([silence, tone, silence, silence, tone]);
    const wav = Buffer.concat([WAV.subarray(0, 44), pcm]);
    wav.writeUInt32LE(wav.length - 8, 4);
    wav.writeUInt32LE(pcm.length, 40);
    const result = await env.client.transcription.run({ language: 'en-us', mediaFile: { data: wav, filename: 'tones.wav' } });
    expect(result.segments.map((s) => [s.text, s.startMs, s.endMs])).toEqual([
      ['Speech segment 1.', 500, 1500],
      ['Speech segment 2.', 2500, 3500],
    ]);
  });

  it('renders as SubRip', async () => {
    const result = await env.client.transcription.run({ language: 'en-us', mediaFile: SAMPLE_PATH });
    expect(renderTranscript(result.segments, 'srt')).toBe(
      '1\n00:00:00,300 --> 00:00:03,600\nGood morning. I would like to book a table for two people tonight.\n\n' +
        '2\n00:00:04,400 --> 00:00:05,960\nIs there anything available at eight?\n',
    );
  });

  it('step by step, and the interface path /transcription answered too', async () => {
    const task = await env.client.transcription.create({ language: 'en-us', mediaUrl: 'https://e.com/speech-en-24k.wav', projectName: 'Talk' });
    expect((await env.client.transcription.status(task.taskId)).status).toBe('PENDING');
    expect((await raw(env.emu, 'GET', `/transcription/${task.taskId}`)).json.status).toBe('SUCCESS');
    const done = await env.client.tasks.wait('transcription', task.taskId);
    const result = await env.client.transcription.result(done.runId);
    expect(result.raw).toMatchObject({ transcript: expect.any(Array) });
    expect(result.segments).toHaveLength(3);
  });

  it('bulk results: finished runs parsed, others undefined', async () => {
    const a = await env.client.transcription.run({ language: 'en-us', mediaUrl: 'https://e.com/speech-en-24k.wav' });
    const b = await env.client.transcription.run({ language: 'en-us', mediaUrl: 'https://e.com/sample-en.wav' });
    const pending = await control(env.emu, 'POST', 'tasks', { kind: 'transcription', apiKey: KEY, taskMs: 60_000 });
    const results = await env.client.transcription.getResults([a.runId, b.runId, pending.run_id]);
    expect(results.get(a.runId)?.segments).toHaveLength(3);
    expect(results.get(b.runId)?.segments).toHaveLength(2);
    expect(results.get(pending.run_id)).toBeUndefined();
  });

  it.each([
    ['[[ERROR]]', TaskFailedError],
    ['[[PAYMENT_REQUIRED]]', PaymentRequiredError],
  ])('a task ending with %s rejects with its error', async (marker, type) => {
    await expect(env.client.transcription.run({ language: 'en-us', mediaUrl: `https://e.com/${marker}.mp3` })).rejects.toBeInstanceOf(type);
  });
});

describe('validation before any request', () => {
  it.each([
    [{ language: 'en-us' }, 'mediaFile'],
    [{ language: 'en-us', mediaFile: FIXTURE_PATH, mediaUrl: 'https://e.com/a.wav' }, 'mediaFile'],
    [{ language: 'en-us', mediaUrl: 'ftp://e.com/a.wav' }, 'mediaUrl'],
    [{ language: 'en-us', mediaFile: FIXTURE_PATH, transcriptionMode: 'quick' }, 'transcriptionMode'],
    [{ language: 'en-us', mediaFile: '/nowhere.wav' }, 'mediaFile'],
    [{ language: '', mediaFile: FIXTURE_PATH }, 'language'],
  ])('%j is refused at %s', async (request, field) => {
    await control(env.emu, 'DELETE', 'requests');
    const error = await env.client.transcription.create(request as never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).field).toBe(field);
    expect(await logged(env.emu, 'POST', '/transcribe')).toEqual([]);
  });

  it('the service refuses a multipart body without media (422)', async () => {
    const body = '--b\r\nContent-Disposition: form-data; name="language"\r\n\r\n1\r\n--b--\r\n';
    const answer = await raw(env.emu, 'POST', '/transcribe', { body, headers: { 'content-type': 'multipart/form-data; boundary=b' } });
    expect(answer.status).toBe(422);
    expect(answer.json.detail[0].loc).toEqual(['body', 'media_file']);
    await expect(env.client.transcription.create({ language: 99_999, mediaUrl: 'https://e.com/a.wav' })).rejects.toBeInstanceOf(ServiceValidationError);
  });
});
