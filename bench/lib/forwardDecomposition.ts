// What a forwarded OrderSend adds to a local one at router level (bench/cluster.ts), split into
// what each part costs: the owner's wake-up (a local order after the owner idled for one empty
// round trip, against one sent back to back), one empty NATS round trip (the two hops and both
// sides' nats.js), and the rest (the envelope, the codec, the call served on the owner). And what
// the goal (forwarded <= 1.5x local) leaves over a local order: half of it, against which the round
// trip alone is measured. Pure: numbers in, numbers out.
import type { HttpOrderFigures } from './clusterHttpOrders.js';

type P = { p50: number; p99: number };
export interface RouterFigures { local: P; localAfterIdle: P; forwarded: P; natsRoundTrip: P }
export interface Decomposition {
  forwardedMinusLocal: number;
  ownerWake: number;
  natsRoundTrip: number;
  /** forwarded - local - natsRoundTrip: all that is not the bare round trip. */
  forwardedMinusLocalMinusRtt: number;
  /** forwarded - localAfterIdle - natsRoundTrip: forwarding's own code and the payloads. */
  rest: number;
  /** What forwarded <= 1.5x local leaves over a local order: local / 2. */
  budgetAt1_5x: number;
  /** natsRoundTrip / budgetAt1_5x: >= 1, the round trip alone leaves no room for the goal. */
  rttOverBudget: number;
}

const round = (v: number) => Math.round(v);
const ratio = (a: number, b: number) => +(a / b).toFixed(2);

function at(f: RouterFigures, q: 'p50' | 'p99'): Decomposition {
  const local = f.local[q], fwd = f.forwarded[q], idle = f.localAfterIdle[q], rtt = f.natsRoundTrip[q];
  return {
    forwardedMinusLocal: round(fwd - local),
    ownerWake: round(idle - local),
    natsRoundTrip: round(rtt),
    forwardedMinusLocalMinusRtt: round(fwd - local - rtt),
    rest: round(fwd - idle - rtt),
    budgetAt1_5x: round(local / 2),
    rttOverBudget: ratio(rtt, local / 2),
  };
}

export function forwardDecomposition(f: RouterFigures): { p50: Decomposition; p99: Decomposition } {
  return { p50: at(f, 'p50'), p99: at(f, 'p99') };
}

/** The figures as lines a reader takes in at a glance (printed before the JSON line). */
export function describeForwarding(f: RouterFigures, d: { p50: Decomposition; p99: Decomposition }, http: HttpOrderFigures): string {
  const row = (name: string, v: P, note = '') => `  ${name.padEnd(34)}${String(round(v.p50)).padStart(7)} /${String(round(v.p99)).padStart(7)}${note}`;
  const x = (a: P, b: P) => `x${ratio(a.p50, b.p50)} / x${ratio(a.p99, b.p99)}`;
  const split = (q: 'p50' | 'p99') => {
    const e = d[q];
    return `  ${q}: forwarded - local ${e.forwardedMinusLocal} = owner wake-up ${e.ownerWake} + NATS round trip ${e.natsRoundTrip} + rest ${e.rest}`
      + ` (forwarded - local - round trip ${e.forwardedMinusLocalMinusRtt}); 1.5x allows ${e.budgetAt1_5x} over local, the round trip alone is ${e.rttOverBudget} of that`;
  };
  return [
    'OrderSend, forwarded against local (goal <= 1.5x), p50 / p99 µs',
    'over HTTP (what a client sees: to a node that does not own the account vs to its owner):',
    row('local (to the owner)', http.local),
    row('forwarded (through another node)', http.forwarded, `   ${x(http.forwarded, http.local)}`),
    'router level (AccountRouter.call; no HTTP, no PostgreSQL):',
    row('local, back to back on the owner', f.local),
    row('local, the owner idle before each', f.localAfterIdle),
    row('forwarded from another process', f.forwarded, `   ${x(f.forwarded, f.local)} of local, ${x(f.forwarded, f.localAfterIdle)} of local after idle`),
    row('empty NATS round trip', f.natsRoundTrip),
    split('p50'),
    split('p99'),
  ].join('\n');
}
