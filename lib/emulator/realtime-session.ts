/**
 * One realtime session of the emulator: the server side of one WebSocket, from the first
 * `session.update` to the close. It follows the realtime section of the service interface
 * (message order, limits, error events) and `facts.md` where the interface is silent.
 *
 * When it answers: the input is cut into utterances by the emulator's own detector (`vad.ts`);
 * answers are grouped (`segmentation: 'idle'`, `mergeUtterances`), and, with `lastAnswer`, held
 * until speech is heard again. When the emulator has processed no append for `idleMs` while
 * reading, the audio has stopped arriving: the utterance in progress ends, a partial group is
 * answered and held answers are the last ones (sent late, or never).
 *
 * Error events carry a numeric `code`: 400 malformed or unsupported event, 401 credentials,
 * 403 rejected voice, 402 billing stop, 408 no `session.update` in time, 413 over a size limit.
 * Errors that end the session are followed by a close with code 1008 (policy violation).
 */
import { randomUUID } from 'node:crypto';
import type { Duplex } from 'node:stream';
import type { WebSocket, RawData } from 'ws';
import {
  DEFAULT_VOICE_ID,
  MAX_APPEND_AUDIO_BYTES,
  MAX_CLIENT_EVENT_BYTES,
  base64DecodedLength,
  decodeClientEvent,
  encodeServerEvent,
  isBase64,
  normalizeSessionConfig,
  type ClientEvent,
  type OutputModality,
  type SessionConfig,
  type SessionConfigInput,
  type WireSessionInfo,
  type VoiceSelection,
} from '../realtime/codec.js';
import { ValidationError } from '../errors.js';
import { UtteranceSegmenter, type SegmentedUtterance, type UtteranceSegmenterOptions } from './vad.js';
import type { VoiceOwnership } from './voices.js';

/** Bytes of PCM16 mono 24 kHz per second of audio. */
const BYTES_PER_SECOND = 48_000;
/**
 * Speech held to be answered as one (`segmentation: 'idle'`, `mergeUtterances`) is answered once
 * it reaches this much, pause or not: a source that never pauses (a microphone, a phone call)
 * cannot make the emulator keep its audio without bound.
 */
export const MAX_GROUP_BYTES = 60 * BYTES_PER_SECOND;
/** Output audio piece: 400 ms, 9600 samples. */
export const OUTPUT_PIECE_BYTES = 19_200;
/** WebSocket close code for every session-ending error. */
export const SESSION_END_CLOSE_CODE = 1008;
/** Voice ids of the service's stock voices; never accepted as `cloned`. */
export const STOCK_VOICE_IDS: ReadonlySet<number> = new Set([DEFAULT_VOICE_ID]);

/** The session settings, resolved from the emulator options (see `RealtimeEmulatorOptions`). */
export interface RealtimeSessionSettings {
  apiKeys: ReadonlySet<string>;
  /** Which key owns which cloned voice (the emulator's voice registry). */
  voices: VoiceOwnership;
  sessionUpdateTimeoutMs: number;
  creditBytes: number | undefined;
  creditSeconds: number | undefined;
  /** The detector's settings; `splitMs` set when the segmentation is 'split'. */
  segmenter: UtteranceSegmenterOptions;
  segmentation: Segmentation;
  idleMs: number;
  lastAnswer: LastAnswer;
  latencyMs: number;
  audioFrames: 'json' | 'binary';
  coldStartMs: number;
  inputBytesPerSecond: number | undefined;
  sendBufferLimitBytes: number;
  faults: ResolvedRealtimeFaults;
}

/** The fault switches, checked (see `RealtimeFaults` in `realtime.ts`). */
export interface ResolvedRealtimeFaults {
  dropAfterMs: number | undefined;
  dropAfterResponses: number | undefined;
  dropMidResponse: boolean;
  /** Drop once this much input was heard, while `inputDrops.left` (shared by the sessions) lasts. */
  dropAfterInputBytes: number | undefined;
  inputDrops: { left: number };
  dropCode: number | undefined;
  dropReset: boolean;
  halfOpenAfterMs: number | undefined;
  mergeUtterances: number;
  lateUtterances: ReadonlyMap<number, number>;
  echoKey: boolean;
}

/**
 * When the service answers: each utterance when it ends ('utterance'), everything heard once the
 * appends pause ('idle'), or long utterances in two parts ('split').
 */
export type Segmentation = 'utterance' | 'idle' | 'split';

/**
 * When a finished answer is sent: at once ('prompt'), or held until speech is heard again; an
 * answer still held when the appends pause is the last one: sent `lateMs` later, or never.
 */
export type LastAnswer = 'prompt' | 'never' | { readonly lateMs: number };

/** How a session is ended on purpose: cut without a close frame, or closed with `code`. */
export interface DropOptions {
  /** Close with this code instead of cutting the connection (the client then sees 1006). */
  code?: number;
  /** Reset the connection (TCP RST) at once: what was in flight is lost, as on a real network. */
  reset?: boolean;
}

/** What the handshake established. */
export interface RealtimeHandshake {
  /** The `x-api-key` header, already checked against the accepted keys; absent when not sent. */
  headerKey: string | undefined;
  /** `?model=` and `?mode=` of the handshake URL, echoed in `session.created`. */
  model: string | undefined;
  mode: string | undefined;
}

/**
 * Where a session is: waiting for its first `session.update`, cold-starting, running, stopping
 * after billing, half-open (a fault: reading and answering nothing), closed.
 */
export type RealtimeSessionState = 'awaiting-update' | 'starting' | 'active' | 'stopping' | 'half-open' | 'closed';
type State = RealtimeSessionState;

/** A snapshot of one session, for tests and diagnostics. */
export interface RealtimeSessionStats {
  /** The session id, once `session.created` was sent. */
  id: string | undefined;
  state: RealtimeSessionState;
  /** Bytes of input audio processed (after `session.created`, within the credit). */
  audioBytes: number;
  /** Bytes queued on the socket, not yet written. */
  bufferedAmount: number;
  /** The largest `bufferedAmount` seen right after a send. */
  peakBufferedAmount: number;
  /** True while the emulator is not reading the client's input (slow client or `inputBytesPerSecond`). */
  readingPaused: boolean;
}
type PauseReason = 'throttle' | 'backpressure' | 'half-open';

/** How long a half-open session keeps its socket before cutting it. */
const HALF_OPEN_HOLD_MS = 60_000;

interface ActiveConfig {
  source_language: string;
  target_language: string;
  output_modalities: OutputModality[];
  voice: VoiceSelection;
}

interface PendingResponse {
  dueAt: number;
  frames: Array<string | Buffer>;
}

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

function words(text: string): string[] {
  return text.split(' ').map((word, i) => (i === 0 ? word : ` ${word}`));
}

/**
 * The server side of one realtime WebSocket. Created by the emulator once the handshake is
 * accepted; it arms the `session.update` timer at once and owns every timer it sets, all
 * cleared when the socket closes.
 */
export class RealtimeSession {
  /** Resolves once the socket has closed and every timer of the session is cleared. */
  readonly closed: Promise<void>;

  private state: State = 'awaiting-update';
  private readonly timers = new Set<NodeJS.Timeout>();
  private updateTimer: NodeJS.Timeout | undefined;
  private config: ActiveConfig | undefined;
  /** The key the session authenticated with: the owner of its cloned voices. */
  private ownerKey: string | undefined;
  private id: string | undefined;
  private segmenter: UtteranceSegmenter | undefined;
  private billedBytes = 0;
  private processedBytes = 0;
  private peakBuffered = 0;
  private readonly queue: PendingResponse[] = [];
  private queueTimer: NodeJS.Timeout | undefined;
  private readonly pauses = new Set<PauseReason>();
  private throttleTimer: NodeJS.Timeout | undefined;
  private readAllowedAt = 0;
  private resolveClosed!: () => void;
  /** Responses sent so far (for `dropAfterResponses`). */
  private responsesSent = 0;
  /** Utterances (or parts) waiting to be answered as one (`segmentation: 'idle'`, `mergeUtterances`). */
  private grouped: SegmentedUtterance[] = [];
  /** Their audio, in bytes: a group this long is answered even if the appends never pause. */
  private groupedBytes = 0;
  /** How many utterances make one answer. */
  private readonly groupSize: number;
  /** Finished answers held until speech is heard again (`lastAnswer`), oldest first. */
  private held: SegmentedUtterance[][] = [];
  /** Armed after each append while something waits for the audio to stop (see `armIdle`). */
  private idleTimer: NodeJS.Timeout | undefined;
  /** The idle decision, once the input already received has been read. */
  private idleCheck: NodeJS.Immediate | undefined;
  /** Frames given to the socket and not yet written, and who waits for them. */
  private unflushed = 0;
  private readonly flushWaiters: Array<() => void> = [];

  constructor(
    private readonly ws: WebSocket,
    private readonly handshake: RealtimeHandshake,
    private readonly settings: RealtimeSessionSettings,
    /** The raw socket under `ws`, for the half-open fault. */
    private readonly socket?: Duplex,
    /** Told when a fault drops the session, before the client can see it. */
    private readonly onDrop?: () => void,
  ) {
    this.closed = new Promise((resolve) => {
      this.resolveClosed = resolve;
    });
    const { mergeUtterances } = settings.faults;
    this.groupSize = mergeUtterances > 1 ? mergeUtterances : settings.segmentation === 'idle' ? Infinity : 1;
    ws.on('message', (data, isBinary) => this.onMessage(data, isBinary));
    // Pings are answered while the session lives. After a drop the socket is ended, and a pong
    // written after that would be an error that resets the connection, discarding what the
    // client had not read yet; half-open, nothing is answered.
    ws.on('ping', (data) => {
      if (this.state !== 'closed' && this.state !== 'half-open') ws.pong(data);
    });
    ws.on('error', () => {
      // A protocol violation by the client (ws closes the socket itself); nothing to report.
    });
    ws.on('close', () => this.dispose());
    this.updateTimer = this.setTimer(() => {
      this.fail(
        `No session.update within ${this.settings.sessionUpdateTimeoutMs} ms of connecting: ` +
          'the first event must be session.update.',
        408,
      );
    }, this.settings.sessionUpdateTimeoutMs);
  }

  /** A snapshot of the session's state and flow control. */
  stats(): RealtimeSessionStats {
    return {
      id: this.id,
      state: this.state,
      audioBytes: this.processedBytes,
      bufferedAmount: this.ws.bufferedAmount,
      peakBufferedAmount: this.peakBuffered,
      readingPaused: this.pauses.size > 0,
    };
  }

  /** Ends the session at once (used by the emulator's `close()`). */
  terminate(): void {
    this.clearTimers();
    this.ws.terminate();
  }

  /* ------------------------------------------------------------------------------------- */
  /* Incoming events                                                                       */

  private onMessage(data: RawData, isBinary: boolean): void {
    // Binary frames are not events (interface); the service ignores them (facts.md).
    if (isBinary || this.state === 'closed' || this.state === 'stopping' || this.state === 'half-open') return;
    const size = rawLength(data);
    if (size > MAX_CLIENT_EVENT_BYTES) {
      this.sendError(
        `The event is ${size} bytes; a client event may be at most ${MAX_CLIENT_EVENT_BYTES} bytes (1 MiB) ` +
          'of JSON text. It was ignored.',
        413,
      );
      return;
    }
    let event: ClientEvent;
    try {
      event = decodeClientEvent(rawText(data));
    } catch (error) {
      const message = (error as Error).message;
      if (this.state === 'awaiting-update') this.fail(`${message} The first event must be session.update.`, 400);
      else this.sendError(`${message} It was ignored.`, 400);
      return;
    }
    if (this.state === 'awaiting-update') {
      if (event.type !== 'session.update') {
        const got = event.type === 'unknown' ? event.wireType : event.type;
        this.fail(`The first event must be session.update (got ${JSON.stringify(got)}).`, 400);
        return;
      }
      this.onFirstUpdate(event.session, event.auth);
      return;
    }
    switch (event.type) {
      case 'session.update':
        this.onLaterUpdate(event.session);
        return;
      case 'input_audio_buffer.append':
        this.onAppend(event.audio);
        return;
      case 'input_audio_buffer.clear':
      case 'input_audio_buffer.commit':
      case 'response.cancel':
        this.sendError(`${event.type} is recognised but not supported by the realtime service.`, 400);
        return;
      case 'unknown':
        this.sendError(`Unknown event type ${JSON.stringify(event.wireType)}; it was ignored.`, 400);
        return;
    }
  }

  private onFirstUpdate(session: unknown, auth: unknown): void {
    this.clearTimer(this.updateTimer);
    this.updateTimer = undefined;
    const authKey =
      auth !== null && typeof auth === 'object' && typeof (auth as { api_key?: unknown }).api_key === 'string'
        ? (auth as { api_key: string }).api_key
        : undefined;
    // The handshake header wins when both are present (it was checked at the handshake).
    const key = this.handshake.headerKey ?? authKey;
    if (key === undefined || !this.settings.apiKeys.has(key)) {
      this.fail(
        authKey === undefined
          ? 'Missing API key: send it in the x-api-key handshake header, or in auth.api_key of the first session.update.'
          : 'Invalid API key in auth.api_key.',
        401,
      );
      return;
    }
    this.ownerKey = key;
    const config = this.validate(session, key, true);
    if (config === undefined) return;
    this.config = config;
    if (this.settings.coldStartMs > 0) {
      this.state = 'starting';
      this.send(encodeServerEvent.sessionStarting());
      this.setTimer(() => this.activate(), this.settings.coldStartMs);
    } else {
      this.activate();
    }
  }

  private onLaterUpdate(session: unknown): void {
    const config = this.validate(session, undefined, false);
    if (config === undefined) return;
    this.config = config;
    // During a cold start the new configuration is announced with session.created.
    if (this.state === 'active') this.send(encodeServerEvent.sessionUpdated(this.sessionInfo()));
  }

  /**
   * The configuration in its resolved form, or undefined after answering with `error`. An
   * invalid configuration ends the session when it is the first one; a rejected voice always does.
   */
  private validate(session: unknown, key: string | undefined, first: boolean): ActiveConfig | undefined {
    let config: SessionConfig;
    try {
      config = normalizeSessionConfig(session as SessionConfigInput);
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      const message = first ? error.message : `${error.message} The previous configuration stays active.`;
      if (first) this.fail(message, 400);
      else this.sendError(message, 400);
      return undefined;
    }
    const voice = config.voice ?? { type: 'default' };
    if (voice.type === 'cloned') {
      const owner = key ?? this.ownerKey;
      if (STOCK_VOICE_IDS.has(voice.voice_id)) {
        this.fail(`Voice ${voice.voice_id} is a stock voice; voice.type "cloned" needs a voice you cloned.`, 403);
        return undefined;
      }
      if (owner === undefined || !this.settings.voices.owns(owner, voice.voice_id)) {
        this.fail(`Voice ${voice.voice_id} is not a cloned voice owned by this API key.`, 403);
        return undefined;
      }
    }
    if (key !== undefined) this.ownerKey = key;
    return {
      source_language: config.source_language,
      target_language: config.target_language,
      output_modalities: config.output_modalities ?? ['text', 'audio'],
      voice,
    };
  }

  private activate(): void {
    if (this.state === 'closed') return;
    this.state = 'active';
    this.id = randomUUID();
    this.segmenter = new UtteranceSegmenter(this.settings.segmenter);
    const info = this.sessionInfo();
    this.send(encodeServerEvent.sessionCreated(info));
    this.send(encodeServerEvent.sessionUpdated(info));
    const { dropAfterMs, halfOpenAfterMs } = this.settings.faults;
    if (dropAfterMs !== undefined) this.setTimer(() => this.drop(this.dropOptions()), dropAfterMs);
    if (halfOpenAfterMs !== undefined) this.setTimer(() => this.goHalfOpen(), halfOpenAfterMs);
  }

  private sessionInfo(): WireSessionInfo {
    const config = this.config!;
    const info: WireSessionInfo = {
      id: this.id,
      source_language: config.source_language,
      target_language: config.target_language,
      output_modalities: [...config.output_modalities],
      voice: { ...config.voice },
    };
    if (this.handshake.model !== undefined) info.model = this.handshake.model;
    if (this.handshake.mode !== undefined) info.mode = this.handshake.mode;
    // A misbehaving service (fault switch): the caller's key echoed back.
    if (this.settings.faults.echoKey && this.ownerKey !== undefined) info.api_key = this.ownerKey;
    return info;
  }

  private onAppend(audio: unknown): void {
    if (typeof audio !== 'string') {
      this.sendError('input_audio_buffer.append needs an "audio" field: a base64 string of PCM16 audio.', 400);
      return;
    }
    const decodedLength = base64DecodedLength(audio);
    if (decodedLength > MAX_APPEND_AUDIO_BYTES) {
      this.sendError(
        `input_audio_buffer.append carries ${decodedLength} bytes of audio; at most ${MAX_APPEND_AUDIO_BYTES} ` +
          'bytes (256 KiB) of decoded audio per event. The audio was discarded.',
        413,
      );
      return;
    }
    if (!isBase64(audio)) {
      this.sendError('input_audio_buffer.append "audio" is not valid base64. The audio was discarded.', 400);
      return;
    }
    // Audio sent before session.created is discarded by the service (facts.md).
    if (this.state !== 'active' || this.segmenter === undefined) return;
    let pcm = Buffer.from(audio, 'base64');
    this.throttle(pcm.length);
    let exhausted = false;
    const { creditBytes } = this.settings;
    if (creditBytes !== undefined) {
      const allowed = Math.max(0, creditBytes - this.billedBytes);
      if (pcm.length >= allowed) {
        pcm = pcm.subarray(0, allowed);
        exhausted = true;
      }
      this.billedBytes += pcm.length;
    }
    this.processedBytes += pcm.length;
    for (const utterance of this.segmenter.push(pcm)) this.answer(utterance);
    this.releaseHeld();
    if (exhausted) this.stopBilling();
    else if (!this.dropAfterInput()) this.armIdle();
  }

  /** The `dropAfterInputMs` fault: drops this session once it has heard that much (a drop budget permitting). */
  private dropAfterInput(): boolean {
    const { dropAfterInputBytes, inputDrops } = this.settings.faults;
    if (dropAfterInputBytes === undefined || this.processedBytes < dropAfterInputBytes || inputDrops.left === 0) return false;
    inputDrops.left -= 1;
    this.drop(this.dropOptions());
    return true;
  }

  /* ------------------------------------------------------------------------------------- */
  /* Responses                                                                             */

  /** An utterance (or part) ended: answer it, or group it with the next ones. */
  private answer(utterance: SegmentedUtterance): void {
    this.grouped.push(utterance);
    this.groupedBytes += utterance.audio.length;
    if (this.grouped.length >= this.groupSize || this.groupedBytes >= MAX_GROUP_BYTES) this.respond();
  }

  /** The group is one answer: send it, or hold it until speech is heard again (`lastAnswer`). */
  private respond(): void {
    const group = this.grouped;
    if (group.length === 0) return;
    this.grouped = [];
    this.groupedBytes = 0;
    if (this.settings.lastAnswer === 'prompt') {
      this.schedule(group);
      return;
    }
    this.held.push(group);
    this.releaseHeld();
  }

  /** Sends the held answers after which a voiced frame has been heard. */
  private releaseHeld(): void {
    const heard = this.segmenter?.lastVoicedEnd ?? 0;
    while (this.held.length > 0 && this.held[0]!.at(-1)!.endedAt < heard) this.schedule(this.held.shift()!);
  }

  /**
   * The audio stopped arriving (appends paused for `idleMs` while reading, or the credit ran
   * out): what has been heard is answered, and answers still held are the last ones.
   */
  private onAudioStopped(): void {
    this.stopIdle();
    for (const utterance of this.segmenter?.end() ?? []) this.answer(utterance);
    this.respond();
    const last = this.held;
    this.held = [];
    const rule = this.settings.lastAnswer;
    if (typeof rule === 'object') for (const group of last) this.schedule(group, rule.lateMs);
  }

  /**
   * Restarts the idle timer: armed while reading, in the active state, when something waits for
   * the audio to stop (an utterance in progress, a partial group, a held answer). When it fires,
   * the decision waits for the input already received to be read (`setImmediate` runs after
   * the event loop's I/O): appends that arrived while this process was busy re-arm it, so only
   * input that is not there is idle.
   */
  private armIdle(): void {
    this.stopIdle();
    if (this.state !== 'active' || this.pauses.size > 0) return;
    if (!this.segmenter?.speaking && this.grouped.length === 0 && this.held.length === 0) return;
    this.idleTimer = this.setTimer(() => {
      this.idleTimer = undefined;
      this.idleCheck = setImmediate(() => this.onAudioStopped());
    }, this.settings.idleMs);
  }

  private stopIdle(): void {
    this.clearTimer(this.idleTimer);
    this.idleTimer = undefined;
    if (this.idleCheck !== undefined) clearImmediate(this.idleCheck);
    this.idleCheck = undefined;
  }

  /** Queues one response answering `utterances` (one, several merged, or a part of one), `extraMs` later than usual. */
  private schedule(utterances: SegmentedUtterance[], extraMs = 0): void {
    if (this.state === 'closed') return;
    const config = this.config!;
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
        frames.push(this.settings.audioFrames === 'binary' ? piece : encodeServerEvent.audioDelta(piece));
      }
      frames.push(encodeServerEvent.audioDone());
    }
    const late = this.settings.faults.lateUtterances.get(last.index) ?? 0;
    this.queue.push({ dueAt: Date.now() + this.settings.latencyMs + late + extraMs, frames });
    this.pump();
  }

  /** Sends the responses that are due, in order; arms a timer for the next one. */
  private pump(): void {
    while (this.queue.length > 0 && (this.state === 'active' || this.state === 'stopping')) {
      const head = this.queue[0]!;
      const wait = head.dueAt - Date.now();
      if (wait > 0) {
        if (this.queueTimer === undefined) {
          this.queueTimer = this.setTimer(() => {
            this.queueTimer = undefined;
            this.pump();
          }, wait);
        }
        return;
      }
      this.queue.shift();
      const { dropAfterResponses, dropMidResponse } = this.settings.faults;
      const dropNow = dropAfterResponses !== undefined && this.responsesSent >= dropAfterResponses;
      if (dropNow && dropMidResponse) {
        // Cut in the middle of this response's audio.
        const audioAt = head.frames.findIndex((f) => typeof f !== 'string' || f.includes('"response.audio.delta"'));
        const cut = audioAt < 0 ? 0 : audioAt + Math.max(1, Math.floor((head.frames.length - 1 - audioAt) / 2));
        for (const frame of head.frames.slice(0, cut)) this.send(frame);
      }
      if (dropNow) {
        this.drop(this.dropOptions());
        return;
      }
      for (const frame of head.frames) this.send(frame);
      this.responsesSent += 1;
    }
    if (this.state === 'stopping' && this.queue.length === 0) {
      const used = (this.billedBytes / BYTES_PER_SECOND).toFixed(1);
      const credit = (this.settings.creditSeconds ?? 0).toFixed(1);
      this.fail(`Session stopped: the account has no credits left (used ${used} s of ${credit} s).`, 402);
    }
  }

  /**
   * Credits are used up: the utterance in progress is dropped, the utterances already heard are
   * answered as when the audio stops, and scheduled responses still go out.
   */
  private stopBilling(): void {
    this.state = 'stopping';
    this.segmenter?.dropCurrent();
    this.onAudioStopped();
    this.segmenter = undefined;
    this.pump();
  }

  /* ------------------------------------------------------------------------------------- */
  /* Flow control                                                                          */

  /** The deliberately slow server: read no more than `inputBytesPerSecond` of audio. */
  private throttle(bytes: number): void {
    const rate = this.settings.inputBytesPerSecond;
    if (rate === undefined) return;
    const now = Date.now();
    this.readAllowedAt = Math.max(this.readAllowedAt, now) + (bytes * 1000) / rate;
    this.armThrottle();
  }

  private armThrottle(): void {
    const wait = this.readAllowedAt - Date.now();
    if (wait <= 0) {
      this.unpause('throttle');
      return;
    }
    this.pauseFor('throttle');
    if (this.throttleTimer === undefined) {
      this.throttleTimer = this.setTimer(() => {
        this.throttleTimer = undefined;
        this.armThrottle();
      }, Math.ceil(wait));
    }
  }

  /** Stops reading; the idle time counts only while reading. */
  private pauseFor(reason: PauseReason): void {
    if (this.state === 'closed') return;
    this.pauses.add(reason);
    this.ws.pause();
    this.stopIdle();
  }

  private unpause(reason: PauseReason): void {
    if (!this.pauses.delete(reason) || this.pauses.size > 0 || this.state === 'closed') return;
    this.ws.resume();
    this.armIdle();
  }

  /** After each write completes: resume reading once the send buffer is back under its bound. */
  private readonly onSent = (): void => {
    this.unflushed -= 1;
    if (this.unflushed === 0) for (const waiter of this.flushWaiters.splice(0)) waiter();
    if (this.pauses.has('backpressure') && this.ws.bufferedAmount <= this.settings.sendBufferLimitBytes) {
      this.unpause('backpressure');
    }
  };

  private send(frame: string | Buffer): void {
    if (this.state === 'closed' || this.state === 'half-open' || this.ws.readyState !== this.ws.OPEN) return;
    this.unflushed += 1;
    this.ws.send(frame, { binary: typeof frame !== 'string' }, this.onSent);
    this.peakBuffered = Math.max(this.peakBuffered, this.ws.bufferedAmount);
    // A client that reads slowly: stop reading its input until our send buffer drains.
    if (this.ws.bufferedAmount > this.settings.sendBufferLimitBytes) this.pauseFor('backpressure');
  }

  /* ------------------------------------------------------------------------------------- */
  /* Errors and the end                                                                    */

  private sendError(message: string, code: number): void {
    const echoed = this.settings.faults.echoKey && this.ownerKey !== undefined ? `${message} (key ${this.ownerKey})` : message;
    this.send(encodeServerEvent.error(echoed, code));
  }

  /* ------------------------------------------------------------------------------------- */
  /* Faults                                                                                */

  /**
   * Ends the session abruptly: the connection is cut without a close frame (the client sees
   * 1006), or closed with `code` (1001 going away, 1011 server error, 1012 restart, ...).
   */
  drop(options: DropOptions = {}): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.clearTimers();
    this.forget();
    this.onDrop?.();
    if (options.code !== undefined) {
      this.ws.close(options.code, 'dropped by the emulator');
      return;
    }
    if (options.reset) {
      const socket = this.socket as (Duplex & { resetAndDestroy?: () => void }) | undefined;
      if (socket?.resetAndDestroy) socket.resetAndDestroy();
      else this.ws.terminate();
      return;
    }
    // Cut without a close frame (the client sees 1006). What was sent before reaches the client
    // first: the socket is ended (FIN), not reset, which would make the client's kernel discard
    // what it had not read yet.
    this.afterFlush(() => {
      if (this.socket) this.socket.end();
      else this.ws.terminate();
      this.setTimer(() => this.ws.terminate(), 1000);
    });
  }

  private dropOptions(): DropOptions {
    const { dropCode, dropReset } = this.settings.faults;
    return dropCode !== undefined ? { code: dropCode } : { reset: dropReset };
  }

  /** Runs `fn` once every frame sent so far has been handed to the kernel. */
  private afterFlush(fn: () => void): void {
    if (this.unflushed === 0) fn();
    else this.flushWaiters.push(fn);
  }

  /**
   * Goes half-open, like a server that vanished without closing: reads nothing (so pings go
   * unanswered) and sends nothing more, while the connection stays up. The socket is cut after
   * a minute, or when the emulator closes.
   */
  goHalfOpen(): void {
    if (this.state === 'closed' || this.state === 'half-open') return;
    this.state = 'half-open';
    this.clearTimers();
    this.forget();
    this.pauseFor('half-open');
    this.socket?.pause();
    this.setTimer(() => this.ws.terminate(), HALF_OPEN_HOLD_MS);
  }

  /** Sends `error`, then ends the session. */
  private fail(message: string, code: number): void {
    if (this.state === 'closed') return;
    this.sendError(message, code);
    this.state = 'closed';
    this.clearTimers();
    this.forget();
    this.ws.close(SESSION_END_CLOSE_CODE, code === 402 ? 'billing stop' : 'session ended');
    // Reading must go on so the client's close frame is seen and the socket can close.
    if (this.pauses.size > 0) {
      this.pauses.clear();
      this.ws.resume();
    }
  }

  private dispose(): void {
    this.state = 'closed';
    this.flushWaiters.length = 0;
    this.clearTimers();
    this.forget();
    this.resolveClosed();
  }

  /** Forgets every response not yet sent (the session is over). */
  private forget(): void {
    this.queue.length = 0;
    this.grouped = [];
    this.groupedBytes = 0;
    this.held = [];
    this.segmenter = undefined;
  }

  private setTimer(fn: () => void, ms: number): NodeJS.Timeout {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      fn();
    }, ms);
    this.timers.add(timer);
    return timer;
  }

  private clearTimer(timer: NodeJS.Timeout | undefined): void {
    if (timer === undefined) return;
    clearTimeout(timer);
    this.timers.delete(timer);
  }

  private clearTimers(): void {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    this.stopIdle();
    this.updateTimer = undefined;
    this.queueTimer = undefined;
    this.throttleTimer = undefined;
  }
}
