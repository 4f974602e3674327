/**
 * What a realtime session of the emulator is given and shows: its settings (resolved from the
 * emulator's options by `realtime.ts`), the fault plan it consults at named points, what its
 * handshake established, its limits, and the snapshot `stats()` returns.
 */
import { DEFAULT_VOICE_ID } from '../realtime/codec.js';
import type { UtteranceSegmenterOptions } from './vad.js';
import type { VoiceOwnership } from './voices.js';

/** Bytes of PCM16 mono 24 kHz per second of audio. */
export const BYTES_PER_SECOND = 48_000;
/**
 * Speech held to be answered as one (`segmentation: 'idle'`, `mergeUtterances`) is answered once
 * it reaches this much, pause or not: a source that never pauses (a microphone, a phone call)
 * cannot make the emulator keep its audio without bound.
 */
export const MAX_GROUP_BYTES = 60 * BYTES_PER_SECOND;
/** Output audio piece: 400 ms, 9600 samples. */
export const OUTPUT_PIECE_BYTES = 19_200;
/** WebSocket close code for every session-ending error. */
export const SESSION_END_CLOSE_CODE = 1008;
/** Voice ids of the service's stock voices; never accepted as `cloned`. */
export const STOCK_VOICE_IDS: ReadonlySet<number> = new Set([DEFAULT_VOICE_ID]);

/** The session settings, resolved from the emulator options (see `RealtimeEmulatorOptions`). */
export interface RealtimeSessionSettings {
  apiKeys: ReadonlySet<string>;
  /** Which key owns which cloned voice (the emulator's voice registry). */
  voices: VoiceOwnership;
  sessionUpdateTimeoutMs: number;
  creditBytes: number | undefined;
  creditSeconds: number | undefined;
  /** The detector's settings; `splitMs` set when the segmentation is 'split'. */
  segmenter: UtteranceSegmenterOptions;
  segmentation: Segmentation;
  idleMs: number;
  lastAnswer: LastAnswer;
  latencyMs: number;
  audioFrames: 'json' | 'binary';
  coldStartMs: number;
  inputBytesPerSecond: number | undefined;
  sendBufferLimitBytes: number;
  faults: SessionFaultPlan;
}

/** A fault armed when a session is created (`dropAfterMs`, `halfOpenAfterMs`). */
export interface TimedFault {
  afterMs: number;
  fault: 'drop' | 'half-open';
}

/**
 * The fault switches as a session meets them (built from `RealtimeFaults` by `realtime.ts`):
 * each is consulted at one named point of the protocol, so the protocol logic holds none.
 */
export interface SessionFaultPlan {
  /** When grouping answers: how many utterances make one (`mergeUtterances`; 1: the segmentation decides). */
  readonly mergeUtterances: number;
  /** When `session.created` is sent: the faults armed for later (their timers belong to the created session). */
  readonly created: readonly TimedFault[];
  /** When a fault drops the session: how. */
  readonly dropWith: DropOptions;
  /** When an answer is scheduled: extra delay of the one ending with utterance `index` (1-based), in ms. */
  lateMs(index: number): number;
  /**
   * Before a response goes out, `sent` responses having gone before it: undefined to send it, or
   * how many of its `frames` go out before the session is dropped (0: dropped before it).
   */
  beforeResponse(sent: number, frames: ReadonlyArray<string | Buffer>): number | undefined;
  /** After an append has been heard, `heardBytes` in all: true to drop the session now. */
  afterInput(heardBytes: number): boolean;
  /** When the key could be shown (`session.created`, error messages): the key echoed back, or undefined. */
  echo(key: string | undefined): string | undefined;
}

/**
 * When the service answers: each utterance when it ends ('utterance'), everything heard once the
 * appends pause ('idle'), or long utterances in two parts ('split').
 */
export type Segmentation = 'utterance' | 'idle' | 'split';

/**
 * When a finished answer is sent: at once ('prompt'), or held until speech is heard again; an
 * answer still held when the appends pause is the last one: sent `lateMs` later, or never.
 */
export type LastAnswer = 'prompt' | 'never' | { readonly lateMs: number };

/** How a session is ended on purpose: cut without a close frame, or closed with `code`. */
export interface DropOptions {
  /** Close with this code instead of cutting the connection (the client then sees 1006). */
  code?: number;
  /** Reset the connection (TCP RST) at once: what was in flight is lost, as on a real network. */
  reset?: boolean;
}

/** What the handshake established. */
export interface RealtimeHandshake {
  /** The `x-api-key` header, already checked against the accepted keys; absent when not sent. */
  headerKey: string | undefined;
  /** `?model=` and `?mode=` of the handshake URL, echoed in `session.created`. */
  model: string | undefined;
  mode: string | undefined;
}

/**
 * Where a session is: waiting for its first `session.update`, cold-starting, running, stopping
 * after billing, half-open (a fault: reading and answering nothing), closed.
 */
export type RealtimeSessionState = 'awaiting-update' | 'starting' | 'active' | 'stopping' | 'half-open' | 'closed';

/** A snapshot of one session, for tests and diagnostics. */
export interface RealtimeSessionStats {
  /** The session id, once `session.created` was sent. */
  id: string | undefined;
  state: RealtimeSessionState;
  /** Bytes of input audio processed (after `session.created`, within the credit). */
  audioBytes: number;
  /** Bytes queued on the socket, not yet written. */
  bufferedAmount: number;
  /** The largest `bufferedAmount` seen right after a send. */
  peakBufferedAmount: number;
  /** True while the emulator is not reading the client's input (slow client or `inputBytesPerSecond`). */
  readingPaused: boolean;
}
