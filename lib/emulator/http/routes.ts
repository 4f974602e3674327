/**
 * The endpoints of the service interface as the emulator answers them (translated TTS, TTS
 * results, project setup, legacy TTS, audio separation, voice deletion, `/tts-stream`), and the
 * route table of every endpoint: these, the task status routes of `task-kinds.ts` (at the SDK's
 * paths and the interface's aliases), and the endpoints beyond the interface (`routes-*.ts`).
 * Validation uses the client's schemas, so both sides enforce the same limits; the emulator
 * reports every issue as `detail[]`, with `loc` starting at `body`, `path` or `query`. A voice
 * the key cannot speak with (neither public nor its own) and a language the emulator does not
 * list are 422 too.
 */
import type { ServerResponse } from 'node:http';
import { separateTracks, synthesizeFlac } from '../synth.js';
import {
  audioSeparationSchema,
  legacyTtsSchema,
  projectSetupSchema,
  runIdsSchema,
  translatedTtsSchema,
  ttsStreamSchema,
  type OutputFormat,
} from '../../http/schemas.js';
import { EMULATED_FORMATS, MP3_SAMPLE_RATES, createMp3PieceEncoder, encodeAs, sniffAudio, type Mp3PieceEncoder } from './audio.js';
import { sendDetail, sendError, sendJson, writeWithBackpressure } from './respond.js';
import {
  bulkResults,
  cached,
  created,
  emulatedTranslation,
  formBody,
  intParam,
  jsonBody,
  knownLanguages,
  resultAudio,
  route,
  statusRoutes,
  storedUrl,
  streamBytes,
  successfulRun,
  usableVoices,
  type Handler,
  type Route,
  type RouteContext,
} from './route-kit.js';
import { LIBRARY_ROUTES } from './routes-library.js';
import { MEDIA_ROUTES } from './routes-media.js';
import { TEXT_ROUTES } from './routes-text.js';
import { VOICE_ROUTES } from './routes-voices.js';
import { STREAM_ROUTES } from './routes-streams.js';
import type { EmulatedTask } from './task-store.js';

export type { RouteContext, RouteRequest } from './route-kit.js';
export { emulatedTranslation } from './route-kit.js';

/* ----------------------------------------------------------------------------------------- */
/* Results                                                                                   */

function resultText(task: EmulatedTask): string {
  return task.kind === 'translated-tts' ? emulatedTranslation(String(task.payload.text), task.payload.target_language) : String(task.payload.text);
}

function resultFlac(ctx: RouteContext, task: EmulatedTask): Buffer {
  return cached(task, 'flac', () => synthesizeFlac(resultText(task), { sampleRate: ctx.resultSampleRate }));
}

/**
 * Streams `pcm` (PCM16 LE mono) as MP3: `chunkMs` of audio encoded at a time, each piece written
 * as soon as the encoder completes frames, `delayMs` apart; stops if the client goes.
 */
async function streamMp3(
  ctx: RouteContext,
  res: ServerResponse,
  encoder: Mp3PieceEncoder,
  pcm: Buffer,
  rate: number,
  chunkMs: number,
  delayMs: number,
): Promise<void> {
  const step = Math.max(2, Math.round((rate * chunkMs) / 1000) * 2);
  for (let offset = 0; offset < pcm.length; offset += step) {
    const piece = encoder.encode(pcm.subarray(offset, offset + step));
    if (piece.length > 0 && !(await writeWithBackpressure(res, piece))) return;
    if (delayMs > 0 && offset + step < pcm.length) await ctx.sleep(delayMs, res);
    if (res.destroyed) return;
  }
  const last = encoder.finish();
  if (last.length > 0 && !(await writeWithBackpressure(res, last))) return;
  res.end();
}

/* ----------------------------------------------------------------------------------------- */
/* Handlers                                                                                  */

const createTranslatedTts: Handler = async (ctx, r) => {
  const body = await jsonBody(ctx, r, translatedTtsSchema);
  if (body && knownLanguages(r, body, ['source_language', 'target_language']) && usableVoices(ctx, r, body, ['voice_id'])) {
    created(r, ctx.tasks.create('translated-tts', r.key, body));
  }
};

const translationResult: Handler = (ctx, r) => {
  const task = successfulRun(ctx, r, ['translated-tts', 'translation']);
  if (!task) return;
  if (task.kind === 'translation') {
    sendJson(r.res, 200, { texts: (task.payload.texts as string[]).map((t) => emulatedTranslation(t, task.payload.target_language)) });
    return;
  }
  // The interface names translated_text; the SDK and the service's documentation answer texts.
  const text = resultText(task);
  sendJson(r.res, 200, { translated_text: text, texts: [text], run_id: task.runId });
};

/** The translated flow names the URL field audio_url; the legacy flow output_url (facts.md). */
const ttsResult = resultAudio(
  ['translated-tts', 'tts'],
  (ctx, task) => ({ bytes: resultFlac(ctx, task), contentType: 'audio/flac', name: `run-${task.runId}.flac` }),
  (task) => (task.kind === 'translated-tts' ? 'audio_url' : 'output_url'),
);

const ttsResults = bulkResults(runIdsSchema, ['translated-tts', 'tts'], (ctx, task) => ({
  output_url: storedUrl(ctx, task, 'result', () => resultFlac(ctx, task), `run-${task.runId}.flac`),
}));

const createProjectSetup: Handler = async (ctx, r) => {
  const body = await jsonBody(ctx, r, projectSetupSchema);
  if (body && knownLanguages(r, body, ['source_language', 'target_languages'])) created(r, ctx.tasks.create('project-setup', r.key, body));
};

const createLegacyTts: Handler = async (ctx, r) => {
  const body = await jsonBody(ctx, r, legacyTtsSchema);
  if (body && knownLanguages(r, body, ['language']) && usableVoices(ctx, r, body, ['voice_id'])) created(r, ctx.tasks.create('tts', r.key, body));
};

const createAudioSeparation: Handler = async (ctx, r) => {
  const form = await formBody(ctx, r, audioSeparationSchema, ['media_file', 'file']);
  if (!form) return;
  const file = form.files[0]!;
  const kind = sniffAudio(file.head);
  if (!kind) {
    sendDetail(r.res, [{ loc: ['body', file.name], msg: 'Value error, the file is not WAV, MP3, FLAC or AAC audio', type: 'value_error' }]);
    return;
  }
  created(r, ctx.tasks.create('audio-separation', r.key, { ...form.fields, filename: file.filename, bytes: file.size, format: kind }));
};

function separationTracks(ctx: RouteContext, task: EmulatedTask): Record<string, unknown> {
  const tracks = (): { foreground: Buffer; background: Buffer } =>
    cached(task, 'tracks', () => separateTracks(String(task.payload.filename ?? task.id), { sampleRate: ctx.resultSampleRate }));
  return {
    foreground_audio_url: storedUrl(ctx, task, 'fg', () => tracks().foreground, `run-${task.runId}-foreground.flac`),
    background_audio_url: storedUrl(ctx, task, 'bg', () => tracks().background, `run-${task.runId}-background.flac`),
  };
}

const separationResult: Handler = (ctx, r) => {
  const task = successfulRun(ctx, r, ['audio-separation']);
  if (task) sendJson(r.res, 200, separationTracks(ctx, task));
};

const separationResults = bulkResults(runIdsSchema, ['audio-separation'], (ctx, task) => ({
  run_id: task.runId,
  status: 'SUCCESS',
  ...separationTracks(ctx, task),
}));

const deleteVoice: Handler = (ctx, r) => {
  const voiceId = intParam(r, 0, 'voice_id');
  if (voiceId === undefined) return;
  if (!ctx.voices.delete(r.key, voiceId)) {
    sendError(r.res, 403, `Voice ${voiceId} is not a custom voice of this API key's workspace; only your own voices can be deleted.`);
    return;
  }
  sendJson(r.res, 200, { status: 'ok' });
};

const ttsStream: Handler = async (ctx, r) => {
  const body = await jsonBody(ctx, r, ttsStreamSchema);
  if (!body || !knownLanguages(r, body, ['language']) || !usableVoices(ctx, r, body, ['voice_id'])) return;
  const config = (body.output_configuration ?? {}) as { format?: OutputFormat; sample_rate?: number; duration?: number };
  const format = config.format ?? 'mp3';
  if (!EMULATED_FORMATS.includes(format)) {
    sendDetail(r.res, [
      {
        loc: ['body', 'output_configuration', 'format'],
        msg: `Value error, ${format} is not supported by the emulator; ask for one of ${EMULATED_FORMATS.join(', ')}`,
        type: 'value_error',
      },
    ]);
    return;
  }
  const rate = config.sample_rate ?? ctx.streamSampleRate;
  if (rate < 8000 || rate > 192_000) {
    sendDetail(r.res, [{ loc: ['body', 'output_configuration', 'sample_rate'], msg: 'Value error, sample_rate must be 8000 to 192000', type: 'value_error' }]);
    return;
  }
  if (format === 'mp3' && !MP3_SAMPLE_RATES.includes(rate)) {
    sendDetail(r.res, [
      {
        loc: ['body', 'output_configuration', 'sample_rate'],
        msg: `Value error, mp3 carries one of ${MP3_SAMPLE_RATES.join(', ')} Hz`,
        type: 'value_error',
      },
    ]);
    return;
  }
  const text = String(body.text);
  const durationMs = config.duration === undefined ? undefined : Math.min(600_000, config.duration * 1000);
  const credits = String([...text].length);
  if (format === 'mp3') {
    const pcm = ctx.pcm.get(text, rate, durationMs);
    const encoder = await createMp3PieceEncoder(rate);
    r.res.writeHead(200, { 'content-type': 'audio/mpeg', 'x-credits-required': credits });
    await streamMp3(ctx, r.res, encoder, pcm, rate, ctx.streamChunkMs, ctx.streamDelayMs);
    return;
  }
  const { bytes, contentType } = encodeAs(ctx.pcm.get(text, rate, durationMs), format, rate);
  r.res.writeHead(200, { 'content-type': contentType, 'x-credits-required': credits });
  // Chunks deliberately end mid-sample (the real service does), to exercise re-alignment.
  const bytesPerSecond = format === 'pcm_s16le' || format === 'pcm_s16be' || format === 'wav' || format === 'flac' ? rate * 2 : rate * 4;
  const chunk = Math.max(1, Math.round((bytesPerSecond * ctx.streamChunkMs) / 1000)) | 1;
  await streamBytes(ctx, r.res, bytes, chunk, ctx.streamDelayMs);
};

/* ----------------------------------------------------------------------------------------- */
/* Table                                                                                     */

export const ROUTES: readonly Route[] = [
  route('POST', '/translated-tts', createTranslatedTts),
  route('GET', '/translation-result/{}', translationResult),
  route('GET', '/tts-result/{}', ttsResult),
  route('POST', '/tts-results', ttsResults),
  route('POST', '/project-setup', createProjectSetup),
  route('POST', '/tts', createLegacyTts),
  route('POST', '/audio-separation', createAudioSeparation),
  route('GET', '/audio-separation-result/{}', separationResult),
  route('POST', '/audio-separation-results', separationResults),
  route('DELETE', '/delete-voice/{}', deleteVoice),
  route('POST', '/tts-stream', ttsStream),
  ...VOICE_ROUTES,
  ...TEXT_ROUTES,
  ...MEDIA_ROUTES,
  ...LIBRARY_ROUTES,
  ...STREAM_ROUTES,
  ...statusRoutes(),
];

/** The route for `method` and `path`: a handler with its path params, `405` or `404`. */
export function matchRoute(method: string, path: string): { handler: Handler; params: string[] } | 405 | 404 {
  let pathMatched = false;
  for (const entry of ROUTES) {
    const match = entry.pattern.exec(path);
    if (!match) continue;
    pathMatched = true;
    if (entry.method === method) return { handler: entry.handler, params: match.slice(1) };
  }
  return pathMatched ? 405 : 404;
}
