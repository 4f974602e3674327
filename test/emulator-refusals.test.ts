/**
 * The emulator refuses what the service refuses, with the service's errors, on both sides and
 * through both the library and the command line (the embedded emulator):
 *
 * - a voice the key cannot use: the interface's realtime side rejects a cloned voice the caller
 *   does not own, or a stock voice given as cloned, with an `error` event; its HTTP endpoints
 *   take "a public or custom voice" (`voice_id`), so anything else is a 422 naming `voice_id`;
 * - a language it does not list: 422 on the HTTP side (the service's `/tts-stream` answers an
 *   unsupported locale with 422), an `error` event on the realtime side (its 14 tags), an `Error`
 *   then close 1008 on live transcription (as for its other query parameters);
 * - identical source and target languages are accepted: the interface says any supported
 *   language may be source and any may be target.
 */
import { mkdtempSync, readdirSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../lib/emulator/server.js';
import { LocalizationClient } from '../lib/http/client.js';
import { ServiceValidationError } from '../lib/http/errors.js';
import { ServerError, ValidationError, VoiceRejectedError } from '../lib/errors.js';
import { handleDeprecations } from '../lib/deprecations.js';
import { RealtimeTranslateStream } from '../lib/realtime/realtime-translate-stream.js';
import { LiveTranscriptionStream } from '../lib/realtime/live-transcription-stream.js';
import { runInProcess } from './helpers/cli.js';

const KEY = 'sk-refusals-7d2e91c04b';
const OTHER = 'sk-refusals-other-58a3f0';
const FIXTURE = fileURLToPath(new URL('./fixtures/speech-en-24k.wav', import.meta.url));
/** Where the commands' outputs would go: none should be written. */
const OUT = mkdtempSync(join(tmpdir(), 'rt-translate-refused-'));
const never = (name: string): string => join(OUT, name);

let emu: RunningEmulator;
let client: LocalizationClient;
let other: LocalizationClient;
let dir: string;

beforeAll(async () => {
  emu = await startEmulator({ apiKeys: [KEY, OTHER], taskMs: 0 });
  client = new LocalizationClient({ baseUrl: emu.baseUrl, apiKey: KEY, polling: { speech: { initialIntervalMs: 5 } } });
  other = new LocalizationClient({ baseUrl: emu.baseUrl, apiKey: OTHER });
  dir = await mkdtemp(join(tmpdir(), 'rt-translate-refusals-'));
});

afterAll(async () => {
  await client.close();
  await other.close();
  await emu.close();
  expect(readdirSync(OUT)).toEqual([]);
  await rm(dir, { recursive: true, force: true });
  await rm(OUT, { recursive: true, force: true });
});

/** A realtime session of `key` with these options: resolves once created, or rejects with the stream's error. */
function realtimeSession(options: Partial<ConstructorParameters<typeof RealtimeTranslateStream>[0]>, key = KEY): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const stream = new RealtimeTranslateStream({ from: 'en-us', to: 'es-es', apiKey: key, realtimeUrl: emu.realtimeUrl, reconnect: false, ...options });
    stream.once('session.created', () => {
      stream.destroy();
      resolve();
    });
    stream.once('error', reject);
    stream.resume();
  });
}

/** `rt-translate ARGS` on the embedded emulator, with a state directory of this file. */
function cli(args: string[]): ReturnType<typeof runInProcess> {
  return runInProcess(args, { env: { XDG_STATE_HOME: dir } });
}

const lastLine = (text: string): string => text.trim().split('\n').at(-1)!;

describe('a voice the key cannot use', () => {
  it('HTTP, library: 422 naming voiceId for /tts-stream, /translated-tts and /tts; a public voice and its own custom voice pass', async () => {
    const { voiceId: theirs } = await other.voices.create({ file: FIXTURE, voiceName: 'Theirs', gender: 2 });
    const { voiceId: mine } = await client.voices.create({ file: FIXTURE, voiceName: 'Mine', gender: 1 });
    for (const voiceId of [42, theirs]) {
      const errors = await Promise.all(
        [
          new Promise<unknown>((resolve, reject) =>
            client.ttsStream({ text: 'Hello there.', language: 'en-us', voiceId }).once('error', reject).once('end', resolve).resume(),
          ),
          client.translatedTts.create({ text: 'Hello there.', sourceLanguage: 'en-us', targetLanguage: 'es-es', voiceId }),
          // The deprecated flow on purpose: its deprecation notice is not what this checks.
          handleDeprecations(
            () => {},
            () => client.textToSpeech.create({ text: 'Hello there.', language: 'en-us', voiceId }),
          ),
        ].map((attempt) =>
          attempt.then(
            () => undefined,
            (e: unknown) => e,
          ),
        ),
      );
      for (const error of errors) {
        expect(error, String(voiceId)).toBeInstanceOf(ServiceValidationError);
        expect(error).toMatchObject({ status: 422, field: 'voiceId' });
        expect((error as ServiceValidationError).detail).toEqual([
          {
            loc: ['body', 'voice_id'],
            msg: `Value error, voice ${voiceId} is not a voice of this API key: give a public voice or one of its custom voices (see /list-voices)`,
            type: 'value_error',
          },
        ]);
      }
    }
    for (const voiceId of [20_299, mine]) {
      const task = await client.translatedTts.create({ text: 'Hello there.', sourceLanguage: 'en-us', targetLanguage: 'es-es', voiceId });
      expect(task.taskId).not.toBe('');
    }
  });

  it('realtime, library: a voice nobody owns, one of another key, a stock voice as cloned are rejected; its own is accepted', async () => {
    const { voiceId: theirs } = await other.voices.create({ file: FIXTURE, voiceName: 'Theirs', gender: 2 });
    const { voiceId: mine } = await client.voices.create({ file: FIXTURE, voiceName: 'Mine', gender: 1 });
    const rejected = await Promise.all(
      [42, theirs, 147_320].map((voiceId) =>
        realtimeSession({ voiceId }).then(
          () => undefined,
          (e: unknown) => e,
        ),
      ),
    );
    expect(rejected.map((e) => e instanceof VoiceRejectedError)).toEqual([true, true, true]);
    expect((rejected[0] as Error).message).toMatch(/Voice 42 is not a cloned voice owned by this API key\./);
    expect((rejected[2] as Error).message).toMatch(/Voice 147320 is a stock voice; voice\.type "cloned" needs a voice you cloned\./);
    await realtimeSession({ voiceId: mine });
  });

  it.each([
    [
      'tts',
      ['tts', '--text', 'Hello there.', '--language', 'en-us', '--voice', '42', '-o', never('never.wav')],
      /^rt-translate: POST \/tts-stream was rejected with 422 \(validation\): --voice: Value error, voice 42 is not a voice of this API key: give a public voice or one of its custom voices \(see \/list-voices\)\. \[RTT_VALIDATION\]$/,
    ],
    [
      'translated-tts',
      ['translated-tts', '--text', 'Hello there.', '--from', 'en-us', '--to', 'es-es', '--voice', '42', '-o', never('never.flac')],
      /^rt-translate: POST \/translated-tts was rejected with 422 \(validation\): --voice: Value error, voice 42 is not a voice of this API key.*\[RTT_VALIDATION\]$/,
    ],
    [
      'the realtime command',
      ['--from', 'en-us', '--to', 'es-es', '--voice', '42', '-i', FIXTURE, '--text-only'],
      /^rt-translate: The realtime service rejected the voice: Voice 42 is not a cloned voice owned by this API key\..*\[RTT_VOICE_REJECTED\]$/,
    ],
  ])('CLI, %s --voice 42: exit 1, the service-shaped refusal naming --voice', async (_name, args, message) => {
    const result = await cli(args as string[]);
    expect(result.code).toBe(1);
    expect(lastLine(result.stderr)).toMatch(message as RegExp);
    expect(result.stdout.length).toBe(0);
  });
});

describe('a language the emulator does not list', () => {
  it('HTTP, library: 422 naming the field', async () => {
    const error = await client.translatedTts.create({ text: 'Hello there.', sourceLanguage: 'en-us', targetLanguage: 'xx-yy' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ServiceValidationError);
    expect(error).toMatchObject({ status: 422, field: 'targetLanguage' });
  });

  it('realtime, library: refused before any connection (the 14 tags), as the emulator refuses it on the wire', async () => {
    await expect(realtimeSession({ to: 'xx-yy' as never })).rejects.toBeInstanceOf(ValidationError);
  });

  it('live transcription, library: the emulator answers Error, then closes', async () => {
    const stream = new LiveTranscriptionStream({ apiKey: KEY, realtimeUrl: emu.realtimeUrl, language: 'xx-yy', reconnect: false });
    const error = await new Promise<unknown>((resolve) => {
      stream.once('error', resolve);
      stream.resume();
      stream.end();
    });
    expect(error).toBeInstanceOf(ServerError);
    expect((error as Error).message).toContain('Unsupported language "xx-yy": see GET /source-languages for the languages it transcribes.');
  });

  it.each([
    [
      'translated-tts --to xx-yy',
      ['translated-tts', '--text', 'Hello there.', '--from', 'en-us', '--to', 'xx-yy', '-o', never('never.flac')],
      1,
      /--to: Value error, unsupported language "xx-yy".*\[RTT_VALIDATION\]$/,
    ],
    [
      'tts --language xx-yy',
      ['tts', '--text', 'Hello there.', '--language', 'xx-yy', '-o', never('never.wav')],
      1,
      /--language: Value error, unsupported language "xx-yy".*\[RTT_VALIDATION\]$/,
    ],
    [
      'listen --language xx-yy',
      ['listen', '--language', 'xx-yy', '-i', FIXTURE],
      1,
      /Unsupported language "xx-yy": see GET \/source-languages for the languages it transcribes\. \[RTT_SERVER\]$/,
    ],
    [
      'the realtime command --to xx-yy (refused before connecting)',
      ['--from', 'en-us', '--to', 'xx-yy', '-i', FIXTURE, '--text-only'],
      2,
      /^rt-translate: Invalid --to: expected one of the realtime language tags .* \(got "xx-yy"\)\. \[RTT_VALIDATION\]$/,
    ],
  ])('CLI, %s: refused', async (_name, args, code, message) => {
    const result = await cli(args as string[]);
    expect(result.code).toBe(code);
    expect(lastLine(result.stderr)).toMatch(message as RegExp);
    expect(result.stdout.length).toBe(0);
  });
});

describe('identical source and target: accepted, as the interface says any language may be either', () => {
  it('realtime and HTTP, library', async () => {
    await realtimeSession({ from: 'en-us', to: 'en-us' });
    const run = await client.translatedTts.run({ text: 'Good morning.', sourceLanguage: 'en-us', targetLanguage: 'en-us' });
    expect(run.translatedText).toBe('[en-us] Good morning.');
    run.audio.destroy();
  });

  it('realtime and HTTP, CLI', async () => {
    const spoken = await cli(['--from', 'en-us', '--to', 'en-us', '-i', FIXTURE, '--text-only']);
    expect(spoken.code, spoken.stderr).toBe(0);
    expect(spoken.stderr).toMatch(/^translation \(en-us\): /m);
    const out = join(dir, 'same.flac');
    const written = await cli(['translated-tts', '--text', 'Good morning.', '--from', 'en-us', '--to', 'en-us', '-o', out]);
    expect(written.code, written.stderr).toBe(0);
    expect((await readFile(out)).subarray(0, 4).toString('latin1')).toBe('fLaC');
  });
});
