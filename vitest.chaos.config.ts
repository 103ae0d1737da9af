// `npm run chaos`: the cluster chaos run (test/chaos/), apart from `npm test` because it runs for
// minutes (CHAOS_MINUTES). The same setup as the suite: the test build, vitest.config.ts.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/chaos/**/*.chaos.ts'],
    pool: 'forks',
    maxWorkers: 1,
    hookTimeout: 180_000,
    globalSetup: ['test/helpers/globalSetup.ts'],
  },
});
