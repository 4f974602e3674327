/**
 * Where a realtime session of the emulator is (`SessionState`, one union) and the data and
 * timers that belong to each place: what an active session has heard (`HeardSpeech`), what it
 * keeps while answering. The session changes state through one setter that clears the timers
 * the old state owned (`timersOf`).
 */
import type { OutputModality, VoiceSelection } from '../realtime/codec.js';
import type { HeardSpeech } from './heard-speech.js';

export interface ActiveConfig {
  source_language: string;
  target_language: string;
  output_modalities: OutputModality[];
  voice: VoiceSelection;
}

export interface PendingResponse {
  dueAt: number;
  frames: Array<string | Buffer>;
}

export type Timer = NodeJS.Timeout;

/** What a created session keeps while it answers: carried from `active` into `stopping`. */
export interface Answering {
  config: ActiveConfig;
  /** Responses not sent yet, in order; `queueTimer` waits for the first one's time. */
  readonly queue: PendingResponse[];
  queueTimer: Timer | undefined;
  /** `inputBytesPerSecond`: reading waits until `readAllowedAt`; `throttleTimer` looks again then. */
  readAllowedAt: number;
  throttleTimer: Timer | undefined;
  /** The fault plan's timers armed at `session.created`. */
  readonly faultTimers: readonly Timer[];
}

/**
 * Where a session is, with the timers and data that belong there. Changed only through `#set`,
 * which clears every timer of the old state that the new one does not keep.
 */
export type SessionState =
  /** `timer`: no `session.update` in time. */
  | { status: 'awaiting-update'; timer: Timer }
  /** Cold start: `timer` creates the session. */
  | { status: 'starting'; config: ActiveConfig; timer: Timer }
  /** `idleTimer`, then `idleCheck`: the audio stopped arriving (see `#armIdle`). */
  | ({ status: 'active'; heard: HeardSpeech; idleTimer: Timer | undefined; idleCheck: NodeJS.Immediate | undefined } & Answering)
  /** Credits used up: what is queued still goes out, then the session ends. */
  | ({ status: 'stopping' } & Answering)
  /** `timer`: the socket is cut after `HALF_OPEN_HOLD_MS`. */
  | { status: 'half-open'; timer: Timer }
  /** A drop's `cut` waits for what was sent to be flushed; `timer` then cuts the socket if the client does not close. */
  | { status: 'closed'; cut: (() => void) | undefined; timer: Timer | undefined };

export const CLOSED: SessionState = Object.freeze({ status: 'closed', cut: undefined, timer: undefined });

export function timersOf(state: SessionState): Array<Timer | undefined> {
  switch (state.status) {
    case 'active':
      return [state.idleTimer, state.queueTimer, state.throttleTimer, ...state.faultTimers];
    case 'stopping':
      return [state.queueTimer, state.throttleTimer, ...state.faultTimers];
    default:
      return [state.timer];
  }
}
