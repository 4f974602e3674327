/**
 * A realtime proxy for fan-out tests: a WebSocket server on 127.0.0.1 (port 0) that passes each
 * client connection to an upstream realtime server (the emulator, the reference server) and
 * records, per target language (read from the client's `session.update`), the output audio it
 * passed to the client: what that language's sessions sent, as the client must have received
 * it. Pings go through to the upstream server and its pongs back, so the client's fences
 * (pings behind its input) still mean what the service has read.
 *
 * Per language, it can also play a network or service the other languages do not share:
 * - `mark`: every output byte XORed with a byte of its own, so each language's audio differs
 *   and a target that got another's audio is caught;
 * - `cutAfterResponses(lang, n)`: the connection is ended (TCP FIN, no close frame: the client
 *   sees 1006) right after the n-th response of the language's first connection, everything
 *   passed before it delivered; the reconnect goes through;
 * - `stall(lang)`: the client's input is no longer read (its socket's buffers fill), until
 *   `unstall(lang)`;
 * - `refuse`: the language's sessions are answered with an `error` event and closed (1008), as
 *   a service that does not serve the language;
 * - `unfinished`: the n-th response of a language is begun and never finished (its
 *   `response.text.done` and `response.audio.done` are not passed on).
 *
 * ```ts
 * const proxy = await startSessionProxy(emulator.realtimeUrl, { mark: { 'fr-fr': 0x5a } });
 * // client: { realtimeUrl: proxy.realtimeUrl, ... }
 * expect(frOutput.equals(proxy.sent('fr-fr'))).toBe(true);
 * ```
 */
import { createServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { EventEmitter } from 'node:events';
import { WebSocket, WebSocketServer, type RawData } from 'ws';

export interface SessionProxyOptions {
  /** XOR byte applied to every output audio byte of a language. */
  mark?: Readonly<Record<string, number>>;
  /** Languages whose sessions the proxy refuses, with the error message. */
  refuse?: Readonly<Record<string, string>>;
  /** Per language, the response (from 1, counted over its connections) that never finishes. */
  unfinished?: Readonly<Record<string, number>>;
}

export interface SessionProxy {
  /** `ws://127.0.0.1:PORT`: the client's realtimeUrl. */
  readonly realtimeUrl: string;
  /** Emits `changed` after each recorded response and each connection's end. */
  readonly events: EventEmitter;
  /** All output audio passed to the client for `lang`, every connection in order. */
  sent(lang: string): Buffer;
  /** Connections opened for `lang` (reconnects included). */
  connections(lang: string): number;
  /** Responses (`response.audio.done`) passed for `lang`. */
  responses(lang: string): number;
  /** Input audio bytes the client sent for `lang` (what its sessions were given), every connection. */
  inputBytes(lang: string): number;
  /** Ends the first connection of `lang` after its n-th response (once). */
  cutAfterResponses(lang: string, n: number): void;
  /** Stops reading the client input of `lang`'s open connections. */
  stall(lang: string): void;
  unstall(lang: string): void;
  /** Open connections (both ends). */
  readonly open: number;
  close(): Promise<void>;
}

interface Link {
  lang: string | undefined;
  client: WebSocket;
  socket: Socket;
  upstream: WebSocket;
  index: number;
  responses: number;
  /** No longer passes anything to the client (it is being cut). */
  cut: boolean;
  lastSend: Promise<void>;
}

type ServerMessage = { type?: string; delta?: string; audio?: string };

export async function startSessionProxy(upstreamUrl: string, options: SessionProxyOptions = {}): Promise<SessionProxy> {
  const audio = new Map<string, Buffer[]>();
  const counts = new Map<string, { connections: number; responses: number; input: number }>();
  const cuts = new Map<string, number>();
  const stalled = new Set<string>();
  const links = new Set<Link>();
  const events = new EventEmitter();
  const count = (lang: string) => {
    let c = counts.get(lang);
    if (!c) counts.set(lang, (c = { connections: 0, responses: 0, input: 0 }));
    return c;
  };

  const wss = new WebSocketServer({ noServer: true, autoPong: false, maxPayload: 64 * 1024 * 1024 });
  const http = createServer((_req, res) => res.writeHead(426).end());
  http.on('upgrade', (request, socket: Socket, head) => {
    wss.handleUpgrade(request, socket, head, (client) => {
      const headers: Record<string, string> = {};
      const key = request.headers['x-api-key'];
      if (typeof key === 'string') headers['x-api-key'] = key;
      const upstream = new WebSocket(`${upstreamUrl}${request.url ?? '/v1/realtime'}`, { headers, perMessageDeflate: false, autoPong: false });
      const link: Link = { lang: undefined, client, socket, upstream, index: 0, responses: 0, cut: false, lastSend: Promise.resolve() };
      links.add(link);
      const pending: Array<[RawData, boolean]> = [];
      const toUpstream = (data: RawData, isBinary: boolean) => {
        if (upstream.readyState === WebSocket.OPEN) upstream.send(data, { binary: isBinary });
        else if (upstream.readyState === WebSocket.CONNECTING) pending.push([data, isBinary]);
      };
      const toClient = (data: string | Buffer, binary: boolean) => {
        if (link.cut || client.readyState !== WebSocket.OPEN) return false;
        link.lastSend = new Promise((resolve) => client.send(data, { binary }, () => resolve()));
        return true;
      };
      client.on('message', (data, isBinary) => {
        if (!isBinary && link.lang === undefined) {
          const event = JSON.parse(data.toString()) as { type?: string; session?: { target_language?: string } };
          if (event.type === 'session.update' && event.session?.target_language) {
            link.lang = event.session.target_language.toLowerCase();
            const c = count(link.lang);
            link.index = c.connections++;
            const refusal = options.refuse?.[link.lang];
            if (refusal !== undefined) {
              client.send(JSON.stringify({ type: 'error', error: { message: refusal, code: 400 } }));
              client.close(1008, 'unsupported');
              upstream.terminate();
              return;
            }
            if (stalled.has(link.lang)) client.pause();
          }
        } else if (!isBinary && link.lang !== undefined) {
          const text = data.toString();
          if (text.startsWith('{"type":"input_audio_buffer.append"')) {
            const b64 = (JSON.parse(text) as { audio: string }).audio;
            count(link.lang).input += Buffer.byteLength(b64, 'base64');
          }
        }
        toUpstream(data, isBinary);
      });
      client.on('ping', (data) => {
        if (upstream.readyState === WebSocket.OPEN) upstream.ping(data);
      });
      upstream.on('pong', (data) => {
        if (!link.cut && client.readyState === WebSocket.OPEN) client.pong(data);
      });
      upstream.on('open', () => {
        for (const [data, isBinary] of pending.splice(0)) upstream.send(data, { binary: isBinary });
      });
      upstream.on('message', (data: Buffer, isBinary: boolean) => {
        const lang = link.lang ?? '?';
        const xor = options.mark?.[lang];
        const record = (pcm: Buffer): Buffer => {
          const out = xor === undefined ? pcm : Buffer.from(pcm.map((b) => b ^ xor));
          if (!link.cut) {
            let list = audio.get(lang);
            if (!list) audio.set(lang, (list = []));
            list.push(out);
          }
          return out;
        };
        if (isBinary) {
          toClient(record(data), true);
          return;
        }
        const text = data.toString();
        const event = JSON.parse(text) as ServerMessage;
        if (event.type === 'response.audio.delta') {
          const field = event.delta !== undefined ? 'delta' : 'audio';
          const pcm = record(Buffer.from(event[field] ?? '', 'base64'));
          toClient(JSON.stringify({ ...event, [field]: pcm.toString('base64') }), false);
          return;
        }
        const done = event.type === 'response.audio.done' || event.type === 'response.text.done';
        if (done && options.unfinished?.[lang] === count(lang).responses + 1) return;
        if (!toClient(text, false)) return;
        if (event.type === 'response.audio.done') {
          link.responses++;
          count(lang).responses++;
          events.emit('changed');
          if (link.index === 0 && cuts.get(lang) === link.responses) void cut(link);
        }
      });
      const end = () => {
        if (!links.delete(link)) return;
        client.terminate();
        upstream.terminate();
        events.emit('changed');
      };
      upstream.on('close', (code, reason) => {
        if (link.cut) return;
        // Passes the service's close on; a code that cannot be sent (1005, 1006) is a cut.
        if (code >= 1000 && code < 5000 && code !== 1005 && code !== 1006 && client.readyState === WebSocket.OPEN) {
          void link.lastSend.then(() => client.close(code, reason));
        } else {
          void link.lastSend.then(() => socket.end());
        }
      });
      client.on('close', end);
      upstream.on('error', () => {});
      client.on('error', () => {});
    });
  });

  async function cut(link: Link): Promise<void> {
    link.cut = true;
    await link.lastSend;
    link.socket.end();
    link.upstream.terminate();
  }

  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  return {
    realtimeUrl: `ws://127.0.0.1:${port}`,
    events,
    sent: (lang) => Buffer.concat(audio.get(lang) ?? []),
    connections: (lang) => counts.get(lang)?.connections ?? 0,
    responses: (lang) => counts.get(lang)?.responses ?? 0,
    inputBytes: (lang) => counts.get(lang)?.input ?? 0,
    cutAfterResponses: (lang, n) => void cuts.set(lang, n),
    stall(lang) {
      stalled.add(lang);
      for (const link of links) if (link.lang === lang) link.client.pause();
    },
    unstall(lang) {
      stalled.delete(lang);
      for (const link of links) if (link.lang === lang) link.client.resume();
    },
    get open() {
      return links.size;
    },
    async close() {
      for (const link of links) {
        link.client.terminate();
        link.upstream.terminate();
      }
      links.clear();
      wss.close();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
