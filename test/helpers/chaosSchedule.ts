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

/** A fault, or two at once (`also`, starting `alsoAfterMs` after the first: a node dying while
 *  nats-server is down, two nodes frozen together), then `pauseMs` of traffic before the next step. */
export interface Step { fault: Fault; also?: Fault; alsoAfterMs?: number; pauseMs: number }

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

const target = (f: Fault) => ('node' in f ? `node ${f.node}` : f.kind.startsWith('nats') ? 'nats' : 'pg');

/** Whether two faults can run at once: different targets (a node, nats-server, PostgreSQL). With
 *  two of three nodes faulted one still serves; no more than two faults overlap. */
export function canOverlap(a: Fault, b: Fault): boolean {
  return target(a) !== target(b);
}

/** 2-5 steps with 0.2-3 s of traffic after each; about one step in three two faults at once. */
export function scheduleArb(nodes: number, leaseMs: number): fc.Arbitrary<Step[]> {
  const pauseMs = fc.integer({ min: 200, max: 3_000 });
  const single = fc.record({ fault: faultArb(nodes, leaseMs), pauseMs });
  const pair = fc.record({ fault: faultArb(nodes, leaseMs), also: faultArb(nodes, leaseMs), alsoAfterMs: fc.integer({ min: 0, max: leaseMs }), pauseMs })
    .filter((s) => canOverlap(s.fault, s.also));
  return fc.array(fc.oneof({ arbitrary: single, weight: 2 }, { arbitrary: pair, weight: 1 }), { minLength: 2, maxLength: 5 });
}

function describeFault(f: Fault, nodeIds: readonly string[]): string {
  const n = 'node' in f ? nodeIds[f.node] : undefined;
  return f.kind === 'kill' ? `SIGKILL ${n}, relaunched after ${f.downMs} ms`
    : f.kind === 'freeze' ? `SIGSTOP ${n} for ${f.ms} ms`
      : f.kind === 'term' ? `SIGTERM ${n}, relaunched`
        : f.kind === 'natsRestart' ? 'nats-server restarted'
          : f.kind === 'natsFreeze' ? `nats-server frozen for ${f.ms} ms`
            : 'PostgreSQL restarted';
}

/** One line per step, for the run's log and a failure's message. */
export function describeStep(s: Step, nodeIds: readonly string[]): string {
  const first = describeFault(s.fault, nodeIds);
  const what = s.also ? `${first}, and ${s.alsoAfterMs ?? 0} ms later meanwhile: ${describeFault(s.also, nodeIds)}` : first;
  return `${what}; then ${s.pauseMs} ms of traffic`;
}

const lasts = (f: Fault) => ('downMs' in f ? f.downMs : 'ms' in f ? f.ms : 0);

/** How long a schedule keeps the cluster busy at least (its faults' own waits and the pauses), to
 *  size a run. */
export function scheduleMs(steps: readonly Step[]): number {
  return steps.reduce((ms, s) => ms + s.pauseMs + Math.max(lasts(s.fault), s.also ? (s.alsoAfterMs ?? 0) + lasts(s.also) : 0), 0);
}

// ---- The single node's schedules (test/chaos/single.chaos.ts): one gateway process, its shards ---

/** The simulator faults a schedule sets on one of its logins (POST /v1/sim/faults, for `ms`): a
 *  trade's reply lost after it executed, the same with the broker unable to say for a while, replies
 *  held, the connection dropped. */
export const SIM_FAULTS = ['timeoutAfterSend', 'unknownAfterSend', 'latency', 'drop'] as const;

export type SingleFault =
  /** SIGKILL the gateway, start it again on the same data dir `downMs` later. */
  | { kind: 'kill'; downMs: number }
  /** SIGKILL it `afterMoveMs` after a shard moved idempotency keys (idempotency_moved.through
   *  changed: every second while orders come, so a delay near 1 s lands just before the next one). */
  | { kind: 'killAtMove'; afterMoveMs: number; downMs: number }
  /** SIGSTOP it for `ms`, then SIGCONT. */
  | { kind: 'freeze'; ms: number }
  /** SIGTERM it (graceful: it drains), start it again at once. */
  | { kind: 'term' }
  /** SIGTERM it, then SIGKILL `afterMs` later if it still runs (a supervisor's stop timeout cutting
   *  the drain, the last key move and checkpoints short), start it again. */
  | { kind: 'termKill'; afterMs: number }
  /** The seat of rebindable account `slot` removed (its clients stopped first, or `live`: while they
   *  trade, stopped after), and its login bound again by a new seat on another shard; clients trade
   *  on there. */
  | { kind: 'rebind'; slot: number; live: boolean }
  /** Simulator fault `fault` on the login of account `slot` for `ms`. */
  | { kind: 'sim'; fault: (typeof SIM_FAULTS)[number]; slot: number; ms: number };

export interface SingleStep { fault: SingleFault; also?: SingleFault; alsoAfterMs?: number; pauseMs: number }

/** Faults on a gateway whose schedule has `slots` accounts, `rebindable` of which may be re-bound. */
export function singleFaultArb(slots: number, rebindable: number): fc.Arbitrary<SingleFault> {
  const downMs = fc.integer({ min: 0, max: 2_000 });
  return fc.oneof(
    fc.record({ kind: fc.constant('kill' as const), downMs }),
    fc.record({ kind: fc.constant('killAtMove' as const), afterMoveMs: fc.integer({ min: 0, max: 1_100 }), downMs }),
    fc.record({ kind: fc.constant('freeze' as const), ms: fc.integer({ min: 200, max: 4_000 }) }),
    fc.constant({ kind: 'term' as const }),
    fc.record({ kind: fc.constant('termKill' as const), afterMs: fc.integer({ min: 0, max: 1_000 }) }),
    fc.record({ kind: fc.constant('rebind' as const), slot: fc.integer({ min: 0, max: rebindable - 1 }), live: fc.boolean() }),
    fc.record({ kind: fc.constant('sim' as const), fault: fc.constantFrom(...SIM_FAULTS), slot: fc.integer({ min: 0, max: slots - 1 }), ms: fc.integer({ min: 300, max: 3_000 }) }),
  );
}

const singleTarget = (f: SingleFault) => (f.kind === 'rebind' ? `seat ${f.slot}` : f.kind === 'sim' ? `sim ${f.slot}` : 'process');

/** 2-5 steps with 0.2-3 s of traffic after each; about one in three two faults at once on different
 *  targets (the process, a seat, a login's simulator faults). */
export function singleScheduleArb(slots: number, rebindable: number): fc.Arbitrary<SingleStep[]> {
  const pauseMs = fc.integer({ min: 200, max: 3_000 });
  const fault = singleFaultArb(slots, rebindable);
  const single = fc.record({ fault, pauseMs });
  const pair = fc.record({ fault, also: fault, alsoAfterMs: fc.integer({ min: 0, max: 2_000 }), pauseMs })
    .filter((s) => singleTarget(s.fault) !== singleTarget(s.also));
  return fc.array(fc.oneof({ arbitrary: single, weight: 2 }, { arbitrary: pair, weight: 1 }), { minLength: 2, maxLength: 5 });
}

function describeSingleFault(f: SingleFault): string {
  switch (f.kind) {
    case 'kill': return `SIGKILL, restarted after ${f.downMs} ms`;
    case 'killAtMove': return `SIGKILL ${f.afterMoveMs} ms after a key move, restarted after ${f.downMs} ms`;
    case 'freeze': return `SIGSTOP for ${f.ms} ms`;
    case 'term': return 'SIGTERM, restarted';
    case 'termKill': return `SIGTERM, SIGKILL ${f.afterMs} ms later, restarted`;
    case 'rebind': return `seat of rebindable account ${f.slot} removed${f.live ? ' while its clients trade' : ''}, its login bound on another shard`;
    case 'sim': return `simulator ${f.fault} on account ${f.slot}'s login for ${f.ms} ms`;
  }
}

/** One line per step of a single node's schedule. */
export function describeSingleStep(s: SingleStep): string {
  const first = describeSingleFault(s.fault);
  const what = s.also ? `${first}, and ${s.alsoAfterMs ?? 0} ms later meanwhile: ${describeSingleFault(s.also)}` : first;
  return `${what}; then ${s.pauseMs} ms of traffic`;
}
