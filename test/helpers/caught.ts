/** What a synchronous call threw, for tests that inspect an error's fields. */

/** Runs `fn` and returns what it threw; fails the test when it returns normally. */
export function caught(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  throw new Error('expected the call to throw');
}
