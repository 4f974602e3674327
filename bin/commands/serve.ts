/**
 * `rt-translate serve`: the browser page and the realtime relay on one HTTP server, until SIGINT
 * or SIGTERM. The relay at `/v1/realtime` holds the service key (the usual settings, or the
 * embedded emulator when no realtime URL is configured); the page gets a token in its address.
 * Prints exactly one JSON line once it listens: `{"url","realtimeUrl","token","speakerUrl","listenerUrl"}`:
 * the page for one person, and the pages of a room (`--room`): one speaker, any number of
 * listeners who pick their languages, one session per language however many listen.
 *
 * Loopback only by default. Another interface takes `--allow-remote` and the page origins that
 * may connect (`--origin`, the address the TLS reverse proxy serves), since a page on a plain
 * http address of another machine gets no microphone and anyone who can reach it could use it.
 */
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRealtimeRelay, ENV_API_KEY, ENV_REALTIME_URL } from '../../lib/index.js';
import { MAX_TOKEN_TTL_MS, isLoopbackHost } from '../../lib/protocol.js';
import { EXIT_OK, UsageError, intFlag, numberFlag, parseCommandLine, untilStopped, type CliIo } from '../cli.js';
import { collectPageModules, servePageRequest } from '../page-files.js';
import { ACCESS_OPTIONS, connect, resolveAccess } from '../realtime-access.js';

export const SERVE_USAGE = `Usage: rt-translate serve [options]      a web page for live translation, and its relay

  --host H              interface to listen on (default 127.0.0.1)
  --port N              port (default 0: a free port)
  --origin O            a page origin allowed to connect (repeatable), e.g. the https://
                        address of a reverse proxy in front of this server
  --allow-remote        listen on an interface other than loopback (needs --origin)
  --token-ttl-s S       lifetime of the page's token, seconds (default 43200: 12 hours;
                        at most 86400)
  --max-sessions N      sessions at once through the relay (default 4)
  --room NAME           the room of the speaker and listener pages (default main)
  --max-listeners N     listener connections at once in the room, one per language a page
                        listens to (default 100)
  --max-languages N     languages translated at once in the room, one session each (default 4)
\${apiKeyUsage()}
                        (default: ${ENV_API_KEY}; the relay holds it, the page never sees it)
  --realtime-url URL    or env ${ENV_REALTIME_URL}: the realtime host; without one, the
                        embedded emulator
  --allow-insecure      allow plain-text ws:// to a realtime host that is not loopback
  --emulator            start the embedded emulator on loopback and use it
  -h, --help

Prints {"url":"http://HOST:PORT/?token=TOKEN","realtimeUrl":"ws://HOST:PORT/v1/realtime",
"token":"TOKEN","speakerUrl":"...","listenerUrl":"..."} on one line of standard output once it
listens, then runs until SIGINT or SIGTERM. Open the url in a browser; or open the speakerUrl
for the one who talks and share the listenerUrl with the audience: each listener picks
languages, and each language costs one session however many listen. The page never sees the service key: the relay holds it and
accepts the token (valid for --token-ttl-s). Microphones need https off loopback: put a TLS
reverse proxy in front (see the README, "Realtime in the browser").`;

const OPTIONS = {
  ...ACCESS_OPTIONS,
  host: { type: 'string' },
  port: { type: 'string' },
  origin: { type: 'string', multiple: true },
  'allow-remote': { type: 'boolean' },
  'token-ttl-s': { type: 'string' },
  'max-sessions': { type: 'string' },
  room: { type: 'string' },
  'max-listeners': { type: 'string' },
  'max-languages': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** `--origin` values as browsers send them: scheme, host and port. */
function parseOrigins(values: string[]): string[] {
  return values.map((value) => {
    let url: URL | undefined;
    try {
      url = new URL(value);
    } catch {
      // reported below
    }
    if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:') || url.origin === 'null' || url.href !== `${url.origin}/`) {
      throw new UsageError(`--origin expects an origin such as https://translate.example.com (scheme, host and port only) (got "${value}").`);
    }
    return url.origin;
  });
}

function hostForUrl(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

export async function runServe(args: string[], io: CliIo, signal?: AbortSignal): Promise<number> {
  const { values } = parseCommandLine({ args, options: OPTIONS, strict: true }, 'rt-translate serve --help');
  if (values.help) {
    io.stdout.write(`${SERVE_USAGE}\n`);
    return EXIT_OK;
  }
  const host = values.host ?? '127.0.0.1';
  const origins = parseOrigins(values.origin ?? []);
  if (!isLoopbackHost(host) && (values['allow-remote'] !== true || origins.length === 0)) {
    throw new UsageError(
      `--host ${host} is not a loopback address: listening there takes --allow-remote and the page origins allowed to connect, --origin ORIGIN (repeatable), e.g. the https:// address of the TLS proxy in front.`,
    );
  }
  const port = intFlag(values.port, '--port', 0);
  if (port !== undefined && port > 65535) throw new UsageError(`--port expects 0 to 65535 (got "${values.port}").`);
  const ttlS = numberFlag(values['token-ttl-s'], '--token-ttl-s', 1) ?? 43_200;
  if (ttlS * 1000 > MAX_TOKEN_TTL_MS) throw new UsageError(`--token-ttl-s expects 1 to ${MAX_TOKEN_TTL_MS / 1000} seconds (got "${values['token-ttl-s']}").`);
  const maxSessions = intFlag(values['max-sessions'], '--max-sessions', 1) ?? 4;
  const room = values.room ?? 'main';
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(room)) throw new UsageError(`--room expects 1 to 64 letters, digits, - or _ (got "${room}").`);
  const maxListeners = intFlag(values['max-listeners'], '--max-listeners', 1) ?? 100;
  const maxLanguages = intFlag(values['max-languages'], '--max-languages', 1) ?? 4;
  if (maxLanguages > 64) throw new UsageError(`--max-languages expects 1 to 64 (got "${values['max-languages']}").`);
  // Standard input is free: --api-key-file - reads the key from it.
  const access = await resolveAccess({ ...values, input: '' }, io);
  const modules = await collectPageModules();

  const upstream = await connect(access, io);
  const server = createServer((req, res) => {
    if (!servePageRequest(modules, req, res)) res.writeHead(404, { 'content-type': 'text/plain' }).end('Not found\n');
  });
  let relay: ReturnType<typeof createRealtimeRelay> | undefined;
  try {
    server.listen(port ?? 0, host);
    await once(server, 'listening');
    const origin = `http://${hostForUrl(host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host)}:${(server.address() as AddressInfo).port}`;
    relay = createRealtimeRelay({
      server,
      path: '/v1/realtime',
      ...(upstream.apiKey !== undefined ? { apiKey: upstream.apiKey } : {}),
      ...(upstream.realtimeUrl !== undefined ? { realtimeUrl: upstream.realtimeUrl } : {}),
      ...(values['allow-insecure'] === true ? { allowInsecure: true } : {}),
      // The printed page's own origin besides --origin: on 0.0.0.0 it is a loopback address.
      ...(origins.length > 0 ? { allowedOrigins: [origin, ...origins] } : {}),
      maxSessions,
      maxSessionsPerToken: maxSessions,
      rooms: { path: '/v1/rooms', maxRooms: 1, maxListenersPerRoom: maxListeners, maxLanguagesPerRoom: maxLanguages },
      // The page sends its token in the address; a client written for the service (the official
      // SDK's) sends it where it sends a key, in its first session.update, and is taken too.
    });
    const ttlMs = Math.round(ttlS * 1000);
    const token = relay.mintToken({ ttlMs });
    const realtimeUrl = `${origin.replace(/^http/, 'ws')}/v1/realtime`;
    // The listener link is shared by the whole audience: its token holds as many connections as the room.
    const speakerToken = relay.mintToken({ ttlMs, room, role: 'speaker' });
    const listenerToken = relay.mintToken({ ttlMs, room, role: 'listener', maxSessions: maxListeners });
    const speakerUrl = `${origin}/?role=speaker&token=${encodeURIComponent(speakerToken)}`;
    const listenerUrl = `${origin}/?role=listener&token=${encodeURIComponent(listenerToken)}`;
    io.stdout.write(`${JSON.stringify({ url: `${origin}/?token=${encodeURIComponent(token)}`, realtimeUrl, token, speakerUrl, listenerUrl })}\n`);
    io.stderr.write(`rt-translate serve: open ${origin}/?token=... (the url printed above) in a browser; Ctrl-C stops.\n`);
    await untilStopped(io, signal);
  } finally {
    await relay?.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await upstream.emulator?.close();
  }
  return EXIT_OK;
}
