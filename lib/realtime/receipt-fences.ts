/**
 * What the service has demonstrably received of the input. "Sent" only means handed to our
 * socket: behind it wait the kernel's buffers and the network, seconds of audio on a slow uplink
 * or with a service that reads slowly. A ping sent behind some input is a fence: the peer reads
 * in order, so its pong shows that everything before it has been read. The stream puts one behind
 * the end of each stretch of speech and one behind the last input; this keeps, for the current
 * connection, where each fence stands in the input and when it was sent and answered. Pure
 * bookkeeping: the pings themselves are the connection's (`RealtimeConnection.ping`).
 */

/** One fence: a ping behind input offset `offset`. */
export interface Fence {
  offset: number;
  sentAt: number;
  /** When its pong came (undefined while awaited). */
  receivedAt: number | undefined;
}

/** Fences kept per connection (a fence per stretch of speech and one at the end: plenty). */
const MAX_FENCES = 256;

export class ReceiptFences {
  /** The current connection's fences by ping id, in the order they were sent. */
  readonly #fences = new Map<number, Fence>();
  #lastOffset = 0;

  /** Offset of the newest fence on this connection (0 when none). */
  get lastOffset(): number {
    return this.#lastOffset;
  }

  /** A new connection: the fences of the last one will never be answered. */
  reset(): void {
    this.#fences.clear();
    this.#lastOffset = 0;
  }

  /** Ping `id` was sent behind input offset `offset` at `now`. */
  sent(id: number, offset: number, now: number): void {
    this.#fences.set(id, { offset, sentAt: now, receivedAt: undefined });
    this.#lastOffset = offset;
    if (this.#fences.size > MAX_FENCES) this.#fences.delete(this.#fences.keys().next().value!);
  }

  /**
   * The pong to ping `id` came at `now` (ids grow along a connection): every fence up to it is
   * passed. Returns whether that passed a fence not passed before.
   */
  answered(id: number, now: number): boolean {
    let passed = false;
    for (const [fenceId, fence] of this.#fences) {
      if (fenceId > id) break;
      if (fence.receivedAt === undefined) {
        fence.receivedAt = now;
        passed = true;
      }
    }
    return passed;
  }

  /** The first fence at or past `offset` on this connection: when the service had read up to there. */
  covering(offset: number): Fence | undefined {
    for (const fence of this.#fences.values()) if (fence.offset >= offset) return { ...fence };
    return undefined;
  }
}
