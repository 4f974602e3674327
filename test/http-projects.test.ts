/**
 * Project-like results against the emulator: project setup status and results (single and the
 * bulk list), text to sound (WAV bytes, a presigned URL, bulk, cut downloads resumed), stories
 * (their narration resumed after cuts) and translated stories,
 * bulk TTS results, a single separation result, and the statuses of tasks started by the
 * service's own bots.
 */
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { separateTracks, synthesizeFlac, synthesizeSoundPcm } from '../lib/emulator/synth.js';
import { ValidationError } from '../lib/errors.js';
import { PaymentRequiredError } from '../lib/http/errors.js';
import { TASK_KINDS } from '../lib/http/task-kinds.js';
import { KEY, collect, control, sharedEmulator, logged, raw, retries } from './http-test-helpers.js';

const env = sharedEmulator();

describe('project setup', () => {
  it('status and result, in camelCase, with the languages as ids', async () => {
    const task = await env.client.projectSetup.create({
      mediaUrl: 'https://e.com/talk.mp4',
      sourceLanguage: 'en-us',
      targetLanguages: ['es-es', 'de-de'],
      projectName: 'Talk',
      folderId: 9,
    });
    expect((await env.client.projectSetup.status(task.taskId)).status).toBe('PENDING');
    const done = await env.client.tasks.wait('project-setup', task.taskId);
    const result = await env.client.projectSetup.result(done.runId);
    expect(result).toMatchObject({
      runId: done.runId,
      projectDetails: {
        projectName: 'Talk',
        sourceLanguage: 1,
        targetLanguages: [54, 31],
        folderId: 9,
        studioUrl: expect.stringContaining(String(done.runId)),
      },
      raw: { project_details: { project_name: 'Talk' } },
    });
    expect(Date.parse(result!.projectDetails.createdAt)).not.toBeNaN();
  });

  it('bulk results come as a list; runs without a result are undefined', async () => {
    const runs = [];
    for (const name of ['One', 'Two']) {
      const task = await env.client.projectSetup.create({
        mediaUrl: 'https://e.com/a.mp4',
        sourceLanguage: 'en-us',
        targetLanguages: ['fr-fr'],
        projectName: name,
      });
      runs.push((await env.client.tasks.wait('project-setup', task.taskId)).runId);
    }
    const results = await env.client.projectSetup.getResults([...runs, 999_999]);
    expect(runs.map((r) => results.get(r)?.projectDetails.projectName)).toEqual(['One', 'Two']);
    expect(results.has(999_999)).toBe(false);
  });
});

describe('text to sound', () => {
  it('the sound as WAV bytes, downloaded with the key, and as a presigned URL', async () => {
    const result = await env.client.textToAudio.run({ prompt: 'rain on a tin roof', duration: 1.5, audioType: 'sound' });
    const wav = await collect(result.audio);
    expect(wav.toString('latin1', 0, 4)).toBe('RIFF');
    expect(wav.subarray(44).equals(synthesizeSoundPcm('rain on a tin roof', 'sound', { sampleRate: 24_000, durationMs: 1500 }))).toBe(true);
    const viaUrl = await collect((await env.client.textToAudio.result(result.runId, { outputType: 'file_url' })).audio);
    expect(viaUrl.equals(wav)).toBe(true);
    expect((await env.client.textToAudio.status(result.taskId)).status).toBe('SUCCESS');
  });

  it('music is chords, not noise; bulk results give presigned URLs', async () => {
    const music = await env.client.textToAudio.run({ prompt: 'a calm piano', duration: 3, audioType: 'music' });
    const sound = await env.client.textToAudio.run({ prompt: 'a calm piano', duration: 3 });
    const [a, b] = [await collect(music.audio), await collect(sound.audio)];
    expect(a.equals(b)).toBe(false);
    const bulk = await env.client.textToAudio.getResults([music.runId, sound.runId]);
    expect((await collect((await fetch(bulk.get(music.runId)!.url)).body as unknown as AsyncIterable<Uint8Array>)).equals(a)).toBe(true);
  });

  it('a cut download resumes, with the key and through the presigned URL, to the same WAV bytes', async () => {
    const prompt = 'waves breaking on stones';
    const result = await env.client.textToAudio.run({ prompt, duration: 2 });
    const full = (await raw(env.emu, 'GET', `/text-to-sound-result/${result.runId}?output_type=raw_bytes`)).bytes;
    expect(full.length).toBe(44 + 2 * 24_000 * 2);
    expect(full.subarray(44).equals(synthesizeSoundPcm(prompt, 'sound', { sampleRate: 24_000, durationMs: 2000 }))).toBe(true);
    result.audio.destroy();

    // With the key: the result endpoint answers each attempt whole; the resumed one skips what arrived.
    await control(env.emu, 'DELETE', 'requests');
    await control(env.emu, 'POST', 'faults', { dropAfterBytes: 30_000, count: 1, path: '/text-to-sound-result/' });
    const viaKey = await env.client.textToAudio.result(result.runId);
    const keySeen = retries(viaKey.audio);
    expect((await collect(viaKey.audio)).equals(full)).toBe(true);
    expect(keySeen.map((r) => [r.reason, r.offset])).toEqual([['interrupted', 30_000]]);
    expect((await logged(env.emu, 'GET', '/text-to-sound-result/')).map((r) => r.status)).toEqual([0, 200]);

    // Through the presigned URL: the file store answers the rest with Range.
    await control(env.emu, 'DELETE', 'requests');
    await control(env.emu, 'POST', 'file-faults', { dropAfterBytes: 20_000, count: 1 });
    const viaUrl = await env.client.textToAudio.result(result.runId, { outputType: 'file_url' });
    const urlSeen = retries(viaUrl.audio);
    expect((await collect(viaUrl.audio)).equals(full)).toBe(true);
    expect(urlSeen.map((r) => [r.reason, r.offset])).toEqual([['interrupted', 20_000]]);
    expect((await logged(env.emu, 'GET', '/_files/')).map((r) => r.status)).toEqual([0, 206]);
  });

  it('refuses a duration past the limit and an unknown type before sending', async () => {
    await control(env.emu, 'DELETE', 'requests');
    await expect(env.client.textToAudio.create({ prompt: 'x', duration: 601 })).rejects.toMatchObject({ field: 'duration' });
    await expect(env.client.textToAudio.create({ prompt: 'x', audioType: 'speech' as 'sound' })).rejects.toMatchObject({ field: 'audioType' });
    await expect(env.client.textToAudio.create({ prompt: '' })).rejects.toMatchObject({ field: 'prompt' });
    expect(await logged(env.emu, 'POST', '/text-to-sound')).toEqual([]);
  });
});

describe('stories', () => {
  const DOCUMENT = 'Once upon a time there was a lighthouse. Its keeper sang every night! Did the ships hear him?';

  it('a story task from a document (a Readable), its narration and its transcript', async () => {
    const created = await env.client.story.create({
      file: { data: Readable.from([Buffer.from(DOCUMENT)]), filename: 'tale.txt' },
      sourceLanguage: 'en-us',
      title: 'The keeper',
    });
    expect(created.setup).toBeUndefined();
    const done = await env.client.tasks.wait('story', created.taskId!);
    const result = await env.client.story.result(done.runId, { includeTranscript: true });
    expect(result.segments?.map((s) => s.text)).toEqual([
      'Once upon a time there was a lighthouse.',
      'Its keeper sang every night!',
      'Did the ships hear him?',
    ]);
    expect(result.details).toMatchObject({ storyTitle: 'The keeper', sourceLanguage: 1 });
    expect(
      (await collect((await fetch(result.audioUrl!)).body as unknown as AsyncIterable<Uint8Array>)).equals(
        synthesizeFlac(result.segments!.map((s) => s.text).join(' '), { sampleRate: 24_000 }),
      ),
    ).toBe(true);
    expect((await env.client.story.result(done.runId)).segments).toBeUndefined();
  });

  it('a cut download of the narration resumes with Range to the same FLAC bytes', async () => {
    const setup = await env.client.story.setup({ file: { data: Buffer.from(DOCUMENT), filename: 'tale.txt' }, sourceLanguage: 'en-us' });
    const result = await env.client.story.result(setup.runId, { includeTranscript: true });
    const expected = synthesizeFlac(result.segments!.map((s) => s.text).join(' '), { sampleRate: 24_000 });
    await control(env.emu, 'DELETE', 'requests');
    await control(env.emu, 'POST', 'file-faults', { dropAfterBytes: 4000, count: 2 });
    const audio = await env.client.story.openAudio(setup.runId);
    const seen = retries(audio);
    const bytes = await collect(audio);
    expect(bytes.length).toBe(expected.length);
    expect(bytes.equals(expected)).toBe(true);
    // Each cut comes 4000 bytes into what that response serves: the second request asked for the rest.
    expect(seen.map((r) => [r.reason, r.offset])).toEqual([
      ['interrupted', 4000],
      ['interrupted', 8000],
    ]);
    expect((await logged(env.emu, 'GET', '/_files/')).map((r) => r.status)).toEqual([0, 0, 206]);
  });

  it('story-setup answers the story at once; a translation follows', async () => {
    const setup = await env.client.story.setup({ file: { data: Buffer.from(DOCUMENT), filename: 'tale.txt' }, sourceLanguage: 'en-us', description: 'A tale' });
    expect(setup.storyDetails).toMatchObject({ storyTitle: `Story ${setup.runId}`, storyDescription: 'A tale', sourceLanguage: 1, targetLanguages: [] });
    const translation = await env.client.translatedStory.create({ runId: setup.runId, targetLanguage: 'fr-fr' });
    expect(translation.message).toMatch(/started/);
    await expect(env.client.translatedStory.result(setup.runId, { targetLanguage: 'fr-fr' })).rejects.toMatchObject({ status: 404 });
    const done = await env.client.tasks.wait('translated-story', translation.taskId);
    for (const runId of [setup.runId, done.runId]) {
      const result = await env.client.translatedStory.result(runId, { ...{ includeTranscript: true }, targetLanguage: 'fr-fr' });
      expect(result.segments?.[0]?.text).toBe('[fr-fr] Once upon a time there was a lighthouse.');
      expect(result.details).toMatchObject({ targetLanguage: 76 });
    }
    await expect(env.client.translatedStory.result(setup.runId, { targetLanguage: 'de-de' })).rejects.toMatchObject({ status: 404 });
  });

  it('bulk results; the interface paths /create-story and /story-run answer too', async () => {
    const a = await env.client.story.setup({ file: { data: Buffer.from('First story.'), filename: 'a.txt' }, sourceLanguage: 'en-us' });
    const b = await env.client.story.setup({ file: { data: Buffer.from('Second story.'), filename: 'b.txt' }, sourceLanguage: 'en-us' });
    const results = await env.client.story.getResults([a.runId, b.runId, 424_242]);
    expect(results.get(a.runId)?.audioUrl).toMatch(/^http/);
    expect(results.get(424_242)).toBeUndefined();
    await expect(
      env.client.story
        .create({ file: { data: Buffer.from('No money. [[PAYMENT_REQUIRED]]'), filename: 'x.txt' }, sourceLanguage: 'en-us', title: '[[PAYMENT_REQUIRED]]' })
        .then((c) => env.client.tasks.wait('story', c.taskId!)),
    ).rejects.toBeInstanceOf(PaymentRequiredError);
  });

  it('refuses a story without a file before sending', async () => {
    await expect(env.client.story.create({ file: Buffer.alloc(0), sourceLanguage: 'en-us' })).rejects.toBeInstanceOf(ValidationError);
  });
});

describe('more results', () => {
  it("bulk TTS results give each run's presigned URL", async () => {
    const runs = [];
    for (const text of ['first speech', 'second speech']) {
      const task = await env.client.translatedTts.create({ text, sourceLanguage: 'en-us', targetLanguage: 'es-es' });
      runs.push((await env.client.translatedTts.wait(task.taskId)).runId);
    }
    const results = await env.client.textToSpeech.getResults([...runs, 31_337]);
    const bytes = await collect((await fetch(results.get(runs[1]!)!.url)).body as unknown as AsyncIterable<Uint8Array>);
    expect(bytes.equals(synthesizeFlac('[es-es] second speech', { sampleRate: 24_000 }))).toBe(true);
    expect(results.get(31_337)).toBeUndefined();
  });

  it('a single separation result gives both tracks', async () => {
    const seeded = await control(env.emu, 'POST', 'tasks', { kind: 'audio-separation', apiKey: KEY });
    const result = await env.client.audioSeparation.result(seeded.run_id);
    expect(result.ready).toBe(true);
    const foreground = await collect((await fetch(result.foregroundAudioUrl!)).body as unknown as AsyncIterable<Uint8Array>);
    expect(foreground.equals(separateTracks(seeded.task_id, { sampleRate: 24_000 }).foreground)).toBe(true);
  });

  it("every task kind has a status endpoint the client reads, the bots' ones included", async () => {
    for (const kind of TASK_KINDS) {
      const seeded = await control(env.emu, 'POST', 'tasks', { kind, apiKey: KEY, polls: 1 });
      expect((await env.client.tasks.status(kind, seeded.task_id)).status).toBe('PENDING');
      expect(await env.client.tasks.wait(kind, seeded.task_id)).toMatchObject({ runId: seeded.run_id });
    }
    await expect(env.client.tasks.status('nonsense' as 'dub', 'x')).rejects.toMatchObject({ field: 'kind' });
  });

  it.each([
    ['dub.discord', 'discord-dub', '/discord/dub/'],
    ['dub.twitter', 'twitter-dub', '/twitter/dub/'],
    ['textToSpeech.discord', 'discord-tts', '/discord/tts/'],
  ] as const)('%s reads the status of a %s task at %s{task_id}, and no other kind', async (method, kind, path) => {
    const seeded = await control(env.emu, 'POST', 'tasks', { kind, apiKey: KEY, polls: 1 });
    const other = await control(env.emu, 'POST', 'tasks', { kind: kind === 'discord-tts' ? 'discord-dub' : 'discord-tts', apiKey: KEY });
    await control(env.emu, 'DELETE', 'requests');
    const resource = method === 'dub.discord' ? env.client.dub.discord : method === 'dub.twitter' ? env.client.dub.twitter : env.client.textToSpeech.discord;
    expect(await resource.status(seeded.task_id)).toMatchObject({ status: 'PENDING', runId: null });
    expect(await resource.status(seeded.task_id)).toMatchObject({ status: 'SUCCESS', runId: seeded.run_id });
    await expect(resource.status(other.task_id)).rejects.toMatchObject({ status: 404 });
    expect((await logged(env.emu, 'GET', path)).map((r) => r.path)).toEqual([
      `${path}${seeded.task_id}`,
      `${path}${seeded.task_id}`,
      `${path}${other.task_id}`,
    ]);
  });
});
