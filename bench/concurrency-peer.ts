/**
 * The long-lived processes of `concurrency.bench.ts` (two, each running this module): the
 * realtime emulator, and the Twilio side of the phone calls (callers that stream 20 ms `media`
 * messages at real time to a bridge and echo its marks, as Twilio does). Kept out of the
 * measured processes so that their CPU time is the bridge's and the client's only. Driven over the fork IPC channel:
 *
 * - on start it sends `{ type: 'ready', realtimeUrl }`;
 * - `{ type: 'callers', id, url, count, seconds }` starts `count` calls to `url`, each at a random
 *   phase of the 20 ms grid and a random point of the speech, ends them after `seconds`, and
 *   answers `{ type: 'callers-done', id, ...stats }`, or `{ type: 'error', id, message }` (several
 *   such requests may run at once);
 * - `{ type: 'collect' }` runs a full garbage collection and answers `{ type: 'collected' }`;
 * - `{ type: 'exit' }` closes everything.
 */
import { WebSocket } from 'ws';
import { startEmulator } from '../lib/emulator/server.js';
import { CONCURRENCY_KEY, FrameClock, phoneFrames } from './concurrency-shared.js';
import { collect } from './harness.js';

interface CallersRequest {
  type: 'callers';
  id: number;
  url: string;
  count: number;
  seconds: number;
}

const emulator = await startEmulator({ port: 0, apiKeys: [CONCURRENCY_KEY] });
const send = (message: unknown): void => {
  process.send?.(message);
};

/** The base64 payloads of the speech as 20 ms mu-law frames, looped by the callers. */
const payloads = phoneFrames().map((frame) => frame.toString('base64'));

async function runCallers(request: CallersRequest): Promise<void> {
  const clock = new FrameClock();
  const sockets: WebSocket[] = [];
  try {
    await callAndHangUp(request, clock, sockets);
  } finally {
    // Also when the calls failed: no clock or call outlives its request.
    clock.stop();
    for (const ws of sockets) if (ws.readyState !== ws.CLOSED && ws.readyState !== ws.CLOSING) ws.terminate();
  }
}

async function callAndHangUp(request: CallersRequest, clock: FrameClock, sockets: WebSocket[]): Promise<void> {
  let sent = 0;
  let received = 0;
  let marks = 0;
  let failed = 0;
  for (let i = 0; i < request.count; i++) {
    const ws = new WebSocket(request.url, { perMessageDeflate: false });
    sockets.push(ws);
    const sid = `MZ${String(i).padStart(32, '0')}`;
    let frame = Math.floor(Math.random() * payloads.length);
    let chunk = 0;
    ws.on('error', () => failed++);
    ws.on('message', (data) => {
      const text = data.toString();
      if (text.includes('"event":"mark"')) {
        // Burst playback: Twilio echoes a mark once the audio before it has played; here at once.
        const name = (JSON.parse(text) as { mark: { name: string } }).mark.name;
        ws.send(`{"event":"mark","streamSid":"${sid}","mark":{"name":"${name}"}}`);
        marks++;
      } else {
        received++;
      }
    });
    ws.on('open', () => {
      ws.send('{"event":"connected","protocol":"Call","version":"1.0.0"}');
      ws.send(
        JSON.stringify({
          event: 'start',
          sequenceNumber: '1',
          start: {
            streamSid: sid,
            callSid: `CA${i}`,
            accountSid: 'AC0',
            tracks: ['inbound'],
            customParameters: {},
            mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 },
          },
          streamSid: sid,
        }),
      );
      clock.add(() => {
        if (ws.readyState !== ws.OPEN) return;
        chunk++;
        const payload = payloads[frame]!;
        frame = (frame + 1) % payloads.length;
        ws.send(
          `{"event":"media","sequenceNumber":"${chunk + 1}","media":{"track":"inbound","chunk":"${chunk}","timestamp":"${(chunk - 1) * 20}","payload":"${payload}"},"streamSid":"${sid}"}`,
        );
        sent++;
      });
    });
    // Calls ramp up at 250 a second, as a busy line's do (not one burst the listen queue drops).
    if (i % 25 === 24) await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await new Promise((resolve) => setTimeout(resolve, request.seconds * 1000));
  clock.stop();
  for (const ws of sockets) {
    if (ws.readyState === ws.OPEN) ws.close(1000);
    else ws.terminate();
  }
  send({ type: 'callers-done', id: request.id, sent, received, marks, failed, lateFrames: clock.lateFrames, frames: clock.frames });
}

process.on('message', (message: { type: string }) => {
  if (message.type === 'callers') {
    const request = message as CallersRequest;
    runCallers(request).catch((error: unknown) => send({ type: 'error', id: request.id, message: String(error) }));
  } else if (message.type === 'collect') {
    collect?.();
    send({ type: 'collected' });
  } else if (message.type === 'exit') {
    emulator.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  }
});

send({ type: 'ready', realtimeUrl: emulator.realtimeUrl });
// The bench that started this process is gone (it failed or was stopped): so is this one.
process.on('disconnect', () => process.exit(0));
