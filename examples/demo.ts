/**
 * `npm run demo`: translates the bundled English sample through the embedded emulator and
 * writes the translated audio as a WAV file, printing transcript and translation on the way.
 *
 * The emulator answers each utterance with its own audio and placeholder texts, so the demo
 * runs anywhere with nothing but Node. Point `realtimeUrl` and `apiKey` at the real service
 * (or set RT_TRANSLATE_REALTIME_URL and RT_TRANSLATE_API_KEY) and the same code translates.
 */
import { createReadStream } from 'node:fs';
import { resolve } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { PcmChunker, RealtimeTranslateStream } from '../lib/index.js';
import { SERVICE_FORMAT } from '../lib/audio/audio-format.js';
import { WavFileWriter, WavReader } from '../lib/audio/wav.js';
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
translator.on('session.created', (session) => console.log(`session ${session.id} (${session.sourceLanguage} -> ${session.targetLanguage})`));
translator.on('transcript.done', (text) => console.log(`transcript:  ${text}`));
translator.on('text.done', (text) => console.log(`translation: ${text}`));

// WAV in (the reader reports the header's format and converts the audio, whatever its rate and
// channels, to the service format), 40 ms chunks, translation, WAV out (the file writer puts the
// exact sizes in the header once all audio is on disk).
const reader = new WavReader({ to: SERVICE_FORMAT });
reader.once('format', (format) => console.log(`input: ${format.sampleRate} Hz, ${format.channels} channel, ${format.bitDepth}-bit`));

try {
  await pipeline(
    createReadStream(sample),
    reader,
    new PcmChunker({ chunkMs: 40 }),
    translator,
    new WavFileWriter(output, SERVICE_FORMAT),
  );
  const seconds = translator.stats.bytesReceived / 48_000;
  console.log(`wrote ${output} (${seconds.toFixed(2)} s of translated audio, ${translator.stats.responses} responses)`);
} finally {
  await emulator.close();
}
