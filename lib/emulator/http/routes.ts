/**
 * The endpoints of the service interface as the emulator answers them. Validation uses the
 * client's schemas (`lib/http/validation.ts`), so both sides enforce the same limits; the
 * emulator reports every issue as `detail[]`, with `loc` starting at `body`, `path` or `query`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { separateTracks, synthesizeFlac } from '../synth.js';
import type { FileStore } from './files.js';
import { collectIssues, type Check } from '../../http/validation.js';
import {
  legacyTtsSchema,
  outputTypeParam,
  projectSetupSchema,
  runIdsSchema,
  translatedTtsSchema,
  ttsStreamSchema,
  type OutputFormat,
} from '../../http/schemas.js';
import { EMULATED_FORMATS, MP3_SAMPLE_RATES, PcmCache, createMp3PieceEncoder, encodeAs, sniffAudio, type Mp3PieceEncoder } from './audio.js';
import { MultipartError, multipartBoundary, parseMultipart } from './multipart.js';
import {
  BodyTooLargeError,
  issuesToDetail,
  parseJsonBody,
  readBody,
  sendDetail,
  sendError,
  sendJson,
  sendTooLarge,
  writeWithBackpressure,
} from './respond.js';
import type { EmulatedTask, TaskKind, TaskStore } from './task-store.js';

export interface RouteContext {
  tasks: TaskStore;
  files: FileStore;
  /** Custom voices per API key. */
  voices: Map<string, Set<number>>;
  pcm: PcmCache;
  /** Sample rate of task results (FLAC). */
  resultSampleRate: number;
  /** Default sample rate of `/tts-stream`. */
  streamSampleRate: number;
  streamChunkMs: number;
  streamDelayMs: number;
  maxJsonBytes: number;
  maxUploadBytes: number;
  /** Resolves after `ms`, or at once when `res` closes or the emulator shuts down. */
  sleep(ms: number, res: ServerResponse): Promise<void>;
}

export interface RouteRequest {
  req: IncomingMessage;
  res: ServerResponse;
  key: string;
  url: URL;
  params: string[];
}

type Handler = (ctx: RouteContext, r: RouteRequest) => Promise<void> | void;

interface Route {
  method: string;
  pattern: RegExp;
  handler: Handler;
}

/* ----------------------------------------------------------------------------------------- */
/* Shared steps                                                                              */

async function jsonBody(ctx: RouteContext, r: RouteRequest, schema: Check): Promise<Record<string, unknown> | undefined> {
  let body: Buffer;
  try {
    body = await readBody(r.req, ctx.maxJsonBytes);
  } catch (error) {
    if (error instanceof BodyTooLargeError) sendTooLarge(r.req, r.res, error.limit);
    else r.res.destroy();
    return undefined;
  }
  const parsed = parseJsonBody(body);
  if ('detail' in parsed) {
    sendDetail(r.res, parsed.detail);
    return undefined;
  }
  const { value, issues } = collectIssues(schema, parsed.value);
  if (issues.length > 0) {
    sendDetail(r.res, issuesToDetail(issues, 'body'));
    return undefined;
  }
  return value as Record<string, unknown>;
}

/** A positive integer path parameter, or a 422 answered. */
function intParam(r: RouteRequest, index: number, name: string): number | undefined {
  const raw = r.params[index] ?? '';
  if (!/^\d+$/.test(raw)) {
    sendDetail(r.res, [{ loc: ['path', name], msg: 'Input should be a valid integer, unable to parse string as an integer', type: 'int_parsing' }]);
    return undefined;
  }
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < 1) {
    sendDetail(r.res, [{ loc: ['path', name], msg: 'Input should be greater than or equal to 1', type: 'greater_than_equal' }]);
    return undefined;
  }
  return value;
}

/** A percent-encoded path segment decoded, or undefined when its encoding is malformed. */
function decodeSegment(raw: string): string | undefined {
  try {
    return decodeURIComponent(raw);
  } catch {
    return undefined;
  }
}

/** The task named in the path, if it exists and belongs to the key (else 404/403 answered). */
function ownedTask(ctx: RouteContext, r: RouteRequest, kind: TaskKind): EmulatedTask | undefined {
  const raw = r.params[0] ?? '';
  const id = decodeSegment(raw);
  if (id === undefined) {
    // No task has an id that is not valid percent-encoding: unknown, like any other id.
    sendError(r.res, 404, `No ${kind} task ${raw} (the task id is not valid percent-encoding).`);
    return undefined;
  }
  const task = ctx.tasks.task(id);
  if (!task || task.kind !== kind) {
    sendError(r.res, 404, `No ${kind} task ${id}.`);
    return undefined;
  }
  if (task.owner !== r.key) {
    sendError(r.res, 403, `Task ${id} belongs to another API key.`);
    return undefined;
  }
  return task;
}

/** The finished, successful run named in the path (else 404/403/409 answered). */
function successfulRun(ctx: RouteContext, r: RouteRequest, kinds: TaskKind[]): EmulatedTask | undefined {
  const runId = intParam(r, 0, 'run_id');
  if (runId === undefined) return undefined;
  const task = ctx.tasks.run(runId);
  if (!task || !kinds.includes(task.kind)) {
    sendError(r.res, 404, `No run ${runId} with this result.`);
    return undefined;
  }
  if (task.owner !== r.key) {
    sendError(r.res, 403, `Run ${runId} belongs to another API key.`);
    return undefined;
  }
  if (ctx.tasks.status(task) !== 'SUCCESS') {
    sendError(r.res, 404, `Run ${runId} has no result: its task is ${ctx.tasks.status(task)}.`);
    return undefined;
  }
  return task;
}

function created(r: RouteRequest, task: EmulatedTask): void {
  sendJson(r.res, 200, { task_id: task.id, run_id: null });
}

function statusOf(kind: TaskKind): Handler {
  return (ctx, r) => {
    const task = ownedTask(ctx, r, kind);
    if (task) sendJson(r.res, 200, ctx.tasks.statusBody(task));
  };
}

/** The emulator's "translation": the text, tagged with the target language. */
export function emulatedTranslation(text: string, target: unknown): string {
  return `[${String(target)}] ${text}`;
}

function resultText(task: EmulatedTask): string {
  return task.kind === 'translated-tts'
    ? emulatedTranslation(String(task.payload.text), task.payload.target_language)
    : String(task.payload.text);
}

function resultFlac(ctx: RouteContext, task: EmulatedTask): Buffer {
  let flac = task.cache.get('flac') as Buffer | undefined;
  if (!flac) {
    flac = synthesizeFlac(resultText(task), { sampleRate: ctx.resultSampleRate });
    task.cache.set('flac', flac);
  }
  return flac;
}

/** A presigned URL of a stored result, storing it on first use; fresh expiry each call. */
function storedUrl(ctx: RouteContext, task: EmulatedTask, slot: string, bytes: () => Buffer, name: string): string {
  const path = task.cache.get(`file:${slot}`) as string | undefined;
  if (path && ctx.files.get(path)) return ctx.files.presign(path);
  const file = ctx.files.put(bytes(), 'audio/flac', name);
  task.cache.set(`file:${slot}`, file.path);
  return file.url;
}

/** Streams `bytes` in `chunk`-byte pieces with `delayMs` between them; stops if the client goes. */
async function streamBytes(ctx: RouteContext, res: ServerResponse, bytes: Buffer, chunk: number, delayMs: number): Promise<void> {
  for (let offset = 0; offset < bytes.length; offset += chunk) {
    if (!(await writeWithBackpressure(res, bytes.subarray(offset, offset + chunk)))) return;
    if (delayMs > 0 && offset + chunk < bytes.length) await ctx.sleep(delayMs, res);
    if (res.destroyed) return;
  }
  res.end();
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
  if (body) created(r, ctx.tasks.create('translated-tts', r.key, body));
};

const translationResult: Handler = (ctx, r) => {
  const task = successfulRun(ctx, r, ['translated-tts']);
  if (task) sendJson(r.res, 200, { translated_text: resultText(task), run_id: task.runId });
};

const ttsResult: Handler = async (ctx, r) => {
  const outputType = r.url.searchParams.get('output_type') ?? 'raw_bytes';
  const { issues } = collectIssues(outputTypeParam, outputType, { loc: ['output_type'] });
  if (issues.length > 0) {
    sendDetail(r.res, issuesToDetail(issues, 'query'));
    return;
  }
  const task = successfulRun(ctx, r, ['translated-tts', 'tts']);
  if (!task) return;
  if (outputType === 'file_url') {
    const url = storedUrl(ctx, task, 'tts', () => resultFlac(ctx, task), `run-${task.runId}.flac`);
    // The translated flow names the field audio_url; the legacy flow output_url (facts.md).
    sendJson(r.res, 200, task.kind === 'translated-tts' ? { audio_url: url } : { output_url: url });
    return;
  }
  const flac = resultFlac(ctx, task);
  r.res.writeHead(200, { 'content-type': 'audio/flac', 'content-length': flac.length });
  await streamBytes(ctx, r.res, flac, 16 * 1024, 0);
};

const createProjectSetup: Handler = async (ctx, r) => {
  const body = await jsonBody(ctx, r, projectSetupSchema);
  if (body) created(r, ctx.tasks.create('project-setup', r.key, body));
};

const createLegacyTts: Handler = async (ctx, r) => {
  const body = await jsonBody(ctx, r, legacyTtsSchema);
  if (body) created(r, ctx.tasks.create('tts', r.key, body));
};

const createAudioSeparation: Handler = async (ctx, r) => {
  const boundary = multipartBoundary(r.req.headers['content-type']);
  if (!boundary) {
    sendDetail(r.res, [{ loc: ['body', 'media_file'], msg: 'Field required (send multipart/form-data with an audio file)', type: 'missing' }]);
    r.req.resume();
    return;
  }
  let body: Buffer;
  try {
    body = await readBody(r.req, ctx.maxUploadBytes);
  } catch (error) {
    if (error instanceof BodyTooLargeError) sendTooLarge(r.req, r.res, error.limit);
    else r.res.destroy();
    return;
  }
  let parts;
  try {
    parts = parseMultipart(body, boundary);
  } catch (error) {
    sendDetail(r.res, [{ loc: ['body'], msg: `There was an error parsing the body: ${(error as MultipartError).message}`, type: 'value_error' }]);
    return;
  }
  const file = parts.find((p) => p.filename !== undefined);
  if (!file) {
    sendDetail(r.res, [{ loc: ['body', 'media_file'], msg: 'Field required', type: 'missing' }]);
    return;
  }
  const kind = sniffAudio(file.data);
  if (!kind) {
    sendDetail(r.res, [
      { loc: ['body', file.name], msg: 'Value error, the file is not WAV, MP3, FLAC or AAC audio', type: 'value_error' },
    ]);
    return;
  }
  const task = ctx.tasks.create('audio-separation', r.key, { filename: file.filename, bytes: file.data.length, format: kind });
  created(r, task);
};

const separationResults: Handler = async (ctx, r) => {
  const body = await jsonBody(ctx, r, runIdsSchema);
  if (!body) return;
  const out: Record<string, Record<string, unknown>> = {};
  for (const runId of body.run_ids as number[]) {
    const task = ctx.tasks.run(runId);
    if (!task || task.owner !== r.key) {
      out[String(runId)] = { run_id: runId, status: 'ERROR', error: `Run ${runId} does not exist.` };
      continue;
    }
    if (task.kind !== 'audio-separation') {
      out[String(runId)] = { run_id: runId, status: 'ERROR', error: `Run ${runId} is not an audio separation run.` };
      continue;
    }
    const status = ctx.tasks.status(task);
    if (status !== 'SUCCESS') {
      const error = status === 'PENDING' ? 'The run is not finished yet.' : (task.outcome.message ?? `The run ended with ${status}.`);
      out[String(runId)] = { run_id: runId, status, error };
      continue;
    }
    const tracks = (): { foreground: Buffer; background: Buffer } => {
      let made = task.cache.get('tracks') as { foreground: Buffer; background: Buffer } | undefined;
      if (!made) {
        made = separateTracks(String(task.payload.filename ?? task.id), { sampleRate: ctx.resultSampleRate });
        task.cache.set('tracks', made);
      }
      return made;
    };
    out[String(runId)] = {
      run_id: runId,
      status: 'SUCCESS',
      foreground_audio_url: storedUrl(ctx, task, 'fg', () => tracks().foreground, `run-${runId}-foreground.flac`),
      background_audio_url: storedUrl(ctx, task, 'bg', () => tracks().background, `run-${runId}-background.flac`),
    };
  }
  sendJson(r.res, 200, out);
};

const deleteVoice: Handler = (ctx, r) => {
  const voiceId = intParam(r, 0, 'voice_id');
  if (voiceId === undefined) return;
  const owned = ctx.voices.get(r.key);
  if (!owned?.has(voiceId)) {
    sendError(r.res, 403, `Voice ${voiceId} is not a custom voice of this API key's workspace; only your own voices can be deleted.`);
    return;
  }
  owned.delete(voiceId);
  sendJson(r.res, 200, { status: 'ok' });
};

const ttsStream: Handler = async (ctx, r) => {
  const body = await jsonBody(ctx, r, ttsStreamSchema);
  if (!body) return;
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
    sendDetail(r.res, [
      { loc: ['body', 'output_configuration', 'sample_rate'], msg: 'Value error, sample_rate must be 8000 to 192000', type: 'value_error' },
    ]);
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

const SEGMENT = '([^/]+)';

export const ROUTES: readonly Route[] = [
  { method: 'POST', pattern: /^\/translated-tts$/, handler: createTranslatedTts },
  { method: 'GET', pattern: new RegExp(`^/translated-tts/${SEGMENT}$`), handler: statusOf('translated-tts') },
  { method: 'GET', pattern: new RegExp(`^/translation-result/${SEGMENT}$`), handler: translationResult },
  { method: 'GET', pattern: new RegExp(`^/tts-result/${SEGMENT}$`), handler: ttsResult },
  { method: 'POST', pattern: /^\/project-setup$/, handler: createProjectSetup },
  { method: 'GET', pattern: new RegExp(`^/sub/${SEGMENT}$`), handler: statusOf('sub') },
  { method: 'POST', pattern: /^\/tts$/, handler: createLegacyTts },
  { method: 'GET', pattern: new RegExp(`^/tts/${SEGMENT}$`), handler: statusOf('tts') },
  { method: 'POST', pattern: /^\/audio-separation$/, handler: createAudioSeparation },
  { method: 'GET', pattern: new RegExp(`^/audio-separation/${SEGMENT}$`), handler: statusOf('audio-separation') },
  { method: 'POST', pattern: /^\/audio-separation-results$/, handler: separationResults },
  { method: 'DELETE', pattern: new RegExp(`^/delete-voice/${SEGMENT}$`), handler: deleteVoice },
  { method: 'POST', pattern: /^\/tts-stream$/, handler: ttsStream },
];

/** The route for `method` and `path`: a handler with its path params, `405` or `404`. */
export function matchRoute(method: string, path: string): { handler: Handler; params: string[] } | 405 | 404 {
  let pathMatched = false;
  for (const route of ROUTES) {
    const match = route.pattern.exec(path);
    if (!match) continue;
    pathMatched = true;
    if (route.method === method) return { handler: route.handler, params: match.slice(1) };
  }
  return pathMatched ? 405 : 404;
}
