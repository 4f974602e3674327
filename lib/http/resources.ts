/**
 * The client's resources (`client.dub`, `client.textToSpeech`, `client.dictionaries`, ...), all
 * built from ONE table, `RESOURCE_SPECS`. The grouping and names follow the service's official
 * TypeScript SDK, so its users find things where they expect them; `voices`, `streams` and
 * `tasks` hold what this library has and the SDK lacks (`/delete-voice`, live streams, `/sub`,
 * the generic task verbs by kind).
 *
 * A resource spec has:
 * - `task`: the task kind (see `task-kinds.ts`) of a resource that runs asynchronous tasks, with
 *   `create` and `result`, the endpoint functions that start a task and read a finished run.
 *   Such a resource gets the same five verbs, whatever the kind: `create(request, options?)`,
 *   `status(taskId)`, `result(runId, options?)`, `wait(taskId, options?)` (the polling of
 *   `tasks.ts`, with the kind's profile and the client's back-off) and `run(request, options?)`
 *   (create, wait, result: the result's fields with `taskId` and `runId`). `run` may be given
 *   where the flow differs (an answer ready without a task, text and audio read together).
 *   Kinds the service's bots create (Discord, X) have no `create`: `status`, `wait`, `result`.
 * - `ops`: the resource's other operations, each an endpoint function with its route
 *   (`METHOD /path/{param}`, the interface's words). Naming: `open*` resolves with a stream,
 *   `get*`, `list*` and plain verbs with a value.
 * - `children`: nested resources (`dub.altFormat`, `dub.discord`, ...).
 *
 * Adding an operation is one entry here (the endpoint function next to its siblings), an
 * emulator route and a test; `test/http-resources.test.ts` checks every route of this table
 * against the emulator's routes. The endpoint functions stay exported from `rt-translate/http`
 * for callers who import only what they use.
 */
import type { FlacDownloader, RequestOptions, TtsResultAudioOptions } from './requester.js';
import type { FlacDownloadStream } from './flac-download-stream.js';
import type { TaskKind } from './task-kinds.js';
import type { CompletedTask, TaskStatusResponse } from './tasks.js';
import { callOptions, getTaskStatus, waitForTaskOf, type CreatedTask, type TaskCallOptions } from './endpoint-kit.js';
import * as endpoints from './endpoints.js';
import * as separation from './audio-separation.js';
import * as dubbing from './dubbing.js';
import * as projects from './projects.js';
import * as library from './library.js';
import * as voices from './voices.js';
import * as translation from './translation.js';
import * as transcription from './transcription.js';
import * as streams from './streams.js';
import type { DubAltFormat } from './schemas.js';

/** An endpoint function: the requester first, then the call's own arguments. */
type EndpointFn = (client: FlacDownloader, ...args: any[]) => unknown;

/** One operation of the table: its route in the interface's words, and the function that makes the request. */
export interface OperationSpec<F extends EndpointFn = EndpointFn> {
  /** `METHOD /path/{param}` (more than one when the function may use either). */
  route: string | readonly string[];
  call: F;
}

export interface ResourceSpec {
  /** The task kind of a resource with the five task verbs. */
  task?: TaskKind;
  /** Starts a task: `(client, request, options?)`, resolving with at least `taskId`. */
  create?: OperationSpec;
  /** Reads a finished run: `(client, runId, options?)`. */
  result?: OperationSpec;
  /** Create, wait, result in one call, where the generic one does not fit. */
  run?: OperationSpec;
  ops?: Record<string, OperationSpec>;
  children?: Record<string, ResourceSpec>;
}

function op<F extends EndpointFn>(route: string | readonly string[], call: F): OperationSpec<F> {
  return { route, call };
}

/** Ids a task run carries. */
export interface TaskIds {
  taskId: string;
  runId: number;
}

/** What the generic `run` resolves with: the result's fields (a result that is not an object as `value`) and the ids. */
export type RunResult<R> = (R extends object ? R : { value: R }) & TaskIds;

// The promise is spelled out so that the reference shows what it resolves with.
type Bound<F> = F extends (client: FlacDownloader, ...args: infer A) => Promise<infer V>
  ? (...args: A) => Promise<V>
  : F extends (client: FlacDownloader, ...args: infer A) => infer R
    ? (...args: A) => R
    : never;
type BoundOps<O> = { readonly [K in keyof O]: O[K] extends OperationSpec<infer F> ? Bound<F> : never };
type FirstArg<F> = F extends (client: FlacDownloader, first: infer A, ...rest: never[]) => unknown ? A : never;
type ResultOf<S> = S extends { result: OperationSpec<infer F> } ? Awaited<ReturnType<F>> : never;
type ResultOptionsOf<S> = S extends { result: OperationSpec<infer F> } ? Omit<NonNullable<Parameters<F>[2]>, keyof RequestOptions> : object;

/** The verbs of every task kind. */
export interface TaskStatusVerbs<K extends TaskKind = TaskKind> {
  /** The task kind these verbs poll. */
  readonly kind: K;
  /** `GET {status path}/{task_id}`: one status read. */
  status(taskId: string, options?: RequestOptions): Promise<TaskStatusResponse>;
  /** Polls until the task is final (the kind's profile, the client's polling and back-off). */
  wait(taskId: string, options?: TaskCallOptions): Promise<CompletedTask>;
}

type TaskVerbsOf<S> = S extends { task: infer K extends TaskKind; result: OperationSpec<infer R> }
  ? TaskStatusVerbs<K> & { readonly result: Bound<R> } & (S extends { create: OperationSpec<infer C> }
        ? {
            readonly create: Bound<C>;
            readonly run: S extends { run: OperationSpec<infer U> }
              ? Bound<U>
              : (request: FirstArg<C>, options?: TaskCallOptions & ResultOptionsOf<S>) => Promise<RunResult<ResultOf<S>>>;
          }
        : unknown)
  : unknown;

/** The resource a spec builds: task verbs, operations and children. */
export type ResourceOf<S> = TaskVerbsOf<S> &
  (S extends { ops: infer O } ? BoundOps<O> : unknown) &
  (S extends { children: infer C } ? { readonly [K in keyof C]: ResourceOf<C[K]> } : unknown);

/* ----------------------------------------------------------------------------------------- */
/* The table                                                                                 */

const getTtsResultAudio = (client: FlacDownloader, runId: number, options?: TtsResultAudioOptions): Promise<endpoints.AudioResult<FlacDownloadStream>> =>
  endpoints.getTtsResultAudio(client, runId, options);

const dubAltFormatRequest = (
  client: FlacDownloader,
  request: { runId: number; language: endpoints.Language; format: DubAltFormat },
  options?: RequestOptions,
) => dubbing.requestDubAltFormat(client, request.runId, request.language, request.format, options);

export const RESOURCE_SPECS = {
  audioSeparation: {
    task: 'audio-separation',
    create: op('POST /audio-separation', separation.createAudioSeparation),
    result: op('GET /audio-separation-result/{run_id}', separation.getAudioSeparationResult),
    ops: {
      getResults: op('POST /audio-separation-results', separation.getAudioSeparationResults),
      openTrack: op(['GET /audio-separation-result/{run_id}', 'POST /audio-separation-results'], separation.openSeparationTrack),
    },
  },
  dictionaries: {
    ops: {
      list: op('GET /dictionaries', library.listDictionaries),
      createFromFile: op('POST /dictionaries/create-from-file', library.createDictionaryFromFile),
      get: op('GET /dictionaries/{id}', library.getDictionary),
      getDetails: op('GET /dictionaries/{id}/full-details', library.getDictionaryDetails),
      delete: op('DELETE /dictionaries/{id}', library.deleteDictionary),
      addTerm: op('POST /dictionaries/{id}/add-term', library.addDictionaryTerm),
      updateTerm: op('PUT /dictionaries/term/{id}/{term_id}', library.updateDictionaryTerm),
      deleteTerm: op('DELETE /dictionaries/term/{id}/{term_id}', library.deleteDictionaryTerm),
    },
  },
  dub: {
    task: 'dub',
    create: op('POST /dub', dubbing.createDubbing),
    result: op('GET /dub-result/{run_id}', dubbing.getDubbingResult),
    run: op(['POST /dub', 'GET /dub-result/{run_id}'], dubbing.dub),
    ops: {
      getResults: op('POST /dubbing-results', dubbing.getDubbingResults),
      openFile: op('GET /dub-result/{run_id}', dubbing.openDubbedFile),
      getTranscript: op('GET /transcript/{run_id}/{language}', dubbing.getRunTranscript),
    },
    children: {
      altFormat: {
        task: 'dub-alt-format',
        create: op('POST /dub-alt-format/{run_id}/{language}', dubAltFormatRequest),
        result: op('GET /dub-result/{run_id}', dubbing.getDubAltFormatResult),
        run: op(
          ['POST /dub-alt-format/{run_id}/{language}', 'GET /dub-result/{run_id}'],
          (client: FlacDownloader, request: { runId: number; language: endpoints.Language; format: DubAltFormat }, options?: TaskCallOptions) =>
            dubbing.dubAltFormat(client, request.runId, request.language, request.format, options),
        ),
      },
      discord: { task: 'discord-dub', result: op('GET /dub-result/{run_id}', dubbing.getDubbingResult) },
      twitter: { task: 'twitter-dub', result: op('GET /dub-result/{run_id}', dubbing.getDubbingResult) },
    },
  },
  folders: {
    ops: {
      list: op('GET /folders', library.listFolders),
      create: op('POST /folders/create', library.createFolder),
    },
  },
  projectSetup: {
    task: 'project-setup',
    create: op('POST /project-setup', endpoints.createProjectSetup),
    result: op('GET /project-setup-result/{run_id}', projects.getProjectSetupResult),
    ops: { getResults: op('POST /project-setup-results', projects.getProjectSetupResults) },
  },
  story: {
    task: 'story',
    create: op('POST /story', projects.createStory),
    result: op('GET /story-result/{run_id}', projects.getStoryResult),
    ops: {
      setup: op('POST /story-setup', projects.setupStory),
      openAudio: op('GET /story-result/{run_id}', projects.openStoryAudio),
      getResults: op('POST /stories-results', projects.getStoriesResults),
    },
  },
  textToAudio: {
    task: 'text-to-sound',
    create: op('POST /text-to-sound', projects.createTextToSound),
    result: op(
      'GET /text-to-sound-result/{run_id}',
      (client: FlacDownloader, runId: number, options?: Omit<TtsResultAudioOptions, 'decode'>) =>
        projects.getTextToSoundResultAudio(client, runId, options) as Promise<endpoints.AudioResult<FlacDownloadStream>>,
    ),
    ops: { getResults: op('POST /text-to-sound-results', projects.getTextToSoundResults) },
  },
  textToSpeech: {
    task: 'tts',
    create: op('POST /tts', endpoints.createTts),
    result: op('GET /tts-result/{run_id}', getTtsResultAudio),
    ops: {
      getResultUrl: op('GET /tts-result/{run_id}', endpoints.getTtsResultUrl),
      getResults: op('POST /tts-results', endpoints.getTtsResults),
    },
    children: {
      discord: { task: 'discord-tts', result: op('GET /tts-result/{run_id}', getTtsResultAudio) },
    },
  },
  textToVoice: {
    task: 'text-to-voice',
    create: op('POST /text-to-voice', voices.createTextToVoice),
    result: op('GET /text-to-voice-result/{run_id}', voices.getTextToVoiceResult),
  },
  transcription: {
    task: 'transcription',
    create: op('POST /transcribe', transcription.createTranscription),
    result: op('GET /transcription-result/{run_id}', transcription.getTranscriptionResult),
    ops: { getResults: op('POST /transcription-results', transcription.getTranscriptionResults) },
  },
  translatedStory: {
    task: 'translated-story',
    create: op(
      'POST /translated-story/{run_id}',
      (client: FlacDownloader, request: { runId: number; targetLanguage: endpoints.Language }, options?: RequestOptions) =>
        projects.createTranslatedStory(client, request.runId, request.targetLanguage, options),
    ),
    result: op(
      'GET /translated-story-result/{run_id}/{target_language}',
      (client: FlacDownloader, runId: number, options: projects.StoryResultOptions & { targetLanguage: endpoints.Language }) =>
        // Without options, the language check names `targetLanguage` (a ValidationError, no request).
        projects.getTranslatedStoryResult(client, runId, options?.targetLanguage, options),
    ),
  },
  translatedTts: {
    task: 'translated-tts',
    create: op('POST /translated-tts', endpoints.createTranslatedTts),
    result: op(['GET /translation-result/{run_id}', 'GET /tts-result/{run_id}'], (client: FlacDownloader, runId: number, options?: TtsResultAudioOptions) =>
      endpoints.getTranslatedTtsResult(client, runId, options),
    ),
    run: op(
      ['POST /translated-tts', 'GET /translation-result/{run_id}', 'GET /tts-result/{run_id}'],
      (client: FlacDownloader, body: endpoints.TranslatedTtsRequest, options?: endpoints.TranslateAndSpeakOptions) =>
        endpoints.translateAndSpeak(client, body, options),
    ),
  },
  translation: {
    task: 'translation',
    create: op('POST /translate', translation.createTranslation),
    result: op('GET /translation-result/{run_id}', endpoints.getTranslationResult),
    ops: {
      getResults: op('POST /translation-results', translation.getTranslationResults),
      translateTexts: op(['POST /translate', 'GET /translation-result/{run_id}'], translation.translateTexts),
      openStream: op('POST /translation/stream', translation.translationStream),
    },
  },
  voices: {
    ops: {
      list: op('GET /list-voices', voices.listVoices),
      create: op('POST /create-custom-voice', voices.createCustomVoice),
      delete: op('DELETE /delete-voice/{voice_id}', voices.deleteVoice),
    },
  },
  streams: {
    ops: {
      create: op('POST /stream', streams.createStream),
      get: op('GET /stream/{id}', streams.getStream),
      update: op('PATCH /stream/{id}', streams.updateStream),
      delete: op('DELETE /stream/{id}', streams.deleteStream),
      probe: op('POST /stream/probe', streams.probeStream),
      createV1: op('POST /v1/stream', streams.createStreamV1),
      getV1: op('GET /v1/stream/{id}', streams.getStreamV1),
      stopV1: op('GET /v1/stream/{id}/stop', streams.stopStreamV1),
      probeV1: op('POST /v1/stream/probe', streams.probeStreamV1),
    },
  },
  tasks: {
    ops: {
      status: op('GET /{kind}/{task_id}', getTaskStatus),
      wait: op('GET /{kind}/{task_id}', waitForTaskOf),
    },
    children: {
      subtitles: {
        task: 'sub',
        create: op('POST /sub', dubbing.createSubtitles),
        result: op(
          'GET /transcript/{run_id}/{language}',
          (client: FlacDownloader, runId: number, options: dubbing.RunTranscriptOptions & { language: endpoints.Language }) =>
            dubbing.getRunTranscript(client, runId, options?.language, options),
        ),
      },
    },
  },
} as const satisfies Record<string, ResourceSpec>;

export type ResourceSpecs = typeof RESOURCE_SPECS;
/** The resources exactly as the table builds them (`resource-interfaces.ts` names each one). */
export type ResourceTable = { readonly [K in keyof ResourceSpecs]: ResourceOf<ResourceSpecs[K]> };

/* ----------------------------------------------------------------------------------------- */
/* Building                                                                                  */

function bound(client: FlacDownloader, spec: OperationSpec): (...args: unknown[]) => unknown {
  return (...args: unknown[]) => spec.call(client, ...args);
}

/** The generic `run`: create, wait (unless the answer carries its run already), result. */
function genericRun(client: FlacDownloader, kind: TaskKind, create: OperationSpec, result: OperationSpec) {
  return async (request: unknown, options: TaskCallOptions = {}): Promise<unknown> => {
    const created = (await create.call(client, request, callOptions(options))) as Partial<CreatedTask>;
    let ids: TaskIds;
    if (typeof created.taskId === 'string') {
      const run = await waitForTaskOf(client, kind, created.taskId, options);
      ids = { taskId: run.taskId, runId: run.runId };
    } else {
      ids = { taskId: '', runId: created.runId as number };
    }
    const value = await result.call(client, ids.runId, options);
    return value !== null && typeof value === 'object' ? { ...value, ...ids } : { value, ...ids };
  };
}

/** The resource `spec` describes, its operations bound to `client`. */
export function buildResource<S extends ResourceSpec>(client: FlacDownloader, spec: S): ResourceOf<S> {
  const out: Record<string, unknown> = {};
  if (spec.task !== undefined && spec.result !== undefined) {
    const kind = spec.task;
    out.kind = kind;
    out.status = (taskId: string, options?: RequestOptions) => getTaskStatus(client, kind, taskId, options);
    out.wait = (taskId: string, options?: TaskCallOptions) => waitForTaskOf(client, kind, taskId, options);
    out.result = bound(client, spec.result);
    if (spec.create !== undefined) {
      out.create = bound(client, spec.create);
      out.run = spec.run !== undefined ? bound(client, spec.run) : genericRun(client, kind, spec.create, spec.result);
    }
  }
  for (const [name, operation] of Object.entries(spec.ops ?? {})) out[name] = bound(client, operation);
  for (const [name, child] of Object.entries(spec.children ?? {})) out[name] = buildResource(client, child);
  return Object.freeze(out) as ResourceOf<S>;
}

/** Every resource of the table, bound to `client`. */
export function buildResources(client: FlacDownloader): ResourceTable {
  const out: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(RESOURCE_SPECS)) out[name] = buildResource(client, spec as ResourceSpec);
  return out as ResourceTable;
}

/** Every task resource spec of the table with its place (`dub.altFormat`), depth first. */
export function taskResourceSpecs(): { path: string; spec: ResourceSpec & { task: TaskKind } }[] {
  const out: { path: string; spec: ResourceSpec & { task: TaskKind } }[] = [];
  const visit = (path: string, spec: ResourceSpec): void => {
    if (spec.task !== undefined) out.push({ path, spec: spec as ResourceSpec & { task: TaskKind } });
    for (const [name, child] of Object.entries(spec.children ?? {})) visit(`${path}.${name}`, child);
  };
  for (const [name, spec] of Object.entries(RESOURCE_SPECS)) visit(name, spec as ResourceSpec);
  return out;
}

/** Every route of the table (`METHOD /path/{param}`), with the operation's place (`dub.openFile`). */
export function resourceRoutes(): { path: string; route: string }[] {
  const out: { path: string; route: string }[] = [];
  const visit = (path: string, spec: ResourceSpec): void => {
    const entries: [string, OperationSpec | undefined][] = [
      ['create', spec.create],
      ['result', spec.result],
      ['run', spec.run],
      ...Object.entries(spec.ops ?? {}),
    ];
    for (const [name, operation] of entries) {
      if (operation === undefined) continue;
      for (const route of typeof operation.route === 'string' ? [operation.route] : operation.route) out.push({ path: `${path}.${name}`, route });
    }
    for (const [name, child] of Object.entries(spec.children ?? {})) visit(`${path}.${name}`, child);
  };
  for (const [name, spec] of Object.entries(RESOURCE_SPECS)) visit(name, spec as ResourceSpec);
  return out;
}
