/**
 * Shared set-up of the HTTP tests: an emulator on 127.0.0.1:0, clients pointed at it (or, for CLI
 * tests, its environment and a scratch directory), the emulator's control endpoint, and a check
 * that no socket is left open.
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createHttpsServer } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { startEmulator, type EmulatorOptions, type RunningEmulator } from '../lib/emulator/server.js';
import { LocalizationClient, type LocalizationClientOptions } from '../lib/http/client.js';
import type { FlacDownloadRetry, FlacDownloadStream } from '../lib/http/flac-download-stream.js';
import type { StreamRequest } from '../lib/http/streams.js';

export const KEY = 'test-key-0123456789';
export const OTHER_KEY = 'other-key-9876543210';

/** A live stream dubbing request (`POST /stream`) the emulator accepts: languages as tags and an id. */
/** A voice description long enough for `POST /text-to-voice` (at least 100 characters). */
export const VOICE_DESCRIPTION = 'A warm, friendly alto in her forties with a light Irish accent, speaking slowly and clearly, calm and kind.';

export const STREAM_REQUEST: StreamRequest = {
  name: 'Morning show',
  voices: [147_320],
  dictionaries: [],
  config: { pipeline: { demixing: 'best_model', translating: 'fast_model' }, mixing: { backgroundAudioGain: -6, fadeTime: 0.5 } },
  sourceStream: { language: 'en-us', url: 'srt://ingest.example.com:9000', latency: 200 },
  targetStreams: [
    { languages: ['es-es'], url: 'rtmp://out.example.com/live/es', type: 1 },
    { languages: ['fr-fr', 31], url: 'srt://out.example.com:9001', type: 2, embedSubtitles: true },
  ],
};

/**
 * An emulator for the HTTP tests. Tasks do not depend on time: each answers PENDING to its first
 * status read and reaches its outcome at the second (`taskPolls: 1`), on any machine.
 */
export async function emulator(options: EmulatorOptions = {}): Promise<RunningEmulator> {
  return startEmulator({ port: 0, apiKeys: [KEY, OTHER_KEY], taskMs: 0, taskPolls: 1, ttsStreamDelayMs: 0, ...options });
}

/** The emulator and client a test file shares: started before its tests, closed after them. */
export interface SharedEmulator {
  emu: RunningEmulator;
  client: LocalizationClient;
}

/** Starts an emulator (`emulator(options)`) and a client on it for the file's tests, and closes both after them. */
export function sharedEmulator(options: EmulatorOptions = {}): SharedEmulator {
  const shared = {} as SharedEmulator;
  beforeAll(async () => {
    shared.emu = await emulator(options);
    shared.client = clientFor(shared.emu);
  });
  afterAll(async () => {
    await shared.client?.close();
    await shared.emu?.close();
  });
  return shared;
}

/** What a file of CLI tests against a live emulator shares (`sharedCliEmulator`). */
export interface SharedCliEmulator {
  emu: RunningEmulator;
  /** A scratch directory, removed after the file's tests. */
  dir: string;
  /** The environment that points a command at the emulator with `key`. */
  env: Record<string, string>;
  /** The emulator's control endpoint (`control`). */
  control(method: 'GET' | 'POST' | 'DELETE', name: string, body?: unknown): Promise<any>;
}

/**
 * An emulator whose only key is `key` and a scratch directory for a file's CLI tests: started
 * before them, closed and removed after them; fault switches cleared after each test.
 */
export function sharedCliEmulator(key: string): SharedCliEmulator {
  const shared = {
    control: (method: 'GET' | 'POST' | 'DELETE', name: string, body?: unknown) => control(shared.emu, method, name, body),
  } as SharedCliEmulator;
  beforeAll(async () => {
    shared.emu = await emulator({ apiKeys: [key] });
    shared.dir = await mkdtemp(join(tmpdir(), 'rt-translate-cli-'));
    shared.env = { RT_TRANSLATE_BASE_URL: shared.emu.baseUrl, RT_TRANSLATE_API_KEY: key };
  });
  afterEach(async () => {
    await shared.control('DELETE', 'faults');
  });
  afterAll(async () => {
    await shared.emu?.close();
    if (shared.dir) await rm(shared.dir, { recursive: true, force: true });
  });
  return shared;
}

/** A client with fast retries (1 ms back-off) unless told otherwise. */
export function clientFor(emu: RunningEmulator, options: LocalizationClientOptions = {}): LocalizationClient {
  return new LocalizationClient({
    baseUrl: emu.baseUrl,
    apiKey: KEY,
    retry: { retries: 2, minDelayMs: 1, maxDelayMs: 50 },
    polling: { speech: { initialIntervalMs: 10, maxIntervalMs: 20 }, longMedia: { initialIntervalMs: 10, maxIntervalMs: 20 } },
    ...options,
  });
}

/** Calls the emulator's control endpoint (no key) and returns the parsed answer. */
export async function control(emu: RunningEmulator, method: 'GET' | 'POST' | 'DELETE', name: string, body?: unknown): Promise<any> {
  const response = await request(`${emu.baseUrl}/_emulator/${name}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.body.text();
  if (response.statusCode !== 200) throw new Error(`control ${name}: ${response.statusCode} ${text}`);
  return JSON.parse(text);
}

/** A request as the emulator logged it; `uploads` for a multipart body. */
export interface LoggedRequest {
  method: string;
  path: string;
  status: number;
  uploads?: Array<{ name: string; filename: string; size: number; sha256: string }>;
}

/** The requests the emulator logged for `method` and `path`. */
export async function logged(emu: RunningEmulator, method: string, pathPrefix: string): Promise<LoggedRequest[]> {
  const { requests } = (await control(emu, 'GET', 'requests')) as { requests: LoggedRequest[] };
  return requests.filter((r) => r.method === method && r.path.startsWith(pathPrefix));
}

/** A raw request to the emulator, bypassing client-side validation. */
export async function raw(
  emu: RunningEmulator,
  method: 'GET' | 'POST' | 'DELETE',
  path: string,
  options: { key?: string | null; json?: unknown; body?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string; json: any; bytes: Buffer }> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key !== null) headers['x-api-key'] = options.key ?? KEY;
  let body = options.body;
  if (options.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(options.json);
  }
  const response = await request(`${emu.baseUrl}${path}`, { method, headers, body });
  const bytes = Buffer.from(await response.body.arrayBuffer());
  const text = bytes.toString('utf8');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.statusCode, headers: response.headers, text, json, bytes };
}

/** Reads a stream to one buffer. */
export async function collect(stream: AsyncIterable<Buffer | Uint8Array>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks);
}

/** The `'retry'` events of a download, collected as they come. */
export function retries(stream: FlacDownloadStream): FlacDownloadRetry[] {
  const seen: FlacDownloadRetry[] = [];
  stream.on('retry', (info) => seen.push(info));
  return seen;
}

/** Resolves after `turns` turns of the event loop (no timers involved, so fake timers do not matter). */
export async function ioTurns(turns = 1): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** Waits (by event-loop turns, at most `maxTurns`) until `condition` holds. */
export async function until(condition: () => boolean | Promise<boolean>, maxTurns = 20_000): Promise<void> {
  for (let i = 0; i < maxTurns; i++) {
    if (await condition()) return;
    await ioTurns();
  }
  throw new Error('condition not reached');
}

/** Open TCP sockets and servers of this process. */
export function openNetHandles(): string[] {
  return process.getActiveResourcesInfo().filter((name) => name === 'TCPSocketWrap' || name === 'TCPServerWrap');
}

/** A loopback server of a test: its base URL, the TCP connections it accepted so far, `close()`. */
export interface TestServer {
  base: string;
  port: number;
  connections(): number;
  close(): Promise<void>;
}

function tracked(server: import('node:net').Server, scheme: string): Promise<TestServer> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  server.on('connection', (socket: Socket) => {
    accepted++;
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as AddressInfo).port;
      resolve({
        base: `${scheme}://127.0.0.1:${port}`,
        port,
        connections: () => accepted,
        close: async () => {
          for (const socket of sockets) socket.destroy();
          await new Promise<void>((done) => server.close(() => done()));
        },
      });
    });
  });
}

/**
 * An HTTPS server on 127.0.0.1:0 with the self-signed certificate of `test/fixtures/tls` (see
 * its README): a client that does not trust it fails the handshake with
 * `DEPTH_ZERO_SELF_SIGNED_CERT`. Answers 200 `{}` to anything that gets through.
 */
export function selfSignedHttpsServer(handler?: (req: IncomingMessage, res: ServerResponse) => void): Promise<TestServer> {
  const server = createHttpsServer(
    {
      key: readFileSync(new URL('./fixtures/tls/tls-self-signed.key.pem', import.meta.url)),
      cert: readFileSync(new URL('./fixtures/tls/tls-self-signed.cert.pem', import.meta.url)),
    },
    handler ??
      ((_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{}');
      }),
  );
  // A handshake the client gives up on is reported here; it is the expected outcome.
  server.on('tlsClientError', () => undefined);
  return tracked(server, 'https');
}

/**
 * A TCP server on 127.0.0.1:0 that accepts connections and never sends a byte: an `https://`
 * request to it never gets past the TLS handshake, so its connect time limit passes.
 */
export function silentServer(): Promise<TestServer> {
  return tracked(
    createTcpServer((socket) => socket.on('error', () => undefined)),
    'https',
  );
}
