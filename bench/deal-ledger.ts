// npm run bench -- deal-ledger [--full 200] [--small 2000] [--ops 2000000]
// What a streamed account's DealLedger (src/stream/deals.ts) holds on the main thread, and what its
// take() costs: `full` ledgers that took 12,288 deals each (a busy account's: 4,096 kept, every new
// deal evicting the oldest), `small` ones of 0, 10 and 100
// deals (most accounts), each set measured as the heap in use plus the array buffers (typed arrays'
// memory is outside the JS heap) after a forced full collection, divided by the ledgers. Beside it,
// in the same run, the ledger as it was before (its take() over a Map: delete then set, the first
// key evicted) taking the same deals: the baseline. Then ns per take() of a new deal on a full ledger
// and ns per lookup of a deal it holds (a live deal the resync carried already), against the same
// operations on the old one. Last line: one JSON object.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { DealLedger } from '../src/stream/deals.js';
import { argNumber } from './lib/args.js';
import { watchHost } from './lib/hostFacts.js';

const machineFacts = watchHost();

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const FULL = argNumber('full', 200);
const SMALL = argNumber('small', 2000);
const OPS = argNumber('ops', 2_000_000);
const KEEP = 4096;
const T0 = 1_764_000_000_000; // broker times above 2^31: boxed when held as a Map value

type DealId = { ticket: number; timeMsc: number };
const brokerOrder = (x: DealId, y: DealId) => x.timeMsc - y.timeMsc || x.ticket - y.ticket;

/** DealLedger's take() as it was before this bench came (src/stream/deals.ts): the same floor, mark
 *  and a Map of the recent deals (delete then set, the first key evicted past 4,096). */
class MapLedger {
  readonly seen = new Map<number, number>();
  private readonly floor: DealId | null;
  constructor(private latest: DealId) {
    this.floor = latest.ticket > 0 ? latest : null;
  }
  take(d: DealId): boolean {
    if (this.seen.get(d.ticket) === d.timeMsc || (this.floor && brokerOrder(d, this.floor) <= 0)) return false;
    this.seen.delete(d.ticket);
    this.seen.set(d.ticket, d.timeMsc);
    if (this.seen.size > KEEP) this.seen.delete(this.seen.keys().next().value!);
    if (brokerOrder(d, this.latest) > 0) this.latest = { ticket: d.ticket, timeMsc: d.timeMsc };
    return true;
  }
}

const deal = (i: number, base: number) => ({ ticket: base + i, timeMsc: T0 + i * 37 });

function held(): number {
  gc();
  gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

/** Bytes per structure holding `deals` deals, `count` of them alive at once. */
function bytesPer(make: (base: number) => unknown, count: number): number {
  const before = held();
  const keep: unknown[] = [];
  for (let k = 0; k < count; k++) keep.push(make(k * 10_000_000));
  const after = held();
  if (keep.length !== count) throw new Error('unreachable');
  return Math.round((after - before) / count);
}

const ledgerOf = (deals: number) => (base: number) => {
  const l = new DealLedger({ ticket: 0, timeMsc: T0 - 1 });
  for (let i = 0; i < deals; i++) l.take(deal(i, base + 1));
  return l;
};
const mapOf = (deals: number) => (base: number) => {
  const m = new MapLedger({ ticket: 0, timeMsc: T0 - 1 });
  for (let i = 0; i < deals; i++) m.take(deal(i, base + 1));
  return m;
};

const bytes: Record<string, { before: number; after: number }> = {};
// A full ledger has taken three times what it keeps (the steady state of a busy account: every new
// deal evicts the oldest).
for (const n of [0, 10, 100, 3 * KEEP]) {
  const count = n === 3 * KEEP ? FULL : SMALL;
  // Each measured twice, the second kept (the first warms the code and the heap's pages).
  bytesPer(mapOf(n), count);
  const before = bytesPer(mapOf(n), count);
  bytesPer(ledgerOf(n), count);
  const after = bytesPer(ledgerOf(n), count);
  bytes[n === 3 * KEEP ? 'full' : String(n)] = { before, after };
  console.error(`${n} deals: ${before} -> ${after} bytes per ledger`);
}

/** ns per operation of `fn` run `ops` times (best of three rounds). */
function nsPer(fn: (i: number) => void): number {
  let best = Infinity;
  for (let round = 0; round < 3; round++) {
    const t = process.hrtime.bigint();
    for (let i = 0; i < OPS; i++) fn(i);
    best = Math.min(best, Number(process.hrtime.bigint() - t) / OPS);
  }
  return Math.round(best * 10) / 10;
}

// A full ledger taking new deals (each one a lookup, a note and an eviction), then taking deals it
// holds (a lookup that refuses): the new structure against the Map, alternated in one run.
let sink = 0;
const map = mapOf(3 * KEEP)(0);
const ledger = ledgerOf(3 * KEEP)(0);
const mapNew = nsPer((i) => {
  if (map.take(deal(3 * KEEP + i, 1))) sink++;
});
const ledgerNew = nsPer((i) => {
  if (ledger.take(deal(3 * KEEP + i, 1))) sink++;
});
const lastMap = 3 * KEEP + 3 * OPS - 1; // the newest deal of each after the rounds above
const mapSeen = nsPer((i) => {
  if (!map.take(deal(lastMap - (i % KEEP), 1))) sink++;
});
const ledgerSeen = nsPer((i) => {
  if (!ledger.take(deal(lastMap - (i % KEEP), 1))) sink++;
});
if (sink === 0) throw new Error('nothing measured');

console.log(JSON.stringify({
  bench: 'deal-ledger', full: FULL, small: SMALL, ops: OPS, bytesPerLedger: bytes,
  nsPerTake: { newDeal: { map: mapNew, ledger: ledgerNew, ratio: Math.round((ledgerNew / mapNew) * 100) / 100 },
    heldDeal: { map: mapSeen, ledger: ledgerSeen, ratio: Math.round((ledgerSeen / mapSeen) * 100) / 100 } },
  machine: machineFacts(),
}));
