import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    // Integration tests start real servers and worker threads; two cores, so keep files to two at once.
    maxWorkers: 2,
    pool: 'forks',
    // Files share their worker's module cache (not a fresh process each): the gateway's module graph is
    // loaded once per worker instead of once per file (a quarter of the suite's CPU). So a test file
    // leaves nothing global behind: fake timers restored, no process.env or cwd changes.
    isolate: false,
    // .ci/run asks for a JSON report too, to print the tally line.
    reporters: process.env.VITEST_JSON_OUTPUT ? ['default', ['json', { outputFile: process.env.VITEST_JSON_OUTPUT }]] : ['default'],
  },
});
