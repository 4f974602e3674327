/**
 * The relay `rt-translate serve` runs, as a page would meet it: the origins it admits when it
 * listens on every interface (the printed page's own, and the proxy's), and the lifetime of the
 * token it prints. `serve` runs as a child process (it serves the built page); the relay is
 * reached with `ws` clients carrying the Origin header a browser would send.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { once } from 'node:events';
import WebSocket from 'ws';
import { killAllChildren, startSpawnedListener } from './helpers/cli.js';

const SERVICE_KEY = 'rtt-relay-serve-test-key-5e02b7d91c';

afterAll(async () => {
  await killAllChildren();
});

interface Printed {
  url: string;
  realtimeUrl: string;
  token: string;
}

/** The handshake's HTTP status (101 when upgraded) for `token` from a page at `origin`. */
async function handshake(printed: Printed, origin: string): Promise<number> {
  const socket = new WebSocket(`${printed.realtimeUrl}?token=${encodeURIComponent(printed.token)}`, { headers: { origin } });
  socket.on('error', () => undefined);
  const status = await Promise.race([
    once(socket, 'unexpected-response').then(([, response]) => (response as { statusCode: number }).statusCode),
    once(socket, 'open').then(() => 101),
  ]);
  socket.terminate();
  return status;
}

describe('rt-translate serve: the relay it runs', () => {
  it('on every interface (--allow-remote): the printed page (on 127.0.0.1) and the --origin pages may connect, no other', async () => {
    const serve = await startSpawnedListener(['serve', '--host', '0.0.0.0', '--allow-remote', '--origin', 'https://translate.example.com'], '{"url"', {
      RT_TRANSLATE_API_KEY: SERVICE_KEY,
    });
    const printed = JSON.parse(serve.line) as Printed;
    const page = new URL(printed.url).origin;
    expect(page).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(await handshake(printed, page)).toBe(101);
    expect(await handshake(printed, 'https://translate.example.com')).toBe(101);
    expect(await handshake(printed, 'https://elsewhere.example')).toBe(403);
    expect((await serve.stop('SIGINT')).code).toBe(0);
  });

  it('--token-ttl-s with a fraction of a millisecond: the token lives that long, to the millisecond', async () => {
    const before = Date.now();
    const serve = await startSpawnedListener(['serve', '--token-ttl-s', '30.0004'], '{"url"', { RT_TRANSLATE_API_KEY: SERVICE_KEY });
    const printed = JSON.parse(serve.line) as Printed;
    const claims = JSON.parse(Buffer.from(printed.token.split('.')[1]!, 'base64url').toString('utf8')) as { e: number };
    expect(claims.e).toBeGreaterThanOrEqual(before + 30_000);
    expect(claims.e).toBeLessThanOrEqual(Date.now() + 30_000);
    expect(await handshake(printed, new URL(printed.url).origin)).toBe(101);
    expect((await serve.stop('SIGINT')).code).toBe(0);
  });
});
