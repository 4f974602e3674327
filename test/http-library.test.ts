/**
 * Dictionaries and folders against the emulator: a dictionary from a CSV file (streamed),
 * listing, details with `limit` and `searchTerm`, terms added, updated and deleted with languages
 * as tags or ids, deletion, another key's dictionary refused, folders created and searched.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ValidationError } from '../lib/errors.js';
import { HttpForbiddenError, ServiceValidationError } from '../lib/http/errors.js';
import { OTHER_KEY, clientFor, control, sharedEmulator, logged } from './http-test-helpers.js';

const CSV = 'en-us,es-es,fr-fr\nlighthouse,faro,phare\n"keeper, night",guardián,gardien\nship,barco,\n';

const env = sharedEmulator();

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-translate-library-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('dictionaries', () => {
  it('from a CSV file path: terms in each language, listed, with details', async () => {
    const path = join(dir, 'glossary.csv');
    await writeFile(path, CSV);
    const created = await env.client.createDictionaryFromFile({ dictionaryFile: path, dictionaryName: 'Glossary', dictionaryDescription: 'Sea words' });
    expect(created.dictionaryId).toBeGreaterThan(0);
    expect(created).toMatchObject({ terms: 3, raw: { dictionary_id: created.dictionaryId } });
    const listed = (await env.client.listDictionaries()).find((d) => d.id === created.dictionaryId)!;
    expect(listed).toMatchObject({ name: 'Glossary', description: 'Sea words', languages: [1, 54, 76] });
    expect(listed.terms.map((t) => t.translations.map((tr) => tr.text))).toEqual([
      ['lighthouse', 'faro', 'phare'],
      ['keeper, night', 'guardián', 'gardien'],
      ['ship', 'barco'],
    ]);
    expect((await env.client.getDictionary(created.dictionaryId!)).terms).toHaveLength(3);
    const found = await env.client.getDictionaryDetails(created.dictionaryId!, { searchTerm: 'GUARD' });
    expect(found.terms.map((t) => t.translations[0]!.text)).toEqual(['keeper, night']);
    expect((await env.client.getDictionaryDetails(created.dictionaryId!, { limit: 1 })).terms).toHaveLength(1);
  });

  it('terms added, updated and deleted, languages as tags or ids', async () => {
    const { dictionaryId } = await env.client.createDictionaryFromFile({ dictionaryFile: { data: Buffer.from(CSV), filename: 'g.csv' }, dictionaryName: 'Terms' });
    const added = await env.client.addDictionaryTerm(dictionaryId!, [
      { translation: 'anchor', language: 'en-us' },
      { translation: 'ancla', language: 54 },
    ]);
    expect(added.termId).toBeGreaterThan(0);
    await env.client.updateDictionaryTerm(dictionaryId!, added.termId!, [
      { translation: 'ancre', language: 'fr-fr' },
      { translation: 'áncora', language: 'es-es' },
    ]);
    let details = await env.client.getDictionaryDetails(dictionaryId!);
    expect(details.terms.find((t) => t.id === added.termId)?.translations).toEqual([
      { language: 1, text: 'anchor' },
      { language: 54, text: 'áncora' },
      { language: 76, text: 'ancre' },
    ]);
    expect(await env.client.deleteDictionaryTerm(dictionaryId!, added.termId!)).toMatchObject({ status: 'ok' });
    details = await env.client.getDictionaryDetails(dictionaryId!);
    expect(details.terms.some((t) => t.id === added.termId)).toBe(false);
    await expect(env.client.deleteDictionaryTerm(dictionaryId!, added.termId!)).rejects.toMatchObject({ status: 404 });
  });

  it('deleted for good; another key\'s dictionary is 403', async () => {
    const { dictionaryId } = await env.client.createDictionaryFromFile({ dictionaryFile: { data: Buffer.from(CSV), filename: 'g.csv' }, dictionaryName: 'Gone' });
    const other = clientFor(env.emu, { apiKey: OTHER_KEY });
    try {
      await expect(other.getDictionary(dictionaryId!)).rejects.toBeInstanceOf(HttpForbiddenError);
      await expect(other.deleteDictionary(dictionaryId!)).rejects.toBeInstanceOf(HttpForbiddenError);
    } finally {
      await other.close();
    }
    expect(await env.client.deleteDictionary(dictionaryId!)).toMatchObject({ status: 'ok' });
    await expect(env.client.getDictionary(dictionaryId!)).rejects.toMatchObject({ status: 404 });
  });

  it('a CSV the service cannot read is its 422; bad input is refused before any request', async () => {
    await expect(env.client.createDictionaryFromFile({ dictionaryFile: { data: Buffer.from('klingon,vulcan\nqapla,x\n'), filename: 'bad.csv' }, dictionaryName: 'Bad' })).rejects.toBeInstanceOf(
      ServiceValidationError,
    );
    await control(env.emu, 'DELETE', 'requests');
    await expect(env.client.createDictionaryFromFile({ dictionaryFile: Buffer.from(CSV), dictionaryName: '' })).rejects.toMatchObject({ field: 'dictionaryName' });
    await expect(env.client.addDictionaryTerm(0, [{ translation: 'x', language: 1 }])).rejects.toMatchObject({ field: 'dictionaryId' });
    await expect(env.client.addDictionaryTerm(5, [])).rejects.toMatchObject({ field: 'translations' });
    await expect(env.client.getDictionaryDetails(5, { limit: 0 })).rejects.toMatchObject({ field: 'limit' });
    expect((await control(env.emu, 'GET', 'requests')).requests).toEqual([]);
    await expect(env.client.addDictionaryTerm(5, [{ translation: 'x', language: 'xx-yy' }])).rejects.toBeInstanceOf(ValidationError);
    expect(await logged(env.emu, 'POST', '/dictionaries')).toEqual([]);
  });
});

describe('folders', () => {
  it('created, listed, searched and limited', async () => {
    const first = await env.client.createFolder('Interviews 2024');
    const second = await env.client.createFolder('Podcasts');
    expect(first).toMatchObject({ name: 'Interviews 2024', teamId: 1, raw: { folder_id: first.folderId } });
    expect(second.folderId).toBe(first.folderId! + 1);
    expect((await env.client.listFolders()).map((f) => f.name)).toEqual(['Interviews 2024', 'Podcasts']);
    expect((await env.client.listFolders({ searchQuery: 'pod' })).map((f) => f.folderId)).toEqual([second.folderId]);
    expect(await env.client.listFolders({ limit: 1 })).toHaveLength(1);
    await expect(env.client.createFolder('')).rejects.toMatchObject({ field: 'folderName' });
  });
});
