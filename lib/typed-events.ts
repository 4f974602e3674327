/**
 * Typed events for the library's streams and emitters, declared once: a class names its events
 * map (event name to the listener's argument tuple) and extends `withEvents<Map>()(Base)`.
 * `on`, `once`, `off`, `addListener`, `prependListener`, `removeListener` and `emit` then check
 * the map's events and infer their listeners' arguments; every other event (a stream's `data`,
 * `close`, `error`...) keeps its base class's typing. At run time the base class is returned as
 * it is: nothing is wrapped or added.
 *
 * (Declaration merging cannot do this: an interface merged into a `Duplex` subclass may not also
 * extend an interface that redeclares `on`.)
 */

/** Event name to the tuple of its listener's arguments. */
export type EventMap<E> = { [K in keyof E]: unknown[] };

/** A listener of event `K` of `E`. */
export type EventListener<E extends EventMap<E>, K extends keyof E> = (...args: E[K]) => void;

/** The typed overloads a class gains from `withEvents`; its base class's remain behind them. */
export interface TypedEvents<E extends EventMap<E>> {
  on<K extends keyof E>(event: K, listener: EventListener<E, K>): this;
  once<K extends keyof E>(event: K, listener: EventListener<E, K>): this;
  off<K extends keyof E>(event: K, listener: EventListener<E, K>): this;
  addListener<K extends keyof E>(event: K, listener: EventListener<E, K>): this;
  prependListener<K extends keyof E>(event: K, listener: EventListener<E, K>): this;
  removeListener<K extends keyof E>(event: K, listener: EventListener<E, K>): this;
  emit<K extends keyof E>(event: K, ...args: E[K]): boolean;
}

/**
 * A constructor taking `A` whose instances have `I`'s members and `E`'s typed events. Static
 * members of the base class (as `Readable.from`) are left out of the type: a subclass has no use
 * for them, and keeping them would make declarations name types `node:events` does not export.
 */
export type WithEvents<A extends unknown[], I extends object, E extends EventMap<E>> = abstract new (...args: A) => TypedEvents<E> & I;

/**
 * `class S extends withEvents<SEvents>()(Duplex)`: `Duplex` itself, typed so that `S`'s listeners
 * and `emit` calls are checked against `SEvents`.
 */
export function withEvents<E extends EventMap<E>>() {
  return <A extends unknown[], I extends object>(base: abstract new (...args: A) => I): WithEvents<A, I, E> => base as unknown as WithEvents<A, I, E>;
}
