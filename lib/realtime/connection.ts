/**
 * One WebSocket to a realtime endpoint of the service, with what every realtime client of the
 * library needs below its protocol: the handshake (a refusal is read, status, `Retry-After` and
 * body, instead of surfacing as a bare error), pausing reads for named reasons, liveness, and one
 * report of how the connection ended.
 *
 * Liveness: while reading, the connection pings every `pingIntervalMs`, and a ping period counts
 * as alive when something showed the peer is there: any frame received (a pong included), or
 * send-buffer progress (the peer's TCP stack took more of our data). After silent periods adding
 * up to `livenessTimeoutMs` it is dead: terminated and reported as `dead`. Counting periods, not
 * wall time, means a stalled event loop (ours) is never mistaken for a silent peer. While reads
 * are paused (the caller is behind) the peer may rightly stop reading too: no period counts.
 *
 * Every ping carries a number, and its pong says which: a peer reads in order, so the pong to a
 * ping sent behind some input shows that the peer has read all of that input (`ping()`).
 */
import WebSocket from 'ws';
import type { IncomingMessage } from 'node:http';
import { isLoopbackHost } from '../config.js';
import { parseRetryAfter } from '../retry-after.js';

export interface ConnectionOptions {
  url: URL;
  headers: Record<string, string>;
  /** Time allowed for the HTTP upgrade, in ms. */
  handshakeTimeoutMs: number;
  /** Largest message accepted from the peer, in bytes. */
  maxPayload: number;
  pingIntervalMs: number;
  livenessTimeoutMs: number;
  /**
   * Every message sent is JSON text (no binary frames): frames may then go with a zero masking
   * key where masking protects nobody (see `maskIsMoot`).
   */
  textOnly: boolean;
}

/** How a connection ended, reported once. */
export type ConnectionEnd =
  /** The server answered the upgrade with an HTTP status instead of switching protocols. */
  | { kind: 'refused'; status: number; retryAfterMs: number | undefined; body: string }
  /** The connection closed (a close frame, or 1006 when it was cut). `error` is a socket error seen before. */
  | { kind: 'closed'; code: number; reason: string; error: Error | undefined }
  /** No sign of life for `silentMs` while reading: the connection was terminated. */
  | { kind: 'dead'; silentMs: number };

export interface ConnectionHandlers {
  open(): void;
  message(data: Buffer, isBinary: boolean): void;
  /** The peer answered ping `id` (and so every ping before it). */
  pong?(id: number): void;
  end(end: ConnectionEnd): void;
}

/**
 * Whether masking our frames protects nobody on this connection. RFC 6455 masks a client's frames
 * so that a cleartext intermediary (a transparent proxy, a cache) cannot be made to read
 * attacker-chosen bytes as HTTP (section 10.3). Inside TLS no intermediary reads the frames, and
 * on loopback there is at most a local proxy of the application's own. The zero key is used
 * there only on connections that send JSON text, which never carries a raw CR or LF (JSON escapes
 * them), so its bytes cannot form an HTTP request whatever reads them; binary audio, which can
 * carry any bytes, keeps random keys. With a zero key `ws` writes each message to the socket as
 * it is: no masked copy and no pass over every byte, which was most of the CPU of sending audio.
 * A cleartext connection to another host (`allowInsecure`) keeps random keys.
 */
export function maskIsMoot(url: URL): boolean {
  return url.protocol === 'wss:' || isLoopbackHost(url.hostname);
}

/** `ws` asks for each frame's 4-byte key in a buffer it reuses; plain stores (a `fill()` is a native call). */
function zeroMask(mask: Buffer): void {
  mask[0] = 0;
  mask[1] = 0;
  mask[2] = 0;
  mask[3] = 0;
}

/** `ws.send` options, one object each for every message (`ws` copies what it reads from them). */
const TEXT_FRAME = Object.freeze({ binary: false });
const BINARY_FRAME = Object.freeze({ binary: true });

/** Most of a refused handshake's body that is read, in bytes. */
const MAX_REFUSAL_BODY = 4096;
/** Pings awaiting their pong that are remembered (a peer that never answers cannot grow the list). */
const MAX_UNANSWERED_PINGS = 64;

export class RealtimeConnection {
  /** Resolves once the socket has closed (however it ended). */
  readonly closed: Promise<void>;
  readonly #ws: WebSocket;
  readonly #handlers: ConnectionHandlers;
  readonly #options: ConnectionOptions;
  readonly #pauses = new Set<string>();
  #refusal: Extract<ConnectionEnd, { kind: 'refused' }> | undefined;
  #dead: number | undefined;
  #error: Error | undefined;
  #ended = false;
  #livenessTimer: NodeJS.Timeout | undefined;
  #closeGuard: NodeJS.Timeout | undefined;
  /** Something showed the peer is there since the last ping period. */
  #sign = true;
  /** Ping periods in a row without a sign. */
  #silentPeriods = 0;
  #lastBuffered = 0;
  #lastPing = 0;
  /** Ids of the pings sent and not answered yet, oldest first. */
  readonly #unanswered: number[] = [];

  constructor(options: ConnectionOptions, handlers: ConnectionHandlers) {
    this.#options = options;
    this.#handlers = handlers;
    const ws = new WebSocket(options.url, {
      headers: options.headers,
      perMessageDeflate: false,
      handshakeTimeout: options.handshakeTimeoutMs,
      maxPayload: options.maxPayload,
      ...(options.textOnly && maskIsMoot(options.url) ? { generateMask: zeroMask } : {}),
    });
    ws.binaryType = 'nodebuffer';
    this.#ws = ws;
    this.closed = new Promise((resolve) => ws.once('close', () => resolve()));
    ws.on('unexpected-response', (_req, res) => this.#onRefused(res));
    ws.on('open', () => {
      this.#armLiveness();
      handlers.open();
    });
    ws.on('message', (data, isBinary) => {
      this.#sign = true;
      handlers.message(data as Buffer, isBinary);
    });
    ws.on('pong', (data) => {
      this.#sign = true;
      this.#onPong(data);
    });
    ws.on('ping', () => {
      this.#sign = true;
    });
    ws.on('error', (error) => {
      this.#error ??= error;
    });
    ws.on('close', (code, reason) => this.#onClose(code, reason.toString('utf8')));
  }

  /** True once the handshake completed and until the connection starts closing. */
  get isOpen(): boolean {
    return this.#ws.readyState === WebSocket.OPEN;
  }

  /** Bytes given to `send()` that the socket has not taken yet. */
  get bufferedAmount(): number {
    return this.#ws.bufferedAmount;
  }

  /** Whether reads are paused (for any reason). */
  get paused(): boolean {
    return this.#pauses.size > 0;
  }

  /**
   * Sends a message: a string as a text frame, a Buffer as a binary frame unless `binary` is
   * false (then it is the UTF-8 bytes of a text frame). `callback` runs once the socket took it
   * (with an error if it could not). Returns false, without calling back, when not open.
   */
  send(data: string | Buffer, callback?: (error?: Error) => void, binary = typeof data !== 'string'): boolean {
    if (this.#ws.readyState !== WebSocket.OPEN) return false;
    this.#ws.send(data, binary ? BINARY_FRAME : TEXT_FRAME, callback);
    return true;
  }

  /**
   * Sends a ping behind everything sent so far and returns its id (undefined when not open); the
   * `pong` handler gets the id once the peer has read up to it.
   */
  ping(): number | undefined {
    if (this.#ws.readyState !== WebSocket.OPEN) return undefined;
    const id = ++this.#lastPing;
    const payload = Buffer.allocUnsafe(4);
    payload.writeUInt32BE(id >>> 0);
    this.#ws.ping(payload);
    this.#unanswered.push(id);
    if (this.#unanswered.length > MAX_UNANSWERED_PINGS) this.#unanswered.shift();
    return id;
  }

  /** Stops reading for `reason` (reads resume once no reason is left). */
  pause(reason: string): void {
    this.#pauses.add(reason);
    if (this.#ws.readyState === WebSocket.OPEN) this.#ws.pause();
  }

  resume(reason: string): void {
    if (!this.#pauses.delete(reason) || this.#pauses.size > 0) return;
    if (this.#ws.readyState !== WebSocket.OPEN) return;
    this.#ws.resume();
    // Our pause, not the peer's silence: the peer gets a full period again.
    this.#sign = true;
    this.#silentPeriods = 0;
  }

  /**
   * Starts the closing handshake (reads resume so the peer's answer is seen); a peer that does
   * not answer within `graceMs` is cut off.
   */
  close(code: number, reason = '', graceMs = 2000): void {
    this.#stopLiveness();
    const ws = this.#ws;
    if (ws.readyState === WebSocket.CLOSED) return;
    if (ws.readyState === WebSocket.CONNECTING) {
      ws.terminate();
      return;
    }
    if (ws.readyState === WebSocket.OPEN) {
      this.#pauses.clear();
      ws.resume();
      ws.close(code, reason);
    }
    this.#closeGuard ??= setTimeout(() => ws.terminate(), graceMs);
  }

  /** Cuts the connection at once. */
  terminate(): void {
    this.#stopLiveness();
    this.#ws.terminate();
  }

  #armLiveness(): void {
    const { pingIntervalMs, livenessTimeoutMs } = this.#options;
    this.#lastBuffered = this.#ws.bufferedAmount;
    this.#livenessTimer = setInterval(() => {
      const ws = this.#ws;
      if (ws.readyState !== WebSocket.OPEN) return;
      const buffered = ws.bufferedAmount;
      const sign = this.#sign || buffered < this.#lastBuffered || this.#pauses.size > 0;
      this.#lastBuffered = buffered;
      this.#sign = false;
      this.#silentPeriods = sign ? 0 : this.#silentPeriods + 1;
      if (this.#silentPeriods * pingIntervalMs >= livenessTimeoutMs) {
        this.#dead = this.#silentPeriods * pingIntervalMs;
        this.terminate();
        return;
      }
      if (this.#pauses.size === 0) this.ping();
    }, pingIntervalMs);
    this.#livenessTimer.unref();
  }

  #stopLiveness(): void {
    clearInterval(this.#livenessTimer);
    this.#livenessTimer = undefined;
  }

  /**
   * Which ping a pong answers: the id it echoes, or, from a peer that does not echo the payload
   * as RFC 6455 asks, the oldest one unanswered (pongs come back in order).
   */
  #onPong(data: Buffer): void {
    const unanswered = this.#unanswered;
    const echoed = data.length === 4 ? data.readUInt32BE(0) : undefined;
    const at = echoed === undefined ? 0 : unanswered.indexOf(echoed);
    if (at < 0 || unanswered.length === 0) return;
    const id = unanswered[at]!;
    unanswered.splice(0, at + 1);
    this.#handlers.pong?.(id);
  }

  #onRefused(res: IncomingMessage): void {
    const status = res.statusCode ?? 0;
    const retryAfterMs = parseRetryAfter(res.headers);
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (chunk: Buffer) => {
      if (size < MAX_REFUSAL_BODY) chunks.push(chunk);
      size += chunk.length;
    });
    const finish = (): void => {
      if (this.#refusal) return;
      this.#refusal = {
        kind: 'refused',
        status,
        retryAfterMs,
        body: Buffer.concat(chunks).subarray(0, MAX_REFUSAL_BODY).toString('utf8'),
      };
      res.destroy();
      this.#ws.terminate();
    };
    res.once('end', finish);
    res.once('error', finish);
    res.once('close', finish);
  }

  #onClose(code: number, reason: string): void {
    this.#stopLiveness();
    clearTimeout(this.#closeGuard);
    if (this.#ended) return;
    this.#ended = true;
    if (this.#refusal) this.#handlers.end(this.#refusal);
    else if (this.#dead !== undefined) this.#handlers.end({ kind: 'dead', silentMs: this.#dead });
    else this.#handlers.end({ kind: 'closed', code, reason, error: this.#error });
  }
}
