/**
 * The live transcription WebSocket's wire format (`{realtime_url}/streaming-transcription/listen`),
 * as pure functions shared by a client and the emulator; no state, no sockets.
 *
 * - The handshake's query: `model`, `language`, `encoding` (`linear16`, `linear32`, `alaw`,
 *   `mulaw`), `sample_rate`, `channels`; the key goes in the `x-api-key` header.
 * - Client to server: audio as binary frames in that encoding; text frames `{"type":"KeepAlive"}`
 *   while idle and `{"type":"CloseStream"}` to flush the last results and end.
 * - Server to client, JSON only: `Ready`, `Results` (interim, or `is_final`; the words carry
 *   `start`, `end` and `confidence` in seconds since the session began), `Error`. A `Final`
 *   message (some server releases) is read as a final `Results`; other types are passed on as
 *   `unknown`, for forward compatibility.
 */
import { ProtocolError, ValidationError } from '../errors.js';
import { describeReceived } from '../options.js';

export const LIVE_TRANSCRIPTION_PATH = '/streaming-transcription/listen';

export const LIVE_ENCODINGS = ['linear16', 'linear32', 'alaw', 'mulaw'] as const;
export type LiveEncoding = (typeof LIVE_ENCODINGS)[number];

/** What the handshake's query says about the audio and the model. */
export interface LiveTranscriptionParams {
  model: string;
  language: string;
  encoding: LiveEncoding;
  sampleRate: number;
  channels: number;
}

/** The official clients' defaults. */
export const DEFAULT_LIVE_PARAMS: Readonly<LiveTranscriptionParams> = Object.freeze({
  model: 'boli-v5',
  language: 'en-us',
  encoding: 'linear16',
  sampleRate: 16_000,
  channels: 1,
});

/** Bytes of one sample of `encoding` (per channel). */
export function liveSampleBytes(encoding: LiveEncoding): number {
  return encoding === 'linear16' ? 2 : encoding === 'linear32' ? 4 : 1;
}

const TAG = /^[a-z]{2,3}(-[a-z0-9]{2,8})*$/i;

/** Checks parameters; the first problem as a `ValidationError` naming the option, else undefined. */
export function checkLiveParams(params: LiveTranscriptionParams): ValidationError | undefined {
  if (typeof params.model !== 'string' || params.model === '')
    return new ValidationError('model', 'a model name such as "boli-v5"', describeReceived(params.model));
  if (typeof params.language !== 'string' || !TAG.test(params.language))
    return new ValidationError('language', 'a locale tag such as "en-us"', describeReceived(params.language));
  if (!(LIVE_ENCODINGS as readonly string[]).includes(params.encoding))
    return new ValidationError('encoding', `one of ${LIVE_ENCODINGS.join(', ')}`, describeReceived(params.encoding));
  if (!Number.isSafeInteger(params.sampleRate) || params.sampleRate < 8000 || params.sampleRate > 192_000) {
    return new ValidationError('sampleRate', 'an integer number of Hz from 8000 to 192000', describeReceived(params.sampleRate));
  }
  if (!Number.isSafeInteger(params.channels) || params.channels < 1 || params.channels > 8)
    return new ValidationError('channels', 'an integer from 1 to 8', describeReceived(params.channels));
  return undefined;
}

/** The handshake query of `params` (defaults filled in), or a `ValidationError`. */
export function encodeLiveQuery(params: Partial<LiveTranscriptionParams> = {}): URLSearchParams {
  const full: LiveTranscriptionParams = { ...DEFAULT_LIVE_PARAMS, ...params };
  const problem = checkLiveParams(full);
  if (problem) throw problem;
  return new URLSearchParams({
    model: full.model,
    language: full.language.toLowerCase(),
    encoding: full.encoding,
    sample_rate: String(full.sampleRate),
    channels: String(full.channels),
  });
}

/** Reads a handshake query; absent parameters take the defaults. */
export function parseLiveQuery(query: URLSearchParams): { params: LiveTranscriptionParams } | { error: ValidationError } {
  const int = (name: string, fallback: number): number => {
    const raw = query.get(name);
    return raw === null ? fallback : /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  };
  const params: LiveTranscriptionParams = {
    model: query.get('model') ?? DEFAULT_LIVE_PARAMS.model,
    language: (query.get('language') ?? DEFAULT_LIVE_PARAMS.language).toLowerCase(),
    encoding: (query.get('encoding') ?? DEFAULT_LIVE_PARAMS.encoding) as LiveEncoding,
    sampleRate: int('sample_rate', DEFAULT_LIVE_PARAMS.sampleRate),
    channels: int('channels', DEFAULT_LIVE_PARAMS.channels),
  };
  const error = checkLiveParams(params);
  return error ? { error } : { params };
}

/* ----------------------------------------------------------------------------------------- */
/* Client to server                                                                          */

export type LiveClientMessage = { type: 'KeepAlive' } | { type: 'CloseStream' } | { type: 'unknown'; wireType: string; raw: Record<string, unknown> };

export function encodeKeepAlive(): string {
  return '{"type":"KeepAlive"}';
}

export function encodeCloseStream(): string {
  return '{"type":"CloseStream"}';
}

function parseObject(text: string, what: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ProtocolError(`A ${what} text frame is not JSON.`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed) || typeof (parsed as { type?: unknown }).type !== 'string') {
    throw new ProtocolError(`A ${what} message has no type.`);
  }
  return parsed as Record<string, unknown>;
}

/** Reads a client text frame; throws `ProtocolError` for one that is not a typed JSON object. */
export function decodeLiveClientMessage(text: string): LiveClientMessage {
  const raw = parseObject(text, 'client');
  const type = raw.type as string;
  if (type === 'KeepAlive' || type === 'CloseStream') return { type };
  return { type: 'unknown', wireType: type, raw };
}

/* ----------------------------------------------------------------------------------------- */
/* Server to client                                                                          */

export interface LiveWord {
  word: string;
  /** Seconds since the session began. */
  start: number;
  end: number;
  confidence: number;
}

export interface LiveResults {
  type: 'Results';
  /** An interim hypothesis (false) or the final text of its segment (true). */
  isFinal: boolean;
  /** Seconds since the session began. */
  start: number;
  /** Seconds. */
  duration: number;
  transcript: string;
  confidence: number;
  words: LiveWord[];
  requestId: string | undefined;
  /** The first alternative's fields are above; every alternative is here. */
  alternatives: Array<{ transcript: string; confidence: number; words: LiveWord[] }>;
}

export type LiveServerEvent =
  | { type: 'Ready'; requestId: string | undefined }
  | LiveResults
  | { type: 'Error'; code: string | undefined; message: string }
  | { type: 'unknown'; wireType: string; raw: Record<string, unknown> };

/** `Ready`: the session is open and takes audio. */
export function encodeReady(requestId: string): string {
  return JSON.stringify({ type: 'Ready', request_id: requestId });
}

/** `Results` for one segment (or its interim hypothesis). */
export function encodeResults(result: Omit<LiveResults, 'type' | 'alternatives'> & { model?: string }): string {
  return JSON.stringify({
    type: 'Results',
    is_final: result.isFinal,
    start: result.start,
    duration: result.duration,
    channel: { alternatives: [{ transcript: result.transcript, confidence: result.confidence, words: result.words }] },
    metadata: { request_id: result.requestId, model_info: { name: result.model } },
  });
}

/** `Error` with a code the client can switch on and a message for people. */
export function encodeLiveError(code: string, message: string): string {
  return JSON.stringify({ type: 'Error', code, message });
}

function num(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : 0;
}

function words(value: unknown): LiveWord[] {
  if (!Array.isArray(value)) return [];
  return value
    .filter((w): w is Record<string, unknown> => w !== null && typeof w === 'object')
    .map((w) => ({
      word: typeof w.word === 'string' ? w.word : String(w.punctuated_word ?? ''),
      start: num(w.start),
      end: num(w.end),
      confidence: num(w.confidence),
    }));
}

/** Reads a server text frame; throws `ProtocolError` for one that is not a typed JSON object. */
export function decodeLiveServerEvent(text: string): LiveServerEvent {
  const raw = parseObject(text, 'server');
  const type = raw.type as string;
  const metadata = raw.metadata !== null && typeof raw.metadata === 'object' ? (raw.metadata as Record<string, unknown>) : {};
  const requestId = typeof raw.request_id === 'string' ? raw.request_id : typeof metadata.request_id === 'string' ? metadata.request_id : undefined;
  switch (type) {
    case 'Ready':
      return { type: 'Ready', requestId };
    case 'Results':
    case 'Final': {
      const channel = raw.channel !== null && typeof raw.channel === 'object' ? (raw.channel as Record<string, unknown>) : {};
      const alternatives = (Array.isArray(channel.alternatives) ? channel.alternatives : [])
        .filter((a): a is Record<string, unknown> => a !== null && typeof a === 'object')
        .map((a) => ({ transcript: typeof a.transcript === 'string' ? a.transcript : '', confidence: num(a.confidence), words: words(a.words) }));
      const first = alternatives[0] ?? { transcript: '', confidence: 0, words: [] };
      return {
        type: 'Results',
        isFinal: type === 'Final' || raw.is_final === true,
        start: num(raw.start),
        duration: num(raw.duration),
        ...first,
        requestId,
        alternatives,
      };
    }
    case 'Error':
      return {
        type: 'Error',
        code: typeof raw.code === 'string' ? raw.code : typeof raw.code === 'number' ? String(raw.code) : undefined,
        message: typeof raw.message === 'string' ? raw.message : typeof raw.description === 'string' ? raw.description : 'Unknown server error',
      };
    default:
      return { type: 'unknown', wireType: type, raw };
  }
}
