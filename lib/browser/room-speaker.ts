/**
 * The speaker of a relay room in a web page: `RealtimeRoomSpeaker` sends the microphone to the
 * room once, whatever the number of listeners and languages, and hears who listens to what
 * (`languages`). `start()` must run in a user gesture; see `room.ts` for the listener.
 */
import { ConnectionError, ProtocolError, RtTranslateError, TimeoutError, ValidationError, describeCause } from '../errors.js';
import { describeReceived, intOption } from '../options.js';
import { normalizeRealtimeLanguage, type RealtimeLanguage } from '../realtime/languages.js';
import { MicrophoneCapture, resolveMicrophoneOptions, type MicrophoneOptions } from './capture.js';
import { TypedEmitter } from './emitter.js';
import { StateCell } from './state-cell.js';
import type { ClosedInfo, TranslatorState } from './translator.js';
import { closedError, resolveEndpoint, resumedContext, type RoomEndpoint } from './room-endpoint.js';

export interface RealtimeRoomSpeakerOptions extends MicrophoneOptions {
  /** The relay's rooms endpoint: a `ws://` or `wss://` URL or a path (`/v1/rooms`). */
  url: string;
  /** The speaker's room token (`relay.mintToken({ room, role: 'speaker' })`). */
  token?: string;
  /** The room, when the token does not say it. */
  room?: string;
  /** The language spoken. */
  from: string;
  /** The languages listeners may pick; default any. */
  languages?: readonly string[];
  /** How long the room may take to open, in ms. Default 30 000. */
  readyTimeoutMs?: number;
  /** Bytes the socket may hold unsent before microphone audio is dropped. Default 1 MiB. */
  maxSocketBufferBytes?: number;
  /** An AudioContext to use (not closed by `stop()`). */
  audioContext?: AudioContext;
}

/** A language of the room, as the relay reports it to the speaker. */
export interface RoomLanguageInfo {
  lang: RealtimeLanguage;
  /** Its session's status (`connecting`, `active`, ...). */
  status: string;
  listeners: number;
}

export interface RealtimeRoomSpeakerEvents {
  state: [state: TranslatorState];
  /** Who listens to what, whenever it changes. */
  languages: [languages: RoomLanguageInfo[], listeners: number];
  /** Microphone audio was dropped (the connection is behind). */
  warning: [warning: RtTranslateError];
  error: [error: RtTranslateError];
  closed: [info: ClosedInfo];
}

export class RealtimeRoomSpeaker extends TypedEmitter<RealtimeRoomSpeakerEvents> {
  readonly from: RealtimeLanguage;
  readonly #endpoint: RoomEndpoint;
  readonly #options: RealtimeRoomSpeakerOptions;
  readonly #readyTimeoutMs: number;
  readonly #maxSocketBufferBytes: number;
  readonly #state = new StateCell<TranslatorState>('idle', (state) => this.emit('state', state));
  #socket: WebSocket | undefined;
  #context: AudioContext | undefined;
  #microphone: MicrophoneCapture | undefined;
  #sentFrames = 0;
  #droppedFrames = 0;
  #behind = false;

  constructor(options: RealtimeRoomSpeakerOptions) {
    super();
    if (typeof options !== 'object' || options === null) throw new ValidationError('options', 'an object { url, token, from, ... }', describeReceived(options));
    this.#endpoint = resolveEndpoint(options);
    this.from = normalizeRealtimeLanguage(options.from, 'from');
    this.#endpoint.url.searchParams.set('from', this.from);
    if (options.languages !== undefined) {
      if (!Array.isArray(options.languages) || options.languages.length === 0)
        throw new ValidationError('languages', 'an array of realtime language tags', describeReceived(options.languages));
      const offered = options.languages.map((tag, i) => normalizeRealtimeLanguage(tag, `languages[${i}]`));
      this.#endpoint.url.searchParams.set('languages', offered.join(','));
    }
    resolveMicrophoneOptions(options);
    this.#readyTimeoutMs = intOption(options.readyTimeoutMs, 'readyTimeoutMs', { min: 1, max: 600_000, fallback: 30_000 });
    this.#maxSocketBufferBytes = intOption(options.maxSocketBufferBytes, 'maxSocketBufferBytes', { min: 1024, fallback: 1024 * 1024 });
    if (options.audioContext !== undefined && !(options.audioContext instanceof AudioContext)) {
      throw new ValidationError('audioContext', 'an AudioContext', describeReceived(options.audioContext));
    }
    this.#options = options;
  }

  get state(): TranslatorState {
    return this.#state.current;
  }

  get stats(): { sentMs: number; droppedInputMs: number } {
    return { sentMs: this.#sentFrames / 24, droppedInputMs: this.#droppedFrames / 24 };
  }

  /** Opens the room and the microphone (call it from a user gesture); resolves once both are. */
  async start(): Promise<void> {
    if (!this.#state.is('idle')) throw new ValidationError('start()', 'one call per speaker (make a new one to start again)', this.#state.current);
    const context = this.#options.audioContext ?? new AudioContext();
    this.#context = context;
    const resumed = resumedContext(context, this.#readyTimeoutMs);
    this.#state.set('starting');
    try {
      const opened = this.#open();
      opened.catch(() => undefined);
      await resumed;
      const microphone = await MicrophoneCapture.open(context, this.#options, (pcm) => this.#send(pcm));
      if (this.#state.is('stopped')) {
        microphone.close();
        throw new ConnectionError('The room closed while it was starting.');
      }
      this.#microphone = microphone;
      await opened;
      this.#state.set('running');
    } catch (error) {
      const failure = error instanceof RtTranslateError ? error : new ConnectionError(`The room could not start: ${describeCause(error)}`, { cause: error });
      this.#fail(failure, 1011, failure.message);
      throw failure;
    }
  }

  async stop(): Promise<void> {
    this.#finish({ byUser: true, code: 1000, reason: 'stopped' });
  }

  /** Connects; resolves on `room.opened`. */
  #open(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const socket = new WebSocket(this.#endpoint.url, this.#endpoint.protocols);
      this.#socket = socket;
      const timer = setTimeout(
        () => reject(new TimeoutError(`The room did not open within ${this.#readyTimeoutMs} ms.`, this.#readyTimeoutMs)),
        this.#readyTimeoutMs,
      );
      socket.onmessage = (message: MessageEvent<string | ArrayBuffer>) => {
        if (typeof message.data !== 'string') return;
        let event: { type?: unknown; languages?: unknown; listeners?: unknown; error?: { message?: unknown } };
        try {
          event = JSON.parse(message.data) as typeof event;
        } catch {
          return;
        }
        if (event.type === 'room.opened') {
          clearTimeout(timer);
          resolve();
        } else if (event.type === 'room.languages' && Array.isArray(event.languages)) {
          this.emit('languages', event.languages as RoomLanguageInfo[], typeof event.listeners === 'number' ? event.listeners : 0);
        } else if (event.type === 'error') {
          this.emit('warning', new ProtocolError(`The relay refused an event: ${String(event.error?.message ?? '')}`));
        }
      };
      socket.onclose = (close: CloseEvent) => {
        clearTimeout(timer);
        if (this.#state.is('stopped')) return;
        const error = closedError(close, this.#state.is('starting') ? 'The relay closed the room before it opened' : 'The room closed');
        reject(error);
        this.#fail(error, close.code, close.reason);
      };
    });
  }

  #send(pcm: Int16Array): void {
    const socket = this.#socket;
    if (!this.#state.is('running') && !this.#state.is('starting')) return;
    if (!socket || socket.readyState !== WebSocket.OPEN) return;
    if (socket.bufferedAmount > this.#maxSocketBufferBytes) {
      this.#droppedFrames += pcm.length;
      if (!this.#behind) this.emit('warning', new ConnectionError('Microphone audio was dropped: the connection is not keeping up.', { retryable: false }));
      this.#behind = true;
      return;
    }
    this.#behind = false;
    // Binary PCM16 LE frames: the relay takes them as appends, without base64.
    socket.send(new Uint8Array(pcm.buffer, pcm.byteOffset, pcm.byteLength));
    this.#sentFrames += pcm.length;
  }

  #fail(error: RtTranslateError, code: number, reason: string): void {
    if (this.#state.is('stopped')) return;
    this.emit('error', error);
    this.#finish({ byUser: false, code, reason });
  }

  #finish(info: ClosedInfo): void {
    if (this.#state.is('stopped')) return;
    this.#state.set('stopped');
    this.#microphone?.close();
    const socket = this.#socket;
    if (socket && socket.readyState <= WebSocket.OPEN) socket.close(1000, 'stopped');
    if (!this.#options.audioContext) void this.#context?.close();
    this.emit('closed', info);
  }
}
