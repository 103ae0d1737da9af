// Departures (src/cluster/departures.ts): which nodes left, from successive readings of the live
// nodes; and the interest ledger of a node forgotten, then seen again under the same NODE_ID.
import { describe, expect, it } from 'vitest';
import { Departures } from '../../src/cluster/departures.js';
import { StreamInterest } from '../../src/cluster/streamInterest.js';

describe('Departures', () => {
  it('reports a node once when it leaves the live list, never this node, and again after it came back and left again', () => {
    const d = new Departures('A');
    expect(d.seen(['A', 'B', 'C'])).toEqual([]);
    expect(d.seen(['B', 'C'])).toEqual([]); // this node's own heartbeat late: not a departure
    expect(d.seen(['A', 'C'])).toEqual(['B']);
    expect(d.seen(['A', 'C'])).toEqual([]);
    expect(d.seen(['A', 'B', 'C'])).toEqual([]); // B restarted under its NODE_ID
    expect(d.seen(['A'])).toEqual(['B', 'C']);
  });

  it('after a failed reading (PostgreSQL away: nobody could heartbeat) judges nobody for the hold-off readings, then reports who stayed gone', () => {
    const d = new Departures('A', 2);
    d.seen(['A', 'B', 'C']);
    d.failed();
    expect(d.seen(['A'])).toEqual([]); // B and C have not heartbeated again yet
    expect(d.seen(['A', 'B'])).toEqual([]);
    expect(d.seen(['A', 'B'])).toEqual(['C']);
  });
});

describe('StreamInterest of a node forgotten, then seen again', () => {
  it('starts afresh: its new opens and subs count alone, and its close releases them', () => {
    const i = new StreamInterest();
    i.open('B', 'acc');
    i.sub('B', 'acc', 'EURUSD', ['M1']);
    expect(i.forgetNode('B')).toEqual([{ accountId: 'acc', unsubs: [{ symbol: 'EURUSD' }], closes: 1 }]);
    expect(i.holding('B', 'acc')).toBeUndefined();
    expect(i.forgetNode('B')).toEqual([]); // a second report of the same departure releases nothing
    i.open('B', 'acc');
    i.sub('B', 'acc', 'GBPUSD', []);
    expect(i.holding('B', 'acc')).toEqual({ opens: 1, symbols: [['GBPUSD', []]] });
    expect(i.close('B', 'acc')).toEqual([{ symbol: 'GBPUSD' }]);
    expect(i.holding('B', 'acc')).toBeUndefined();
  });
});
