/**
 * A child process of `append.bench.ts`: sends audio to the emulator, one configuration per
 * request, and reports its own CPU time per run. Run as a separate process so that `ws` loads
 * with or without `bufferutil` (`WS_NO_BUFFER_UTIL`), as the parent decides.
 *
 * Request `{ url, mode, writeBytes, maxAppendBytes, totalBytes, rounds }`: `mode` `stream`
 * writes `totalBytes` of silence to one `RealtimeTranslateStream` in writes of `writeBytes`
 * (appends of at most `maxAppendBytes`), `bare` sends the same bytes from a bare `ws` client in
 * appends of `maxAppendBytes` built by hand. A run ends when every byte has left the socket.
 * Answer: `{ cpuMs }`, the median over the rounds.
 */
import { once } from 'node:events';
import { WebSocket } from 'ws';
import { RealtimeTranslateStream } from '../lib/realtime/realtime-translate-stream.js';
import { cpuMsNow, median, terminateAll } from './harness.js';

interface Request {
  url: string;
  mode: 'stream' | 'bare';
  writeBytes: number;
  maxAppendBytes: number;
  totalBytes: number;
  rounds: number;
}

const KEY = process.env.APPEND_KEY ?? '';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function drained(bufferedAmount: () => number): Promise<void> {
  while (bufferedAmount() > 0) await sleep(1);
}

async function viaStream(request: Request, audio: Buffer): Promise<number[]> {
  const stream = new RealtimeTranslateStream({
    from: 'en-us',
    to: 'es-es',
    apiKey: KEY,
    realtimeUrl: request.url,
    maxAppendBytes: request.maxAppendBytes,
    maxSocketBufferBytes: 4 * 1024 * 1024,
    writableHighWaterMark: 4 * 1024 * 1024,
  });
  stream.on('error', () => {});
  stream.resume();
  await once(stream, 'session.created');
  const times: number[] = [];
  for (let round = 0; round <= request.rounds; round++) {
    const start = cpuMsNow();
    for (let at = 0; at < audio.length; at += request.writeBytes) {
      if (!stream.write(audio.subarray(at, at + request.writeBytes))) await once(stream, 'drain');
    }
    await new Promise<void>((resolve) => stream.write(Buffer.alloc(0), () => resolve()));
    await drained(() => stream.stats.socketBufferedAmount);
    if (round > 0) times.push(cpuMsNow() - start); // round 0 warms up
  }
  const closed = once(stream, 'close');
  stream.destroy();
  await closed;
  return times;
}

async function viaBare(request: Request, audio: Buffer): Promise<number[]> {
  const ws = new WebSocket(`${request.url}/v1/realtime`, { headers: { 'x-api-key': KEY }, perMessageDeflate: false });
  await once(ws, 'open');
  ws.send(JSON.stringify({ type: 'session.update', session: { source_language: 'en-us', target_language: 'es-es' } }));
  await new Promise<void>((resolve) => {
    ws.on('message', (data: Buffer) => {
      if (data.toString().includes('"session.created"')) resolve();
    });
  });
  const times: number[] = [];
  for (let round = 0; round <= request.rounds; round++) {
    const start = cpuMsNow();
    for (let at = 0; at < audio.length; at += request.maxAppendBytes) {
      ws.send(`{"type":"input_audio_buffer.append","audio":"${audio.subarray(at, at + request.maxAppendBytes).toString('base64')}"}`);
      if (ws.bufferedAmount > 4 * 1024 * 1024) await drained(() => (ws.bufferedAmount > 1024 * 1024 ? 1 : 0));
    }
    await drained(() => ws.bufferedAmount);
    if (round > 0) times.push(cpuMsNow() - start);
  }
  await terminateAll([ws]);
  return times;
}

process.on('message', (request: Request) => {
  const audio = Buffer.alloc(request.totalBytes); // silence: the emulator answers nothing
  (request.mode === 'stream' ? viaStream(request, audio) : viaBare(request, audio)).then(
    (times) => process.send?.({ cpuMs: median(times) }),
    (error: unknown) => process.send?.({ error: String(error) }),
  );
});
process.send?.({ ready: true });
// The bench that started this process is gone (it failed or was stopped): so is this one.
process.on('disconnect', () => process.exit(0));
