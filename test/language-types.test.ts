/**
 * Language tags as types. The type assertions (`expectTypeOf`, `@ts-expect-error`) are checked
 * when the typecheck compiles this file (`npm run typecheck`, part of `npm test`): the public
 * options offer the documented tags as literals (an editor completes them) and still take any
 * string. The tests that run check the lists against the emulator's and that the run-time checks
 * are what refuse a tag.
 */
import { describe, expect, expectTypeOf, it } from 'vitest';
import { LANGUAGE_TAGS } from '../lib/protocol.js';
import {
  REALTIME_LANGUAGES,
  RealtimeTranslateStream,
  ValidationError,
  type LanguageTag,
  type LiveTranscriptionOptions,
  type OpenUnion,
  type RealtimeLanguage,
  type RealtimeTranslateOptions,
  type TranslateSpeakerOptions,
  type TtsStreamRequest,
  type TwilioMediaBridgeOptions,
} from '../lib/index.js';
import type { LanguageRef, TranscriptionRequest, TranslatedTtsRequest } from '../lib/http/index.js';
import { SOURCE_LANGUAGES, TARGET_LANGUAGES } from '../lib/emulator/languages.js';

/** The literal members of a field's type: what an editor offers. */
type Offered<T> = Extract<T, LanguageTag>;

describe('language tags as types', () => {
  it('the realtime options offer the 14 realtime tags and take any string', () => {
    expectTypeOf<RealtimeTranslateOptions['from']>().toEqualTypeOf<OpenUnion<RealtimeLanguage>>();
    expectTypeOf<RealtimeTranslateOptions['to']>().toEqualTypeOf<OpenUnion<RealtimeLanguage>>();
    expectTypeOf<Offered<RealtimeTranslateOptions['to']>>().toEqualTypeOf<RealtimeLanguage>();
    expectTypeOf<TwilioMediaBridgeOptions['to']>().toEqualTypeOf<OpenUnion<RealtimeLanguage>>();
    expectTypeOf<TranslateSpeakerOptions['from']>().toEqualTypeOf<OpenUnion<RealtimeLanguage>>();
    // Offered, but not a realtime tag: the type says so, the run-time check refuses it.
    expectTypeOf<'it-it'>().not.toExtend<RealtimeLanguage>();
    // @ts-expect-error it-it is not one of the 14 realtime tags
    const notRealtime: RealtimeLanguage = 'it-it';
    // Any string still type-checks where a tag is taken: a new tag needs no new release.
    const options: RealtimeTranslateOptions = { from: 'en-us', to: notRealtime };
    expect(() => new RealtimeTranslateStream({ ...options, apiKey: 'k', realtimeUrl: 'ws://127.0.0.1:9' })).toThrow(ValidationError);
    expect(() => new RealtimeTranslateStream({ ...options, apiKey: 'k', realtimeUrl: 'ws://127.0.0.1:9' })).toThrow(
      /Invalid to: expected one of the realtime language tags/,
    );
  });

  it('the HTTP requests offer the documented tags (and numeric ids), and take any string', () => {
    expectTypeOf<LanguageRef>().toEqualTypeOf<OpenUnion<LanguageTag> | number>();
    expectTypeOf<TtsStreamRequest['language']>().toEqualTypeOf<LanguageRef>();
    expectTypeOf<TranslatedTtsRequest['targetLanguage']>().toEqualTypeOf<LanguageRef>();
    expectTypeOf<TranscriptionRequest['language']>().toEqualTypeOf<LanguageRef>();
    expectTypeOf<Offered<TtsStreamRequest['language']>>().toEqualTypeOf<LanguageTag>();
    expectTypeOf<'it-it'>().toExtend<LanguageTag>();
    expectTypeOf<Exclude<LiveTranscriptionOptions['language'], undefined>>().toEqualTypeOf<OpenUnion<LanguageTag>>();
    const request: TtsStreamRequest = { text: 'Hello there', language: 'xx-new' };
    expect(request.language).toBe('xx-new');
  });

  it('the lists: the realtime tags are among the documented ones, which are the languages the emulator lists', () => {
    expect(REALTIME_LANGUAGES.filter((tag) => !(LANGUAGE_TAGS as readonly string[]).includes(tag))).toEqual([]);
    const emulated = new Set([...SOURCE_LANGUAGES, ...TARGET_LANGUAGES].map((language) => language.short_name));
    expect([...emulated].sort()).toEqual([...LANGUAGE_TAGS].sort());
    expect(new Set(LANGUAGE_TAGS).size).toBe(LANGUAGE_TAGS.length);
  });
});
