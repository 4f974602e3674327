import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The tests that drive a browser run with `npm run test:browser` (vitest.browser.config.ts),
    // those that need a Redis server with `npm run test:redis` (vitest.redis.config.ts).
    exclude: [...configDefaults.exclude, 'test/browser/**', 'test/redis/**'],
    // A process warning no test captured fails the test (the suite prints none); each file's
    // commands keep the embedded emulator's state in a temporary directory.
    setupFiles: ['test/setup/no-process-warnings.ts', 'test/helpers/state-home.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Most of the suite's time is waiting (sockets, quiet periods, child processes), so two
    // files at a time on a 2-core machine take much less time than vitest's default of one.
    maxWorkers: 2,
    reporters: ['default'],
  },
});
