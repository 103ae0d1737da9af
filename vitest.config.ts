import { defineConfig } from 'vitest/config';

// One id per run, inherited by the workers: the process tests build .test-dist/ once per run (test/helpers/build.ts).
process.env.TAGW_TEST_RUN ??= `${process.pid}-${Date.now()}`;

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    // Integration tests start real servers and worker threads; two cores, so keep files to two at once.
    maxWorkers: 2,
    pool: 'forks',
    // .ci/run asks for a JSON report too, to print the tally line.
    reporters: process.env.VITEST_JSON_OUTPUT ? ['default', ['json', { outputFile: process.env.VITEST_JSON_OUTPUT }]] : ['default'],
  },
});
