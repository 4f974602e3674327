/**
 * `ResumableDownload`, the byte layer, over loopback sockets against a small file server written
 * here (it shares no code with the library): resuming across dropped connections with the
 * validators, the jittered back-off, and `destroy()` as one transition out of any state.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { inspect } from 'node:util';
import { Agent } from 'undici';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { RtTranslateError } from '../lib/errors.js';
import { ResumableDownload, type DownloadRetry } from '../lib/http/resumable-download.js';

const FILE = Buffer.alloc(300_000);
for (let i = 0; i < FILE.length; i++) FILE[i] = (i * 7 + (i >> 8)) & 0xff;
const OTHER = Buffer.from(FILE);
OTHER[OTHER.length - 1] = OTHER[OTHER.length - 1]! ^ 0xff;
const MODIFIED = 'Tue, 03 Nov 2026 10:00:00 GMT';
const LATER = 'Tue, 03 Nov 2026 10:00:30 GMT';

interface Seen {
  range?: string;
  ifRange?: string;
  status?: number;
}

interface FileServer {
  base: string;
  seen: Seen[];
}

/** What the server does with request number `n` (from 0): the file it serves, its headers, and where it cuts. */
type Plan = (n: number) => { file?: Buffer; headers?: Record<string, string>; cutAfter?: number; status?: number; retryAfter?: string };

let servers: Server[] = [];
let sockets: Set<Socket>;
let agent: Agent;

beforeEach(() => {
  servers = [];
  sockets = new Set();
  agent = new Agent();
});

afterEach(async () => {
  vi.restoreAllMocks();
  vi.useRealTimers();
  if (!agent.closed) await agent.close();
  for (const server of servers) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  await Promise.all([...sockets].map((socket) => (socket.closed ? undefined : once(socket, 'close'))));
});

/** Serves files by `plan`, honouring `Range` and `If-Range` (an ETag or a date) as RFC 9110 says. */
async function fileServer(plan: Plan): Promise<FileServer> {
  const seen: Seen[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const entry: Seen = {};
    if (req.headers.range) entry.range = req.headers.range;
    if (req.headers['if-range']) entry.ifRange = String(req.headers['if-range']);
    seen.push(entry);
    res.on('finish', () => (entry.status = res.statusCode));
    res.on('close', () => (entry.status ??= res.statusCode));
    const step = plan(seen.length - 1);
    if (step.status !== undefined) {
      res.writeHead(step.status, { 'content-type': 'application/json', ...(step.retryAfter ? { 'retry-after': step.retryAfter } : {}) });
      res.end(JSON.stringify({ error: 'busy', status: step.status }));
      return;
    }
    const file = step.file ?? FILE;
    const headers = step.headers ?? {};
    const match = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
    const ifRange = req.headers['if-range'];
    const current = ifRange === undefined || ifRange === headers.etag || ifRange === headers['last-modified'];
    const start = match && current ? Number(match[1]) : 0;
    const body = file.subarray(start);
    if (start > 0) {
      res.writeHead(206, { ...headers, 'content-range': `bytes ${start}-${file.length - 1}/${file.length}`, 'content-length': body.length });
    } else {
      res.writeHead(200, { ...headers, 'content-length': file.length });
    }
    if (step.cutAfter === undefined) {
      res.end(body);
    } else {
      res.write(body.subarray(0, step.cutAfter), () => res.destroy());
    }
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

async function collect(download: ResumableDownload): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of download) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function retries(download: ResumableDownload): DownloadRetry[] {
  const seen: DownloadRetry[] = [];
  download.on('retry', (info) => seen.push(info));
  return seen;
}

describe('ResumableDownload', () => {
  it('requests nothing before it is read', async () => {
    const server = await fileServer(() => ({}));
    const download = new ResumableDownload({ url: `${server.base}/f.bin`, dispatcher: agent });
    expect(download.state).toBe('idle');
    download.destroy();
    await once(download, 'close');
    expect(server.seen).toEqual([]);
    expect(download.state).toBe('closed');
  });

  it.each([
    ['a strong ETag', { etag: '"v1"' }, '"v1"'],
    ['a Last-Modified that is a strong validator (no ETag)', { 'last-modified': MODIFIED, date: LATER }, MODIFIED],
    ['a weak ETag (not sent)', { etag: 'W/"v1"' }, undefined],
    ['a Last-Modified within the second of Date (not sent)', { 'last-modified': MODIFIED, date: MODIFIED }, undefined],
  ] as const)('resumes across dropped connections, each byte once, with If-Range from %s', async (_name, headers, validator) => {
    const server = await fileServer((n) => ({ headers, cutAfter: n < 2 ? 70_000 : undefined }));
    const download = new ResumableDownload({ url: `${server.base}/f.bin`, dispatcher: agent, retryDelayMs: 0 });
    const seen = retries(download);
    expect((await collect(download)).equals(FILE)).toBe(true);
    expect(server.seen).toEqual([
      { status: 200 },
      { range: 'bytes=70000-', ...(validator ? { ifRange: validator } : {}), status: 206 },
      { range: 'bytes=140000-', ...(validator ? { ifRange: validator } : {}), status: 206 },
    ]);
    expect(seen).toEqual([
      { attempt: 1, offset: 70_000, reason: 'interrupted', delayMs: 0 },
      { attempt: 1, offset: 140_000, reason: 'interrupted', delayMs: 0 },
    ]);
    expect(download.bytesReceived).toBe(FILE.length);
    expect(download.totalBytes).toBe(FILE.length);
    expect(download.state).toBe('closed');
  });

  it('a file replaced between attempts is not spliced: the server sends it whole, the download fails with IntegrityError', async () => {
    const server = await fileServer((n) => (n === 0 ? { headers: { etag: '"v1"' }, cutAfter: 70_000 } : { file: OTHER, headers: { etag: '"v2"' } }));
    const download = new ResumableDownload({ url: `${server.base}/f.bin`, dispatcher: agent, retryDelayMs: 0 });
    const received: Buffer[] = [];
    download.on('data', (chunk: Buffer) => received.push(chunk));
    const [err] = (await once(download, 'error').catch((e: unknown) => [e])) as [RtTranslateError];
    expect(err).toMatchObject({ name: 'IntegrityError', code: 'RTT_INTEGRITY' });
    expect(err.message).toBe(`The file at ${server.base}/f.bin changed while it was being downloaded (at byte 70000); start the download again.`);
    expect(server.seen.map((s) => [s.ifRange, s.status])).toEqual([
      [undefined, 200],
      ['"v1"', 200],
    ]);
    expect(Buffer.concat(received).equals(FILE.subarray(0, 70_000))).toBe(true);
  });

  it('backs off with jitter from retryDelayMs, doubling per failure in a row', async () => {
    const random = vi.spyOn(Math, 'random').mockReturnValueOnce(0).mockReturnValueOnce(0.5);
    const server = await fileServer((n) => (n < 2 ? { status: 503 } : {}));
    const download = new ResumableDownload({ url: `${server.base}/f.bin`, dispatcher: agent, retryDelayMs: 40 });
    const seen = retries(download);
    expect((await collect(download)).equals(FILE)).toBe(true);
    // 40 ms, then 80 ms, each a point in its upper half: 20 + 20 * 0, 40 + 40 * 0.5.
    expect(seen.map((r) => [r.reason, r.status, r.attempt, r.delayMs])).toEqual([
      ['status', 503, 1, 20],
      ['status', 503, 2, 60],
    ]);
    expect(random).toHaveBeenCalledTimes(2);
  });

  it('destroy() while backing off clears the timer and asks nothing more', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const server = await fileServer(() => ({ status: 503, retryAfter: '30' }));
    const download = new ResumableDownload({ url: `${server.base}/f.bin`, dispatcher: agent });
    const retried = once(download, 'retry') as Promise<[DownloadRetry]>;
    download.resume();
    const [retry] = await retried;
    expect(retry).toMatchObject({ reason: 'status', status: 503, delayMs: 30_000 });
    expect(download.state).toBe('between');
    const timers = vi.getTimerCount();
    const closed = once(download, 'close');
    download.destroy();
    await closed;
    expect(vi.getTimerCount()).toBe(timers - 1);
    vi.advanceTimersByTime(60_000);
    // Closing the agent waits for any request it still has to send.
    await agent.close();
    expect(server.seen).toHaveLength(1);
    expect(download.state).toBe('closed');
  });

  it('destroy() while reading a stalled body aborts the request and releases the connection', async () => {
    // A server that sends a first part and then nothing: the body stalls.
    const stalling = createServer((_req, res) => {
      res.writeHead(200, { 'content-length': FILE.length });
      res.write(FILE.subarray(0, 5000));
    });
    stalling.on('connection', (socket) => sockets.add(socket));
    servers.push(stalling);
    await new Promise<void>((resolve) => stalling.listen(0, '127.0.0.1', resolve));
    const download = new ResumableDownload({ url: `http://127.0.0.1:${(stalling.address() as AddressInfo).port}/f.bin`, dispatcher: agent });
    await once(download, 'data');
    expect(download.state).toBe('reading');
    const carrying = [...sockets].filter((socket) => !socket.closed);
    download.destroy();
    await once(download, 'close');
    await Promise.all(carrying.map((socket) => (socket.closed ? undefined : once(socket, 'close'))));
    expect(carrying.length).toBeGreaterThan(0);
    expect(carrying.every((socket) => socket.destroyed)).toBe(true);
  });

  it('destroy() while waiting for the response headers aborts the request and releases the connection', async () => {
    // A server that takes the request and never answers.
    const silent = createServer(() => undefined);
    const asked = once(silent, 'request');
    silent.on('connection', (socket) => sockets.add(socket));
    servers.push(silent);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const download = new ResumableDownload({ url: `http://127.0.0.1:${(silent.address() as AddressInfo).port}/f.bin`, dispatcher: agent });
    download.resume();
    await asked;
    expect(download.state).toBe('requesting');
    const carrying = [...sockets];
    const closed = once(download, 'close');
    download.destroy();
    await closed;
    await Promise.all(carrying.map((socket) => (socket.closed ? undefined : once(socket, 'close'))));
    expect(carrying).toHaveLength(1);
    expect(carrying[0]!.destroyed).toBe(true);
  });

  it('a full reader pauses the body, and its wait does not count against bodyTimeoutMs', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const server = await fileServer(() => ({}));
    const highWaterMark = 16 * 1024;
    const download = new ResumableDownload({ url: `${server.base}/f.bin`, dispatcher: agent, highWaterMark, bodyTimeoutMs: 1000 });
    const seen = retries(download);
    // Nothing is consumed: each turn waits for the next push until the buffer is full.
    while (download.readableLength < highWaterMark) {
      const pushed = once(download, 'readable');
      download.read(0);
      await pushed;
    }
    expect(download.state).toBe('reading');
    expect(download.bytesReceived).toBe(download.readableLength);
    // The buffer and at most one more network read, not the 300 kB file.
    expect(download.bytesReceived).toBeLessThanOrEqual(highWaterMark + 64 * 1024);
    vi.advanceTimersByTime(60_000);
    expect((await collect(download)).equals(FILE)).toBe(true);
    expect(seen).toEqual([]);
    expect(server.seen).toEqual([{ status: 200 }]);
  });

  it('shows neither its headers nor the URL query when inspected or serialized', () => {
    const download = new ResumableDownload({ url: 'http://127.0.0.1:9/f.bin?sig=s3cr3t-signature', headers: { 'x-api-key': 'sk-test-abcdef0123' } });
    for (const shown of [inspect(download, { showHidden: true, depth: 10 }), JSON.stringify(download)]) {
      expect(shown).not.toContain('s3cr3t');
      expect(shown).not.toContain('sk-test');
      expect(shown).toContain('http://127.0.0.1:9/f.bin');
    }
    download.destroy();
  });
});
