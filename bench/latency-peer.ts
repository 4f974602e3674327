/**
 * The other process of `latency.bench.ts`: a `ws` server speaking just enough of the realtime
 * protocol. It answers `session.update` with `session.created`, then sends that session a 20 ms
 * frame of translated audio (960 bytes of PCM16) every 20 ms at real time, as a JSON
 * `response.audio.delta` (base64 `delta`) or as a binary frame. The first 8 bytes of each frame
 * are the time it was sent (a float64, `performance.timeOrigin + performance.now()`, the clock
 * the bench reads too). Pings are answered by `ws` itself. Driven over the fork IPC channel:
 *
 * - on start it sends `{ type: 'ready', url }`;
 * - `{ type: 'mode', mode }` ('json' or 'binary'): sessions created from now on are sent their
 *   audio that way, on a new 20 ms clock (the previous one stops), and it answers `{ type: 'mode' }`;
 * - `{ type: 'exit' }` closes everything.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { WebSocketServer, type WebSocket } from 'ws';
import { FrameClock, serviceFrames } from './concurrency-shared.js';

type Mode = 'json' | 'binary';

const speech = serviceFrames();
let mode: Mode = 'json';
let clock = new FrameClock();

const server = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: false });
await new Promise<void>((resolve) => server.once('listening', () => resolve()));

/** Starts sending audio to a session that was just created. */
function stream(ws: WebSocket, as: Mode): void {
  let at = Math.floor(Math.random() * speech.length);
  clock.add(() => {
    if (ws.readyState !== ws.OPEN) return;
    const frame = Buffer.from(speech[at]!);
    at = (at + 1) % speech.length;
    frame.writeDoubleLE(performance.timeOrigin + performance.now(), 0);
    if (as === 'binary') ws.send(frame, { binary: true });
    else ws.send(`{"type":"response.audio.delta","response_id":"resp_1","item_id":"item_1","delta":"${frame.toString('base64')}"}`);
  });
}

server.on('connection', (ws) => {
  const as = mode;
  ws.on('error', () => {});
  ws.on('message', (data, isBinary) => {
    if (isBinary) return;
    const event = JSON.parse(data.toString()) as { type?: string; session?: Record<string, unknown> };
    if (event.type !== 'session.update') return;
    const session = { ...event.session, id: randomUUID() };
    ws.send(JSON.stringify({ type: 'session.created', session }));
    ws.send(JSON.stringify({ type: 'session.updated', session }));
    stream(ws, as);
  });
});

const send = (message: unknown): void => {
  process.send?.(message);
};

process.on('message', (message: { type: string; mode?: Mode }) => {
  if (message.type === 'mode') {
    clock.stop();
    clock = new FrameClock();
    mode = message.mode ?? 'json';
    send({ type: 'mode' });
  } else if (message.type === 'exit') {
    clock.stop();
    for (const ws of server.clients) ws.terminate();
    server.close(() => process.exit(0));
  }
});

const { port } = server.address() as { port: number };
send({ type: 'ready', url: `ws://127.0.0.1:${port}` });
// The bench that started this process is gone (it failed or was stopped): so is this one.
process.on('disconnect', () => process.exit(0));
