/**
 * What the relay makes of each frame from the browser, before anything reaches the service: a
 * pure function of the frame. The service's limits are checked here (a text event of at most
 * 1 MiB, at most 256 KiB of decoded audio per append), and what breaks them is refused with the
 * message and code of an `error` event instead of being forwarded. Audio comes out decoded (the
 * relay sends it on in appends of its own, and keeps it for a replay after a reconnect); a
 * `session.update` comes out without its `auth` (the token stays at the relay); any other event
 * is forwarded as it came.
 *
 * Binary frames are PCM16 LE mono 24 kHz audio, as an append's payload: cheaper for a browser
 * than base64 (the service itself ignores binary frames from clients).
 */
import { ProtocolError } from '../errors.js';
import { MAX_APPEND_AUDIO_BYTES, MAX_CLIENT_EVENT_BYTES, decodeClientEvent, readAppendAudio, type ClientEvent } from '../realtime/codec.js';

export type ClientFrame =
  | { kind: 'audio'; pcm: Buffer }
  /** `text`: the event without `auth`; `token`: its `auth.api_key`; `audio`: whether its session asks for audio output. */
  | { kind: 'session.update'; text: string; token: string | undefined; audio: boolean }
  | { kind: 'event'; type: string; text: string }
  | { kind: 'refused'; message: string; code: number };

/** The HTTP-like codes of the refusals, as the service's `error` events carry them. */
const TOO_LARGE = 413;
const BAD_EVENT = 400;

function refused(message: string, code: number): ClientFrame {
  return { kind: 'refused', message, code };
}

/** Whether a session configuration asks for audio output (the default, when it does not say). */
function asksForAudio(session: unknown): boolean {
  const modalities = session !== null && typeof session === 'object' ? (session as { output_modalities?: unknown }).output_modalities : undefined;
  return !Array.isArray(modalities) || modalities.includes('audio');
}

function readAppend(event: Extract<ClientEvent, { type: 'input_audio_buffer.append' }>): ClientFrame {
  const pcm = readAppendAudio(event.audio, 'It was not forwarded.');
  if (!Buffer.isBuffer(pcm)) return refused(pcm.message, pcm.code);
  return { kind: 'audio', pcm };
}

/** Reads one frame from the browser. */
export function readClientFrame(data: Buffer, isBinary: boolean): ClientFrame {
  if (isBinary) {
    if (data.length > MAX_APPEND_AUDIO_BYTES) {
      return refused(
        `A binary audio frame of ${data.length} bytes; at most ${MAX_APPEND_AUDIO_BYTES} bytes (256 KiB) of PCM16 per frame. It was not forwarded.`,
        TOO_LARGE,
      );
    }
    return { kind: 'audio', pcm: data };
  }
  if (data.length > MAX_CLIENT_EVENT_BYTES) {
    return refused(
      `The event is ${data.length} bytes; a client event may be at most ${MAX_CLIENT_EVENT_BYTES} bytes (1 MiB) of JSON text. It was not forwarded.`,
      TOO_LARGE,
    );
  }
  const text = data.toString('utf8');
  let event: ClientEvent;
  try {
    event = decodeClientEvent(text);
  } catch (error) {
    if (!(error instanceof ProtocolError)) throw error;
    return refused(`${error.message} It was not forwarded.`, BAD_EVENT);
  }
  switch (event.type) {
    case 'input_audio_buffer.append':
      return readAppend(event);
    case 'session.update': {
      const auth = event.auth as { api_key?: unknown } | null | undefined;
      const token = auth !== null && typeof auth === 'object' && typeof auth.api_key === 'string' ? auth.api_key : undefined;
      if (event.auth === undefined) return { kind: 'session.update', text, token, audio: asksForAudio(event.session) };
      const { auth: _dropped, ...rest } = event.raw;
      return { kind: 'session.update', text: JSON.stringify(rest), token, audio: asksForAudio(event.session) };
    }
    case 'unknown':
      return { kind: 'event', type: event.wireType, text };
    default:
      return { kind: 'event', type: event.type, text };
  }
}
