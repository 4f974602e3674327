/**
 * The library's deprecations (`lib/deprecations.ts`): a `DeprecationWarning` once per process
 * and code by default; inside `handleDeprecations`, every use goes to the handler and no process
 * warning is emitted, each piece of work running at once keeping its own handler. The process
 * warnings are captured by a spy on `process.emitWarning`, so none is printed.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { DEPRECATIONS, handleDeprecations, type Deprecation } from '../lib/index.js';
import { reportDeprecation } from '../lib/deprecations.js';
import { translatedTtsSchema } from '../lib/http/schemas.js';
import { validate } from '../lib/http/validation.js';

const TTS = { text: 'Hello there', voiceId: 147320 };

afterEach(() => {
  vi.restoreAllMocks();
});

function captureWarnings(): Array<{ message: string; options: unknown }> {
  const calls: Array<{ message: string; options: unknown }> = [];
  vi.spyOn(process, 'emitWarning').mockImplementation((message: string | Error, options?: unknown) => {
    calls.push({ message: String(message), options });
  });
  return calls;
}

// The tests of this file share the process's record of what was warned: each uses its own code.
describe('deprecations the library meets', () => {
  it("outside a handler: one DeprecationWarning per process and code, with the library's message", () => {
    const warnings = captureWarnings();
    reportDeprecation('RTT_DEP_STREAM_V1');
    reportDeprecation('RTT_DEP_STREAM_V1');
    expect(warnings).toEqual([{ message: DEPRECATIONS.RTT_DEP_STREAM_V1, options: { type: 'DeprecationWarning', code: 'RTT_DEP_STREAM_V1' } }]);
  });

  it('inside handleDeprecations: every use goes to the handler, naming the field; no process warning', async () => {
    const warnings = captureWarnings();
    const seen: Deprecation[] = [];
    const result = await handleDeprecations(
      (deprecation) => seen.push(deprecation),
      async () => {
        validate(translatedTtsSchema, { ...TTS, sourceLanguage: 12, targetLanguage: 'es-es' });
        await nextTurn();
        validate(translatedTtsSchema, { ...TTS, sourceLanguage: 'en-us', targetLanguage: 54 });
        return 'done';
      },
    );
    expect(result).toBe('done');
    expect(seen).toEqual([
      {
        code: 'RTT_DEP_NUMERIC_LANGUAGE',
        field: 'sourceLanguage',
        value: 12,
        message: 'Numeric language ids are deprecated by the service (sourceLanguage = 12); pass a locale tag such as "en-us".',
      },
      expect.objectContaining({ code: 'RTT_DEP_NUMERIC_LANGUAGE', field: 'targetLanguage', value: 54 }),
    ]);
    expect(warnings).toEqual([]);
    // Outside the handler again, the process warning is emitted (once).
    validate(translatedTtsSchema, { ...TTS, sourceLanguage: 7, targetLanguage: 'es-es' });
    expect(warnings).toEqual([
      { message: expect.stringContaining('(sourceLanguage = 7)'), options: { type: 'DeprecationWarning', code: 'RTT_DEP_NUMERIC_LANGUAGE' } },
    ]);
  });

  it('two pieces of work running at once each get their own deprecations', async () => {
    const warnings = captureWarnings();
    const a: string[] = [];
    const b: string[] = [];
    // Interleaved: each reports after the other has started and yielded.
    await Promise.all([
      handleDeprecations(
        (d) => a.push(d.code),
        async () => {
          await nextTurn();
          reportDeprecation('RTT_DEP_TRANSLATION_STREAM');
        },
      ),
      handleDeprecations(
        (d) => b.push(d.code),
        async () => {
          await nextTurn();
          reportDeprecation('RTT_DEP_ASYNC_TTS');
          await nextTurn();
          reportDeprecation('RTT_DEP_ASYNC_TTS');
        },
      ),
    ]);
    expect(a).toEqual(['RTT_DEP_TRANSLATION_STREAM']);
    expect(b).toEqual(['RTT_DEP_ASYNC_TTS', 'RTT_DEP_ASYNC_TTS']);
    expect(warnings).toEqual([]);
  });
});
