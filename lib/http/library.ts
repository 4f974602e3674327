/**
 * Dictionaries (terms translated the same way every time) and folders of the workspace:
 * `GET /dictionaries`, `POST /dictionaries/create-from-file` (multipart, streamed), one
 * dictionary's info, details (with `limit` and `searchTerm`) and deletion, its terms (add,
 * update, delete), `GET /folders` (with `limit` and `searchQuery`) and `POST /folders/create`.
 *
 * Kinds (see `retry.ts`): creations and term additions are `create` (not repeated after an
 * ambiguous failure: a repeat would make a duplicate); a term update (`PUT`) sets the same
 * value again when repeated, so it is retried like a read; deletions are `delete`.
 */
import { ProtocolError } from '../errors.js';
import type { HttpRequester, RequestOptions } from './requester.js';
import { asArray, asObject, call, callOptions, camelResult, checkedParam } from './endpoint-kit.js';
import type { Language } from './endpoints.js';
import { catalogOf } from './languages.js';
import { multipartBody, type FieldValue, type Upload } from './multipart.js';
import { dictionaryFromFileSchema, folderSchema, idParam, limitParam, termTranslationsSchema } from './schemas.js';
import { validate } from './validation.js';
import { isPlainObject } from './wire.js';

export interface TermTranslation {
  /** Language id. */
  language: number;
  text: string;
}

export interface DictionaryTerm {
  id: number;
  translations: TermTranslation[];
}

export interface Dictionary {
  id: number;
  name: string;
  description: string | null;
  createdAt: string | null;
  lastEditedAt: string | null;
  /** Present in details answers (and in lists, when the service includes them). */
  terms: DictionaryTerm[];
  /** Language ids the terms use. */
  languages: number[];
  raw: Record<string, unknown>;
}

/** A term's translation as sent: a locale tag (converted through the language lists) or an id. */
export interface TermTranslationInput {
  translation: string;
  language: Language;
}

export interface DictionaryFromFileRequest {
  /** A CSV file: a header row of languages, then one term per row. Path, Buffer, Blob or Readable. */
  dictionaryFile: Upload;
  dictionaryName: string;
  dictionaryDescription?: string | null;
}

export interface Folder {
  /** The folder's id (`folder_id` or `id`), when the service gives it. */
  folderId: number | undefined;
  teamId: number | undefined;
  name: string;
  raw: Record<string, unknown>;
}

/** A camelCase answer with the wire body in `raw`, for the endpoints that answer without a published shape. */
export type LooseAnswer = Record<string, unknown> & { raw: Record<string, unknown> };

function numberOr<T>(value: unknown, fallback: T): number | T {
  return typeof value === 'number' && Number.isFinite(value) ? value : fallback;
}

export function parseDictionary(raw: Record<string, unknown>): Dictionary {
  const id = numberOr(raw.id ?? raw.dictionary_id, undefined);
  if (id === undefined) throw new ProtocolError('A dictionary came without its id.');
  const terms: DictionaryTerm[] = [];
  for (const term of Array.isArray(raw.dictionary_terms) ? raw.dictionary_terms : []) {
    if (!isPlainObject(term) || typeof term.id !== 'number') continue;
    const translations = (Array.isArray(term.term_translations) ? term.term_translations : [])
      .filter(isPlainObject)
      .map((t) => ({ language: numberOr(t.language, 0), text: String(t.term_text ?? t.translation ?? '') }));
    terms.push({ id: term.id, translations });
  }
  return {
    id,
    name: typeof raw.name === 'string' ? raw.name : `Dictionary ${id}`,
    description: typeof raw.description === 'string' ? raw.description : null,
    createdAt: typeof raw.created_at === 'string' ? raw.created_at : null,
    lastEditedAt: typeof raw.last_edited_at === 'string' ? raw.last_edited_at : null,
    terms,
    languages: Array.isArray(raw.languages) ? raw.languages.filter((l): l is number => typeof l === 'number') : [],
    raw,
  };
}

function dictionaryPath(id: number, suffix = ''): string {
  return `/dictionaries/${checkedParam(idParam, id, 'dictionaryId')}${suffix}`;
}

/** `GET /dictionaries`: the key's dictionaries. */
export async function listDictionaries(client: HttpRequester, options?: RequestOptions): Promise<Dictionary[]> {
  return asArray(await call(client, 'GET', '/dictionaries', 'read', options), 'GET /dictionaries')
    .filter(isPlainObject)
    .map(parseDictionary);
}

/** `POST /dictionaries/create-from-file`: a dictionary from a CSV file. `dictionaryId` when the answer names it. */
export async function createDictionaryFromFile(
  client: HttpRequester,
  request: DictionaryFromFileRequest,
  options?: RequestOptions,
): Promise<LooseAnswer & { dictionaryId: number | undefined }> {
  const { dictionaryFile, ...fields } = request;
  const wire = validate<Record<string, FieldValue>>(dictionaryFromFileSchema, fields);
  const multipart = await multipartBody(wire, [{ name: 'dictionary_file', field: 'dictionaryFile', upload: dictionaryFile }]);
  const raw = await call(client, 'POST', '/dictionaries/create-from-file', 'create', options, { multipart });
  const body = isPlainObject(raw) ? raw : { value: raw };
  return { ...camelResult<Record<string, unknown>>(body), dictionaryId: numberOr(body.dictionary_id ?? body.id, undefined) };
}

/** `GET /dictionaries/{id}`. */
export async function getDictionary(client: HttpRequester, dictionaryId: number, options?: RequestOptions): Promise<Dictionary> {
  return parseDictionary(asObject(await call(client, 'GET', dictionaryPath(dictionaryId), 'read', options), 'GET /dictionaries/{id}'));
}

export interface DictionaryDetailsOptions extends RequestOptions {
  /** At most this many terms. */
  limit?: number;
  /** Only the terms whose text contains this. */
  searchTerm?: string;
}

/** `GET /dictionaries/{id}/full-details`: the dictionary with its terms. */
export async function getDictionaryDetails(client: HttpRequester, dictionaryId: number, options: DictionaryDetailsOptions = {}): Promise<Dictionary> {
  const query: Record<string, string | number | undefined> = { search_term: options.searchTerm };
  if (options.limit !== undefined) query.limit = checkedParam(limitParam, options.limit, 'limit');
  return parseDictionary(
    asObject(await call(client, 'GET', dictionaryPath(dictionaryId, '/full-details'), 'read', options, { query }), 'GET /dictionaries/{id}/full-details'),
  );
}

/** `DELETE /dictionaries/{id}`: permanent. */
export async function deleteDictionary(client: HttpRequester, dictionaryId: number, options?: RequestOptions): Promise<LooseAnswer> {
  const raw = await call(client, 'DELETE', dictionaryPath(dictionaryId), 'delete', options);
  return camelResult<Record<string, unknown>>(isPlainObject(raw) ? raw : { value: raw });
}

async function translationsBody(client: HttpRequester, translations: TermTranslationInput[], options: RequestOptions): Promise<Record<string, unknown>> {
  const wire = validate<{ translations: { translation: string; language: string | number }[] }>(termTranslationsSchema, { translations });
  const catalog = catalogOf(client);
  const list = await Promise.all(
    wire.translations.map(async (t, i) => ({
      translation: t.translation,
      language: await catalog.idOf(t.language, 'target', `translations.${i}.language`, options),
    })),
  );
  return { translations: list };
}

/** `POST /dictionaries/{id}/add-term`: a new term, translated into each language given. `termId` when the answer names it. */
export async function addDictionaryTerm(
  client: HttpRequester,
  dictionaryId: number,
  translations: TermTranslationInput[],
  options?: RequestOptions,
): Promise<LooseAnswer & { termId: number | undefined }> {
  const path = dictionaryPath(dictionaryId, '/add-term');
  const json = await translationsBody(client, translations, callOptions(options));
  const raw = await call(client, 'POST', path, 'create', options, { json });
  const body = isPlainObject(raw) ? raw : { value: raw };
  return { ...camelResult<Record<string, unknown>>(body), termId: numberOr(body.term_id ?? body.id, undefined) };
}

function termPath(dictionaryId: number, termId: number): string {
  return `/dictionaries/term/${checkedParam(idParam, dictionaryId, 'dictionaryId')}/${checkedParam(idParam, termId, 'termId')}`;
}

/** `PUT /dictionaries/term/{id}/{term_id}`: sets a term's translations in the languages given. */
export async function updateDictionaryTerm(
  client: HttpRequester,
  dictionaryId: number,
  termId: number,
  translations: TermTranslationInput[],
  options?: RequestOptions,
): Promise<LooseAnswer> {
  const path = termPath(dictionaryId, termId);
  const json = await translationsBody(client, translations, callOptions(options));
  const raw = await call(client, 'PUT', path, 'read', options, { json });
  return camelResult<Record<string, unknown>>(isPlainObject(raw) ? raw : { value: raw });
}

/** `DELETE /dictionaries/term/{id}/{term_id}`. */
export async function deleteDictionaryTerm(client: HttpRequester, dictionaryId: number, termId: number, options?: RequestOptions): Promise<LooseAnswer> {
  const raw = await call(client, 'DELETE', termPath(dictionaryId, termId), 'delete', options);
  return camelResult<Record<string, unknown>>(isPlainObject(raw) ? raw : { value: raw });
}

/* ----------------------------------------------------------------------------------------- */
/* Folders                                                                                   */

function parseFolder(raw: Record<string, unknown>): Folder {
  return {
    folderId: numberOr(raw.folder_id ?? raw.id, undefined),
    teamId: numberOr(raw.team_id, undefined),
    name: typeof raw.name === 'string' ? raw.name : typeof raw.folder_name === 'string' ? raw.folder_name : '',
    raw,
  };
}

export interface ListFoldersOptions extends RequestOptions {
  limit?: number;
  /** Only the folders whose name contains this. */
  searchQuery?: string;
}

/** `GET /folders`. */
export async function listFolders(client: HttpRequester, options: ListFoldersOptions = {}): Promise<Folder[]> {
  const query: Record<string, string | number | undefined> = { search_query: options.searchQuery };
  if (options.limit !== undefined) query.limit = checkedParam(limitParam, options.limit, 'limit');
  return asArray(await call(client, 'GET', '/folders', 'read', options, { query }), 'GET /folders')
    .filter(isPlainObject)
    .map(parseFolder);
}

/** `POST /folders/create`. */
export async function createFolder(client: HttpRequester, folderName: string, options?: RequestOptions): Promise<Folder> {
  const json = validate(folderSchema, { folderName });
  const raw = await call(client, 'POST', '/folders/create', 'create', options, { json });
  return parseFolder(isPlainObject(raw) ? { name: folderName, ...raw } : { name: folderName, value: raw });
}
