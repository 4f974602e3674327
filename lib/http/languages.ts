/**
 * The service's languages: `GET /source-languages` and `GET /target-languages` (records with a
 * numeric `id`, a `language` name and a `short_name` tag), and the conversion between the
 * numeric ids the task endpoints beyond the interface take and the locale tags the streams take.
 *
 * `LanguageCatalog` fetches each list once and keeps it for the requester's life (the client
 * holds one); a failed fetch is not kept, so the next call asks again. A tag converts to an id
 * only where the service's list has it: `idOf` looks in the list of the field's side first, then
 * in the other; a tag in neither is a `ValidationError` naming the field and how many languages
 * the service lists. Ids convert back to tags the same way (`tagOf`).
 */
import { ProtocolError, ValidationError } from '../errors.js';
import type { HttpRequester, LanguageLookup, RequestOptions } from './requester.js';
import { isPlainObject } from './wire.js';

/** One language of the service's lists. */
export interface Language {
  /** The numeric id the task endpoints take. */
  id: number;
  /** Its name, e.g. `English (United States)`. */
  name: string;
  /** Its short tag, lowercase, e.g. `en-us`. */
  tag: string;
  raw: Record<string, unknown>;
}

export type LanguageSide = 'source' | 'target';

/** Reads one list; records without a numeric id or a tag are skipped. */
export function parseLanguages(raw: unknown, what: string): Language[] {
  if (!Array.isArray(raw)) throw new ProtocolError(`${what} answered ${raw === null ? 'null' : typeof raw} where a list of languages was expected.`);
  const out: Language[] = [];
  for (const item of raw) {
    if (!isPlainObject(item)) continue;
    const id = typeof item.id === 'number' ? item.id : Number(item.id);
    const tag = typeof item.short_name === 'string' ? item.short_name : typeof item.tag === 'string' ? item.tag : undefined;
    if (!Number.isSafeInteger(id) || id < 1 || tag === undefined || tag === '') continue;
    const name = typeof item.language === 'string' ? item.language : typeof item.name === 'string' ? item.name : tag;
    out.push({ id, name, tag: tag.toLowerCase(), raw: item });
  }
  return out;
}

const PATHS: Record<LanguageSide, string> = { source: '/source-languages', target: '/target-languages' };

/** `GET /source-languages` or `GET /target-languages`, uncached. */
export async function fetchLanguages(client: HttpRequester, side: LanguageSide, options: RequestOptions = {}): Promise<Language[]> {
  const raw = await client.requestJson<unknown>({ method: 'GET', path: PATHS[side], kind: 'read', ...options });
  return parseLanguages(raw, `GET ${PATHS[side]}`);
}

/** The two language lists of a requester, each fetched once. */
export class LanguageCatalog implements LanguageLookup {
  readonly #client: HttpRequester;
  readonly #lists = new Map<LanguageSide, Promise<Language[]>>();

  constructor(client: HttpRequester) {
    this.#client = client;
  }

  /** The list of `side`, from the cache or fetched now (a failure is not cached). */
  list(side: LanguageSide, options: RequestOptions = {}): Promise<Language[]> {
    let list = this.#lists.get(side);
    if (!list) {
      list = fetchLanguages(this.#client, side, options);
      this.#lists.set(side, list);
      list.catch(() => this.#lists.delete(side));
    }
    return list;
  }

  /** Forgets both lists: the next call fetches them again. */
  /** The service's id of a language tag (`side` default `target`). */
  id(tag: string, side: LanguageSide = 'target', options: RequestOptions = {}): Promise<number> {
    return this.idOf(tag, side, 'tag', options);
  }

  /** The language tag of a service id (`side` default `target`). */
  tag(id: number, side: LanguageSide = 'target', options: RequestOptions = {}): Promise<string> {
    return this.tagOf(id, side, 'id', options);
  }

  clear(): void {
    this.#lists.clear();
  }

  /**
   * The id of a locale tag (any case), looked up in `side`'s list first, then the other's. A
   * number is returned as it is. `field` names the request field in the error.
   */
  async idOf(tagOrId: string | number, side: LanguageSide, field: string, options: RequestOptions = {}): Promise<number> {
    if (typeof tagOrId === 'number') return tagOrId;
    const tag = tagOrId.toLowerCase();
    const other: LanguageSide = side === 'source' ? 'target' : 'source';
    const first = await this.list(side, options);
    const found = first.find((l) => l.tag === tag) ?? (await this.list(other, options)).find((l) => l.tag === tag);
    if (found) return found.id;
    const tags = first.map((l) => l.tag);
    const sample = tags.slice(0, 8).join(', ');
    throw new ValidationError(
      field,
      `a language the service lists as a ${side} language (${first.length} of them: ${sample}${tags.length > 8 ? ', ...' : ''}; ` +
        `see listLanguages('${side}')), or its numeric id`,
      JSON.stringify(tagOrId),
    );
  }

  /**
   * The locale tag of a language id, looked up in `side`'s list first, then the other's.
   * `field` names the caller's argument in the error.
   */
  async tagOf(id: number, side: LanguageSide, field: string, options: RequestOptions = {}): Promise<string> {
    const other: LanguageSide = side === 'source' ? 'target' : 'source';
    const found = (await this.list(side, options)).find((l) => l.id === id) ?? (await this.list(other, options)).find((l) => l.id === id);
    if (found) return found.tag;
    throw new ValidationError(field, `an id the service lists as a language (see listLanguages('${side}'))`, String(id));
  }
}

/** The catalog of a requester: its own (cached) one, or a fresh one for this call. */
export function catalogOf(client: HttpRequester): LanguageLookup {
  return client.languages ?? new LanguageCatalog(client);
}

/** One language field of a wire body: its wire path, its side, and its name as the caller wrote it. */
export interface LanguageField {
  /** Wire name at the top of the body (`source_language`); its value may be a list. */
  wire: string;
  side: LanguageSide;
  /** The caller's name for errors (`sourceLanguage`). */
  field: string;
}

/**
 * Replaces the locale tags of `fields` in a validated wire body with the service's numeric ids
 * (the form the endpoints beyond the interface take). Ids pass unchanged; the lists are fetched
 * only when a tag is present.
 */
export async function tagsToIds(
  client: HttpRequester,
  body: Record<string, unknown>,
  fields: LanguageField[],
  options: RequestOptions = {},
): Promise<Record<string, unknown>> {
  const catalog = catalogOf(client);
  const out = { ...body };
  for (const { wire, side, field } of fields) {
    const value = out[wire];
    if (Array.isArray(value)) {
      out[wire] = await Promise.all(value.map((v, i) => catalog.idOf(v as string | number, side, `${field}.${i}`, options)));
    } else if (typeof value === 'string' || typeof value === 'number') {
      out[wire] = await catalog.idOf(value, side, field, options);
    }
  }
  return out;
}
