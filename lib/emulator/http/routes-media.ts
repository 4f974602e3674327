/**
 * Media as the emulator answers it: transcription (`POST /transcribe`, also `/transcription`:
 * multipart with an uploaded `media_file`, or a `media_url`; its result with optional word
 * timings; bulk results), end-to-end dubbing (`POST /dub`, also `/end-to-end-dubbing`; its
 * result at `/dub-result/{run_id}` and `/dubbed-run-info/{run_id}`, one result or one per target
 * language; bulk results; other output formats through `/dub-alt-format`), subtitles
 * (`POST /sub`), and the transcripts of dubbing and subtitle runs in SRT, WebVTT or text at
 * `/transcript/{run_id}/{language}`, as the body or as a presigned file.
 *
 * Transcripts come from `transcripts.ts`; dubbed audio is the emulator's synthetic speech of the
 * translated transcript, as FLAC (no video is made: `video_url` is null). Alternative formats
 * the emulator can make are flac, wav and mp3; the others end their task in ERROR saying so.
 */
import { bool } from '../../http/validation.js';
import {
  DUB_AUDIO_FORMATS,
  dubAltFormatSchema,
  dubSchema,
  runIdsSchema,
  subtitlesSchema,
  transcriptDataTypeParam,
  transcriptFormatParam,
  transcriptionSchema,
  type TranscriptDataType,
  type TranscriptFormat,
} from '../../http/schemas.js';
import { renderTranscript, type TranscriptSegment } from '../../http/transcript.js';
import { languageTag } from '../languages.js';
import { synthesizeSpeechPcm } from '../synth.js';
import { mediaNameOfUrl, transcribeMedia, wordTimings, type EmulatedSegment } from '../transcripts.js';
import { createMp3PieceEncoder, encodeAs } from './audio.js';
import { encodeFlac } from '../../audio/flac-encoder.js';
import { sendDetail, sendError, sendJson } from './respond.js';
import {
  bulkResults,
  cached,
  created,
  decodeSegment,
  formBody,
  jsonBody,
  knownLanguages,
  queryParam,
  route,
  storedUrl,
  successfulRun,
  type Handler,
  type Route,
  type RouteContext,
  type RouteRequest,
} from './route-kit.js';
import type { EmulatedTask } from './task-store.js';

/* ----------------------------------------------------------------------------------------- */
/* Transcription                                                                             */

const createTranscription: Handler = async (ctx, r) => {
  const form = await formBody(ctx, r, transcriptionSchema, ['media_file', 'file'], false);
  if (!form || !knownLanguages(r, form.fields, ['language'])) return;
  const url = (form.fields.media_url ?? form.fields.audio_url) as string | undefined;
  const file = form.files[0];
  if (!file && url === undefined) {
    sendDetail(r.res, [{ loc: ['body', 'media_file'], msg: 'Field required: send a media_file or a media_url', type: 'missing' }]);
    return;
  }
  const media = file ? { name: file.filename, sha256: file.sha256, data: file.data } : { name: mediaNameOfUrl(url!) };
  const { media_url: _u, audio_url: _a, ...fields } = form.fields;
  // The transcript is made now, so the task keeps segments rather than the upload.
  created(r, ctx.tasks.create('transcription', r.key, { ...fields, media: media.name, url, segments: transcribeMedia(media) }));
};

function segmentsWithWords(segments: EmulatedSegment[], words: boolean): EmulatedSegment[] {
  return words ? segments.map((s) => ({ ...s, words: wordTimings(s.text, s.start, s.end) })) : segments;
}

const transcriptionResult: Handler = (ctx, r) => {
  const words = queryParam<boolean>(r, 'word_level_timestamps', bool());
  if (words === undefined) return;
  const task = successfulRun(ctx, r, ['transcription']);
  if (task) sendJson(r.res, 200, { transcript: segmentsWithWords(task.payload.segments as EmulatedSegment[], words === true) });
};

const transcriptionResults = bulkResults(runIdsSchema, ['transcription'], (_ctx, task) => ({ transcript: task.payload.segments }));

/* ----------------------------------------------------------------------------------------- */
/* Dubbing                                                                                   */

/** The target language tags of a dubbing or subtitle task. */
function targetsOf(task: EmulatedTask): string[] {
  const list = (task.payload.target_languages as unknown[] | undefined) ?? [];
  const one = task.payload.target_language;
  return [...new Set([...list, ...(one === undefined || one === null ? [] : [one])].map((l) => languageTag(l)!))];
}

/** The transcript of a dubbing or subtitle run in `tag`: the source's, a target's translation, or undefined. */
function transcriptIn(task: EmulatedTask, tag: string): EmulatedSegment[] | undefined {
  const segments = task.payload.segments as EmulatedSegment[];
  if (tag === languageTag(task.payload.source_language)) return segments;
  if (!targetsOf(task).includes(tag)) return undefined;
  return segments.map((s) => ({ ...s, text: `[${tag}] ${s.text}` }));
}

/** PCM16 mono of the dubbed speech in `tag`. */
function dubbedPcm(ctx: RouteContext, task: EmulatedTask, tag: string): Buffer {
  return cached(task, `pcm-${tag}`, () =>
    synthesizeSpeechPcm(
      transcriptIn(task, tag)!
        .map((s) => s.text)
        .join(' '),
      { sampleRate: ctx.resultSampleRate },
    ),
  );
}

function dubbedFlac(ctx: RouteContext, task: EmulatedTask, tag: string): Buffer {
  return cached(task, `flac-${tag}`, () => encodeFlac(dubbedPcm(ctx, task, tag), { sampleRate: ctx.resultSampleRate, channels: 1 }));
}

function dubbedResult(ctx: RouteContext, task: EmulatedTask, tag: string): Record<string, unknown> {
  return {
    audio_url: storedUrl(ctx, task, `dub-${tag}`, () => dubbedFlac(ctx, task, tag), `run-${task.runId}-${tag}.flac`),
    video_url: null,
    transcript: transcriptIn(task, tag),
  };
}

/** One result for one target language; one per language tag for several. */
function dubResult(ctx: RouteContext, task: EmulatedTask): Record<string, unknown> {
  const targets = targetsOf(task);
  if (targets.length === 1) return { run_id: task.runId, ...dubbedResult(ctx, task, targets[0]!) };
  return Object.fromEntries(targets.map((tag) => [tag, dubbedResult(ctx, task, tag)]));
}

const DUB_LANGUAGES = ['source_language', 'target_language', 'target_languages'];

const createDub: Handler = async (ctx, r) => {
  const body = await jsonBody(ctx, r, dubSchema);
  if (!body || !knownLanguages(r, body, DUB_LANGUAGES)) return;
  const segments = transcribeMedia({ name: mediaNameOfUrl(String(body.video_url)) });
  created(r, ctx.tasks.create('dub', r.key, { ...body, segments }));
};

/** An alternative format's file, made once. */
async function altFormatFile(ctx: RouteContext, task: EmulatedTask): Promise<{ bytes: Buffer; contentType: string } | undefined> {
  const dub = ctx.tasks.run(task.payload.dub_run_id as number);
  if (!dub) return undefined;
  const tag = String(task.payload.language);
  const format = String(task.payload.output_format);
  const made = task.cache.get('alt') as { bytes: Buffer; contentType: string } | undefined;
  if (made) return made;
  const pcm = dubbedPcm(ctx, dub, tag);
  let file: { bytes: Buffer; contentType: string };
  if (format === 'mp3') {
    const encoder = await createMp3PieceEncoder(ctx.resultSampleRate);
    file = { bytes: Buffer.concat([encoder.encode(pcm), encoder.finish()]), contentType: 'audio/mpeg' };
  } else {
    file = encodeAs(pcm, format === 'wav' ? 'wav' : 'flac', ctx.resultSampleRate);
  }
  task.cache.set('alt', file);
  return file;
}

const dubResultHandler: Handler = async (ctx, r) => {
  const task = successfulRun(ctx, r, ['dub', 'dub-alt-format']);
  if (!task) return;
  if (task.kind === 'dub') {
    sendJson(r.res, 200, dubResult(ctx, task));
    return;
  }
  const file = await altFormatFile(ctx, task);
  if (!file) {
    sendError(r.res, 404, `The dubbing run of run ${task.runId} is no longer kept.`);
    return;
  }
  sendJson(r.res, 200, {
    output_url: storedUrl(ctx, task, 'alt', () => file.bytes, `run-${task.runId}.${String(task.payload.output_format)}`, file.contentType),
  });
};

const dubbingResults = bulkResults(runIdsSchema, ['dub'], dubResult);

/** The language path parameter at `index` as a tag the run has, or undefined after answering 404/422. */
function languageParam(r: RouteRequest, task: EmulatedTask, index: number): string | undefined {
  const raw = decodeSegment(r.params[index] ?? '') ?? '';
  const tag = languageTag(/^\d+$/.test(raw) ? Number(raw) : raw);
  if (tag === undefined) {
    sendDetail(r.res, [{ loc: ['path', 'language'], msg: `Value error, unsupported language ${JSON.stringify(raw)}`, type: 'value_error' }]);
    return undefined;
  }
  if (!transcriptIn(task, tag)) {
    sendError(r.res, 404, `Run ${task.runId} has no ${tag} version: its languages are the source and ${targetsOf(task).join(', ')}.`);
    return undefined;
  }
  return tag;
}

const ALT_FORMATS_MADE: readonly string[] = ['flac', 'wav', 'mp3'];

const createAltFormat: Handler = async (ctx, r) => {
  const dub = successfulRun(ctx, r, ['dub']);
  if (!dub) return;
  const tag = languageParam(r, dub, 1);
  if (tag === undefined) return;
  const body = await jsonBody(ctx, r, dubAltFormatSchema);
  if (!body) return;
  const format = String(body.output_format);
  const outcome = ALT_FORMATS_MADE.includes(format)
    ? undefined
    : {
        status: 'ERROR',
        message: `The emulator makes ${ALT_FORMATS_MADE.join(', ')} only; ${format} (${(DUB_AUDIO_FORMATS as readonly string[]).includes(format) ? 'audio' : 'video'}) needs the service.`,
      };
  created(r, ctx.tasks.create('dub-alt-format', r.key, { dub_run_id: dub.runId, language: tag, output_format: format }, outcome));
};

/* ----------------------------------------------------------------------------------------- */
/* Subtitles and transcripts                                                                 */

const createSubtitles: Handler = async (ctx, r) => {
  const body = await jsonBody(ctx, r, subtitlesSchema);
  if (!body || !knownLanguages(r, body, ['source_language', 'target_languages'])) return;
  const segments = transcribeMedia({ name: mediaNameOfUrl(String(body.media_url)) });
  created(r, ctx.tasks.create('sub', r.key, { ...body, segments }));
};

const CONTENT_TYPES: Record<TranscriptFormat, string> = { srt: 'application/x-subrip', vtt: 'text/vtt', txt: 'text/plain' };

function asLibrarySegments(segments: EmulatedSegment[]): TranscriptSegment[] {
  return segments.map((s) => ({ startMs: s.start, endMs: s.end, text: s.text, speaker: s.speaker, words: undefined }));
}

const transcript: Handler = (ctx, r) => {
  const formatParam = queryParam<TranscriptFormat>(r, 'format_type', transcriptFormatParam);
  if (formatParam === undefined) return;
  const dataTypeParam = queryParam<TranscriptDataType>(r, 'data_type', transcriptDataTypeParam);
  if (dataTypeParam === undefined) return;
  const format = formatParam ?? 'txt';
  const dataType = dataTypeParam ?? 'raw_data';
  const task = successfulRun(ctx, r, ['dub', 'sub']);
  if (!task) return;
  const tag = languageParam(r, task, 1);
  if (tag === undefined) return;
  const text = renderTranscript(asLibrarySegments(transcriptIn(task, tag)!), format);
  if (dataType === 'raw_data') {
    sendJson(r.res, 200, { format_type: format, transcript: text });
    return;
  }
  const url = storedUrl(ctx, task, `transcript-${tag}-${format}`, () => Buffer.from(text, 'utf8'), `run-${task.runId}-${tag}.${format}`, CONTENT_TYPES[format]);
  sendJson(r.res, 200, { format_type: format, file_url: url });
};

/* ----------------------------------------------------------------------------------------- */
/* Table                                                                                     */

export const MEDIA_ROUTES: readonly Route[] = [
  route('POST', '/transcribe', createTranscription),
  route('POST', '/transcription', createTranscription),
  route('GET', '/transcription-result/{}', transcriptionResult),
  route('POST', '/transcription-results', transcriptionResults),
  route('POST', '/dub', createDub),
  route('POST', '/end-to-end-dubbing', createDub),
  route('GET', '/dub-result/{}', dubResultHandler),
  route('GET', '/dubbed-run-info/{}', dubResultHandler),
  route('POST', '/dubbing-results', dubbingResults),
  route('POST', '/dub-alt-format/{}/{}', createAltFormat),
  route('POST', '/sub', createSubtitles),
  route('GET', '/transcript/{}/{}', transcript),
];
