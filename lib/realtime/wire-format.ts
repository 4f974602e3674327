/**
 * The realtime wire format's half that needs no Node built-in: the limits, the session
 * configuration and its checks, `session.update` and the append event's text, the server
 * events under the library's names, and their parsing with the audio decoder left to the
 * caller. `codec.ts` completes it for Node (Buffers); the browser module uses it as it is, so
 * the Node client, the emulator and the browser read one definition of the protocol.
 */
import { ProtocolError, ValidationError } from '../errors.js';
import { describeReceived } from '../options.js';
import { MAX_APPEND_AUDIO_BYTES, MAX_CLIENT_EVENT_BYTES, REALTIME_BYTES_PER_FRAME } from '../limits.js';
import { normalizeRealtimeLanguage, type RealtimeLanguage } from './languages.js';

export {
  DEFAULT_VOICE_ID,
  MAX_APPEND_AUDIO_BYTES,
  MAX_CLIENT_EVENT_BYTES,
  REALTIME_BYTES_PER_FRAME,
  REALTIME_CHANNELS,
  REALTIME_SAMPLE_RATE,
} from '../limits.js';
/**
 * Largest append piece that stays on V8's fast path: 64 KiB of audio is 87,384 characters of
 * base64. From about 96 KiB (128 Ki characters) the event's string lands in V8's large-object
 * space and encoding it, converting it to a frame and collecting it run 25 to 35 times slower
 * (measured by `bench/append.bench.ts`). A client that splits long writes into appends should
 * cut them at this size; the service accepts up to `MAX_APPEND_AUDIO_BYTES`.
 */
export const APPEND_PIECE_BYTES = 64 * 1024;

export type OutputModality = 'text' | 'audio';

export type VoiceSelection = { type: 'default' } | { type: 'cloned'; voice_id: number };

/** The `session` object of `session.update`, in wire form. */
export interface SessionConfig {
  source_language: RealtimeLanguage;
  target_language: RealtimeLanguage;
  output_modalities?: OutputModality[];
  voice?: VoiceSelection;
}

/** What a caller may pass: tags in any case, modalities and voice optional. */
export interface SessionConfigInput {
  source_language: string;
  target_language: string;
  output_modalities?: readonly string[];
  voice?: { type: string; voice_id?: number };
}

/* ----------------------------------------------------------------------------------------- */
/* Validation shared by the client (throws before sending) and the emulator (answers error). */

/**
 * Checks a session configuration and returns it in wire form (lowercase tags, modalities
 * de-duplicated). Throws `ValidationError` naming the first field at fault.
 */
export function normalizeSessionConfig(input: SessionConfigInput, fieldPrefix = 'session'): SessionConfig {
  if (input === null || typeof input !== 'object') {
    throw new ValidationError(fieldPrefix, 'an object with source_language and target_language', typeof input);
  }
  const config: SessionConfig = {
    source_language: normalizeRealtimeLanguage(input.source_language, `${fieldPrefix}.source_language`),
    target_language: normalizeRealtimeLanguage(input.target_language, `${fieldPrefix}.target_language`),
  };
  if (input.output_modalities !== undefined) {
    config.output_modalities = normalizeModalities(input.output_modalities, `${fieldPrefix}.output_modalities`);
  }
  if (input.voice !== undefined) {
    config.voice = normalizeVoice(input.voice, `${fieldPrefix}.voice`);
  }
  return config;
}

/** Checks `output_modalities` (or the option naming it): a non-empty array of `text`/`audio`, de-duplicated. */
export function normalizeModalities(value: unknown, field: string): OutputModality[] {
  const accepted = 'a non-empty array of "text" and/or "audio"';
  if (!Array.isArray(value) || value.length === 0) {
    throw new ValidationError(field, accepted, Array.isArray(value) ? 'an empty array' : typeof value);
  }
  const out: OutputModality[] = [];
  for (const item of value) {
    if (item !== 'text' && item !== 'audio') throw new ValidationError(field, accepted, describeReceived(item));
    if (!out.includes(item)) out.push(item);
  }
  return out;
}

function normalizeVoice(value: unknown, field: string): VoiceSelection {
  const accepted = '{ type: "default" } or { type: "cloned", voice_id: <positive integer> }';
  if (value === null || typeof value !== 'object') throw new ValidationError(field, accepted, typeof value);
  const voice = value as { type?: unknown; voice_id?: unknown };
  if (voice.type === 'default') return { type: 'default' };
  if (voice.type === 'cloned') {
    if (voice.voice_id === undefined) {
      throw new ValidationError(`${field}.voice_id`, 'a voice id (positive integer) when voice.type is "cloned"', 'none');
    }
    if (!Number.isSafeInteger(voice.voice_id) || (voice.voice_id as number) < 1) {
      throw new ValidationError(`${field}.voice_id`, 'a positive integer', describeReceived(voice.voice_id));
    }
    return { type: 'cloned', voice_id: voice.voice_id as number };
  }
  throw new ValidationError(`${field}.type`, '"default" or "cloned"', describeReceived(voice.type));
}

/** Byte length of a string as UTF-8, counted without encoding it. */
function utf8Length(text: string): number {
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) bytes += 1;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      bytes += 2; // a surrogate pair: 4 bytes for 2 code units
      i++;
    } else bytes += 2;
  }
  return bytes;
}

function checkEventSize(text: string, type: string): string {
  const size = utf8Length(text);
  if (size > MAX_CLIENT_EVENT_BYTES) {
    throw new ValidationError(`${type} event`, `at most ${MAX_CLIENT_EVENT_BYTES} bytes (1 MiB) of JSON text`, `${size} bytes`);
  }
  return text;
}

/* ----------------------------------------------------------------------------------------- */
/* Client events                                                                            */

export interface SessionUpdateOptions {
  /** Put the key in `auth.api_key`; only for clients that cannot set handshake headers. */
  authApiKey?: string;
}

/** `session.update`, validated, as JSON text ready to send. */
export function encodeSessionUpdate(input: SessionConfigInput, options: SessionUpdateOptions = {}): string {
  const event: { type: 'session.update'; session: SessionConfig; auth?: { api_key: string } } = {
    type: 'session.update',
    session: normalizeSessionConfig(input),
  };
  if (options.authApiKey !== undefined) {
    if (typeof options.authApiKey !== 'string' || options.authApiKey === '') {
      throw new ValidationError('auth.api_key', 'a non-empty string');
    }
    event.auth = { api_key: options.authApiKey };
  }
  return checkEventSize(JSON.stringify(event), 'session.update');
}

const APPEND_PREFIX = '{"type":"input_audio_buffer.append","audio":"';
const APPEND_SUFFIX = '"}';

/**
 * Checks the decoded size of an append's audio: at most 256 KiB, whole 16-bit samples, so a bad
 * chunk never reaches the socket. (At 256 KiB the JSON text is about 342 KiB, well inside the
 * 1 MiB text limit, so that limit cannot be hit by this event.)
 */
export function checkAppendAudio(byteLength: number): void {
  if (byteLength > MAX_APPEND_AUDIO_BYTES) {
    throw new ValidationError(
      'input_audio_buffer.append audio',
      `at most ${MAX_APPEND_AUDIO_BYTES} bytes (256 KiB) of decoded audio per event`,
      `${byteLength} bytes`,
    );
  }
  if (byteLength % REALTIME_BYTES_PER_FRAME !== 0) {
    throw new ValidationError('input_audio_buffer.append audio', 'whole PCM16 samples (an even number of bytes)', `${byteLength} bytes`);
  }
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Whether `text` is base64 as an append carries it: the standard alphabet, padded to a multiple of 4. */
export function isBase64(text: string): boolean {
  return text.length % 4 === 0 && BASE64.test(text);
}

/**
 * Decoded size of base64 text, from its length alone (no decoding): what the 256 KiB limit of an
 * append is measured on, so an oversized one is refused before its audio is decoded.
 */
export function base64DecodedLength(text: string): number {
  let padding = 0;
  if (text.endsWith('==')) padding = 2;
  else if (text.endsWith('=')) padding = 1;
  return Math.floor((text.length * 3) / 4) - padding;
}

/** `input_audio_buffer.append` as JSON text, around audio already checked and base64-encoded. */
export function audioAppendText(base64: string): string {
  return APPEND_PREFIX + base64 + APPEND_SUFFIX;
}

/* ----------------------------------------------------------------------------------------- */
/* Server events                                                                            */

/** The `session` object of `session.created` / `session.updated` in wire form (the emulator sends it). */
export interface WireSessionInfo {
  id?: string;
  source_language?: string;
  target_language?: string;
  output_modalities?: string[];
  voice?: { type: string; voice_id?: number; [key: string]: unknown };
  [key: string]: unknown;
}

/** The session as the library reports it: the configuration in camelCase plus the service's extras. */
export interface SessionInfo {
  /** Durable session identifier (a UUID), present on `session.created`. */
  id?: string;
  sourceLanguage?: string;
  targetLanguage?: string;
  outputModalities?: string[];
  voice?: { type: string; voiceId?: number };
  /** Beta selectors echoed by newer servers. */
  model?: string;
  mode?: string;
  /** The wire object, as sent (after redaction). */
  raw: Record<string, unknown>;
}

/**
 * A server event under the library's one name for it (`ServerEvent` in Node, where audio is a
 * `Buffer`; the browser module's audio is an `Int16Array`) (the same name as the stream's emitter
 * event and the `--events` log); `wireType` keeps the name on the wire, `raw` the object as sent
 * (absent for binary audio frames).
 */
export type ServerEventOf<Audio> =
  | { type: 'session.starting'; wireType: string; raw: Record<string, unknown> }
  | { type: 'session.created'; session: SessionInfo; wireType: string; raw: Record<string, unknown> }
  | { type: 'session.updated'; session: SessionInfo; wireType: string; raw: Record<string, unknown> }
  | { type: 'transcript.delta'; delta: string; wireType: string; raw: Record<string, unknown> }
  | { type: 'transcript.done'; text: string; wireType: string; raw: Record<string, unknown> }
  | { type: 'text.delta'; delta: string; wireType: string; raw: Record<string, unknown> }
  | { type: 'text.done'; text: string | undefined; wireType: string; raw: Record<string, unknown> }
  | { type: 'audio.delta'; audio: Audio; wireType: string; raw: Record<string, unknown> | undefined }
  | { type: 'audio.done'; wireType: string; raw: Record<string, unknown> }
  | { type: 'server.error'; message: string; code: number | string | undefined; wireType: string; raw: Record<string, unknown> }
  | { type: 'unknown'; wireType: string; raw: Record<string, unknown> };

/** The session once the service has created it: its `id` is known. */
export type SessionStartedInfo = SessionInfo & { id: string };

/**
 * Listener arguments of the service's events, under the library's names, for the emitters of
 * the Node stream (audio a Buffer) and of the browser module (audio an Int16Array).
 */
export interface ServerEventListenerArgs<Audio> {
  'session.starting': [];
  'session.created': [info: SessionStartedInfo];
  'session.updated': [info: SessionInfo];
  'transcript.delta': [delta: string];
  'transcript.done': [text: string];
  'text.delta': [delta: string];
  'text.done': [text: string];
  'audio.delta': [audio: Audio];
  'audio.done': [];
  'server.error': [message: string, code: number | string | undefined];
}

/** Wire names of the server events this module understands. */
export const SERVER_EVENT_TYPES = {
  sessionStarting: 'session.starting',
  sessionCreated: 'session.created',
  sessionUpdated: 'session.updated',
  transcriptDelta: 'conversation.item.input_audio_transcription.delta',
  transcriptCompleted: 'conversation.item.input_audio_transcription.completed',
  textDelta: 'response.text.delta',
  textDone: 'response.text.done',
  audioDelta: 'response.audio.delta',
  audioDone: 'response.audio.done',
  error: 'error',
} as const;

/** The `wireType` of output audio that arrived as a binary WebSocket frame. */
export const BINARY_AUDIO_WIRE_TYPE = 'binary';

function str(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

function objectOf(value: unknown): Record<string, unknown> | undefined {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

/** The wire session object in the library's camelCase form; unknown fields stay in `raw`. */
export function sessionFromWire(wire: Record<string, unknown>): SessionInfo {
  const info: SessionInfo = { raw: wire };
  if (typeof wire.id === 'string') info.id = wire.id;
  if (typeof wire.source_language === 'string') info.sourceLanguage = wire.source_language;
  if (typeof wire.target_language === 'string') info.targetLanguage = wire.target_language;
  if (Array.isArray(wire.output_modalities)) info.outputModalities = wire.output_modalities.filter((m): m is string => typeof m === 'string');
  const voice = objectOf(wire.voice);
  if (voice && typeof voice.type === 'string') {
    info.voice = typeof voice.voice_id === 'number' ? { type: voice.type, voiceId: voice.voice_id } : { type: voice.type };
  }
  if (typeof wire.model === 'string') info.model = wire.model;
  if (typeof wire.mode === 'string') info.mode = wire.mode;
  return info;
}

function sessionOf(raw: Record<string, unknown>): SessionInfo {
  return sessionFromWire(objectOf(raw.session) ?? {});
}

/** Parses JSON text into an object with a string `type`, or throws `ProtocolError` (`what` names the sender). */
export function parseEventObject(text: string, notJson: string, noType: string): Record<string, unknown> & { type: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ProtocolError(notJson);
  }
  if (objectOf(parsed) === undefined || typeof (parsed as { type?: unknown }).type !== 'string') {
    throw new ProtocolError(noType);
  }
  return parsed as Record<string, unknown> & { type: string };
}

/**
 * Parses one text frame from the server, the audio of `response.audio.delta` decoded from
 * base64 by `decodeAudio`. Unknown event types come back as `unknown` (the beta protocol
 * grows); only text that is not a JSON object with a string `type` is a `ProtocolError`.
 * `prepare` may rewrite the parsed object before it is read (redaction).
 */
export function decodeServerEventWith<Audio>(
  text: string,
  decodeAudio: (base64: string) => Audio,
  prepare?: (raw: Record<string, unknown>) => void,
): ServerEventOf<Audio> {
  const raw = parseEventObject(
    text,
    `The server sent a text frame that is not JSON (${text.length} characters).`,
    'The server sent an event without a string "type" field.',
  );
  prepare?.(raw);
  const wireType = raw.type;
  switch (wireType) {
    // Audio first: nearly every message of a session is one.
    case SERVER_EVENT_TYPES.audioDelta: {
      // The interface names the payload `delta`; some clients read `audio`. Accept both.
      const b64 = str(raw.delta) ?? str(raw.audio);
      if (b64 === undefined) throw new ProtocolError('response.audio.delta without a base64 "delta" field.');
      return { type: 'audio.delta', audio: decodeAudio(b64), wireType, raw };
    }
    case SERVER_EVENT_TYPES.sessionStarting:
      return { type: 'session.starting', wireType, raw };
    case SERVER_EVENT_TYPES.sessionCreated:
      return { type: 'session.created', session: sessionOf(raw), wireType, raw };
    case SERVER_EVENT_TYPES.sessionUpdated:
      return { type: 'session.updated', session: sessionOf(raw), wireType, raw };
    case SERVER_EVENT_TYPES.transcriptDelta:
      return { type: 'transcript.delta', delta: str(raw.delta) ?? '', wireType, raw };
    case SERVER_EVENT_TYPES.transcriptCompleted:
      return { type: 'transcript.done', text: str(raw.transcript) ?? '', wireType, raw };
    case SERVER_EVENT_TYPES.textDelta:
      return { type: 'text.delta', delta: str(raw.delta) ?? '', wireType, raw };
    case SERVER_EVENT_TYPES.textDone:
      return { type: 'text.done', text: str(raw.text), wireType, raw };
    case SERVER_EVENT_TYPES.audioDone:
      return { type: 'audio.done', wireType, raw };
    case SERVER_EVENT_TYPES.error: {
      const err = raw.error;
      const body = objectOf(err) ?? {};
      const message = str(body.message) ?? str(err) ?? str(raw.message) ?? 'The service reported an error without a message.';
      const code = typeof body.code === 'number' || typeof body.code === 'string' ? body.code : undefined;
      return { type: 'server.error', message, code, wireType, raw };
    }
    default:
      return { type: 'unknown', wireType, raw };
  }
}
