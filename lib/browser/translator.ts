/**
 * Live speech translation in a web page: the microphone to a realtime relay (never to the
 * service itself: the page holds a short-lived token, the relay holds the API key), the
 * translated audio played as it arrives, and the session's events under the Node stream's names
 * (`transcript.delta`, `transcript.done`, `text.delta`, `text.done`, `audio.delta`,
 * `audio.done`, `server.error`, `response` with a `ResponseTiming`).
 *
 * `start()` must run in a user gesture (a click): it creates or resumes the AudioContext before
 * anything is awaited, which Safari requires. The context runs at the device's rate; the
 * worklets convert to and from 24 kHz. Audio captured before the service has created the
 * session is held (up to `maxPendingMs`) and sent once it has.
 *
 * Echo: the browser's echo cancellation and noise suppression are asked for by default; with
 * speakers and no headphones, `whilePlaying: 'duck'` lowers the microphone (or `'mute'`
 * silences it) while a translation plays and for `echoTailMs` after.
 */
import { ConnectionError, ProtocolError, RtTranslateError, TimeoutError, ValidationError, describeCause } from '../errors.js';
import { describeReceived, intOption, numberOption } from '../options.js';
import type { LatencySummary, ResponseTiming } from '../realtime/response-timing.js';
import { LatencySeries } from '../realtime/response-timing.js';
import {
  audioAppendText,
  checkAppendAudio,
  decodeServerEventWith,
  encodeSessionUpdate,
  normalizeModalities,
  type OutputModality,
  type ServerEventOf,
  type ServerEventListenerArgs,
  type SessionConfigInput,
} from '../realtime/wire-format.js';
import { RELAY_SUBPROTOCOL, TOKEN_SUBPROTOCOL_PREFIX } from '../relay/subprotocols.js';
import { base64ToBytes, bytesToBase64 } from './base64.js';
import { MicrophoneCapture, resolveMicrophoneOptions, type MicrophoneOptions } from './capture.js';
import { TypedEmitter } from './emitter.js';
import { PcmPlayer, type PlaybackPosition } from './playback.js';
import { ResponseClock } from './response-clock.js';

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

type BrowserServerEvent = ServerEventOf<Int16Array>;

interface Resolved {
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
function resolveOptions(options: RealtimeTranslatorOptions): Resolved {
  if (typeof options !== 'object' || options === null) throw new ValidationError('options', 'an object { url, from, to, ... }', describeReceived(options));
  if ('apiKey' in options) {
    throw new ValidationError('apiKey', 'no API key in a web page: connect to a relay (createRealtimeRelay) with a token it minted', 'an API key');
  }
  if (typeof options.url !== 'string' || options.url === '') throw new ValidationError('url', 'the relay endpoint, a ws:// or wss:// URL or a path', describeReceived(options.url));
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
  const modalities = options.outputModalities === undefined ? (['text', 'audio'] as OutputModality[]) : normalizeModalities(options.outputModalities, 'outputModalities');
  session.output_modalities = modalities;
  if (options.voiceId !== undefined) session.voice = { type: 'cloned', voice_id: options.voiceId };
  // The languages and the voice, checked as session.update will send them, under the option names.
  try {
    encodeSessionUpdate(session);
  } catch (error) {
    if (error instanceof ValidationError) {
      const field = error.field.replace('session.source_language', 'from').replace('session.target_language', 'to').replace('session.voice.voice_id', 'voiceId');
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

/** PCM16 bytes of `pcm`, little-endian as on the wire. */
const bytesOf = (pcm: Int16Array): Uint8Array => new Uint8Array(pcm.buffer, pcm.byteOffset, pcm.byteLength);

/** 24 kHz frames to ms. */
const ms = (frames: number): number => frames / 24;

export class RealtimeTranslator extends TypedEmitter<RealtimeTranslatorEvents> {
  readonly #options: Resolved;
  readonly #audioContext: AudioContext | undefined;
  #state: TranslatorState = 'idle';
  #context: AudioContext | undefined;
  #socket: WebSocket | undefined;
  #microphone: MicrophoneCapture | undefined;
  #player: PcmPlayer | undefined;
  #clock: ResponseClock;
  #readyTimer: ReturnType<typeof setTimeout> | undefined;
  /** While `start()` runs: ends its waits when the session ends first. */
  #cancelStart: ((reason: RtTranslateError) => void) | undefined;
  #releaseTimer: ReturnType<typeof setTimeout> | undefined;
  /** Microphone chunks captured before the session was created. */
  #pending: Int16Array[] = [];
  #pendingFrames = 0;
  /** A byte of audio split across two frames from the server. */
  #oddByte: number | undefined;
  #sentFrames = 0;
  #droppedFrames = 0;
  #receivedFrames = 0;
  #responses = 0;
  #behind = false;
  readonly #latency = { transcriptMs: new LatencySeries(), firstTextMs: new LatencySeries(), firstAudioMs: new LatencySeries(), doneMs: new LatencySeries() };

  /** Checks the options (a `ValidationError` names the first field at fault); nothing starts before `start()`. */
  constructor(options: RealtimeTranslatorOptions) {
    super();
    this.#options = resolveOptions(options);
    this.#audioContext = options.audioContext;
    this.#clock = new ResponseClock(this.#options.speechThresholdDbfs, this.#options.speechSilenceMs);
  }

  get state(): TranslatorState {
    return this.#state;
  }

  /** The AudioContext in use (once started). */
  get audioContext(): AudioContext | undefined {
    return this.#context;
  }

  /** What the browser applied to the microphone (once it is open). */
  get microphoneSettings(): MediaTrackSettings | undefined {
    return this.#microphone?.settings;
  }

  get stats(): TranslatorStats {
    return {
      sentMs: ms(this.#sentFrames),
      droppedInputMs: ms(this.#droppedFrames),
      receivedAudioMs: ms(this.#receivedFrames),
      playback: this.#player?.position ?? { playedFrames: 0, playedMs: 0, queuedFrames: 0, droppedFrames: 0, playing: false },
      responses: this.#responses,
      latency: {
        transcriptMs: this.#latency.transcriptMs.summary(),
        firstTextMs: this.#latency.firstTextMs.summary(),
        firstAudioMs: this.#latency.firstAudioMs.summary(),
        doneMs: this.#latency.doneMs.summary(),
      },
    };
  }

  /**
   * Starts the session: call it from a user gesture. Resolves once the service has created the
   * session and the microphone is open; rejects (and emits `error`, then `closed`) when the
   * relay refuses the connection, the microphone is refused, or the session is not created in
   * `readyTimeoutMs`, nor the AudioContext started (browsers start audio only in a gesture).
   * Rejects at once when the session ends first (`stop()`, a failure); a microphone that opens
   * after that is closed as it opens.
   */
  async start(): Promise<void> {
    if (this.#state !== 'idle') throw new ValidationError('start()', 'one call per translator (make a new one to start again)', this.#state);
    // Before any await: a context made or resumed outside the gesture stays suspended in Safari.
    const context = this.#audioContext ?? new AudioContext();
    this.#context = context;
    const resumed = context.state === 'running' ? Promise.resolve() : context.resume();
    this.#setState('starting');
    // Rejected when the session ends before it has started: every wait below races it.
    const cancelled = new Promise<never>((_, reject) => (this.#cancelStart = reject));
    cancelled.catch(() => undefined);
    try {
      const ready = Promise.race([this.#connect(), cancelled]);
      ready.catch(() => undefined); // awaited below, after the context resumes; not unhandled meanwhile
      await this.#resumed(resumed, cancelled);
      const workletUrl = this.#options.microphone.workletUrl;
      const microphoneOpening = MicrophoneCapture.open(context, this.#options.microphone, (pcm) => this.#onCaptured(pcm));
      const playerCreating = this.#options.play ? PcmPlayer.create(context, workletUrl !== undefined ? { workletUrl } : {}) : Promise.resolve(undefined);
      for (const opening of [microphoneOpening, playerCreating]) {
        // Opened after the session ended (the race below lost it): closed here.
        opening.then((part) => this.#stopped() && part?.close(), () => undefined);
      }
      const [microphone, player, session] = await Promise.allSettled([Promise.race([microphoneOpening, cancelled]), Promise.race([playerCreating, cancelled]), ready]);
      const opened = [microphone.status === 'fulfilled' ? microphone.value : undefined, player.status === 'fulfilled' ? player.value : undefined] as const;
      if (this.#stopped()) {
        // The session ended while the rest was opening: close what did open.
        for (const part of opened) part?.close();
      } else {
        [this.#microphone, this.#player] = opened;
        this.#player?.on('playing', (playing) => this.#onPlaying(playing));
      }
      for (const result of [microphone, player, session]) if (result.status === 'rejected') throw result.reason;
      if (this.#stopped()) throw new ConnectionError('The session ended while it was starting.');
    } catch (error) {
      const failure = error instanceof RtTranslateError ? error : new ConnectionError(`The session could not start: ${describeCause(error)}`, { cause: error });
      this.#fail(failure);
      throw failure;
    } finally {
      this.#cancelStart = undefined;
    }
  }

  /** `resumed`, bounded by `readyTimeoutMs`: a context resumed outside a user gesture may wait for one forever. */
  async #resumed(resumed: Promise<void>, cancelled: Promise<never>): Promise<void> {
    const ms = this.#options.readyTimeoutMs;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(new TimeoutError(`The AudioContext did not start within ${ms} ms: browsers start audio only in a user gesture, so call start() from a click or key handler.`, ms));
      }, ms);
    });
    try {
      await Promise.race([resumed, late, cancelled]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Ends the session now: the microphone off, the connection closed, playback stopped. */
  async stop(): Promise<void> {
    if (this.#state === 'stopped') return;
    this.#finish({ byUser: true, code: 1000, reason: 'stopped' });
  }

  /** Stops the translation playing now and drops what is queued (the session goes on). */
  interrupt(): void {
    this.#player?.interrupt();
  }

  /** Read through a method: the state changes while `start()` awaits. */
  #stopped(): boolean {
    return this.#state === 'stopped';
  }

  #setState(state: TranslatorState): void {
    if (this.#state === state) return;
    this.#state = state;
    this.emit('state', state);
  }

  /** Opens the socket and sends `session.update`; resolves on `session.created`. */
  #connect(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const socket = new WebSocket(this.#options.url, this.#options.protocols);
      socket.binaryType = 'arraybuffer';
      this.#socket = socket;
      this.#readyTimer = setTimeout(() => {
        reject(new TimeoutError(`The service did not create the session within ${this.#options.readyTimeoutMs} ms.`, this.#options.readyTimeoutMs));
      }, this.#options.readyTimeoutMs);
      socket.onopen = () => socket.send(encodeSessionUpdate(this.#options.session));
      socket.onmessage = (message: MessageEvent<string | ArrayBuffer>) => {
        let event: BrowserServerEvent;
        try {
          event = typeof message.data === 'string' ? decodeServerEventWith(message.data, (b64) => this.#pcmOf(base64ToBytes(b64))) : this.#binaryAudio(message.data);
        } catch (error) {
          this.#fail(error instanceof ProtocolError ? error : new ProtocolError(String(error)));
          return;
        }
        if (event.type === 'session.created') {
          clearTimeout(this.#readyTimer);
          this.#setState('running');
          this.#flushPending();
          resolve();
        }
        this.#onServerEvent(event);
      };
      socket.onclose = (close: CloseEvent) => {
        clearTimeout(this.#readyTimer);
        if (this.#state === 'stopped') return;
        const error = new ConnectionError(
          this.#state === 'starting'
            ? `The relay closed the connection before the session started (code ${close.code}${close.reason ? `: ${close.reason}` : ''}).`
            : `The connection closed (code ${close.code}${close.reason ? `: ${close.reason}` : ''}).`,
          { closeCode: close.code },
        );
        reject(error);
        this.#fail(error, close);
      };
    });
  }

  #binaryAudio(data: ArrayBuffer): BrowserServerEvent {
    return { type: 'audio.delta', audio: this.#pcmOf(new Uint8Array(data)), wireType: 'binary', raw: undefined };
  }

  /** Bytes from the server as PCM16 samples, a byte split across frames carried to the next. */
  #pcmOf(bytes: Uint8Array): Int16Array {
    let all = bytes;
    if (this.#oddByte !== undefined) {
      all = new Uint8Array(bytes.length + 1);
      all[0] = this.#oddByte;
      all.set(bytes, 1);
      this.#oddByte = undefined;
    }
    if (all.length % 2 === 1) this.#oddByte = all[all.length - 1];
    const even = all.length & ~1;
    // An aligned copy: the bytes may start at an odd offset.
    const pcm = new Int16Array(even / 2);
    new Uint8Array(pcm.buffer).set(all.subarray(0, even));
    return pcm;
  }

  #onServerEvent(event: BrowserServerEvent): void {
    const now = Date.now();
    switch (event.type) {
      case 'session.starting':
        return this.emit('session.starting');
      case 'session.created':
        return this.emit('session.created', { ...event.session, id: event.session.id ?? '' });
      case 'session.updated':
        return this.emit('session.updated', event.session);
      case 'transcript.delta':
        this.#clock.event('transcript', now);
        return this.emit('transcript.delta', event.delta);
      case 'transcript.done':
        this.#clock.event('transcript', now);
        return this.emit('transcript.done', event.text);
      case 'text.delta':
        this.#clock.event('text', now);
        return this.emit('text.delta', event.delta);
      case 'text.done':
        this.#clock.event('text', now);
        this.emit('text.done', event.text ?? '');
        if (!this.#options.modalities.includes('audio')) this.#responseDone(now);
        return;
      case 'audio.delta':
        this.#clock.event('audio', now, event.audio.byteLength);
        this.#receivedFrames += event.audio.length;
        this.#player?.enqueue(event.audio);
        return this.emit('audio.delta', event.audio);
      case 'audio.done':
        this.emit('audio.done');
        this.#responseDone(now);
        return;
      case 'server.error':
        return this.emit('server.error', event.message, event.code);
      default:
        return;
    }
  }

  #responseDone(now: number): void {
    const timing = this.#clock.done(now);
    if (!timing) return;
    this.#responses++;
    this.#latency.transcriptMs.add(timing.transcriptMs);
    this.#latency.firstTextMs.add(timing.firstTextMs);
    this.#latency.firstAudioMs.add(timing.firstAudioMs);
    this.#latency.doneMs.add(timing.doneMs);
    this.emit('response', timing);
  }

  #onCaptured(pcm: Int16Array): void {
    if (this.#state === 'starting') {
      this.#pending.push(pcm);
      this.#pendingFrames += pcm.length;
      while (this.#pendingFrames > (this.#options.maxPendingMs * 24) && this.#pending.length > 0) {
        const dropped = this.#pending.shift()!;
        this.#pendingFrames -= dropped.length;
        this.#dropInput(dropped.length, 'Microphone audio held while the session started was dropped: it took longer than maxPendingMs.');
      }
      return;
    }
    if (this.#state === 'running') this.#send(pcm);
  }

  #flushPending(): void {
    const pending = this.#pending;
    this.#pending = [];
    this.#pendingFrames = 0;
    for (const pcm of pending) this.#send(pcm);
  }

  #send(pcm: Int16Array): void {
    const socket = this.#socket;
    if (!socket || socket.readyState !== WebSocket.OPEN) return;
    if (socket.bufferedAmount > this.#options.maxSocketBufferBytes) {
      this.#dropInput(pcm.length, 'Microphone audio was dropped: the connection is not keeping up.');
      return;
    }
    this.#behind = false;
    const bytes = bytesOf(pcm);
    checkAppendAudio(bytes.byteLength);
    socket.send(audioAppendText(bytesToBase64(bytes)));
    this.#sentFrames += pcm.length;
    this.#clock.sent(pcm, Date.now());
  }

  #dropInput(frames: number, message: string): void {
    this.#droppedFrames += frames;
    if (this.#behind) return;
    this.#behind = true; // one warning per run of drops
    this.emit('warning', new ConnectionError(message, { retryable: false }));
  }

  #onPlaying(playing: boolean): void {
    this.emit('playing', playing);
    const microphone = this.#microphone;
    if (!microphone || this.#options.whilePlaying === 'continue') return;
    clearTimeout(this.#releaseTimer);
    if (playing) microphone.gain = this.#options.whilePlaying === 'mute' ? 0 : this.#options.duckGain;
    else this.#releaseTimer = setTimeout(() => (microphone.gain = 1), this.#options.echoTailMs);
  }

  #fail(error: RtTranslateError, close?: CloseEvent): void {
    if (this.#state === 'stopped') return;
    this.#cancelStart?.(error);
    this.emit('error', error);
    this.#finish({ byUser: false, code: close?.code ?? 1011, reason: close?.reason ?? error.message });
  }

  #finish(info: ClosedInfo): void {
    if (this.#state === 'stopped') return;
    this.#cancelStart?.(new ConnectionError('stop() was called before the session started.'));
    this.#setState('stopped');
    clearTimeout(this.#readyTimer);
    clearTimeout(this.#releaseTimer);
    this.#microphone?.close();
    this.#player?.close();
    this.#pending = [];
    const socket = this.#socket;
    if (socket && socket.readyState <= WebSocket.OPEN) socket.close(1000, 'stopped');
    if (!this.#audioContext) void this.#context?.close();
    this.emit('closed', info);
  }
}
