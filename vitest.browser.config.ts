import { defineConfig } from 'vitest/config';

/**
 * `npm run test:browser`: the tests that drive a real Chromium (test/browser/), apart from
 * `npm test`, which needs no browser. One file at a time: each runs a browser and a server.
 */
export default defineConfig({
  test: {
    include: ['test/browser/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    maxWorkers: 1,
    // The served pages' embedded emulator keeps its state in a temporary directory, never the user's.
    setupFiles: ['test/helpers/state-home.ts'],
    reporters: ['default'],
  },
});
