import { describe, expect, it, vi } from 'vitest';
import { ValidationError } from '../lib/errors.js';
import { NUMERIC_LANGUAGE_WARNING, collectIssues, validate, type Check } from '../lib/http/validation.js';
import {
  customVoiceSchema,
  dubSchema,
  legacyTtsSchema,
  projectSetupSchema,
  runIdsSchema,
  storySchema,
  termTranslationsSchema,
  translatedTtsSchema,
  ttsStreamSchema,
} from '../lib/http/schemas.js';
import { camelizeKeys, fromWireName, toWireName } from '../lib/http/wire.js';

function failure(schema: Check, value: unknown): ValidationError {
  try {
    validate(schema, value);
  } catch (error) {
    if (error instanceof ValidationError) return error;
    throw error;
  }
  throw new Error('expected a ValidationError');
}

const tts = { text: 'Hello', voiceId: 1, sourceLanguage: 'en-us', targetLanguage: 'es-es' };
const ttsWire = { text: 'Hello', voice_id: 1, source_language: 'en-us', target_language: 'es-es' };
const setup = { mediaUrl: 'https://example.com/v.mp4', sourceLanguage: 'en-us', targetLanguages: ['es-es'] };

describe('names: camelCase in, the wire out', () => {
  it('maps names both ways, leaving numbers and tags alone', () => {
    expect(toWireName('voiceId')).toBe('voice_id');
    expect(toWireName('publishVoiceToMarketPlace')).toBe('publish_voice_to_market_place');
    expect(toWireName('text')).toBe('text');
    expect(fromWireName('run_ids')).toBe('runIds');
    expect(fromWireName('add_output_as_an_audio_track')).toBe('addOutputAsAnAudioTrack');
    expect(camelizeKeys({ run_id: 1, '1001': { audio_url: 'u', 'en-us': [{ speaker_id: 2 }] } })).toEqual({
      runId: 1,
      '1001': { audioUrl: 'u', 'en-us': [{ speakerId: 2 }] },
    });
  });

  it('a camelCase request becomes the wire body, defaults and unknown fields included', () => {
    expect(validate(translatedTtsSchema, { ...tts, sourceLanguage: 'EN-US', extraField: 1, formality: null, voiceId: undefined })).toEqual({
      ...ttsWire,
      voice_id: 147_320,
      extra_field: 1,
      formality: null,
    });
  });

  it('nested objects are mapped too', () => {
    const wire = validate(ttsStreamSchema, {
      text: 'Hello',
      language: 'en-us',
      voiceId: 3,
      outputConfiguration: { format: 'wav', sampleRate: 16_000, applyEnhancement: false },
      voiceSettings: { maintainSourceAccent: true },
      inferenceOptions: { inferenceSteps: 20, speakerSimilarity: 0.5 },
    });
    expect(wire).toEqual({
      text: 'Hello',
      language: 'en-us',
      voice_id: 3,
      output_configuration: { format: 'wav', sample_rate: 16_000, apply_enhancement: false },
      voice_settings: { maintain_source_accent: true },
      inference_options: { inference_steps: 20, speaker_similarity: 0.5 },
    });
  });

  it('a wire name where the camelCase one is expected is refused, naming the right one', () => {
    const error = failure(translatedTtsSchema, { text: 'Hi', source_language: 'en-us', targetLanguage: 'es-es', sourceLanguage: 'en-us' });
    expect(error.field).toBe('source_language');
    expect(error.accepted).toBe('the camelCase name sourceLanguage');
  });

  it('the emulator reads the wire names with the same schema', () => {
    expect(collectIssues(translatedTtsSchema, ttsWire).issues).toEqual([]);
    expect(collectIssues(translatedTtsSchema, tts).issues.map((i) => i.loc)).toEqual([['source_language'], ['target_language']]);
  });
});

describe('translated TTS', () => {
  it.each([
    ['projectName', { projectName: 'ab' }, '3 to 255'],
    ['projectName', { projectName: 'x'.repeat(256) }, '3 to 255'],
    ['projectDescription', { projectDescription: 'ab' }, '3 to 5000'],
    ['projectDescription', { projectDescription: 'x'.repeat(5001) }, '3 to 5000'],
    ['formality', { formality: 3 }, '1 or 2'],
    ['gender', { gender: 3 }, '0, 1, 2 or 9'],
    ['chosenDictionaries', { chosenDictionaries: [] }, 'at least 1'],
    ['chosenDictionaries.0', { chosenDictionaries: [0] }, 'positive integer'],
    ['voiceId', { voiceId: 1.5 }, 'positive integer'],
    ['targetLanguage', { targetLanguage: 'spanish!' }, 'locale tag'],
    ['targetLanguage', { targetLanguage: 0 }, 'locale tag'],
    ['folderId', { folderId: 0 }, 'positive integer'],
    ['text', { text: '' }, 'at least 1'],
  ])('%s: %j is refused, naming what is accepted', (field, change, accepted) => {
    const error = failure(translatedTtsSchema, { ...tts, ...change });
    expect(error.field).toBe(field);
    expect(error.accepted).toContain(accepted);
    expect(error.message).toContain(field);
  });

  it('names a missing required field', () => {
    const { targetLanguage: _, ...rest } = tts;
    expect(failure(translatedTtsSchema, rest)).toMatchObject({ field: 'targetLanguage', accepted: 'a value (required)' });
  });

  it.each([
    ['formality', [1, 2]],
    ['gender', [0, 1, 2, 9]],
  ])('%s accepts exactly %j', (field, values) => {
    for (const value of values) expect(() => validate(translatedTtsSchema, { ...tts, [field]: value })).not.toThrow();
    expect(collectIssues(translatedTtsSchema, { ...ttsWire, [field]: 5 }).issues).toHaveLength(1);
  });

  it('accepts the length limits at their edges', () => {
    const edges = { projectName: 'abc', projectDescription: 'x'.repeat(5000) };
    expect(validate(translatedTtsSchema, { ...tts, ...edges })).toMatchObject({ project_name: 'abc' });
    expect(validate(translatedTtsSchema, { ...tts, projectName: 'x'.repeat(255) })).toMatchObject({ project_name: 'x'.repeat(255) });
  });
});

describe('project setup', () => {
  it.each([
    ['mediaUrl', { mediaUrl: '/relative.mp4' }, 'absolute http'],
    ['mediaUrl', { mediaUrl: 'ftp://example.com/a.mp4' }, 'absolute http'],
    ['selectedAudioTracks', { selectedAudioTracks: [] }, '1 to 2'],
    ['selectedAudioTracks', { selectedAudioTracks: [0, 1, 2] }, '1 to 2'],
    ['selectedAudioTracks.0', { selectedAudioTracks: [-1] }, 'non-negative integer'],
    ['folderId', { folderId: 0 }, 'positive integer'],
    ['targetLanguages', { targetLanguages: [] }, 'at least 1'],
    ['addOutputAsAnAudioTrack', { addOutputAsAnAudioTrack: 'yes' }, 'true or false'],
  ])('%s: %j is refused', (field, change, accepted) => {
    const error = failure(projectSetupSchema, { ...setup, ...change });
    expect(error.field).toBe(field);
    expect(error.accepted).toContain(accepted);
  });

  it('accepts 1 or 2 tracks and folderId 1', () => {
    expect(validate(projectSetupSchema, { ...setup, selectedAudioTracks: [0], folderId: 1 })).toMatchObject({ selected_audio_tracks: [0], folder_id: 1 });
    expect(() => validate(projectSetupSchema, { ...setup, selectedAudioTracks: [0, 3] })).not.toThrow();
  });
});

describe('runIds (every bulk lookup)', () => {
  it.each([
    [[1], 'too_short'],
    [[1, 2, 3, 4, 5, 6], 'too_long'],
    [[1, 1], 'value_error'],
    [[1, 0], 'greater_than_equal'],
    [[1, '2'], 'int_type'],
  ])('%j is refused (%s)', (ids, type) => {
    const { issues } = collectIssues(runIdsSchema, { run_ids: ids });
    expect(issues[0]?.type).toBe(type);
    expect(failure(runIdsSchema, { runIds: ids }).field).toMatch(/^runIds/);
  });

  it('2 to 5 unique positive integers pass', () => {
    expect(validate(runIdsSchema, { runIds: [3, 1] })).toEqual({ run_ids: [3, 1] });
    expect(validate(runIdsSchema, { runIds: [1, 2, 3, 4, 5] })).toEqual({ run_ids: [1, 2, 3, 4, 5] });
  });
});

describe('tts-stream', () => {
  const base = { text: 'Hello', language: 'en-us', voiceId: 1 };
  it.each([
    ['text', { text: 'hi' }],
    ['text', { text: 'x'.repeat(3001) }],
    ['outputConfiguration.format', { outputConfiguration: { format: 'ogg' } }],
    ['outputConfiguration.sampleRate', { outputConfiguration: { sampleRate: 0 } }],
    ['language', { language: 'english' }],
    ['inferenceOptions.temperature', { inferenceOptions: { temperature: 5 } }],
    ['inferenceOptions.inferenceSteps', { inferenceOptions: { inferenceSteps: 0 } }],
    ['voiceSettings.maintainSourceAccent', { voiceSettings: { maintainSourceAccent: 'yes' } }],
  ])('%s: %j is refused', (field, change) => {
    expect(failure(ttsStreamSchema, { ...base, ...change }).field).toBe(field);
  });

  it('accepts 3 and 3000 characters and every format of the service', () => {
    expect(() => validate(ttsStreamSchema, { ...base, text: 'abc' })).not.toThrow();
    expect(() => validate(ttsStreamSchema, { ...base, text: 'x'.repeat(3000) })).not.toThrow();
    for (const format of ['wav', 'flac', 'adts', 'mp3', 'pcm_s16le', 'pcm_s16be', 'pcm_s32le', 'pcm_s32be', 'pcm_f32le', 'pcm_f32be']) {
      expect(() => validate(ttsStreamSchema, { ...base, outputConfiguration: { format } })).not.toThrow();
    }
  });

  it('the service requires voice_id on the wire', () => {
    expect(collectIssues(ttsStreamSchema, { text: 'Hello', language: 'en-us' }).issues[0]).toMatchObject({ loc: ['voice_id'], type: 'missing' });
  });
});

describe('legacy TTS', () => {
  it('gender is not nullable there', () => {
    expect(failure(legacyTtsSchema, { text: 'x', language: 'en-us', gender: null }).field).toBe('gender');
  });
});

describe('beyond the interface', () => {
  it('dubbing needs targetLanguage or targetLanguages', () => {
    const base = { videoUrl: 'https://e.com/v.mp4', sourceLanguage: 1 };
    expect(failure(dubSchema, base)).toMatchObject({ field: 'targetLanguages' });
    expect(validate(dubSchema, { ...base, targetLanguage: 'es-es' })).toMatchObject({ video_url: base.videoUrl, target_language: 'es-es' });
    expect(validate(dubSchema, { ...base, targetLanguages: [2, 3], transcriptionMode: 'slow' })).toMatchObject({ transcription_mode: 'slow' });
    expect(failure(dubSchema, { ...base, targetLanguage: 2, transcriptionMode: 'quick' }).field).toBe('transcriptionMode');
  });

  it('language ids are not deprecated where the published description takes them', () => {
    const emit = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    try {
      validate(dubSchema, { videoUrl: 'https://e.com/v.mp4', sourceLanguage: 1, targetLanguages: [2] });
      expect(emit).not.toHaveBeenCalled();
    } finally {
      emit.mockRestore();
    }
  });

  it('nested lists of objects: dictionary term translations', () => {
    expect(validate(termTranslationsSchema, { translations: [{ translation: 'hola', language: 'es-es' }] })).toEqual({
      translations: [{ translation: 'hola', language: 'es-es' }],
    });
    expect(failure(termTranslationsSchema, { translations: [{ translation: '', language: 2 }] }).field).toBe('translations.0.translation');
  });
});

describe('multipart form fields (the emulator)', () => {
  it('numbers, booleans and repeated fields arrive as text and are read as such', () => {
    const { value, issues } = collectIssues(
      customVoiceSchema,
      { voice_name: 'Mine', gender: '2', age: '31', enhance_audio: 'true', publish_voice_to_market_place: 'false', language: '1' },
      { form: true },
    );
    expect(issues).toEqual([]);
    expect(value).toEqual({ voice_name: 'Mine', gender: 2, age: 31, enhance_audio: true, publish_voice_to_market_place: false, language: 1 });
    const story = collectIssues(storySchema, { source_language: '1', chosen_dictionaries: '4' }, { form: true });
    expect(story.value).toEqual({ source_language: 1, chosen_dictionaries: [4] });
    expect(collectIssues(customVoiceSchema, { voice_name: 'Mine', gender: 'male' }, { form: true }).issues[0]).toMatchObject({ loc: ['gender'] });
  });

  it('without form mode, text is not a number', () => {
    expect(collectIssues(customVoiceSchema, { voice_name: 'Mine', gender: '2' }).issues[0]).toMatchObject({ loc: ['gender'], type: 'literal_error' });
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
      expect(validate(translatedTtsSchema, { ...tts, sourceLanguage: 12, targetLanguage: 7 })).toMatchObject({ source_language: 12 });
      validate(projectSetupSchema, { ...setup, sourceLanguage: 3 });
      expect(emit).toHaveBeenCalledTimes(1);
      expect(emit.mock.calls[0]![1]).toEqual({ type: 'DeprecationWarning', code: NUMERIC_LANGUAGE_WARNING });
      expect(String(emit.mock.calls[0]![0])).toContain('sourceLanguage = 12');
    } finally {
      emit.mockRestore();
    }
  });
});
