// A bench's final JSON line carries the machine around the run (bench/lib/hostFacts.ts): the load
// when it began and when it ended, so a run on a busy host can be told from its line alone.
import { availableParallelism } from 'node:os';
import { expect, it } from 'vitest';
import { watchHost } from '../../bench/lib/hostFacts.js';

it('says the cores, the Node version, and the 1-minute load at the start and at the end', () => {
  const end = watchHost();
  const facts = end();
  expect(facts.cores).toBe(availableParallelism());
  expect(facts.node).toBe(process.version);
  for (const x of [facts.load1.before, facts.load1.after]) {
    expect(Number.isFinite(x)).toBe(true);
    expect(x).toBeGreaterThanOrEqual(0);
  }
  expect(JSON.parse(JSON.stringify(facts))).toEqual(facts);
});
