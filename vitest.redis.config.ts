import { defineConfig } from 'vitest/config';

// `npm run test:redis`: the batch queue against a real redis-server, which the tests start on a
// free port (`redis-server` on the PATH; .ci/run installs Debian's when missing).
export default defineConfig({
  test: {
    include: ['test/redis/**/*.test.ts'],
    setupFiles: ['test/setup/no-process-warnings.ts', 'test/helpers/state-home.ts'],
    testTimeout: 120_000,
    hookTimeout: 30_000,
    pool: 'forks',
    maxWorkers: 1,
    reporters: ['default'],
  },
});
