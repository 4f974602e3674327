/**
 * A forwarding HTTP server in front of an emulator that keeps every POST body it passed on, so a
 * test can count how many times each job was created (the body names the job) even across
 * processes: the batch under test talks to the proxy, over real sockets, and may be killed.
 * Emits `post` (path, body) as each POST arrives, before it is forwarded.
 */
import { EventEmitter } from 'node:events';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface CountingProxy extends EventEmitter {
  /** The emulator's base URL as seen through the proxy. */
  baseUrl: string;
  /** Every POST passed on: its path, body and the status answered (undefined until answered), in order of arrival. */
  posts: Array<{ path: string; body: string; status?: number }>;
  close(): Promise<void>;
}

/** Starts a proxy forwarding to `target` (the emulator's origin, `http://127.0.0.1:PORT`). */
export async function startCountingProxy(target: string): Promise<CountingProxy> {
  const events = new EventEmitter() as CountingProxy;
  const upstream = new URL(target);
  const posts: CountingProxy['posts'] = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const post = req.method === 'POST' ? { path: req.url ?? '', body: body.toString('utf8'), status: undefined as number | undefined } : undefined;
      if (post !== undefined) {
        posts.push(post);
        events.emit('post', post.path, post.body);
      }
      const forwarded = request(
        { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: { ...req.headers, host: upstream.host } },
        (answer) => {
          if (post !== undefined) post.status = answer.statusCode;
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      forwarded.on('error', () => res.destroy());
      forwarded.end(body);
    });
  });
  // A client killed mid-request leaves a socket the proxy must not trip over.
  server.on('clientError', (_error, socket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(events, {
    baseUrl: `http://127.0.0.1:${port}`,
    posts,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}
