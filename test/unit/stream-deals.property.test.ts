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
