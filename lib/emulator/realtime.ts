/**
 * The emulator's realtime side: WebSocket upgrades on `/v1/realtime`, one `RealtimeSession`
 * per connection. Authentication by the `x-api-key` handshake header happens here (a bad key is
 * answered with HTTP 401 before any WebSocket exists); everything after the handshake is in
 * `realtime-session.ts`, the emulator's own utterance detector in `vad.ts`. The options (the
 * detector, when answers are given, fault switches) are checked once, here, into the settings
 * every session shares; the fault switches become the plan of hooks each session consults.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import { ValidationError } from '../errors.js';
import { describeReceived, intOption, numberOption } from '../options.js';
import { MAX_CLIENT_EVENT_BYTES } from '../realtime/codec.js';
import { refuseUpgrade } from '../realtime/handshake-refusal.js';
import type { EmulatorContext, EmulatorPart } from './context.js';
import { RealtimeSession } from './realtime-session.js';
import type { DropOptions, LastAnswer, RealtimeSessionSettings, RealtimeSessionStats, Segmentation, SessionFaultPlan, TimedFault } from './session-settings.js';
import { isCount } from './http/faults.js';
import { UtteranceSegmenter, type UtteranceSegmenterOptions } from './vad.js';
import type { VoiceOwnership } from './voices.js';

export { MAX_GROUP_BYTES, OUTPUT_PIECE_BYTES, SESSION_END_CLOSE_CODE, STOCK_VOICE_IDS } from './session-settings.js';
export type { DropOptions, LastAnswer, RealtimeSessionState, RealtimeSessionStats, Segmentation } from './session-settings.js';
export {
  DEFAULT_MAX_UTTERANCE_MS,
  DEFAULT_PADDING_MS,
  DEFAULT_VAD_FRAME_MS,
  DEFAULT_VAD_SILENCE_MS,
  DEFAULT_VAD_THRESHOLD_DBFS,
  MAX_PADDING_MS,
} from './vad.js';

/** How long a new connection may take to send its first `session.update`, in milliseconds. */
export const DEFAULT_SESSION_UPDATE_TIMEOUT_MS = 10_000;
/** Appends paused this long (while the emulator reads) mean the audio stopped arriving, in ms. */
export const DEFAULT_IDLE_MS = 300;
/** With `segmentation: 'split'`: voiced span after which an utterance's first part is answered, in ms. */
export const DEFAULT_SPLIT_MS = 700;
/** Send-buffer bound per session above which the emulator stops reading that client's input. */
export const DEFAULT_SEND_BUFFER_LIMIT_BYTES = 1024 * 1024;
/**
 * Largest WebSocket message `ws` accepts before closing the connection (1009). Well above the
 * 1 MiB event limit, so an over-limit event is answered with an `error` event instead.
 */
export const REALTIME_MAX_PAYLOAD_BYTES = 4 * MAX_CLIENT_EVENT_BYTES;

/**
 * Fault switches: a service that misbehaves the ways real networks and servers do, for testing
 * clients. Each applies to every session (so a reconnected session fails again the same way);
 * `RealtimeFaultControl` triggers the same faults once, at a moment of the caller's choosing.
 */
export interface RealtimeFaults {
  /** Drop each session this many ms after `session.created`. */
  dropAfterMs?: number;
  /** Drop each session once it has sent this many responses (0: at the first response). */
  dropAfterResponses?: number;
  /** With `dropAfterResponses`: drop in the middle of the next response's audio instead of before it. */
  dropMidResponse?: boolean;
  /**
   * Drop a session once it has heard this many ms of input audio (a drop in the middle of a
   * file), between two responses; only the first `dropsAfterInput` sessions (default 1), so the
   * session after the reconnect goes on.
   */
  dropAfterInputMs?: number;
  /** How many sessions `dropAfterInputMs` drops, in all. Default 1. */
  dropsAfterInput?: number;
  /** Drop with this close code (1001, 1011, 1012, 1013, ...) instead of cutting the connection (1006). */
  dropCode?: number;
  /** Drop with a TCP reset: what was in flight is lost, as on a real network (default: ended after a flush). */
  dropReset?: boolean;
  /** Go half-open this many ms after `session.created`: read nothing, answer no ping, send nothing. */
  halfOpenAfterMs?: number;
  /** Refuse this many handshakes (from the start) with `refuseStatus`. */
  refuseHandshakes?: number;
  /** HTTP status of a refused handshake: 401, 429, 503, ... Default 503. */
  refuseStatus?: number;
  /** `Retry-After` (seconds) sent with a refused handshake. */
  refuseRetryAfterS?: number;
  /** After each drop, refuse this many handshakes with `refuseStatus`: the reconnects meet them. */
  refuseAfterDrop?: number;
  /** After each drop, leave this many handshakes unanswered (after them, `refuseAfterDrop` applies). */
  stallAfterDrop?: number;
  /** Answer every N utterances with one response (a partial group once the appends pause for `idleMs`). */
  mergeUtterances?: number;
  /** Answer utterance N (1-based, per session) this many ms late: `{ 3: 8000 }`. */
  lateUtterances?: Readonly<Record<number, number>>;
  /** Echo the caller's API key in `session.created` and in error messages. */
  echoKey?: boolean;
}

/** The same faults, triggered now on every open session (or the next handshakes). */
export interface RealtimeFaultControl {
  /** Drops every open session now. */
  drop(options?: DropOptions): void;
  /** Every open session goes half-open now. */
  halfOpen(): void;
  /** Refuses the next `count` handshakes with `status` (default 503), `Retry-After` when given. */
  refuseNextHandshakes(count: number, status?: number, retryAfterS?: number): void;
  /** Leaves the next `count` handshakes unanswered (the upgrade request is read, nothing comes back). */
  stallNextHandshakes(count: number): void;
}

/** How the realtime emulator answers: its segmentation, timing and voices (part of `EmulatorOptions`). */
export interface RealtimeEmulatorOptions {
  /** Time allowed for the first `session.update`, in ms; then `error` and close. Default 10000. */
  sessionUpdateTimeoutMs?: number;
  /**
   * Seconds of input audio each session may use (bytes / 48000). Past it, the utterance in
   * progress is dropped, the utterances already heard are answered as when the audio stops
   * (`idleMs`), responses already scheduled are sent, then `error` (code 402) and the session
   * closes (1008). Default: unlimited.
   */
  creditSeconds?: number;
  /** RMS level at or above which a 30 ms frame counts as voice, in dBFS (at most 0). Default -45. */
  vadThresholdDbfs?: number;
  /** Unvoiced milliseconds that end an utterance. Default 900. */
  vadSilenceMs?: number;
  /**
   * Appends paused this long while the emulator reads (not while it holds back on purpose:
   * `inputBytesPerSecond`, a full send buffer) mean the audio stopped: the utterance in progress
   * is ended and answered. Default 300.
   */
  idleMs?: number;
  /**
   * When answers are given: each utterance when it ends (`'utterance'`, the default); everything
   * heard, as one answer, once the appends pause for `idleMs` (`'idle'`); or an utterance whose
   * voiced span reaches `splitMs` in two answers, the first at once (`'split'`).
   */
  segmentation?: Segmentation;
  /** With `segmentation: 'split'`, in ms. Default 700. */
  splitMs?: number;
  /**
   * `'prompt'` (default): each answer as soon as it is ready. `'never'` or `{ lateMs }`: each
   * answer is held until speech is heard again; the one still held when the appends pause for
   * `idleMs` is the last, never sent or sent `lateMs` later.
   */
  lastAnswer?: LastAnswer;
  /** Milliseconds after which an utterance is ended even if speech goes on. Default 15000. */
  maxUtteranceMs?: number;
  /** Input audio returned around each utterance's voiced region, 0 to 300 ms. Default 0 (as long as the speech). */
  paddingMs?: number;
  /** Delay before each response starts, in ms; responses keep their order. Default 0. */
  latencyMs?: number;
  /** Output audio as JSON base64 `response.audio.delta` events or as binary PCM16 frames. Default 'json'. */
  audioFrames?: 'json' | 'binary';
  /** When > 0: `session.starting` at once, `session.created` after this many ms; audio meanwhile discarded. Default 0. */
  coldStartMs?: number;
  /** A deliberately slow server: read each client's audio no faster than this many bytes per second. Default: unlimited. */
  inputBytesPerSecond?: number;
  /** Per-session send buffer above which the client's input is no longer read until it drains. Default 1 MiB. */
  sendBufferLimitBytes?: number;
  /** Fault switches (see `RealtimeFaults`). Default: none. */
  faults?: RealtimeFaults;
}

function positive(field: string, value: number | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new ValidationError(field, 'a finite number above 0', String(value));
  }
  return value;
}

function optionalInt(field: string, value: number | undefined, min: number): number | undefined {
  if (value === undefined) return undefined;
  return intOption(value, field, { min, fallback: min });
}

/** The fault switches, checked, as the hooks a session consults (see `SessionFaultPlan`). */
function faultPlan(faults: RealtimeFaults = {}): SessionFaultPlan {
  const late = new Map<number, number>();
  for (const [index, delay] of Object.entries(faults.lateUtterances ?? {})) {
    late.set(
      intOption(Number(index), 'faults.lateUtterances', { min: 1, fallback: 1 }),
      intOption(delay, `faults.lateUtterances.${index}`, { min: 0, fallback: 0 }),
    );
  }
  const dropAfterMs = optionalInt('faults.dropAfterMs', faults.dropAfterMs, 0);
  const dropAfterResponses = optionalInt('faults.dropAfterResponses', faults.dropAfterResponses, 0);
  const dropMidResponse = faults.dropMidResponse === true;
  const dropAfterInputBytes = faults.dropAfterInputMs === undefined ? undefined : optionalInt('faults.dropAfterInputMs', faults.dropAfterInputMs, 0)! * 48;
  /** Shared by the sessions: `dropAfterInputMs` drops this many in all. */
  let inputDrops = intOption(faults.dropsAfterInput, 'faults.dropsAfterInput', { min: 1, fallback: 1 });
  const dropCode = optionalInt('faults.dropCode', faults.dropCode, 1000);
  const dropReset = faults.dropReset === true;
  const halfOpenAfterMs = optionalInt('faults.halfOpenAfterMs', faults.halfOpenAfterMs, 0);
  const mergeUtterances = intOption(faults.mergeUtterances, 'faults.mergeUtterances', { min: 1, fallback: 1 });
  const echoKey = faults.echoKey === true;
  const created: TimedFault[] = [];
  if (dropAfterMs !== undefined) created.push({ afterMs: dropAfterMs, fault: 'drop' });
  if (halfOpenAfterMs !== undefined) created.push({ afterMs: halfOpenAfterMs, fault: 'half-open' });
  return {
    mergeUtterances,
    created,
    dropWith: dropCode !== undefined ? { code: dropCode } : { reset: dropReset },
    lateMs: (index) => late.get(index) ?? 0,
    beforeResponse(sent, frames) {
      if (dropAfterResponses === undefined || sent < dropAfterResponses) return undefined;
      if (!dropMidResponse) return 0;
      // Cut in the middle of this response's audio.
      const audioAt = frames.findIndex((f) => typeof f !== 'string' || f.includes('"response.audio.delta"'));
      return audioAt < 0 ? 0 : audioAt + Math.max(1, Math.floor((frames.length - 1 - audioAt) / 2));
    },
    afterInput(heardBytes) {
      if (dropAfterInputBytes === undefined || heardBytes < dropAfterInputBytes || inputDrops === 0) return false;
      inputDrops -= 1;
      return true;
    },
    echo: (key) => (echoKey ? key : undefined),
  };
}

/** Every value of `Segmentation`, in the order a command line lists them (see `RealtimeEmulatorOptions.segmentation`). */
export const SEGMENTATIONS: readonly Segmentation[] = Object.freeze(['utterance', 'idle', 'split']);

/** The detector's settings, each named after its emulator option in errors. */
function resolveSegmenter(options: RealtimeEmulatorOptions, segmentation: Segmentation): UtteranceSegmenterOptions {
  if (options.splitMs !== undefined && segmentation !== 'split') {
    throw new ValidationError('splitMs', "to be given with segmentation 'split' only", String(options.splitMs));
  }
  const segmenter: UtteranceSegmenterOptions = {
    thresholdDbfs: options.vadThresholdDbfs,
    silenceMs: options.vadSilenceMs,
    maxUtteranceMs: options.maxUtteranceMs,
    paddingMs: options.paddingMs,
    ...(segmentation === 'split' ? { splitMs: options.splitMs ?? DEFAULT_SPLIT_MS } : {}),
  };
  const names = {
    thresholdDbfs: 'vadThresholdDbfs',
    silenceMs: 'vadSilenceMs',
    maxUtteranceMs: 'maxUtteranceMs',
    paddingMs: 'paddingMs',
    splitMs: 'splitMs',
  } as const;
  try {
    new UtteranceSegmenter(segmenter);
  } catch (error) {
    if (!(error instanceof ValidationError) || !(error.field in names)) throw error;
    const field = error.field as keyof typeof names;
    throw new ValidationError(names[field], error.accepted, String(segmenter[field]));
  }
  return segmenter;
}

function resolveLastAnswer(value: LastAnswer | undefined): LastAnswer {
  if (value === undefined || value === 'prompt' || value === 'never') return value ?? 'prompt';
  const accepted = "'prompt', 'never' or { lateMs } with lateMs a finite number, 0 or more";
  if (value === null || typeof value !== 'object' || Object.keys(value).some((k) => k !== 'lateMs')) {
    throw new ValidationError('lastAnswer', accepted, describeReceived(value));
  }
  const { lateMs } = value;
  if (typeof lateMs !== 'number' || !Number.isFinite(lateMs) || lateMs < 0)
    throw new ValidationError('lastAnswer.lateMs', 'a finite number, 0 or more', String(lateMs));
  return { lateMs };
}

/**
 * Checks the options once, so a bad value fails `startEmulator` rather than a session. A
 * `cloned` voice is accepted when `voices` says the session's key owns it.
 */
export function resolveRealtimeSettings(options: RealtimeEmulatorOptions, apiKeys: ReadonlySet<string>, voices: VoiceOwnership): RealtimeSessionSettings {
  const audioFrames = options.audioFrames ?? 'json';
  if (audioFrames !== 'json' && audioFrames !== 'binary') {
    throw new ValidationError('audioFrames', '"json" or "binary"', JSON.stringify(audioFrames));
  }
  const creditSeconds = numberOption(options.creditSeconds, 'creditSeconds', { min: 0, fallback: Number.POSITIVE_INFINITY });
  const segmentation = options.segmentation ?? 'utterance';
  if (!SEGMENTATIONS.includes(segmentation)) {
    throw new ValidationError('segmentation', `one of ${SEGMENTATIONS.map((m) => `'${m}'`).join(', ')}`, describeReceived(segmentation));
  }
  return {
    apiKeys,
    voices,
    sessionUpdateTimeoutMs: numberOption(options.sessionUpdateTimeoutMs, 'sessionUpdateTimeoutMs', { min: 0, fallback: DEFAULT_SESSION_UPDATE_TIMEOUT_MS }),
    creditSeconds: options.creditSeconds === undefined ? undefined : creditSeconds,
    creditBytes: options.creditSeconds === undefined ? undefined : Math.floor(creditSeconds * 24_000) * 2,
    segmenter: resolveSegmenter(options, segmentation),
    segmentation,
    idleMs: positive('idleMs', options.idleMs) ?? DEFAULT_IDLE_MS,
    lastAnswer: resolveLastAnswer(options.lastAnswer),
    latencyMs: numberOption(options.latencyMs, 'latencyMs', { min: 0, fallback: 0 }),
    audioFrames,
    coldStartMs: numberOption(options.coldStartMs, 'coldStartMs', { min: 0, fallback: 0 }),
    inputBytesPerSecond: positive('inputBytesPerSecond', options.inputBytesPerSecond),
    sendBufferLimitBytes: numberOption(options.sendBufferLimitBytes, 'sendBufferLimitBytes', { min: 0, fallback: DEFAULT_SEND_BUFFER_LIMIT_BYTES }),
    faults: faultPlan(options.faults),
  };
}

/**
 * Triggers a realtime fault now, from a JSON body (the HTTP control endpoint
 * `POST /_emulator/realtime-faults`): `{refuse: N, status?, retryAfterS?}`, `{stall: N}`,
 * `{drop: true, code?, reset?}` or `{halfOpen: true}`. Returns what is wrong with the body
 * (nothing is triggered then), or undefined once done.
 */
export function triggerRealtimeFault(control: RealtimeFaultControl, value: unknown): string | undefined {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return 'a realtime fault is a JSON object';
  const f = value as Record<string, unknown>;
  const actions = ['refuse', 'stall', 'drop', 'halfOpen'].filter((k) => f[k] !== undefined);
  if (actions.length !== 1) return 'give exactly one of refuse, stall, drop, halfOpen';
  const fields: Record<string, string[]> = { refuse: ['status', 'retryAfterS'], stall: [], drop: ['code', 'reset'], halfOpen: [] };
  const action = actions[0]!;
  const unknown = Object.keys(f).filter((k) => k !== action && !fields[action]!.includes(k));
  if (unknown.length > 0) return `unknown field(s) ${unknown.join(', ')} with ${action}`;
  if (action === 'refuse' || action === 'stall') {
    if (!isCount(f[action], 1)) return `${action} must be a number of handshakes, 1 or more`;
    if (f.status !== undefined && !isCount(f.status, 300, 599)) return 'status must be an HTTP status, 300 to 599';
    if (f.retryAfterS !== undefined && !isCount(f.retryAfterS, 0)) return 'retryAfterS must be whole seconds, 0 or more';
    if (action === 'stall') control.stallNextHandshakes(f.stall as number);
    else control.refuseNextHandshakes(f.refuse as number, (f.status as number | undefined) ?? 503, f.retryAfterS as number | undefined);
    return undefined;
  }
  if (f[action] !== true) return `${action} must be true`;
  if (action === 'halfOpen') {
    control.halfOpen();
    return undefined;
  }
  if (f.code !== undefined && !isCount(f.code, 1000, 4999)) return 'code must be a WebSocket close code, 1000 to 4999';
  if (f.reset !== undefined && typeof f.reset !== 'boolean') return 'reset must be true or false';
  if (f.code !== undefined && f.reset === true) return 'a drop closes with code or resets, not both';
  control.drop(f.code !== undefined ? { code: f.code as number } : { reset: f.reset === true });
  return undefined;
}

/** The realtime part, with a view of its sessions for tests and diagnostics. */
export interface RealtimeEmulator extends RealtimePart {
  /** A snapshot of every open session, oldest first. */
  sessions(): RealtimeSessionStats[];
  /** Faults triggered now. */
  faults: RealtimeFaultControl;
}

/** The realtime part of the emulator, as the server runs it. */
export interface RealtimePart extends EmulatorPart {
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  sessions(): RealtimeSessionStats[];
  faults: RealtimeFaultControl;
}

/**
 * The realtime part of the emulator. `handleUpgrade` takes upgrades already routed to
 * `/v1/realtime`; `close()` terminates every session, clears every timer and resolves once
 * all sockets are closed. Throws `ValidationError` naming the option for a bad option.
 */
export function createRealtimeEmulator(options: RealtimeEmulatorOptions, context: EmulatorContext): RealtimeEmulator {
  const settings = resolveRealtimeSettings(options, context.apiKeys, context.voices);
  // Each session answers pings itself: one that was dropped or went half-open must not.
  const wss = new WebSocketServer({ noServer: true, maxPayload: REALTIME_MAX_PAYLOAD_BYTES, clientTracking: false, autoPong: false });
  const sessions = new Set<RealtimeSession>();
  const handshaking = new Set<Duplex>();
  let closing = false;
  /** How the configured refusals answer; a refusal triggered at run time answers its own way once. */
  const configuredRefusal = {
    status: intOption(options.faults?.refuseStatus, 'faults.refuseStatus', { min: 300, max: 599, fallback: 503 }),
    retryAfterS: optionalInt('faults.refuseRetryAfterS', options.faults?.refuseRetryAfterS, 0),
  };
  const refusal = {
    remaining: intOption(options.faults?.refuseHandshakes, 'faults.refuseHandshakes', { min: 0, fallback: 0 }),
    ...configuredRefusal,
  };
  let stalls = 0;
  const afterDrop = {
    refuse: intOption(options.faults?.refuseAfterDrop, 'faults.refuseAfterDrop', { min: 0, fallback: 0 }),
    stall: intOption(options.faults?.stallAfterDrop, 'faults.stallAfterDrop', { min: 0, fallback: 0 }),
  };
  /** A session was dropped (a fault): arm what the next handshakes meet. */
  const onDrop = (): void => {
    if (afterDrop.refuse > 0) Object.assign(refusal, configuredRefusal, { remaining: afterDrop.refuse });
    if (afterDrop.stall > 0) stalls = afterDrop.stall;
  };

  return {
    handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
      if (closing) {
        refuseUpgrade(socket, 503, 'The emulator is shutting down.');
        return;
      }
      if (stalls > 0) {
        // Read and discard, answer nothing: the client's handshake hangs until it gives up.
        stalls -= 1;
        handshaking.add(socket);
        socket.on('error', () => undefined);
        socket.once('close', () => handshaking.delete(socket));
        socket.once('end', () => socket.destroy());
        socket.resume();
        return;
      }
      if (refusal.remaining > 0) {
        refusal.remaining -= 1;
        refuseUpgrade(socket, refusal.status, `Handshake refused by a fault switch (HTTP ${refusal.status}).`, refusal.retryAfterS);
        return;
      }
      const header = req.headers['x-api-key'];
      const headerKey = Array.isArray(header) ? header.join(', ') : header;
      if (headerKey !== undefined && !context.apiKeys.has(headerKey)) {
        refuseUpgrade(socket, 401, 'Invalid API key in the x-api-key header.');
        return;
      }
      const query = new URL(req.url ?? '/', 'http://emulator').searchParams;
      handshaking.add(socket);
      socket.once('close', () => handshaking.delete(socket));
      wss.handleUpgrade(req, socket, head, (ws) => {
        handshaking.delete(socket);
        if (closing) {
          ws.terminate();
          return;
        }
        const session = new RealtimeSession(
          ws,
          { headerKey, model: query.get('model') ?? undefined, mode: query.get('mode') ?? undefined },
          settings,
          socket,
          onDrop,
        );
        sessions.add(session);
        void session.closed.then(() => sessions.delete(session));
      });
    },
    sessions(): RealtimeSessionStats[] {
      return [...sessions].map((session) => session.stats());
    },
    faults: {
      drop(dropOptions?: DropOptions): void {
        for (const session of sessions) session.drop(dropOptions);
      },
      halfOpen(): void {
        for (const session of sessions) session.goHalfOpen();
      },
      refuseNextHandshakes(count: number, status = 503, retryAfterS?: number): void {
        refusal.remaining = count;
        refusal.status = status;
        refusal.retryAfterS = retryAfterS;
      },
      stallNextHandshakes(count: number): void {
        stalls = count;
      },
    },
    async close(): Promise<void> {
      closing = true;
      for (const socket of handshaking) socket.destroy();
      const all = [...sessions];
      for (const session of all) session.terminate();
      await Promise.all(all.map((session) => session.closed));
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}
