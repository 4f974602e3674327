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
 *
 * Shape: the session's state is one union (`SessionState`) changed through one setter that
 * clears the timers the old state owned; the fault switches are a plan (`SessionFaultPlan`)
 * consulted at named points (created, before a response, after input), not protocol logic.
 */
import { randomUUID } from 'node:crypto';
import type { Duplex } from 'node:stream';
import type { WebSocket, RawData } from 'ws';
import { encodeServerEvent, readAppendAudio, type WireSessionInfo } from '../realtime/codec.js';
import { UtteranceSegmenter, type SegmentedUtterance } from './vad.js';
import { checkSessionUpdate, isRefusal, readClientEvent, responseFrames, sessionInfo, sessionKey } from './session-messages.js';
import {
  SESSION_END_CLOSE_CODE,
  type DropOptions,
  type RealtimeHandshake,
  type RealtimeSessionSettings,
  type RealtimeSessionStats,
} from './session-settings.js';
import { CLOSED, timersOf, type ActiveConfig, type SessionState } from './session-state.js';
import { HeardSpeech, type DueAnswer } from './heard-speech.js';
import { SessionFlow } from './session-flow.js';
import { SessionCredit } from './session-credit.js';

/** How long a half-open session keeps its socket before cutting it. */
const HALF_OPEN_HOLD_MS = 60_000;
/** How long a dropped session waits for the client to close its end before cutting the socket. */
const DROP_BACKSTOP_MS = 1000;

/**
 * The server side of one realtime WebSocket. Created by the emulator once the handshake is
 * accepted; it arms the `session.update` timer at once. Every timer belongs to a state (see
 * `SessionState`) and goes with it; the last state, once the socket has closed, has none.
 */
export class RealtimeSession {
  /** Resolves once the socket has closed and every timer of the session is cleared. */
  readonly closed: Promise<void>;

  readonly #ws: WebSocket;
  readonly #handshake: RealtimeHandshake;
  readonly #settings: RealtimeSessionSettings;
  /** The raw socket under `ws`, for the half-open fault and for cutting a dropped session. */
  readonly #socket: Duplex | undefined;
  /** Told when a fault drops the session, before the client can see it. */
  readonly #onDrop: (() => void) | undefined;
  /** How many utterances make one answer. */
  readonly #groupSize: number;
  /** Reading paused and resumed, frames counted until written (see `SessionFlow`). */
  readonly #flow: SessionFlow;
  #state: SessionState;
  #resolveClosed!: () => void;
  /** The key the session authenticated with: the owner of its cloned voices. */
  #ownerKey: string | undefined;
  #id: string | undefined;
  readonly #credit: SessionCredit;
  #processedBytes = 0;
  /** Responses sent so far (for the fault plan). */
  #responsesSent = 0;

  constructor(ws: WebSocket, handshake: RealtimeHandshake, settings: RealtimeSessionSettings, socket?: Duplex, onDrop?: () => void) {
    this.#ws = ws;
    this.#handshake = handshake;
    this.#settings = settings;
    this.#socket = socket;
    this.#onDrop = onDrop;
    this.#credit = new SessionCredit(settings);
    this.closed = new Promise((resolve) => {
      this.#resolveClosed = resolve;
    });
    const { mergeUtterances } = settings.faults;
    this.#groupSize = mergeUtterances > 1 ? mergeUtterances : settings.segmentation === 'idle' ? Infinity : 1;
    this.#flow = new SessionFlow(ws, settings.sendBufferLimitBytes, {
      closed: () => this.#state.status === 'closed',
      paused: () => this.#stopIdle(),
      resumed: () => this.#armIdle(),
      // A drop's cut waits for what was sent before it to be written.
      flushed: () => {
        const state = this.#state;
        if (state.status !== 'closed' || state.cut === undefined) return;
        this.#set({ ...state, cut: undefined });
        state.cut();
      },
    });
    ws.on('message', (data, isBinary) => this.#onMessage(data, isBinary));
    // Pings are answered while the session lives. After a drop the socket is ended, and a pong
    // written after that would be an error that resets the connection, discarding what the
    // client had not read yet; half-open, nothing is answered.
    ws.on('ping', (data) => {
      if (this.#state.status !== 'closed' && this.#state.status !== 'half-open') ws.pong(data);
    });
    ws.on('error', () => {
      // A protocol violation by the client (ws closes the socket itself); nothing to report.
    });
    ws.on('close', () => {
      this.#set(CLOSED);
      this.#resolveClosed();
    });
    const ms = settings.sessionUpdateTimeoutMs;
    const timer = setTimeout(() => this.#fail(`No session.update within ${ms} ms of connecting: the first event must be session.update.`, 408), ms);
    this.#state = { status: 'awaiting-update', timer };
  }

  /** A snapshot of the session's state and flow control. */
  stats(): RealtimeSessionStats {
    return {
      id: this.#id,
      state: this.#state.status,
      audioBytes: this.#processedBytes,
      bufferedAmount: this.#ws.bufferedAmount,
      peakBufferedAmount: this.#flow.peakBuffered,
      readingPaused: !this.#flow.reading,
    };
  }

  /** Ends the session at once (used by the emulator's `close()`). */
  terminate(): void {
    this.#set(CLOSED);
    this.#ws.terminate();
  }

  /** The one way the state changes: the old state's timers that the new one does not keep are cleared. */
  #set(next: SessionState): void {
    const previous = this.#state;
    this.#state = next;
    const kept = timersOf(next);
    for (const timer of timersOf(previous)) if (timer !== undefined && !kept.includes(timer)) clearTimeout(timer);
    const check = previous.status === 'active' ? previous.idleCheck : undefined;
    if (check !== undefined && check !== (next.status === 'active' ? next.idleCheck : undefined)) clearImmediate(check);
  }

  /* ------------------------------------------------------------------------------------- */
  /* Incoming events                                                                       */

  #onMessage(data: RawData, isBinary: boolean): void {
    const status = this.#state.status;
    // Binary frames are not events (interface); the service ignores them (facts.md).
    if (isBinary || status === 'closed' || status === 'stopping' || status === 'half-open') return;
    const read = readClientEvent(data);
    if ('code' in read) {
      if (read.code === 400 && status === 'awaiting-update') this.#fail(`${read.message} The first event must be session.update.`, 400);
      else this.#sendError(read.code === 400 ? `${read.message} It was ignored.` : read.message, read.code);
      return;
    }
    const event = read.event;
    if (status === 'awaiting-update') {
      if (event.type !== 'session.update') {
        const got = event.type === 'unknown' ? event.wireType : event.type;
        this.#fail(`The first event must be session.update (got ${JSON.stringify(got)}).`, 400);
        return;
      }
      this.#onFirstUpdate(event.session, event.auth);
      return;
    }
    switch (event.type) {
      case 'session.update':
        this.#onLaterUpdate(event.session);
        return;
      case 'input_audio_buffer.append':
        this.#onAppend(event.audio);
        return;
      case 'input_audio_buffer.clear':
      case 'input_audio_buffer.commit':
      case 'response.cancel':
        this.#sendError(`${event.type} is recognised but not supported by the realtime service.`, 400);
        return;
      case 'unknown':
        this.#sendError(`Unknown event type ${JSON.stringify(event.wireType)}; it was ignored.`, 400);
        return;
    }
  }

  #onFirstUpdate(session: unknown, auth: unknown): void {
    const key = sessionKey(this.#handshake.headerKey, auth, this.#settings.apiKeys);
    if (typeof key !== 'string') {
      this.#fail(key.message, 401);
      return;
    }
    this.#ownerKey = key;
    const config = this.#validate(session, key, true);
    if (config === undefined) return;
    if (this.#settings.coldStartMs === 0) {
      this.#activate(config);
      return;
    }
    // The configuration may still change meanwhile: the one current when the timer fires is created.
    const created = (): void => {
      if (this.#state.status === 'starting') this.#activate(this.#state.config);
    };
    this.#set({ status: 'starting', config, timer: setTimeout(created, this.#settings.coldStartMs) });
    this.#send(encodeServerEvent.sessionStarting());
  }

  #onLaterUpdate(session: unknown): void {
    const config = this.#validate(session, undefined, false);
    const state = this.#state;
    if (config === undefined || (state.status !== 'starting' && state.status !== 'active')) return;
    this.#set({ ...state, config });
    // During a cold start the new configuration is announced with session.created.
    if (state.status === 'active') this.#send(encodeServerEvent.sessionUpdated(this.#sessionInfo(config)));
  }

  /** The configuration in its resolved form, or undefined after answering with `error` (see `checkSessionUpdate`). */
  #validate(session: unknown, key: string | undefined, first: boolean): ActiveConfig | undefined {
    const result = checkSessionUpdate(session, key ?? this.#ownerKey, first, this.#settings.voices);
    if (!isRefusal(result)) return result;
    if (result.fatal) this.#fail(result.message, result.code);
    else this.#sendError(result.message, result.code);
    return undefined;
  }

  /** `session.created`: the session is active, with the fault plan's timers armed. */
  #activate(config: ActiveConfig): void {
    this.#id = randomUUID();
    const faults = this.#settings.faults;
    const faultTimers = faults.created.map(({ afterMs, fault }) =>
      setTimeout(() => (fault === 'drop' ? this.drop(faults.dropWith) : this.goHalfOpen()), afterMs),
    );
    const heard = new HeardSpeech(new UtteranceSegmenter(this.#settings.segmenter), this.#groupSize, this.#settings.lastAnswer);
    this.#set({
      status: 'active',
      config,
      heard,
      idleTimer: undefined,
      idleCheck: undefined,
      queue: [],
      queueTimer: undefined,
      readAllowedAt: 0,
      throttleTimer: undefined,
      faultTimers,
    });
    const info = this.#sessionInfo(config);
    this.#send(encodeServerEvent.sessionCreated(info));
    this.#send(encodeServerEvent.sessionUpdated(info));
  }

  #sessionInfo(config: ActiveConfig): WireSessionInfo {
    return sessionInfo(config, this.#id, this.#handshake, this.#settings.faults.echo(this.#ownerKey));
  }

  #onAppend(audio: unknown): void {
    const pcm = readAppendAudio(audio, 'The audio was discarded.');
    if (!Buffer.isBuffer(pcm)) {
      this.#sendError(pcm.message, pcm.code);
      return;
    }
    // Audio sent before session.created is discarded by the service (facts.md).
    const state = this.#state;
    if (state.status !== 'active') return;
    const { heard } = state;
    this.#throttle(pcm.length);
    const { covered, exhausted } = this.#credit.bill(pcm);
    this.#processedBytes += covered.length;
    this.#scheduleAll(heard.hear(covered));
    if (exhausted) this.#stopBilling();
    else if (this.#settings.faults.afterInput(this.#processedBytes)) this.drop(this.#settings.faults.dropWith);
    else this.#armIdle();
  }

  /* ------------------------------------------------------------------------------------- */
  /* Responses                                                                             */

  /** Schedules each answer now due, in order. */
  #scheduleAll(due: readonly DueAnswer[]): void {
    for (const { utterances, extraMs } of due) this.#schedule(utterances, extraMs);
  }

  /**
   * The audio stopped arriving (appends paused for `idleMs` while reading, or the credit ran
   * out): what has been heard is answered, and answers still held are the last ones.
   */
  #audioStopped(heard: HeardSpeech): void {
    this.#stopIdle();
    this.#scheduleAll(heard.stopped());
  }

  /**
   * Restarts the idle timer: armed while reading, in the active state, when something waits for
   * the audio to stop (an utterance in progress, a partial group, a held answer). When it fires,
   * the decision waits for the input already received to be read (`setImmediate` runs after
   * the event loop's I/O): appends that arrived while this process was busy re-arm it, so only
   * input that is not there is idle.
   */
  #armIdle(): void {
    const state = this.#state;
    if (state.status !== 'active') return;
    const waiting = this.#flow.reading && state.heard.waiting;
    this.#set({ ...state, idleTimer: waiting ? setTimeout(this.#idleExpired, this.#settings.idleMs) : undefined, idleCheck: undefined });
  }

  readonly #idleExpired = (): void => {
    const state = this.#state;
    if (state.status === 'active') this.#set({ ...state, idleTimer: undefined, idleCheck: setImmediate(this.#idleConfirmed) });
  };

  readonly #idleConfirmed = (): void => {
    const state = this.#state;
    if (state.status === 'active') this.#audioStopped(state.heard);
  };

  #stopIdle(): void {
    const state = this.#state;
    if (state.status === 'active' && (state.idleTimer !== undefined || state.idleCheck !== undefined)) {
      this.#set({ ...state, idleTimer: undefined, idleCheck: undefined });
    }
  }

  /** Queues one response answering `utterances` (one, several merged, or a part of one), `extraMs` later than usual. */
  #schedule(utterances: SegmentedUtterance[], extraMs = 0): void {
    const state = this.#state;
    if (state.status !== 'active' && state.status !== 'stopping') return;
    const frames = responseFrames(utterances, state.config, this.#settings.audioFrames);
    const last = utterances[utterances.length - 1]!;
    const late = this.#settings.faults.lateMs(last.index);
    state.queue.push({ dueAt: Date.now() + this.#settings.latencyMs + late + extraMs, frames });
    this.#pump();
  }

  /** Sends the responses that are due, in order; arms a timer for the next one. */
  #pump(): void {
    for (;;) {
      const state = this.#state;
      if (state.status !== 'active' && state.status !== 'stopping') return;
      const head = state.queue[0];
      if (head === undefined) break;
      const wait = head.dueAt - Date.now();
      if (wait > 0) {
        if (state.queueTimer === undefined) this.#set({ ...state, queueTimer: setTimeout(this.#queueDue, wait) });
        return;
      }
      state.queue.shift();
      const cut = this.#settings.faults.beforeResponse(this.#responsesSent, head.frames);
      if (cut !== undefined) {
        for (const frame of head.frames.slice(0, cut)) this.#send(frame);
        this.drop(this.#settings.faults.dropWith);
        return;
      }
      for (const frame of head.frames) this.#send(frame);
      this.#responsesSent += 1;
    }
    if (this.#state.status === 'stopping') this.#fail(this.#credit.stopMessage(), 402);
  }

  readonly #queueDue = (): void => {
    const state = this.#state;
    if (state.status === 'active' || state.status === 'stopping') this.#set({ ...state, queueTimer: undefined });
    this.#pump();
  };

  /**
   * Credits are used up: the utterance in progress is dropped, the utterances already heard are
   * answered as when the audio stops, and scheduled responses still go out.
   */
  #stopBilling(): void {
    const state = this.#state;
    if (state.status !== 'active') return;
    const { status, heard, idleTimer, idleCheck, ...answering } = state;
    this.#set({ status: 'stopping', ...answering });
    heard.dropCurrent();
    this.#audioStopped(heard);
    this.#pump();
  }

  /* ------------------------------------------------------------------------------------- */
  /* Flow control                                                                          */

  /** The deliberately slow server: read no more than `inputBytesPerSecond` of audio. */
  #throttle(bytes: number): void {
    const rate = this.#settings.inputBytesPerSecond;
    const state = this.#state;
    if (rate === undefined || state.status !== 'active') return;
    this.#set({ ...state, readAllowedAt: Math.max(state.readAllowedAt, Date.now()) + (bytes * 1000) / rate });
    this.#armThrottle();
  }

  #armThrottle(): void {
    const state = this.#state;
    if (state.status !== 'active' && state.status !== 'stopping') return;
    const wait = state.readAllowedAt - Date.now();
    if (wait <= 0) {
      this.#flow.resume('throttle');
      return;
    }
    if (state.throttleTimer === undefined) this.#set({ ...state, throttleTimer: setTimeout(this.#throttleDue, Math.ceil(wait)) });
    this.#flow.pause('throttle');
  }

  readonly #throttleDue = (): void => {
    const state = this.#state;
    if (state.status !== 'active' && state.status !== 'stopping') return;
    this.#set({ ...state, throttleTimer: undefined });
    this.#armThrottle();
  };

  #send(frame: string | Buffer): void {
    const status = this.#state.status;
    if (status !== 'closed' && status !== 'half-open') this.#flow.send(frame);
  }

  /* ------------------------------------------------------------------------------------- */
  /* Errors, faults and the end                                                            */

  #sendError(message: string, code: number): void {
    const key = this.#settings.faults.echo(this.#ownerKey);
    this.#send(encodeServerEvent.error(key !== undefined ? `${message} (key ${key})` : message, code));
  }

  /** Sends `error`, then ends the session. */
  #fail(message: string, code: number): void {
    if (this.#state.status === 'closed') return;
    this.#sendError(message, code);
    this.#set(CLOSED);
    this.#ws.close(SESSION_END_CLOSE_CODE, code === 402 ? 'billing stop' : 'session ended');
    // Reading must go on so the client's close frame is seen and the socket can close.
    this.#flow.resumeAll();
  }

  /**
   * Ends the session abruptly: the connection is cut without a close frame (the client sees
   * 1006), or closed with `code` (1001 going away, 1011 server error, 1012 restart, ...).
   */
  drop(options: DropOptions = {}): void {
    if (this.#state.status === 'closed') return;
    this.#set(CLOSED);
    this.#onDrop?.();
    if (options.code !== undefined) {
      this.#ws.close(options.code, 'dropped by the emulator');
      return;
    }
    if (options.reset) {
      const socket = this.#socket as (Duplex & { resetAndDestroy?: () => void }) | undefined;
      if (socket?.resetAndDestroy) socket.resetAndDestroy();
      else this.#ws.terminate();
      return;
    }
    // Cut without a close frame (the client sees 1006). What was sent before reaches the client
    // first: the socket is ended (FIN), not reset, which would make the client's kernel discard
    // what it had not read yet.
    if (this.#flow.unflushed === 0) this.#cut();
    else this.#set({ status: 'closed', cut: this.#cut, timer: undefined });
  }

  readonly #cut = (): void => {
    if (this.#socket) this.#socket.end();
    else this.#ws.terminate();
    this.#set({ status: 'closed', cut: undefined, timer: setTimeout(() => this.#ws.terminate(), DROP_BACKSTOP_MS) });
  };

  /**
   * Goes half-open, like a server that vanished without closing: reads nothing (so pings go
   * unanswered) and sends nothing more, while the connection stays up. The socket is cut after
   * a minute, or when the emulator closes.
   */
  goHalfOpen(): void {
    const status = this.#state.status;
    if (status === 'closed' || status === 'half-open') return;
    this.#set({ status: 'half-open', timer: setTimeout(() => this.#ws.terminate(), HALF_OPEN_HOLD_MS) });
    this.#flow.pause('half-open');
    this.#socket?.pause();
  }
}
