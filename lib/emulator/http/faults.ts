/**
 * Fault switches of the emulator's HTTP side, armed through `POST /_emulator/faults` (see the
 * module doc of `index.ts` for the wire form). Each armed fault applies to the next `count`
 * matching requests, oldest fault first:
 *
 * - `status`: answer at once with that status and `{error, status}`, before auth and before any
 *   work (the service did not act); `Retry-After: retryAfter` is added to 429 and 503. With
 *   `afterBody`, the whole request body is read first (a gateway that refuses an upload only
 *   once it arrived).
 * - `stallMs`: hold the request that long before handling it (headers come late), or, with
 *   `stallAfterBytes`, send that many body bytes and then pause the rest for `stallMs`.
 * - `dropAfterBytes`: handle the request (the service acts: a task is created), then destroy the
 *   connection after that many bytes of the response body (0: before the headers).
 */
import type { ServerResponse } from 'node:http';

export interface FaultSpec {
  status?: number;
  /** Seconds for `Retry-After` on 429/503. Default 1; `null` sends none. */
  retryAfter?: number | null;
  /** With `status`: read the whole request body before answering. */
  afterBody?: boolean;
  dropAfterBytes?: number;
  stallMs?: number;
  stallAfterBytes?: number;
  /** Requests affected. Default 1. */
  count?: number;
  /** Only requests whose path starts with this. */
  path?: string;
  /** Only requests with this method. */
  method?: string;
}

interface ArmedFault extends FaultSpec {
  remaining: number;
}

/** An integer from `min` to `max`: the counts, statuses and codes of the fault switches. */
export function isCount(value: unknown, min: number, max = Number.MAX_SAFE_INTEGER): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= min && value <= max;
}

/** Checks a fault from the control endpoint; returns a message for a bad one. */
export function checkFault(value: unknown): string | undefined {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return 'a fault is a JSON object';
  const f = value as Record<string, unknown>;
  const known = ['status', 'retryAfter', 'afterBody', 'dropAfterBytes', 'stallMs', 'stallAfterBytes', 'count', 'path', 'method'];
  const unknown = Object.keys(f).filter((k) => !known.includes(k));
  if (unknown.length > 0) return `unknown fault field(s) ${unknown.join(', ')}; known: ${known.join(', ')}`;
  if (f.status !== undefined && !(isCount(f.status, 100) && (f.status as number) <= 599)) return 'status must be an integer 100..599';
  if (f.retryAfter !== undefined && f.retryAfter !== null && !(typeof f.retryAfter === 'number' && f.retryAfter >= 0)) {
    return 'retryAfter must be a number of seconds >= 0, or null';
  }
  for (const key of ['dropAfterBytes', 'stallMs', 'stallAfterBytes'] as const) {
    if (f[key] !== undefined && !isCount(f[key], 0)) return `${key} must be an integer >= 0`;
  }
  if (f.count !== undefined && !isCount(f.count, 1)) return 'count must be an integer >= 1';
  if (f.path !== undefined && typeof f.path !== 'string') return 'path must be a string';
  if (f.method !== undefined && typeof f.method !== 'string') return 'method must be a string';
  if (f.status === undefined && f.dropAfterBytes === undefined && f.stallMs === undefined) {
    return 'a fault needs status, dropAfterBytes or stallMs';
  }
  if (f.stallAfterBytes !== undefined && f.stallMs === undefined) return 'stallAfterBytes needs stallMs';
  if (f.afterBody !== undefined && (typeof f.afterBody !== 'boolean' || f.status === undefined)) return 'afterBody must be a boolean, with status';
  return undefined;
}

export class FaultSwitch {
  #faults: ArmedFault[] = [];
  readonly #timers = new Set<NodeJS.Timeout>();

  add(spec: FaultSpec): void {
    this.#faults.push({ ...spec, remaining: spec.count ?? 1 });
  }

  list(): FaultSpec[] {
    return this.#faults.map(({ remaining, ...spec }) => ({ ...spec, count: remaining }));
  }

  clear(): void {
    this.#faults = [];
  }

  /** The first fault matching the request, with one use consumed. */
  take(method: string, path: string): FaultSpec | undefined {
    const index = this.#faults.findIndex(
      (f) => (f.path === undefined || path.startsWith(f.path)) && (f.method === undefined || f.method.toUpperCase() === method),
    );
    if (index < 0) return undefined;
    const fault = this.#faults[index]!;
    fault.remaining -= 1;
    if (fault.remaining <= 0) this.#faults.splice(index, 1);
    return fault;
  }

  /** Runs `fn` after `ms`, unless the switch is closed first. */
  later(ms: number, fn: () => void): void {
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      fn();
    }, ms);
    this.#timers.add(timer);
  }

  /**
   * Wraps `res.write`/`res.end` so the body stops after `limit` bytes: then the connection is
   * destroyed (`drop`), or the rest is held back for `stallMs` (`stall`).
   */
  limitBody(res: ServerResponse, limit: number, action: { drop: true } | { stallMs: number }): void {
    const write = res.write.bind(res) as (chunk: Buffer, cb?: () => void) => boolean;
    const end = res.end.bind(res) as (cb?: () => void) => ServerResponse;
    let sent = 0;
    let tripped = false;
    const held: Buffer[] = [];
    let endHeld = false;
    const trip = (last?: Buffer): void => {
      tripped = true;
      if ('drop' in action) {
        // Destroy once the last allowed bytes are handed to the socket, so they do arrive.
        if (last && last.length > 0) write(last, () => res.destroy());
        else res.destroy();
        return;
      }
      if (last && last.length > 0) write(last);
      this.later(action.stallMs, () => {
        if (res.destroyed) return;
        for (const chunk of held.splice(0)) write(chunk);
        if (endHeld) end();
      });
    };
    const toBuffer = (chunk: unknown, encoding?: unknown): Buffer =>
      Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
    const patchedWrite = (chunk: unknown, encoding?: unknown, cb?: unknown): boolean => {
      const callback = typeof encoding === 'function' ? encoding : cb;
      const buffer = toBuffer(chunk, encoding);
      if (tripped) {
        if (!('drop' in action)) held.push(buffer);
        if (typeof callback === 'function') process.nextTick(callback as () => void);
        return true;
      }
      const room = limit - sent;
      if (buffer.length < room) {
        sent += buffer.length;
        return write(buffer, typeof callback === 'function' ? (callback as () => void) : undefined);
      }
      sent = limit;
      if (!('drop' in action)) held.push(buffer.subarray(room));
      if (typeof callback === 'function') process.nextTick(callback as () => void);
      trip(buffer.subarray(0, room));
      return true;
    };
    const patchedEnd = (chunk?: unknown, encoding?: unknown, cb?: unknown): ServerResponse => {
      const callback = [chunk, encoding, cb].find((v) => typeof v === 'function') as (() => void) | undefined;
      if (chunk !== undefined && chunk !== null && typeof chunk !== 'function') patchedWrite(chunk, encoding);
      if (tripped) {
        endHeld = true;
        if (callback) process.nextTick(callback);
        return res;
      }
      if (limit === 0 && sent === 0) {
        trip();
        endHeld = true;
        return res;
      }
      return end(callback);
    };
    res.write = patchedWrite as ServerResponse['write'];
    res.end = patchedEnd as ServerResponse['end'];
    if (limit === 0 && 'drop' in action) {
      // Nothing of the answer may leave: not even its headers.
      const writeHead = res.writeHead.bind(res);
      res.writeHead = ((...args: Parameters<ServerResponse['writeHead']>) => {
        tripped = true;
        res.destroy();
        return writeHead(...args);
      }) as ServerResponse['writeHead'];
    }
  }

  close(): void {
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
    this.#faults = [];
  }
}
