import { defineConfig } from 'vitest/config';
import { LongestFirstSequencer } from './test/helpers/sequencer.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    // Four files at once on two cores: most integration files wait (processes starting, engines, timers)
    // more than they compute. Whole suite (vitest only) on this machine: 2 workers 209-282 s; 3 workers
    // 161-171 s; 4 workers, quiet (no other work), 133 s and 138 s, all green (two earlier 4-worker runs
    // failed on timing while other work loaded the machine and sources changed midway).
    maxWorkers: 4,
    pool: 'forks',
    // Files share their worker's module cache (not a fresh process each): the gateway's module graph is
    // loaded once per worker instead of once per file (a quarter of the suite's CPU). So a test file
    // leaves nothing global behind: fake timers restored, no process.env or cwd changes.
    isolate: false,
    // One PostgreSQL for the whole run, a database per file (test/helpers/globalSetup.ts).
    globalSetup: ['test/helpers/globalSetup.ts'],
    // The longest files first (test/durations.json), so the run does not end on one long file alone.
    sequence: { sequencer: LongestFirstSequencer },
    // .ci/run asks for a JSON report too, to print the tally line.
    reporters: process.env.VITEST_JSON_OUTPUT ? ['default', ['json', { outputFile: process.env.VITEST_JSON_OUTPUT }]] : ['default'],
  },
});
