/**
 * The service's documented field limits, at their edges, on every side: the library refuses one
 * past the limit with a `ValidationError` naming the field before any request (the emulator's
 * request log stays empty) and sends one at the limit; the emulator answers 422 naming the field
 * to a raw request past it; the CLI names the flag (exit 2, nothing sent). Lengths are counted
 * in characters (code points), as the service counts them: an emoji is one.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ValidationError } from '../lib/errors.js';
import { handleDeprecations } from '../lib/deprecations.js';
import type { LocalizationClient } from '../lib/http/client.js';
import {
  PROJECT_DESCRIPTION_LENGTH,
  PROJECT_NAME_LENGTH,
  RUN_IDS_COUNT,
  SELECTED_AUDIO_TRACKS_COUNT,
  TEXT_TO_SOUND_MAX_DURATION_S,
  TTS_STREAM_TEXT_LENGTH,
  VOICE_DESCRIPTION_MIN_LENGTH,
} from '../lib/http/schemas.js';
import { characterCount } from '../lib/http/validation.js';
import { runTts } from '../bin/commands/tts.js';
import { runVoices } from '../bin/commands/voices.js';
import { runCommand } from './helpers/cli-io.js';
import { KEY, control, logged, raw, sharedEmulator } from './http-test-helpers.js';

const env = sharedEmulator();
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-translate-limits-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});
beforeEach(async () => {
  await control(env.emu, 'DELETE', 'requests');
});

/** A string of `n` characters. */
const chars = (n: number, unit = 'a'): string => unit.repeat(n);

/** A limit of one field: a value at its edge and one past it, sent by the library and raw. */
interface LimitCase {
  /** The field as the library names it (and its `ValidationError` does). */
  field: string;
  /** Where the request goes, and the emulator's name for the field. */
  method: 'POST';
  path: string;
  wire: string;
  at: unknown;
  past: unknown;
  /** The library call with `value` in the field. */
  send: (client: LocalizationClient, value: unknown) => Promise<unknown>;
  /** The wire body with `value` in the field, for the raw request. */
  body: (value: unknown) => Record<string, unknown>;
}

const TTS = { language: 'en-us', voiceId: 147320, outputConfiguration: { format: 'pcm_s16le' as const, sampleRate: 8000 } };
const TTS_WIRE = { language: 'en-us', voice_id: 147320, output_configuration: { format: 'pcm_s16le', sample_rate: 8000 } };
const TRANSLATED = { text: 'Good morning', sourceLanguage: 'en-us', targetLanguage: 'es-es' };
const TRANSLATED_WIRE = { text: 'Good morning', source_language: 'en-us', target_language: 'es-es' };
const SETUP = { mediaUrl: 'https://media.example.com/talk.mxf', sourceLanguage: 'en-us', targetLanguages: ['es-es'] };
const SETUP_WIRE = { media_url: 'https://media.example.com/talk.mxf', source_language: 'en-us', target_languages: ['es-es'] };
/** A voice description of exactly the shortest length the service takes. */
const DESCRIPTION = 'A warm, friendly alto in her forties with a light Irish accent, speaking slowly and clearly.'
  .padEnd(VOICE_DESCRIPTION_MIN_LENGTH, ' And calm.')
  .slice(0, VOICE_DESCRIPTION_MIN_LENGTH);

/** Reads a tts-stream body to its end (the request counts once its answer began). */
async function drain(stream: AsyncIterable<unknown>): Promise<void> {
  for await (const _ of stream) {
    // the bytes are not looked at
  }
}

/** A case of the field `field` (`wire` on the wire) of one endpoint, whose other fields are fixed. */
function endpoint(
  path: string,
  send: (client: LocalizationClient, fields: Record<string, unknown>) => Promise<unknown>,
  fixed: Record<string, unknown>,
  fixedWire: Record<string, unknown>,
): (field: string, wire: string, at: unknown, past: unknown) => LimitCase {
  return (field, wire, at, past) => ({
    field,
    method: 'POST',
    path,
    wire,
    at,
    past,
    send: (client, value) => send(client, { ...fixed, [field]: value }),
    body: (value) => ({ ...fixedWire, [wire]: value }),
  });
}

const ttsStream = endpoint('/tts-stream', (c, f) => drain(c.ttsStream({ ...TTS, ...f } as never)), TTS, TTS_WIRE);
const translatedTts = endpoint('/translated-tts', (c, f) => c.translatedTts.create(f as never), TRANSLATED, TRANSLATED_WIRE);
// The deprecated flow on purpose: its deprecation notice is not what these cases check.
const legacyTts = endpoint(
  '/tts',
  (c, f) =>
    handleDeprecations(
      () => {},
      () => c.textToSpeech.create(f as never),
    ),
  { text: 'Legacy speech', language: 'en-us' },
  { text: 'Legacy speech', language: 'en-us' },
);
const projectSetup = endpoint('/project-setup', (c, f) => c.projectSetup.create(f as never), SETUP, SETUP_WIRE);
const textToVoice = endpoint('/text-to-voice', (c, f) => c.textToVoice.create(f as never), { text: 'Hello there.' }, { text: 'Hello there.' });
const textToSound = endpoint('/text-to-sound', (c, f) => c.textToAudio.create(f as never), { prompt: 'rain on a tin roof' }, { prompt: 'rain on a tin roof' });
const ttsResults = endpoint('/tts-results', (c, f) => c.textToSpeech.getResults(f.runIds as number[]), {}, {});

/** `n` run ids. */
const runIds = (n: number): number[] => Array.from({ length: n }, (_, i) => 900_001 + i);
/** `n` zero-based track indices. */
const tracks = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

const { min: TEXT_MIN, max: TEXT_MAX } = TTS_STREAM_TEXT_LENGTH;
const CASES: Record<string, LimitCase> = {
  'tts-stream text, longest': ttsStream('text', 'text', chars(TEXT_MAX), chars(TEXT_MAX + 1)),
  'tts-stream text, longest in emoji (code points, not UTF-16 units)': ttsStream('text', 'text', chars(TEXT_MAX, '😀'), chars(TEXT_MAX + 1, '😀')),
  'tts-stream text, shortest': ttsStream('text', 'text', chars(TEXT_MIN), chars(TEXT_MIN - 1)),
  'translated-tts projectName, longest': translatedTts('projectName', 'project_name', chars(PROJECT_NAME_LENGTH.max), chars(PROJECT_NAME_LENGTH.max + 1)),
  'translated-tts projectName, shortest': translatedTts('projectName', 'project_name', chars(PROJECT_NAME_LENGTH.min), chars(PROJECT_NAME_LENGTH.min - 1)),
  'translated-tts projectDescription, longest': translatedTts(
    'projectDescription',
    'project_description',
    chars(PROJECT_DESCRIPTION_LENGTH.max),
    chars(PROJECT_DESCRIPTION_LENGTH.max + 1),
  ),
  'legacy tts projectName, longest': legacyTts('projectName', 'project_name', chars(PROJECT_NAME_LENGTH.max), chars(PROJECT_NAME_LENGTH.max + 1)),
  'project setup selectedAudioTracks, most': projectSetup(
    'selectedAudioTracks',
    'selected_audio_tracks',
    tracks(SELECTED_AUDIO_TRACKS_COUNT.max),
    tracks(SELECTED_AUDIO_TRACKS_COUNT.max + 1),
  ),
  'project setup projectDescription, shortest': projectSetup(
    'projectDescription',
    'project_description',
    chars(PROJECT_DESCRIPTION_LENGTH.min),
    chars(PROJECT_DESCRIPTION_LENGTH.min - 1),
  ),
  'text-to-voice voiceDescription, shortest': textToVoice('voiceDescription', 'voice_description', DESCRIPTION, DESCRIPTION.slice(0, -1)),
  'text-to-sound duration, longest': textToSound('duration', 'duration', TEXT_TO_SOUND_MAX_DURATION_S, TEXT_TO_SOUND_MAX_DURATION_S + 0.01),
  'bulk lookup runIds, most': ttsResults('runIds', 'run_ids', runIds(RUN_IDS_COUNT.max), runIds(RUN_IDS_COUNT.max + 1)),
  'bulk lookup runIds, fewest': ttsResults('runIds', 'run_ids', runIds(RUN_IDS_COUNT.min), runIds(RUN_IDS_COUNT.min - 1)),
};

describe('the limits are the documented ones', () => {
  it('interface and facts: tts-stream text 3 to 3000, project name 3 to 255 and description 3 to 5000, 1 to 2 tracks, 2 to 5 run ids', () => {
    expect(TTS_STREAM_TEXT_LENGTH).toEqual({ min: 3, max: 3000 });
    expect(PROJECT_NAME_LENGTH).toEqual({ min: 3, max: 255 });
    expect(PROJECT_DESCRIPTION_LENGTH).toEqual({ min: 3, max: 5000 });
    expect(SELECTED_AUDIO_TRACKS_COUNT).toEqual({ min: 1, max: 2 });
    expect(RUN_IDS_COUNT).toEqual({ min: 2, max: 5 });
  });

  it("the service's documentation: a voice description of 100 characters or more, a sound of at most 10 s", () => {
    expect(VOICE_DESCRIPTION_MIN_LENGTH).toBe(100);
    expect(TEXT_TO_SOUND_MAX_DURATION_S).toBe(10);
  });
});

describe('field limits in the library: one past the edge refused before any request, the edge sent', () => {
  it.each(Object.keys(CASES))('%s', async (name) => {
    const limit = CASES[name]!;
    // A stream's constructor checks its request: a refusal may come before any promise.
    const error = await Promise.resolve()
      .then(() => limit.send(env.client, limit.past))
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).field).toBe(limit.field);
    // What it got is kept as the message shows it: a caller (the CLI) reads it without parsing the message.
    const { received, message } = error as ValidationError;
    expect(received).toBeDefined();
    expect(message).toContain(`(got ${received})`);
    expect(await logged(env.emu, limit.method, limit.path)).toEqual([]);

    await limit.send(env.client, limit.at);
    const sent = await logged(env.emu, limit.method, limit.path);
    expect(sent.map((r) => r.status)).toEqual([200]);
  });
});

describe('field limits in the emulator: a raw request one past the edge is answered 422 naming the field', () => {
  it.each(Object.keys(CASES))('%s', async (name) => {
    const limit = CASES[name]!;
    const answer = await raw(env.emu, limit.method, limit.path, { key: KEY, json: limit.body(limit.past) });
    expect(answer.status).toBe(422);
    const locs = (answer.json as { detail: Array<{ loc: unknown[] }> }).detail.map((d) => d.loc.slice(0, 2));
    expect(locs).toContainEqual(['body', limit.wire]);
  });
});

describe('characters are counted as the service counts them', () => {
  it.each([
    ['ascii', 'abc', 3],
    ['an emoji (two UTF-16 units)', '😀', 1],
    ['a CJK extension B character', '𠀀𠀁', 2],
    ['accented letters of the BMP', 'ñéü', 3],
    ['a lone surrogate', '\ud83d', 1],
    ['a lone surrogate, then a pair', '\ud83d😀x', 3],
  ])('%s', (_name, text, count) => {
    expect(characterCount(text)).toBe(count);
  });
});

describe('field limits on the command line: the flag named, exit 2, nothing sent; the edge sent', () => {
  const cliEnv = () => ({ RT_TRANSLATE_BASE_URL: env.emu.baseUrl, RT_TRANSLATE_API_KEY: KEY });

  it.each([
    ['3000 letters', 'a', TTS_STREAM_TEXT_LENGTH.max],
    ['3000 emoji', '😀', TTS_STREAM_TEXT_LENGTH.max],
  ])('tts --text: %s accepted, one more refused', async (_name, unit, max) => {
    const args = ['--language', 'en-us', '--format', 'pcm_s16le', '--sample-rate', '8000'];
    const past = await runCommand(runTts, ['--text', chars(max + 1, unit), ...args, '-o', join(dir, 'past.pcm')], { env: cliEnv() });
    expect(past.code).toBe(2);
    expect(past.stderr).toBe(`rt-translate: --text expects a string of 3 to 3000 characters (got a string of ${max + 1} characters).\n`);
    expect(await logged(env.emu, 'POST', '/tts-stream')).toEqual([]);

    const at = await runCommand(runTts, ['--text', chars(max, unit), ...args, '-o', join(dir, `at-${characterCount(unit)}.pcm`)], { env: cliEnv() });
    expect(at.stderr).toBe('');
    expect(at.code).toBe(0);
    expect((await logged(env.emu, 'POST', '/tts-stream')).map((r) => r.status)).toEqual([200]);
  });

  it(`voices design --description: ${VOICE_DESCRIPTION_MIN_LENGTH} characters accepted, one fewer refused`, async () => {
    const short = await runCommand(runVoices, ['design', '--text', 'Hello there.', '--description', DESCRIPTION.slice(0, -1)], { env: cliEnv() });
    expect(short.code).toBe(2);
    expect(short.stderr).toMatch(/^rt-translate: --description expects a string of at least 100 characters \(got a string of 99 characters\)\.\n$/);
    expect(await logged(env.emu, 'POST', '/text-to-voice')).toEqual([]);

    const ok = await runCommand(runVoices, ['design', '--text', 'Hello there.', '--description', DESCRIPTION, '--poll-ms', '10'], { env: cliEnv() });
    expect(ok.code).toBe(0);
    expect(ok.stdout.toString()).toMatch(/^https?:\/\//);
    expect((await logged(env.emu, 'POST', '/text-to-voice')).map((r) => r.status)).toEqual([200]);
  });
});
