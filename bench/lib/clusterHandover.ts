// bench/cluster.ts's handover part: a SIGTERM handover between two lease keepers on a real
// PostgreSQL and nats-server, with the "no owner" announcement nudging the survivor's round
// (LeaseKeeper.nudge via nudgeOnRelease, as ClusterNode wires it) against without it (the survivor
// waits for its periodic round, a third of the lease). Time: the leaving node's stop(handover) ->
// the survivor holding every account.
import { startEngines, type Engines } from '../../test/helpers/clusterProcs.js';
import { startKeeperNode, type KeeperNode } from '../../test/helpers/cluster.js';
import { migratedDatabase } from '../../test/helpers/postgres.js';
import { until } from '../../test/helpers/until.js';

export interface HandoverFigures {
  leaseMs: number;
  accounts: number;
  /** ms per run, the survivor nudged by the release announcements. */
  withNudgeMs: number[];
  /** ms per run, the survivor on its periodic rounds alone. */
  withoutMs: number[];
  /** mean(withNudge) / mean(without). */
  nudgeOverPeriodic: number;
}

/** One handover: a holds every account, b joins and takes its share, then a leaves (SIGTERM). */
async function handoverOnce(engines: Engines, accounts: string[], leaseMs: number, nudge: boolean): Promise<number> {
  const { pool } = await migratedDatabase(engines.pg);
  const nodes: KeeperNode[] = [];
  const node = async (id: string) => {
    const n = await startKeeperNode({ natsUrl: engines.nats.url, id, pool, accounts, leaseMs, nudge });
    nodes.push(n);
    return n;
  };
  try {
    const a = await node('a');
    a.keeper.start();
    await until(() => a.holds() === accounts.length, 'a to take every account');
    const b = await node('b');
    b.keeper.start();
    await until(() => b.holds() > 0 && b.holds() + a.holds() === accounts.length, 'the split');
    const t0 = performance.now();
    await a.keeper.stop({ handover: true });
    await until(() => b.holds() === accounts.length, 'b to hold every account');
    return performance.now() - t0;
  } finally {
    for (const n of nodes) await n.close();
    await pool.end();
  }
}

export async function measureHandover(opts: { leaseMs: number; accounts: number; runs: number }): Promise<HandoverFigures> {
  const accounts = Array.from({ length: opts.accounts }, (_, i) => `acct-${i}`);
  const engines = await startEngines();
  try {
    const withNudgeMs: number[] = [];
    const withoutMs: number[] = [];
    // Alternating, so load drifting during the run falls on both kinds.
    for (let i = 0; i < opts.runs; i++) {
      withoutMs.push(Math.round(await handoverOnce(engines, accounts, opts.leaseMs, false)));
      withNudgeMs.push(Math.round(await handoverOnce(engines, accounts, opts.leaseMs, true)));
    }
    const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
    return { leaseMs: opts.leaseMs, accounts: opts.accounts, withNudgeMs, withoutMs, nudgeOverPeriodic: +(mean(withNudgeMs) / mean(withoutMs)).toFixed(3) };
  } finally {
    await engines.stop();
  }
}
