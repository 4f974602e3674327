/**
 * An emulator that remembers (`stateDir`): what one emulator made (custom voices, tasks and runs,
 * result files) is known to the next one on the same directory and to one running beside it;
 * run and voice ids never repeat, even when two emulators make them at once; result files past
 * `stateMaxBytes` go, the oldest first; owners are kept as hashes, so no API key is ever written.
 * Real emulators on loopback, real files in a temporary directory.
 */
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startEmulator, type EmulatorOptions, type RunningEmulator } from '../lib/emulator/server.js';
import { LocalizationClient } from '../lib/http/client.js';
import { RealtimeTranslateStream } from '../lib/realtime/realtime-translate-stream.js';
import { StateDir, type Records } from '../lib/emulator/state-store.js';
import { TaskStore } from '../lib/emulator/http/task-store.js';
import { VoiceRegistry, type StoredVoice } from '../lib/emulator/voices.js';
import { VoiceRejectedError } from '../lib/errors.js';

const KEY = 'sk-state-test-6f1d0b9a2c';
const OTHER = 'sk-state-other-3e8a7c51';
const WAV = new URL('./fixtures/speech-en-24k.wav', import.meta.url);

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function stateDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'rt-translate-emulator-state-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** An emulator on `dir` whose tasks are final at their second status read, and a client of `key` on it. */
async function emulatorOn(dir: string, key = KEY, options: EmulatorOptions = {}): Promise<{ emu: RunningEmulator; client: LocalizationClient }> {
  const emu = await startEmulator({ stateDir: dir, apiKeys: [KEY, OTHER], taskMs: 0, taskPolls: 1, ...options });
  const client = new LocalizationClient({
    baseUrl: emu.baseUrl,
    apiKey: key,
    polling: { speech: { initialIntervalMs: 5 }, longMedia: { initialIntervalMs: 5 } },
  });
  cleanups.push(async () => {
    await client.close();
    await emu.close();
  });
  return { emu, client };
}

/** Every file under `dir`, relative. */
async function filesUnder(dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true, withFileTypes: true })).filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name).slice(dir.length + 1));
}

/** Opens a realtime session with `voiceId` and resolves once it is created, or rejects with the stream's error. */
function sessionWithVoice(emu: RunningEmulator, key: string, voiceId: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const stream = new RealtimeTranslateStream({ from: 'en-us', to: 'es-es', voiceId, apiKey: key, realtimeUrl: emu.realtimeUrl, reconnect: false });
    stream.once('session.created', () => {
      stream.destroy();
      resolve();
    });
    stream.once('error', reject);
    stream.resume();
  });
}

describe('what one emulator made, the next on the same state directory knows', () => {
  it('custom voices (HTTP and realtime), tasks, runs and result files', async () => {
    const dir = await stateDir();
    const first = await emulatorOn(dir);
    const { voiceId } = await first.client.voices.create({ file: WAV.pathname, voiceName: 'Me', gender: 1 });
    const dubbed = await first.client.dub.run({ videoUrl: 'https://example.com/talk.mp4', sourceLanguage: 'en-us', targetLanguage: 'es-es' });
    const firstUrl = dubbed.outputs[0]!.audioUrl!;
    const firstBytes = Buffer.from(await (await request(firstUrl)).body.arrayBuffer());
    await first.client.close();
    await first.emu.close();

    const second = await emulatorOn(dir);
    expect((await second.client.voices.list()).map((v) => v.id)).toContain(voiceId);
    await sessionWithVoice(second.emu, KEY, voiceId);
    // The run of the first emulator, its result file the same bytes under the new address.
    const again = await second.client.dub.result(dubbed.runId);
    const url = again.outputs[0]!.audioUrl!;
    expect(new URL(url).pathname).toBe(new URL(firstUrl).pathname);
    expect(new URL(url).origin).toBe(second.emu.baseUrl);
    expect(Buffer.from(await (await request(url)).body.arrayBuffer()).equals(firstBytes)).toBe(true);
    expect((await readFile(second.emu.localFilePath(url)!)).equals(firstBytes)).toBe(true);
    // A new run goes on from the last one.
    const next = await second.client.translation.create({ texts: ['Hello'], sourceLanguage: 'en-us', targetLanguage: 'es-es' });
    expect((await second.client.tasks.wait('translation', next.taskId)).runId).toBe(dubbed.runId + 1);
    // Deleted here, gone for the next one, on both sides.
    await second.client.voices.delete(voiceId);
    const third = await emulatorOn(dir);
    expect((await third.client.voices.list()).map((v) => v.id)).not.toContain(voiceId);
    await expect(sessionWithVoice(third.emu, KEY, voiceId)).rejects.toBeInstanceOf(VoiceRejectedError);
  });

  it("another key's voices and tasks stay another key's", async () => {
    const dir = await stateDir();
    const mine = await emulatorOn(dir, KEY);
    const { voiceId } = await mine.client.voices.create({ file: WAV.pathname, voiceName: 'Mine', gender: 2 });
    const task = await mine.client.translation.create({ texts: ['Hi'], sourceLanguage: 'en-us', targetLanguage: 'de-de' });
    const theirs = await emulatorOn(dir, OTHER);
    expect((await theirs.client.voices.list()).map((v) => v.id)).not.toContain(voiceId);
    await expect(theirs.client.voices.delete(voiceId)).rejects.toMatchObject({ status: 403 });
    await expect(theirs.client.translation.status(task.taskId)).rejects.toMatchObject({ status: 403 });
    await expect(sessionWithVoice(theirs.emu, OTHER, voiceId)).rejects.toBeInstanceOf(VoiceRejectedError);
  });

  it('an emulator without a state directory remembers nothing', async () => {
    const first = await startEmulator({ apiKeys: [KEY], taskMs: 0 });
    const client = new LocalizationClient({ baseUrl: first.baseUrl, apiKey: KEY });
    const { voiceId } = await client.voices.create({ file: WAV.pathname, voiceName: 'Gone', gender: 1 });
    await client.close();
    await first.close();
    const second = await startEmulator({ apiKeys: [KEY] });
    const other = new LocalizationClient({ baseUrl: second.baseUrl, apiKey: KEY });
    try {
      expect((await other.voices.list()).map((v) => v.id)).not.toContain(voiceId);
      expect(second.stateDir).toBeUndefined();
    } finally {
      await other.close();
      await second.close();
    }
  });
});

describe('two emulators on one state directory at once', () => {
  it('never give out the same run id or voice id, and each knows what the other made', async () => {
    const dir = await stateDir();
    const [a, b] = await Promise.all([emulatorOn(dir), emulatorOn(dir)]);
    const make = (c: LocalizationClient, i: number) => c.translation.create({ texts: [`Text ${i}`], sourceLanguage: 'en-us', targetLanguage: 'es-es' });
    const created = await Promise.all(Array.from({ length: 20 }, (_, i) => make(i % 2 === 0 ? a.client : b.client, i)));
    const runs = await Promise.all(created.map((t, i) => (i % 2 === 0 ? b.client : a.client).tasks.wait('translation', t.taskId)));
    const runIds = runs.map((r) => r.runId);
    expect(new Set(runIds).size).toBe(20);
    expect(Math.min(...runIds)).toBe(1001);
    expect(Math.max(...runIds)).toBe(1020);
    const voices = await Promise.all(
      Array.from({ length: 6 }, (_, i) => (i % 2 === 0 ? a : b).client.voices.create({ file: WAV.pathname, voiceName: `V${i}`, gender: 1 })),
    );
    expect(new Set(voices.map((v) => v.voiceId)).size).toBe(6);
    // Every record whole: no temporary file left behind.
    expect((await filesUnder(dir)).filter((f) => f.includes('.tmp-'))).toEqual([]);
  });
});

describe('an id another emulator claimed after this one looked is skipped, never taken twice', () => {
  /** `records` as an emulator sees them just before another one claims: the names of a moment ago. */
  function staleNames<T>(records: Records<T>): Records<T> {
    return { ...records, names: () => [] };
  }

  it('a run id', async () => {
    const state = new StateDir(await stateDir());
    const runs = state.records<{ task_id: string }>('runs');
    expect(runs.claim('1001', { task_id: 'made-by-another-emulator' })).toBe(true);
    expect(runs.claim('1001', { task_id: 'too-late' })).toBe(false);
    const tasks = new TaskStore(0, Date.now, 10_000, 0, { tasks: state.records('tasks'), runs: staleNames(runs) });
    const task = tasks.create('translation', KEY, { texts: ['Hello'] });
    expect(task.runId).toBe(1002);
    expect(runs.get('1001')).toEqual({ task_id: 'made-by-another-emulator' });
    expect(runs.get('1002')).toEqual({ task_id: task.id });
  });

  it('a voice id', async () => {
    const state = new StateDir(await stateDir());
    const made = state.records<StoredVoice>('voices');
    const theirs = new VoiceRegistry({}, made).add(OTHER, {
      voice_name: 'Theirs',
      gender: 1,
      age: null,
      language: null,
      description: null,
      is_published: false,
      transcript: null,
    });
    const mine = new VoiceRegistry({}, staleNames(made)).add(KEY, {
      voice_name: 'Mine',
      gender: 2,
      age: null,
      language: null,
      description: null,
      is_published: false,
      transcript: null,
    });
    expect([theirs.id, mine.id]).toEqual([300_001, 300_002]);
    expect(made.get('300001')?.voice_name).toBe('Theirs');
  });
});

describe('result files past stateMaxBytes', () => {
  it('go, the oldest first; the one just stored stays even when it alone is past the cap', async () => {
    const dir = await stateDir();
    const { emu, client } = await emulatorOn(dir, KEY, { stateMaxBytes: 0 });
    const sizes: number[] = [];
    const urls: string[] = [];
    for (const text of ['One short line.', 'A second line, a little longer than the first.', 'Three.']) {
      const run = await client.tasks.wait(
        'translated-tts',
        (await client.translatedTts.create({ text, sourceLanguage: 'en-us', targetLanguage: 'es-es' })).taskId,
      );
      const { url } = await client.textToSpeech.getResultUrl(run.runId);
      urls.push(url);
      sizes.push((await readFile(emu.localFilePath(url)!)).length);
      // Only the newest is kept: a cap of 0 bytes.
      expect(urls.map((u) => emu.localFilePath(u) !== undefined)).toEqual(urls.map((_, i) => i === urls.length - 1));
    }
    const gone = await request(urls[0]!);
    expect(gone.statusCode).toBe(404);
    await gone.body.dump();
    expect(sizes.every((n) => n > 100)).toBe(true);
  });

  it('a cap of two files: storing a third removes the first', async () => {
    const dir = await stateDir();
    const probe = await emulatorOn(await stateDir());
    const sized = async (c: LocalizationClient, e: RunningEmulator, text: string): Promise<{ url: string; size: number }> => {
      const run = await c.tasks.wait('translated-tts', (await c.translatedTts.create({ text, sourceLanguage: 'en-us', targetLanguage: 'es-es' })).taskId);
      const { url } = await c.textToSpeech.getResultUrl(run.runId);
      return { url, size: (await readFile(e.localFilePath(url)!)).length };
    };
    // The same texts make the same files: their sizes, measured without a cap.
    const texts = ['First of three.', 'Second of three.', 'Third of three.'];
    const measured = [];
    for (const text of texts) measured.push((await sized(probe.client, probe.emu, text)).size);
    const { emu, client } = await emulatorOn(dir, KEY, { stateMaxBytes: measured[1]! + measured[2]! });
    const stored = [];
    for (const text of texts) stored.push(await sized(client, emu, text));
    expect(stored.map((f) => f.size)).toEqual(measured);
    expect(stored.map((f) => emu.localFilePath(f.url) !== undefined)).toEqual([false, true, true]);
    expect((await filesUnder(join(dir, 'files'))).filter((f) => f.endsWith('.flac'))).toHaveLength(2);
  });
});

describe('no API key on disk', () => {
  it('owners are kept as sha256 of the key: no file holds a key', async () => {
    const dir = await stateDir();
    const { client } = await emulatorOn(dir);
    const { voiceId } = await client.voices.create({ file: WAV.pathname, voiceName: 'Hashed', gender: 1 });
    await client.dub.run({ videoUrl: 'https://example.com/talk.mp4', sourceLanguage: 'en-us', targetLanguage: 'es-es' });
    const files = await filesUnder(dir);
    expect(files.length).toBeGreaterThan(4);
    for (const file of files) {
      const bytes = await readFile(join(dir, file));
      expect(bytes.includes(KEY), file).toBe(false);
    }
    const voice = JSON.parse(await readFile(join(dir, 'voices', `${voiceId}.json`), 'utf8')) as { owner: string };
    expect(voice.owner).toBe(`sha256:${createHash('sha256').update(KEY).digest('hex')}`);
  });
});
