/**
 * Where a browser session is (`RealtimeTranslator`, `RealtimeRoom`, `RealtimeRoomSpeaker`:
 * idle, starting, running, stopped), changed through one setter that tells the owner of each
 * change, once, so that its `state` event fires only when the state really changes.
 *
 * Compared through `is()`, a method: the state changes while `start()` awaits, and a comparison
 * of a field would keep the narrowing from before the await.
 */
export class StateCell<S extends string> {
  #current: S;
  readonly #changed: (state: S) => void;

  constructor(initial: S, changed: (state: S) => void) {
    this.#current = initial;
    this.#changed = changed;
  }

  get current(): S {
    return this.#current;
  }

  is(state: S): boolean {
    return this.#current === state;
  }

  /** Moves to `state`; the owner is told unless it was there already. */
  set(state: S): void {
    if (this.#current === state) return;
    this.#current = state;
    this.#changed(state);
  }
}
