import { defineConfig } from 'vitest/config';
import { LongestFirstSequencer } from './test/helpers/sequencer.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    // Five files at once on two cores: most integration files wait (processes starting, engines, timers)
    // more than they compute. Whole suite (vitest only) on this machine: 2 workers 209-282 s; 3 workers
    // 161-171 s; 4 workers, quiet (no other work), 133 s and 138 s, all green (two earlier 4-worker runs
    // failed on timing while other work loaded the machine and sources changed midway). Since the test
    // build is bundled (helpers/bundle.mjs) a file costs less CPU: the 40 longest files left 29% of the
    // CPU idle with 4 workers and 15% with 5, and took 95.6 s with 4, 83.3 s with 5, all green; the
    // whole suite took 126 s with 5 (load 2.6 rising to 7.9 from other work), where it took 181 s before.
    maxWorkers: 5,
    pool: 'forks',
    // Files share their worker's module cache (not a fresh process each): the gateway's module graph is
    // loaded once per worker instead of once per file (a quarter of the suite's CPU). So a test file
    // leaves nothing global behind: fake timers restored, no process.env or cwd changes.
    isolate: false,
    // One PostgreSQL for the whole run, a database per file (test/helpers/globalSetup.ts).
    globalSetup: ['test/helpers/globalSetup.ts'],
    // TEST_CPU_OUT=path: each file's CPU to that path (test/helpers/cpuRecord.ts), to find the costly ones.
    setupFiles: process.env.TEST_CPU_OUT ? ['test/helpers/cpuRecord.ts'] : [],
    // The longest files first (test/durations.json), so the run does not end on one long file alone.
    sequence: { sequencer: LongestFirstSequencer },
    // .ci/run asks for a JSON report too, to print the tally line.
    reporters: process.env.VITEST_JSON_OUTPUT ? ['default', ['json', { outputFile: process.env.VITEST_JSON_OUTPUT }]] : ['default'],
  },
});
