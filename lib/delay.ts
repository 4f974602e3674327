/**
 * A wait of `ms` that an AbortSignal ends early with the library's `AbortError` (carrying
 * `message`). Plain `setTimeout`, so fake timers in tests drive it.
 */
import { AbortError } from './errors.js';

export function abortableDelay(ms: number, signal: AbortSignal | undefined, message: string): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(new AbortError(message));
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(new AbortError(message));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
