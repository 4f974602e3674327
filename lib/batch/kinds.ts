/**
 * The kinds of batch job, each named after the CLI command that does the same work once, with
 * that command's flags as its fields in camelCase (`--from` is `from`, `--voice` is `voice`):
 *
 * | kind | fields | files (`DIR/<id>.*`) |
 * |---|---|---|
 * | `tts` | `text`, `language`, `voice`?, `format`? (`wav`, `flac`, `mp3`, `adts`, `pcm_*`), `sampleRate`?, `model`? | the speech |
 * | `translated-tts` | `text`, `from`, `to`, `voice`?, `format`? | the speech, and `.json` with the translated text |
 * | `translate-text` | `text` (or `texts`, a list), `from`, `to`, `formal`?, `casual`? | `.json`: `{texts}` |
 * | `transcribe` | `url` or `input` (a file to upload), `language`, `format`? (`json`, `srt`, `vtt`, `txt`), `mode`? | the transcript |
 * | `subtitles` | `url`, `from`, `language`?, `format`? (`srt`, `vtt`, `txt`) | the subtitles |
 * | `dub` | `url`, `from`, `to` (a list), `mode`? | `.json`: the dubbed files' URLs |
 *
 * A field's value may be a string where a number, flag or list is expected (a CSV cell): `"42"`,
 * `"true"`, `"es-es,fr-fr"`. Each job is checked here, request included, before any paid call;
 * a problem is a `ValidationError` naming the field as the job file spells it. Every kind but
 * `tts` runs as a task (`create`, then `wait`, then the result), so its task id can be
 * journaled; `tts` streams its audio (`POST /tts-stream`, as the `tts` command does, the
 * service's asynchronous speech flow being deprecated): its request is its whole cost, so a run
 * interrupted mid-stream leaves it `uncertain`, like a create whose answer was lost.
 */
import { createHash } from 'node:crypto';
import { createWriteStream, statSync } from 'node:fs';
import { rename, writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { ProtocolError, ValidationError } from '../errors.js';
import { describeReceived } from '../options.js';
import type { FlacDownloadStream } from '../http/flac-download-stream.js';
import type { LocalizationClient } from '../http/client.js';
import type { CreatedTask, TaskCallOptions } from '../http/endpoint-kit.js';
import type { CompletedTask } from '../http/tasks.js';
import { renderTranscript } from '../http/transcript.js';
import type { TranscriptFormat } from '../http/schemas.js';
import {
  DEFAULT_VOICE_ID,
  OUTPUT_FORMATS,
  dubSchema,
  subtitlesSchema,
  transcriptionSchema,
  translatedTtsSchema,
  translationSchema,
  ttsStreamSchema,
  type OutputFormat,
} from '../http/schemas.js';
import type { TtsStreamRequest } from '../http/tts-stream-readable.js';
import { validate, type Check } from '../http/validation.js';
import { WavFileWriter } from '../audio/wav.js';

/** The kinds of job, named after the CLI commands. */
export const BATCH_KINDS = ['tts', 'translated-tts', 'translate-text', 'transcribe', 'subtitles', 'dub'] as const;
export type BatchKind = (typeof BATCH_KINDS)[number];

type FieldType = 'string' | 'int' | 'boolean' | 'list';

interface FieldSpec {
  type: FieldType;
  required?: boolean;
  /** The accepted words of a string field. */
  oneOf?: readonly string[];
}

/** A job, checked: its request is what `create` sends. */
export interface BatchJob {
  id: string;
  kind: BatchKind;
  /** The job file's line the job starts on. */
  line: number;
  /** The job's fields, typed (numbers, flags, lists), without `id` and `kind`. */
  fields: Readonly<Record<string, unknown>>;
  /** A digest of the kind and fields: a rerun knows whether the job changed. */
  digest: string;
  request: Record<string, unknown>;
}

/** What a kind does with a finished task: writes its files, named `base` + an extension; returns their names. */
type WriteOutputs = (client: LocalizationClient, run: CompletedTask, job: BatchJob, base: string, options: TaskCallOptions) => Promise<string[]>;

interface KindCommon {
  fields: Record<string, FieldSpec>;
  schema: Check;
  request(fields: Record<string, unknown>): Record<string, unknown>;
  /** The wire field names of `request` mapped back to the job's own, for messages. */
  names: Record<string, string>;
}

/** A kind that runs as a task. */
export interface TaskKindSpec {
  create(client: LocalizationClient, request: Record<string, unknown>, options: TaskCallOptions): Promise<CreatedTask>;
  wait(client: LocalizationClient, taskId: string, options: TaskCallOptions): Promise<CompletedTask>;
  write: WriteOutputs;
}

/** A kind whose one request streams its result: writes its files, named `base` + an extension. */
export interface StreamKindSpec {
  stream(client: LocalizationClient, job: BatchJob, base: string, signal: AbortSignal | undefined): Promise<string[]>;
}

type KindSpec = KindCommon & (TaskKindSpec | StreamKindSpec);

const AUDIO_FORMATS = ['flac', 'wav'] as const;
/** The extension of each streamed speech format. */
const STREAM_EXTENSIONS: Record<OutputFormat, string> = {
  wav: 'wav',
  flac: 'flac',
  mp3: 'mp3',
  adts: 'aac',
  pcm_s16le: 's16le',
  pcm_s16be: 's16be',
  pcm_s32le: 's32le',
  pcm_s32be: 's32be',
  pcm_f32le: 'f32le',
  pcm_f32be: 'f32be',
};
const TRANSCRIPT_FORMATS = ['json', 'srt', 'vtt', 'txt'] as const;
const SUBTITLE_FORMATS = ['srt', 'vtt', 'txt'] as const;
const MODES = ['fast', 'slow'] as const;

const KINDS: Record<BatchKind, KindSpec> = {
  tts: {
    fields: {
      text: { type: 'string', required: true },
      language: { type: 'string', required: true },
      voice: { type: 'int' },
      format: { type: 'string', oneOf: OUTPUT_FORMATS },
      sampleRate: { type: 'int' },
      model: { type: 'string' },
    },
    schema: ttsStreamSchema,
    request: (f) => ({
      text: f.text,
      language: f.language,
      voiceId: f.voice ?? DEFAULT_VOICE_ID,
      speechModel: f.model,
      outputConfiguration: { format: f.format ?? 'wav', ...(f.sampleRate !== undefined ? { sampleRate: f.sampleRate } : {}) },
    }),
    names: { voiceId: 'voice', speechModel: 'model', outputConfiguration: 'format' },
    stream: async (client, job, base, signal) => {
      const format = (job.fields.format as OutputFormat | undefined) ?? 'wav';
      const path = `${base}.${STREAM_EXTENSIONS[format]}`;
      await pipeline(client.ttsStream(job.request as unknown as TtsStreamRequest, { signal }), createWriteStream(`${path}.partial`));
      await rename(`${path}.partial`, path);
      return [path];
    },
  },
  'translated-tts': {
    fields: {
      text: { type: 'string', required: true },
      from: { type: 'string', required: true },
      to: { type: 'string', required: true },
      voice: { type: 'int' },
      format: { type: 'string', oneOf: AUDIO_FORMATS },
    },
    schema: translatedTtsSchema,
    request: (f) => ({ text: f.text, sourceLanguage: f.from, targetLanguage: f.to, voiceId: f.voice ?? DEFAULT_VOICE_ID }),
    names: { sourceLanguage: 'from', targetLanguage: 'to', voiceId: 'voice' },
    create: (client, request, options) => client.translatedTts.create(request as never, options),
    wait: (client, taskId, options) => client.translatedTts.wait(taskId, options),
    write: async (client, run, job, base, options) => {
      const decode = job.fields.format === 'wav';
      const result = await client.translatedTts.result(run.runId, { ...options, decode });
      const json = await writeJson(`${base}.json`, { text: result.translatedText });
      return [json, await writeStream(result.audio, base, decode)];
    },
  },
  'translate-text': {
    fields: {
      text: { type: 'string' },
      texts: { type: 'list' },
      from: { type: 'string', required: true },
      to: { type: 'string', required: true },
      formal: { type: 'boolean' },
      casual: { type: 'boolean' },
    },
    schema: translationSchema,
    request: (f) => ({
      texts: f.texts ?? (f.text === undefined ? undefined : [f.text]),
      sourceLanguage: f.from,
      targetLanguage: f.to,
      ...(f.formal === true ? { formality: 2 } : f.casual === true ? { formality: 1 } : {}),
    }),
    names: { texts: 'text', sourceLanguage: 'from', targetLanguage: 'to', formality: 'formal' },
    create: (client, request, options) => client.translation.create(request as never, options),
    wait: (client, taskId, options) => client.translation.wait(taskId, options),
    write: async (client, run, _job, base, options) => {
      const result = await client.translation.result(run.runId, options);
      return [await writeJson(`${base}.json`, { texts: result.texts })];
    },
  },
  transcribe: {
    fields: {
      url: { type: 'string' },
      input: { type: 'string' },
      language: { type: 'string', required: true },
      format: { type: 'string', oneOf: TRANSCRIPT_FORMATS },
      mode: { type: 'string', oneOf: MODES },
    },
    schema: transcriptionSchema,
    request: (f) => ({ mediaUrl: f.url, mediaFile: f.input, language: f.language, ...(f.mode !== undefined ? { transcriptionMode: f.mode } : {}) }),
    names: { mediaUrl: 'url', mediaFile: 'input', transcriptionMode: 'mode' },
    create: (client, request, options) => client.transcription.create(request as never, options),
    wait: (client, taskId, options) => client.transcription.wait(taskId, options),
    write: async (client, run, job, base, options) => {
      const result = await client.transcription.result(run.runId, options);
      const format = (job.fields.format as string | undefined) ?? 'json';
      if (format === 'json') return [await writeJson(`${base}.json`, { segments: result.segments })];
      return [await writeText(`${base}.${format}`, renderTranscript(result.segments, format as TranscriptFormat))];
    },
  },
  subtitles: {
    fields: {
      url: { type: 'string', required: true },
      from: { type: 'string', required: true },
      language: { type: 'string' },
      format: { type: 'string', oneOf: SUBTITLE_FORMATS },
    },
    schema: subtitlesSchema,
    request: (f) => ({ mediaUrl: f.url, sourceLanguage: f.from }),
    names: { mediaUrl: 'url', sourceLanguage: 'from' },
    create: (client, request, options) => client.tasks.subtitles.create(request as never, options),
    wait: (client, taskId, options) => client.tasks.subtitles.wait(taskId, options),
    write: async (client, run, job, base, options) => {
      const format = (job.fields.format as TranscriptFormat | undefined) ?? 'srt';
      const language = (job.fields.language as string | undefined) ?? (job.fields.from as string);
      const transcript = await client.tasks.subtitles.result(run.runId, { ...options, language, format });
      return [await writeText(`${base}.${format}`, transcript.text ?? '')];
    },
  },
  dub: {
    fields: {
      url: { type: 'string', required: true },
      from: { type: 'string', required: true },
      to: { type: 'list', required: true },
      mode: { type: 'string', oneOf: MODES },
    },
    schema: dubSchema,
    request: (f) => ({ videoUrl: f.url, sourceLanguage: f.from, targetLanguages: f.to, ...(f.mode !== undefined ? { transcriptionMode: f.mode } : {}) }),
    names: { videoUrl: 'url', sourceLanguage: 'from', targetLanguages: 'to', transcriptionMode: 'mode' },
    create: (client, request, options) => client.dub.create(request as never, options),
    wait: (client, taskId, options) => client.dub.wait(taskId, options),
    write: async (client, run, _job, base, options) => {
      const { raw: _raw, ...result } = (await client.dub.result(run.runId, options)) as unknown as Record<string, unknown>;
      return [await writeJson(`${base}.json`, result)];
    },
  },
};

/**
 * Checks one record of a job file (`fields` as read, `id` and `kind` included) and builds its
 * request. Throws a `ValidationError` naming the field as the file spells it. `baseDir` is where
 * a relative `input` (a file to upload) is found: the job file's folder (default: the current one).
 */
export function checkJob(record: Record<string, unknown>, line: number, baseDir: string = process.cwd()): BatchJob {
  const { id, kind, ...rest } = record;
  if (typeof id !== 'string' && typeof id !== 'number') throw new ValidationError('id', "a string (the job's name, unique in the file)", describeReceived(id));
  const name = String(id).trim();
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/.test(name)) {
    throw new ValidationError(
      'id',
      'letters, digits, dot, underscore and dash, 1 to 128, starting with a letter or digit (it names the output files)',
      describeReceived(id),
    );
  }
  if (typeof kind !== 'string' || !(BATCH_KINDS as readonly string[]).includes(kind)) {
    throw new ValidationError('kind', `one of ${BATCH_KINDS.join(', ')}`, describeReceived(kind));
  }
  const spec = KINDS[kind as BatchKind];
  const fields: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(rest)) {
    const fieldSpec = spec.fields[field];
    if (fieldSpec === undefined) throw new ValidationError(field, `a field of ${kind} jobs: ${Object.keys(spec.fields).join(', ')}`, describeReceived(value));
    if (value === undefined || value === null || value === '') continue;
    fields[field] = typed(field, value, fieldSpec);
  }
  for (const [field, fieldSpec] of Object.entries(spec.fields)) {
    if (fieldSpec.required && fields[field] === undefined) throw new ValidationError(field, `a value (${kind} jobs need ${field})`, 'nothing');
  }
  const request = Object.fromEntries(Object.entries(spec.request(fields)).filter(([, value]) => value !== undefined));
  if (kind === 'transcribe') request.mediaFile = mediaToUpload(fields, baseDir);
  if (request.mediaFile === undefined) delete request.mediaFile;
  try {
    // The check the create makes again before sending, run now so that a bad job fails before any paid call.
    const { mediaFile: _upload, ...checked } = request;
    validate(spec.schema, checked);
  } catch (error) {
    if (error instanceof ValidationError) {
      const top = error.field.split(/[.[]/)[0]!;
      const field = spec.names[top] ?? top;
      throw new ValidationError(field, error.accepted, error.received, { cause: error });
    }
    throw error;
  }
  const digest = createHash('sha256')
    .update(JSON.stringify([kind, Object.entries(fields).sort(([a], [b]) => (a < b ? -1 : 1))]))
    .digest('hex')
    .slice(0, 32);
  return { id: name, kind: kind as BatchKind, line, fields, digest, request };
}

/**
 * A `transcribe` job's media: exactly one of `url` (the service fetches it) and `input` (a file
 * uploaded from here, relative to the job file's folder), the file checked to exist now.
 */
function mediaToUpload(fields: Record<string, unknown>, baseDir: string): string | undefined {
  if ((fields.url === undefined) === (fields.input === undefined)) {
    throw new ValidationError(
      'url',
      'exactly one of url (where the service fetches the media) and input (a media file to upload)',
      fields.url === undefined ? 'neither' : 'both',
    );
  }
  if (fields.input === undefined) return undefined;
  const path = resolve(baseDir, fields.input as string);
  let isFile = false;
  try {
    isFile = statSync(path).isFile();
  } catch {
    // Reported below, as a file that is not there.
  }
  if (!isFile) throw new ValidationError('input', "a media file to upload (relative paths start at the job file's folder)", `${path}, which is not a file`);
  return path;
}

/** How a kind runs: as a task, or as one streamed request. */
export function kindOf(kind: BatchKind): TaskKindSpec | StreamKindSpec {
  return KINDS[kind];
}

/**
 * Writes a `dub` job run as one task per target language (the queue's dub flow): `base.json` with
 * every language's outputs, in the job's order, each named by its language.
 */
export async function writeDubParts(
  client: LocalizationClient,
  parts: ReadonlyArray<{ language: string; runId: number }>,
  base: string,
  options: TaskCallOptions,
): Promise<string[]> {
  const outputs: unknown[] = [];
  for (const part of parts) {
    const result = await client.dub.result(part.runId, options);
    for (const output of result.outputs) outputs.push({ ...output, language: output.language ?? part.language });
  }
  return [await writeJson(`${base}.json`, { outputs })];
}

function typed(field: string, value: unknown, spec: FieldSpec): unknown {
  switch (spec.type) {
    case 'string': {
      if (typeof value !== 'string' && typeof value !== 'number') throw new ValidationError(field, 'a string', describeReceived(value));
      const text = String(value);
      if (spec.oneOf !== undefined && !spec.oneOf.includes(text)) throw new ValidationError(field, `one of ${spec.oneOf.join(', ')}`, describeReceived(value));
      return text;
    }
    case 'int': {
      const number = typeof value === 'string' && /^-?\d+$/.test(value.trim()) ? Number(value) : value;
      if (typeof number !== 'number' || !Number.isSafeInteger(number)) throw new ValidationError(field, 'an integer', describeReceived(value));
      return number;
    }
    case 'boolean': {
      if (typeof value === 'boolean') return value;
      if (value === 'true' || value === '1') return true;
      if (value === 'false' || value === '0') return false;
      throw new ValidationError(field, 'true or false', describeReceived(value));
    }
    case 'list': {
      const items = typeof value === 'string' ? value.split(',').map((item) => item.trim()) : value;
      if (!Array.isArray(items) || items.length === 0 || !items.every((item) => typeof item === 'string' && item !== '')) {
        throw new ValidationError(field, 'a list of strings (in CSV: comma-separated)', describeReceived(value));
      }
      return items;
    }
  }
}

/** Writes the FLAC to `base.flac`, or its PCM to `base.wav`, through a temporary name; returns the file name. */
async function writeStream(audio: FlacDownloadStream, base: string, decode: boolean): Promise<string> {
  const path = `${base}.${decode ? 'wav' : 'flac'}`;
  const partial = `${path}.partial`;
  if (decode) {
    const format = audio.format;
    if (format === undefined) throw new ProtocolError('The audio result has no FLAC stream information to decode.');
    await pipeline(audio, new WavFileWriter(partial, { rate: format.sampleRate, channels: format.channels, format: 's16le' }));
  } else {
    await pipeline(audio, createWriteStream(partial));
  }
  await rename(partial, path);
  return path;
}

async function writeJson(path: string, value: unknown): Promise<string> {
  return writeText(path, `${JSON.stringify(value, null, 2)}\n`);
}

async function writeText(path: string, text: string): Promise<string> {
  const partial = `${path}.partial`;
  await writeFile(partial, text);
  await rename(partial, path);
  return path;
}
