/**
 * The service's deprecations that the library meets on a caller's behalf: an endpoint the
 * service is retiring (`POST /translation/stream`, the asynchronous `POST /tts` flow, the
 * `/v1/stream` family) or a form of value it still takes (numeric language ids).
 *
 * By default each is a Node `DeprecationWarning` with a stable `code`, emitted once per process,
 * as Node's own are: `node --no-deprecation` silences it, `--throw-deprecation` turns it into an
 * exception, and `process.on('warning')` sees it.
 *
 * An application that tells its own users (the `rt-translate` command line does, in the words of
 * its flags) runs its work inside `handleDeprecations(handler, work)`: every deprecation met by
 * that work, and by whatever it starts and awaits, goes to `handler`, each time it is met, and no
 * process warning is emitted for it. The scope follows the asynchronous context
 * (`AsyncLocalStorage`), so two pieces of work running at once each keep their own handler.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

/** What each deprecation is, in the library's terms: what to use instead. */
export const DEPRECATIONS = {
  RTT_DEP_TRANSLATION_STREAM: 'POST /translation/stream is deprecated by the service; use translateTexts() (POST /translate).',
  RTT_DEP_ASYNC_TTS: 'The asynchronous POST /tts flow is deprecated by the service; use TtsStreamReadable (POST /tts-stream).',
  RTT_DEP_STREAM_V1: 'The /v1/stream endpoints are deprecated by the service; use createStream() and the /stream endpoints.',
  RTT_DEP_NUMERIC_LANGUAGE: 'Numeric language ids are deprecated by the service; pass a locale tag such as "en-us".',
} as const;

export type DeprecationCode = keyof typeof DEPRECATIONS;

/** One use of something the service deprecates. */
export interface Deprecation {
  code: DeprecationCode;
  /** What is deprecated and what to use instead (the text of the process warning). */
  message: string;
  /** The request field that used a deprecated form, as the caller named it (`targetLanguages.1`). */
  field?: string;
  /** The value it held. */
  value?: unknown;
}

/** Receives the deprecations met inside `handleDeprecations`; it should not throw. */
export type DeprecationHandler = (deprecation: Deprecation) => void;

const scope = new AsyncLocalStorage<DeprecationHandler>();
const warned = new Set<DeprecationCode>();

/**
 * Runs `work` with the deprecations it meets reported to `handler` instead of as process
 * warnings; returns what `work` returns (a promise stays in scope until it settles).
 */
export function handleDeprecations<T>(handler: DeprecationHandler, work: () => T): T {
  return scope.run(handler, work);
}

/**
 * Reports a use of `code` (`field` and `value` name the request field, where there is one): to
 * the handler in scope, else as a `DeprecationWarning` once per process per code.
 */
export function reportDeprecation(code: DeprecationCode, where?: { field: string; value: unknown }): void {
  const message = where === undefined ? DEPRECATIONS[code] : `${DEPRECATIONS[code].replace(/;/, ` (${where.field} = ${String(where.value)});`)}`;
  const handler = scope.getStore();
  if (handler !== undefined) {
    handler({ code, message, ...where });
    return;
  }
  if (warned.has(code)) return;
  warned.add(code);
  process.emitWarning(message, { type: 'DeprecationWarning', code });
}
