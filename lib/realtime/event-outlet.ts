/**
 * The outgoing side of a realtime Duplex, toward its caller: every event under its one name
 * (`emit('event')`, the event's own name with its listener arguments, and `events()` iterators),
 * and the data for the readable side. Either consumer that falls behind pauses the socket: the
 * reader when `push()` says so (until `_read`), an iterator past its bound (until it drained to
 * half). While nothing reads the stream but an iterator does, data reaches the iterator only,
 * so no buffer grows. Every realtime stream of the library shares this.
 */
import type { Duplex } from 'node:stream';
import { EventFanout, type FanoutBounds } from './event-queue.js';
import type { SessionLink } from './session-link.js';

export interface EventOutletOptions<E> {
  /** How much an event may wait for `events()` iterators. */
  bounds: FanoutBounds<E>;
  /** The arguments of a listener of `event.type`. */
  listenerArgs(event: E): unknown[];
  /** The socket was paused by us and reads again (our own pause is never the service's quiet). */
  resumed?(): void;
}

export class EventOutlet<E extends { type: string }> {
  readonly #stream: Duplex;
  readonly #link: Pick<SessionLink, 'pause' | 'resume' | 'paused'>;
  readonly #o: EventOutletOptions<E>;
  readonly #fanout: EventFanout<E>;
  /** The socket is paused for the reader (only this outlet pauses the link for that reason). */
  #reader = false;

  constructor(stream: Duplex, link: Pick<SessionLink, 'pause' | 'resume' | 'paused'>, options: EventOutletOptions<E>) {
    this.#stream = stream;
    this.#link = link;
    this.#o = options;
    this.#fanout = new EventFanout<E>(options.bounds, (full) => this.#pause('events', full));
  }

  /** A new iterator of every event from now on (see `EventFanout`). */
  subscribe(): AsyncIterableIterator<E> {
    return this.#fanout.subscribe();
  }

  /** Emits an event under its one name, and queues it for `events()` iterators. */
  publish(event: E): void {
    const s = this.#stream;
    s.emit('event', event);
    // Nothing is queued, weighed or built for listeners that are not there: most audio deltas
    // have neither an iterator nor a listener of their own name.
    if (this.#fanout.subscribers > 0) this.#fanout.push(event);
    if (s.listenerCount(event.type) > 0) s.emit(event.type, ...this.#o.listenerArgs(event));
  }

  /** Data for the readable side; a reader that is behind pauses the socket. */
  deliver(data: unknown): void {
    const s = this.#stream;
    if (s.readableEnded || s.destroyed) return;
    // Nothing reads the stream but an events() iterator does: it gets the data there.
    if (s.readableFlowing === null && this.#fanout.subscribers > 0) return;
    if (!s.push(data)) this.#pause('reader', true);
  }

  /** `_read` (after every push, the stream reads ahead): the reader wants more. */
  read(): void {
    if (this.#reader) this.#pause('reader', false);
  }

  /** Iterators end after what they have queued (or throw `error`). */
  end(error?: Error): void {
    this.#fanout.end(error);
  }

  #pause(reason: 'reader' | 'events', on: boolean): void {
    if (reason === 'reader') this.#reader = on;
    const link = this.#link;
    const paused = link.paused;
    if (on) link.pause(reason);
    else link.resume(reason);
    if (paused && !link.paused) this.#o.resumed?.();
  }
}
