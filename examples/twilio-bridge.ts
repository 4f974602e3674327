/**
 * A phone translation bridge: Twilio Media Streams in, the translation spoken back into the call.
 *
 * Setup:
 * 1. Run this server where Twilio can reach it over TLS (behind a reverse proxy or a tunnel such
 *    as `ngrok http 8080`): `npm run build && node dist/examples/twilio-bridge.js`.
 * 2. Point the phone number's voice webhook (or a TwiML Bin) at TwiML that connects the call to a
 *    bidirectional stream on this server's stream path:
 *    ```xml
 *    <Response>
 *      <Connect>
 *        <Stream url="wss://your-host.example/twilio/media" />
 *      </Connect>
 *    </Response>
 *    ```
 *    The server also answers `GET|POST /twiml` with exactly that, built from `PUBLIC_HOST` or the
 *    request's `Host` header, so the webhook can simply be `https://your-host.example/twiml`.
 * 3. Call the number and speak: each utterance comes back translated; speaking over a
 *    translation interrupts it (the bridge sends `clear`).
 *
 * Who may connect: every call runs a realtime session on your service account, so the server
 * must not translate for anyone who finds it.
 * - It listens on 127.0.0.1 by default: the tunnel or reverse proxy that terminates TLS for
 *   Twilio runs on the same machine and forwards to it. Set `HOST=0.0.0.0` (or another address)
 *   only when the proxy is elsewhere.
 * - With `TWILIO_AUTH_TOKEN` set, every request must carry a valid `X-Twilio-Signature`, as
 *   Twilio signs them: base64 of HMAC-SHA1, keyed with the account's auth token, of the full URL
 *   Twilio requested followed by the POST parameters sorted by name (each name then its value).
 *   The URL is `https://PUBLIC_HOST/twiml...` for the TwiML webhook and
 *   `wss://PUBLIC_HOST/twilio/media...` (no parameters) for the Media Stream's WebSocket
 *   handshake. A request without a valid signature gets 403 and no session. Without the token
 *   nothing is checked (a warning says so when the server listens beyond loopback).
 * - A handshake signature is the same for every connection to the URL, so one captured signature
 *   opens as many connections as its holder likes: each call is bounded as well. Its realtime
 *   session opens only at Twilio's `start`; a connection without `start` within 10 s, a call that
 *   sends no media for 10 s, stops reading (a ping unanswered) or sends what no call sends (see
 *   `TwilioMediaBridge`) is closed; at most `MAX_CALLS` connections (50) at once, and
 *   `MAX_CALLS_PER_ADDRESS` (10) from one address, else the handshake gets 503 or 429.
 * - The log cannot be flooded: a few warnings of each kind per call, then one line as each call
 *   ends with its figures (duration, audio sent, frames received and refused, warnings not shown).
 *
 * Environment:
 * - `PORT` (default 8080), `HOST` (default 127.0.0.1; see above), `STREAM_PATH` (default
 *   `/twilio/media`), `PUBLIC_HOST` (host name Twilio uses: the TwiML's `wss://` URL and the
 *   signed URLs; default: the request's Host header).
 * - `TWILIO_AUTH_TOKEN`: the account's auth token, to verify `X-Twilio-Signature`.
 * - `MAX_CALLS` (default 50), `MAX_CALLS_PER_ADDRESS` (default 10): concurrent connections.
 * - `TRANSLATE_FROM` (default `en-us`), `TRANSLATE_TO` (default `es-es`).
 * - `PACING`: `burst` (default, Twilio buffers the audio) or `realtime` (20 ms pacing here).
 * - `GREETING_FILE`: an audio file (any format `openAudioSource` reads) played to each caller
 *   as the call starts, before any translation (keep it short: translations follow it).
 * - `RT_TRANSLATE_REALTIME_URL` and `RT_TRANSLATE_API_KEY`: the realtime service. Without a
 *   realtime URL the embedded emulator is started and used (it answers each utterance with the
 *   caller's own audio, so the whole path can be tried without an account).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable, type Duplex } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { pathToFileURL } from 'node:url';
import { WebSocketServer, type WebSocket } from 'ws';
import {
  PcmChunker,
  TwilioMediaBridge,
  bridgeTwilioSocket,
  fromServiceFormat,
  openAudioSource,
  type TwilioMediaBridgeOptions,
  type TwilioSocketOptions,
} from '../lib/index.js';
import { SlotCounter, type SlotClaim } from '../lib/integrations/slot-counter.js';
import { intOption } from '../lib/options.js';
import { TWILIO_FRAME_BYTES, TWILIO_SAMPLE_RATE, describeTwilioValue, twilioMarkMessage, twilioMediaMessage } from '../lib/protocol.js';
import { EMULATOR_DEFAULT_API_KEY, startEmulator, type RunningEmulator } from '../lib/emulator/index.js';

/** One call: its bridge, and a promise settled when the bridge has finished. */
export interface TwilioCall {
  bridge: TwilioMediaBridge;
  done: Promise<void>;
  request: IncomingMessage;
}

export interface TwilioBridgeServerOptions {
  /** Interface to listen on. Default `127.0.0.1`. */
  host?: string;
  /** Port; 0 (the default) picks a free one. */
  port?: number;
  /** Path of the Media Streams WebSocket. Default `/twilio/media`. */
  path?: string;
  /** Host name Twilio uses (the TwiML's `wss://` URL, the signed URLs). Default: the request's Host header. */
  publicHost?: string;
  /**
   * The Twilio account's auth token: every request must then carry a valid `X-Twilio-Signature`
   * (see `twilioSignature`), else it is answered 403. Default: none, nothing is checked.
   */
  authToken?: string;
  /**
   * Each call's bridge options (translation and realtime service, the call's limits), or a
   * function of the request. Like the bridge's, `openSession` is `start` unless given: no session before `start`.
   */
  bridge: TwilioMediaBridgeOptions | ((request: IncomingMessage) => TwilioMediaBridgeOptions);
  /** Called for each call as it connects (logs, events, tests); its session opens at its `start`. */
  onCall?: (call: TwilioCall) => void;
  /** An audio file played to each caller as the call starts (`playAudioFile`), before any translation. */
  greetingFile?: string;
  /** Connections at once (started or not); the handshake of one more gets 503. Default 50. */
  maxCalls?: number;
  /** Connections at once from one address (`clientAddress`); the handshake of one more gets 429. Default 10. */
  maxCallsPerAddress?: number;
  /**
   * The address a connection counts under. Default: the socket's remote address; behind a proxy
   * that is the proxy's, so return the client's address from the header the proxy sets, if the
   * proxy is yours (a header from anyone else proves nothing).
   */
  clientAddress?: (request: IncomingMessage) => string;
  /** Each call's socket bounds (`pingIntervalMs`, `maxSocketBufferBytes`): `TwilioSocketOptions`. */
  socket?: TwilioSocketOptions;
  /**
   * Where the server's log lines go: each call's start, its warnings (at most a few of each kind),
   * its transcripts and one line at its end with its figures; refused handshakes, at most one
   * line per 10 s. Default: nowhere.
   */
  log?: (level: 'info' | 'warn', line: string) => void;
}

/**
 * Plays an audio file (any format `openAudioSource` reads) into a call on `socket`: media
 * messages of 20 ms of mu-law 8 kHz, each sent once the socket has taken the one before, then a
 * mark named `markName` (Twilio echoes it once the audio has played).
 */
export async function playAudioFile(socket: Pick<WebSocket, 'send'>, path: string, streamSid: string, markName = 'file'): Promise<void> {
  const send = (message: unknown, callback: (error?: Error | null) => void) => socket.send(JSON.stringify(message), (error) => callback(error ?? null));
  await pipeline(
    await openAudioSource(path),
    fromServiceFormat({ format: 'mulaw', rate: TWILIO_SAMPLE_RATE, channels: 1 }),
    new PcmChunker({ sampleRate: TWILIO_SAMPLE_RATE, channels: 1, bytesPerSample: 1, chunkBytes: TWILIO_FRAME_BYTES }),
    new Writable({
      // The last frame, short, is filled with mu-law silence (0xff) to a whole 20 ms.
      write: (frame: Buffer, _encoding, callback) =>
        send(
          twilioMediaMessage(
            streamSid,
            frame.length === TWILIO_FRAME_BYTES ? frame : Buffer.concat([frame, Buffer.alloc(TWILIO_FRAME_BYTES - frame.length, 0xff)]),
          ),
          callback,
        ),
    }),
  );
  await new Promise<void>((resolve, reject) => send(twilioMarkMessage(streamSid, markName), (error) => (error ? reject(error) : resolve())));
}

export interface RunningTwilioBridgeServer {
  /** `ws://HOST:PORT/PATH`: where the Media Stream connects. */
  readonly url: string;
  readonly port: number;
  /** Ends every call at once and stops listening. */
  close(): Promise<void>;
}

/**
 * Twilio's request signature: base64 of HMAC-SHA1 keyed with the auth token, over `url` (the
 * full URL Twilio requested, query included) followed by every POST parameter sorted by name
 * (and by value for a repeated name), each written as its name then its value.
 */
export function twilioSignature(authToken: string, url: string, params: Iterable<readonly [string, string]> = []): string {
  const sorted = [...params].sort(([a, av], [b, bv]) => (a < b ? -1 : a > b ? 1 : av < bv ? -1 : av > bv ? 1 : 0));
  const hmac = createHmac('sha1', authToken).update(url);
  for (const [name, value] of sorted) hmac.update(name + value);
  return hmac.digest('base64');
}

/** True when `signature` (the `X-Twilio-Signature` header) is Twilio's for this request. */
export function isTwilioSignatureValid(
  authToken: string,
  signature: string | string[] | undefined,
  url: string,
  params: Iterable<readonly [string, string]> = [],
): boolean {
  if (typeof signature !== 'string') return false;
  const expected = Buffer.from(twilioSignature(authToken, url, params));
  const got = Buffer.from(signature);
  return got.length === expected.length && timingSafeEqual(got, expected);
}

/** Bytes of a webhook body read to check its signature (Twilio's are a few KiB). */
const MAX_WEBHOOK_BODY = 64 * 1024;

async function readForm(req: IncomingMessage): Promise<URLSearchParams | undefined> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of req) {
    length += (chunk as Buffer).length;
    if (length > MAX_WEBHOOK_BODY) return undefined;
    chunks.push(chunk as Buffer);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

function twiml(streamUrl: string): string {
  const escaped = streamUrl.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');
  return `<?xml version="1.0" encoding="UTF-8"?>\n<Response><Connect><Stream url="${escaped}" /></Connect></Response>\n`;
}

/** Counts connections in all and by address, against the caps. */
class ConnectionCaps {
  readonly #slots = new SlotCounter();
  constructor(
    readonly maxCalls: number,
    readonly maxPerAddress: number,
  ) {}

  #claims(address: string): SlotClaim[] {
    return [
      ['maxCalls', this.maxCalls],
      [`address ${address}`, this.maxPerAddress],
    ];
  }

  /** Counts a connection from `address`, or says which cap refuses it. */
  admit(address: string): 'maxCalls' | 'maxCallsPerAddress' | undefined {
    const full = this.#slots.take(this.#claims(address));
    return full === undefined ? undefined : full === 'maxCalls' ? 'maxCalls' : 'maxCallsPerAddress';
  }

  release(address: string): void {
    this.#slots.release(this.#claims(address));
  }
}

const REFUSALS = {
  maxCalls: { status: '503 Service Unavailable', text: 'Too many calls at once; try again later.\n' },
  maxCallsPerAddress: { status: '429 Too Many Requests', text: 'Too many calls at once from this address.\n' },
} as const;

/** Lines that a caller can make many of are said at most once per this many ms, with a count. */
const COUNTED_LINE_INTERVAL_MS = 10_000;

/**
 * A log line of one kind that a caller could repeat at will (a refused handshake, a connection
 * that never began a call): said at most once per `COUNTED_LINE_INTERVAL_MS`, with how many came
 * since the last one; `flush()` says what is left.
 */
class CountedLine {
  #unsaid = 0;
  #saidAt = -Infinity;
  readonly #say: (count: number, last: string | undefined) => void;

  constructor(say: (count: number, last: string | undefined) => void) {
    this.#say = say;
  }

  note(last: string): void {
    this.#unsaid += 1;
    const now = performance.now();
    if (now - this.#saidAt < COUNTED_LINE_INTERVAL_MS) return;
    this.#say(this.#unsaid, last);
    this.#unsaid = 0;
    this.#saidAt = now;
  }

  flush(): void {
    if (this.#unsaid > 0) this.#say(this.#unsaid, undefined);
    this.#unsaid = 0;
  }
}

/** Numbers in log lines: `1,203`. */
const count = (n: number) => n.toLocaleString('en-US');

/** A call's last line: how it ended and its figures. */
function twilioCallSummary(call: { bridge: TwilioMediaBridge; durationMs: number; error: Error | undefined; name: string }): string {
  const { bridge, error } = call;
  const outcome = error === undefined ? 'ended' : bridge.closeReason !== undefined ? `closed (${bridge.closeReason})` : `failed (${error.message})`;
  const seconds = (ms: number) => (ms / 1000).toFixed(1);
  const s = bridge.stats;
  const suppressed = Object.entries(s.suppressedWarnings);
  const notShown = suppressed.reduce((n, [, k]) => n + k, 0);
  return (
    `${call.name}: ${outcome} after ${seconds(call.durationMs)} s; ${seconds(s.receivedMs + s.insertedSilenceMs)} s of audio sent, ${count(s.mediaMessages)} frames received, ` +
    `${count(s.refusedFrames)} refused, ${count(s.warnings)} warnings` +
    (notShown === 0 ? '' : `, ${count(notShown)} more not shown (${suppressed.map(([kind, n]) => `${count(n)} ${kind}`).join(', ')})`)
  );
}

/** Starts an HTTP server that bridges each Media Stream connecting at `path`. */
export async function startTwilioBridgeServer(options: TwilioBridgeServerOptions): Promise<RunningTwilioBridgeServer> {
  const host = options.host ?? '127.0.0.1';
  const path = options.path ?? '/twilio/media';
  const caps = new ConnectionCaps(
    intOption(options.maxCalls, 'maxCalls', { min: 1, fallback: 50 }),
    intOption(options.maxCallsPerAddress, 'maxCallsPerAddress', { min: 1, fallback: 10 }),
  );
  const clientAddress = options.clientAddress ?? ((req: IncomingMessage) => req.socket.remoteAddress ?? 'unknown');
  const log = options.log ?? (() => undefined);
  const calls = new Set<TwilioCall>();
  const refusals = new CountedLine((n, last) =>
    log('warn', `refused ${count(n)} connection(s) since the last such line${last ? `, the last from ${last}` : ''}`),
  );
  const noCalls = new CountedLine((n, last) =>
    log('info', `${count(n)} connection(s) closed without a call since the last such line${last ? `, the last from ${last}` : ''}`),
  );
  const noteNoCall = (address: string, why: string | undefined) => noCalls.note(why === undefined ? address : `${address} (${why})`);
  // Twilio's messages are small (a 20 ms media message is about 400 bytes).
  const wss = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024, perMessageDeflate: false });

  const authToken = options.authToken;
  /** The URL Twilio requested (what it signed), behind a proxy that terminates TLS. */
  const publicUrl = (req: IncomingMessage, scheme: 'https' | 'wss') => `${scheme}://${options.publicHost ?? req.headers.host ?? 'localhost'}${req.url ?? '/'}`;

  const answerTwiml = async (req: IncomingMessage, res: ServerResponse) => {
    const form = req.method === 'POST' ? await readForm(req) : (req.resume(), new URLSearchParams());
    if (authToken !== undefined) {
      const valid = form !== undefined && isTwilioSignatureValid(authToken, req.headers['x-twilio-signature'], publicUrl(req, 'https'), form);
      if (!valid) {
        res.writeHead(403, { 'content-type': 'text/plain' });
        res.end('Forbidden: no valid X-Twilio-Signature\n');
        return;
      }
    }
    const publicHost = options.publicHost ?? req.headers.host ?? `localhost`;
    res.writeHead(200, { 'content-type': 'text/xml' });
    res.end(twiml(`wss://${publicHost}${path}`));
  };

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://bridge');
    if (url.pathname === '/twiml' && (req.method === 'GET' || req.method === 'POST')) {
      answerTwiml(req, res).catch(() => res.destroy());
      return;
    }
    req.resume();
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('Not found\n');
  });

  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url ?? '/', 'http://bridge');
    if (url.pathname !== path) {
      socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    // The handshake is signed with the wss:// URL and no parameters.
    if (authToken !== undefined && !isTwilioSignatureValid(authToken, req.headers['x-twilio-signature'], publicUrl(req, 'wss'))) {
      socket.end('HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    const address = clientAddress(req);
    const refused = caps.admit(address);
    if (refused !== undefined) {
      const { status, text } = REFUSALS[refused];
      socket.end(`HTTP/1.1 ${status}\r\nRetry-After: 10\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: ${text.length}\r\n\r\n${text}`);
      refusals.note(`${address} (${refused} reached)`);
      return;
    }
    // The slot is freed once: when the call is over (its session ended, which after a hang-up
    // may take the quiet period or longer), or when the socket closed before a call began.
    let counted = true;
    const release = () => {
      if (counted) caps.release(address);
      counted = false;
    };
    socket.once('close', release);
    wss.handleUpgrade(req, socket, head, (ws: WebSocket) => {
      const connectedAt = performance.now();
      let bridge: TwilioMediaBridge;
      try {
        // The realtime session opens only once Twilio's `start` has come (unless told otherwise).
        bridge = new TwilioMediaBridge(typeof options.bridge === 'function' ? options.bridge(req) : options.bridge);
      } catch (error) {
        ws.close(1011, 'bridge configuration');
        log('warn', `connection from ${address}: ${(error as Error).message}`);
        return;
      }
      watchCall(ws, bridge);
      const call: TwilioCall = { bridge, request: req, done: bridgeTwilioSocket(ws, bridge, options.socket) };
      calls.add(call);
      // From here the call holds the slot until it is done, not just until the caller hangs up.
      socket.off('close', release);
      call.done
        .then(
          (): Error | undefined => {
            release();
            return undefined;
          },
          (error: Error) => {
            release();
            return error;
          },
        )
        .then((error) => {
          calls.delete(call);
          const info = bridge.stream;
          if (info === undefined) {
            // No call began: such connections are counted, and said at most every 10 s.
            noteNoCall(address, bridge.closeReason ?? error?.message);
            return;
          }
          const name = `call ${describeTwilioValue(info.callSid ?? info.streamSid)}`;
          log(error === undefined ? 'info' : 'warn', twilioCallSummary({ bridge, durationMs: performance.now() - connectedAt, error, name }));
        });
      options.onCall?.(call);
    });
  });

  /** A call's greeting and its log lines (its warnings are already limited by the bridge). */
  const watchCall = (ws: WebSocket, bridge: TwilioMediaBridge) => {
    const greeting = options.greetingFile;
    if (greeting !== undefined) {
      bridge.once('start', (info) =>
        playAudioFile(ws, greeting, info.streamSid, 'greeting').catch((error: Error) => log('warn', `greeting: ${error.message}`)),
      );
    }
    if (options.log === undefined) return;
    bridge.on('start', (info) => log('info', `call ${describeTwilioValue(info.callSid ?? '?')}: stream ${describeTwilioValue(info.streamSid)} started`));
    bridge.on('transcript.done', (text) => log('info', `  caller:      ${text}`));
    bridge.on('text.done', (text) => log('info', `  translation: ${text}`));
    bridge.on('clear', () => log('info', '  (caller barged in: playback cleared)'));
    bridge.on('warning', (warning) => log('warn', `  warning: ${warning.message}`));
  };

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const shownHost = host.includes(':') ? `[${host}]` : host;
  let closing: Promise<void> | undefined;

  return {
    url: `ws://${shownHost}:${port}${path}`,
    port,
    close() {
      closing ??= (async () => {
        const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
        refusals.flush();
        noCalls.flush();
        const pending = [...calls].map((call) => call.done.catch(() => undefined));
        for (const call of calls) call.bridge.destroy();
        for (const ws of wss.clients) ws.terminate();
        await Promise.all(pending);
        await new Promise<void>((resolve) => wss.close(() => resolve()));
        server.closeAllConnections();
        await stopped;
      })();
      return closing;
    },
  };
}

/** Runs the server from the environment (see the comment at the top). */
async function main(): Promise<void> {
  const env = process.env;
  let emulator: RunningEmulator | undefined;
  const service: Partial<TwilioMediaBridgeOptions> = {};
  if (!env.RT_TRANSLATE_REALTIME_URL) {
    emulator = await startEmulator({ latencyMs: 200 });
    service.realtimeUrl = emulator.realtimeUrl;
    service.apiKey = EMULATOR_DEFAULT_API_KEY;
    console.log(`no RT_TRANSLATE_REALTIME_URL: using the embedded emulator at ${emulator.realtimeUrl}`);
  }
  const pacing = env.PACING === 'realtime' ? 'realtime' : 'burst';
  const host = env.HOST ?? '127.0.0.1';
  const authToken = env.TWILIO_AUTH_TOKEN || undefined;
  if (authToken === undefined && !['127.0.0.1', '::1', 'localhost'].includes(host)) {
    console.warn(`warning: listening on ${host} without TWILIO_AUTH_TOKEN: anyone who reaches this port can run sessions on your account`);
  }
  const server = await startTwilioBridgeServer({
    host,
    ...(authToken ? { authToken } : {}),
    port: Number(env.PORT ?? 8080),
    path: env.STREAM_PATH ?? '/twilio/media',
    ...(env.PUBLIC_HOST ? { publicHost: env.PUBLIC_HOST } : {}),
    ...(env.GREETING_FILE ? { greetingFile: env.GREETING_FILE } : {}),
    ...(env.MAX_CALLS ? { maxCalls: Number(env.MAX_CALLS) } : {}),
    ...(env.MAX_CALLS_PER_ADDRESS ? { maxCallsPerAddress: Number(env.MAX_CALLS_PER_ADDRESS) } : {}),
    bridge: { from: env.TRANSLATE_FROM ?? 'en-us', to: env.TRANSLATE_TO ?? 'es-es', pacing, ...service },
    log: (level, line) => (level === 'info' ? console.log(line) : console.warn(line)),
  });
  console.log(`Twilio Media Streams bridge listening at ${server.url} (TwiML at /twiml)`);

  const shutdown = () => {
    console.log('shutting down');
    void server.close().then(() => emulator?.close());
  };
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: Error) => {
    console.error(error.message);
    process.exitCode = 1;
  });
}
