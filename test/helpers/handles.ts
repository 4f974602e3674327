/**
 * Leak checks for tests: counts of the process's live sockets, servers and timers, taken with
 * `process.getActiveResourcesInfo()`, compared against a baseline taken earlier in the same test.
 *
 * Usage:
 * ```ts
 * const baseline = countHandles();
 * // ... open a stream, use it, let it close ...
 * await expectNoLeakedHandles(baseline);
 * ```
 *
 * Policy, so the check is strict but not flaky:
 * - Only three kinds are tracked: `TCPSocketWrap` (a connected TCP socket, either end),
 *   `TCPServerWrap` (a listening socket) and `Timeout` (a ref'd `setTimeout`/`setInterval`).
 *   Other resources (the test runner's IPC pipe, file handles) are not ours to judge.
 * - A kind may go *below* its baseline (something of the runner's ended meanwhile); it fails
 *   only when it stays *above* the baseline.
 * - Closing is asynchronous (a TCP close callback, a server's close answer), and the test runner
 *   itself creates short-lived timers (its RPC calls), so the counts are re-checked after each
 *   turn of the event loop and after short pauses until they are back at the baseline, for at
 *   most `settleMs` (default 1500 ms). Only a resource that is still there then is a leak.
 *   The pauses this helper takes leave no timer behind: the count is taken after the timer's
 *   callback has returned.
 * - Both ends of a loopback connection live in this process. So a `TCPSocketWrap` count back at a
 *   baseline taken while a local server was already listening also proves that the *server*
 *   closed its end of the connection, not only the client.
 * - Fake timers (`vi.useFakeTimers`) do not appear in these counts; switch back to real timers
 *   before relying on the `Timeout` count.
 */
import { setImmediate as immediate, setTimeout as sleep } from 'node:timers/promises';

/** The resource kinds this helper tracks. */
export const TRACKED_KINDS = ['TCPSocketWrap', 'TCPServerWrap', 'Timeout'] as const;

export type TrackedKind = (typeof TRACKED_KINDS)[number];

/** How many resources of each tracked kind are alive. */
export type HandleCounts = Record<TrackedKind, number>;

/** Counts the live resources of each tracked kind, now. */
export function countHandles(): HandleCounts {
  const counts: HandleCounts = { TCPSocketWrap: 0, TCPServerWrap: 0, Timeout: 0 };
  for (const kind of process.getActiveResourcesInfo()) {
    if (kind in counts) counts[kind as TrackedKind] += 1;
  }
  return counts;
}

/** The kinds whose count is above the baseline, with both counts. */
export function handlesAbove(baseline: HandleCounts, now: HandleCounts = countHandles()): Partial<Record<TrackedKind, { baseline: number; now: number }>> {
  const above: Partial<Record<TrackedKind, { baseline: number; now: number }>> = {};
  for (const kind of TRACKED_KINDS) {
    if (now[kind] > baseline[kind]) above[kind] = { baseline: baseline[kind], now: now[kind] };
  }
  return above;
}

export interface SettleOptions {
  /** Longest wait for the counts to come back to the baseline, in ms. Default 1500. */
  settleMs?: number;
}

/**
 * Waits until no tracked kind is above `baseline`, and resolves with the final counts. Rejects,
 * naming each kind still above its baseline, once `settleMs` has passed.
 */
export async function expectNoLeakedHandles(baseline: HandleCounts, options: SettleOptions = {}): Promise<HandleCounts> {
  const settleMs = options.settleMs ?? 1500;
  const deadline = Date.now() + settleMs;
  // First a few loop turns (close callbacks run in their own phase), then short pauses.
  for (let turn = 0; ; turn++) {
    if (turn < 4) await immediate();
    else await sleep(10);
    const now = countHandles();
    const above = handlesAbove(baseline, now);
    if (Object.keys(above).length === 0) return now;
    if (Date.now() >= deadline) {
      const detail = Object.entries(above)
        .map(([kind, { baseline: before, now: after }]) => `${kind}: ${after} alive, ${before} before`)
        .join('; ');
      throw new Error(`Resources left open ${settleMs} ms after the test's work ended: ${detail}.`);
    }
  }
}
