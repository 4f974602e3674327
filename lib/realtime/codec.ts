/**
 * The realtime wire format, as pure functions: client events out, server events in, and the
 * limits the service enforces, checked before anything is sent. No sockets here; the client
 * stream and the emulator both use this module so there is one definition of the protocol.
 * The part that needs no Node built-in is `wire-format.ts` (re-exported here); this module
 * adds what works on Buffers: audio in and out as base64 or binary frames, and the emulator's
 * side of the wire.
 */
import {
  BINARY_AUDIO_WIRE_TYPE,
  MAX_APPEND_AUDIO_BYTES,
  SERVER_EVENT_TYPES,
  audioAppendText,
  base64DecodedLength,
  checkAppendAudio,
  decodeServerEventWith,
  parseEventObject,
  type ServerEventOf,
  type WireSessionInfo,
} from './wire-format.js';

export * from './wire-format.js';

/** A server event, its audio as a Buffer (see `ServerEventOf`). */
export type ServerEvent = ServerEventOf<Buffer>;

const fromBase64 = (b64: string): Buffer => Buffer.from(b64, 'base64');

/**
 * Decodes base64 as the wire carries it (`isBase64`: the standard alphabet, a length that is a
 * multiple of 4, `=` padding only at the end), or returns undefined for anything else. Node's
 * decoder skips characters outside the alphabet, stops at a `=` and reads a character above
 * U+00FF by its low byte (`Ł` as `A`), so text with any of those decodes to other bytes: the
 * text must be ASCII, and decode to the length its own length promises. The URL-safe letters,
 * which Node also accepts, are refused by hand. No regular expression: for an append of 64 KiB
 * one costs four times the decoding itself.
 */
export function decodeStrictBase64(text: string): Buffer | undefined {
  if (text.length % 4 !== 0 || Buffer.byteLength(text, 'utf8') !== text.length || text.includes('-') || text.includes('_')) return undefined;
  const padding = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  const bytes = Buffer.from(text, 'base64');
  return bytes.length === (text.length / 4) * 3 - padding ? bytes : undefined;
}

/**
 * The decoded audio of an append's `audio` field, as a server side of the wire reads it, or why
 * it is refused: 400 for no base64 string, 413 for more decoded audio than one event may carry
 * (measured on the text, before decoding). `fate` ends the refusals of audio that was sent (what
 * the server did with it: "The audio was discarded.").
 */
export function readAppendAudio(audio: unknown, fate: string): Buffer | { message: string; code: 400 | 413 } {
  if (typeof audio !== 'string') {
    return { message: 'input_audio_buffer.append needs an "audio" field: a base64 string of PCM16 audio.', code: 400 };
  }
  const decodedLength = base64DecodedLength(audio);
  if (decodedLength > MAX_APPEND_AUDIO_BYTES) {
    return {
      message:
        `input_audio_buffer.append carries ${decodedLength} bytes of audio; at most ${MAX_APPEND_AUDIO_BYTES} ` +
        `bytes (256 KiB) of decoded audio per event. ${fate}`,
      code: 413,
    };
  }
  return decodeStrictBase64(audio) ?? { message: `input_audio_buffer.append "audio" is not valid base64. ${fate}`, code: 400 };
}

/**
 * Parses one text frame from the server. Unknown event types come back as `unknown` (the beta
 * protocol grows); only text that is not a JSON object with a string `type` is a
 * `ProtocolError`. `prepare` may rewrite the parsed object before it is read (redaction).
 */
export function decodeServerEvent(text: string, prepare?: (raw: Record<string, unknown>) => void): ServerEvent {
  return decodeServerEventWith(text, fromBase64, prepare);
}

/**
 * `input_audio_buffer.append` carrying `pcm` (PCM16 LE mono 24 kHz), as JSON text, its size
 * checked first (`checkAppendAudio`). Pieces of at most `APPEND_PIECE_BYTES` encode fastest.
 */
export function encodeAudioAppend(pcm: Uint8Array): string {
  checkAppendAudio(pcm.byteLength);
  const buf = Buffer.isBuffer(pcm) ? pcm : Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength);
  return audioAppendText(buf.toString('base64'));
}

/** The recognised client events that carry no payload (the service answers them with `error`). */
export type BareClientEventType = 'input_audio_buffer.clear' | 'input_audio_buffer.commit' | 'response.cancel';

export function encodeBareEvent(type: BareClientEventType): string {
  return JSON.stringify({ type });
}

/** A binary frame from the server: raw PCM16 output audio (facts.md). */
export function decodeBinaryAudio(data: Buffer): ServerEvent {
  return { type: 'audio.delta', audio: data, wireType: BINARY_AUDIO_WIRE_TYPE, raw: undefined };
}

/* ----------------------------------------------------------------------------------------- */
/* The server side of the wire, for the emulator                                            */

export type ClientEvent =
  | { type: 'session.update'; session: unknown; auth: unknown; raw: Record<string, unknown> }
  | { type: 'input_audio_buffer.append'; audio: unknown; raw: Record<string, unknown> }
  | { type: BareClientEventType; raw: Record<string, unknown> }
  | { type: 'unknown'; wireType: string; raw: Record<string, unknown> };

/** Parses a client text frame (emulator side). Throws `ProtocolError` for non-JSON text. */
export function decodeClientEvent(text: string): ClientEvent {
  const raw = parseEventObject(text, 'The event is not valid JSON.', 'The event is not a JSON object with a string "type" field.');
  switch (raw.type) {
    case 'session.update':
      return { type: 'session.update', session: raw.session, auth: raw.auth, raw };
    case 'input_audio_buffer.append':
      return { type: 'input_audio_buffer.append', audio: raw.audio, raw };
    case 'input_audio_buffer.clear':
    case 'input_audio_buffer.commit':
    case 'response.cancel':
      return { type: raw.type, raw };
    default:
      return { type: 'unknown', wireType: raw.type, raw };
  }
}

/** Server events in wire form, for the emulator. */
export const encodeServerEvent = {
  sessionStarting: (): string => JSON.stringify({ type: SERVER_EVENT_TYPES.sessionStarting }),
  sessionCreated: (session: WireSessionInfo): string => JSON.stringify({ type: SERVER_EVENT_TYPES.sessionCreated, session }),
  sessionUpdated: (session: WireSessionInfo): string => JSON.stringify({ type: SERVER_EVENT_TYPES.sessionUpdated, session }),
  transcriptCompleted: (transcript: string): string => JSON.stringify({ type: SERVER_EVENT_TYPES.transcriptCompleted, transcript }),
  textDelta: (delta: string): string => JSON.stringify({ type: SERVER_EVENT_TYPES.textDelta, delta }),
  textDone: (text: string): string => JSON.stringify({ type: SERVER_EVENT_TYPES.textDone, text }),
  audioDelta: (pcm: Buffer): string => `{"type":"${SERVER_EVENT_TYPES.audioDelta}","delta":"${pcm.toString('base64')}"}`,
  audioDone: (): string => JSON.stringify({ type: SERVER_EVENT_TYPES.audioDone }),
  error: (message: string, code?: number): string =>
    JSON.stringify({ type: SERVER_EVENT_TYPES.error, error: code === undefined ? { message } : { message, code } }),
};
