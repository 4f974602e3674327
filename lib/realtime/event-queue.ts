/**
 * A bounded async-iterator queue. The producer pushes; when any queue holds more than its
 * bound (a number of items, or their total weight in bytes), `onPressure(true)` tells the
 * producer to stop reading its source, and `onPressure(false)` once every queue has drained to
 * half. So an iterator consumer that is slower than the network holds back the socket instead
 * of growing memory.
 */

export interface FanoutBounds<T> {
  /** Items a subscriber may have queued. */
  count: number;
  /** Total weight a subscriber may have queued. */
  bytes: number;
  /** The weight of one item, in bytes. */
  weigh: (item: T) => number;
}

interface Waiter<T> {
  resolve: (result: IteratorResult<T>) => void;
  reject: (error: unknown) => void;
}

export class EventFanout<T> {
  readonly #subscribers = new Set<Subscriber<T>>();
  readonly #bounds: FanoutBounds<T>;
  readonly #onPressure: (full: boolean) => void;
  #full = false;
  #ended = false;
  #error: unknown;

  constructor(bounds: FanoutBounds<T>, onPressure: (full: boolean) => void) {
    this.#bounds = bounds;
    this.#onPressure = onPressure;
  }

  /** Iterators currently subscribed. */
  get subscribers(): number {
    return this.#subscribers.size;
  }

  /** Number of events waiting in the fullest queue. */
  get maxQueued(): number {
    let max = 0;
    for (const s of this.#subscribers) max = Math.max(max, s.queue.length);
    return max;
  }

  push(value: T): void {
    if (this.#ended) return;
    const weight = this.#bounds.weigh(value);
    for (const s of this.#subscribers) s.offer(value, weight);
    this.#checkPressure();
  }

  /** Ends every iterator: they drain what is queued, then finish (or throw `error`). */
  end(error?: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#error = error;
    for (const s of this.#subscribers) s.finish(error);
    this.#checkPressure();
  }

  subscribe(): AsyncIterableIterator<T> {
    const sub = new Subscriber<T>(
      this.#bounds.weigh,
      () => this.#checkPressure(),
      () => {
        this.#subscribers.delete(sub);
        this.#checkPressure();
      },
    );
    if (this.#ended) sub.finish(this.#error);
    else this.#subscribers.add(sub);
    return sub;
  }

  #checkPressure(): void {
    let full = false;
    if (!this.#ended) {
      const divisor = this.#full ? 2 : 1;
      for (const s of this.#subscribers) {
        if (s.queue.length > this.#bounds.count / divisor || s.queuedBytes > this.#bounds.bytes / divisor) full = true;
      }
    }
    if (full !== this.#full) {
      this.#full = full;
      this.#onPressure(full);
    }
  }
}

class Subscriber<T> implements AsyncIterableIterator<T> {
  readonly queue: T[] = [];
  queuedBytes = 0;
  readonly #weigh: (item: T) => number;
  #waiter: Waiter<T> | undefined;
  #done = false;
  #error: unknown;
  readonly #onTake: () => void;
  readonly #onReturn: () => void;

  constructor(weigh: (item: T) => number, onTake: () => void, onReturn: () => void) {
    this.#weigh = weigh;
    this.#onTake = onTake;
    this.#onReturn = onReturn;
  }

  offer(value: T, weight: number): void {
    if (this.#done) return;
    const waiter = this.#waiter;
    if (waiter) {
      this.#waiter = undefined;
      waiter.resolve({ value, done: false });
    } else {
      this.queue.push(value);
      this.queuedBytes += weight;
    }
  }

  finish(error: unknown): void {
    if (this.#done) return;
    this.#done = true;
    this.#error = error;
    const waiter = this.#waiter;
    if (waiter && this.queue.length === 0) {
      this.#waiter = undefined;
      this.#settleEnd(waiter);
    }
  }

  #settleEnd(waiter: Waiter<T>): void {
    const error = this.#error;
    this.#error = undefined;
    if (error !== undefined) waiter.reject(error);
    else waiter.resolve({ value: undefined, done: true });
  }

  next(): Promise<IteratorResult<T>> {
    if (this.queue.length > 0) {
      const value = this.queue.shift() as T;
      this.queuedBytes -= this.#weigh(value);
      this.#onTake();
      return Promise.resolve({ value, done: false });
    }
    return new Promise((resolve, reject) => {
      const waiter = { resolve, reject };
      if (this.#done) this.#settleEnd(waiter);
      else this.#waiter = waiter;
    });
  }

  return(): Promise<IteratorResult<T>> {
    this.#done = true;
    this.queue.length = 0;
    this.queuedBytes = 0;
    this.#onReturn();
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.resolve({ value: undefined, done: true });
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    return this;
  }
}
