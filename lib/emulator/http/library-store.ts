/**
 * The emulator's dictionaries and folders, per API key: what `GET /dictionaries`, `GET /folders`
 * and their creation, term and deletion endpoints read and change. Records are kept in the
 * service's wire shapes (`DictionaryWithTerms`, `Folder` of the SDK's types). A dictionary file
 * is CSV: a header row of language tags or ids, then one term per row.
 */
import { languageId } from '../languages.js';

export interface TermTranslation {
  language: number;
  term_text: string;
}

export interface DictionaryTerm {
  id: number;
  term_translations: TermTranslation[];
}

export interface Dictionary {
  id: number;
  name: string;
  description: string | null;
  created_at: string;
  last_edited_at: string;
  dictionary_terms: DictionaryTerm[];
  /** Language ids the terms use, sorted. */
  languages: number[];
}

export interface Folder {
  folder_id: number;
  team_id: number;
  name: string;
}

/** A CSV dictionary that cannot be read: the message says why. */
export class DictionaryFileError extends Error {}

/** Splits one CSV line (RFC 4180 quotes, `""` for a quote). */
function csvCells(line: string): string[] {
  const cells: string[] = [];
  let cell = '';
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (quoted) {
      if (c === '"' && line[i + 1] === '"') {
        cell += '"';
        i++;
      } else if (c === '"') quoted = false;
      else cell += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      cells.push(cell.trim());
      cell = '';
    } else cell += c;
  }
  cells.push(cell.trim());
  return cells;
}

/** The terms of a CSV dictionary file. */
export function parseDictionaryCsv(text: string): TermTranslation[][] {
  const lines = text
    .replace(/^\uFEFF/, '')
    .split(/\r?\n/)
    .filter((line) => line.trim() !== '');
  if (lines.length < 2) throw new DictionaryFileError('expected a header row of languages and at least one term row');
  const header = csvCells(lines[0]!);
  const ids = header.map((cell) => languageId(/^\d+$/.test(cell) ? Number(cell) : cell));
  const unknown = header.filter((_, i) => ids[i] === undefined);
  if (unknown.length > 0) throw new DictionaryFileError(`unknown language column ${JSON.stringify(unknown[0])} (see /source-languages)`);
  return lines.slice(1).map((line) =>
    csvCells(line)
      .map((term_text, i) => ({ language: ids[i]!, term_text }))
      .filter((t, i) => i < ids.length && t.term_text !== ''),
  );
}

interface KeyLibrary {
  dictionaries: Map<number, Dictionary>;
  folders: Folder[];
}

export class LibraryStore {
  readonly #byKey = new Map<string, KeyLibrary>();
  #nextDictionary = 501;
  #nextTerm = 9001;
  #nextFolder = 71;

  constructor(readonly now: () => number) {}

  #of(key: string): KeyLibrary {
    let library = this.#byKey.get(key);
    if (!library) {
      library = { dictionaries: new Map(), folders: [] };
      this.#byKey.set(key, library);
    }
    return library;
  }

  #stamp(): string {
    return new Date(this.now()).toISOString();
  }

  #touch(dictionary: Dictionary): void {
    dictionary.last_edited_at = this.#stamp();
    dictionary.languages = [...new Set(dictionary.dictionary_terms.flatMap((t) => t.term_translations.map((tr) => tr.language)))].sort((a, b) => a - b);
  }

  createDictionary(key: string, name: string, description: string | null, terms: TermTranslation[][]): Dictionary {
    const stamp = this.#stamp();
    const dictionary: Dictionary = {
      id: this.#nextDictionary++,
      name,
      description,
      created_at: stamp,
      last_edited_at: stamp,
      dictionary_terms: terms.filter((t) => t.length > 0).map((term_translations) => ({ id: this.#nextTerm++, term_translations })),
      languages: [],
    };
    this.#touch(dictionary);
    this.#of(key).dictionaries.set(dictionary.id, dictionary);
    return dictionary;
  }

  dictionaries(key: string): Dictionary[] {
    return [...this.#of(key).dictionaries.values()];
  }

  dictionary(key: string, id: number): Dictionary | undefined {
    return this.#of(key).dictionaries.get(id);
  }

  /** True when some other key has dictionary `id` (a 403 rather than a 404). */
  dictionaryOfAnother(key: string, id: number): boolean {
    for (const [owner, library] of this.#byKey) if (owner !== key && library.dictionaries.has(id)) return true;
    return false;
  }

  deleteDictionary(key: string, id: number): boolean {
    return this.#of(key).dictionaries.delete(id);
  }

  addTerm(dictionary: Dictionary, translations: TermTranslation[]): DictionaryTerm {
    const term: DictionaryTerm = { id: this.#nextTerm++, term_translations: translations };
    dictionary.dictionary_terms.push(term);
    this.#touch(dictionary);
    return term;
  }

  /** Replaces the translations of a term in the languages given; false when there is no such term. */
  updateTerm(dictionary: Dictionary, termId: number, translations: TermTranslation[]): boolean {
    const term = dictionary.dictionary_terms.find((t) => t.id === termId);
    if (!term) return false;
    for (const translation of translations) {
      const existing = term.term_translations.find((t) => t.language === translation.language);
      if (existing) existing.term_text = translation.term_text;
      else term.term_translations.push(translation);
    }
    this.#touch(dictionary);
    return true;
  }

  deleteTerm(dictionary: Dictionary, termId: number): boolean {
    const index = dictionary.dictionary_terms.findIndex((t) => t.id === termId);
    if (index < 0) return false;
    dictionary.dictionary_terms.splice(index, 1);
    this.#touch(dictionary);
    return true;
  }

  createFolder(key: string, name: string): Folder {
    const folder: Folder = { folder_id: this.#nextFolder++, team_id: 1, name };
    this.#of(key).folders.push(folder);
    return folder;
  }

  folders(key: string): Folder[] {
    return this.#of(key).folders;
  }
}
