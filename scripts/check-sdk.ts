/**
 * The official SDK against the emulator: installs `@camb-ai/sdk` (1.0.1, never a dependency of
 * this package) into a temporary folder with npm, starts the emulator, and checks that the SDK
 * and `LocalizationClient` get the same answers for a sample of endpoints (languages, voices and
 * cloning, text to voice, translation and its stream, translated TTS, transcription, dubbing,
 * its transcript and other formats, streaming TTS, text to sound, stories, audio separation,
 * project setup, dictionaries, folders, live streams, a 422). When the SDK has a realtime client
 * (`client.realtime`, from 1.2.0), it also speaks the speech fixture into a session twice, directly
 * with the key and through `createRealtimeRelay` with a token in place of the key, and checks that
 * both get the same events, transcripts and audio. Prints one line per check and exits 1 when any
 * differs.
 *
 *     npm run check:sdk                     # CI runs it after the tests
 *     npm run check:sdk -- --sdk-dir DIR    # an SDK already installed in DIR (no network)
 */
import { spawnSync } from 'node:child_process';
import { createReadStream, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { pathToFileURL } from 'node:url';
import { startEmulator } from '../lib/emulator/server.js';
import { LocalizationClient } from '../lib/http/client.js';
import { createRealtimeRelay } from '../lib/relay/relay.js';

const SDK = '@camb-ai/sdk@1.0.1';
const KEY = 'sdk-check-key-7f31c2';
const FIXTURE = new URL('../../test/fixtures/speech-en-24k.wav', import.meta.url);
const MEDIA = 'https://media.example.com/speech-en-24k.wav';
const STORY = 'The tide came in at noon. A gull stood on the pier! Who had left the lamp lit?';

/** The parts of the SDK's client this check calls (it ships no types we compile against). */
type Sdk = Record<string, Record<string, (request?: unknown) => Promise<unknown>>>;

function installSdk(): { dir: string; cleanup: () => void } {
  const given = process.argv.indexOf('--sdk-dir');
  if (given > 0 && process.argv[given + 1]) return { dir: process.argv[given + 1]!, cleanup: () => undefined };
  const dir = mkdtempSync(join(tmpdir(), 'rt-translate-sdk-'));
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const result = spawnSync(npm, ['install', '--prefix', dir, '--no-save', '--no-audit', '--no-fund', '--ignore-scripts', SDK], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  if (result.status !== 0) throw new Error(`npm install ${SDK} failed (status ${result.status}).`);
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A presigned URL gets a fresh expiry and signature per answer: compare where it points. */
function withoutSignatures(value: unknown): unknown {
  if (typeof value === 'string' && /^https?:\/\/.*[?&]sig=/.test(value)) return new URL(value).pathname;
  if (Array.isArray(value)) return value.map(withoutSignatures);
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withoutSignatures(v)]));
  return value;
}

/** The parts of the SDK's realtime session this check uses. */
interface SdkRealtimeSession {
  onAny(handler: (type: string, payload: unknown) => void): void;
  waitUntilReady(timeoutMs?: number): Promise<void>;
  sendAudio(chunk: Uint8Array): Promise<void>;
  close(): Promise<void>;
  waitUntilClosed(): Promise<void>;
}
type SdkModule = { CambClient: new (o: object) => Sdk & { realtime?: { connect(o: object): Promise<SdkRealtimeSession> } } };

/**
 * The SDK's realtime client (1.2.0 on) at `baseUrl` with `apiKey`: the fixture spoken in 100 ms
 * appends, then what came back once every utterance was answered: the event types in order,
 * the transcripts and a digest of the audio.
 */
async function sdkRealtime(mod: SdkModule, baseUrl: string, apiKey: string, utterances: number): Promise<unknown> {
  // Node without a global WebSocket: the SDK uses `ws` when given a header to send.
  const headers = typeof (globalThis as { WebSocket?: unknown }).WebSocket === 'function' ? {} : { headers: { 'x-check': 'check-sdk' } };
  const client = new mod.CambClient({ apiKey, ...headers });
  const session = await client.realtime!.connect({ sourceLanguage: 'en-US', targetLanguage: 'es-ES', baseUrl });
  const types: string[] = [];
  const transcripts: string[] = [];
  const audio = createHash('sha256');
  session.onAny((type, payload) => {
    types.push(type);
    const event = payload as { transcript?: string; data?: Uint8Array };
    if (type === 'conversation.item.input_audio_transcription.completed') transcripts.push(event.transcript ?? '');
    if (type === 'response.audio.delta' && event.data) audio.update(event.data);
  });
  await session.waitUntilReady(10_000);
  const pcm = readFileSync(FIXTURE).subarray(44);
  for (let at = 0; at < pcm.length; at += 4800) await session.sendAudio(pcm.subarray(at, at + 4800));
  for (let waited = 0; types.filter((t) => t === 'response.audio.done').length < utterances; waited += 10) {
    if (waited > 30_000) throw new Error(`${types.filter((t) => t === 'response.audio.done').length} of ${utterances} answers within 30 s`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  await session.close();
  await session.waitUntilClosed();
  return { types: types.filter((t) => t !== 'Closed'), transcripts, audio: audio.digest('hex') };
}

/** Polls `status` until it is no longer PENDING (the emulator's tasks answer within a few polls). */
async function settled(status: () => Promise<unknown>): Promise<{ status: string; run_id: number }> {
  for (let poll = 0; poll < 50; poll++) {
    const answer = (await status()) as { status: string; run_id: number };
    if (answer.status !== 'PENDING') return answer;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error('the task stayed PENDING');
}

async function main(): Promise<number> {
  const { dir, cleanup } = installSdk();
  const version = (JSON.parse(readFileSync(join(dir, 'node_modules/@camb-ai/sdk/package.json'), 'utf8')) as { version?: string }).version;
  const emulator = await startEmulator({ apiKeys: [KEY], taskMs: 0, taskPolls: 1, ttsStreamDelayMs: 0 });
  // The emulator's tasks finish at their second status read: poll as often as `settled` does,
  // not with the service's 2 s and 15 s advice (which made each wait here last half a minute).
  const fast = { initialIntervalMs: 5, maxIntervalMs: 5 };
  const client = new LocalizationClient({ baseUrl: emulator.baseUrl, apiKey: KEY, polling: { speech: fast, longMedia: fast } });
  const mod = (await import(pathToFileURL(join(dir, 'node_modules/@camb-ai/sdk/dist/index.js')).href)) as SdkModule;
  const sdk = new mod.CambClient({ apiKey: KEY, baseUrl: emulator.baseUrl });
  const results: Array<[string, boolean, string]> = [];
  const skipped: string[] = [];
  const check = async (name: string, body: () => Promise<[unknown, unknown]>): Promise<void> => {
    try {
      const [theirs, ours] = (await body()).map(withoutSignatures);
      const same = isDeepStrictEqual(theirs, ours);
      results.push([name, same, same ? '' : `SDK ${JSON.stringify(theirs).slice(0, 300)} | client ${JSON.stringify(ours).slice(0, 300)}`]);
    } catch (error) {
      results.push([name, false, error instanceof Error ? `${error.name}: ${error.message}` : String(error)]);
    }
  };

  try {
    await check('GET /source-languages', async () => [await sdk.languages!.getSourceLanguages!(), (await client.languages.list('source')).map((l) => l.raw)]);
    await check('GET /target-languages', async () => [await sdk.languages!.getTargetLanguages!(), (await client.languages.list('target')).map((l) => l.raw)]);

    await check('POST /create-custom-voice, then GET /list-voices', async () => {
      const created = (await sdk.voiceCloning!.createCustomVoice!({
        file: readFileSync(FIXTURE),
        voice_name: 'From the SDK',
        gender: 2,
        age: 30,
        language: 1,
      })) as { voice_id: number };
      const listed = (await sdk.voiceCloning!.listVoices!()) as Array<{ id: number }>;
      const ours = (await client.voices.list()).map((v) => v.raw);
      return [
        [listed, listed.some((v) => v.id === created.voice_id)],
        [ours, true],
      ];
    });

    await check('POST /text-to-voice, status, GET /text-to-voice-result', async () => {
      // The service's documentation asks for a description of at least 100 characters.
      const description = 'A calm, low voice of a man in his sixties, unhurried and warm, with a soft northern English accent and clear diction.';
      const task = (await sdk.textToVoice!.createTextToVoice!({ text: 'A voice for the late news.', voice_description: description })) as { task_id: string };
      const theirs = await settled(() => sdk.textToVoice!.getTextToVoiceStatus!({ task_id: task.task_id }));
      const ours = await client.textToVoice.status(task.task_id);
      return [
        [theirs, await sdk.textToVoice!.getTextToVoiceResult!({ run_id: theirs.run_id })],
        [ours.raw, (await client.textToVoice.result(theirs.run_id)).raw],
      ];
    });

    await check('POST /translate, status, GET /translation-result', async () => {
      const task = (await sdk.translation!.createTranslation!({ texts: ['Good morning', 'Thank you'], source_language: 1, target_language: 54 })) as {
        task_id: string;
      };
      const done = await settled(() => sdk.translation!.getTranslationTaskStatus!({ task_id: task.task_id }));
      return [await sdk.translation!.getTranslationResult!({ run_id: done.run_id }), (await client.translation.result(done.run_id)).raw];
    });

    await check('POST /translation/stream (the text)', async () => {
      const request = { text: 'Good morning, ¿qué tal? — see you soon.', source_language: 1, target_language: 54 };
      const answer = await sdk.translation!.translationStream!(request);
      // The SDK reads every answer as JSON: a text answer comes back wrapped, as `error.rawBody`.
      const theirs = typeof answer === 'string' ? answer : (answer as { error?: { rawBody?: unknown } }).error?.rawBody;
      let ours = '';
      for await (const piece of await client.translation.openStream({ text: request.text, sourceLanguage: 'en-us', targetLanguage: 'es-es' }))
        ours += piece as string;
      return [theirs, ours];
    });

    await check('POST /translated-tts, GET /translated-tts/{id}', async () => {
      const task = (await sdk.translatedTts!.createTranslatedTts!({ text: 'Hello', voice_id: 147_320, source_language: 1, target_language: 76 })) as {
        task_id: string;
      };
      const theirs = await settled(() => sdk.translatedTts!.getTranslatedTtsTaskStatus!({ task_id: task.task_id }));
      return [theirs, (await client.translatedTts.status(task.task_id)).raw];
    });

    await check('POST /transcribe (a media URL), GET /transcription-result with words', async () => {
      const task = (await sdk.transcription!.createTranscription!({ language: 1, media_url: MEDIA })) as { task_id: string };
      const done = await settled(() => sdk.transcription!.getTranscriptionTaskStatus!({ task_id: task.task_id }));
      const theirs = await sdk.transcription!.getTranscriptionResult!({ run_id: done.run_id, word_level_timestamps: true });
      return [theirs, (await client.transcription.result(done.run_id, { wordLevelTimestamps: true })).raw];
    });

    await check('POST /transcribe (an upload), the segments', async () => {
      const task = (await sdk.transcription!.createTranscription!({ language: 1, media_file: readFileSync(FIXTURE) })) as { task_id: string };
      const done = await settled(() => sdk.transcription!.getTranscriptionTaskStatus!({ task_id: task.task_id }));
      const ours = await client.transcription.run({ language: 'en-us', mediaFile: FIXTURE });
      return [await sdk.transcription!.getTranscriptionResult!({ run_id: done.run_id }), ours.raw];
    });

    let dubRun = 0;
    await check('POST /dub, GET /dub-result', async () => {
      const task = (await sdk.dub!.endToEndDubbing!({ video_url: MEDIA, source_language: 1, target_languages: [54] })) as { task_id: string };
      dubRun = (await settled(() => sdk.dub!.getEndToEndDubbingStatus!({ task_id: task.task_id }))).run_id;
      return [await sdk.dub!.getDubbedRunInfo!({ run_id: dubRun }), (await client.dub.result(dubRun)).raw];
    });
    await check('GET /transcript/{run_id}/{language} (srt)', async () => [
      await sdk.dub!.getDubbedRunTranscript!({ run_id: dubRun, language: 54, format_type: 'srt', data_type: 'raw_data' }),
      (await client.dub.getTranscript(dubRun, 'es-es', { format: 'srt' })).raw,
    ]);

    await check('POST /dub-alt-format/{run_id}/{language}, status', async () => {
      const theirs = (await sdk.dub!.getDubbedOutputInAltFormat!({ run_id: dubRun, language: 54, output_format: 'wav' })) as { task_id: string };
      const ours = await client.dub.altFormat.create({ runId: dubRun, language: 'es-es', format: 'wav' });
      const done = await settled(() => sdk.dub!.getDubbedOutputInAltFormatStatus!({ task_id: theirs.task_id }));
      return [
        [Object.keys(theirs), done],
        [Object.keys(ours.raw), (await client.dub.altFormat.status(theirs.task_id)).raw],
      ];
    });

    await check('POST /tts-stream (wav bytes)', async () => {
      const request = { text: 'The same speech both ways.', language: 'en-us', voice_id: 147_320, output_configuration: { format: 'wav' } };
      const theirs = Buffer.from(await ((await sdk.textToSpeech!.tts!(request)) as { arrayBuffer: () => Promise<ArrayBuffer> }).arrayBuffer());
      const chunks: Buffer[] = [];
      for await (const chunk of client.ttsStream({ text: request.text, language: 'en-us', outputConfiguration: { format: 'wav' } }))
        chunks.push(chunk as Buffer);
      return [theirs.toString('base64'), Buffer.concat(chunks).toString('base64')];
    });

    await check('POST /text-to-sound, POST /text-to-sound-results', async () => {
      const runs: number[] = [];
      for (const prompt of ['rain on a roof', 'a small bell']) {
        const task = (await sdk.textToAudio!.createTextToAudio!({ prompt, duration: 1, audio_type: 'sound' })) as { task_id: string };
        runs.push((await settled(() => sdk.textToAudio!.getTextToAudioStatus!({ task_id: task.task_id }))).run_id);
      }
      const theirs = (await sdk.textToAudio!.getTextToSoundResults!({ body: { run_ids: runs } })) as Record<string, { output_url: string }>;
      const ours = await client.textToAudio.getResults(runs);
      return [runs.map((r) => theirs[String(r)]?.output_url), runs.map((r) => ours.get(r)?.url)];
    });

    await check('POST /story (a file), status, GET /story-result with the transcript', async () => {
      const document = join(dir, 'story.txt');
      writeFileSync(document, STORY);
      const task = (await sdk.story!.createStory!({ file: createReadStream(document), source_language: 1, title: 'The pier' })) as { task_id: string };
      const theirs = await settled(() => sdk.story!.getStoryStatus!({ task_id: task.task_id }));
      const mine = await client.story.create({ file: document, sourceLanguage: 'en-us', title: 'The pier' });
      const mineRun = (await client.tasks.wait('story', mine.taskId!)).runId;
      const sdkResult = (await sdk.story!.getStoryRunInfo!({ run_id: theirs.run_id, include_transcript: true })) as { transcript?: unknown };
      const ours = await client.story.result(theirs.run_id, { includeTranscript: true });
      // Both creations narrate the same document: the same transcript.
      return [
        [Object.keys(task), theirs, sdkResult, sdkResult.transcript],
        [
          Object.keys(mine.raw),
          (await client.story.status(task.task_id)).raw,
          ours.raw,
          (await client.story.result(mineRun, { includeTranscript: true })).raw.transcript,
        ],
      ];
    });

    await check('POST /audio-separation (an upload), status, GET /audio-separation-result', async () => {
      const task = (await sdk.audioSeparation!.createAudioSeparation!({ media_file: readFileSync(FIXTURE) })) as { task_id: string };
      const theirs = await settled(() => sdk.audioSeparation!.getAudioSeparationStatus!({ task_id: task.task_id }));
      return [
        [theirs, await sdk.audioSeparation!.getAudioSeparationRunInfo!({ run_id: theirs.run_id })],
        [(await client.audioSeparation.status(task.task_id)).raw, (await client.audioSeparation.result(theirs.run_id)).raw],
      ];
    });

    await check('POST /project-setup, GET /project-setup-result', async () => {
      const task = (await sdk.projectSetup!.createProject!({ media_url: MEDIA, source_language: 1, target_languages: [54, 76], project_name: 'Check' })) as {
        task_id: string;
      };
      const ours = await client.tasks.wait('project-setup', task.task_id);
      return [await sdk.projectSetup!.getProjectSetupResult!({ run_id: ours.runId }), (await client.projectSetup.result(ours.runId))?.raw];
    });

    await check('POST /dictionaries/create-from-file, GET /dictionaries', async () => {
      await sdk.dictionaries!.createDictionaryFromFile!({ dictionary_file: Buffer.from('en-us,es-es\nsea,mar\n'), dictionary_name: 'Sea' });
      return [await sdk.dictionaries!.getDictionaries!(), (await client.dictionaries.list()).map((d) => d.raw)];
    });

    await check('POST /folders/create, GET /folders', async () => {
      await sdk.folders!.createFolder!({ folder_name: 'From the SDK' });
      return [await sdk.folders!.listFolders!(), (await client.folders.list()).map((f) => f.raw)];
    });

    await check('POST /stream, GET /stream/{id}', async () => {
      const created = (await sdk.streaming!.createStream!({
        voices: [147_320],
        dictionaries: [],
        config: {},
        source_stream: { language: 1, url: 'srt://ingest.example.com:9000' },
        target_streams: [{ languages: [54], url: 'rtmp://out.example.com/live/es', type: 1 }],
      })) as { stream_id: number };
      return [await sdk.streaming!.getStreamResult!({ stream_id: created.stream_id }), (await client.streams.get(created.stream_id)).raw];
    });

    await check('POST /stream/probe', async () => [
      await sdk.streaming!.getProbeStream!({ body: { url: 'srt://ingest.example.com:9000' } }),
      (await client.streams.probe({ url: 'srt://ingest.example.com:9000' })).raw,
    ]);

    await check('a 422 for an unknown language, both ways', async () => {
      const theirs = await sdk.translation!.createTranslation!({ texts: ['x'], source_language: 1, target_language: 99_999 }).then(
        () => 'accepted',
        (error: { statusCode?: number }) => error.statusCode,
      );
      const ours = await client.translation.create({ texts: ['x'], sourceLanguage: 1, targetLanguage: 99_999 }).then(
        () => 'accepted',
        (error: { status?: number }) => error.status,
      );
      return [theirs, ours];
    });

    const realtime = "realtime through createRealtimeRelay, a token in place of the key (the SDK's realtime client)";
    if (sdk.realtime === undefined) skipped.push(`${realtime}: this SDK has no realtime client`);
    else {
      await check(realtime, async () => {
        const server = createServer();
        await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
        const relay = createRealtimeRelay({ server, apiKey: KEY, realtimeUrl: emulator.realtimeUrl });
        try {
          const relayUrl = `ws://127.0.0.1:${(server.address() as AddressInfo).port}`;
          const utterances = (JSON.parse(readFileSync(new URL('../../test/fixtures/speech-en-24k.json', import.meta.url), 'utf8')) as { utterances: unknown[] })
            .utterances.length;
          return [await sdkRealtime(mod, relayUrl, relay.mintToken(), utterances), await sdkRealtime(mod, emulator.realtimeUrl, KEY, utterances)];
        } finally {
          await relay.close();
          server.closeAllConnections();
          await new Promise((resolve) => server.close(resolve));
        }
      });
    }
  } finally {
    await client.close();
    await emulator.close();
    cleanup();
  }

  for (const [name, same, detail] of results) console.log(`${same ? 'same     ' : 'DIFFERENT'}  ${name}${detail ? `\n           ${detail}` : ''}`);
  for (const line of skipped) console.log(`skipped    ${line}`);
  const failed = results.filter(([, same]) => !same).length;
  console.log(`sdk check: ${results.length - failed} same, ${failed} different (@camb-ai/sdk@${version} against the emulator)`);
  return failed === 0 ? 0 : 1;
}

process.exitCode = await main();
