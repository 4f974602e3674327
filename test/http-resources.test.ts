/**
 * The client's resources, from the one table of `resources.ts`: every task kind has its
 * resource, every task resource has the same verbs (`create`, `status`, `result`, `wait`, `run`;
 * `status`, `wait`, `result` for the kinds the service's bots create), each of them works against
 * the emulator over real sockets, and every route of the table is one the emulator answers.
 */
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { handleDeprecations } from '../lib/deprecations.js';
import { matchRoute } from '../lib/emulator/http/routes.js';
import { TASK_KIND_SPECS, TASK_KINDS } from '../lib/http/task-kinds.js';
import { TASK_STATUSES } from '../lib/http/tasks.js';
import { RESOURCE_SPECS, resourceRoutes, taskResourceSpecs } from '../lib/http/resources.js';
import type { LocalizationClient } from '../lib/http/client.js';
import { KEY, VOICE_DESCRIPTION, control, logged, sharedEmulator } from './http-test-helpers.js';

const env = sharedEmulator();

/** A short speech recording (the fixture the transcription tests use). */
const WAV = await readFile(fileURLToPath(new URL('./fixtures/speech-en-24k.wav', import.meta.url)));

/** A finished dubbing run, for the resources that start from one. */
async function dubRun(client: LocalizationClient): Promise<number> {
  return (await client.dub.run({ videoUrl: 'https://example.com/talk.mp4', sourceLanguage: 'en-us', targetLanguage: 'es-es' })).runId;
}

/** A set-up story run, for the translated story. */
async function storyRun(client: LocalizationClient): Promise<number> {
  const setup = await client.story.setup({
    file: { data: Buffer.from('Once upon a time there was a lighthouse.'), filename: 'tale.txt' },
    sourceLanguage: 'en-us',
    title: 'Tale',
  });
  return setup.runId;
}

interface Sample {
  request: (client: LocalizationClient) => Promise<unknown>;
  /** Options `result` and `run` need (the language of a transcript, ...). */
  resultOptions?: Record<string, unknown>;
}

/** A valid request for every task resource that creates tasks, by its place in the table. */
const SAMPLES: Record<string, Sample> = {
  audioSeparation: { request: async () => ({ mediaFile: { data: WAV, filename: 'speech.wav' } }) },
  dub: { request: async () => ({ videoUrl: 'https://example.com/talk.mp4', sourceLanguage: 'en-us', targetLanguage: 'es-es' }) },
  'dub.altFormat': { request: async (client) => ({ runId: await dubRun(client), language: 'es-es', format: 'wav' }) },
  projectSetup: { request: async () => ({ mediaUrl: 'https://e.com/talk.mp4', sourceLanguage: 'en-us', targetLanguages: ['es-es'], projectName: 'Talk' }) },
  story: { request: async () => ({ file: { data: Buffer.from('Once upon a time.'), filename: 'tale.txt' }, sourceLanguage: 'en-us', title: 'Tale' }) },
  textToAudio: { request: async () => ({ prompt: 'rain on a tin roof', duration: 1, audioType: 'sound' }) },
  textToSpeech: { request: async () => ({ text: 'Legacy speech', language: 'en-us' }) },
  textToVoice: { request: async () => ({ text: 'hello there', voiceDescription: VOICE_DESCRIPTION }) },
  transcription: { request: async () => ({ language: 'en-us', mediaFile: { data: WAV, filename: 'talk.wav' } }) },
  translatedStory: { request: async (client) => ({ runId: await storyRun(client), targetLanguage: 'fr-fr' }), resultOptions: { targetLanguage: 'fr-fr' } },
  translatedTts: { request: async () => ({ text: 'Hello there.', sourceLanguage: 'en-us', targetLanguage: 'es-es' }) },
  translation: { request: async () => ({ texts: ['Hello'], sourceLanguage: 'en-us', targetLanguage: 'es-es' }) },
  'tasks.subtitles': {
    request: async () => ({ mediaUrl: 'https://example.com/talk.mp4', sourceLanguage: 'en-us', targetLanguages: ['de-de'] }),
    resultOptions: { language: 'en-us' },
  },
};

type AnyResource = Record<string, (...args: unknown[]) => Promise<unknown>> & { kind: string };

function resourceAt(client: LocalizationClient, path: string): AnyResource {
  return path.split('.').reduce<unknown>((node, name) => (node as Record<string, unknown>)[name], client) as AnyResource;
}

/** Closes any download a result carries, so no socket stays open. */
function release(value: unknown): void {
  const audio = (value as { audio?: { destroy?: () => void } } | null)?.audio;
  audio?.destroy?.();
}

/** The five verbs of the task resource at `path`, each against the emulator. */
async function fiveVerbs(path: string): Promise<void> {
  const resource = resourceAt(env.client, path);
  const sample = SAMPLES[path];
  expect(sample, `a sample request for ${path}`).toBeDefined();
  const created = (await resource.create!(await sample!.request(env.client))) as { taskId?: string; kind?: string; runId?: number | null };
  expect(created.taskId).toBeTypeOf('string');
  const status = (await resource.status!(created.taskId)) as { status: string };
  expect(TASK_STATUSES).toContain(status.status);
  const done = (await resource.wait!(created.taskId)) as { taskId: string; runId: number };
  expect(done).toMatchObject({ taskId: created.taskId, runId: expect.any(Number) });
  const result = await resource.result!(done.runId, sample!.resultOptions);
  expect(result).toBeDefined();
  release(result);
  const run = (await resource.run!(await sample!.request(env.client), sample!.resultOptions)) as { runId?: number };
  expect(run.runId).toBeTypeOf('number');
  release(run);
}

const TASK_RESOURCES = taskResourceSpecs();

describe('the resource table', () => {
  it('has one task resource per task kind', () => {
    expect(TASK_RESOURCES.map((r) => r.spec.task).sort()).toEqual([...TASK_KINDS].sort());
  });

  it('every route of the table is one the emulator answers', () => {
    const unmatched: string[] = [];
    for (const { path, route } of resourceRoutes()) {
      const [method, pattern] = route.split(' ') as [string, string];
      const concrete = pattern.includes('{kind}') ? Object.values(TASK_KIND_SPECS).map((k) => pattern.replace('/{kind}', k.path)) : [pattern];
      for (const url of concrete) {
        const match = matchRoute(method, url.replace(/\{[a-z_]+\}/g, '1'));
        if (match === 404 || match === 405) unmatched.push(`${path}: ${method} ${url} (${match})`);
      }
    }
    expect(unmatched).toEqual([]);
  });

  it('every status path of a task kind is one the emulator answers', () => {
    for (const spec of Object.values(TASK_KIND_SPECS)) {
      expect(matchRoute('GET', `${spec.path}/abc`), spec.path).not.toBe(404);
    }
  });

  it('a result that needs a language refuses to go without one, naming the field, before any request', async () => {
    await control(env.emu, 'DELETE', 'requests');
    const noOptions = undefined as unknown as { targetLanguage: string; language: string };
    await expect(env.client.translatedStory.result(1, noOptions)).rejects.toMatchObject({ name: 'ValidationError', field: 'targetLanguage' });
    await expect(env.client.tasks.subtitles.result(1, noOptions)).rejects.toMatchObject({ name: 'ValidationError', field: 'language' });
    expect(await logged(env.emu, 'GET', '/')).toEqual([]);
  });

  it('the client has a resource for every entry of the table', () => {
    for (const name of Object.keys(RESOURCE_SPECS)) expect(env.client[name as keyof typeof RESOURCE_SPECS], name).toBeTypeOf('object');
  });
});

describe.each(TASK_RESOURCES.map((r) => [r.path, r] as const))('client.%s', (path, { spec }) => {
  it(`has the task verbs of ${spec.task}`, () => {
    const resource = resourceAt(env.client, path);
    expect(resource.kind).toBe(spec.task);
    const verbs = spec.create !== undefined ? ['create', 'status', 'result', 'wait', 'run'] : ['status', 'result', 'wait'];
    for (const verb of verbs) expect(resource[verb], verb).toBeTypeOf('function');
  });
});

describe.each(TASK_RESOURCES.filter((r) => r.spec.create !== undefined).map((r) => [r.path, r] as const))(
  'client.%s against the emulator',
  (path, { spec }) => {
    it('create, status, wait, result and run work', async () => {
      // Deprecated flows (the asynchronous TTS) are reported to this test, not as process warnings.
      const deprecations: string[] = [];
      await handleDeprecations(
        (d) => deprecations.push(d.code),
        () => fiveVerbs(path),
      );
      if (spec.task !== 'tts') expect(deprecations).toEqual([]);
    });
  },
);

describe.each(TASK_RESOURCES.filter((r) => r.spec.create === undefined).map((r) => [r.path, r] as const))(
  'client.%s against the emulator',
  (path, { spec }) => {
    it('status and wait work on a task the bots started', async () => {
      const resource = resourceAt(env.client, path);
      const seeded = await control(env.emu, 'POST', 'tasks', { kind: spec.task, apiKey: KEY, polls: 1 });
      expect(((await resource.status!(seeded.task_id)) as { status: string }).status).toBe('PENDING');
      expect(await resource.wait!(seeded.task_id)).toMatchObject({ taskId: seeded.task_id, runId: seeded.run_id });
    });
  },
);
