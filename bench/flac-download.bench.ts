/**
 * FlacDownloadStream with `decode: true` (HTTP from a local file-store server, resume
 * bookkeeping, on-the-fly decoding to PCM16, MD5 check) against the WebAssembly decoder called
 * directly on the whole file in memory (`decodeFile`, Float32 out, no HTTP, no conversion).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { FLACDecoder } from '@wasm-audio-decoders/flac';
import { Agent } from 'undici';
import { compare } from './harness.js';
import { createFileStore } from '../lib/emulator/http/files.js';
import { synthesizeFlac } from '../lib/emulator/synth.js';
import { FlacDownloadStream } from '../lib/http/flac-download-stream.js';

const AUDIO_SECONDS = 20;
const SAMPLE_RATE = 48000;

export default async function (): Promise<void> {
  const flac = synthesizeFlac('bench', { sampleRate: SAMPLE_RATE, durationMs: AUDIO_SECONDS * 1000 });
  let baseUrl = '';
  const store = createFileStore({ urlTtlMs: 3_600_000 }, () => baseUrl);
  const server = createServer((req, res) => {
    if (!store.handle(req, res)) {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const { url } = store.put(flac, 'audio/flac', 'bench.flac');
  const agent = new Agent();
  const pcmBytes = AUDIO_SECONDS * SAMPLE_RATE * 2;

  try {
    await compare(
      `FlacDownloadStream decode (${AUDIO_SECONDS} s mono ${SAMPLE_RATE / 1000} kHz, ${(flac.length / 1024).toFixed(0)} KiB FLAC)`,
      {
        name: 'FlacDownloadStream, decode: true, over loopback HTTP',
        units: pcmBytes,
        run: async () => {
          let bytes = 0;
          for await (const chunk of new FlacDownloadStream({ url, dispatcher: agent, decode: true })) bytes += (chunk as Buffer).length;
          if (bytes !== pcmBytes) throw new Error(`decoded ${bytes} bytes, expected ${pcmBytes}`);
        },
      },
      {
        name: 'FLACDecoder.decodeFile on the whole file in memory',
        units: pcmBytes,
        run: async () => {
          const decoder = new FLACDecoder();
          await decoder.ready;
          const decoded = await decoder.decodeFile(flac);
          decoder.free();
          if (decoded.samplesDecoded * 2 !== pcmBytes) throw new Error('short decode');
        },
      },
      { unit: 'x realtime', audioSeconds: AUDIO_SECONDS, rounds: 5 },
    );
  } finally {
    await agent.close();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
