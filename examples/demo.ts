/**
 * `npm run demo`: translates the bundled English sample through the embedded emulator and
 * writes the translated audio as a WAV file, printing transcript and translation on the way.
 *
 * The emulator answers each utterance with its own audio and placeholder texts, so the demo
 * runs anywhere with nothing but Node. Point `realtimeUrl` and `apiKey` at the real service
 * (or set RT_TRANSLATE_REALTIME_URL and RT_TRANSLATE_API_KEY) and the same code translates.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { resolve } from 'node:path';
import { PassThrough } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import wav from 'wav';
import { PcmChunker, RealtimeTranslateStream } from '../lib/index.js';
import { startEmulator, EMULATOR_DEFAULT_API_KEY } from '../lib/emulator/index.js';

const sample = new URL('../../examples/assets/sample-en.wav', import.meta.url);
const output = resolve(process.argv[2] ?? 'demo-output-es.wav');

const emulator = await startEmulator({ apiKeys: [EMULATOR_DEFAULT_API_KEY], latencyMs: 150 });
console.log(`emulator listening at ${emulator.realtimeUrl}`);

const translator = new RealtimeTranslateStream({
  from: 'en-us',
  to: 'es-es',
  apiKey: EMULATOR_DEFAULT_API_KEY,
  realtimeUrl: emulator.realtimeUrl,
  quietPeriodMs: 1000,
});
translator.on('session', (session) => console.log(`session ${session.id} (${session.source_language} -> ${session.target_language})`));
translator.on('transcript', (text) => console.log(`transcript:  ${text}`));
translator.on('text.done', (text) => console.log(`translation: ${text}`));

// WAV in (the reader checks the header and yields PCM), 40 ms chunks, translation, WAV out.
const reader = new wav.Reader();
reader.once('format', (format: { sampleRate: number; channels: number; bitDepth: number }) =>
  console.log(`input: ${format.sampleRate} Hz, ${format.channels} channel, ${format.bitDepth}-bit`),
);
const writer = new wav.Writer({ sampleRate: 24_000, channels: 1, bitDepth: 16 });
let header: Buffer | undefined;
writer.on('header', (h: Buffer) => (header = h));

try {
  await pipeline(
    createReadStream(sample),
    reader,
    new PassThrough(),
    new PcmChunker({ chunkMs: 40 }),
    translator,
    writer,
    createWriteStream(output),
  );
  // The writer learns the data size only at the end: put the exact header in place.
  if (header) {
    const file = await open(output, 'r+');
    await file.write(header, 0, header.length, 0);
    await file.close();
  }
  const seconds = translator.stats.bytesReceived / 48_000;
  console.log(`wrote ${output} (${seconds.toFixed(2)} s of translated audio, ${translator.stats.responses} responses)`);
} finally {
  await emulator.close();
}
