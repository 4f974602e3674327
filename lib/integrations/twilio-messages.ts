/**
 * The Twilio Media Streams wire format: parsing the JSON messages Twilio sends over the stream's
 * WebSocket, and building the ones a bidirectional stream sends back. Pure functions, no state.
 *
 * Inbound (Twilio to the app): `connected`, `start`, `media`, `mark`, `dtmf`, `stop`. Numbers
 * arrive as strings on the wire (`"sequenceNumber":"3"`, `"timestamp":"140"`); both strings of
 * digits and numbers are accepted. An event name not listed parses as `{ event: 'unknown' }` so
 * the caller can ignore it; anything that is not a JSON object with a string `event`, or a known
 * event missing what it needs (a `media` without a base64 `payload`), is a `ProtocolError`.
 *
 * Outbound (the app to Twilio): `media` (base64 G.711 mu-law, 8 kHz mono), `mark` (Twilio
 * echoes it back once the audio sent before it has been played, or at once after a `clear`),
 * and `clear` (Twilio drops the audio it has buffered).
 */
import { ProtocolError, ValidationError } from '../errors.js';
import { decodeStrictBase64 } from '../realtime/codec.js';

/** Samples per second of Twilio's audio (G.711, 8 kHz). */
export const TWILIO_SAMPLE_RATE = 8000;
/** Duration of one Twilio `media` message, in milliseconds. */
export const TWILIO_FRAME_MS = 20;
/** Bytes of mu-law in one 20 ms `media` message (one byte per sample). */
export const TWILIO_FRAME_BYTES = (TWILIO_SAMPLE_RATE * TWILIO_FRAME_MS) / 1000;
/** The only `mediaFormat` a Twilio Media Stream carries. */
export const TWILIO_MEDIA_FORMAT: Readonly<TwilioMediaFormat> = Object.freeze({
  encoding: 'audio/x-mulaw',
  sampleRate: TWILIO_SAMPLE_RATE,
  channels: 1,
});
/** Default bound on one inbound message, in bytes of JSON text (a 20 ms `media` is about 400). */
export const DEFAULT_MAX_TWILIO_MESSAGE_BYTES = 64 * 1024;

/** `start.mediaFormat`. */
export interface TwilioMediaFormat {
  encoding: string;
  sampleRate: number;
  channels: number;
}

/** The stream's metadata from `start`. */
export interface TwilioStreamInfo {
  streamSid: string;
  callSid?: string;
  accountSid?: string;
  /** Tracks the stream carries, e.g. `['inbound']`. */
  tracks: string[];
  /** As sent; absent when Twilio sent none (then Twilio's only format is assumed). */
  mediaFormat?: TwilioMediaFormat;
  /** `<Parameter>` values of the TwiML `<Stream>`. */
  customParameters: Record<string, string>;
}

export type TwilioInboundMessage =
  | { event: 'connected'; protocol?: string; version?: string }
  | { event: 'start'; sequenceNumber?: number; start: TwilioStreamInfo }
  | {
      event: 'media';
      sequenceNumber?: number;
      streamSid?: string;
      /** `inbound` or `outbound`; `inbound` when absent. */
      track: string;
      /** Twilio's chunk counter (1, 2, ...), when present. */
      chunk?: number;
      /** Stream time of the first sample, in ms from the stream's start, when present. */
      timestamp?: number;
      /** The decoded payload: G.711 mu-law bytes, one per sample. */
      audio: Buffer;
    }
  | { event: 'mark'; sequenceNumber?: number; streamSid?: string; name: string }
  | { event: 'dtmf'; sequenceNumber?: number; streamSid?: string; track?: string; digit: string }
  | { event: 'stop'; sequenceNumber?: number; streamSid?: string; callSid?: string }
  | { event: 'unknown'; wireEvent: string };

export interface TwilioOutboundMedia {
  event: 'media';
  streamSid: string;
  media: { payload: string };
}
export interface TwilioOutboundMark {
  event: 'mark';
  streamSid: string;
  mark: { name: string };
}
export interface TwilioOutboundClear {
  event: 'clear';
  streamSid: string;
}
export type TwilioOutboundMessage = TwilioOutboundMedia | TwilioOutboundMark | TwilioOutboundClear;

/**
 * One to 15 ASCII digits: a count that is exact as a number. A loop, not a regular expression:
 * every `media` message has three.
 */
function isDigits(value: string): boolean {
  if (value.length === 0 || value.length > 15) return false;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}

type Obj = Record<string, unknown>;

function isObject(value: unknown): value is Obj {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function fail(event: string, problem: string): never {
  throw new ProtocolError(`Malformed Twilio "${event}" message: ${problem}. It was ignored.`);
}

/** A non-negative integer from a number or a string of digits; undefined when absent. */
function optionalCount(event: string, field: string, value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return value;
  if (typeof value === 'string' && isDigits(value)) return Number(value);
  return fail(event, `${field} must be a non-negative integer (got ${describeTwilioValue(value)})`);
}

function optionalString(event: string, field: string, value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') return value;
  return fail(event, `${field} must be a string (got ${describeTwilioValue(value)})`);
}

/**
 * A value a caller sent, as it may be shown in a message or a log line: a string quoted (its
 * control characters escaped, so it cannot forge a line) and cut at 40 characters.
 */
export function describeTwilioValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value);
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value;
}

function parseMediaFormat(value: unknown): TwilioMediaFormat | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isObject(value)) return fail('start', `start.mediaFormat must be an object (got ${describeTwilioValue(value)})`);
  const encoding = optionalString('start', 'start.mediaFormat.encoding', value.encoding) ?? '';
  const sampleRate = optionalCount('start', 'start.mediaFormat.sampleRate', value.sampleRate) ?? 0;
  const channels = optionalCount('start', 'start.mediaFormat.channels', value.channels) ?? 0;
  return { encoding, sampleRate, channels };
}

function parseStart(msg: Obj): TwilioInboundMessage {
  const start = msg.start;
  if (!isObject(start)) fail('start', 'no "start" object');
  const streamSid = optionalString('start', 'streamSid', start.streamSid ?? msg.streamSid);
  if (!streamSid) fail('start', 'no streamSid');
  const tracks = start.tracks === undefined ? ['inbound'] : start.tracks;
  if (!Array.isArray(tracks) || !tracks.every((t) => typeof t === 'string')) {
    fail('start', `start.tracks must be an array of strings (got ${describeTwilioValue(tracks)})`);
  }
  const customParameters: Record<string, string> = {};
  if (isObject(start.customParameters)) {
    for (const [key, value] of Object.entries(start.customParameters)) {
      if (typeof value === 'string') customParameters[key] = value;
    }
  }
  const info: TwilioStreamInfo = { streamSid, tracks: [...(tracks as string[])], customParameters };
  const callSid = optionalString('start', 'start.callSid', start.callSid);
  const accountSid = optionalString('start', 'start.accountSid', start.accountSid);
  const mediaFormat = parseMediaFormat(start.mediaFormat);
  if (callSid !== undefined) info.callSid = callSid;
  if (accountSid !== undefined) info.accountSid = accountSid;
  if (mediaFormat !== undefined) info.mediaFormat = mediaFormat;
  return withSequence({ event: 'start', start: info }, msg, 'start');
}

function parseMedia(msg: Obj): TwilioInboundMessage {
  const media = msg.media;
  if (!isObject(media)) fail('media', 'no "media" object');
  const payload = media.payload;
  if (typeof payload !== 'string') fail('media', `media.payload must be a base64 string (got ${describeTwilioValue(payload)})`);
  const audio = decodeStrictBase64(payload);
  if (audio === undefined) fail('media', 'media.payload is not valid base64');
  const out: Extract<TwilioInboundMessage, { event: 'media' }> = {
    event: 'media',
    track: optionalString('media', 'media.track', media.track) ?? 'inbound',
    audio,
  };
  const chunk = optionalCount('media', 'media.chunk', media.chunk);
  const timestamp = optionalCount('media', 'media.timestamp', media.timestamp);
  const streamSid = optionalString('media', 'streamSid', msg.streamSid);
  if (chunk !== undefined) out.chunk = chunk;
  if (timestamp !== undefined) out.timestamp = timestamp;
  if (streamSid !== undefined) out.streamSid = streamSid;
  return withSequence(out, msg, 'media');
}

function withSequence<T extends TwilioInboundMessage>(out: T, msg: Obj, event: string): T {
  const sequenceNumber = optionalCount(event, 'sequenceNumber', msg.sequenceNumber);
  if (sequenceNumber !== undefined) (out as { sequenceNumber?: number }).sequenceNumber = sequenceNumber;
  if (out.event !== 'start' && out.event !== 'connected' && out.event !== 'unknown' && (out as { streamSid?: string }).streamSid === undefined) {
    const streamSid = optionalString(event, 'streamSid', msg.streamSid);
    if (streamSid !== undefined) (out as { streamSid?: string }).streamSid = streamSid;
  }
  return out;
}

/**
 * Parses one message of a Twilio Media Stream: a WebSocket text frame as a string or Buffer
 * (UTF-8), or an object already parsed from JSON. Text longer than `maxBytes` (default
 * `DEFAULT_MAX_TWILIO_MESSAGE_BYTES`) is refused without being parsed.
 *
 * @throws ProtocolError for anything that is not a well-formed message (see the module comment).
 */
export function parseTwilioMessage(data: unknown, maxBytes = DEFAULT_MAX_TWILIO_MESSAGE_BYTES): TwilioInboundMessage {
  let msg: unknown = data;
  if (typeof data === 'string' || Buffer.isBuffer(data) || data instanceof Uint8Array) {
    const size = typeof data === 'string' ? Buffer.byteLength(data) : data.byteLength;
    if (size > maxBytes) {
      throw new ProtocolError(`A Twilio message of ${size} bytes is over the ${maxBytes}-byte limit. It was ignored.`);
    }
    const text =
      typeof data === 'string'
        ? data
        : Buffer.isBuffer(data)
          ? data.toString('utf8')
          : Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8');
    try {
      msg = JSON.parse(text);
    } catch {
      throw new ProtocolError(`A Twilio message is not JSON (starts with ${describeTwilioValue(text.slice(0, 20))}). It was ignored.`);
    }
  }
  if (!isObject(msg)) throw new ProtocolError(`A Twilio message must be a JSON object (got ${describeTwilioValue(msg)}). It was ignored.`);
  const event = msg.event;
  if (typeof event !== 'string') {
    throw new ProtocolError(`A Twilio message has no "event" name (got ${describeTwilioValue(event)}). It was ignored.`);
  }
  switch (event) {
    case 'connected': {
      const out: TwilioInboundMessage = { event: 'connected' };
      const protocol = optionalString(event, 'protocol', msg.protocol);
      const version = optionalString(event, 'version', msg.version);
      if (protocol !== undefined) out.protocol = protocol;
      if (version !== undefined) out.version = version;
      return out;
    }
    case 'start':
      return parseStart(msg);
    case 'media':
      return parseMedia(msg);
    case 'mark': {
      const mark = msg.mark;
      if (!isObject(mark) || typeof mark.name !== 'string') fail(event, 'mark.name must be a string');
      return withSequence({ event: 'mark', name: mark.name }, msg, event);
    }
    case 'dtmf': {
      const dtmf = msg.dtmf;
      if (!isObject(dtmf) || typeof dtmf.digit !== 'string') fail(event, 'dtmf.digit must be a string');
      const out: TwilioInboundMessage = { event: 'dtmf', digit: dtmf.digit };
      const track = optionalString(event, 'dtmf.track', dtmf.track);
      if (track !== undefined) out.track = track;
      return withSequence(out, msg, event);
    }
    case 'stop': {
      const out: TwilioInboundMessage = { event: 'stop' };
      const callSid = isObject(msg.stop) ? optionalString(event, 'stop.callSid', msg.stop.callSid) : undefined;
      if (callSid !== undefined) out.callSid = callSid;
      return withSequence(out, msg, event);
    }
    default:
      return { event: 'unknown', wireEvent: event };
  }
}

/**
 * Checks `start.mediaFormat` against the one format the bridge decodes (`TWILIO_MEDIA_FORMAT`).
 * An absent format is taken to be that one.
 *
 * @throws ValidationError (field `start.mediaFormat`) naming the format found and the one accepted.
 */
export function checkTwilioMediaFormat(format: TwilioMediaFormat | undefined): TwilioMediaFormat {
  if (format === undefined) return { ...TWILIO_MEDIA_FORMAT };
  const ok =
    format.encoding.toLowerCase() === TWILIO_MEDIA_FORMAT.encoding &&
    format.sampleRate === TWILIO_MEDIA_FORMAT.sampleRate &&
    format.channels === TWILIO_MEDIA_FORMAT.channels;
  if (ok) return format;
  throw new ValidationError('start.mediaFormat', `${describeFormat(TWILIO_MEDIA_FORMAT)} (G.711 mu-law)`, describeFormat(format));
}

function describeFormat(format: TwilioMediaFormat): string {
  const channels = format.channels === 1 ? '1 channel' : `${format.channels} channels`;
  return `${JSON.stringify(format.encoding)} at ${format.sampleRate} Hz, ${channels}`;
}

function checkStreamSid(streamSid: string): string {
  if (typeof streamSid !== 'string' || streamSid.length === 0) {
    throw new ValidationError('streamSid', 'the non-empty streamSid of the stream (from its start message)', typeof streamSid);
  }
  return streamSid;
}

/** An outbound `media` message carrying `mulaw` (G.711 mu-law bytes, 8 kHz mono) as base64. */
export function twilioMediaMessage(streamSid: string, mulaw: Buffer): TwilioOutboundMedia {
  return { event: 'media', streamSid: checkStreamSid(streamSid), media: { payload: mulaw.toString('base64') } };
}

/** An outbound `mark` message; Twilio echoes `name` back when the audio sent before it has played. */
export function twilioMarkMessage(streamSid: string, name: string): TwilioOutboundMark {
  if (typeof name !== 'string' || name.length === 0) throw new ValidationError('name', 'a non-empty mark name', typeof name);
  return { event: 'mark', streamSid: checkStreamSid(streamSid), mark: { name } };
}

/** An outbound `clear` message: Twilio drops the audio it has buffered and echoes pending marks. */
export function twilioClearMessage(streamSid: string): TwilioOutboundClear {
  return { event: 'clear', streamSid: checkStreamSid(streamSid) };
}
