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
import {
  HttpConnectionError,
  HttpForbiddenError,
  HttpStatusError,
  HttpTimeoutError,
  HttpTlsError,
  HttpRateLimitError,
  ServiceValidationError,
} from '../lib/http/errors.js';
import { selfSignedHttpsServer } from './http-test-helpers.js';

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

/** Servers of single tests (see `serve`), closed after each test. */
const ownServers: Server[] = [];

afterEach(async () => {
  vi.useRealTimers();
  await agent.close();
  for (const server of ownServers.splice(0)) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  await allConnectionsClosed();
});

/** A server of one test answering with `handler`; its base URL. */
async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  const server = createServer(handler);
  ownServers.push(server);
  return listen(server);
}

/** The start of `Range: bytes=N-`, or undefined without one. */
function rangeStart(req: IncomingMessage): number | undefined {
  const match = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
  return match ? Number(match[1]) : undefined;
}

/** Sends the first `bytes` bytes of `file` as a 200 of the whole file, then cuts the connection. */
function cutAfter(res: ServerResponse, file: Buffer, bytes: number, headers: Record<string, string | number> = {}): void {
  res.writeHead(200, { 'content-length': file.length, ...headers });
  res.write(file.subarray(0, bytes), () => res.destroy());
}

/** Sends `file` from byte `start` as a 206. */
function partial(res: ServerResponse, file: Buffer, start: number, headers: Record<string, string | number> = {}): void {
  res.writeHead(206, { 'content-range': `bytes ${start}-${file.length - 1}/${file.length}`, 'content-length': file.length - start, ...headers });
  res.end(file.subarray(start));
}

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

  it('without refreshUrl, fails on an expired URL with HttpForbiddenError that says how to go on and leaks no secret', async () => {
    const file = put(speechFlac);
    clock += TTL_MS + 1;
    const stream = new FlacDownloadStream({ url: file.url, dispatcher: agent, headers: { 'X-Api-Key': API_KEY } });
    const err = (await collect(stream).catch((e: unknown) => e)) as RtTranslateError;
    expect(err).toBeInstanceOf(HttpForbiddenError);
    expect(err.code).toBe('RTT_FORBIDDEN');
    expect(err.status).toBe(403);
    expect(err).toMatchObject({ method: 'GET', path: new URL(file.url).pathname });
    expect(err.message).toMatch(/expired/);
    // The options that exist: refreshUrl here and in openFlacDownload, or the client's own downloads.
    expect(err.message).toMatch(/Give FlacDownloadStream \(or LocalizationClient\.openFlacDownload\) a refreshUrl/);
    expect(err.message).toMatch(/getTtsResultAudio or openSeparationTrack, which get fresh URLs themselves/);
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
    expect(err).toBeInstanceOf(HttpForbiddenError);
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
      expect(err).toBeInstanceOf(HttpTimeoutError);
      expect(err).toMatchObject({ code: 'RTT_TIMEOUT', phase: 'body', timeoutMs: 10_000 });
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

  describe('servers that answer a resumed request their own way', () => {
    it('a 206 that starts before the requested byte (block-aligned) is accepted and the overlap skipped', async () => {
      const ranges: Array<string | undefined> = [];
      const base = await serve((req, res) => {
        ranges.push(req.headers.range);
        const from = rangeStart(req);
        if (from === undefined) return cutAfter(res, speechFlac, 5000, { etag: '"v1"' });
        partial(res, speechFlac, Math.floor(from / 4096) * 4096, { etag: '"v1"' });
      });
      const stream = new FlacDownloadStream({ url: `${base}/f.flac`, dispatcher: agent, retryDelayMs: 0 });
      const seen = events(stream);
      expect((await collect(stream)).equals(speechFlac)).toBe(true);
      expect(ranges).toEqual([undefined, 'bytes=5000-']);
      expect(seen.retries.map((r) => [r.reason, r.offset])).toEqual([['interrupted', 5000]]);
    });

    it('a 206 that starts before the requested byte but is another file (ETag) fails with IntegrityError', async () => {
      const base = await serve((req, res) => {
        const from = rangeStart(req);
        if (from === undefined) return cutAfter(res, speechFlac, 5000, { etag: '"v1"' });
        partial(res, speechFlac, 4096, { etag: '"v2"' });
      });
      const err = await collect(new FlacDownloadStream({ url: `${base}/f.flac`, dispatcher: agent, retryDelayMs: 0 })).catch((e: unknown) => e);
      expect(err).toMatchObject({ name: 'IntegrityError', code: 'RTT_INTEGRITY' });
    });

    it('a 206 that starts after the requested byte fails with ProtocolError: bytes would be missing', async () => {
      const base = await serve((req, res) => {
        if (rangeStart(req) === undefined) return cutAfter(res, speechFlac, 5000, { etag: '"v1"' });
        partial(res, speechFlac, 6000, { etag: '"v1"' });
      });
      const err = (await collect(new FlacDownloadStream({ url: `${base}/f.flac`, dispatcher: agent, retryDelayMs: 0 })).catch(
        (e: unknown) => e,
      )) as RtTranslateError;
      expect(err.code).toBe('RTT_PROTOCOL');
      expect(err.message).toMatch(/starts later, at byte 6000: 1000 bytes would be missing/);
    });

    it.each([false, true])('a 416 saying the file has exactly the bytes received ends the download (decode: %s)', async (decode) => {
      const statuses: number[] = [];
      // The first answer has no length (chunked) and is cut right after its last byte.
      const base = await serve((req, res) => {
        res.on('finish', () => statuses.push(res.statusCode));
        const from = rangeStart(req);
        if (from === undefined) {
          res.writeHead(200, { 'accept-ranges': 'bytes' });
          res.write(speechFlac, () => res.destroy());
          return;
        }
        if (from >= speechFlac.length) {
          res.writeHead(416, { 'content-range': `bytes */${speechFlac.length}`, 'content-length': 0 });
          res.end();
          return;
        }
        partial(res, speechFlac, from);
      });
      const stream = new FlacDownloadStream({ url: `${base}/f.flac`, dispatcher: agent, retryDelayMs: 0, decode });
      const out = await collect(stream);
      expect(out.equals(decode ? speechPcm : speechFlac)).toBe(true);
      expect(stream.totalBytes).toBe(speechFlac.length);
      expect(statuses).toEqual([416]);
    });

    it('a 416 naming another size than the one received is not taken for the end', async () => {
      const base = await serve((req, res) => {
        if (rangeStart(req) === undefined) {
          res.writeHead(200, {});
          res.write(speechFlac.subarray(0, 5000), () => res.destroy());
          return;
        }
        res.writeHead(416, { 'content-range': `bytes */${speechFlac.length}`, 'content-length': 0 });
        res.end();
      });
      const err = await collect(new FlacDownloadStream({ url: `${base}/f.flac`, dispatcher: agent, retryDelayMs: 0 })).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(HttpStatusError);
      expect(err).toMatchObject({ status: 416, code: 'RTT_HTTP' });
    });

    it.each([
      ['1.5', 1500],
      ['0.25', 250],
      ['3', 3000],
      ['86400', 60_000],
    ])('Retry-After: %s on a 503 waits %i ms (fractions read, capped at 60 s)', async (header, delayMs) => {
      const base = await serve((_req, res) => {
        res.writeHead(503, { 'retry-after': header, 'content-type': 'application/json' });
        res.end('{"error":"busy","status":503}');
      });
      const stream = new FlacDownloadStream({ url: `${base}/f.flac`, dispatcher: agent, retryDelayMs: 7 });
      const retried = once(stream, 'retry') as Promise<[FlacDownloadRetry]>;
      stream.resume();
      const [retry] = await retried;
      stream.destroy();
      expect(retry).toEqual({ attempt: 1, offset: 0, reason: 'status', status: 503, delayMs });
    });

    it('a 429 with X-RateLimit-Reset (and no Retry-After) waits what it names', async () => {
      const base = await serve((_req, res) => {
        res.writeHead(429, { 'x-ratelimit-reset': '2', 'content-type': 'application/json' });
        res.end('{"error":"slow down","status":429}');
      });
      const stream = new FlacDownloadStream({ url: `${base}/f.flac`, dispatcher: agent, retryDelayMs: 7 });
      const retried = once(stream, 'retry') as Promise<[FlacDownloadRetry]>;
      stream.resume();
      const [retry] = await retried;
      stream.destroy();
      expect(retry).toMatchObject({ reason: 'status', status: 429, delayMs: 2000 });
    });
  });

  describe("failures in the middle of a download are the HTTP client's error classes", () => {
    const detail = [{ loc: ['query', 'output_type'], msg: 'Input should be raw_bytes or file_url', type: 'enum' }];
    it.each([
      ['422 with detail[]', 422, { detail }, ServiceValidationError, { field: 'outputType', detail, retryable: false, code: 'RTT_VALIDATION' }],
      ['500', 500, { error: 'storage failure', status: 500 }, HttpStatusError, { retryable: true, code: 'RTT_HTTP', serverMessage: 'storage failure' }],
      ['429', 429, { error: 'slow down', status: 429 }, HttpRateLimitError, { retryable: true, code: 'RTT_RATE_LIMIT', retryAfterMs: 0 }],
      ['404', 404, { error: 'gone', status: 404 }, HttpStatusError, { retryable: false, code: 'RTT_HTTP' }],
    ] as const)('%s after 5000 bytes', async (_name, status, body, type, fields) => {
      const base = await serve((req, res) => {
        if (rangeStart(req) === undefined) return cutAfter(res, speechFlac, 5000, { etag: '"v1"' });
        res.writeHead(status, { 'content-type': 'application/json', ...(status === 429 ? { 'retry-after': '0' } : {}) });
        res.end(JSON.stringify(body));
      });
      const stream = new FlacDownloadStream({ url: `${base}/f.flac?sig=secret`, dispatcher: agent, retryDelayMs: 0, maxAttempts: 2 });
      const err = (await collect(stream).catch((e: unknown) => e)) as RtTranslateError;
      expect(err).toBeInstanceOf(type);
      expect(err).toMatchObject({ status, method: 'GET', path: '/f.flac', ...fields });
      expect(err.message).toContain('GET /f.flac (at byte 5000 of the file)');
      expect(err.message).not.toContain('sig=');
      expect(stream.bytesReceived).toBe(5000);
    });

    it('a connection that keeps failing ends with HttpConnectionError naming where it stopped', async () => {
      const base = await serve((req, res) => cutAfter(res, speechFlac, rangeStart(req) === undefined ? 5000 : 0));
      const err = (await collect(new FlacDownloadStream({ url: `${base}/f.flac`, dispatcher: agent, retryDelayMs: 0, maxAttempts: 2 })).catch(
        (e: unknown) => e,
      )) as RtTranslateError;
      expect(err).toBeInstanceOf(HttpConnectionError);
      expect(err).toMatchObject({ code: 'RTT_CONNECTION', retryable: true, phase: 'exchange' });
      expect(err.message).toContain('(at byte 5000 of the file)');
    });

    it('a certificate the client does not trust ends the download at once with HttpTlsError, without retrying', async () => {
      const tls = await selfSignedHttpsServer();
      try {
        const stream = new FlacDownloadStream({ url: `${tls.base}/f.flac`, dispatcher: agent, retryDelayMs: 0, maxAttempts: 5 });
        const seen = events(stream);
        const err = await collect(stream).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(HttpTlsError);
        expect(err).toMatchObject({ code: 'RTT_CONNECTION', phase: 'connect', retryable: false, syscall: 'DEPTH_ZERO_SELF_SIGNED_CERT' });
        expect((err as Error).message).toMatch(/TLS\/certificate problem \(DEPTH_ZERO_SELF_SIGNED_CERT/);
        expect(seen.retries).toEqual([]);
        expect(tls.connections()).toBe(1);
      } finally {
        await tls.close();
      }
    });
  });

  describe('403 by where it came from', () => {
    it('from a storage URL the first URL redirected to: starts again from the first URL, which redirects anew', async () => {
      let issued = 0;
      let refusals = 0;
      const paths: string[] = [];
      const base = await serve((req, res) => {
        const url = new URL(req.url ?? '/', 'http://x');
        paths.push(`${url.pathname}${req.headers.range ? ` ${req.headers.range}` : ''}`);
        if (url.pathname === '/tts-result/7') {
          res.writeHead(302, { location: `/store/f.flac?v=${++issued}` });
          res.end();
          return;
        }
        const from = rangeStart(req);
        if (from === undefined) return cutAfter(res, speechFlac, 3000, { etag: '"e"' });
        // The storage URL handed out for the resume lapses before it is used, once.
        if (refusals++ === 0) {
          res.writeHead(403, { 'content-type': 'application/json' });
          res.end('{"error":"Request has expired","status":403}');
          return;
        }
        partial(res, speechFlac, from, { etag: '"e"' });
      });
      const stream = new FlacDownloadStream({ url: `${base}/tts-result/7`, dispatcher: agent, retryDelayMs: 0, urlKind: 'api' });
      const seen = events(stream);
      expect((await collect(stream)).equals(speechFlac)).toBe(true);
      expect(seen.retries.map((r) => [r.reason, r.offset, r.status])).toEqual([
        ['interrupted', 3000, undefined],
        ['expired', 3000, 403],
      ]);
      expect(paths).toEqual([
        '/tts-result/7',
        '/store/f.flac',
        '/tts-result/7 bytes=3000-',
        '/store/f.flac bytes=3000-',
        '/tts-result/7 bytes=3000-',
        '/store/f.flac bytes=3000-',
      ]);
    });

    it('urlKind api: a 403 from the URL itself means no permission and fails at once, without a refreshUrl hint', async () => {
      const base = await serve((_req, res) => {
        res.writeHead(403, { 'content-type': 'application/json' });
        res.end('{"error":"Run 7 belongs to another API key.","status":403}');
      });
      const refreshUrl = vi.fn(async () => `${base}/other`);
      const stream = new FlacDownloadStream({ url: `${base}/tts-result/7`, dispatcher: agent, retryDelayMs: 0, urlKind: 'api', refreshUrl });
      const seen = events(stream);
      const err = (await collect(stream).catch((e: unknown) => e)) as RtTranslateError;
      expect(err).toBeInstanceOf(HttpForbiddenError);
      expect(err.message).toBe(
        'GET /tts-result/7 was refused with 403: the API key has no permission for this resource. The service said: Run 7 belongs to another API key.',
      );
      expect(refreshUrl).not.toHaveBeenCalled();
      expect(seen.retries).toEqual([]);
    });

    it('a fresh URL from refreshUrl that is refused too is named as such once the attempts are spent', async () => {
      const base = await serve((_req, res) => {
        res.writeHead(403, { 'content-type': 'application/json' });
        res.end('{"error":"AccessDenied","status":403}');
      });
      let n = 0;
      const stream = new FlacDownloadStream({
        url: `${base}/f.flac?v=0`,
        dispatcher: agent,
        retryDelayMs: 0,
        maxAttempts: 3,
        refreshUrl: async () => `${base}/f.flac?v=${++n}`,
      });
      const err = (await collect(stream).catch((e: unknown) => e)) as RtTranslateError;
      expect(err).toBeInstanceOf(HttpForbiddenError);
      expect(err.message).toMatch(/although it came fresh from refreshUrl\(\)/);
      expect(n).toBe(2);
    });
  });

  describe('If-Range without an ETag (RFC 9110 13.1.5)', () => {
    const changed = Buffer.from(speechFlac);
    changed[changed.length - 100] = changed[changed.length - 100]! ^ 0x55;
    const modified = 'Tue, 03 Nov 2026 10:00:00 GMT';
    const modifiedAgain = 'Tue, 03 Nov 2026 10:05:00 GMT';

    /** A server whose file is replaced (same size, new Last-Modified) after the first response, honouring If-Range dates. */
    async function changingServer(date: string, etag?: string): Promise<{ base: string; ifRanges: Array<string | undefined> }> {
      const ifRanges: Array<string | undefined> = [];
      let requests = 0;
      const base = await serve((req, res) => {
        const first = requests++ === 0;
        const [file, lastModified] = first ? [speechFlac, modified] : [changed, modifiedAgain];
        const headers: Record<string, string> = { 'last-modified': lastModified, date: first ? date : 'Tue, 03 Nov 2026 10:06:00 GMT' };
        if (etag) headers.etag = etag;
        if (first) return cutAfter(res, file, 5000, headers);
        ifRanges.push(req.headers['if-range'] as string | undefined);
        const from = rangeStart(req);
        // RFC 9110: a range is sent only when If-Range, if any, matches the current validator.
        const ifRange = req.headers['if-range'];
        if (from !== undefined && (ifRange === undefined || ifRange === lastModified)) return partial(res, file, from, headers);
        res.writeHead(200, { 'content-length': file.length, ...headers });
        res.end(file);
      });
      return { base, ifRanges };
    }

    it('sends Last-Modified as If-Range when Date is a second or more later, so a changed file is not spliced', async () => {
      const { base, ifRanges } = await changingServer('Tue, 03 Nov 2026 10:00:07 GMT');
      const err = await collect(new FlacDownloadStream({ url: `${base}/f.flac`, dispatcher: agent, retryDelayMs: 0 })).catch((e: unknown) => e);
      expect(ifRanges).toEqual([modified]);
      expect(err).toMatchObject({ name: 'IntegrityError', code: 'RTT_INTEGRITY' });
    });

    it('sends no If-Range for a Last-Modified within the second of Date (a weak validator), and still refuses the other file', async () => {
      const { base, ifRanges } = await changingServer(modified);
      const err = await collect(new FlacDownloadStream({ url: `${base}/f.flac`, dispatcher: agent, retryDelayMs: 0 })).catch((e: unknown) => e);
      expect(ifRanges).toEqual([undefined]);
      expect(err).toMatchObject({ name: 'IntegrityError', code: 'RTT_INTEGRITY' });
    });

    it('sends neither a weak ETag nor a date (an entity tag exists) as If-Range', async () => {
      const { base, ifRanges } = await changingServer('Tue, 03 Nov 2026 10:00:07 GMT', 'W/"weak"');
      await collect(new FlacDownloadStream({ url: `${base}/f.flac`, dispatcher: agent, retryDelayMs: 0 })).catch(() => undefined);
      expect(ifRanges).toEqual([undefined]);
    });
  });
});
