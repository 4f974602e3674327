/**
 * Text translation against the emulator: the task step by step, `translateTexts()`, bulk
 * results, both shapes of a translation result, the translation stream (text split inside a
 * character), validation and language conversion before the creation, and every final status.
 */
import { describe, expect, it, vi } from 'vitest';
import { ProtocolError, ValidationError } from '../lib/errors.js';
import { parseTranslationResult } from '../lib/http/endpoints.js';
import { PaymentRequiredError, ServiceValidationError, TaskFailedError, TaskTimeoutError } from '../lib/http/errors.js';
import { KEY, OTHER_KEY, clientFor, control, emulator, sharedEmulator, logged, raw } from './http-test-helpers.js';

const env = sharedEmulator();

describe('the translation task', () => {
  it('step by step: ids converted, PENDING then SUCCESS, one translation per text', async () => {
    await control(env.emu, 'DELETE', 'requests');
    const task = await env.client.translation.create({
      texts: ['Good morning', 'Thank you'],
      sourceLanguage: 'en-us',
      targetLanguage: 'es-es',
      formality: 2,
      projectName: 'Greetings',
    });
    expect((await env.client.translation.status(task.taskId)).status).toBe('PENDING');
    const done = await env.client.tasks.wait('translation', task.taskId);
    const result = await env.client.translation.result(done.runId);
    expect(result.texts).toEqual(['[es-es] Good morning', '[es-es] Thank you']);
    expect(result.translatedText).toBe('[es-es] Good morning\n[es-es] Thank you');
    expect(result.raw).toEqual({ texts: result.texts });
    expect((await logged(env.emu, 'POST', '/translate')).map((r) => r.status)).toEqual([200]);
  });

  it('translateTexts does it in one call', async () => {
    expect(await env.client.translation.translateTexts(['Where is the station?'], { from: 'en-us', to: 'fr-fr' })).toEqual(['[fr-fr] Where is the station?']);
    expect(await env.client.translation.translateTexts(['numeric ids'], { from: 1, to: 31 })).toEqual(['[de-de] numeric ids']);
  });

  it('the interface path /translation is answered too', async () => {
    const created = await raw(env.emu, 'POST', '/translation', { json: { texts: ['hi'], source_language: 1, target_language: 54 } });
    expect(created.status).toBe(200);
    expect((await raw(env.emu, 'GET', `/translation/${created.json.task_id}`)).json).toEqual({ status: 'PENDING', run_id: null });
  });

  it.each([
    ['ERROR', '[[ERROR]]', TaskFailedError],
    ['TIMEOUT', '[[TIMEOUT]]', TaskTimeoutError],
    ['PAYMENT_REQUIRED', '[[PAYMENT_REQUIRED]]', PaymentRequiredError],
  ])('a task that ends %s rejects with its error', async (_status, marker, type) => {
    await expect(env.client.translation.translateTexts([`fine`, `not fine ${marker}`], { from: 'en-us', to: 'es-es' })).rejects.toBeInstanceOf(type);
  });

  it('bulk results: finished runs parsed, the others undefined', async () => {
    const a = await env.client.translation.create({ texts: ['one'], sourceLanguage: 'en-us', targetLanguage: 'de-de' });
    const b = await env.client.translation.create({ texts: ['two'], sourceLanguage: 'en-us', targetLanguage: 'ja-jp' });
    const runA = await env.client.tasks.wait('translation', a.taskId);
    const pending = await control(env.emu, 'POST', 'tasks', { kind: 'translation', apiKey: KEY, taskMs: 60_000 });
    const foreign = await control(env.emu, 'POST', 'tasks', { kind: 'translation', apiKey: OTHER_KEY });
    const results = await env.client.translation.getResults([runA.runId, pending.run_id, foreign.run_id]);
    expect(results.get(runA.runId)?.texts).toEqual(['[de-de] one']);
    expect(results.get(pending.run_id)).toBeUndefined();
    expect(results.get(foreign.run_id)).toBeUndefined();
    expect(results.size).toBe(3);
    expect(b.taskId).not.toBe(a.taskId);
  });
});

describe('validation before any request', () => {
  it.each([
    [{ texts: [], sourceLanguage: 'en-us', targetLanguage: 'es-es' }, 'texts'],
    [{ texts: [''], sourceLanguage: 'en-us', targetLanguage: 'es-es' }, 'texts.0'],
    [{ texts: ['x'], sourceLanguage: 'english', targetLanguage: 'es-es' }, 'sourceLanguage'],
    [{ texts: ['x'], sourceLanguage: 'en-us', targetLanguage: 'es-es', formality: 3 }, 'formality'],
    [{ texts: ['x'], sourceLanguage: 'en-us', targetLanguage: 'es-es', folderId: 0 }, 'folderId'],
  ])('%j is refused at %s', async (request, field) => {
    await control(env.emu, 'DELETE', 'requests');
    const error = await env.client.translation.create(request as never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).field).toBe(field);
    expect(await logged(env.emu, 'POST', '/translate')).toEqual([]);
  });

  it('a well-formed tag the service does not list stops before the creation', async () => {
    await control(env.emu, 'DELETE', 'requests');
    await expect(env.client.translation.create({ texts: ['x'], sourceLanguage: 'en-us', targetLanguage: 'xx-yy' })).rejects.toMatchObject({
      field: 'targetLanguage',
    });
    expect(await logged(env.emu, 'POST', '/translate')).toEqual([]);
  });

  it('an id the service does not know is its 422', async () => {
    await expect(env.client.translation.create({ texts: ['x'], sourceLanguage: 1, targetLanguage: 99_999 })).rejects.toBeInstanceOf(ServiceValidationError);
  });
});

describe('result shapes', () => {
  it('texts (the SDK, the documentation) and translated_text (the interface) are both read', () => {
    expect(parseTranslationResult({ texts: ['a', 'b'] }, 1)).toMatchObject({ texts: ['a', 'b'], translatedText: 'a\nb' });
    expect(parseTranslationResult({ translated_text: 'hola' }, 1)).toMatchObject({ texts: ['hola'], translatedText: 'hola' });
    expect(parseTranslationResult({ translated_text: 'hola', texts: ['hola'] }, 1).translatedText).toBe('hola');
    expect(() => parseTranslationResult({ text: 'x' }, 7)).toThrow(ProtocolError);
  });

  it('a translated TTS run answers both fields, and the client reads either', async () => {
    const result = await env.client.translatedTts.run({ text: 'Good night', sourceLanguage: 'en-us', targetLanguage: 'it-it' });
    result.audio.destroy();
    expect(result.translatedText).toBe('[it-it] Good night');
  });
});

describe('the translation stream', () => {
  it('is a Readable of text that never splits a character, with one deprecation warning', async () => {
    const emit = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    const slow = await emulator({ ttsStreamDelayMs: 1 });
    const c = clientFor(slow);
    try {
      const text = 'Café crème, déjà vu: ½ €';
      const stream = await c.translation.openStream({ text, sourceLanguage: 'fr-fr', targetLanguage: 'en-us' });
      const pieces: string[] = [];
      for await (const piece of stream) pieces.push(piece as string);
      expect(pieces.length).toBeGreaterThan(3);
      expect(pieces.every((p) => typeof p === 'string' && !p.includes('\uFFFD'))).toBe(true);
      expect(pieces.join('')).toBe(`[en-us] ${text}`);
      await (await c.translation.openStream({ text: 'again', sourceLanguage: 'en-us', targetLanguage: 'es-es' })).toArray();
      expect(emit.mock.calls.filter((call) => (call[1] as { code?: string })?.code === 'RTT_DEP_TRANSLATION_STREAM').length).toBeLessThanOrEqual(1);
    } finally {
      emit.mockRestore();
      await c.close();
      await slow.close();
    }
  });

  it('an HTTP failure rejects before any text', async () => {
    await control(env.emu, 'POST', 'faults', { status: 401, count: 1, path: '/translation/stream' });
    await expect(env.client.translation.openStream({ text: 'x', sourceLanguage: 'en-us', targetLanguage: 'es-es' })).rejects.toMatchObject({
      code: 'RTT_AUTH',
    });
  });

  it('a stream cut in the middle fails with a connection error after the text received', async () => {
    await control(env.emu, 'POST', 'faults', { dropAfterBytes: 10, count: 1, path: '/translation/stream' });
    const stream = await env.client.translation.openStream({ text: 'A sentence long enough to be cut.', sourceLanguage: 'en-us', targetLanguage: 'es-es' });
    let got = '';
    const error = await (async () => {
      for await (const piece of stream) got += piece as string;
    })().catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'RTT_CONNECTION' });
    expect(got).toBe('[es-es] A '.slice(0, got.length));
  });
});
