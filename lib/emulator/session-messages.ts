/**
 * What a realtime session of the emulator reads from its client and says back about itself,
 * as pure functions: a frame's size and text, the audio of an `input_audio_buffer.append`, a
 * `session.update` checked into the configuration the session runs with (or the error it answers,
 * and whether that ends the session), the session description of `session.created` /
 * `session.updated`, and the frames of one answer.
 */
import type { RawData } from 'ws';
import {
  MAX_CLIENT_EVENT_BYTES,
  decodeClientEvent,
  encodeServerEvent,
  normalizeSessionConfig,
  type ClientEvent,
  type SessionConfig,
  type SessionConfigInput,
  type WireSessionInfo,
} from '../realtime/codec.js';
import { ValidationError } from '../errors.js';
import type { ActiveConfig } from './session-state.js';
import { OUTPUT_PIECE_BYTES, STOCK_VOICE_IDS, type RealtimeHandshake, type RealtimeSessionSettings } from './session-settings.js';
import type { SegmentedUtterance } from './vad.js';
import type { VoiceOwnership } from './voices.js';

function rawLength(data: RawData): number {
  if (Buffer.isBuffer(data)) return data.length;
  if (Array.isArray(data)) return data.reduce((total, part) => total + part.length, 0);
  return data.byteLength;
}

function rawText(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data).toString('utf8');
}

/**
 * A client's text frame as an event, or the error it is answered with: 413 over the 1 MiB limit
 * (ignored), 400 not a decodable event (the caller adds what follows from where the session is).
 */
export function readClientEvent(data: RawData): { event: ClientEvent } | { message: string; code: number } {
  const size = rawLength(data);
  if (size > MAX_CLIENT_EVENT_BYTES) {
    return {
      message: `The event is ${size} bytes; a client event may be at most ${MAX_CLIENT_EVENT_BYTES} bytes (1 MiB) of JSON text. It was ignored.`,
      code: 413,
    };
  }
  try {
    return { event: decodeClientEvent(rawText(data)) };
  } catch (error) {
    return { message: (error as Error).message, code: 400 };
  }
}

/**
 * The key a first `session.update` authenticates with (the handshake's `x-api-key` header wins
 * when both are present: it was checked at the handshake), or why there is none (a 401).
 */
export function sessionKey(headerKey: string | undefined, auth: unknown, apiKeys: ReadonlySet<string>): string | { message: string } {
  const authKey =
    auth !== null && typeof auth === 'object' && typeof (auth as { api_key?: unknown }).api_key === 'string'
      ? (auth as { api_key: string }).api_key
      : undefined;
  const key = headerKey ?? authKey;
  if (key !== undefined && apiKeys.has(key)) return key;
  return {
    message:
      authKey === undefined
        ? 'Missing API key: send it in the x-api-key handshake header, or in auth.api_key of the first session.update.'
        : 'Invalid API key in auth.api_key.',
  };
}

/** `text` as the pieces of its deltas: each word after the first with its leading space. */
function words(text: string): string[] {
  return text.split(' ').map((word, i) => (i === 0 ? word : ` ${word}`));
}

/** A `session.update` the session cannot take: the error it answers with, and whether the session ends. */
export interface UpdateRefusal {
  message: string;
  code: number;
  /** The session ends (the first configuration, or a rejected voice); otherwise the previous configuration stays. */
  fatal: boolean;
}

/**
 * A `session.update`'s configuration in its resolved form, or why it is refused. An invalid
 * configuration ends the session when it is the first one; a rejected voice always does.
 * `owner` is the key whose cloned voices may be used.
 */
export function checkSessionUpdate(session: unknown, owner: string | undefined, first: boolean, voices: VoiceOwnership): ActiveConfig | UpdateRefusal {
  let config: SessionConfig;
  try {
    config = normalizeSessionConfig(session as SessionConfigInput);
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    return { message: first ? error.message : `${error.message} The previous configuration stays active.`, code: 400, fatal: first };
  }
  const voice = config.voice ?? { type: 'default' };
  if (voice.type === 'cloned') {
    if (STOCK_VOICE_IDS.has(voice.voice_id)) {
      return { message: `Voice ${voice.voice_id} is a stock voice; voice.type "cloned" needs a voice you cloned.`, code: 403, fatal: true };
    }
    if (owner === undefined || !voices.owns(owner, voice.voice_id)) {
      return { message: `Voice ${voice.voice_id} is not a cloned voice owned by this API key.`, code: 403, fatal: true };
    }
  }
  return {
    source_language: config.source_language,
    target_language: config.target_language,
    output_modalities: config.output_modalities ?? ['text', 'audio'],
    voice,
  };
}

/** Whether `checkSessionUpdate` refused. */
export function isRefusal(result: ActiveConfig | UpdateRefusal): result is UpdateRefusal {
  return 'code' in result;
}

/** The session as `session.created` and `session.updated` describe it; `echoed`, a misbehaving service's echo of the key (a fault switch). */
export function sessionInfo(config: ActiveConfig, id: string | undefined, handshake: RealtimeHandshake, echoed: string | undefined): WireSessionInfo {
  const info: WireSessionInfo = {
    id,
    source_language: config.source_language,
    target_language: config.target_language,
    output_modalities: [...config.output_modalities],
    voice: { ...config.voice },
  };
  if (handshake.model !== undefined) info.model = handshake.model;
  if (handshake.mode !== undefined) info.mode = handshake.mode;
  if (echoed !== undefined) info.api_key = echoed;
  return info;
}

/**
 * The frames answering `utterances` (one utterance, a part of one, or a group answered as one):
 * the transcript, the translation's text deltas and done (with `text`), the audio in pieces of
 * `OUTPUT_PIECE_BYTES` as JSON deltas or binary frames, and its done (with `audio`).
 */
export function responseFrames(
  utterances: readonly SegmentedUtterance[],
  config: ActiveConfig,
  audioFrames: RealtimeSessionSettings['audioFrames'],
): Array<string | Buffer> {
  const first = utterances[0]!;
  const last = utterances[utterances.length - 1]!;
  const seconds = utterances.reduce((sum, u) => sum + u.durationSeconds, 0).toFixed(2);
  const which =
    first.index !== last.index
      ? `utterances ${first.index}-${last.index}`
      : utterances.length === 1 && first.part !== 'whole'
        ? `utterance ${first.index} part ${first.part === 'first' ? 1 : 2}`
        : `utterance ${first.index}`;
  const transcript = `[${config.source_language} ${which}, ${seconds} s]`;
  const translation = `[${config.target_language} translation of ${which}, ${seconds} s]`;
  const frames: Array<string | Buffer> = [encodeServerEvent.transcriptCompleted(transcript)];
  if (config.output_modalities.includes('text')) {
    for (const delta of words(translation)) frames.push(encodeServerEvent.textDelta(delta));
    frames.push(encodeServerEvent.textDone(translation));
  }
  if (config.output_modalities.includes('audio')) {
    const audio = utterances.length === 1 ? first.audio : Buffer.concat(utterances.map((u) => u.audio));
    for (let at = 0; at < audio.length; at += OUTPUT_PIECE_BYTES) {
      const piece = audio.subarray(at, Math.min(audio.length, at + OUTPUT_PIECE_BYTES));
      frames.push(audioFrames === 'binary' ? piece : encodeServerEvent.audioDelta(piece));
    }
    frames.push(encodeServerEvent.audioDone());
  }
  return frames;
}
