/**
 * The baseline of `cli.bench.ts`: the least a program can do to translate a file through the
 * realtime service, written by hand with `ws` alone. It reads PCM16 mono 24 kHz from the file
 * given, sends it as 64 KiB appends (pausing while more than 4 MiB wait in the socket), writes
 * every translated audio delta to the output (a path, or `-` for stdout), and closes once no
 * event has arrived for `quietMs` after the input ended: the same work and the same ending rule
 * as `rt-translate -i FILE -o OUT --quiet-ms MS`, without the library.
 *
 * Usage: node bare-pipe.js URL INPUT OUTPUT QUIET_MS (the key in RT_TRANSLATE_API_KEY).
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { WebSocket } from 'ws';

const [url, input, output, quiet] = process.argv.slice(2);
if (!url || !input || !output) throw new Error('usage: bare-pipe URL INPUT OUTPUT QUIET_MS');
const quietMs = Number(quiet ?? 3000);
const out = output === '-' ? process.stdout : createWriteStream(output);
const ws = new WebSocket(`${url}/v1/realtime`, {
  headers: { 'x-api-key': process.env.RT_TRANSLATE_API_KEY ?? '' },
  perMessageDeflate: false,
});

let inputEnded = false;
let quietTimer: NodeJS.Timeout | undefined;
const armQuiet = (): void => {
  if (!inputEnded) return;
  clearTimeout(quietTimer);
  quietTimer = setTimeout(() => ws.close(1000), quietMs);
};

ws.on('message', (data: Buffer) => {
  const text = data.toString();
  if (text.includes('"response.audio.delta"')) {
    const event = JSON.parse(text) as { delta: string };
    if (!out.write(Buffer.from(event.delta, 'base64'))) {
      ws.pause();
      out.once('drain', () => ws.resume());
    }
  } else if (text.includes('"session.created"')) {
    void send();
  }
  armQuiet();
});
ws.on('close', () => {
  clearTimeout(quietTimer);
  if (out !== process.stdout) out.end();
});

async function send(): Promise<void> {
  for await (const chunk of createReadStream(input!, { highWaterMark: 64 * 1024 })) {
    ws.send(`{"type":"input_audio_buffer.append","audio":"${(chunk as Buffer).toString('base64')}"}`);
    while (ws.bufferedAmount > 4 * 1024 * 1024) await new Promise((resolve) => setTimeout(resolve, 1));
  }
  inputEnded = true;
  armQuiet();
}

await once(ws, 'open');
ws.send(JSON.stringify({ type: 'session.update', session: { source_language: 'en-us', target_language: 'es-es' } }));
