// Random fault schedules for the cluster chaos run (test/chaos/cluster.chaos.ts, `npm run chaos`):
// what happens to which node or engine, and how long it lasts, drawn by fast-check so that a failing
// schedule is printed with its seed and replays. Pure: the runner carries the steps out.
import fc from 'fast-check';

export type Fault =
  /** SIGKILL node `node` (an index among the cluster's nodes), relaunch it `downMs` later. */
  | { kind: 'kill'; node: number; downMs: number }
  /** SIGSTOP node `node` for `ms` (past the lease: it must act on nothing when it wakes), then SIGCONT. */
  | { kind: 'freeze'; node: number; ms: number }
  /** SIGTERM node `node` (it hands its accounts over), relaunch it at once: one step of a rolling restart. */
  | { kind: 'term'; node: number }
  /** nats-server stopped and started again (its JetStream store kept). */
  | { kind: 'natsRestart' }
  /** nats-server frozen (SIGSTOP) for `ms`: connections open, nothing answers. */
  | { kind: 'natsFreeze'; ms: number }
  /** PostgreSQL stopped and started again. */
  | { kind: 'pgRestart' };

/** A fault, then `pauseMs` of traffic before the next one. */
export interface Step { fault: Fault; pauseMs: number }

/** Faults on `nodes` nodes under a lease of `leaseMs`: freezes from one lease to two (past it: its
 *  accounts move while it sleeps), kills down for up to two leases. */
export function faultArb(nodes: number, leaseMs: number): fc.Arbitrary<Fault> {
  const node = fc.integer({ min: 0, max: nodes - 1 });
  return fc.oneof(
    fc.record({ kind: fc.constant('kill' as const), node, downMs: fc.integer({ min: 0, max: 2 * leaseMs }) }),
    fc.record({ kind: fc.constant('freeze' as const), node, ms: fc.integer({ min: leaseMs, max: 2 * leaseMs }) }),
    fc.record({ kind: fc.constant('term' as const), node }),
    fc.constant({ kind: 'natsRestart' as const }),
    fc.record({ kind: fc.constant('natsFreeze' as const), ms: fc.integer({ min: 200, max: 2 * leaseMs }) }),
    fc.constant({ kind: 'pgRestart' as const }),
  );
}

/** 2-5 faults, one at a time, with 0.2-3 s of traffic after each. */
export function scheduleArb(nodes: number, leaseMs: number): fc.Arbitrary<Step[]> {
  return fc.array(fc.record({ fault: faultArb(nodes, leaseMs), pauseMs: fc.integer({ min: 200, max: 3_000 }) }), { minLength: 2, maxLength: 5 });
}

/** One line per step, for the run's log and a failure's message. */
export function describeStep(s: Step, nodeIds: readonly string[]): string {
  const f = s.fault;
  const n = 'node' in f ? nodeIds[f.node] : undefined;
  const what = f.kind === 'kill' ? `SIGKILL ${n}, relaunched after ${f.downMs} ms`
    : f.kind === 'freeze' ? `SIGSTOP ${n} for ${f.ms} ms`
      : f.kind === 'term' ? `SIGTERM ${n}, relaunched`
        : f.kind === 'natsRestart' ? 'nats-server restarted'
          : f.kind === 'natsFreeze' ? `nats-server frozen for ${f.ms} ms`
            : 'PostgreSQL restarted';
  return `${what}; then ${s.pauseMs} ms of traffic`;
}

/** How long a schedule keeps the cluster busy at least (its faults' own waits and the pauses), to
 *  size a run. */
export function scheduleMs(steps: readonly Step[]): number {
  return steps.reduce((ms, s) => ms + s.pauseMs + ('downMs' in s.fault ? s.fault.downMs : 'ms' in s.fault ? s.fault.ms : 0), 0);
}
