/**
 * Where a `TwilioMediaBridge` is: its input (`InboundState`, with the timers each place owns)
 * and its translated side (`OutputState`, which ends on its own schedule). The bridge changes
 * each through one setter; `timersOf` names the timers a setter clears.
 */
/**
 * Where the call's input is. `timer` is the start timeout (`startTimeoutMs`); `idle` the media
 * timeout (`mediaTimeoutMs`), restarted by each accepted frame; `hold` a frame waiting for the
 * clock (`maxAheadMs`), its write's callback held meanwhile; `waiting` a write's callback
 * waiting for the translator's `drain`. Changed only through `#set`, which clears the timers the
 * new state does not keep.
 */
export type InboundState =
  | { status: 'awaiting-start'; timer: NodeJS.Timeout }
  | { status: 'live'; idle: NodeJS.Timeout; startedAt: number; hold: NodeJS.Timeout | undefined; waiting: boolean }
  /** `stop`, or the end of the writable side: no more input, no timers. */
  | { status: 'ended' }
  | { status: 'closed' };

/**
 * Where the translated side (translator -> `TwilioOutbound` -> the readable side) is. It ends on
 * its own schedule, before or after the input, so it is a state of its own, changed only through
 * `#setOutput`, which settles a `_final` callback the new state does not carry (unless the bridge
 * is destroyed: Node no longer waits for it then).
 */
export type OutputState =
  /** `finalCallback`: the input has ended and `_final` waits for the last response. */
  | { status: 'translating'; finalCallback: StreamCallback | undefined }
  /** The last response has gone out: the readable side has ended. */
  | { status: 'done' }
  /** The input ended before `start` (`openSession: 'start'`): no session was opened, none is ended. */
  | { status: 'skipped' }
  | { status: 'closed' };

export type StreamCallback = (error?: Error | null) => void;

export function timersOf(state: InboundState): Array<NodeJS.Timeout | undefined> {
  switch (state.status) {
    case 'awaiting-start':
      return [state.timer];
    case 'live':
      return [state.idle, state.hold];
    default:
      return [];
  }
}
