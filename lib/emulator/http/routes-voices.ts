/**
 * Voices as the emulator answers them: `GET /list-voices` (the stock voices and the key's own),
 * `POST /create-custom-voice` (multipart: a reference recording in `file`, which must be audio;
 * the new voice belongs to the key and works at once on the realtime side as a cloned voice),
 * and the text-to-voice flow (`POST /text-to-voice`, its status, and
 * `GET /text-to-voice-result/{run_id}`: three presigned FLAC previews of the text, one per
 * rendition of the described voice).
 */
import { customVoiceSchema, textToVoiceSchema } from '../../http/schemas.js';
import { synthesizeFlac } from '../synth.js';
import { sniffAudio } from './audio.js';
import { sendDetail, sendJson } from './respond.js';
import { cached, created, formBody, jsonBody, knownLanguages, route, storedUrl, successfulRun, type Handler, type Route } from './route-kit.js';

const listVoices: Handler = (ctx, r) => {
  sendJson(r.res, 200, ctx.voices.listFor(r.key));
};

const createCustomVoice: Handler = async (ctx, r) => {
  const form = await formBody(ctx, r, customVoiceSchema, ['file']);
  if (!form || !knownLanguages(r, form.fields, ['language'])) return;
  const file = form.files[0]!;
  if (!sniffAudio(file.head)) {
    sendDetail(r.res, [{ loc: ['body', 'file'], msg: 'Value error, the reference file is not WAV, MP3, FLAC or AAC audio', type: 'value_error' }]);
    return;
  }
  const f = form.fields;
  const voice = ctx.voices.add(r.key, {
    voice_name: String(f.voice_name),
    gender: f.gender as number,
    age: typeof f.age === 'number' ? f.age : null,
    language: typeof f.language === 'number' ? f.language : null,
    description: typeof f.description === 'string' ? f.description : null,
    is_published: f.publish_voice_to_market_place === true,
    transcript: null,
  });
  sendJson(r.res, 200, { voice_id: voice.id });
};

const createTextToVoice: Handler = async (ctx, r) => {
  const body = await jsonBody(ctx, r, textToVoiceSchema);
  if (body) created(r, ctx.tasks.create('text-to-voice', r.key, body));
};

/** Renditions of a described voice the emulator offers as previews. */
const PREVIEWS = 3;

const textToVoiceResult: Handler = (ctx, r) => {
  const task = successfulRun(ctx, r, ['text-to-voice']);
  if (!task) return;
  const text = String(task.payload.text);
  const previews = Array.from({ length: PREVIEWS }, (_, i) =>
    storedUrl(
      ctx,
      task,
      `preview-${i}`,
      () => cached(task, `preview-bytes-${i}`, () => synthesizeFlac(text, { sampleRate: ctx.resultSampleRate, seed: i + 1 })),
      `run-${task.runId}-preview-${i + 1}.flac`,
    ),
  );
  sendJson(r.res, 200, { previews });
};

export const VOICE_ROUTES: readonly Route[] = [
  route('GET', '/list-voices', listVoices),
  route('POST', '/create-custom-voice', createCustomVoice),
  route('POST', '/text-to-voice', createTextToVoice),
  route('GET', '/text-to-voice-result/{}', textToVoiceResult),
];
