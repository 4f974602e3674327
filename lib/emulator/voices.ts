/**
 * The emulator's voices, shared by its HTTP and realtime sides: a few stock (library) voices
 * everyone may use, and custom voices each owned by the API key that created them (through
 * `POST /create-custom-voice` or `POST /text-to-voice`'s result, or seeded with the
 * `clonedVoices` option). The realtime side accepts `voice: {type: 'cloned', voice_id}` only
 * for a custom voice of the session's key; `DELETE /delete-voice/{id}` removes it for good.
 * Voices made while the emulator runs are kept in its state directory when it has one, where
 * every emulator on that directory sees them; owners are kept as hashes of their keys.
 */
import { ValidationError } from '../errors.js';
import { DEFAULT_VOICE_ID } from '../limits.js';
import { memoryRecords, ownerId, type Records } from './state-store.js';

/** One voice as `GET /list-voices` describes it (wire names). */
export interface EmulatedVoice {
  id: number;
  voice_name: string;
  gender: number | null;
  age: number | null;
  /** Numeric language id, or null. */
  language: number | null;
  description: string | null;
  is_published: boolean;
  transcript: string | null;
}

export interface StoredVoice extends EmulatedVoice {
  /** `ownerId` of the key that created it; undefined for stock voices. */
  owner: string | undefined;
}

/** What decides whether a realtime session may use a cloned voice. */
export interface VoiceOwnership {
  owns(apiKey: string, voiceId: number): boolean;
}

/** The stock voices: the interface's default voice and a few others. Never cloned voices. */
export const STOCK_VOICES: readonly EmulatedVoice[] = Object.freeze([
  {
    id: DEFAULT_VOICE_ID,
    voice_name: 'Alice',
    gender: 2,
    age: 28,
    language: 1,
    description: 'Default voice: warm, clear narration.',
    is_published: true,
    transcript: null,
  },
  { id: 20_299, voice_name: 'Bruno', gender: 1, age: 41, language: 1, description: 'Low, calm male voice.', is_published: true, transcript: null },
  { id: 20_305, voice_name: 'Carmen', gender: 2, age: 35, language: 54, description: 'Bright Castilian Spanish voice.', is_published: true, transcript: null },
  { id: 20_311, voice_name: 'Dev', gender: 1, age: 24, language: 244, description: 'Young Hindi voice.', is_published: true, transcript: null },
]);

const STOCK_IDS: ReadonlySet<number> = new Set(STOCK_VOICES.map((voice) => voice.id));

/** First id given to a new custom voice. */
const FIRST_CUSTOM_ID = 300_001;

export class VoiceRegistry implements VoiceOwnership {
  /** Stock voices and those of `clonedVoices`: the emulator's configuration, never stored. */
  readonly #configured = new Map<number, StoredVoice>();
  /** Voices made while it runs: in memory, or in its state directory, shared by every emulator on it. */
  readonly #made: Records<StoredVoice>;
  #nextId = FIRST_CUSTOM_ID;

  /**
   * `clonedVoices`: `{ [apiKey]: voiceIds[] }`, custom voices that exist from the start. `made`:
   * where voices created later are kept (default: in memory).
   */
  constructor(clonedVoices: Readonly<Record<string, readonly number[]>> = {}, made: Records<StoredVoice> = memoryRecords()) {
    this.#made = made;
    for (const voice of STOCK_VOICES) this.#configured.set(voice.id, { ...voice, owner: undefined });
    if (clonedVoices === null || typeof clonedVoices !== 'object') {
      throw new ValidationError('clonedVoices', 'an object mapping API keys to arrays of positive integer voice ids');
    }
    for (const [key, ids] of Object.entries(clonedVoices)) {
      if (!Array.isArray(ids) || !ids.every((id) => Number.isSafeInteger(id) && id > 0)) {
        throw new ValidationError('clonedVoices', 'an object mapping API keys to arrays of positive integer voice ids');
      }
      for (const id of ids) {
        if (STOCK_IDS.has(id)) continue; // a stock voice is never anyone's cloned voice
        this.#configured.set(id, {
          id,
          voice_name: `Cloned voice ${id}`,
          gender: null,
          age: null,
          language: null,
          description: null,
          is_published: false,
          transcript: null,
          owner: ownerId(key),
        });
        this.#nextId = Math.max(this.#nextId, id + 1);
      }
    }
  }

  #get(voiceId: number): StoredVoice | undefined {
    return this.#configured.get(voiceId) ?? this.#made.get(String(voiceId));
  }

  /** True when `voiceId` is a custom voice created by `apiKey`. */
  owns(apiKey: string, voiceId: number): boolean {
    return this.#get(voiceId)?.owner === ownerId(apiKey);
  }

  /** True when `apiKey` may speak with `voiceId`: a stock voice or one of its own. */
  usableBy(apiKey: string, voiceId: number): boolean {
    const owner = this.#get(voiceId)?.owner;
    return owner === undefined ? STOCK_IDS.has(voiceId) : owner === ownerId(apiKey);
  }

  /** Adds a custom voice owned by `owner`, with an id no other emulator on the same state has given; returns it. */
  add(owner: string, fields: Omit<EmulatedVoice, 'id'>): EmulatedVoice {
    const taken = this.#made.names().map(Number).filter(Number.isSafeInteger);
    for (let id = Math.max(this.#nextId, ...taken.map((n) => n + 1)); ; id++) {
      if (this.#configured.has(id)) continue;
      const voice: StoredVoice = { ...fields, id, owner: ownerId(owner) };
      if (!this.#made.claim(String(id), voice)) continue;
      this.#nextId = id + 1;
      return this.#public(voice);
    }
  }

  /** Deletes `owner`'s custom voice `voiceId`; false when it is not one of theirs. */
  delete(owner: string, voiceId: number): boolean {
    if (!this.owns(owner, voiceId)) return false;
    return this.#configured.delete(voiceId) || this.#made.delete(String(voiceId));
  }

  /** The voices `apiKey` may use: the stock voices, then its own, by id. */
  listFor(apiKey: string): EmulatedVoice[] {
    const owner = ownerId(apiKey);
    const made = this.#made.names().flatMap((name) => this.#made.get(name) ?? []);
    return [...this.#configured.values(), ...made]
      .filter((voice) => voice.owner === undefined || voice.owner === owner)
      .sort((a, b) => a.id - b.id)
      .map((voice) => this.#public(voice));
  }

  #public(voice: StoredVoice): EmulatedVoice {
    const { owner: _owner, ...rest } = voice;
    return rest;
  }
}
