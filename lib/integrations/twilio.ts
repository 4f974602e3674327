/**
 * A Twilio Media Streams bridge: a phone call's audio through a `RealtimeTranslateStream` and the
 * translation back into the call.
 *
 * `TwilioMediaBridge` is a Duplex in object mode: the messages of a bidirectional Media Stream
 * in, the messages to send back out (`media` of 20 ms of mu-law, a `mark` after each response,
 * `clear` on barge-in). This file holds the call's timeline and states: inbound media decoded,
 * resampled 8 -> 24 kHz and appended (gaps filled by `MediaTimeline`), barge-in by level
 * (`SpeechOnsetDetector`), the limits on what a caller can make it spend, and the end of a call.
 * What a `media` message is checked against is in `twilio-media-checks.ts`, outbound audio is
 * `TwilioOutbound`'s; `bridgeTwilioSocket` wires a bridge to a `ws` socket.
 * How to use it, its options and limits: docs/bots.md ("Telephony").
 */
import { Duplex } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ProtocolError, RtTranslateError, TimeoutError } from '../errors.js';
import { FrameCutter } from '../audio/frames.js';
import { createResampleProcessor } from '../audio/resampler.js';
import type { AudioProcessor } from '../audio/processor.js';
import type { RealtimeTranslateStream } from '../realtime/realtime-translate-stream.js';
import { MediaTimeline } from './media-timeline.js';
import { DeferredTranslateStream } from './twilio-session.js';
import { SpeechOnsetDetector } from './speech-onset.js';
import { TwilioOutbound, twilioMessageJson, type TwilioPacing, type TwilioResponseInfo } from './twilio-outbound.js';
import {
  TWILIO_SAMPLE_RATE,
  checkTwilioMediaFormat,
  parseTwilioMessage,
  twilioClearMessage,
  type TwilioInboundMessage,
  type TwilioOutboundMessage,
  type TwilioStreamInfo,
} from './twilio-messages.js';
import { MediaTimestampCheck, refuseMedia, type TwilioMediaMessage } from './twilio-media-checks.js';
import { withEvents } from '../typed-events.js';
import {
  resolveBridgeOptions,
  type TwilioBridgeStats,
  type TwilioMediaBridgeEvents,
  type TwilioMediaBridgeOptions,
  type TwilioWarningKind,
} from './twilio-options.js';
import { BridgeCounts, WarningBudget, timersOf, type InboundState, type OutputState } from './twilio-state.js';

export * from './twilio-messages.js';
export { MediaTimeline, type MediaTimelineOptions, type TimelineStep } from './media-timeline.js';
export { SpeechOnsetDetector, type SpeechOnsetOptions } from './speech-onset.js';
export type { TwilioPacing, TwilioResponseInfo } from './twilio-outbound.js';
export type {
  TwilioBargeInOptions,
  TwilioBridgeStats,
  TwilioClearInfo,
  TwilioMediaBridgeEvents,
  TwilioMediaBridgeOptions,
  TwilioWarningKind,
} from './twilio-options.js';

const MULAW_SILENCE = 0xff;
/** Bytes of service-format audio (PCM16 mono 24 kHz) per millisecond. */
const SERVICE_BYTES_PER_MS = 48;

/**
 * Translates a Twilio Media Stream; see the module comment. The realtime session is opened when
 * `start` arrives, or with `openSession: 'construct'` when the bridge is constructed (a cold
 * start of the service then overlaps the call's setup); options are validated first, and a bad one throws a `ValidationError` (or the translator's
 * `ConfigError`) before anything connects.
 */
export class TwilioMediaBridge extends withEvents<TwilioMediaBridgeEvents>()(Duplex) {
  /** The realtime session this call's audio goes through (created with the bridge; see `openSession`). */
  readonly translator: RealtimeTranslateStream;
  readonly #session: DeferredTranslateStream;
  readonly pacing: TwilioPacing;

  readonly #track: string;
  readonly #format: 'object' | 'json';
  readonly #maxMessageBytes: number;
  readonly #timeline: MediaTimeline;
  readonly #onset: SpeechOnsetDetector | undefined;
  /** 8 kHz mu-law -> 24 kHz PCM16, called directly: the translator is written to without a stream hop. */
  readonly #resampler: AudioProcessor = createResampleProcessor(TWILIO_SAMPLE_RATE, 24_000, 1, { decode: 'mulaw' });
  /** The service-format audio, cut into appends of `appendMs`. */
  readonly #appends: FrameCutter;
  readonly #outbound: TwilioOutbound;
  readonly #outstandingMarks = new Set<string>();
  #stream: TwilioStreamInfo | undefined;
  #state: InboundState;
  #output: OutputState = { status: 'translating', finalCallback: undefined };
  readonly #limits: { startTimeoutMs: number; mediaTimeoutMs: number; maxTimestampLeadMs: number; maxTimestampRewinds: number; maxWarningsPerKind: number };
  readonly #timestamps: MediaTimestampCheck;
  #closeReason: string | undefined;
  readonly #counts = new BridgeCounts();
  /**
   * When the last frame was accepted (`performance.now()`; at `start`, when the call started).
   * The media timeout counts from it: its
   * timer is not restarted for each frame (50 times a second per call) but, when it fires, set
   * again for what is left of the period.
   */
  #lastMediaAt = 0;
  readonly #warnings: WarningBudget;

  constructor(options: TwilioMediaBridgeOptions) {
    const {
      realtime,
      bargeIn,
      limits,
      timeline: timelineOptions,
      pacing,
      output,
      openSession,
      track,
      markPrefix,
      maxMessageBytes,
      maxQueuedMessages,
      appendMs,
    } = resolveBridgeOptions(options);
    const timeline = new MediaTimeline(timelineOptions);
    const onset = bargeIn === false ? undefined : new SpeechOnsetDetector({ sampleRate: TWILIO_SAMPLE_RATE, ...bargeIn, encoding: 'mulaw' });
    // Last, once every option of ours is valid: the translator connects when `open()` is called.
    const translator = new DeferredTranslateStream({ ...realtime, outputModalities: ['text', 'audio'] });
    if (openSession === 'construct') translator.open();

    super({
      readableObjectMode: true,
      writableObjectMode: true,
      readableHighWaterMark: maxQueuedMessages,
      writableHighWaterMark: 16,
      allowHalfOpen: true,
    });
    this.translator = translator;
    this.#session = translator;
    this.pacing = pacing;
    this.#track = track;
    this.#format = output;
    this.#maxMessageBytes = maxMessageBytes;
    this.#limits = limits;
    this.#warnings = new WarningBudget(limits.maxWarningsPerKind);
    this.#timestamps = new MediaTimestampCheck(limits);
    this.#state = { status: 'awaiting-start', timer: setTimeout(this.#startExpired, limits.startTimeoutMs) };
    this.#timeline = timeline;
    this.#onset = onset;
    this.#appends = new FrameCutter(appendMs * SERVICE_BYTES_PER_MS);
    this.#outbound = new TwilioOutbound({
      pacing,
      markPrefix,
      sink: {
        push: (message) => this.#pushMessage(message),
        streamSid: () => this.#stream?.streamSid,
        responseSent: (info) => this.#responseSent(info),
      },
    });

    translator.on('audio.done', () => this.#outbound.responseEnded(translator.bytesReceived));
    translator.on('transcript.done', (text) => this.emit('transcript.done', text));
    translator.on('text.done', (text) => this.emit('text.done', text));
    translator.on('warning', (warning) => this.#warn('service', warning));

    pipeline(translator, this.#outbound).then(
      () => {
        if (!this.destroyed) this.push(null);
        if (this.#output.status === 'translating') this.#setOutput({ status: 'done' });
      },
      (error: Error) => {
        if (this.#output.status !== 'skipped') this.destroy(error);
      },
    );
  }

  /** The stream's metadata once `start` has arrived. */
  get stream(): TwilioStreamInfo | undefined {
    return this.#stream;
  }

  get stats(): TwilioBridgeStats {
    return this.#counts.stats(this.#outbound.framesSent, this.#warnings.suppressed());
  }

  /**
   * Why the bridge ended the call because of what the caller did (or did not do), in a few
   * words for a WebSocket close reason and logs: `no media for 10000 ms`, `media timestamps
   * ahead of the call's clock`, `media timestamps going backwards`. Undefined otherwise.
   */
  get closeReason(): string | undefined {
    return this.#closeReason;
  }

  /**
   * The far end is gone (the call's socket closed): outbound audio is dropped from now on. The
   * session still ends as usual once the writable side ends.
   */
  discardOutbound(): void {
    this.#outbound.discardAll();
  }

  /* ------------------------------------------------------------------ inbound */

  override _write(data: unknown, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    let message: TwilioInboundMessage;
    try {
      message = parseTwilioMessage(data, this.#maxMessageBytes);
    } catch (error) {
      this.#warn('malformed', error instanceof RtTranslateError ? error : new ProtocolError(String(error)));
      callback();
      return;
    }
    switch (message.event) {
      case 'connected':
        this.emit('connected', { protocol: message.protocol, version: message.version });
        callback();
        return;
      case 'start':
        this.#onStart(message.start, callback);
        return;
      case 'media':
        this.#onMedia(message, callback);
        return;
      case 'mark':
        if (this.#outstandingMarks.delete(message.name)) {
          this.#counts.marksPlayed += 1;
          this.emit('played', message.name);
        }
        this.emit('mark', message.name);
        callback();
        return;
      case 'dtmf':
        this.emit('dtmf', message.digit);
        callback();
        return;
      case 'stop':
        if (!this.#inputEnded) this.emit('stop');
        this.#endInput();
        callback();
        return;
      case 'unknown':
        this.#warn('unknown-event', new ProtocolError(`Unknown Twilio event ${JSON.stringify(message.wireEvent)}; it was ignored.`));
        callback();
        return;
    }
  }

  /** The input has ended (`stop` or the end of the writable side), or the bridge is closed. */
  get #inputEnded(): boolean {
    return this.#state.status === 'ended' || this.#state.status === 'closed';
  }

  /** The one way the input's state changes: timers the new state does not keep are cleared. */
  #set(next: InboundState): void {
    const kept = timersOf(next);
    for (const timer of timersOf(this.#state)) if (timer !== undefined && !kept.includes(timer)) clearTimeout(timer);
    this.#state = next;
  }

  /** The one way the output's state changes: a `_final` callback the new state does not carry is settled. */
  #setOutput(next: OutputState): void {
    const previous = this.#output;
    this.#output = next;
    const callback = previous.status === 'translating' ? previous.finalCallback : undefined;
    if (callback !== undefined && callback !== (next.status === 'translating' ? next.finalCallback : undefined) && !this.destroyed) callback();
  }

  #onStart(info: TwilioStreamInfo, callback: (error?: Error | null) => void): void {
    const state = this.#state;
    if (state.status !== 'awaiting-start') {
      const message =
        this.#stream !== undefined
          ? `A second "start" message was ignored (the stream ${this.#stream.streamSid} already started).`
          : 'A "start" message after the end of the input was ignored.';
      this.#warn('out-of-order', new ProtocolError(message));
      callback();
      return;
    }
    try {
      checkTwilioMediaFormat(info.mediaFormat);
    } catch (error) {
      callback(error as Error);
      return;
    }
    this.#stream = info;
    // The call's clock starts now: the media timeout and the audio allowed are counted from here.
    const now = performance.now();
    this.#lastMediaAt = now;
    this.#set({
      status: 'live',
      idle: setTimeout(this.#idleExpired, this.#limits.mediaTimeoutMs),
      startedAt: now,
      hold: undefined,
      waiting: false,
    });
    this.#session.open();
    this.emit('start', info);
    callback();
  }

  readonly #startExpired = (): void => {
    if (this.#state.status !== 'awaiting-start') return;
    const ms = this.#limits.startTimeoutMs;
    this.#fail(new TimeoutError(`No "start" message within ${ms} ms (startTimeoutMs); the call was closed.`, ms), `no start within ${ms} ms`);
  };

  /**
   * The media timer fired: the caller's silence of `mediaTimeoutMs` ends the call, unless the
   * bridge is the one waiting (a full period again) or media came since the timer was set (set
   * again for the rest of the period from the last frame).
   */
  readonly #idleExpired = (): void => {
    const state = this.#state;
    if (state.status !== 'live') return;
    if (state.waiting || state.hold !== undefined) {
      state.idle.refresh();
      return;
    }
    const ms = this.#limits.mediaTimeoutMs;
    const quietMs = performance.now() - this.#lastMediaAt;
    if (quietMs < ms) {
      // Media came since the timer was set: the period runs from the last frame.
      this.#set({ ...state, idle: setTimeout(this.#idleExpired, Math.ceil(ms - quietMs)) });
      return;
    }
    this.#fail(new TimeoutError(`No media from the call for ${ms} ms (mediaTimeoutMs); the call was closed.`, ms), `no media for ${ms} ms`);
  };

  #fail(error: RtTranslateError, closeReason: string): void {
    this.#closeReason ??= closeReason;
    this.destroy(error);
  }

  #onMedia(message: TwilioMediaMessage, callback: (error?: Error | null) => void): void {
    const state = this.#state;
    if (state.status !== 'live' || this.#stream === undefined) {
      const when = state.status === 'awaiting-start' ? 'before "start"' : 'after "stop"';
      this.#warn('out-of-order', new ProtocolError(`A "media" message ${when} was ignored.`));
      callback();
      return;
    }
    const refusal = refuseMedia(message, this.#stream, this.#track);
    if (refusal !== undefined) {
      if (refusal !== 'ignored') {
        if (refusal.kind === 'media-size') this.#counts.refusedFrames += 1;
        this.#warn(refusal.kind, refusal.warning);
      }
      callback();
      return;
    }
    const now = performance.now();
    const elapsedMs = now - state.startedAt;
    const lie = this.#timestamps.check(message.timestamp, elapsedMs);
    if (lie !== undefined) {
      this.#closeReason ??= lie.closeReason;
      callback(lie.error);
      return;
    }
    this.#lastMediaAt = now;
    const step = this.#timeline.next(message.timestamp, message.audio.length, elapsedMs);
    this.#counts.media(message.audio.length, step);
    const waitMs = step.waitMs ?? 0;
    if (waitMs === 0) {
      this.#feed(step.fillSamples, message.audio, callback);
      return;
    }
    // Ahead of the clock: the frame (and its gap fill) waits, and so does the caller's socket.
    const hold = setTimeout(() => {
      const now = this.#state;
      if (now.status !== 'live' || now.hold !== hold) return;
      this.#set({ ...now, hold: undefined });
      this.#feed(step.fillSamples, message.audio, callback);
    }, waitMs);
    this.#set({ ...state, hold });
  }

  /** Hands a frame, after `fillSamples` of silence, to barge-in detection and the translator. */
  #feed(fillSamples: number, audio: Buffer, callback: () => void): void {
    const mulaw = fillSamples > 0 ? Buffer.concat([Buffer.alloc(fillSamples, MULAW_SILENCE), audio]) : audio;
    if (this.#onset !== undefined && this.#onset.push(mulaw) > 0) this.#speechStarted();
    this.#toTranslator(this.#resampler.process(mulaw), callback);
  }

  /**
   * Writes service-format audio to the translator in appends of `appendMs` (the rest waits for
   * the next message); `callback` once it may take more.
   */
  #toTranslator(pcm: Buffer, callback: () => void): void {
    const translator = this.translator;
    if (translator.destroyed || translator.writableEnded) {
      callback();
      return;
    }
    this.#appends.cut(pcm, this.#writeAppends);
    // No write of this message returned false: the translator takes more at once.
    if (!translator.writableNeedDrain) {
      callback();
      return;
    }
    const state = this.#state;
    if (state.status === 'live') this.#set({ ...state, waiting: true });
    translator.once('drain', () => {
      const now = this.#state;
      if (now.status === 'live') this.#set({ ...now, waiting: false });
      callback();
    });
  }

  readonly #writeAppends = (buf: Buffer, offset: number, appends: number): void => {
    const bytes = this.#appends.frameBytes;
    for (let i = 0, at = offset; i < appends; i++, at += bytes) this.translator.write(buf.subarray(at, at + bytes));
  };

  #endInput(): void {
    if (this.#inputEnded) return;
    this.#set({ status: 'ended' });
    if (!this.#session.opened) {
      this.#skipSession();
      return;
    }
    const tail = this.#resampler.flush();
    const translator = this.translator;
    if (translator.destroyed || translator.writableEnded) return;
    this.#appends.cut(tail, (buf, offset, appends) => translator.write(buf.subarray(offset, offset + appends * this.#appends.frameBytes)));
    if (this.#appends.pendingBytes > 0) translator.write(this.#appends.takePending());
    translator.end();
  }

  /** The input ended before `start` (`openSession: 'start'`): no session to end; the bridge ends now. */
  #skipSession(): void {
    this.#setOutput({ status: 'skipped' });
    this.#outbound.destroy();
    this.#session.destroy();
    if (!this.destroyed) this.push(null);
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.#endInput();
    if (this.#output.status === 'translating') this.#setOutput({ status: 'translating', finalCallback: callback });
    else callback();
  }

  /* ------------------------------------------------------------------ barge-in */

  #speechStarted(): void {
    this.emit('speech');
    const stream = this.#stream;
    if (stream === undefined || this.#outbound.discarding) return;
    const received = this.translator.bytesReceived;
    if (this.#outstandingMarks.size === 0 && !this.#outbound.hasPendingAudio(received)) return;
    const pendingMarks = [...this.#outstandingMarks];
    this.#outstandingMarks.clear();
    const droppedFrames = this.#outbound.clear(received);
    this.#counts.clears += 1;
    this.#pushMessage(twilioClearMessage(stream.streamSid));
    this.emit('clear', { pendingMarks, droppedFrames });
  }

  /* ------------------------------------------------------------------ outbound */

  #pushMessage(message: TwilioOutboundMessage): boolean {
    if (this.destroyed || this.readableEnded) return true;
    return this.push(this.#format === 'json' ? twilioMessageJson(message) : message);
  }

  #responseSent(info: TwilioResponseInfo): void {
    this.#outstandingMarks.add(info.mark);
    this.#counts.responses += 1;
    this.emit('response.sent', info);
  }

  override _read(): void {
    this.#outbound.readerReady();
  }

  /* ------------------------------------------------------------------ teardown */

  /** Emits a warning, unless its kind has had its share (`maxWarningsPerKind`; one for `media-size`). */
  #warn(kind: TwilioWarningKind, warning: RtTranslateError): void {
    if (!this.#warnings.take(kind)) return;
    this.#counts.warnings += 1;
    this.emit('warning', warning);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#set({ status: 'closed' });
    this.#setOutput({ status: 'closed' });
    this.#outbound.destroy();
    const translator = this.translator;
    if (translator.closed) {
      callback(error);
      return;
    }
    translator.once('close', () => callback(error));
    translator.destroy();
  }
}

// Typed events: `on('clear', (info) => ...)` and friends.
