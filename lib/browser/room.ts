/**
 * A relay room in a web page: `RealtimeRoomSpeaker` (`room-speaker.ts`) sends the microphone
 * to a room once, and `RealtimeRoomListener` receives the translation into one or several
 * languages, sending nothing. However many pages listen, the relay runs one session per
 * language (see the relay's `rooms` option); each page holds a room token its application
 * minted for its role.
 *
 * A listener opens one connection per language (each carries that language's events as the
 * service sent them, its audio as binary frames) and plays one language at a time (`play`),
 * switched with `play(lang)`. Events come with their language first: `on('text.done', (lang,
 * text) => ...)`.
 *
 * `start()` must run in a user gesture (a click) when anything plays or records: it creates or
 * resumes the AudioContext before anything is awaited.
 */
import { ConnectionError, ProtocolError, RtTranslateError, TimeoutError, ValidationError, describeCause } from '../errors.js';
import { describeReceived, intOption } from '../options.js';
import { normalizeRealtimeLanguage, type RealtimeLanguage } from '../realtime/languages.js';
import { decodeServerEventWith, type ServerEventOf, type SessionStartedInfo } from '../realtime/wire-format.js';
import { base64ToBytes } from './base64.js';
import { resolveMicrophoneOptions } from './capture.js';
import { TypedEmitter } from './emitter.js';
import { StateCell } from './state-cell.js';
import { PcmPlayer } from './playback.js';
import type { ClosedInfo, TranslatorState } from './translator.js';
import { closedError, resolveEndpoint, resumedContext, type RoomEndpoint } from './room-endpoint.js';

export interface RealtimeRoomListenerOptions {
  /** The relay's rooms endpoint: a `ws://` or `wss://` URL or a path (`/v1/rooms`). */
  url: string;
  /** The listener's room token (`relay.mintToken({ room, role: 'listener', maxSessions: languages })`). */
  token?: string;
  /** The room, when the token does not say it (a relay that admits by `authorize`). */
  room?: string;
  /** The languages to receive, one connection each (1 to 8 realtime tags). */
  languages: readonly string[];
  /** The language played (one of `languages`), or false to play none. Default the first. */
  play?: string | false;
  /** How long a connection may take to open, in ms. Default 30 000. */
  connectTimeoutMs?: number;
  /** An AudioContext to use (not closed by `stop()`). */
  audioContext?: AudioContext;
  /** Where the worklet module is served (see `loadWorklet`). */
  workletUrl?: string | URL;
}

export interface RoomListenerStats {
  /** Translated audio received per language, in ms. */
  receivedAudioMs: Partial<Record<RealtimeLanguage, number>>;
  /** Responses completed per language. */
  responses: Partial<Record<RealtimeLanguage, number>>;
}

/** Listener arguments of a listener's events: the language first. */
export interface RealtimeRoomListenerEvents {
  state: [state: TranslatorState];
  /** No speaker in the room yet: this language starts when one arrives. */
  waiting: [lang: RealtimeLanguage];
  'session.created': [lang: RealtimeLanguage, info: SessionStartedInfo];
  'transcript.delta': [lang: RealtimeLanguage, delta: string];
  'transcript.done': [lang: RealtimeLanguage, text: string];
  'text.delta': [lang: RealtimeLanguage, delta: string];
  'text.done': [lang: RealtimeLanguage, text: string];
  'audio.delta': [lang: RealtimeLanguage, audio: Int16Array];
  'audio.done': [lang: RealtimeLanguage];
  'server.error': [lang: RealtimeLanguage, message: string, code: number | string | undefined];
  /** Playback started (true) or played out (false). */
  playing: [playing: boolean];
  /** A language's connection failed or was refused; `closed` follows for it. */
  error: [lang: RealtimeLanguage, error: RtTranslateError];
  /** A language's connection closed (the speaker left, the relay dropped it, `stop()`). */
  closed: [lang: RealtimeLanguage, info: ClosedInfo];
}

interface Channel {
  lang: RealtimeLanguage;
  socket: WebSocket;
  oddByte: number | undefined;
  receivedFrames: number;
  responses: number;
  open: boolean;
  closed: boolean;
}

export class RealtimeRoomListener extends TypedEmitter<RealtimeRoomListenerEvents> {
  readonly languages: readonly RealtimeLanguage[];
  readonly #endpoint: RoomEndpoint;
  readonly #connectTimeoutMs: number;
  readonly #audioContext: AudioContext | undefined;
  readonly #workletUrl: string | URL | undefined;
  readonly #channels = new Map<RealtimeLanguage, Channel>();
  #playing: RealtimeLanguage | undefined;
  readonly #state = new StateCell<TranslatorState>('idle', (state) => this.emit('state', state));
  #context: AudioContext | undefined;
  #player: PcmPlayer | undefined;

  /** Checks the options (a `ValidationError` names the first field at fault); nothing connects before `start()`. */
  constructor(options: RealtimeRoomListenerOptions) {
    super();
    if (typeof options !== 'object' || options === null)
      throw new ValidationError('options', 'an object { url, token, languages, ... }', describeReceived(options));
    this.#endpoint = resolveEndpoint(options);
    const list = options.languages as unknown;
    if (!Array.isArray(list) || list.length === 0 || list.length > 8) {
      throw new ValidationError('languages', 'an array of 1 to 8 realtime language tags', describeReceived(list));
    }
    const languages = list.map((tag, i) => normalizeRealtimeLanguage(tag, `languages[${i}]`));
    if (new Set(languages).size !== languages.length) throw new ValidationError('languages', 'each language once', JSON.stringify(list));
    this.languages = languages;
    if (options.play === false) this.#playing = undefined;
    else if (options.play === undefined) this.#playing = languages[0];
    else {
      const played = normalizeRealtimeLanguage(options.play, 'play');
      if (!languages.includes(played)) throw new ValidationError('play', 'one of languages, or false', JSON.stringify(options.play));
      this.#playing = played;
    }
    this.#connectTimeoutMs = intOption(options.connectTimeoutMs, 'connectTimeoutMs', { min: 1, max: 600_000, fallback: 30_000 });
    if (options.audioContext !== undefined && !(options.audioContext instanceof AudioContext)) {
      throw new ValidationError('audioContext', 'an AudioContext', describeReceived(options.audioContext));
    }
    this.#audioContext = options.audioContext;
    this.#workletUrl = resolveMicrophoneOptions({ workletUrl: options.workletUrl }).workletUrl;
  }

  get state(): TranslatorState {
    return this.#state.current;
  }

  /** The language played now, if any. */
  get playing(): RealtimeLanguage | undefined {
    return this.#playing;
  }

  get stats(): RoomListenerStats {
    const stats: RoomListenerStats = { receivedAudioMs: {}, responses: {} };
    for (const channel of this.#channels.values()) {
      stats.receivedAudioMs[channel.lang] = channel.receivedFrames / 24;
      stats.responses[channel.lang] = channel.responses;
    }
    return stats;
  }

  /**
   * Connects every language (call it from a user gesture when a language plays). Resolves once
   * each language's connection has opened or failed; rejects when none opened.
   */
  async start(): Promise<void> {
    if (!this.#state.is('idle')) throw new ValidationError('start()', 'one call per listener (make a new one to start again)', this.#state.current);
    this.#state.set('starting');
    let resumed: Promise<void> = Promise.resolve();
    if (this.#playing !== undefined) {
      // Before any await: a context made or resumed outside the gesture stays suspended in Safari.
      const context = this.#audioContext ?? new AudioContext();
      this.#context = context;
      resumed = resumedContext(context, this.#connectTimeoutMs);
    }
    const opened = this.languages.map((lang) => this.#connect(lang));
    try {
      if (this.#context) {
        await resumed;
        const player = await PcmPlayer.create(this.#context, this.#workletUrl !== undefined ? { workletUrl: this.#workletUrl } : {});
        if (this.#state.is('stopped')) player.close();
        else {
          this.#player = player;
          player.on('playing', (playing) => this.emit('playing', playing));
        }
      }
    } catch (error) {
      const failure = error instanceof RtTranslateError ? error : new ConnectionError(`Playback could not start: ${describeCause(error)}`, { cause: error });
      await this.stop();
      throw failure;
    }
    const results = await Promise.allSettled(opened);
    if (!results.some((r) => r.status === 'fulfilled')) {
      const first = results[0] as PromiseRejectedResult;
      this.#finishAll();
      throw first.reason instanceof RtTranslateError ? first.reason : new ConnectionError(String(first.reason));
    }
    if (this.#state.is('starting')) this.#state.set('running');
  }

  /** Plays `lang` from now on (what was queued of another is dropped), or nothing (`false`). */
  play(lang: string | false): void {
    const next = lang === false ? undefined : normalizeRealtimeLanguage(lang, 'lang');
    if (next !== undefined && !this.languages.includes(next))
      throw new ValidationError('lang', 'one of the languages this listener receives', JSON.stringify(lang));
    if (next === this.#playing) return;
    this.#playing = next;
    this.#player?.interrupt();
  }

  /** Closes every connection and stops playback. */
  async stop(): Promise<void> {
    if (this.#state.is('stopped')) return;
    for (const channel of this.#channels.values()) {
      if (channel.closed) continue;
      channel.closed = true;
      if (channel.socket.readyState <= WebSocket.OPEN) channel.socket.close(1000, 'stopped');
      this.emit('closed', channel.lang, { byUser: true, code: 1000, reason: 'stopped' });
    }
    this.#finishAll();
  }

  #finishAll(): void {
    this.#state.set('stopped');
    this.#player?.close();
    this.#player = undefined;
    if (!this.#audioContext) void this.#context?.close();
  }

  /** One language's connection: resolves once open; rejects when refused, or not open in time. */
  #connect(lang: RealtimeLanguage): Promise<void> {
    const url = new URL(this.#endpoint.url);
    url.searchParams.set('lang', lang);
    const socket = new WebSocket(url, this.#endpoint.protocols);
    socket.binaryType = 'arraybuffer';
    const channel: Channel = { lang, socket, oddByte: undefined, receivedFrames: 0, responses: 0, open: false, closed: false };
    this.#channels.set(lang, channel);
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        const error = new TimeoutError(`The ${lang} connection did not open within ${this.#connectTimeoutMs} ms.`, this.#connectTimeoutMs);
        reject(error);
        this.#channelFailed(channel, error, 1006, 'timeout');
        socket.close();
      }, this.#connectTimeoutMs);
      socket.onopen = () => {
        clearTimeout(timer);
        channel.open = true;
        resolve();
      };
      socket.onmessage = (message: MessageEvent<string | ArrayBuffer>) => this.#onMessage(channel, message.data);
      socket.onclose = (close: CloseEvent) => {
        clearTimeout(timer);
        if (channel.closed) return;
        const error = channel.open ? undefined : closedError(close, `The relay refused the ${lang} connection`);
        if (error) {
          reject(error);
          this.#channelFailed(channel, error, close.code, close.reason);
        } else {
          this.#channelClosed(channel, close.code, close.reason);
        }
      };
    });
  }

  #onMessage(channel: Channel, data: string | ArrayBuffer): void {
    const lang = channel.lang;
    if (typeof data !== 'string') {
      this.#audio(channel, this.#pcmOf(channel, new Uint8Array(data)));
      return;
    }
    let event: ServerEventOf<Int16Array>;
    try {
      event = decodeServerEventWith(data, (b64) => this.#pcmOf(channel, base64ToBytes(b64)));
    } catch (error) {
      this.#channelFailed(channel, error instanceof ProtocolError ? error : new ProtocolError(String(error)), 1002, 'protocol');
      channel.socket.close();
      return;
    }
    switch (event.type) {
      case 'session.created':
        return this.emit('session.created', lang, { ...event.session, id: event.session.id ?? '' });
      case 'transcript.delta':
        return this.emit('transcript.delta', lang, event.delta);
      case 'transcript.done':
        return this.emit('transcript.done', lang, event.text);
      case 'text.delta':
        return this.emit('text.delta', lang, event.delta);
      case 'text.done':
        return this.emit('text.done', lang, event.text ?? '');
      case 'audio.delta':
        return this.#audio(channel, event.audio);
      case 'audio.done':
        channel.responses += 1;
        return this.emit('audio.done', lang);
      case 'server.error':
        return this.emit('server.error', lang, event.message, event.code);
      case 'unknown':
        if (event.wireType === 'room.waiting') this.emit('waiting', lang);
        return;
      default:
        return;
    }
  }

  #audio(channel: Channel, pcm: Int16Array): void {
    channel.receivedFrames += pcm.length;
    if (channel.lang === this.#playing) this.#player?.enqueue(pcm);
    this.emit('audio.delta', channel.lang, pcm);
  }

  /** Bytes from the relay as PCM16 samples, a byte split across frames carried to the next. */
  #pcmOf(channel: Channel, bytes: Uint8Array): Int16Array {
    let all = bytes;
    if (channel.oddByte !== undefined) {
      all = new Uint8Array(bytes.length + 1);
      all[0] = channel.oddByte;
      all.set(bytes, 1);
      channel.oddByte = undefined;
    }
    if (all.length % 2 === 1) channel.oddByte = all[all.length - 1];
    const even = all.length & ~1;
    const pcm = new Int16Array(even / 2);
    new Uint8Array(pcm.buffer).set(all.subarray(0, even));
    return pcm;
  }

  #channelFailed(channel: Channel, error: RtTranslateError, code: number, reason: string): void {
    if (channel.closed) return;
    this.emit('error', channel.lang, error);
    this.#channelClosed(channel, code, reason);
  }

  #channelClosed(channel: Channel, code: number, reason: string): void {
    if (channel.closed) return;
    channel.closed = true;
    this.emit('closed', channel.lang, { byUser: false, code, reason });
    if ([...this.#channels.values()].every((c) => c.closed) && !this.#state.is('starting')) this.#finishAll();
  }
}
