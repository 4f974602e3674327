import { describe, expect, it, vi } from 'vitest';
import { ValidationError } from '../lib/errors.js';
import {
  NUMERIC_LANGUAGE_WARNING,
  audioSeparationResultsSchema,
  collectIssues,
  legacyTtsSchema,
  projectSetupSchema,
  translatedTtsSchema,
  ttsStreamSchema,
  validate,
  type Check,
} from '../lib/http/validation.js';

function failure(schema: Check, value: unknown): ValidationError {
  try {
    validate(schema, value);
  } catch (error) {
    if (error instanceof ValidationError) return error;
    throw error;
  }
  throw new Error('expected a ValidationError');
}

const tts = { text: 'Hello', voice_id: 1, source_language: 'en-us', target_language: 'es-es' };
const setup = { media_url: 'https://example.com/v.mp4', source_language: 'en-us', target_languages: ['es-es'] };

describe('translated TTS', () => {
  it('passes a valid body, lowercasing tags and keeping unknown fields', () => {
    expect(validate(translatedTtsSchema, { ...tts, source_language: 'EN-US', extra: 1, formality: null })).toEqual({
      ...tts,
      extra: 1,
      formality: null,
    });
  });

  it.each([
    ['project_name', { project_name: 'ab' }, '3 to 255'],
    ['project_name', { project_name: 'x'.repeat(256) }, '3 to 255'],
    ['project_description', { project_description: 'ab' }, '3 to 5000'],
    ['project_description', { project_description: 'x'.repeat(5001) }, '3 to 5000'],
    ['formality', { formality: 3 }, '1 or 2'],
    ['gender', { gender: 3 }, '0, 1, 2 or 9'],
    ['chosen_dictionaries', { chosen_dictionaries: [] }, 'at least 1'],
    ['chosen_dictionaries.0', { chosen_dictionaries: [0] }, 'positive integer'],
    ['voice_id', { voice_id: 1.5 }, 'positive integer'],
    ['target_language', { target_language: 'spanish!' }, 'locale tag'],
    ['target_language', { target_language: 0 }, 'locale tag'],
    ['text', { text: '' }, 'at least 1'],
  ])('%s: %j is refused, naming what is accepted', (field, change, accepted) => {
    const error = failure(translatedTtsSchema, { ...tts, ...change });
    expect(error.field).toBe(field);
    expect(error.accepted).toContain(accepted);
    expect(error.message).toContain(field);
  });

  it('names a missing required field', () => {
    const { target_language: _, ...rest } = tts;
    expect(failure(translatedTtsSchema, rest)).toMatchObject({ field: 'target_language', accepted: 'a value (required)' });
  });

  it.each([
    ['formality', [1, 2]],
    ['gender', [0, 1, 2, 9]],
  ])('%s accepts exactly %j', (field, values) => {
    for (const value of values) expect(() => validate(translatedTtsSchema, { ...tts, [field]: value })).not.toThrow();
    expect(collectIssues(translatedTtsSchema, { ...tts, [field]: 5 }).issues).toHaveLength(1);
  });

  it('accepts the length limits at their edges', () => {
    const edges = { project_name: 'abc', project_description: 'x'.repeat(5000) };
    expect(validate(translatedTtsSchema, { ...tts, ...edges })).toMatchObject(edges);
    expect(validate(translatedTtsSchema, { ...tts, project_name: 'x'.repeat(255) })).toMatchObject({ project_name: 'x'.repeat(255) });
  });
});

describe('project setup', () => {
  it.each([
    ['media_url', { media_url: '/relative.mp4' }, 'absolute http'],
    ['media_url', { media_url: 'ftp://example.com/a.mp4' }, 'absolute http'],
    ['selected_audio_tracks', { selected_audio_tracks: [] }, '1 to 2'],
    ['selected_audio_tracks', { selected_audio_tracks: [0, 1, 2] }, '1 to 2'],
    ['selected_audio_tracks.0', { selected_audio_tracks: [-1] }, 'non-negative integer'],
    ['folder_id', { folder_id: 0 }, 'positive integer'],
    ['target_languages', { target_languages: [] }, 'at least 1'],
    ['add_output_as_an_audio_track', { add_output_as_an_audio_track: 'yes' }, 'true or false'],
  ])('%s: %j is refused', (field, change, accepted) => {
    const error = failure(projectSetupSchema, { ...setup, ...change });
    expect(error.field).toBe(field);
    expect(error.accepted).toContain(accepted);
  });

  it('accepts 1 or 2 tracks and folder_id 1', () => {
    expect(() => validate(projectSetupSchema, { ...setup, selected_audio_tracks: [0], folder_id: 1 })).not.toThrow();
    expect(() => validate(projectSetupSchema, { ...setup, selected_audio_tracks: [0, 3] })).not.toThrow();
  });
});

describe('run_ids', () => {
  it.each([
    [[1], 'too_short'],
    [[1, 2, 3, 4, 5, 6], 'too_long'],
    [[1, 1], 'value_error'],
    [[1, 0], 'greater_than_equal'],
    [[1, '2'], 'int_type'],
  ])('%j is refused (%s)', (ids, type) => {
    const { issues } = collectIssues(audioSeparationResultsSchema, { run_ids: ids });
    expect(issues[0]?.type).toBe(type);
    expect(failure(audioSeparationResultsSchema, { run_ids: ids }).field).toMatch(/^run_ids/);
  });

  it('2 to 5 unique positive integers pass', () => {
    expect(validate(audioSeparationResultsSchema, { run_ids: [3, 1] })).toEqual({ run_ids: [3, 1] });
    expect(validate(audioSeparationResultsSchema, { run_ids: [1, 2, 3, 4, 5] })).toEqual({ run_ids: [1, 2, 3, 4, 5] });
  });
});

describe('tts-stream', () => {
  const base = { text: 'Hello', language: 'en-us', voice_id: 1 };
  it.each([
    ['text', { text: 'hi' }],
    ['text', { text: 'x'.repeat(3001) }],
    ['output_configuration.format', { output_configuration: { format: 'ogg' } }],
    ['output_configuration.sample_rate', { output_configuration: { sample_rate: 0 } }],
    ['language', { language: 'english' }],
  ])('%s: %j is refused', (field, change) => {
    expect(failure(ttsStreamSchema, { ...base, ...change }).field).toBe(field);
  });

  it('accepts 3 and 3000 characters and every format of the service', () => {
    expect(() => validate(ttsStreamSchema, { ...base, text: 'abc' })).not.toThrow();
    expect(() => validate(ttsStreamSchema, { ...base, text: 'x'.repeat(3000) })).not.toThrow();
    for (const format of ['wav', 'flac', 'adts', 'mp3', 'pcm_s16le', 'pcm_s16be', 'pcm_s32le', 'pcm_s32be', 'pcm_f32le', 'pcm_f32be']) {
      expect(() => validate(ttsStreamSchema, { ...base, output_configuration: { format } })).not.toThrow();
    }
  });
});

describe('legacy TTS', () => {
  it('gender is not nullable there', () => {
    expect(failure(legacyTtsSchema, { text: 'x', language: 'en-us', gender: null }).field).toBe('gender');
  });
});

describe('issues for the emulator', () => {
  it('collects every issue with loc, msg and type', () => {
    const { issues } = collectIssues(translatedTtsSchema, { text: 'x', source_language: 'en-us', project_name: 'ab', formality: 3 });
    expect(issues.map(({ loc, msg, type }) => ({ loc, msg, type }))).toEqual([
      { loc: ['target_language'], msg: 'Field required', type: 'missing' },
      { loc: ['project_name'], msg: 'String should have at least 3 characters', type: 'string_too_short' },
      { loc: ['formality'], msg: 'Input should be 1 or 2', type: 'literal_error' },
    ]);
  });
});

describe('numeric language ids', () => {
  it('are accepted with one DeprecationWarning per process', () => {
    const emit = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    try {
      expect(validate(translatedTtsSchema, { ...tts, source_language: 12, target_language: 7 })).toMatchObject({ source_language: 12 });
      validate(projectSetupSchema, { ...setup, source_language: 3 });
      expect(emit).toHaveBeenCalledTimes(1);
      expect(emit.mock.calls[0]![1]).toEqual({ type: 'DeprecationWarning', code: NUMERIC_LANGUAGE_WARNING });
      expect(String(emit.mock.calls[0]![0])).toContain('source_language = 12');
    } finally {
      emit.mockRestore();
    }
  });
});
