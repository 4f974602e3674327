/**
 * The emulator's voices, shared by its HTTP and realtime sides: a few stock (library) voices
 * everyone may use, and custom voices each owned by the API key that created them (through
 * `POST /create-custom-voice` or `POST /text-to-voice`'s result, or seeded with the
 * `clonedVoices` option). The realtime side accepts `voice: {type: 'cloned', voice_id}` only
 * for a custom voice of the session's key; `DELETE /delete-voice/{id}` removes it for good.
 */
import { ValidationError } from '../errors.js';
import { DEFAULT_VOICE_ID } from '../realtime/codec.js';

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

interface StoredVoice extends EmulatedVoice {
  /** The key that created it; undefined for stock voices. */
  owner: string | undefined;
}

/** What decides whether a realtime session may use a cloned voice. */
export interface VoiceOwnership {
  owns(apiKey: string, voiceId: number): boolean;
}

/** The stock voices: the interface's default voice and a few others. Never cloned voices. */
export const STOCK_VOICES: readonly EmulatedVoice[] = Object.freeze([
  { id: DEFAULT_VOICE_ID, voice_name: 'Alice', gender: 2, age: 28, language: 1, description: 'Default voice: warm, clear narration.', is_published: true, transcript: null },
  { id: 20_299, voice_name: 'Bruno', gender: 1, age: 41, language: 1, description: 'Low, calm male voice.', is_published: true, transcript: null },
  { id: 20_305, voice_name: 'Carmen', gender: 2, age: 35, language: 54, description: 'Bright Castilian Spanish voice.', is_published: true, transcript: null },
  { id: 20_311, voice_name: 'Dev', gender: 1, age: 24, language: 244, description: 'Young Hindi voice.', is_published: true, transcript: null },
]);

const STOCK_IDS: ReadonlySet<number> = new Set(STOCK_VOICES.map((voice) => voice.id));

/** First id given to a new custom voice. */
const FIRST_CUSTOM_ID = 300_001;

export class VoiceRegistry implements VoiceOwnership {
  readonly #voices = new Map<number, StoredVoice>();
  #nextId = FIRST_CUSTOM_ID;

  /** `clonedVoices`: `{ [apiKey]: voiceIds[] }`, custom voices that exist from the start. */
  constructor(clonedVoices: Readonly<Record<string, readonly number[]>> = {}) {
    for (const voice of STOCK_VOICES) this.#voices.set(voice.id, { ...voice, owner: undefined });
    if (clonedVoices === null || typeof clonedVoices !== 'object') {
      throw new ValidationError('clonedVoices', 'an object mapping API keys to arrays of positive integer voice ids');
    }
    for (const [key, ids] of Object.entries(clonedVoices)) {
      if (!Array.isArray(ids) || !ids.every((id) => Number.isSafeInteger(id) && id > 0)) {
        throw new ValidationError('clonedVoices', 'an object mapping API keys to arrays of positive integer voice ids');
      }
      for (const id of ids) {
        if (STOCK_IDS.has(id)) continue; // a stock voice is never anyone's cloned voice
        this.#voices.set(id, { id, voice_name: `Cloned voice ${id}`, gender: null, age: null, language: null, description: null, is_published: false, transcript: null, owner: key });
        this.#nextId = Math.max(this.#nextId, id + 1);
      }
    }
  }

  /** True when `voiceId` is a custom voice created by `apiKey`. */
  owns(apiKey: string, voiceId: number): boolean {
    return this.#voices.get(voiceId)?.owner === apiKey;
  }

  /** Adds a custom voice owned by `owner`; returns it with its new id. */
  add(owner: string, fields: Omit<EmulatedVoice, 'id'>): EmulatedVoice {
    const id = this.#nextId++;
    const voice: StoredVoice = { ...fields, id, owner };
    this.#voices.set(id, voice);
    return this.#public(voice);
  }

  /** Deletes `owner`'s custom voice `voiceId`; false when it is not one of theirs. */
  delete(owner: string, voiceId: number): boolean {
    if (!this.owns(owner, voiceId)) return false;
    this.#voices.delete(voiceId);
    return true;
  }

  /** The voices `apiKey` may use: the stock voices, then its own, by id. */
  listFor(apiKey: string): EmulatedVoice[] {
    return [...this.#voices.values()]
      .filter((voice) => voice.owner === undefined || voice.owner === apiKey)
      .sort((a, b) => a.id - b.id)
      .map((voice) => this.#public(voice));
  }

  #public(voice: StoredVoice): EmulatedVoice {
    const { owner: _owner, ...rest } = voice;
    return rest;
  }
}
