/**
 * Set up in every test file: a process warning (a `DeprecationWarning` of the library, Node's
 * own, a dependency's) that no test captured fails the test that was running, so the suite's
 * output holds no warnings. A test whose point is a warning captures it: a spy on
 * `process.emitWarning` that records the call, or the library's `handleDeprecations`.
 */
import { afterEach } from 'vitest';

const uncaptured: Error[] = [];
process.on('warning', (warning) => uncaptured.push(warning));

afterEach(() => {
  const seen = uncaptured.splice(0);
  if (seen.length === 0) return;
  const listed = seen.map((w) => `${w.name}${(w as NodeJS.ErrnoException).code ? ` [${(w as NodeJS.ErrnoException).code}]` : ''}: ${w.message}`);
  throw new Error(`the test let process warnings through; capture them where they are its point, prevent them elsewhere:\n${listed.join('\n')}`);
});
