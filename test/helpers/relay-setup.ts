/**
 * A relay on a bare `http.Server` on 127.0.0.1 (port 0), in front of a service of the test's
 * choosing (the emulator, the reference server, a scripted fake), with everything it started
 * closed by `closeAll()` in reverse order; `closedAfterEachTest()` closes it all after each test
 * of a file and checks that nothing was left open.
 */
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setImmediate as turn } from 'node:timers/promises';
import { afterEach, beforeEach } from 'vitest';
import { countHandles, expectNoLeakedHandles, type HandleCounts } from './handles.js';
import { startEmulator, type EmulatorOptions, type RunningEmulator } from '../../lib/emulator/server.js';
import { createRealtimeRelay, type RealtimeRelay, type RealtimeRelayOptions } from '../../lib/index.js';
import { BrowserClient, type BrowserOptions } from './browser-client.js';
import { startFakeRealtimeServer, type FakePeer, type FakeRealtimeServer } from './fake-realtime-server.js';

/** The service key the relay holds in tests (long enough that a leak of it is unmistakable). */
export const SERVICE_KEY = 'relay-test-service-key-7c1f0e9a5d';
/** A fixed token secret, so tests can mint tokens the way another relay would. */
export const RELAY_SECRET = 'relay-test-secret-of-at-least-32-bytes';

export interface RunningRelay {
  relay: RealtimeRelay;
  server: Server;
  port: number;
  /** `ws://127.0.0.1:PORT`: a realtime host for a client of the service (which appends /v1/realtime). */
  host: string;
  /** `ws://127.0.0.1:PORT/v1/realtime`. */
  url: string;
  /** A browser on the relay, with a fresh token in the query unless `token` says otherwise (null: none). */
  connect(options?: BrowserOptions & { token?: string | null; query?: string }): Promise<BrowserClient>;
}

export class Closers {
  readonly #closers: Array<() => unknown> = [];

  add(close: () => unknown): void {
    this.#closers.push(close);
  }

  async closeAll(): Promise<void> {
    for (const close of this.#closers.splice(0).reverse()) await close();
  }

  /** The emulator as the service, accepting `SERVICE_KEY`. */
  async emulator(options: EmulatorOptions = {}): Promise<RunningEmulator> {
    const running = await startEmulator({ apiKeys: [SERVICE_KEY], ...options });
    this.add(() => running.close());
    return running;
  }

  /** A scripted service (it accepts any key). */
  async fake(): Promise<FakeRealtimeServer> {
    const server = await startFakeRealtimeServer();
    this.add(() => server.close());
    return server;
  }
}

/**
 * A `Closers` for the tests of a file: the handles are counted before each test; after it, once
 * `beforeClose` (if any) has run and all is closed, every socket, timer and server the relay and
 * the test opened must be gone.
 */
export function closedAfterEachTest(beforeClose?: () => void): Closers {
  const closers = new Closers();
  let baseline: HandleCounts;
  beforeEach(() => {
    baseline = countHandles();
  });
  afterEach(async () => {
    beforeClose?.();
    await closers.closeAll();
    await expectNoLeakedHandles(baseline);
  });
  return closers;
}

/** An HTTP server on 127.0.0.1 (port 0) answering with `onRequest` (404 to all by default). */
export async function listen(
  closers: Closers,
  onRequest: RequestListener = (_req, res) => res.writeHead(404).end(),
): Promise<{ server: Server; port: number }> {
  const server = createServer(onRequest);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.add(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return { server, port: (server.address() as AddressInfo).port };
}

export async function startRelay(
  closers: Closers,
  options: Partial<RealtimeRelayOptions> & { realtimeUrl: string },
  onRequest?: RequestListener,
): Promise<RunningRelay> {
  const { server, port } = await listen(closers, onRequest);
  const relay = createRealtimeRelay({ server, apiKey: SERVICE_KEY, secret: RELAY_SECRET, ...options });
  closers.add(() => relay.close());
  const host = `ws://127.0.0.1:${port}`;
  const url = `${host}${relay.path}`;
  return {
    relay,
    server,
    port,
    host,
    url,
    async connect(connectOptions = {}) {
      const token = connectOptions.token === undefined ? relay.mintToken() : connectOptions.token;
      const query = [token === null ? undefined : `token=${token}`, connectOptions.query].filter(Boolean).join('&');
      const client = await BrowserClient.connect(query ? `${url}?${query}` : url, connectOptions);
      closers.add(() => client.ws.terminate());
      return client;
    },
  };
}

/**
 * Resolves once `predicate` holds, checked after each turn of the event loop (for state that no
 * event announces, such as the relay's counts); fails after 10 s of real time naming `what`.
 */
export async function until(predicate: () => boolean, what: string): Promise<void> {
  const deadline = process.hrtime.bigint() + 10_000_000_000n;
  while (!predicate()) {
    if (process.hrtime.bigint() > deadline) throw new Error(`Still waiting for ${what}.`);
    await turn();
  }
}

/** A session's configuration, as a browser sends it. */
export const SESSION = { source_language: 'en-us', target_language: 'es-es' };

/** A relay in front of a scripted service, a browser with its session open, and the service's side of it. */
export async function openSession(
  closers: Closers,
  options: Partial<RealtimeRelayOptions> = {},
): Promise<{ r: RunningRelay; service: FakeRealtimeServer; browser: BrowserClient; peer: FakePeer }> {
  const service = await closers.fake();
  const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl, ...options });
  const browser = await r.connect();
  browser.send({ type: 'session.update', session: SESSION });
  const peer = await service.nextPeer();
  await peer.waitForEvent('session.update');
  peer.sendSessionCreated();
  await browser.waitForEvent('session.created');
  return { r, service, browser, peer };
}
