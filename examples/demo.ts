/**
 * `npm run demo`: translates the bundled English sample through the embedded emulator and
 * writes the translated audio as a WAV file, printing transcript and translation on the way.
 *
 * The emulator answers each utterance with its own audio and placeholder texts, so the demo
 * runs anywhere with nothing but Node. Point `realtimeUrl` and `apiKey` at the real service
 * (or set RT_TRANSLATE_REALTIME_URL and RT_TRANSLATE_API_KEY) and the same code translates.
 */
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pipeline } from 'node:stream/promises';
import { PcmChunker, RealtimeTranslateStream, WavFileWriter, openAudioSource } from '../lib/index.js';
import { SERVICE_FORMAT } from '../lib/dsp.js';
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

// Any audio in (here a WAV file, recognised by its header and converted, whatever its rate and
// channels, to the service format), 40 ms chunks, translation, WAV out (the file writer puts the
// exact sizes in the header once all audio is on disk).
const source = await openAudioSource(fileURLToPath(sample));
console.log(`input: ${source.label}, decoded as ${source.decoder}`);

try {
  await pipeline(source, new PcmChunker({ chunkMs: 40 }), translator, new WavFileWriter(output, SERVICE_FORMAT));
  const seconds = translator.stats.bytesReceived / 48_000;
  const responses = translator.stats.responses;
  console.log(`wrote ${output} (${seconds.toFixed(2)} s of translated audio, ${responses} ${responses === 1 ? 'response' : 'responses'})`);
} finally {
  await emulator.close();
}
