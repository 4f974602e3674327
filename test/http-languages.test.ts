/**
 * The language lists and the tag <-> id conversion: fetched once per client, a failed fetch not
 * kept, a clear error for a tag the service does not list, and the emulator under a
 * production-shaped base URL (`.../apis`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEmulator } from '../lib/emulator/server.js';
import { SOURCE_LANGUAGES, TARGET_LANGUAGES } from '../lib/emulator/languages.js';
import { ValidationError } from '../lib/errors.js';
import { LocalizationClient } from '../lib/http/client.js';
import { LanguageCatalog, parseLanguages, tagsToIds } from '../lib/http/languages.js';
import { KEY, clientFor, control, emulator, logged } from './http-test-helpers.js';

let emu: RunningEmulator;

beforeAll(async () => {
  emu = await emulator();
});

afterAll(async () => {
  await emu.close();
});

describe('language lists', () => {
  it('reads records with id, name and tag; the target list has tags the source list lacks', async () => {
    const client = clientFor(emu);
    try {
      const sources = await client.languages.list('source');
      const targets = await client.languages.list('target');
      expect(sources).toHaveLength(SOURCE_LANGUAGES.length);
      expect(targets).toHaveLength(TARGET_LANGUAGES.length);
      expect(sources.find((l) => l.tag === 'en-us')).toMatchObject({ id: 1, name: 'English (United States)', raw: { id: 1, short_name: 'en-us' } });
      expect(targets.some((l) => l.tag === 'as-in')).toBe(true);
      expect(sources.some((l) => l.tag === 'as-in')).toBe(false);
    } finally {
      await client.close();
    }
  });

  it('each list is fetched once per client, whatever the number of conversions', async () => {
    const client = clientFor(emu);
    try {
      await control(emu, 'DELETE', 'requests');
      expect(await client.languages.id('ES-ES')).toBe(54);
      expect(await client.languages.id('fr-fr', 'source')).toBe(76);
      expect(await client.languages.tag(31)).toBe('de-de');
      await Promise.all([client.languages.id('ja-jp'), client.languages.id('zh-cn')]);
      expect(await logged(emu, 'GET', '/target-languages')).toHaveLength(1);
      expect(await logged(emu, 'GET', '/source-languages')).toHaveLength(1);
      client.languages.clear();
      await client.languages.id('en-us');
      expect(await logged(emu, 'GET', '/target-languages')).toHaveLength(2);
    } finally {
      await client.close();
    }
  });

  it('a tag only the other list has is found there', async () => {
    const client = clientFor(emu);
    try {
      expect(await client.languages.id('as-in', 'source')).toBe(TARGET_LANGUAGES.find((l) => l.short_name === 'as-in')!.id);
    } finally {
      await client.close();
    }
  });

  it('a tag the service does not list is a ValidationError naming the field and the lists', async () => {
    const client = clientFor(emu);
    try {
      const error = await client.languages.idOf('xx-yy', 'target', 'targetLanguage').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ValidationError);
      expect(error).toMatchObject({ field: 'targetLanguage' });
      expect((error as Error).message).toContain(`${TARGET_LANGUAGES.length} of them: en-us`);
    } finally {
      await client.close();
    }
  });

  it('languageId and languageTag name the argument the caller passed (tag, id) in their errors', async () => {
    const client = clientFor(emu);
    try {
      const byId = await client.languages.tag(99_999).catch((e: unknown) => e);
      expect(byId).toBeInstanceOf(ValidationError);
      expect(byId).toMatchObject({ field: 'id' });
      expect((byId as Error).message).toContain('(got 99999)');
      await expect(client.languages.id('xx-yy')).rejects.toMatchObject({ field: 'tag' });
      await expect(client.languages.tagOf(99_999, 'source', 'sourceLanguage')).rejects.toMatchObject({ field: 'sourceLanguage' });
    } finally {
      await client.close();
    }
  });

  it('a failed fetch is not kept: the next conversion asks again', async () => {
    const client = clientFor(emu, { retry: false });
    try {
      await control(emu, 'POST', 'faults', { status: 500, count: 1, path: '/target-languages' });
      await expect(client.languages.id('en-us')).rejects.toMatchObject({ status: 500 });
      expect(await client.languages.id('en-us')).toBe(1);
    } finally {
      await client.close();
    }
  });

  it('records without an id or a tag are skipped; a non-list answer is a ProtocolError', () => {
    expect(parseLanguages([{ id: 3, short_name: 'EN-GB', language: 'English' }, { id: 'x' }, { short_name: 'fr-fr' }, 7], 'x').map((l) => l.tag)).toEqual([
      'en-gb',
    ]);
    expect(() => parseLanguages({ languages: [] }, 'GET /x')).toThrow(/list of languages/);
  });

  it('tagsToIds turns the tags of a wire body into ids, lists included, and leaves ids alone', async () => {
    const client = clientFor(emu);
    try {
      const body = { source_language: 'en-us', target_languages: ['es-es', 76], other: 'x' };
      const fields = [
        { wire: 'source_language', side: 'source', field: 'sourceLanguage' },
        { wire: 'target_languages', side: 'target', field: 'targetLanguages' },
      ] as const;
      expect(await tagsToIds(client, body, [...fields])).toEqual({ source_language: 1, target_languages: [54, 76], other: 'x' });
      await expect(tagsToIds(client, { target_languages: ['es-es', 'zz-zz'] }, [...fields])).rejects.toMatchObject({ field: 'targetLanguages.1' });
    } finally {
      await client.close();
    }
  });

  it('a requester without a catalog of its own gets a fresh one per call', async () => {
    const client = clientFor(emu);
    try {
      const catalog = new LanguageCatalog(client);
      expect(await catalog.idOf(76, 'target', 'x')).toBe(76);
      expect(await catalog.tagOf(54, 'source', 'id')).toBe('es-es');
    } finally {
      await client.close();
    }
  });
});

describe('a production-shaped base URL', () => {
  it('the emulator answers under /apis like at its root', async () => {
    const client = new LocalizationClient({ baseUrl: `${emu.baseUrl}/apis`, apiKey: KEY });
    try {
      expect(await client.languages.id('en-us')).toBe(1);
      const task = await client.translatedTts.create({ text: 'Hello', sourceLanguage: 'en-us', targetLanguage: 'es-es' });
      expect((await client.translatedTts.status(task.taskId)).status).toBe('PENDING');
      expect((await logged(emu, 'POST', '/translated-tts')).length).toBeGreaterThan(0);
    } finally {
      await client.close();
    }
  });
});
