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
    const created = await env.client.dictionaries.createFromFile({ dictionaryFile: path, dictionaryName: 'Glossary', dictionaryDescription: 'Sea words' });
    expect(created.dictionaryId).toBeGreaterThan(0);
    expect(created).toMatchObject({ terms: 3, raw: { dictionary_id: created.dictionaryId } });
    const listed = (await env.client.dictionaries.list()).find((d) => d.id === created.dictionaryId)!;
    expect(listed).toMatchObject({ name: 'Glossary', description: 'Sea words', languages: [1, 54, 76] });
    expect(listed.terms.map((t) => t.translations.map((tr) => tr.text))).toEqual([
      ['lighthouse', 'faro', 'phare'],
      ['keeper, night', 'guardián', 'gardien'],
      ['ship', 'barco'],
    ]);
    expect((await env.client.dictionaries.get(created.dictionaryId!)).terms).toHaveLength(3);
    const found = await env.client.dictionaries.getDetails(created.dictionaryId!, { searchTerm: 'GUARD' });
    expect(found.terms.map((t) => t.translations[0]!.text)).toEqual(['keeper, night']);
    expect((await env.client.dictionaries.getDetails(created.dictionaryId!, { limit: 1 })).terms).toHaveLength(1);
  });

  it('terms added, updated and deleted, languages as tags or ids', async () => {
    const { dictionaryId } = await env.client.dictionaries.createFromFile({
      dictionaryFile: { data: Buffer.from(CSV), filename: 'g.csv' },
      dictionaryName: 'Terms',
    });
    const added = await env.client.dictionaries.addTerm(dictionaryId!, [
      { translation: 'anchor', language: 'en-us' },
      { translation: 'ancla', language: 54 },
    ]);
    expect(added.termId).toBeGreaterThan(0);
    await env.client.dictionaries.updateTerm(dictionaryId!, added.termId!, [
      { translation: 'ancre', language: 'fr-fr' },
      { translation: 'áncora', language: 'es-es' },
    ]);
    let details = await env.client.dictionaries.getDetails(dictionaryId!);
    expect(details.terms.find((t) => t.id === added.termId)?.translations).toEqual([
      { language: 1, text: 'anchor' },
      { language: 54, text: 'áncora' },
      { language: 76, text: 'ancre' },
    ]);
    expect(await env.client.dictionaries.deleteTerm(dictionaryId!, added.termId!)).toMatchObject({ status: 'ok' });
    details = await env.client.dictionaries.getDetails(dictionaryId!);
    expect(details.terms.some((t) => t.id === added.termId)).toBe(false);
    await expect(env.client.dictionaries.deleteTerm(dictionaryId!, added.termId!)).rejects.toMatchObject({ status: 404 });
  });

  it("deleted for good; another key's dictionary is 403", async () => {
    const { dictionaryId } = await env.client.dictionaries.createFromFile({
      dictionaryFile: { data: Buffer.from(CSV), filename: 'g.csv' },
      dictionaryName: 'Gone',
    });
    const other = clientFor(env.emu, { apiKey: OTHER_KEY });
    try {
      await expect(other.dictionaries.get(dictionaryId!)).rejects.toBeInstanceOf(HttpForbiddenError);
      await expect(other.dictionaries.delete(dictionaryId!)).rejects.toBeInstanceOf(HttpForbiddenError);
    } finally {
      await other.close();
    }
    expect(await env.client.dictionaries.delete(dictionaryId!)).toMatchObject({ status: 'ok' });
    await expect(env.client.dictionaries.get(dictionaryId!)).rejects.toMatchObject({ status: 404 });
  });

  it('a CSV the service cannot read is its 422; bad input is refused before any request', async () => {
    await expect(
      env.client.dictionaries.createFromFile({
        dictionaryFile: { data: Buffer.from('klingon,vulcan\nqapla,x\n'), filename: 'bad.csv' },
        dictionaryName: 'Bad',
      }),
    ).rejects.toBeInstanceOf(ServiceValidationError);
    await control(env.emu, 'DELETE', 'requests');
    await expect(env.client.dictionaries.createFromFile({ dictionaryFile: Buffer.from(CSV), dictionaryName: '' })).rejects.toMatchObject({
      field: 'dictionaryName',
    });
    await expect(env.client.dictionaries.addTerm(0, [{ translation: 'x', language: 1 }])).rejects.toMatchObject({ field: 'dictionaryId' });
    await expect(env.client.dictionaries.addTerm(5, [])).rejects.toMatchObject({ field: 'translations' });
    await expect(env.client.dictionaries.getDetails(5, { limit: 0 })).rejects.toMatchObject({ field: 'limit' });
    expect((await control(env.emu, 'GET', 'requests')).requests).toEqual([]);
    await expect(env.client.dictionaries.addTerm(5, [{ translation: 'x', language: 'xx-yy' }])).rejects.toBeInstanceOf(ValidationError);
    expect(await logged(env.emu, 'POST', '/dictionaries')).toEqual([]);
  });
});

describe('folders', () => {
  it('created, listed, searched and limited', async () => {
    const first = await env.client.folders.create('Interviews 2024');
    const second = await env.client.folders.create('Podcasts');
    expect(first).toMatchObject({ name: 'Interviews 2024', teamId: 1, raw: { folder_id: first.folderId } });
    expect(second.folderId).toBe(first.folderId! + 1);
    expect((await env.client.folders.list()).map((f) => f.name)).toEqual(['Interviews 2024', 'Podcasts']);
    expect((await env.client.folders.list({ searchQuery: 'pod' })).map((f) => f.folderId)).toEqual([second.folderId]);
    expect(await env.client.folders.list({ limit: 1 })).toHaveLength(1);
    await expect(env.client.folders.create('')).rejects.toMatchObject({ field: 'folderName' });
  });
});
