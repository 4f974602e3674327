import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createFileStore, parseRange, type FileStore } from '../lib/emulator/http/files.js';

let clock = 1_700_000_000_000;
let server: Server;
let baseUrl = '';
let store: FileStore;
let agent: Agent;
const bytes = Buffer.from(Array.from({ length: 10_000 }, (_, i) => (i * 31) & 0xff));

beforeAll(async () => {
  store = createFileStore({ urlTtlMs: 60_000, now: () => clock }, () => baseUrl);
  server = createServer((req, res) => {
    if (!store.handle(req, res)) {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('not the store');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  agent = new Agent();
});

afterAll(async () => {
  await agent.close();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(() => {
  store.faults = {};
});

async function get(url: string, headers: Record<string, string> = {}, method: 'GET' | 'HEAD' | 'POST' = 'GET') {
  const res = await request(url, { method, headers, dispatcher: agent });
  const body = Buffer.from(await res.body.arrayBuffer());
  return { status: res.statusCode, headers: res.headers, body };
}

describe('createFileStore', () => {
  it('stores a file under a presigned absolute URL that downloads without an API key', async () => {
    const file = store.put(bytes, 'audio/flac', 'result 1.flac');
    expect(file.path).toMatch(/^\/_files\/[A-Za-z0-9_-]+\/result%201\.flac$/);
    const url = new URL(file.url);
    expect(url.origin).toBe(baseUrl);
    expect(url.pathname).toBe(file.path);
    expect(url.searchParams.get('expires')).toBe(String(clock + 60_000));
    expect(url.searchParams.get('sig')).toMatch(/^[A-Za-z0-9_-]{43}$/);

    const res = await get(file.url);
    expect(res.status).toBe(200);
    expect(res.body.equals(bytes)).toBe(true);
    expect(res.headers['content-type']).toBe('audio/flac');
    expect(res.headers['content-length']).toBe('10000');
    expect(res.headers['accept-ranges']).toBe('bytes');
    expect(res.headers.etag).toBe(file.etag);
    expect(file.etag).toMatch(/^"[^"]+"$/);
  });

  it('answers HEAD with the headers and no body', async () => {
    const file = store.put(bytes, 'audio/flac', 'a.flac');
    const res = await get(file.url, {}, 'HEAD');
    expect(res.status).toBe(200);
    expect(res.headers['content-length']).toBe('10000');
    expect(res.headers.etag).toBe(file.etag);
    expect(res.body.length).toBe(0);
  });

  it('refuses an expired URL with 403 and the interface error body, and presign() issues a fresh one', async () => {
    const file = store.put(bytes, 'audio/flac', 'a.flac');
    clock += 60_001;
    const res = await get(file.url);
    expect(res.status).toBe(403);
    expect(res.headers['content-type']).toBe('application/json');
    const body = JSON.parse(res.body.toString()) as { error: string; status: number };
    expect(body.status).toBe(403);
    expect(body.error).toMatch(/expired/);

    const fresh = store.presign(file.path);
    expect(new URL(fresh).searchParams.get('expires')).toBe(String(clock + 60_000));
    const again = await get(fresh);
    expect(again.status).toBe(200);
    expect(again.body.equals(bytes)).toBe(true);
  });

  for (const [name, tamper] of [
    [
      'a changed signature',
      (u: URL) =>
        u.searchParams.set(
          'sig',
          u.searchParams.get('sig')!.replace(/^./, (c) => (c === 'A' ? 'B' : 'A')),
        ),
    ],
    ['a later expiry', (u: URL) => u.searchParams.set('expires', String(Number(u.searchParams.get('expires')) + 1000))],
    ['no signature', (u: URL) => u.searchParams.delete('sig')],
    ['another file path', (u: URL) => (u.pathname = u.pathname.replace(/[^/]+$/, 'other.flac'))],
  ] as const) {
    it(`refuses ${name} with 403`, async () => {
      const file = store.put(bytes, 'audio/flac', 'a.flac');
      const url = new URL(file.url);
      tamper(url);
      const res = await get(url.href);
      expect(res.status).toBe(403);
      expect(JSON.parse(res.body.toString())).toEqual({ error: 'Invalid or missing URL signature.', status: 403 });
    });
  }

  it('presign() refuses a path it does not hold', () => {
    expect(() => store.presign('/_files/nope/x.flac')).toThrow(/No stored file/);
  });

  for (const [range, status, start, end] of [
    ['bytes=100-', 206, 100, 9999],
    ['bytes=100-199', 206, 100, 199],
    ['bytes=9000-20000', 206, 9000, 9999],
    ['bytes=-10', 206, 9990, 9999],
    ['bytes=0-', 206, 0, 9999],
  ] as const) {
    it(`serves Range ${range} as ${status} with Content-Range`, async () => {
      const file = store.put(bytes, 'audio/flac', 'a.flac');
      const res = await get(file.url, { range });
      expect(res.status).toBe(status);
      expect(res.headers['content-range']).toBe(`bytes ${start}-${end}/10000`);
      expect(res.headers['content-length']).toBe(String(end - start + 1));
      expect(res.body.equals(bytes.subarray(start, end + 1))).toBe(true);
    });
  }

  it('answers a range past the end with 416 and the size', async () => {
    const file = store.put(bytes, 'audio/flac', 'a.flac');
    const res = await get(file.url, { range: 'bytes=10000-' });
    expect(res.status).toBe(416);
    expect(res.headers['content-range']).toBe('bytes */10000');
  });

  it('honours If-Range: the matching ETag gets the range, another gets the whole file', async () => {
    const file = store.put(bytes, 'audio/flac', 'a.flac');
    const matching = await get(file.url, { range: 'bytes=500-', 'if-range': file.etag });
    expect(matching.status).toBe(206);
    expect(matching.body.equals(bytes.subarray(500))).toBe(true);
    const other = await get(file.url, { range: 'bytes=500-', 'if-range': '"something-else"' });
    expect(other.status).toBe(200);
    expect(other.body.equals(bytes)).toBe(true);
  });

  it('parses ranges it cannot serve as "whole file"', () => {
    expect(parseRange('bytes=1-2,5-6', 100)).toBeUndefined();
    expect(parseRange('items=1-2', 100)).toBeUndefined();
    expect(parseRange('bytes=5-2', 100)).toBeUndefined();
    expect(parseRange('bytes=-0', 100)).toBe('unsatisfiable');
  });

  it('answers other methods with 405', async () => {
    const file = store.put(bytes, 'audio/flac', 'a.flac');
    const res = await get(file.url, {}, 'POST');
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe('GET, HEAD');
  });

  it('leaves other paths to the caller', async () => {
    const res = await get(`${baseUrl}/apis/tts-result/1`);
    expect(res.status).toBe(404);
    expect(res.body.toString()).toBe('not the store');
  });

  it('drops the connection after B body bytes for the next N downloads, then serves normally', async () => {
    const file = store.put(bytes, 'audio/flac', 'a.flac');
    store.faults = { dropAfterBytes: 1234, count: 2 };
    for (let i = 0; i < 2; i++) {
      const res = await request(file.url, { dispatcher: agent });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-length']).toBe('10000');
      const received: Buffer[] = [];
      const err = await (async () => {
        for await (const chunk of res.body) received.push(chunk as Buffer);
      })().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Error);
      expect(Buffer.concat(received).equals(bytes.subarray(0, 1234))).toBe(true);
    }
    expect(store.faults).toEqual({ ignoreRange: undefined });
    const ok = await get(file.url);
    expect(ok.body.equals(bytes)).toBe(true);
  });

  it('counts a dropped body from the start of the range served', async () => {
    const file = store.put(bytes, 'audio/flac', 'a.flac');
    store.faults = { dropAfterBytes: 100 };
    const res = await request(file.url, { dispatcher: agent, headers: { range: 'bytes=5000-' } });
    expect(res.statusCode).toBe(206);
    const received: Buffer[] = [];
    await (async () => {
      for await (const chunk of res.body) received.push(chunk as Buffer);
    })().catch(() => undefined);
    expect(Buffer.concat(received).equals(bytes.subarray(5000, 5100))).toBe(true);
  });

  it('stalls after B body bytes and keeps the connection open until the client leaves', async () => {
    const file = store.put(bytes, 'audio/flac', 'a.flac');
    store.faults = { stallAfterBytes: 300 };
    const res = await request(file.url, { dispatcher: agent });
    const received: Buffer[] = [];
    let total = 0;
    for await (const chunk of res.body) {
      received.push(chunk as Buffer);
      total += (chunk as Buffer).length;
      if (total >= 300) break;
    }
    expect(Buffer.concat(received).equals(bytes.subarray(0, 300))).toBe(true);
    expect(store.faults).toEqual({ ignoreRange: undefined });
  });

  it('ignores Range while ignoreRange is set', async () => {
    const file = store.put(bytes, 'audio/flac', 'a.flac');
    store.faults = { ignoreRange: true };
    const res = await get(file.url, { range: 'bytes=100-' });
    expect(res.status).toBe(200);
    expect(res.headers['accept-ranges']).toBe('none');
    expect(res.headers['content-range']).toBeUndefined();
    expect(res.body.equals(bytes)).toBe(true);
  });

  it('forgets the oldest file beyond maxFiles', () => {
    const small = createFileStore({ urlTtlMs: 1000, maxFiles: 2 }, () => 'http://127.0.0.1:1');
    const a = small.put(Buffer.from('a'), 'text/plain', 'a');
    const b = small.put(Buffer.from('b'), 'text/plain', 'b');
    const c = small.put(Buffer.from('c'), 'text/plain', 'c');
    expect(small.get(a.path)).toBeUndefined();
    expect(small.get(b.path)?.bytes.toString()).toBe('b');
    expect(small.get(c.path)?.bytes.toString()).toBe('c');
  });
});
