/**
 * Languages and text translation as the emulator answers them: the two language lists, the
 * translation task (`POST /translate`, and the interface's `POST /translation`), its bulk
 * results (its single result is `GET /translation-result/{run_id}`, shared with translated TTS),
 * and `POST /translation/stream`, which streams the translation as UTF-8 text in small pieces
 * (7 bytes, `ttsStreamDelayMs` apart, so a character may be split between two pieces).
 */
import { runIdsSchema, translationSchema, translationStreamSchema } from '../../http/schemas.js';
import { SOURCE_LANGUAGES, TARGET_LANGUAGES } from '../languages.js';
import { sendJson } from './respond.js';
import { bulkResults, created, emulatedTranslation, jsonBody, knownLanguages, route, streamBytes, type Handler, type Route } from './route-kit.js';

const LANGUAGE_FIELDS = ['source_language', 'target_language'];

const createTranslation: Handler = async (ctx, r) => {
  const body = await jsonBody(ctx, r, translationSchema);
  if (body && knownLanguages(r, body, LANGUAGE_FIELDS)) created(r, ctx.tasks.create('translation', r.key, body));
};

const translationResults = bulkResults(runIdsSchema, ['translation'], (_ctx, task) => ({
  texts: (task.payload.texts as string[]).map((t) => emulatedTranslation(t, task.payload.target_language)),
}));

/** Bytes per piece of a streamed translation: small, so multi-byte characters get split. */
const STREAM_PIECE_BYTES = 7;

const translationStream: Handler = async (ctx, r) => {
  const body = await jsonBody(ctx, r, translationStreamSchema);
  if (!body || !knownLanguages(r, body, LANGUAGE_FIELDS)) return;
  const bytes = Buffer.from(emulatedTranslation(String(body.text), body.target_language), 'utf8');
  r.res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
  await streamBytes(ctx, r.res, bytes, STREAM_PIECE_BYTES, ctx.streamDelayMs);
};

export const TEXT_ROUTES: readonly Route[] = [
  route('GET', '/source-languages', (_ctx, r) => sendJson(r.res, 200, SOURCE_LANGUAGES)),
  route('GET', '/target-languages', (_ctx, r) => sendJson(r.res, 200, TARGET_LANGUAGES)),
  route('POST', '/translate', createTranslation),
  route('POST', '/translation', createTranslation),
  route('POST', '/translation/stream', translationStream),
  route('POST', '/translation-results', translationResults),
];
