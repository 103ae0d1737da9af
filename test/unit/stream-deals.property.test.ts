// Which deals an account stream carries (src/stream/deals.ts) across a restart or an outage, under
// random schedules: some deals arrived live before it (their TRADEs partly trimmed from the history),
// some were never events (made while nothing listened), some arrived live while the resync read the
// broker's deal history (held), and the broker's list covers any point in between; afterwards some
// arrive again (a bridge adapter that re-sends what it found after its own reconnect), and deals
// carried before may arrive live again during the resync (a cluster's new owner). Every deal of the
// broker is carried exactly once, in the broker's order.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Deal } from '../../src/market/orders.js';
import { DealLedger, tradesIn } from '../../src/stream/deals.js';
import { AccountHistory } from '../../src/stream/history.js';
import { tradeData } from '../../src/runtime/frameData.js';
import { clockFor } from '../../src/market/serverClock.js';

const deal = (ticket: number, timeMsc: number): Deal => ({
  ticket, order: ticket, position: ticket, symbol: 'EURUSD', type: 'Buy', entry: 'in', volume: 0.01, price: 1,
  timeMsc, magic: 0, comment: '', commission: 0, swap: 0, profit: 0,
});

describe('deal ledger: each deal a TRADE once', () => {
  it('across a restart and resync with random gaps, held deals, trimmed history and re-sent deals', () => {
    fc.assert(fc.property(
      fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 40 }), // time steps between deals (0: same ms)
      fc.nat(), fc.nat(), fc.nat(), fc.nat(), fc.nat(), fc.array(fc.nat(), { maxLength: 10 }), fc.array(fc.nat(), { maxLength: 5 }),
      (steps, a, b, c, keepRaw, startRaw, resent, echoes) => {
        let t = 1_000;
        const deals = steps.map((s, i) => deal(500 + i, (t += s)));
        const n = deals.length;
        const start = 1_000 - (startRaw % 5); // epoch start on the shards' clock, before the first deal
        // [0, live) carried before; [live, gap) never events; [gap, n) live during the resync;
        // the broker's list is read once the first `listed` deals exist.
        const live = a % (n + 1);
        const gapEnd = live + (b % (n - live + 1));
        const listedUpTo = gapEnd + (c % (n - gapEnd + 1));

        const carried: Deal[] = [];
        const before = new DealLedger({ ticket: 0, timeMsc: start });
        const h = new AccountHistory('ep', 0, { maxEvents: 1_000, maxAgeMs: 1e9 });
        const clock = clockFor({ description: 'UTC', standardOffsetMinutes: 0, dst: 'none' });
        for (const d of deals.slice(0, live)) if (before.take(d)) (carried.push(d), h.append('TRADE', tradeData(d, clock), 0));
        // Restart: the mark persisted, and only the newest TRADEs still in the history.
        const all = h.replay({ epoch: 'ep', seq: 0 }, 0);
        const entries = all.recovered ? all.entries : [];
        const retained = entries.slice(keepRaw % (entries.length + 1));
        const after = new DealLedger(before.mark, tradesIn(retained));
        const listed = deals.filter((d, i) => i < listedUpTo && d.timeMsc >= after.mark.timeMsc - 3);
        // Held too: live events of deals carried before the mark (a cluster's new owner, its broker
        // connection made while the old owner's still saw them; npm run chaos got their TRADEs twice).
        const echoed = live > 0 ? echoes.map((e) => deals[e % live]!) : [];
        const held = [...echoed, ...deals.slice(gapEnd)];
        const out = [...carried, ...after.missed(listed, held)];
        // Re-sent afterwards: deals of the resync window again (never a trimmed one from long before).
        for (const r of resent) {
          const d = deals[live + (r % Math.max(1, n - live))];
          if (d && after.take(d)) out.push(d);
        }
        expect(out.map((d) => d.ticket)).toEqual(deals.map((d) => d.ticket));
      },
    ), { numRuns: 500 });
  });
});

describe('deal ledger: nothing at or below an inherited mark', () => {
  it('deals offered live or by a resync, in any order, never make a TRADE at or below the mark the ledger began from; a later live deal makes one, once', () => {
    // A ledger begun from a mark it inherited (a cluster's new owner: JetStream's head; one node: the
    // history kept on disk) remembers only the deals still in that history, or none. Every deal up to
    // the mark was carried by the stream before (deals are carried in broker order): one of them that
    // arrives live (an earlier owner's shard passing on deals it buffered while frozen, a bridge
    // re-sending after its reconnect) is no new TRADE. Before, take() refused only remembered deals.
    fc.assert(fc.property(
      fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 2, maxLength: 30 }), // time steps (0: same ms)
      fc.nat(), fc.array(fc.boolean(), { maxLength: 30 }),
      fc.array(fc.oneof(
        fc.record({ t: fc.constant('take' as const), i: fc.nat() }),
        fc.record({ t: fc.constant('resync' as const), listed: fc.array(fc.nat(), { maxLength: 8 }), held: fc.array(fc.nat(), { maxLength: 4 }) }),
      ), { minLength: 1, maxLength: 40 }),
      (steps, markRaw, remembered, ops) => {
        let t = 1_000;
        // Tickets not in time order either (a broker's tickets and times need not agree within a ms).
        const deals = steps.map((s, i) => deal(500 + ((i * 7_919) % 10_007), (t += s)));
        const m = deals[markRaw % deals.length]!;
        const mark = { ticket: m.ticket, timeMsc: m.timeMsc };
        const atOrBefore = (d: Deal) => d.timeMsc < mark.timeMsc || (d.timeMsc === mark.timeMsc && d.ticket <= mark.ticket);
        const ledger = new DealLedger(mark, deals.filter((d, i) => atOrBefore(d) && remembered[i]));
        const out: Deal[] = [];
        const pick = (i: number) => deals[i % deals.length]!;
        for (const o of ops) {
          if (o.t === 'take') {
            const d = pick(o.i);
            if (ledger.take(d)) out.push(d);
          } else out.push(...ledger.missed(o.listed.map(pick), o.held.map(pick)));
        }
        expect(out.filter(atOrBefore).map((d) => d.ticket)).toEqual([]);
        // Each at most once; every later deal that arrived live at least once (a resync's list is
        // read from the latest deal carried on, so one it offers below that counts as carried).
        const tickets = out.map((d) => d.ticket);
        expect(tickets.length).toBe(new Set(tickets).size);
        const live = new Set(ops.flatMap((o) => (o.t === 'take' ? [pick(o.i).ticket] : [])));
        expect(deals.filter((d) => !atOrBefore(d) && live.has(d.ticket) && !tickets.includes(d.ticket))).toEqual([]);
      },
    ), { numRuns: 1000 });
  });
});
