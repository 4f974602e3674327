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
 * Environment:
 * - `PORT` (default 8080), `HOST` (default 0.0.0.0), `STREAM_PATH` (default `/twilio/media`),
 *   `PUBLIC_HOST` (host name for the TwiML's `wss://` URL; default: the request's Host header).
 * - `TRANSLATE_FROM` (default `en-us`), `TRANSLATE_TO` (default `es-es`).
 * - `PACING`: `burst` (default, Twilio buffers the audio) or `realtime` (20 ms pacing here).
 * - `RT_TRANSLATE_REALTIME_URL` and `RT_TRANSLATE_API_KEY`: the realtime service. Without a
 *   realtime URL the embedded emulator is started and used (it answers each utterance with the
 *   caller's own audio, so the whole path can be tried without an account).
 */
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { WebSocketServer, type WebSocket } from 'ws';
import { TwilioMediaBridge, bridgeTwilioSocket, type TwilioMediaBridgeOptions } from '../lib/index.js';
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
  /** Host name put in the TwiML's `wss://` URL. Default: the request's Host header. */
  publicHost?: string;
  /** Each call's bridge options (translation and realtime service), or a function of the request. */
  bridge: TwilioMediaBridgeOptions | ((request: IncomingMessage) => TwilioMediaBridgeOptions);
  /** Called for each call as it starts (logs, events, tests). */
  onCall?: (call: TwilioCall) => void;
}

export interface RunningTwilioBridgeServer {
  /** `ws://HOST:PORT/PATH`: where the Media Stream connects. */
  readonly url: string;
  readonly port: number;
  /** Ends every call at once and stops listening. */
  close(): Promise<void>;
}

function twiml(streamUrl: string): string {
  const escaped = streamUrl.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');
  return `<?xml version="1.0" encoding="UTF-8"?>\n<Response><Connect><Stream url="${escaped}" /></Connect></Response>\n`;
}

/** Starts an HTTP server that bridges each Media Stream connecting at `path`. */
export async function startTwilioBridgeServer(options: TwilioBridgeServerOptions): Promise<RunningTwilioBridgeServer> {
  const host = options.host ?? '127.0.0.1';
  const path = options.path ?? '/twilio/media';
  const calls = new Set<TwilioCall>();
  // Twilio's messages are small (a 20 ms media message is about 400 bytes).
  const wss = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024, perMessageDeflate: false });

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://bridge');
    if (url.pathname === '/twiml' && (req.method === 'GET' || req.method === 'POST')) {
      req.resume();
      const publicHost = options.publicHost ?? req.headers.host ?? `localhost`;
      res.writeHead(200, { 'content-type': 'text/xml' });
      res.end(twiml(`wss://${publicHost}${path}`));
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
    wss.handleUpgrade(req, socket, head, (ws: WebSocket) => {
      let bridge: TwilioMediaBridge;
      try {
        bridge = new TwilioMediaBridge(typeof options.bridge === 'function' ? options.bridge(req) : options.bridge);
      } catch (error) {
        ws.close(1011, 'bridge configuration');
        console.error(`twilio bridge: ${(error as Error).message}`);
        return;
      }
      const call: TwilioCall = { bridge, request: req, done: bridgeTwilioSocket(ws, bridge) };
      calls.add(call);
      call.done.then(
        () => calls.delete(call),
        () => calls.delete(call),
      );
      options.onCall?.(call);
    });
  });

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
  const server = await startTwilioBridgeServer({
    host: env.HOST ?? '0.0.0.0',
    port: Number(env.PORT ?? 8080),
    path: env.STREAM_PATH ?? '/twilio/media',
    ...(env.PUBLIC_HOST ? { publicHost: env.PUBLIC_HOST } : {}),
    bridge: { from: env.TRANSLATE_FROM ?? 'en-us', to: env.TRANSLATE_TO ?? 'es-es', pacing, ...service },
    onCall: ({ bridge, done }) => {
      bridge.on('start', (info) => console.log(`call ${info.callSid ?? '?'}: stream ${info.streamSid} started`));
      bridge.on('transcript', (text) => console.log(`  caller:      ${text}`));
      bridge.on('translation', (text) => console.log(`  translation: ${text}`));
      bridge.on('clear', () => console.log('  (caller barged in: playback cleared)'));
      bridge.on('warning', (warning) => console.warn(`  warning: ${warning.message}`));
      done.then(
        () => console.log(`call ended: ${bridge.stats.responses} responses, ${bridge.stats.receivedMs / 1000} s of caller audio`),
        (error: Error) => console.error(`call failed: ${error.message}`),
      );
    },
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
