/**
 * `TtsStreamReadable` against a bare undici request of the same `POST /tts-stream` on the same
 * emulator (no chunk delays): time to the first byte, and throughput of a whole 3000-character
 * PCM stream (about 8.6 MB). The subject adds validation, the retry wrapper, the idle timer and
 * PCM re-alignment; the ratio says what those cost.
 */
import { Agent, request } from 'undici';
import { compare } from './harness.js';
import { startEmulator } from '../lib/emulator/server.js';
import { LocalizationClient } from '../lib/http/client.js';
import type { TtsStreamRequest } from '../lib/http/tts-stream-readable.js';

const KEY = 'bench-key';

export default async function (): Promise<void> {
  const emulator = await startEmulator({ port: 0, apiKeys: [KEY], ttsStreamDelayMs: 0, ttsStreamChunkMs: 100 });
  const client = new LocalizationClient({ baseUrl: emulator.baseUrl, apiKey: KEY, retry: false });
  const agent = new Agent();
  const text = 'A sentence of benchmark speech, long enough to stream for a while. '.repeat(45).slice(0, 3000);
  const body: TtsStreamRequest = { text, language: 'en-us', voiceId: 147_320, outputConfiguration: { format: 'pcm_s16le' } };
  const json = JSON.stringify({ text, language: 'en-us', voice_id: 147_320, output_configuration: { format: 'pcm_s16le' } });
  const url = `${emulator.baseUrl}/tts-stream`;

  const bare = () =>
    request(url, {
      dispatcher: agent,
      method: 'POST',
      headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
      body: json,
    });

  // Warm the emulator's synthesis cache and measure the stream once.
  let size = 0;
  for await (const chunk of client.ttsStream(body)) size += (chunk as Buffer).length;

  try {
    await compare(
      `tts-stream throughput (${(size / 1e6).toFixed(1)} MB of pcm_s16le)`,
      {
        name: 'TtsStreamReadable',
        units: size,
        run: async () => {
          let n = 0;
          for await (const chunk of client.ttsStream(body)) n += (chunk as Buffer).length;
          if (n !== size) throw new Error(`short stream: ${n} of ${size} bytes`);
        },
      },
      {
        name: 'bare undici request',
        units: size,
        run: async () => {
          const response = await bare();
          let n = 0;
          for await (const chunk of response.body) n += (chunk as Buffer).length;
          if (n !== size) throw new Error(`short stream: ${n} of ${size} bytes`);
        },
      },
      { rounds: 5, minRoundMs: 300 },
    );

    await compare(
      'tts-stream time to first byte',
      {
        name: 'TtsStreamReadable',
        run: async () => {
          const stream = client.ttsStream(body);
          await new Promise<void>((resolve, reject) => {
            stream.once('data', () => resolve());
            stream.once('error', reject);
          });
          stream.destroy();
        },
      },
      {
        name: 'bare undici request',
        run: async () => {
          const response = await bare();
          await new Promise<void>((resolve, reject) => {
            response.body.once('data', () => resolve());
            response.body.once('error', reject);
          });
          response.body.destroy();
        },
      },
      { rounds: 5, minRoundMs: 300, unit: 'ops' },
    );
  } finally {
    await client.close();
    await agent.close();
    await emulator.close();
  }
}
