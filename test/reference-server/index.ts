/**
 * A reference server for the realtime speech-to-speech WebSocket, for testing the library's
 * client against a server that was not written from the client's assumptions.
 *
 * It is built from the service interface and the observed facts alone (shared spec:
 * service-interface.md, facts.md) and imports nothing from `lib/` or `bin/`, not even types:
 * only Node built-ins and `ws`. Its utterance detection (10 ms frames, -36 dBFS, 450 ms
 * hangover, 150 ms minimum, 8 s cut, end of input after 300 ms without appends) is its own and
 * deliberately unlike the client's and the emulator's, and its answering policies (one answer per
 * utterance, merged, split, late or missing last answers) cover what a real service may do.
 * Answers carry synthetic audio and a numbered text, so a test can tell which one it received.
 *
 * ```ts
 * const server = await startReferenceServer({ answer: 'merge' });
 * // client: { realtimeUrl: server.realtimeUrl, apiKey: server.apiKey, ... }
 * await server.waitForResponses(2);
 * expect(clientOutput).toEqual(server.sentAudio());
 * await server.close();
 * ```
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import { resolveOptions, type ReferenceServerOptions } from './options.js';
import { Session, type ReferenceResponse, type SessionHost } from './session.js';

export type { ReferenceServerOptions } from './options.js';
export type { ReferenceResponse } from './session.js';

export interface ReferenceServer {
  /** `ws://127.0.0.1:PORT`: the client's realtimeUrl (the client appends /v1/realtime). */
  readonly realtimeUrl: string;
  readonly apiKey: string;
  /** Every response fully sent, in order, all sessions. */
  readonly responses: readonly ReferenceResponse[];
  /** Sessions that reached session.created. */
  readonly sessions: number;
  /**
   * Answers held and never sent: those withheld as the last under `last: 'never'` (from the
   * idle that made them last), and those still held when their session ended.
   */
  readonly heldAnswers: number;
  /** All audio sent in responses, in order, concatenated (what a client that lost nothing must have output). */
  sentAudio(): Buffer;
  /** Resolves once `n` responses have been fully sent. Rejects if the server closes first. */
  waitForResponses(n: number): Promise<void>;
  /** Resolves once `heldAnswers` reaches `n`. Rejects if the server closes first. */
  waitForHeldAnswers(n: number): Promise<void>;
  /** Resolves once every connection has closed. */
  allClosed(): Promise<void>;
  /** Cuts every open connection now, without a close frame (the client sees 1006). */
  dropAll(): void;
  /** Stops every timer, terminates open connections; resolves when the port is closed. */
  close(): Promise<void>;
}

interface Waiter {
  done(): boolean;
  resolve(): void;
  reject(error: Error): void;
}

export async function startReferenceServer(options: ReferenceServerOptions = {}): Promise<ReferenceServer> {
  const resolved = resolveOptions(options);
  const responses: ReferenceResponse[] = [];
  const sessions: Session[] = [];
  const sockets = new Set<Duplex>();
  const waiters = new Set<Waiter>();
  let created = 0;
  let closed: Promise<void> | undefined;
  let finished = false;

  const notify = (): void => {
    for (const waiter of waiters) {
      if (!waiter.done()) continue;
      waiters.delete(waiter);
      waiter.resolve();
    }
  };
  const until = (done: () => boolean): Promise<void> =>
    new Promise((resolve, reject) => {
      if (done()) return resolve();
      if (finished) return reject(new Error('reference server closed'));
      waiters.add({ done, resolve, reject });
    });
  const heldAnswers = (): number => sessions.reduce((sum, session) => sum + session.heldAnswers, 0);

  const host: SessionHost = {
    options: resolved,
    register: () => ++created,
    record: (response) => {
      responses.push(response);
      notify();
    },
    changed: notify,
  };

  const http = createServer((_request, response) => response.writeHead(426).end());
  // Larger events get an error event; pings are answered by each session while it lives.
  const wss = new WebSocketServer({ noServer: true, maxPayload: 16 * 1024 * 1024, autoPong: false });
  http.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => {
      sockets.delete(socket);
      notify();
    });
  });
  http.on('upgrade', (request, socket, head) => {
    socket.on('error', () => {});
    const url = new URL(request.url ?? '/', 'http://reference');
    if (url.pathname !== '/v1/realtime') return refuse(socket, 404, 'Not Found', 'no such endpoint');
    const key = request.headers['x-api-key'];
    if (key !== undefined && key !== resolved.apiKey) return refuse(socket, 401, 'Unauthorized', 'invalid API key');
    wss.handleUpgrade(request, socket, head, (ws) => {
      const echo: { model?: string; mode?: string } = {};
      for (const name of ['model', 'mode'] as const) {
        const value = url.searchParams.get(name);
        if (value !== null) echo[name] = value;
      }
      sessions.push(new Session(ws, socket, host, key !== undefined, echo));
    });
  });

  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = http.address() as AddressInfo;

  const cutAll = (): void => {
    for (const session of sessions) session.end();
    for (const ws of wss.clients) ws.terminate();
  };

  return {
    realtimeUrl: `ws://127.0.0.1:${port}`,
    apiKey: resolved.apiKey,
    responses,
    get sessions() {
      return created;
    },
    get heldAnswers() {
      return heldAnswers();
    },
    sentAudio: () => Buffer.concat(responses.map((response) => response.audio)),
    waitForResponses: (n) => until(() => responses.length >= n),
    waitForHeldAnswers: (n) => until(() => heldAnswers() >= n),
    allClosed: () => until(() => sockets.size === 0),
    dropAll: cutAll,
    close() {
      closed ??= (async () => {
        cutAll();
        for (const socket of sockets) socket.destroy();
        wss.close();
        await new Promise<void>((resolve) => http.close(() => resolve()));
        finished = true;
        notify();
        for (const waiter of waiters) waiter.reject(new Error('reference server closed'));
        waiters.clear();
      })();
      return closed;
    },
  };
}

/** Answers an upgrade request with an HTTP error (the interface's error body) and closes. */
function refuse(socket: Duplex, status: number, reason: string, message: string): void {
  const body = JSON.stringify({ error: message, status });
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\nContent-Type: application/json\r\n` + `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}
