/**
 * A `ws` client standing in for a browser on the relay: it keeps every text frame parsed
 * (`events`), every binary frame, the audio it received either way, and how the connection
 * closed, and emits `frame` and `close` so tests wait on them (`waitFor`). A refused handshake
 * is read as the HTTP answer it is (`refusal`).
 */
import { EventEmitter } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { WebSocket, type ClientOptions } from 'ws';
import { waitFor } from './wait-for.js';

export interface BrowserOptions {
  /** Subprotocols offered. */
  protocols?: string[];
  /** The page's origin (`Origin` header); none by default, as a non-browser client. */
  origin?: string;
  headers?: Record<string, string>;
}

/** An HTTP answer instead of an upgrade. */
export interface Refusal {
  status: number;
  body: string;
}

function clientOptions(options: BrowserOptions): ClientOptions {
  return { perMessageDeflate: false, ...(options.origin ? { origin: options.origin } : {}), headers: options.headers ?? {} };
}

export class BrowserClient {
  readonly ws: WebSocket;
  /** Text frames, parsed, in order. */
  readonly events: Array<Record<string, unknown>> = [];
  /** Text frames as they came. */
  readonly texts: string[] = [];
  /** Binary frames, in order. */
  readonly binary: Buffer[] = [];
  /** Emits `frame` after each frame and `close` once closed. */
  readonly emitter = new EventEmitter();
  /** Resolves with the close code and reason. */
  readonly closed: Promise<{ code: number; reason: string }>;
  #closedWith: { code: number; reason: string } | undefined;
  /** Output audio received, from JSON deltas and binary frames, in order. */
  readonly #audio: Buffer[] = [];

  private constructor(ws: WebSocket) {
    this.ws = ws;
    ws.on('message', (data, isBinary) => {
      const frame = data as Buffer;
      if (isBinary) {
        this.binary.push(frame);
        this.#audio.push(frame);
      } else {
        const text = frame.toString('utf8');
        this.texts.push(text);
        const event = JSON.parse(text) as Record<string, unknown>;
        this.events.push(event);
        if (event.type === 'response.audio.delta' && typeof event.delta === 'string') this.#audio.push(Buffer.from(event.delta, 'base64'));
      }
      this.emitter.emit('frame');
    });
    ws.on('error', () => undefined);
    this.closed = new Promise((resolve) =>
      ws.once('close', (code, reason) => {
        this.#closedWith = { code, reason: reason.toString('utf8') };
        resolve(this.#closedWith);
        this.emitter.emit('close');
      }),
    );
  }

  /** Opens a connection; rejects with the `Refusal` when the handshake is answered otherwise. */
  static connect(url: string, options: BrowserOptions = {}): Promise<BrowserClient> {
    const ws = new WebSocket(url, options.protocols ?? [], clientOptions(options));
    const client = new BrowserClient(ws);
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(client));
      ws.once('unexpected-response', (_req, res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.once('end', () => {
          reject({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') } satisfies Refusal);
          ws.terminate();
        });
      });
      ws.once('error', (error) => reject(error));
    });
  }

  /** The HTTP answer to a handshake that must be refused (fails if it is upgraded). */
  static async refusal(url: string, options: BrowserOptions = {}): Promise<Refusal> {
    try {
      const client = await BrowserClient.connect(url, options);
      client.ws.terminate();
    } catch (refusal) {
      if (typeof (refusal as Refusal).status === 'number') return refusal as Refusal;
      throw refusal;
    }
    throw new Error('The handshake was upgraded.');
  }

  get protocol(): string {
    return this.ws.protocol;
  }

  get isClosed(): boolean {
    return this.#closedWith !== undefined;
  }

  send(message: Record<string, unknown> | string | Buffer): void {
    this.ws.send(typeof message === 'string' || Buffer.isBuffer(message) ? message : JSON.stringify(message));
  }

  /** Output audio received so far. */
  audio(): Buffer {
    return Buffer.concat(this.#audio);
  }

  /** The events of `type` received so far. */
  ofType(type: string): Array<Record<string, unknown>> {
    return this.events.filter((e) => e.type === type);
  }

  /** Resolves with the `count`-th event of `type` (already received or still to come). */
  waitForEvent(type: string, count = 1): Promise<Record<string, unknown>> {
    return waitFor(() => this.ofType(type)[count - 1], { onEvent: [this.emitter, 'frame', 'close'] });
  }

  /** Resolves once `bytes` of output audio have arrived. */
  waitForAudio(bytes: number): Promise<Buffer> {
    return waitFor(() => (this.#audio.reduce((n, b) => n + b.length, 0) >= bytes ? this.audio() : undefined), { onEvent: [this.emitter, 'frame'] });
  }
}
