/**
 * Dictionaries and folders as the emulator answers them, per API key (`library-store.ts`):
 * `GET /dictionaries`, `POST /dictionaries/create-from-file` (multipart, a CSV in
 * `dictionary_file`), `GET`/`DELETE /dictionaries/{id}`, `GET /dictionaries/{id}/full-details`
 * (`limit`, `search_term`), `POST /dictionaries/{id}/add-term`, `PUT` and `DELETE
 * /dictionaries/term/{id}/{term_id}`; `GET /folders` (`limit`, `search_query`) and
 * `POST /folders/create`. Another key's dictionary answers 403, an unknown one 404.
 */
import { dictionaryFromFileSchema, folderSchema, limitParam, termTranslationsSchema } from '../../http/schemas.js';
import { str } from '../../http/validation.js';
import { languageId } from '../languages.js';
import { DictionaryFileError, parseDictionaryCsv, type Dictionary, type TermTranslation } from './library-store.js';
import { sendDetail, sendError, sendJson } from './respond.js';
import {
  formBody,
  intParam,
  jsonBody,
  knownLanguages,
  queryParam,
  route,
  type Handler,
  type Route,
  type RouteContext,
  type RouteRequest,
} from './route-kit.js';
import { PROJECT_ROUTES } from './routes-projects.js';

/** The key's dictionary of path parameter 0, or undefined after answering 403/404/422. */
function ownDictionary(ctx: RouteContext, r: RouteRequest): Dictionary | undefined {
  const id = intParam(r, 0, 'dictionary_id');
  if (id === undefined) return undefined;
  const dictionary = ctx.library.dictionary(r.key, id);
  if (dictionary) return dictionary;
  if (ctx.library.dictionaryOfAnother(r.key, id)) sendError(r.res, 403, `Dictionary ${id} belongs to another API key.`);
  else sendError(r.res, 404, `No dictionary ${id}.`);
  return undefined;
}

const listDictionaries: Handler = (ctx, r) => sendJson(r.res, 200, ctx.library.dictionaries(r.key));

const createFromFile: Handler = async (ctx, r) => {
  const form = await formBody(ctx, r, dictionaryFromFileSchema, ['dictionary_file']);
  if (!form) return;
  const file = form.files[0]!;
  let terms: TermTranslation[][];
  try {
    if (file.data === undefined) throw new DictionaryFileError('the file is too large for a dictionary');
    terms = parseDictionaryCsv(file.data.toString('utf8'));
  } catch (error) {
    if (!(error instanceof DictionaryFileError)) throw error;
    sendDetail(r.res, [{ loc: ['body', 'dictionary_file'], msg: `Value error, ${error.message}`, type: 'value_error' }]);
    return;
  }
  const f = form.fields;
  const dictionary = ctx.library.createDictionary(
    r.key,
    String(f.dictionary_name),
    typeof f.dictionary_description === 'string' ? f.dictionary_description : null,
    terms,
  );
  sendJson(r.res, 200, { dictionary_id: dictionary.id, terms: dictionary.dictionary_terms.length });
};

const dictionaryInfo: Handler = (ctx, r) => {
  const dictionary = ownDictionary(ctx, r);
  if (dictionary) sendJson(r.res, 200, dictionary);
};

const dictionaryDetails: Handler = (ctx, r) => {
  const limit = queryParam<number>(r, 'limit', limitParam);
  if (limit === undefined) return;
  const search = queryParam<string>(r, 'search_term', str(0));
  if (search === undefined) return;
  const dictionary = ownDictionary(ctx, r);
  if (!dictionary) return;
  const needle = search?.toLowerCase();
  const terms = dictionary.dictionary_terms.filter((t) => !needle || t.term_translations.some((tr) => tr.term_text.toLowerCase().includes(needle)));
  sendJson(r.res, 200, { ...dictionary, dictionary_terms: limit === null ? terms : terms.slice(0, limit) });
};

const deleteDictionary: Handler = (ctx, r) => {
  const dictionary = ownDictionary(ctx, r);
  if (dictionary && ctx.library.deleteDictionary(r.key, dictionary.id)) sendJson(r.res, 200, { status: 'ok' });
};

/** The body's translations with language ids, or undefined after answering 422. */
async function translations(ctx: RouteContext, r: RouteRequest): Promise<TermTranslation[] | undefined> {
  const body = await jsonBody(ctx, r, termTranslationsSchema);
  if (!body) return undefined;
  const list = body.translations as { translation: string; language: number | string }[];
  const languages = Object.fromEntries(list.map((t, i) => [`translations.${i}.language`, t.language]));
  if (!knownLanguages(r, languages, Object.keys(languages))) return undefined;
  return list.map((t) => ({ language: languageId(t.language)!, term_text: t.translation }));
}

const addTerm: Handler = async (ctx, r) => {
  const dictionary = ownDictionary(ctx, r);
  if (!dictionary) return void r.req.resume();
  const list = await translations(ctx, r);
  if (list) sendJson(r.res, 200, { term_id: ctx.library.addTerm(dictionary, list).id });
};

const updateTerm: Handler = async (ctx, r) => {
  const dictionary = ownDictionary(ctx, r);
  if (!dictionary) return void r.req.resume();
  const termId = intParam(r, 1, 'term_id');
  if (termId === undefined) return void r.req.resume();
  const list = await translations(ctx, r);
  if (!list) return;
  if (ctx.library.updateTerm(dictionary, termId, list)) sendJson(r.res, 200, { status: 'ok' });
  else sendError(r.res, 404, `Dictionary ${dictionary.id} has no term ${termId}.`);
};

const deleteTerm: Handler = (ctx, r) => {
  const dictionary = ownDictionary(ctx, r);
  if (!dictionary) return;
  const termId = intParam(r, 1, 'term_id');
  if (termId === undefined) return;
  if (ctx.library.deleteTerm(dictionary, termId)) sendJson(r.res, 200, { status: 'ok' });
  else sendError(r.res, 404, `Dictionary ${dictionary.id} has no term ${termId}.`);
};

const listFolders: Handler = (ctx, r) => {
  const limit = queryParam<number>(r, 'limit', limitParam);
  if (limit === undefined) return;
  const search = r.url.searchParams.get('search_query')?.toLowerCase();
  const folders = ctx.library.folders(r.key).filter((f) => !search || f.name.toLowerCase().includes(search));
  sendJson(r.res, 200, limit === null ? folders : folders.slice(0, limit));
};

const createFolder: Handler = async (ctx, r) => {
  const body = await jsonBody(ctx, r, folderSchema);
  if (body) sendJson(r.res, 200, ctx.library.createFolder(r.key, String(body.folder_name)));
};

export const LIBRARY_ROUTES: readonly Route[] = [
  route('GET', '/dictionaries', listDictionaries),
  route('POST', '/dictionaries/create-from-file', createFromFile),
  route('GET', '/dictionaries/{}', dictionaryInfo),
  route('DELETE', '/dictionaries/{}', deleteDictionary),
  route('GET', '/dictionaries/{}/full-details', dictionaryDetails),
  route('POST', '/dictionaries/{}/add-term', addTerm),
  route('PUT', '/dictionaries/term/{}/{}', updateTerm),
  route('DELETE', '/dictionaries/term/{}/{}', deleteTerm),
  route('GET', '/folders', listFolders),
  route('POST', '/folders/create', createFolder),
  ...PROJECT_ROUTES,
];
