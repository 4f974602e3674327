/**
 * What a `RealtimeTranslator` takes and tells: its options (checked and resolved with their
 * defaults by `resolveOptions`, before anything is opened), its states, stats and typed events.
 */
import { RtTranslateError, ValidationError } from '../errors.js';
import { describeReceived, intOption, numberOption } from '../options.js';
import type { LatencySummary, ResponseTiming } from '../realtime/response-timing.js';
import {
  encodeSessionUpdate,
  normalizeModalities,
  type OutputModality,
  type ServerEventOf,
  type ServerEventListenerArgs,
  type SessionConfigInput,
} from '../realtime/wire-format.js';
import { RELAY_SUBPROTOCOL, TOKEN_SUBPROTOCOL_PREFIX } from '../relay/subprotocols.js';
import { resolveMicrophoneOptions, type MicrophoneOptions } from './capture.js';
import { type PlaybackPosition } from './playback.js';

export type WhilePlaying = 'continue' | 'duck' | 'mute';

export interface RealtimeTranslatorOptions extends MicrophoneOptions {
  /**
   * The relay's realtime endpoint: `ws://` or `wss://`, or a path resolved against the page
   * (`/v1/realtime` becomes `wss://HOST/v1/realtime` on an https page).
   */
  url: string;
  /** The token the relay minted for this page, offered as a WebSocket subprotocol (kept out of URLs and their logs). */
  token?: string;
  /** Source language tag, one of the 14 realtime tags (case-insensitive). */
  from: string;
  /** Target language tag. */
  to: string;
  /** A cloned voice (owned by the relay's key). Default: the target language's built-in voice. */
  voiceId?: number;
  /** `['text', 'audio']` (default), `['text']` or `['audio']`. */
  outputModalities?: readonly OutputModality[];
  /** Play the translated audio. Default true. */
  play?: boolean;
  /** The microphone while a translation plays: `continue` (default), `duck` (lowered to `duckGain`) or `mute`. */
  whilePlaying?: WhilePlaying;
  /** Microphone gain while ducked, 0 to 1. Default 0.1 (-20 dB). */
  duckGain?: number;
  /** How long the microphone stays ducked or muted after the translation stops, in ms. Default 300. */
  echoTailMs?: number;
  /** Time allowed from connecting to `session.created`, in ms. Default 90 000 (cold starts). */
  readyTimeoutMs?: number;
  /** Audio held while the session starts (the oldest is dropped beyond it), in ms. Default 10 000. */
  maxPendingMs?: number;
  /** Bytes the socket may hold unsent before microphone audio is dropped (the network is behind). Default 1 MiB. */
  maxSocketBufferBytes?: number;
  /** Level above which sent audio counts as speech (for timing responses), in dBFS. Default -40. */
  speechThresholdDbfs?: number;
  /** Silence that ends a stretch of speech, in ms. Default 600. */
  speechSilenceMs?: number;
  /** An AudioContext to use (it is not closed by `stop()`); default one made by `start()`. */
  audioContext?: AudioContext;
}

export type TranslatorState = 'idle' | 'starting' | 'running' | 'stopped';

/** How the session ended: by `stop()`, or the connection closed (its close code and reason). */
export interface ClosedInfo {
  byUser: boolean;
  code: number;
  reason: string;
}

export interface TranslatorStats {
  /** Microphone audio sent, in ms. */
  sentMs: number;
  /** Microphone audio dropped (held too long while starting, or the socket was behind), in ms. */
  droppedInputMs: number;
  /** Translated audio received, in ms. */
  receivedAudioMs: number;
  /** Where playback is. */
  playback: PlaybackPosition;
  /** Responses completed. */
  responses: number;
  /** From the end of the answered speech to each stage of the response, over all responses. */
  latency: { transcriptMs: LatencySummary; firstTextMs: LatencySummary; firstAudioMs: LatencySummary; doneMs: LatencySummary };
}

/** Listener arguments of each event (the Node stream's names, audio as Int16Array). */
export interface RealtimeTranslatorEvents extends ServerEventListenerArgs<Int16Array> {
  state: [state: TranslatorState];
  response: [timing: ResponseTiming];
  /** Playback started (true) or the queue played out (false). */
  playing: [playing: boolean];
  /** Something went wrong that did not end the session (audio dropped). */
  warning: [warning: RtTranslateError];
  /** The session failed: the connection was lost or refused, or it did not start in time. `closed` follows. */
  error: [error: RtTranslateError];
  closed: [info: ClosedInfo];
}

export type BrowserServerEvent = ServerEventOf<Int16Array>;

export interface Resolved {
  url: URL;
  /** Subprotocols offered: the relay's, and the token in one. */
  protocols: string[];
  session: SessionConfigInput;
  modalities: OutputModality[];
  play: boolean;
  whilePlaying: WhilePlaying;
  duckGain: number;
  echoTailMs: number;
  readyTimeoutMs: number;
  maxPendingMs: number;
  maxSocketBufferBytes: number;
  speechThresholdDbfs: number;
  speechSilenceMs: number;
  microphone: MicrophoneOptions;
}

/** Checks every option before anything starts; a `ValidationError` names the first field at fault. */
export function resolveOptions(options: RealtimeTranslatorOptions): Resolved {
  if (typeof options !== 'object' || options === null) throw new ValidationError('options', 'an object { url, from, to, ... }', describeReceived(options));
  if ('apiKey' in options) {
    throw new ValidationError('apiKey', 'no API key in a web page: connect to a relay (createRealtimeRelay) with a token it minted', 'an API key');
  }
  if (typeof options.url !== 'string' || options.url === '')
    throw new ValidationError('url', 'the relay endpoint, a ws:// or wss:// URL or a path', describeReceived(options.url));
  let url: URL;
  try {
    url = new URL(options.url, globalThis.location?.href);
  } catch {
    throw new ValidationError('url', 'the relay endpoint, a ws:// or wss:// URL or a path', describeReceived(options.url));
  }
  if (url.protocol === 'http:' || url.protocol === 'https:') url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  if (url.protocol !== 'ws:' && url.protocol !== 'wss:') throw new ValidationError('url', 'a ws:// or wss:// URL or a path', describeReceived(options.url));
  if (options.token !== undefined) {
    // A subprotocol is an HTTP token: letters, digits and !#$%&'*+-.^_`|~ (the relay's tokens are).
    if (typeof options.token !== 'string' || !/^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$/.test(options.token)) {
      throw new ValidationError('token', 'a token minted by the relay (a non-empty string of URL-safe characters)', describeReceived(options.token));
    }
  }
  const session: SessionConfigInput = { source_language: options.from, target_language: options.to };
  const modalities =
    options.outputModalities === undefined ? (['text', 'audio'] as OutputModality[]) : normalizeModalities(options.outputModalities, 'outputModalities');
  session.output_modalities = modalities;
  if (options.voiceId !== undefined) session.voice = { type: 'cloned', voice_id: options.voiceId };
  // The languages and the voice, checked as session.update will send them, under the option names.
  try {
    encodeSessionUpdate(session);
  } catch (error) {
    if (error instanceof ValidationError) {
      const field = error.field
        .replace('session.source_language', 'from')
        .replace('session.target_language', 'to')
        .replace('session.voice.voice_id', 'voiceId');
      throw new ValidationError(field, error.accepted, undefined, { cause: error });
    }
    throw error;
  }
  const whilePlaying = options.whilePlaying ?? 'continue';
  if (whilePlaying !== 'continue' && whilePlaying !== 'duck' && whilePlaying !== 'mute') {
    throw new ValidationError('whilePlaying', '"continue", "duck" or "mute"', describeReceived(whilePlaying));
  }
  if (options.play !== undefined && typeof options.play !== 'boolean') throw new ValidationError('play', 'true or false', describeReceived(options.play));
  if (options.audioContext !== undefined && !(options.audioContext instanceof AudioContext)) {
    throw new ValidationError('audioContext', 'an AudioContext', describeReceived(options.audioContext));
  }
  resolveMicrophoneOptions(options);
  return {
    url,
    protocols: options.token === undefined ? [] : [RELAY_SUBPROTOCOL, `${TOKEN_SUBPROTOCOL_PREFIX}${options.token}`],
    session,
    modalities,
    play: options.play ?? true,
    whilePlaying,
    duckGain: numberOption(options.duckGain, 'duckGain', { min: 0, max: 1, fallback: 0.1 }),
    echoTailMs: intOption(options.echoTailMs, 'echoTailMs', { min: 0, max: 10_000, fallback: 300 }),
    readyTimeoutMs: intOption(options.readyTimeoutMs, 'readyTimeoutMs', { min: 1, max: 600_000, fallback: 90_000 }),
    maxPendingMs: intOption(options.maxPendingMs, 'maxPendingMs', { min: 0, max: 60_000, fallback: 10_000 }),
    maxSocketBufferBytes: intOption(options.maxSocketBufferBytes, 'maxSocketBufferBytes', { min: 1024, fallback: 1024 * 1024 }),
    speechThresholdDbfs: numberOption(options.speechThresholdDbfs, 'speechThresholdDbfs', { max: 0, fallback: -40 }),
    speechSilenceMs: intOption(options.speechSilenceMs, 'speechSilenceMs', { min: 1, fallback: 600 }),
    microphone: options,
  };
}
