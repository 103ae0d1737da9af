import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    // Three files at once on two cores: most integration files wait (processes starting, engines, timers)
    // more than they compute. Whole suite on this machine, load 5-8 from other work: 2 workers 282 s,
    // 3 workers 209 s and 171 s, all green; 4 workers 153 s and 133 s, but with failures (cluster-tenancy
    // and cluster-wired on timing, in a run whose sources also changed midway), so 3 until 4 has clean runs.
    maxWorkers: 3,
    pool: 'forks',
    // Files share their worker's module cache (not a fresh process each): the gateway's module graph is
    // loaded once per worker instead of once per file (a quarter of the suite's CPU). So a test file
    // leaves nothing global behind: fake timers restored, no process.env or cwd changes.
    isolate: false,
    // .ci/run asks for a JSON report too, to print the tally line.
    reporters: process.env.VITEST_JSON_OUTPUT ? ['default', ['json', { outputFile: process.env.VITEST_JSON_OUTPUT }]] : ['default'],
  },
});
