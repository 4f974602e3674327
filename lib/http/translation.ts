/**
 * Text translation: the task (`POST /translate`, `GET /translate/{task_id}`, the result at
 * `GET /translation-result/{run_id}` as `{texts}`), its bulk results
 * (`POST /translation-results`), `translateTexts()` for the whole flow in one call, and
 * `POST /translation/stream` (deprecated by the service in favour of the task) as a Readable of
 * the translated text, decoded as UTF-8 across chunk boundaries.
 *
 * Languages are locale tags or ids; tags are converted to the ids these endpoints take through
 * the service's language lists (cached by the client).
 */
import type { Readable } from 'node:stream';
import type { HttpRequester, RequestOptions, RequestSpec } from './requester.js';
import { bulkResultsOf, callOptions, createAndWait, createTask, getTaskStatus, mapBodyErrors, type CreatedTask, type TaskCallOptions } from './endpoint-kit.js';
import { getTranslationResult, parseTranslationResult, type Language, type ProjectFields, type TranslationResult } from './endpoints.js';
import { tagsToIds, type LanguageField } from './languages.js';
import { translationSchema, translationStreamSchema } from './schemas.js';
import type { TaskStatusResponse } from './tasks.js';
import { validate } from './validation.js';
import { reportDeprecation } from '../deprecations.js';

/** `POST /translate`. */
export interface TranslationRequest extends ProjectFields {
  /** One or more texts; the result has one translation per text, in order. */
  texts: string[];
  sourceLanguage: Language;
  targetLanguage: Language;
  age?: number;
  /** 1 casual, 2 formal. */
  formality?: 1 | 2;
  gender?: 0 | 1 | 2 | 9;
  chosenDictionaries?: number[] | null;
}

/** `POST /translation/stream`. */
export interface TranslationStreamRequest extends ProjectFields {
  text: string;
  sourceLanguage: Language;
  targetLanguage: Language;
  formality?: 1 | 2 | null;
  gender?: 0 | 1 | 2 | 9 | null;
  teamId?: number | null;
}

const LANGUAGES: LanguageField[] = [
  { wire: 'source_language', side: 'source', field: 'sourceLanguage' },
  { wire: 'target_language', side: 'target', field: 'targetLanguage' },
];

/** `POST /translate`: starts translating `texts`. */
export async function createTranslation(client: HttpRequester, request: TranslationRequest, options?: RequestOptions): Promise<CreatedTask> {
  const json = await tagsToIds(client, validate(translationSchema, request), LANGUAGES, callOptions(options));
  return createTask(client, '/translate', options, { json });
}

export function getTranslationStatus(client: HttpRequester, taskId: string, options?: RequestOptions): Promise<TaskStatusResponse> {
  return getTaskStatus(client, 'translation', taskId, options);
}

/** `POST /translation-results`: the results of 2 to 5 runs by run id; a run without a result maps to undefined. */
export function getTranslationResults(client: HttpRequester, runIds: number[], options?: RequestOptions): Promise<Map<number, TranslationResult | undefined>> {
  return bulkResultsOf(client, '/translation-results', runIds, parseTranslationResult, options);
}

export interface TranslateTextsOptions extends TaskCallOptions, Omit<TranslationRequest, 'texts' | 'sourceLanguage' | 'targetLanguage'> {
  from: Language;
  to: Language;
}

/**
 * Translates `texts` in one call: creates the task, waits for it (speech polling), and returns
 * the translations in the order of `texts`.
 */
export async function translateTexts(client: HttpRequester, texts: string[], options: TranslateTextsOptions): Promise<string[]> {
  const { from, to, signal, headersTimeoutMs, bodyTimeoutMs, retry, profile, initialIntervalMs, maxIntervalMs, factor, maxWaitMs, onProgress, ...fields } =
    options;
  const wait: TaskCallOptions = { signal, headersTimeoutMs, bodyTimeoutMs, retry, profile, initialIntervalMs, maxIntervalMs, factor, maxWaitMs, onProgress };
  const run = await createAndWait(
    client,
    'translation',
    (o) => createTranslation(client, { ...fields, texts, sourceLanguage: from, targetLanguage: to }, o),
    wait,
  );
  return (await getTranslationResult(client, run.runId, callOptions(wait))).texts;
}

/**
 * `POST /translation/stream`: the translation of one text as it is produced, a Readable of
 * strings (UTF-8, never a split character). Resolves once the answer's headers are in, so an
 * HTTP failure rejects; a failure later destroys the stream with the library's error. The
 * service deprecates it (code `RTT_DEP_TRANSLATION_STREAM`: one `DeprecationWarning` per process
 * by default; `handleDeprecations` takes it instead).
 */
export async function translationStream(client: HttpRequester, request: TranslationStreamRequest, options?: RequestOptions): Promise<Readable> {
  reportDeprecation('RTT_DEP_TRANSLATION_STREAM');
  const json = await tagsToIds(client, validate(translationStreamSchema, request), LANGUAGES, callOptions(options));
  const spec: RequestSpec = { method: 'POST', path: '/translation/stream', json, accept: 'text/plain, */*', kind: 'create', ...callOptions(options) };
  const response = await client.requestStream(spec);
  const text = mapBodyErrors(response.body, (error) => client.bodyError(error, spec));
  text.setEncoding('utf8');
  return text;
}
