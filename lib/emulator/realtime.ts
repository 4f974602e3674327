/**
 * The emulator's realtime side: WebSocket upgrades on `/v1/realtime`, one `RealtimeSession`
 * per connection. Authentication by the `x-api-key` handshake header happens here (a bad key is
 * answered with HTTP 401 before any WebSocket exists); everything after the handshake is in
 * `realtime-session.ts`, the voice-activity detector in `vad.ts`.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import { ValidationError } from '../errors.js';
import { MAX_CLIENT_EVENT_BYTES } from '../realtime/codec.js';
import type { EmulatorContext, RealtimePart } from './server.js';
import { RealtimeSession, type RealtimeSessionSettings, type RealtimeSessionStats } from './realtime-session.js';
import { UtteranceSegmenter } from './vad.js';
import type { VoiceOwnership } from './voices.js';

export { OUTPUT_PIECE_BYTES, SESSION_END_CLOSE_CODE, STOCK_VOICE_IDS } from './realtime-session.js';
export type { RealtimeSessionState, RealtimeSessionStats } from './realtime-session.js';
export {
  DEFAULT_MAX_UTTERANCE_MS,
  DEFAULT_PADDING_MS,
  DEFAULT_VAD_SILENCE_MS,
  DEFAULT_VAD_THRESHOLD_DBFS,
  MAX_PADDING_MS,
} from './vad.js';

/** How long a new connection may take to send its first `session.update`, in milliseconds. */
export const DEFAULT_SESSION_UPDATE_TIMEOUT_MS = 10_000;
/** Send-buffer bound per session above which the emulator stops reading that client's input. */
export const DEFAULT_SEND_BUFFER_LIMIT_BYTES = 1024 * 1024;
/**
 * Largest WebSocket message `ws` accepts before closing the connection (1009). Well above the
 * 1 MiB event limit, so an over-limit event is answered with an `error` event instead.
 */
export const REALTIME_MAX_PAYLOAD_BYTES = 4 * MAX_CLIENT_EVENT_BYTES;

export interface RealtimeEmulatorOptions {
  /** Time allowed for the first `session.update`, in ms; then `error` and close. Default 10000. */
  sessionUpdateTimeoutMs?: number;
  /**
   * Seconds of input audio each session may use (bytes / 48000). Past it, the utterance in
   * progress is dropped, responses already scheduled are sent, then `error` (code 402) and the
   * session closes (1008). Default: unlimited.
   */
  creditSeconds?: number;
  /** RMS level above which a 20 ms frame counts as voice, in dBFS. Default -40. */
  vadThresholdDbfs?: number;
  /** Unvoiced milliseconds that end an utterance. Default 600. */
  vadSilenceMs?: number;
  /** Milliseconds after which an utterance is ended even if speech goes on. Default 15000. */
  maxUtteranceMs?: number;
  /** Input audio returned around each utterance's voiced region, 0 to 300 ms. Default 300. */
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
}

function nonNegative(field: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new ValidationError(field, 'a finite number, 0 or more', String(value));
  }
  return value;
}

function positive(field: string, value: number | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new ValidationError(field, 'a finite number above 0', String(value));
  }
  return value;
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
  const creditSeconds = nonNegative('creditSeconds', options.creditSeconds, Number.POSITIVE_INFINITY);
  const segmenter = {
    thresholdDbfs: options.vadThresholdDbfs,
    silenceMs: options.vadSilenceMs,
    maxUtteranceMs: options.maxUtteranceMs,
    paddingMs: options.paddingMs,
  };
  try {
    new UtteranceSegmenter(segmenter);
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    const names: Record<string, string> = {
      thresholdDbfs: 'vadThresholdDbfs',
      silenceMs: 'vadSilenceMs',
      maxUtteranceMs: 'maxUtteranceMs',
      paddingMs: 'paddingMs',
    };
    throw new ValidationError(names[error.field] ?? error.field, error.accepted);
  }
  return {
    apiKeys,
    voices,
    sessionUpdateTimeoutMs: nonNegative('sessionUpdateTimeoutMs', options.sessionUpdateTimeoutMs, DEFAULT_SESSION_UPDATE_TIMEOUT_MS),
    creditSeconds: options.creditSeconds === undefined ? undefined : creditSeconds,
    creditBytes: options.creditSeconds === undefined ? undefined : Math.floor(creditSeconds * 24_000) * 2,
    segmenter,
    latencyMs: nonNegative('latencyMs', options.latencyMs, 0),
    audioFrames,
    coldStartMs: nonNegative('coldStartMs', options.coldStartMs, 0),
    inputBytesPerSecond: positive('inputBytesPerSecond', options.inputBytesPerSecond),
    sendBufferLimitBytes: nonNegative('sendBufferLimitBytes', options.sendBufferLimitBytes, DEFAULT_SEND_BUFFER_LIMIT_BYTES),
  };
}

function rejectHandshake(socket: Duplex, status: 401 | 503, error: string): void {
  const body = JSON.stringify({ error, status });
  const reason = status === 401 ? 'Unauthorized' : 'Service Unavailable';
  socket.once('finish', () => socket.destroy());
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/** The realtime part, with a view of its sessions for tests and diagnostics. */
export interface RealtimeEmulator extends RealtimePart {
  /** A snapshot of every open session, oldest first. */
  sessions(): RealtimeSessionStats[];
}

/**
 * The realtime part of the emulator. `handleUpgrade` takes upgrades already routed to
 * `/v1/realtime`; `close()` terminates every session, clears every timer and resolves once
 * all sockets are closed. Throws `ValidationError` naming the option for a bad option.
 */
export function createRealtimeEmulator(options: RealtimeEmulatorOptions, context: EmulatorContext): RealtimeEmulator {
  const settings = resolveRealtimeSettings(options, context.apiKeys, context.voices);
  const wss = new WebSocketServer({ noServer: true, maxPayload: REALTIME_MAX_PAYLOAD_BYTES, clientTracking: false });
  const sessions = new Set<RealtimeSession>();
  const handshaking = new Set<Duplex>();
  let closing = false;

  return {
    handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
      if (closing) {
        rejectHandshake(socket, 503, 'The emulator is shutting down.');
        return;
      }
      const header = req.headers['x-api-key'];
      const headerKey = Array.isArray(header) ? header.join(', ') : header;
      if (headerKey !== undefined && !context.apiKeys.has(headerKey)) {
        rejectHandshake(socket, 401, 'Invalid API key in the x-api-key header.');
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
        );
        sessions.add(session);
        void session.closed.then(() => sessions.delete(session));
      });
    },
    sessions(): RealtimeSessionStats[] {
      return [...sessions].map((session) => session.stats());
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
