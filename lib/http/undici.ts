/**
 * undici, loaded on first use. Importing the library then costs no HTTP stack (undici and the
 * HTTP parser it compiles take about 100 ms to load): the client and the downloads ask for it
 * when they make their first request, through this one shared loader. Only types are imported
 * statically from undici anywhere in the library.
 *
 * `DISPATCHER_SOURCE` lets the client hand a download its own `Agent` before that agent exists:
 * the download asks for it when its first request goes out. It is not part of the public
 * options.
 */
import type { Dispatcher } from 'undici';

/** The undici module. */
export type Undici = typeof import('undici');

let loading: Promise<Undici> | undefined;

/** undici, imported on the first call; every later call gets the same module. */
export function loadUndici(): Promise<Undici> {
  return (loading ??= import('undici'));
}

/** The option key under which the client gives a download the dispatcher to ask for on its first request. */
export const DISPATCHER_SOURCE: unique symbol = Symbol('rt-translate.dispatcherSource');

/** A download's options as the client gives them: its dispatcher, made when first asked for. */
export interface DispatcherSourceOption {
  [DISPATCHER_SOURCE]?: () => Promise<Dispatcher>;
}
