/**
 * Sessions held at once, counted under named keys, each key with its own limit: all of a
 * server, one caller's address, one token. A new session takes a slot under each of its keys
 * or under none (the first full key says why it was refused), and gives them all back when it
 * ends. A key whose count falls to 0 is forgotten, so the memory held is bounded by the
 * sessions alive, never by the callers ever seen.
 */

/** A key and the most slots it may hold at once. */
export type SlotClaim = readonly [key: string, limit: number];

export class SlotCounter {
  readonly #counts = new Map<string, number>();

  /** Slots held under `key`. */
  count(key: string): number {
    return this.#counts.get(key) ?? 0;
  }

  /** Keys holding at least one slot. */
  get keys(): number {
    return this.#counts.size;
  }

  /** Takes a slot under every claim's key, or none: returns the first key at its limit, undefined once taken. */
  take(claims: readonly SlotClaim[]): string | undefined {
    for (const [key, limit] of claims) if (this.count(key) >= limit) return key;
    for (const [key] of claims) this.#counts.set(key, this.count(key) + 1);
    return undefined;
  }

  /** Gives back the slots `take(claims)` took. */
  release(claims: readonly SlotClaim[]): void {
    for (const [key] of claims) {
      const left = this.count(key) - 1;
      if (left > 0) this.#counts.set(key, left);
      else this.#counts.delete(key);
    }
  }
}
