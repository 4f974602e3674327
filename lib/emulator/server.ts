/**
 * The emulator's one listening socket: HTTP requests go to the HTTP side, WebSocket upgrades
 * on `/v1/realtime` to the realtime side and on `/streaming-transcription/listen` to live
 * transcription. They follow `spec/service-interface.md` and `spec/facts.md`.
 */
import { createServer } from 'node:http';
import type { Duplex } from 'node:stream';
import type { AddressInfo } from 'node:net';
import { isAbsolute } from 'node:path';
import { REALTIME_PATH } from '../config.js';
import { ValidationError } from '../errors.js';
import { StateDir } from './state-store.js';
import type { EmulatorContext } from './context.js';
import { createRealtimeEmulator, type RealtimeEmulatorOptions, type RealtimeFaultControl, type RealtimePart, type RealtimeSessionStats } from './realtime.js';
import { createHttpEmulator, type HttpEmulatorOptions, type HttpPart } from './http/index.js';
import { VoiceRegistry } from './voices.js';
import { createLiveTranscriptionEmulator, type LiveTranscriptionEmulatorOptions } from './live-transcription.js';
import { LIVE_TRANSCRIPTION_PATH } from '../realtime/transcription-codec.js';

/** The key the emulator accepts when none are configured. Not a secret: it only opens the emulator. */
export const EMULATOR_DEFAULT_API_KEY = 'emulator-key';

export interface EmulatorOptions extends RealtimeEmulatorOptions, HttpEmulatorOptions, LiveTranscriptionEmulatorOptions {
  /**
   * Custom voices that exist from the start, per API key: `{ [apiKey]: voiceIds[] }`. Each key
   * may use its own as `voice: {type: 'cloned', voice_id}` on the realtime side and delete them;
   * voices created with `POST /create-custom-voice` join them. Default: none.
   */
  clonedVoices?: Readonly<Record<string, readonly number[]>>;
  /** Interface to listen on. Default `127.0.0.1`. */
  host?: string;
  /** Port; 0 (the default) picks a free one. */
  port?: number;
  /** Keys the emulator accepts. Default `[EMULATOR_DEFAULT_API_KEY]`. */
  apiKeys?: string[];
  /**
   * Remember custom voices, tasks, runs and result files in this directory (created if need be),
   * so that a later emulator on it (the next command of the CLI) knows them; several emulators
   * may use it at once (see `state-store.ts`). Owners are kept as hashes of their keys, never
   * the keys; result files past `stateMaxBytes` are removed, the oldest first. Default: remember
   * nothing.
   */
  stateDir?: string;
}

export interface RunningEmulator {
  /** `http://HOST:PORT`: the HTTP interface's base URL. */
  readonly baseUrl: string;
  /** `ws://HOST:PORT`: the realtime host; the endpoint is `${realtimeUrl}/v1/realtime`. */
  readonly realtimeUrl: string;
  readonly host: string;
  readonly port: number;
  /** The directory it remembers in (`stateDir`), or undefined. */
  readonly stateDir: string | undefined;
  /**
   * Where the bytes of a result file are on disk, given a presigned URL this emulator answered:
   * for an emulator with a state directory, while the file is kept. Undefined otherwise.
   */
  localFilePath(url: string): string | undefined;
  /** Figures of each open realtime session (state, audio received, send buffer, flow control). */
  realtimeSessions(): RealtimeSessionStats[];
  /** Realtime faults triggered now (drop, half-open, refused handshakes). */
  readonly realtimeFaults: RealtimeFaultControl;
  /** Ends every session and connection and stops listening. */
  close(): Promise<void>;
}

/** `stateDir` as an absolute path, or a `ValidationError` naming the option. */
function checkStateDir(dir: unknown): string {
  if (typeof dir !== 'string' || !isAbsolute(dir)) throw new ValidationError('stateDir', 'an absolute directory path', JSON.stringify(dir));
  return dir;
}

function hostForUrl(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

export async function startEmulator(options: EmulatorOptions = {}): Promise<RunningEmulator> {
  const host = options.host ?? '127.0.0.1';
  const apiKeys = new Set(options.apiKeys && options.apiKeys.length > 0 ? options.apiKeys : [EMULATOR_DEFAULT_API_KEY]);
  let baseUrl = '';
  const state = options.stateDir === undefined ? undefined : new StateDir(checkStateDir(options.stateDir));
  const context: EmulatorContext = {
    apiKeys,
    voices: new VoiceRegistry(options.clonedVoices, state?.records('voices')),
    state,
    baseUrl: () => baseUrl,
  };
  const realtime: RealtimePart = createRealtimeEmulator(options, context);
  const http: HttpPart = createHttpEmulator(options, context, realtime.faults);
  const live = createLiveTranscriptionEmulator(options, context);

  const server = createServer((req, res) => http.handle(req, res));
  server.on('upgrade', (req, socket, head) => {
    const path = new URL(req.url ?? '/', 'http://emulator').pathname.replace(/\/+$/, '');
    if (path === REALTIME_PATH) {
      realtime.handleUpgrade(req, socket, head);
    } else if (path === LIVE_TRANSCRIPTION_PATH) {
      live.handleUpgrade(req, socket, head);
    } else {
      socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    }
  });
  const sockets = new Set<Duplex>();
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  baseUrl = `http://${hostForUrl(host)}:${port}`;
  let closing: Promise<void> | undefined;

  return {
    baseUrl,
    realtimeUrl: `ws://${hostForUrl(host)}:${port}`,
    host,
    port,
    stateDir: state?.dir,
    localFilePath(url) {
      let path: string;
      try {
        path = new URL(url).pathname;
      } catch {
        return undefined;
      }
      return http.localPath(path);
    },
    realtimeSessions: () => realtime.sessions(),
    realtimeFaults: realtime.faults,
    close() {
      closing ??= (async () => {
        const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
        await Promise.all([realtime.close(), http.close(), live.close()]);
        for (const socket of sockets) socket.destroy();
        server.closeAllConnections();
        await stopped;
      })();
      return closing;
    },
  };
}
