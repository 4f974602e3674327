/**
 * What the emulator's parts (HTTP, realtime, live transcription) share, and what each gives the
 * server that runs them; the parts and the server import it, never each other's modules.
 */
import type { StateDir } from './state-store.js';
import type { VoiceRegistry } from './voices.js';

/** Emulator parts share this: who may call, the voices, where it remembers, and the server's own address once known. */
export interface EmulatorContext {
  apiKeys: ReadonlySet<string>;
  /** Stock voices and each key's custom voices, for both sides. */
  voices: VoiceRegistry;
  /** The state directory (`stateDir`), if any. */
  state?: StateDir | undefined;
  baseUrl(): string;
}

/** A part of the emulator, as the server runs it. */
export interface EmulatorPart {
  close(): Promise<void>;
}
