/**
 * `rt-translate serve` without a browser: what it refuses before listening, what it serves (the
 * page and the modules the page imports, nothing else, none holding the key), and the relay it
 * runs behind the printed token and the page's origin. The page itself runs in Chromium in
 * test/browser/ (`npm run test:browser`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { once } from 'node:events';
import WebSocket from 'ws';
import { killAllChildren, runCli, startSpawnedListener, type SpawnedListener } from './helpers/cli.js';

const SERVICE_KEY = 'rtt-serve-test-key-2b8e61c04a';

afterAll(async () => {
  await killAllChildren();
});

describe('rt-translate serve: refused before it listens (exit 2)', () => {
  it.each([
    [['--host', '0.0.0.0']],
    [['--host', '0.0.0.0', '--allow-remote']],
    [['--host', '0.0.0.0', '--origin', 'https://translate.example.com']],
    [['--host', '192.0.2.10', '--origin', 'https://translate.example.com']],
  ])('a host that is not loopback without --allow-remote and --origin: %j', async (args) => {
    const result = await runCli(['serve', ...args]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/not a loopback address.*--allow-remote.*--origin/);
    expect(result.stdout.length).toBe(0);
  });

  it.each(['translate.example.com', 'https://translate.example.com/page', 'ftp://x.example'])('--origin %s, which is not an origin', async (origin) => {
    const result = await runCli(['serve', '--origin', origin]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--origin expects an origin such as https://translate.example.com');
  });
});

describe('rt-translate serve: running', () => {
  let serve: SpawnedListener;
  let printed: { url: string; realtimeUrl: string; token: string; speakerUrl: string; listenerUrl: string };
  let origin: string;

  beforeAll(async () => {
    serve = await startSpawnedListener(['serve'], '{"url"', { RT_TRANSLATE_API_KEY: SERVICE_KEY });
    printed = JSON.parse(serve.line) as typeof printed;
    origin = new URL(printed.url).origin;
  });

  afterAll(async () => {
    const result = await serve.stop('SIGINT');
    expect(result.code).toBe(0);
    expect(result.stdout.toString().trim().split('\n')).toEqual([serve.line]);
  });

  it('prints one JSON line: the page with its token, and the relay', () => {
    expect(Object.keys(printed).sort()).toEqual(['listenerUrl', 'realtimeUrl', 'speakerUrl', 'token', 'url']);
    expect(printed.url).toBe(`${origin}/?token=${encodeURIComponent(printed.token)}`);
    expect(printed.realtimeUrl).toBe(`${origin.replace('http:', 'ws:')}/v1/realtime`);
    // The room's pages: each with a token for its role in the room, none the page's own.
    const room = (url: string) => {
      const page = new URL(url);
      const claims = JSON.parse(Buffer.from(page.searchParams.get('token')!.split('.')[1]!, 'base64url').toString('utf8')) as { r: string; p: string };
      return { origin: page.origin, role: page.searchParams.get('role'), claims: [claims.r, claims.p] };
    };
    expect(room(printed.speakerUrl)).toEqual({ origin, role: 'speaker', claims: ['main', 's'] });
    expect(room(printed.listenerUrl)).toEqual({ origin, role: 'listener', claims: ['main', 'l'] });
  });

  it('serves the page and the modules it imports, and nothing else of the package; none holds the key', async () => {
    const page = await fetch(`${origin}/`);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.headers.get('content-security-policy')).toContain("default-src 'self'");
    const html = await page.text();
    // Follow the page's script and every relative import, as a browser would.
    const queue = [...html.matchAll(/<script type="module" src="([^"]+)"/g)].map((m) => new URL(m[1]!, origin).href);
    queue.push(`${origin}/js/lib/browser/worklet.js`);
    const fetched = new Map<string, string>();
    while (queue.length > 0) {
      const url = queue.pop()!;
      if (fetched.has(url)) continue;
      const response = await fetch(url);
      expect({ url, status: response.status }).toEqual({ url, status: 200 });
      expect(response.headers.get('content-type')).toMatch(/^text\/javascript/);
      const text = await response.text();
      fetched.set(url, text);
      for (const [, spec] of text.matchAll(/^(?:import|export)\b[^;'"]*?\bfrom\s*['"]([^'"]+)['"]/gm)) {
        expect(spec).toMatch(/^\.\.?\//); // a browser cannot load a bare or node: import
        queue.push(new URL(spec!, url).href);
      }
    }
    expect([...fetched.keys()].some((url) => url.endsWith('/lib/browser/translator.js'))).toBe(true);
    expect([...fetched.keys()].some((url) => url.endsWith('/lib/audio/resampler-design.js'))).toBe(true);
    for (const text of [html, ...fetched.values()]) expect(text).not.toContain(SERVICE_KEY);
    for (const path of ['/js/lib/emulator/server.js', '/js/lib/index.js', '/js/../package.json', '/package.json', '/js/bin/commands/serve.js']) {
      expect({ path, status: (await fetch(`${origin}${path}`)).status }).toEqual({ path, status: 404 });
    }
  });

  /** Opens the relay's socket with `query` and an Origin header; the handshake's status, or the socket. */
  async function openRelay(query: string, pageOrigin: string): Promise<{ status: number; socket?: WebSocket }> {
    const socket = new WebSocket(`${printed.realtimeUrl}${query}`, { headers: { origin: pageOrigin } });
    const refused = once(socket, 'unexpected-response').then(([, response]) => ({ status: (response as { statusCode: number }).statusCode }));
    const opened = once(socket, 'open').then(() => ({ status: 101, socket }));
    const result = await Promise.race([refused, opened]);
    if (result.status !== 101) socket.terminate();
    return result;
  }

  it("the relay runs a session for the printed token from the page's origin", async () => {
    const { status, socket } = await openRelay(`?token=${encodeURIComponent(printed.token)}`, origin);
    expect(status).toBe(101);
    socket!.send(JSON.stringify({ type: 'session.update', session: { source_language: 'en-us', target_language: 'es-es' } }));
    const [data] = await once(socket!, 'message');
    expect(JSON.parse(String(data))).toMatchObject({ type: 'session.created' });
    expect(String(data)).not.toContain(SERVICE_KEY);
    socket!.close();
    await once(socket!, 'close');
  });

  it('the printed token also works where a client of the service puts its key: auth.api_key of the first session.update', async () => {
    const { status, socket } = await openRelay('', origin);
    expect(status).toBe(101);
    socket!.send(JSON.stringify({ type: 'session.update', session: { source_language: 'en-us', target_language: 'es-es' }, auth: { api_key: printed.token } }));
    const [data] = await once(socket!, 'message');
    expect(JSON.parse(String(data))).toMatchObject({ type: 'session.created' });
    socket!.close();
    await once(socket!, 'close');
  });

  it('the relay refuses a connection without the token, and one from another origin', async () => {
    // No credential at the handshake: the first session.update must carry one, and this one does not.
    const { status, socket } = await openRelay('', origin);
    expect(status).toBe(101);
    const closed = once(socket!, 'close');
    socket!.send(JSON.stringify({ type: 'session.update', session: { source_language: 'en-us', target_language: 'es-es' } }));
    const [error] = await once(socket!, 'message');
    expect(JSON.parse(String(error))).toMatchObject({ type: 'error' });
    expect((await closed)[0]).toBe(1008);
    expect((await openRelay('?token=not-a-token', origin)).status).toBeGreaterThanOrEqual(400);
    expect((await openRelay(`?token=${encodeURIComponent(printed.token)}`, 'https://elsewhere.example')).status).toBe(403);
  });
});
