/**
 * The browser module's typed event emitter: `on`, `once` and `off` with listener arguments
 * checked against an events map (the Node streams' `RealtimeTranslateEvents` shape: event name
 * to argument tuple). A listener that throws does not stop the others or the session; its
 * error is reported to the page (`reportError`) as an uncaught one would be.
 */
import type { EventMap } from '../typed-events.js';

type Listener = (...args: unknown[]) => void;

export class TypedEmitter<Events extends EventMap<Events>> {
  readonly #listeners = new Map<keyof Events, Set<Listener>>();

  on<K extends keyof Events>(event: K, listener: (...args: Events[K]) => void): this {
    let set = this.#listeners.get(event);
    if (!set) this.#listeners.set(event, (set = new Set()));
    set.add(listener as unknown as Listener);
    return this;
  }

  once<K extends keyof Events>(event: K, listener: (...args: Events[K]) => void): this {
    const wrapped = (...args: Events[K]): void => {
      this.off(event, wrapped);
      listener(...args);
    };
    return this.on(event, wrapped);
  }

  off<K extends keyof Events>(event: K, listener: (...args: Events[K]) => void): this {
    this.#listeners.get(event)?.delete(listener as unknown as Listener);
    return this;
  }

  protected emit<K extends keyof Events>(event: K, ...args: Events[K]): void {
    const set = this.#listeners.get(event);
    if (!set) return;
    for (const listener of [...set]) {
      try {
        listener(...args);
      } catch (error) {
        reportError(error);
      }
    }
  }
}
