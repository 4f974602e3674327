/**
 * Project-like results as the emulator answers them: the dubbing project of `/project-setup`
 * (`GET /project-setup-result/{run_id}`, bulk `POST /project-setup-results`, a list), text to
 * sound (`POST /text-to-sound`; its result as WAV bytes or a presigned `output_url`; bulk
 * results), stories (`POST /story`, also `/create-story`, a task; `POST /story-setup`, the story
 * at once; `GET /story-result/{run_id}`, also `/story-run/{run_id}`, with `include_transcript`;
 * bulk `POST /stories-results`) and translated stories (`POST /translated-story/{run_id}`, then
 * `GET /translated-story-result/{run_id}/{language}` by the story's or the translation's run id).
 *
 * A story's text is its uploaded document read as UTF-8 (a binary document is "Story of NAME");
 * the narration is the emulator's synthetic speech of it, a sentence per transcript segment.
 */
import { runIdsSchema, storySchema, textToSoundSchema, translatedStorySchema } from '../../http/schemas.js';
import { bool } from '../../http/validation.js';
import { languageId, languageTag } from '../languages.js';
import { speechDurationMs, synthesizeFlac, synthesizeSoundPcm } from '../synth.js';
import { encodeAs } from './audio.js';
import { sendDetail, sendError, sendJson } from './respond.js';
import {
  bulkResults,
  cached,
  created,
  decodeSegment,
  formBody,
  jsonBody,
  knownLanguages,
  noted,
  queryParam,
  resultAudio,
  route,
  storedUrl,
  successfulRun,
  usableVoices,
  type Handler,
  type Route,
  type RouteContext,
} from './route-kit.js';
import type { EmulatedTask } from './task-store.js';

/** Where the emulator's projects and stories would be edited. */
const STUDIO = 'https://studio.emulator.invalid';

function stamp(ctx: RouteContext, task: EmulatedTask): string {
  return noted(ctx, task, 'created_at', () => new Date(ctx.now()).toISOString());
}

/* ----------------------------------------------------------------------------------------- */
/* Project setup                                                                             */

function projectResult(ctx: RouteContext, task: EmulatedTask): Record<string, unknown> {
  const p = task.payload;
  return {
    run_id: task.runId,
    project_details: {
      project_name: p.project_name ?? `Project ${task.runId}`,
      project_description: p.project_description ?? null,
      created_at: stamp(ctx, task),
      source_language: languageId(p.source_language) ?? p.source_language,
      target_languages: (p.target_languages as unknown[]).map((l) => languageId(l) ?? l),
      duration: null,
      folder_id: p.folder_id ?? null,
      studio_url: `${STUDIO}/projects/${task.runId}`,
    },
  };
}

const projectSetupResult: Handler = (ctx, r) => {
  const task = successfulRun(ctx, r, ['project-setup']);
  if (task) sendJson(r.res, 200, projectResult(ctx, task));
};

/* ----------------------------------------------------------------------------------------- */
/* Text to sound                                                                             */

/** Default length of a sound when the request gives none, seconds. */
const DEFAULT_SOUND_S = 5;

const createTextToSound: Handler = async (ctx, r) => {
  const body = await jsonBody(ctx, r, textToSoundSchema);
  if (body) created(r, ctx.tasks.create('text-to-sound', r.key, body));
};

function soundWav(ctx: RouteContext, task: EmulatedTask): Buffer {
  return cached(task, 'wav', () => {
    const p = task.payload;
    const type = p.audio_type === 'music' ? 'music' : 'sound';
    const pcm = synthesizeSoundPcm(String(p.prompt), type, {
      sampleRate: ctx.resultSampleRate,
      durationMs: ((p.duration as number | undefined) ?? DEFAULT_SOUND_S) * 1000,
    });
    return encodeAs(pcm, 'wav', ctx.resultSampleRate).bytes;
  });
}

/** Raw bytes are WAV, as the service's documentation says. */
const textToSoundResult = resultAudio(
  ['text-to-sound'],
  (ctx, task) => ({ bytes: soundWav(ctx, task), contentType: 'audio/wav', name: `run-${task.runId}.wav` }),
  () => 'output_url',
);

const textToSoundResults = bulkResults(runIdsSchema, ['text-to-sound'], (ctx, task) => ({
  output_url: storedUrl(ctx, task, 'result', () => soundWav(ctx, task), `run-${task.runId}.wav`, 'audio/wav'),
}));

/* ----------------------------------------------------------------------------------------- */
/* Stories                                                                                   */

/** The sentences of a document's text, at most `max` of them. */
function sentences(text: string, max = 40): string[] {
  const found = text.replace(/\s+/g, ' ').match(/[^.!?]+[.!?]*/g) ?? [];
  return found
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .slice(0, max);
}

function storyText(task: EmulatedTask, language: string | undefined): string[] {
  const base = task.payload.sentences as string[];
  return language === undefined ? base : base.map((s) => `[${language}] ${s}`);
}

function storyResult(
  ctx: RouteContext,
  story: EmulatedTask,
  language: string | undefined,
  transcript: boolean,
  slot = language ?? 'source',
): Record<string, unknown> {
  const lines = storyText(story, language);
  const out: Record<string, unknown> = {
    story_title: story.payload.title ?? `Story ${story.runId}`,
    source_language: languageId(story.payload.source_language),
    ...(language === undefined ? {} : { target_language: languageId(language) }),
    audio_url: storedUrl(
      ctx,
      story,
      `story-${slot}`,
      () => synthesizeFlac(lines.join(' '), { sampleRate: ctx.resultSampleRate }),
      `story-${story.runId}-${slot}.flac`,
    ),
    studio_url: `${STUDIO}/stories/${story.runId}`,
  };
  if (transcript) {
    let at = 0;
    out.transcript = lines.map((text) => {
      const end = at + speechDurationMs(text);
      const segment = { start: at, end, text, speaker: 'NARRATOR' };
      at = end;
      return segment;
    });
  }
  return out;
}

async function storyForm(ctx: RouteContext, r: Parameters<Handler>[1]): Promise<Record<string, unknown> | undefined> {
  const form = await formBody(ctx, r, storySchema, ['file']);
  if (!form || !knownLanguages(r, form.fields, ['source_language']) || !usableVoices(ctx, r, form.fields, ['narrator_voice_id'])) return undefined;
  const file = form.files[0]!;
  const text = file.data !== undefined && !file.data.subarray(0, 4096).includes(0) ? file.data.toString('utf8') : '';
  const lines = sentences(text);
  return { ...form.fields, sentences: lines.length > 0 ? lines : [`Story of ${file.filename}.`], filename: file.filename };
}

const createStory: Handler = async (ctx, r) => {
  const payload = await storyForm(ctx, r);
  if (payload) created(r, ctx.tasks.create('story', r.key, payload));
};

/** The story is set up at once: its run exists, and the answer describes it. */
const setupStory: Handler = async (ctx, r) => {
  const payload = await storyForm(ctx, r);
  if (!payload) return;
  const task = ctx.tasks.create('story', r.key, payload, { status: 'SUCCESS' }, 0, 0);
  sendJson(r.res, 200, {
    run_id: task.runId,
    story_details: {
      story_title: payload.title ?? `Story ${task.runId}`,
      story_description: payload.description ?? null,
      created_at: stamp(ctx, task),
      source_language: languageId(payload.source_language),
      target_languages: [],
      folder_id: payload.folder_id ?? null,
      studio_url: `${STUDIO}/stories/${task.runId}`,
    },
  });
};

const storyResultHandler: Handler = (ctx, r) => {
  const transcript = queryParam<boolean>(r, 'include_transcript', bool());
  if (transcript === undefined) return;
  const task = successfulRun(ctx, r, ['story']);
  if (task) sendJson(r.res, 200, storyResult(ctx, task, undefined, transcript === true));
};

const storiesResults = bulkResults(runIdsSchema, ['story'], (ctx, task) => storyResult(ctx, task, undefined, false));

const createTranslatedStory: Handler = async (ctx, r) => {
  const story = successfulRun(ctx, r, ['story']);
  if (!story) return void r.req.resume();
  const body = await jsonBody(ctx, r, translatedStorySchema);
  if (!body || !knownLanguages(r, body, ['target_language'])) return;
  const task = ctx.tasks.create('translated-story', r.key, { story_run_id: story.runId, target_language: languageTag(body.target_language) });
  ctx.tasks.note(story, 'translations', [...noted<number[]>(ctx, story, 'translations', () => []), task.runId]);
  sendJson(r.res, 200, { message: `Translation of story ${story.runId} started.`, task_id: task.id });
};

/** A story run, or a translated-story run, and the language asked for (else 404/422 answered). */
const translatedStoryResult: Handler = (ctx, r) => {
  const transcript = queryParam<boolean>(r, 'include_transcript', bool());
  if (transcript === undefined) return;
  const raw = decodeSegment(r.params[1] ?? '') ?? '';
  const tag = languageTag(/^\d+$/.test(raw) ? Number(raw) : raw);
  if (tag === undefined) {
    sendDetail(r.res, [{ loc: ['path', 'target_language'], msg: `Value error, unsupported language ${JSON.stringify(raw)}`, type: 'value_error' }]);
    return;
  }
  const task = successfulRun(ctx, r, ['story', 'translated-story']);
  if (!task) return;
  const story = task.kind === 'story' ? task : ctx.tasks.run(task.payload.story_run_id as number);
  if (!story) {
    sendError(r.res, 404, `The story of run ${task.runId} is no longer kept.`);
    return;
  }
  const translations =
    task.kind === 'translated-story' ? [task] : noted<number[]>(ctx, story, 'translations', () => []).flatMap((runId) => ctx.tasks.run(runId) ?? []);
  const done = translations.some((t) => t.payload.target_language === tag && ctx.tasks.status(t) === 'SUCCESS');
  if (!done) {
    sendError(r.res, 404, `Story ${story.runId} has no finished translation into ${tag}.`);
    return;
  }
  sendJson(r.res, 200, storyResult(ctx, story, tag, transcript === true));
};

export const PROJECT_ROUTES: readonly Route[] = [
  route('GET', '/project-setup-result/{}', projectSetupResult),
  route('POST', '/project-setup-results', bulkResults(runIdsSchema, ['project-setup'], projectResult, true)),
  route('POST', '/text-to-sound', createTextToSound),
  route('GET', '/text-to-sound-result/{}', textToSoundResult),
  route('POST', '/text-to-sound-results', textToSoundResults),
  route('POST', '/story', createStory),
  route('POST', '/create-story', createStory),
  route('POST', '/story-setup', setupStory),
  route('GET', '/story-result/{}', storyResultHandler),
  route('GET', '/story-run/{}', storyResultHandler),
  route('POST', '/stories-results', storiesResults),
  route('POST', '/translated-story/{}', createTranslatedStory),
  route('GET', '/translated-story-result/{}/{}', translatedStoryResult),
];
