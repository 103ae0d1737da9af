// The machine around a bench run, for its final JSON line: cores, Node, and the 1-minute load when
// the run began and when it ended, so a run taken on a busy host can be told from its line alone
// (the ratios hold up under load better than the figures, but neither is immune).
import { availableParallelism, loadavg } from 'node:os';

export interface HostFacts { cores: number; node: string; load1: { before: number; after: number } }

/** Call when the run begins; the function it returns, when it ends. */
export function watchHost(): () => HostFacts {
  const before = loadavg()[0]!;
  const round = (x: number) => Math.round(x * 100) / 100;
  return () => ({ cores: availableParallelism(), node: process.version, load1: { before: round(before), after: round(loadavg()[0]!) } });
}
