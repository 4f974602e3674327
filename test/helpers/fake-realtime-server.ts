/**
 * A scripted realtime peer for tests: a tiny WebSocket server on 127.0.0.1 (port 0) that does
 * nothing by itself, so a test can play any server behaviour step by step: a handshake that
 * never completes, a server that answers `session.update` and then stops reading (a stalled
 * server), one that sends audio faster than the client reads, or one that closes at a chosen
 * moment. For the service's real behaviour, use the emulator (`lib/emulator`) instead.
 *
 * ```ts
 * const server = await startFakeRealtimeServer();
 * const stream = new RealtimeTranslateStream({ from: 'en-us', to: 'es-es', apiKey: 'k', realtimeUrl: server.realtimeUrl });
 * const peer = await server.nextPeer();
 * await peer.waitForEvent('session.update');
 * peer.sendSessionCreated();
 * peer.pauseReading();            // the stalled server
 * ...
 * await server.close();
 * ```
 *
 * The peer records what the client sends: every text event except `input_audio_buffer.append`
 * is kept parsed in `events`; append events are only counted and hashed (`audioBytes`,
 * `audioDigest()`), so megabytes of input cost no memory here.
 *
 * A paused peer (`pauseReading()`) reads nothing from its socket, so it cannot see the client
 * close the connection either: call `resumeReading()` before awaiting `closed` or `allClosed()`.
 */
import { once, type EventEmitter } from 'node:events';
import { createHash, randomUUID, type Hash } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';

export interface FakeRealtimeServerOptions {
  /**
   * Accept TCP connections and read the HTTP upgrade request, but never answer it: the client
   * stays in its handshake until it gives up or the server closes. Default false.
   */
  holdUpgrade?: boolean;
  /**
   * Answer the client's pings with pongs (as `ws` does by itself). False: pings are only
   * recorded (`FakePeer.pings`), for a test to answer with `pong()` when it chooses. Default true.
   */
  autoPong?: boolean;
}

export interface FakeRealtimeServer {
  /** `ws://127.0.0.1:PORT`: pass as the stream's `realtimeUrl`. */
  readonly realtimeUrl: string;
  /** TCP connections accepted so far. */
  readonly connections: number;
  /** TCP connections whose server end is still open. */
  readonly openConnections: number;
  /** HTTP upgrade requests received so far (held or answered). */
  readonly upgradeRequests: number;
  /** The upgrade requests received so far, in order (headers and URL, for assertions). */
  readonly requests: readonly IncomingMessage[];
  /** Resolves with the next WebSocket peer, in order of connection (one not yet handed out). */
  nextPeer(): Promise<FakePeer>;
  /**
   * Takes the next peer through the session start: waits for its `session.update`, answers
   * `session.created`, and resolves once `stream` has emitted `'session'`.
   */
  acceptSession(stream: EventEmitter): Promise<FakePeer>;
  /** Resolves with the next upgrade request (one not yet handed out), held or answered. */
  nextUpgradeRequest(): Promise<IncomingMessage>;
  /** Resolves once every accepted TCP connection has closed on the server side. */
  allClosed(): Promise<void>;
  /** Destroys every connection and stops listening; resolves once the port is closed. */
  close(): Promise<void>;
}

/** A close seen by the peer. */
export interface PeerClose {
  code: number;
  reason: string;
}

/** An async FIFO: `take()` resolves with items in the order `put()` received them. */
class Inbox<T> {
  readonly #items: T[] = [];
  readonly #waiters: Array<(item: T) => void> = [];

  put(item: T): void {
    const waiter = this.#waiters.shift();
    if (waiter) waiter(item);
    else this.#items.push(item);
  }

  take(): Promise<T> {
    if (this.#items.length > 0) return Promise.resolve(this.#items.shift() as T);
    return new Promise((resolve) => this.#waiters.push(resolve));
  }
}

function rawToBuffer(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

/** The server side of one WebSocket connection, driven by the test. */
export class FakePeer {
  /** The server-side WebSocket, for anything the methods below do not cover. */
  readonly ws: WebSocket;
  /** The client's text events other than `input_audio_buffer.append`, parsed, in order. */
  readonly events: Array<Record<string, unknown>> = [];
  /** Resolves once the connection has closed (from either side). */
  readonly closed: Promise<PeerClose>;
  /** Decoded audio bytes received in `input_audio_buffer.append` events. */
  audioBytes = 0;
  /** `input_audio_buffer.append` events received. */
  appendEvents = 0;
  /** Binary frames received from the client. */
  binaryFrames = 0;
  /** The binary frames received, in order (keep test audio small). */
  readonly binary: Buffer[] = [];
  /** Payloads of the pings received, in order, with the audio bytes received before each. */
  readonly pings: Array<{ payload: Buffer; afterAudioBytes: number }> = [];

  readonly #hash: Hash = createHash('sha256');
  readonly #listeners = new Set<() => void>();
  #closedWith: PeerClose | undefined;

  constructor(ws: WebSocket) {
    this.ws = ws;
    ws.on('message', (data, isBinary) => this.#onMessage(rawToBuffer(data), isBinary));
    ws.on('ping', (payload) => {
      // A copy: the payload may be a view of a large read buffer, which keeping it would retain.
      this.pings.push({ payload: Buffer.from(payload), afterAudioBytes: this.audioBytes });
      this.#notify();
    });
    ws.on('error', () => {
      // A client that vanishes mid-frame: the close below reports it.
    });
    this.closed = new Promise((resolve) => {
      ws.once('close', (code, reason) => {
        this.#closedWith = { code, reason: reason.toString('utf8') };
        resolve(this.#closedWith);
        this.#notify();
      });
    });
  }

  /** Whether the connection has closed. */
  get isClosed(): boolean {
    return this.#closedWith !== undefined;
  }

  /** SHA-256 (hex) of all append audio received so far, in order. */
  audioDigest(): string {
    return this.#hash.copy().digest('hex');
  }

  /** Sends an event object as JSON text, or a prepared string as is. */
  send(event: Record<string, unknown> | string): void {
    this.ws.send(typeof event === 'string' ? event : JSON.stringify(event));
  }

  /**
   * Sends `session.created` (with a fresh UUID `id`, or the one given) then `session.updated`,
   * echoing the configuration of the client's first `session.update` (or the one given).
   * Returns the session id.
   */
  sendSessionCreated(session?: Record<string, unknown>): string {
    const update = this.events.find((e) => e.type === 'session.update');
    const config = session ?? (update?.session as Record<string, unknown> | undefined) ?? {};
    const id = typeof config.id === 'string' ? config.id : randomUUID();
    const info = { voice: { type: 'default' }, output_modalities: ['text', 'audio'], ...config, id };
    this.send({ type: 'session.created', session: info });
    this.send({ type: 'session.updated', session: info });
    return id;
  }

  /**
   * Sends `pcm` as output audio in pieces of `pieceBytes` (default 19 200, 400 ms): JSON
   * `response.audio.delta` events, or binary frames with `framing: 'binary'`. Sends everything
   * at once, whatever the client reads: the bytes wait in this socket's send buffer.
   */
  sendAudio(pcm: Buffer, options: { pieceBytes?: number; framing?: 'json' | 'binary' } = {}): void {
    const piece = options.pieceBytes ?? 19_200;
    for (let at = 0; at < pcm.length; at += piece) {
      const part = pcm.subarray(at, Math.min(pcm.length, at + piece));
      if (options.framing === 'binary') this.ws.send(part, { binary: true });
      else this.send({ type: 'response.audio.delta', delta: part.toString('base64') });
    }
  }

  /**
   * Sends one whole response the way the service does: the transcript, the translated text as
   * one delta and its `done`, the audio in pieces, then `response.audio.done`.
   */
  sendResponse(pcm: Buffer, text = 'translation', options: { pieceBytes?: number; framing?: 'json' | 'binary' } = {}): void {
    this.send({ type: 'conversation.item.input_audio_transcription.completed', transcript: `transcript of ${text}` });
    this.send({ type: 'response.text.delta', delta: text });
    this.send({ type: 'response.text.done', text });
    this.sendAudio(pcm, options);
    this.send({ type: 'response.audio.done' });
  }

  /** Answers ping `index` (0-based, of `pings`) with its payload. */
  pong(index: number): void {
    this.ws.pong(this.pings[index]!.payload);
  }

  /** Sends an `error` event (`{ type: 'error', error: { message, code } }`). */
  sendError(message: string, code?: number): void {
    this.send({ type: 'error', error: code === undefined ? { message } : { message, code } });
  }

  /** Bytes this peer has queued that its socket has not taken yet. */
  get bufferedAmount(): number {
    return this.ws.bufferedAmount;
  }

  /** Stops reading from the socket: the client's data piles up in the kernel, then in its own buffer. */
  pauseReading(): void {
    this.ws.pause();
  }

  /** Reads again after `pauseReading()`. */
  resumeReading(): void {
    this.ws.resume();
  }

  /** Starts the closing handshake. */
  close(code = 1000, reason = ''): void {
    this.ws.close(code, reason);
  }

  /** Destroys the socket at once, without a closing handshake. */
  terminate(): void {
    this.ws.terminate();
  }

  /** Resolves with the first event of `type` (already received or still to come); rejects if the connection closes first. */
  waitForEvent(type: string): Promise<Record<string, unknown>> {
    return this.#until(() => this.events.find((e) => e.type === type), `a ${type} event`);
  }

  /** Resolves with the index of the first ping received after at least `bytes` of append audio. */
  waitForPingAfter(bytes: number): Promise<number> {
    return this.#until(() => {
      const at = this.pings.findIndex((ping) => ping.afterAudioBytes >= bytes);
      return at < 0 ? undefined : at;
    }, `a ping after ${bytes} bytes of audio`);
  }

  /** Resolves once at least `bytes` of append audio have arrived; rejects if the connection closes first. */
  waitForAudioBytes(bytes: number): Promise<number> {
    return this.#until(() => (this.audioBytes >= bytes ? this.audioBytes : undefined), `${bytes} bytes of audio`);
  }

  /** Resolves once at least `bytes` have arrived in binary frames; rejects if the connection closes first. */
  waitForBinaryBytes(bytes: number): Promise<Buffer> {
    return this.#until(() => {
      const all = Buffer.concat(this.binary);
      return all.length >= bytes ? all : undefined;
    }, `${bytes} bytes of binary audio`);
  }

  #until<T>(probe: () => T | undefined, what: string): Promise<T> {
    return new Promise((resolve, reject) => {
      const check = (): void => {
        const found = probe();
        if (found !== undefined) {
          this.#listeners.delete(check);
          resolve(found);
        } else if (this.#closedWith) {
          this.#listeners.delete(check);
          reject(new Error(`The connection closed (code ${this.#closedWith.code}) before ${what} arrived (${this.audioBytes} audio bytes so far).`));
        }
      };
      this.#listeners.add(check);
      check();
    });
  }

  #notify(): void {
    for (const listener of [...this.#listeners]) listener();
  }

  #onMessage(data: Buffer, isBinary: boolean): void {
    if (isBinary) {
      this.binaryFrames += 1;
      this.binary.push(data);
    } else {
      const event = JSON.parse(data.toString('utf8')) as Record<string, unknown>;
      if (event.type === 'input_audio_buffer.append' && typeof event.audio === 'string') {
        const pcm = Buffer.from(event.audio, 'base64');
        this.appendEvents += 1;
        this.audioBytes += pcm.length;
        this.#hash.update(pcm);
      } else {
        this.events.push(event);
      }
    }
    this.#notify();
  }
}

/** Starts a fake realtime server on 127.0.0.1 with a free port. */
export async function startFakeRealtimeServer(options: FakeRealtimeServerOptions = {}): Promise<FakeRealtimeServer> {
  const server = createServer((_req, res) => {
    res.writeHead(426, { 'content-type': 'text/plain' }).end('WebSocket only.');
  });
  const wss = new WebSocketServer({ noServer: true, clientTracking: false, perMessageDeflate: false, autoPong: options.autoPong ?? true });
  const sockets = new Set<Socket>();
  const held = new Set<Duplex>();
  const peers: FakePeer[] = [];
  const peerInbox = new Inbox<FakePeer>();
  const requestInbox = new Inbox<IncomingMessage>();
  const requests: IncomingMessage[] = [];
  const closeWaiters = new Set<() => void>();
  let connections = 0;

  server.on('connection', (socket: Socket) => {
    connections += 1;
    sockets.add(socket);
    socket.once('close', () => {
      sockets.delete(socket);
      if (sockets.size === 0) for (const waiter of [...closeWaiters]) waiter();
    });
  });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    requests.push(req);
    requestInbox.put(req);
    if (options.holdUpgrade) {
      held.add(socket);
      // Keep reading (and discarding) so the client's close is seen and this end closes too.
      socket.on('error', () => {});
      socket.once('end', () => socket.destroy());
      socket.once('close', () => held.delete(socket));
      socket.resume();
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      const peer = new FakePeer(ws);
      peers.push(peer);
      peerInbox.put(peer);
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  let closing: Promise<void> | undefined;

  return {
    realtimeUrl: `ws://127.0.0.1:${port}`,
    get connections() {
      return connections;
    },
    get openConnections() {
      return sockets.size;
    },
    get upgradeRequests() {
      return requests.length;
    },
    requests,
    nextPeer: () => peerInbox.take(),
    async acceptSession(stream) {
      const peer = await peerInbox.take();
      const started = once(stream, 'session.created');
      await peer.waitForEvent('session.update');
      peer.sendSessionCreated();
      await started;
      return peer;
    },
    nextUpgradeRequest: () => requestInbox.take(),
    allClosed() {
      if (sockets.size === 0) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const waiter = (): void => {
          closeWaiters.delete(waiter);
          resolve();
        };
        closeWaiters.add(waiter);
      });
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const peer of peers) peer.terminate();
        for (const socket of held) socket.destroy();
        for (const socket of sockets) socket.destroy();
        wss.close();
      });
      return closing;
    },
  };
}
