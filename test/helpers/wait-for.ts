/**
 * Waiting in tests on what an emitter tells us, never on the clock:
 *
 * ```ts
 * await waitFor(() => stream.stats.paused, { onEvent: [stream, 'event'] });
 * ```
 *
 * The predicate is checked at once, then again inside each listed event's listener (so it sees
 * the state the event was emitted in); the promise resolves with its first truthy value. No
 * timer is involved: a condition that never comes is the test runner's timeout, so list the
 * events after which the condition can change. If the predicate throws, the promise rejects
 * with that error. Every listener is removed once the promise settles.
 */
import type { EventEmitter } from 'node:events';

/** An emitter and the events after which the predicate is checked again. */
export type EventSource = readonly [emitter: EventEmitter, ...events: Array<string | symbol>];

export interface WaitForOptions {
  /** One source, or several. */
  onEvent: EventSource | readonly EventSource[];
}

export function waitFor<T>(predicate: () => T, options: WaitForOptions): Promise<Exclude<T, false | 0 | '' | null | undefined>> {
  type Met = Exclude<T, false | 0 | '' | null | undefined>;
  const sources: readonly EventSource[] = isSourceList(options.onEvent) ? options.onEvent : [options.onEvent];
  return new Promise<Met>((resolve, reject) => {
    const listening: Array<[EventEmitter, string | symbol]> = [];
    const stop = (): void => {
      for (const [emitter, event] of listening) emitter.off(event, check);
    };
    function check(): boolean {
      let value: T;
      try {
        value = predicate();
      } catch (error) {
        stop();
        reject(error);
        return true;
      }
      if (!value) return false;
      stop();
      resolve(value as Met);
      return true;
    }
    if (check()) return;
    for (const [emitter, ...events] of sources) {
      for (const event of events) {
        emitter.on(event, check);
        listening.push([emitter, event]);
      }
    }
  });
}

function isSourceList(onEvent: WaitForOptions['onEvent']): onEvent is readonly EventSource[] {
  return Array.isArray(onEvent[0]);
}
