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
import { LatencySeries } from '../realtime/response-timing.js';
import { audioAppendText, checkAppendAudio, decodeServerEventWith, encodeSessionUpdate } from '../realtime/wire-format.js';
import { base64ToBytes, bytesToBase64 } from './base64.js';
import { MicrophoneCapture } from './capture.js';
import { TypedEmitter } from './emitter.js';
import { StateCell } from './state-cell.js';
import { PcmPlayer } from './playback.js';
import { ResponseClock } from './response-clock.js';
import {
  resolveOptions,
  type BrowserServerEvent,
  type ClosedInfo,
  type RealtimeTranslatorEvents,
  type RealtimeTranslatorOptions,
  type Resolved,
  type TranslatorState,
  type TranslatorStats,
} from './translator-options.js';

export type { ClosedInfo, RealtimeTranslatorEvents, RealtimeTranslatorOptions, TranslatorState, TranslatorStats, WhilePlaying } from './translator-options.js';

/** PCM16 bytes of `pcm`, little-endian as on the wire. */
const bytesOf = (pcm: Int16Array): Uint8Array => new Uint8Array(pcm.buffer, pcm.byteOffset, pcm.byteLength);

/** 24 kHz frames to ms. */
const ms = (frames: number): number => frames / 24;

export class RealtimeTranslator extends TypedEmitter<RealtimeTranslatorEvents> {
  readonly #options: Resolved;
  readonly #audioContext: AudioContext | undefined;
  readonly #state = new StateCell<TranslatorState>('idle', (state) => this.emit('state', state));
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
    return this.#state.current;
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
    if (!this.#state.is('idle')) throw new ValidationError('start()', 'one call per translator (make a new one to start again)', this.#state.current);
    // Before any await: a context made or resumed outside the gesture stays suspended in Safari.
    const context = this.#audioContext ?? new AudioContext();
    this.#context = context;
    const resumed = context.state === 'running' ? Promise.resolve() : context.resume();
    this.#state.set('starting');
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
        opening.then(
          (part) => this.#state.is('stopped') && part?.close(),
          () => undefined,
        );
      }
      const [microphone, player, session] = await Promise.allSettled([
        Promise.race([microphoneOpening, cancelled]),
        Promise.race([playerCreating, cancelled]),
        ready,
      ]);
      const opened = [microphone.status === 'fulfilled' ? microphone.value : undefined, player.status === 'fulfilled' ? player.value : undefined] as const;
      if (this.#state.is('stopped')) {
        // The session ended while the rest was opening: close what did open.
        for (const part of opened) part?.close();
      } else {
        [this.#microphone, this.#player] = opened;
        this.#player?.on('playing', (playing) => this.#onPlaying(playing));
      }
      for (const result of [microphone, player, session]) if (result.status === 'rejected') throw result.reason;
      if (this.#state.is('stopped')) throw new ConnectionError('The session ended while it was starting.');
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
        reject(
          new TimeoutError(
            `The AudioContext did not start within ${ms} ms: browsers start audio only in a user gesture, so call start() from a click or key handler.`,
            ms,
          ),
        );
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
    if (this.#state.is('stopped')) return;
    this.#finish({ byUser: true, code: 1000, reason: 'stopped' });
  }

  /** Stops the translation playing now and drops what is queued (the session goes on). */
  interrupt(): void {
    this.#player?.interrupt();
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
          event =
            typeof message.data === 'string' ? decodeServerEventWith(message.data, (b64) => this.#pcmOf(base64ToBytes(b64))) : this.#binaryAudio(message.data);
        } catch (error) {
          this.#fail(error instanceof ProtocolError ? error : new ProtocolError(String(error)));
          return;
        }
        if (event.type === 'session.created') {
          clearTimeout(this.#readyTimer);
          this.#state.set('running');
          this.#flushPending();
          resolve();
        }
        this.#onServerEvent(event);
      };
      socket.onclose = (close: CloseEvent) => {
        clearTimeout(this.#readyTimer);
        if (this.#state.is('stopped')) return;
        const error = new ConnectionError(
          this.#state.is('starting')
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
    if (this.#state.is('starting')) {
      this.#pending.push(pcm);
      this.#pendingFrames += pcm.length;
      while (this.#pendingFrames > this.#options.maxPendingMs * 24 && this.#pending.length > 0) {
        const dropped = this.#pending.shift()!;
        this.#pendingFrames -= dropped.length;
        this.#dropInput(dropped.length, 'Microphone audio held while the session started was dropped: it took longer than maxPendingMs.');
      }
      return;
    }
    if (this.#state.is('running')) this.#send(pcm);
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
    if (this.#state.is('stopped')) return;
    this.#cancelStart?.(error);
    this.emit('error', error);
    this.#finish({ byUser: false, code: close?.code ?? 1011, reason: close?.reason ?? error.message });
  }

  #finish(info: ClosedInfo): void {
    if (this.#state.is('stopped')) return;
    this.#cancelStart?.(new ConnectionError('stop() was called before the session started.'));
    this.#state.set('stopped');
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
