import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Readable } from 'node:stream';
import { setImmediate as tick } from 'node:timers/promises';
import { inspect } from 'node:util';
import { Agent } from 'undici';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { encodeFlac } from '../lib/audio/flac-encoder.js';
import { createFileStore, type FileStore, type StoredFile } from '../lib/emulator/http/files.js';
import { synthesizeSpeechPcm } from '../lib/emulator/synth.js';
import { FlacDownloadStream, type FlacDownloadRetry, type FlacFormat } from '../lib/http/flac-download-stream.js';
import type { RtTranslateError } from '../lib/errors.js';

const TTL_MS = 60_000;
const API_KEY = 'sk-test-0123456789abcdef';
let clock = 1_700_000_000_000;

interface Logged {
  server: 'a' | 'b';
  path: string;
  range?: string;
  ifRange?: string;
  apiKey?: string;
  status?: number;
}

let store: FileStore;
let serverA: Server;
let serverB: Server;
let baseA = '';
let baseB = '';
let log: Logged[] = [];
const sockets = new Set<Socket>();
let agent: Agent;
let flakyCalls = 0;
let flakyTarget = '';

function handler(name: 'a' | 'b') {
  return (req: IncomingMessage, res: ServerResponse): void => {
    const url = new URL(req.url ?? '/', 'http://x');
    const entry: Logged = { server: name, path: url.pathname };
    if (req.headers.range) entry.range = req.headers.range;
    if (req.headers['if-range']) entry.ifRange = String(req.headers['if-range']);
    if (req.headers['x-api-key']) entry.apiKey = String(req.headers['x-api-key']);
    log.push(entry);
    res.on('close', () => (entry.status = res.statusCode));
    if (url.pathname === '/flaky') {
      flakyCalls++;
      if (flakyCalls === 1) {
        res.writeHead(503, { 'retry-after': '0', 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: 'busy', status: 503 }));
      } else {
        res.writeHead(302, { location: flakyTarget });
        res.end();
      }
      return;
    }
    if (!store.handle(req, res)) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'Not found', status: 404 }));
    }
  };
}

async function listen(server: Server): Promise<string> {
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Resolves once every connection the servers accepted has closed. */
async function allConnectionsClosed(): Promise<void> {
  await Promise.all([...sockets].map((socket) => (socket.closed ? undefined : once(socket, 'close'))));
}

const speechPcm = synthesizeSpeechPcm('The quick brown fox jumps over the lazy dog, twice over and then once more.', {
  sampleRate: 24000,
});
const speechFlac = encodeFlac(speechPcm, { sampleRate: 24000, channels: 1 });
const stereoPcm = Buffer.alloc(48000 * 4);
for (let i = 0; i < 48000; i++) {
  stereoPcm.writeInt16LE(speechPcm.readInt16LE((i % (speechPcm.length / 2)) * 2), i * 4);
  stereoPcm.writeInt16LE(Math.round(3000 * Math.sin(i / 11)), i * 4 + 2);
}
const stereoFlac = encodeFlac(stereoPcm, { sampleRate: 48000, channels: 2 });

beforeAll(async () => {
  store = createFileStore({ urlTtlMs: TTL_MS, now: () => clock }, () => baseA);
  serverA = createServer(handler('a'));
  serverB = createServer(handler('b'));
  baseA = await listen(serverA);
  baseB = await listen(serverB);
});

afterAll(async () => {
  for (const server of [serverA, serverB]) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

beforeEach(() => {
  log = [];
  store.faults = {};
  agent = new Agent();
});

afterEach(async () => {
  vi.useRealTimers();
  await agent.close();
  await allConnectionsClosed();
});

async function collect(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function put(bytes: Buffer, name = 'result.flac'): StoredFile {
  return store.put(bytes, 'audio/flac', name);
}

function events(stream: FlacDownloadStream): { formats: FlacFormat[]; retries: FlacDownloadRetry[] } {
  const seen = { formats: [] as FlacFormat[], retries: [] as FlacDownloadRetry[] };
  stream.on('format', (f) => seen.formats.push(f));
  stream.on('retry', (r) => seen.retries.push(r));
  return seen;
}

describe('FlacDownloadStream', () => {
  it('streams the FLAC bytes and announces the format from STREAMINFO', async () => {
    const file = put(speechFlac);
    const stream = new FlacDownloadStream({ url: file.url, dispatcher: agent });
    const seen = events(stream);
    expect((await collect(stream)).equals(speechFlac)).toBe(true);
    expect(seen.formats).toEqual([
      { sampleRate: 24000, channels: 1, bitsPerSample: 16, totalSamples: speechPcm.length / 2, md5: speechFlac.subarray(26, 42).toString('hex') },
    ]);
    expect(stream.bytesReceived).toBe(speechFlac.length);
    expect(stream.totalBytes).toBe(speechFlac.length);
    expect(log.map((l) => l.range)).toEqual([undefined]);
  });

  for (const [name, flac, pcm] of [
    ['mono', speechFlac, speechPcm],
    ['stereo', stereoFlac, stereoPcm],
  ] as const) {
    it(`decodes ${name} to the original PCM16 on the fly`, async () => {
      const stream = new FlacDownloadStream({ url: put(flac).url, dispatcher: agent, decode: true });
      const seen = events(stream);
      expect((await collect(stream)).equals(pcm)).toBe(true);
      expect(seen.formats[0]?.channels).toBe(name === 'mono' ? 1 : 2);
    });
  }

  for (const decode of [false, true]) {
    it(`resumes with Range after dropped connections (decode: ${decode})`, async () => {
      const file = put(speechFlac);
      store.faults = { dropAfterBytes: 10_000, count: 2 };
      const stream = new FlacDownloadStream({ url: file.url, dispatcher: agent, decode, retryDelayMs: 0 });
      const seen = events(stream);
      const out = await collect(stream);
      expect(out.equals(decode ? speechPcm : speechFlac)).toBe(true);
      expect(log.map((l) => [l.range, l.ifRange, l.status])).toEqual([
        [undefined, undefined, 200],
        ['bytes=10000-', file.etag, 206],
        ['bytes=20000-', file.etag, 206],
      ]);
      expect(seen.retries.map((r) => [r.reason, r.offset, r.attempt])).toEqual([
        ['interrupted', 10_000, 1],
        ['interrupted', 20_000, 1],
      ]);
    });
  }

  it('restarts and skips the bytes already delivered when the server ignores Range', async () => {
    const file = put(stereoFlac);
    store.faults = { dropAfterBytes: 15_000, count: 1, ignoreRange: true };
    const stream = new FlacDownloadStream({ url: file.url, dispatcher: agent, decode: true, retryDelayMs: 0 });
    expect((await collect(stream)).equals(stereoPcm)).toBe(true);
    expect(log.map((l) => [l.range, l.status])).toEqual([
      [undefined, 200],
      ['bytes=15000-', 200],
    ]);
  });

  it('asks refreshUrl for a fresh URL when the presigned URL has expired', async () => {
    const file = put(speechFlac);
    clock += TTL_MS + 1;
    const refreshUrl = vi.fn(async () => store.presign(file.path));
    const stream = new FlacDownloadStream({ url: file.url, dispatcher: agent, refreshUrl });
    const seen = events(stream);
    expect((await collect(stream)).equals(speechFlac)).toBe(true);
    expect(refreshUrl).toHaveBeenCalledTimes(1);
    expect(log.map((l) => l.status)).toEqual([403, 200]);
    expect(seen.retries).toEqual([{ attempt: 1, offset: 0, reason: 'expired', status: 403, delayMs: 0 }]);
  });

  it('refreshes an URL that expired mid-download and goes on from where it was', async () => {
    const file = put(speechFlac);
    store.faults = { dropAfterBytes: 10_000 };
    const refreshUrl = vi.fn(async () => store.presign(file.path));
    const stream = new FlacDownloadStream({ url: file.url, dispatcher: agent, refreshUrl, decode: true, retryDelayMs: 0 });
    stream.once('data', () => (clock += TTL_MS + 1));
    expect((await collect(stream)).equals(speechPcm)).toBe(true);
    expect(refreshUrl).toHaveBeenCalledTimes(1);
    expect(log.map((l) => [l.range, l.status])).toEqual([
      [undefined, 200],
      ['bytes=10000-', 403],
      ['bytes=10000-', 206],
    ]);
  });

  it('without refreshUrl, fails on an expired URL with ForbiddenError that says how to go on and leaks no secret', async () => {
    const file = put(speechFlac);
    clock += TTL_MS + 1;
    const stream = new FlacDownloadStream({ url: file.url, dispatcher: agent, headers: { 'X-Api-Key': API_KEY } });
    const err = (await collect(stream).catch((e: unknown) => e)) as RtTranslateError;
    expect(err.name).toBe('ForbiddenError');
    expect(err.code).toBe('RTT_FORBIDDEN');
    expect(err.status).toBe(403);
    expect(err.message).toMatch(/expired/);
    expect(err.message).toMatch(/refreshUrl/);
    expect(err.serverMessage).toMatch(/expired/);
    const sig = new URL(file.url).searchParams.get('sig')!;
    for (const text of [err.message, err.stack ?? '', JSON.stringify(err)]) {
      expect(text).not.toContain(API_KEY);
      expect(text).not.toContain(sig);
    }
    expect(log.map((l) => [l.apiKey, l.status])).toEqual([[API_KEY, 403]]);
  });

  it('reports a refreshUrl() that fails as ForbiddenError with its reason', async () => {
    const file = put(speechFlac);
    clock += TTL_MS + 1;
    const stream = new FlacDownloadStream({
      url: file.url,
      dispatcher: agent,
      refreshUrl: async () => {
        throw new Error('token service down');
      },
    });
    const err = (await collect(stream).catch((e: unknown) => e)) as RtTranslateError;
    expect(err.code).toBe('RTT_FORBIDDEN');
    expect(err.message).toMatch(/refreshUrl\(\) failed: token service down/);
  });

  it('sends the caller headers only to the origin of the first URL', async () => {
    const file = put(speechFlac);
    store.faults = { dropAfterBytes: 5000 };
    // The fresh URL points at another origin (another server sharing the store).
    const refreshUrl = async (): Promise<string> => store.presign(file.path).replace(baseA, baseB);
    const stream = new FlacDownloadStream({ url: file.url, dispatcher: agent, refreshUrl, headers: { 'x-api-key': API_KEY }, retryDelayMs: 0 });
    stream.once('data', () => (clock += TTL_MS + 1));
    expect((await collect(stream)).equals(speechFlac)).toBe(true);
    expect(log.map((l) => [l.server, l.apiKey, l.status])).toEqual([
      ['a', API_KEY, 200],
      ['a', API_KEY, 403],
      ['b', undefined, 206],
    ]);
  });

  it('shows neither its headers nor the URL signature when inspected or serialized', async () => {
    const file = put(speechFlac);
    const stream = new FlacDownloadStream({ url: file.url, dispatcher: agent, headers: { 'x-api-key': API_KEY } });
    const signature = new URL(file.url).searchParams.get('sig')!;
    for (const shown of [inspect(stream, { depth: 10, showHidden: true }), JSON.stringify(stream)]) {
      expect(shown).not.toContain(API_KEY);
      expect(shown).not.toContain(signature);
    }
    expect(inspect(stream)).toContain(new URL(file.url).pathname);
    stream.destroy();
  });

  it('retries a 503 (honouring Retry-After) and follows a redirect', async () => {
    flakyCalls = 0;
    flakyTarget = put(speechFlac).url;
    const stream = new FlacDownloadStream({ url: `${baseA}/flaky`, dispatcher: agent, headers: { 'x-api-key': API_KEY } });
    const seen = events(stream);
    expect((await collect(stream)).equals(speechFlac)).toBe(true);
    expect(seen.retries).toEqual([{ attempt: 1, offset: 0, reason: 'status', status: 503, delayMs: 0 }]);
    expect(log.map((l) => [l.path.startsWith('/_files/') ? 'file' : l.path, l.status])).toEqual([
      ['/flaky', 503],
      ['/flaky', 302],
      ['file', 200],
    ]);
  });

  it('fails with IntegrityError when the decoded audio does not match the STREAMINFO MD5', async () => {
    const corrupt = Buffer.from(speechFlac);
    corrupt[26] = corrupt[26]! ^ 0xff;
    const stream = new FlacDownloadStream({ url: put(corrupt).url, dispatcher: agent, decode: true });
    const seen = events(stream);
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    const [err] = (await once(stream, 'error')) as [RtTranslateError];
    expect(err.name).toBe('IntegrityError');
    expect(err.code).toBe('RTT_INTEGRITY');
    expect(err.message).toMatch(/MD5/);
    expect(seen.formats[0]?.md5).toBe(corrupt.subarray(26, 42).toString('hex'));
    expect(Buffer.concat(chunks).equals(speechPcm)).toBe(true);
  });

  it('fails with an HTTP error for a missing file, without retrying', async () => {
    const stream = new FlacDownloadStream({ url: `${baseA}/nothing.flac`, dispatcher: agent, retryDelayMs: 0 });
    const err = (await collect(stream).catch((e: unknown) => e)) as RtTranslateError;
    expect(err.code).toBe('RTT_HTTP');
    expect(err.status).toBe(404);
    expect(err.serverMessage).toBe('Not found');
    expect(log).toHaveLength(1);
  });

  it('gives up with ConnectionError after maxAttempts attempts without progress', async () => {
    const file = put(speechFlac);
    store.faults = { dropAfterBytes: 0, count: 10 };
    const stream = new FlacDownloadStream({ url: file.url, dispatcher: agent, maxAttempts: 3, retryDelayMs: 0 });
    const err = (await collect(stream).catch((e: unknown) => e)) as RtTranslateError;
    expect(err.code).toBe('RTT_CONNECTION');
    expect(err.message).not.toContain('sig=');
    expect(log).toHaveLength(3);
  });

  it('refuses plain http to a host that is not loopback', () => {
    expect(() => new FlacDownloadStream({ url: 'http://example.com/a.flac' })).toThrow(/allowInsecure/);
  });

  it('stops reading the response while the reader is behind (backpressure)', async () => {
    const noise = Buffer.alloc(48000 * 4 * 10);
    let seed = 1;
    for (let i = 0; i < noise.length; i += 2) {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      noise.writeInt16LE((seed >>> 16) - 32768, i);
    }
    const flac = encodeFlac(noise, { sampleRate: 48000, channels: 2 });
    const stream = new FlacDownloadStream({ url: put(flac).url, dispatcher: agent, highWaterMark: 16 * 1024 });
    const chunks: Buffer[] = [];
    let consumed = 0;
    let maxAhead = 0;
    // A slow reader: 4 KiB per event-loop turn.
    for (;;) {
      const chunk = stream.read(4096) as Buffer | null;
      if (chunk) {
        chunks.push(chunk);
        consumed += chunk.length;
        maxAhead = Math.max(maxAhead, stream.bytesReceived - consumed);
        await tick();
        continue;
      }
      if (stream.readableEnded) break;
      await new Promise<void>((resolve, reject) => {
        const done = (): void => {
          stream.off('readable', done).off('end', done).off('error', fail);
          resolve();
        };
        const fail = (err: Error): void => {
          stream.off('readable', done).off('end', done).off('error', fail);
          reject(err);
        };
        stream.on('readable', done).on('end', done).on('error', fail);
      });
    }
    expect(flac.length).toBeGreaterThan(1_800_000);
    expect(Buffer.concat(chunks).equals(flac)).toBe(true);
    // Without backpressure the whole file would be received long before a reader this slow
    // caught up; with it, the stream holds at most its buffer plus one network read.
    expect(maxAhead).toBeLessThan(320 * 1024);
  });

  it('aborts through the AbortSignal and releases the connection', async () => {
    const file = put(speechFlac);
    store.faults = { stallAfterBytes: 5000 };
    const controller = new AbortController();
    const stream = new FlacDownloadStream({ url: file.url, dispatcher: agent, signal: controller.signal });
    await once(stream, 'data');
    const carrying = [...sockets];
    const failed = once(stream, 'error');
    const closed = new Promise((resolve) => stream.once('close', resolve));
    controller.abort();
    const [err] = (await failed) as [RtTranslateError];
    expect(err.code).toBe('RTT_ABORTED');
    await closed;
    expect(stream.destroyed).toBe(true);
    // The stalled response can only end by the client letting go of its connection.
    expect(carrying).toHaveLength(1);
    await Promise.all(carrying.map((socket) => (socket.closed ? undefined : once(socket, 'close'))));
    expect(carrying.every((socket) => socket.destroyed)).toBe(true);
  });

  it('fails at once when the signal is already aborted, without a request', async () => {
    const stream = new FlacDownloadStream({ url: put(speechFlac).url, dispatcher: agent, signal: AbortSignal.abort() });
    const err = (await collect(stream).catch((e: unknown) => e)) as RtTranslateError;
    expect(err.code).toBe('RTT_ABORTED');
    expect(log).toHaveLength(0);
  });

  it('destroy() ends the download quietly and releases the connection', async () => {
    const file = put(stereoFlac);
    store.faults = { stallAfterBytes: 5000 };
    const stream = new FlacDownloadStream({ url: file.url, dispatcher: agent, decode: true });
    const errors: unknown[] = [];
    stream.on('error', (e) => errors.push(e));
    const formatted = once(stream, 'format');
    stream.resume();
    await formatted;
    const carrying = [...sockets];
    const closed = once(stream, 'close');
    stream.destroy();
    await closed;
    expect(errors).toEqual([]);
    expect(carrying).toHaveLength(1);
    await Promise.all(carrying.map((socket) => (socket.closed ? undefined : once(socket, 'close'))));
    expect(carrying.every((socket) => socket.destroyed)).toBe(true);
  });

  describe('body idle timeout', () => {
    async function stalledStream(maxAttempts: number): Promise<{ stream: FlacDownloadStream; chunks: Buffer[] }> {
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      const file = put(speechFlac);
      store.faults = { stallAfterBytes: 5000 };
      const stream = new FlacDownloadStream({ url: file.url, dispatcher: agent, bodyTimeoutMs: 10_000, maxAttempts, retryDelayMs: 0 });
      const chunks: Buffer[] = [];
      let received = 0;
      const stalled = new Promise<void>((resolve) => {
        stream.on('data', (chunk: Buffer) => {
          chunks.push(chunk);
          received += chunk.length;
          if (received === 5000) resolve();
        });
      });
      await stalled;
      await tick();
      return { stream, chunks };
    }

    it('fails with TimeoutError when the body stalls and no attempt is left', async () => {
      const { stream } = await stalledStream(1);
      const failed = once(stream, 'error');
      vi.advanceTimersByTime(9_999);
      await tick();
      expect(stream.destroyed).toBe(false);
      vi.advanceTimersByTime(1);
      const [err] = (await failed) as [RtTranslateError & { timeoutMs: number }];
      expect(err.code).toBe('RTT_TIMEOUT');
      expect(err.timeoutMs).toBe(10_000);
      expect(err.message).toMatch(/byte 5000/);
    });

    it('resumes after a stalled body when attempts are left', async () => {
      const { stream, chunks } = await stalledStream(3);
      const retried = once(stream, 'retry');
      vi.advanceTimersByTime(10_000);
      const [retry] = (await retried) as [FlacDownloadRetry];
      expect(retry).toMatchObject({ reason: 'timeout', offset: 5000 });
      await once(stream, 'end');
      expect(Buffer.concat(chunks).equals(speechFlac)).toBe(true);
      expect(log.map((l) => l.range)).toEqual([undefined, 'bytes=5000-']);
    });
  });
});
