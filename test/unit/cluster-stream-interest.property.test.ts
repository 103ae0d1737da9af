// Several nodes' stream hubs share one owner's shard: whatever they do, in any order, the shard
// (modelled as src/runtime/hosts/streams.ts keeps it: a count of opens, a set of symbols and
// timeframes) holds exactly the union of what every node still wants, and no node's unsub takes
// away what another still holds. Also across the death of the owner's shard thread: the ledger
// drops everything (the new thread holds nothing), the owner's own hub lets go of its opens (its
// sockets closed 4011), and each other node told opens again what its hub holds.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { StreamInterest, type Unsub } from '../../src/cluster/streamInterest.js';
import type { Timeframe } from '../../src/market/timeframes.js';

/** The owner shard's stream state for one account, with its handlers' semantics. */
class ShardModel {
  sockets = 0;
  symbols = new Set<string>();
  candles = new Map<string, Set<Timeframe>>();
  open(): void { this.sockets++; }
  sub(symbol: string, tfs: readonly Timeframe[]): void {
    this.symbols.add(symbol);
    if (tfs.length) {
      const set = this.candles.get(symbol) ?? new Set<Timeframe>();
      for (const tf of tfs) set.add(tf);
      this.candles.set(symbol, set);
    }
  }
  unsub(u: Unsub): void {
    if (u.timeframes === undefined) {
      this.symbols.delete(u.symbol);
      this.candles.delete(u.symbol);
    } else {
      const set = this.candles.get(u.symbol);
      if (set) for (const tf of u.timeframes) set.delete(tf);
      if (set && set.size === 0) this.candles.delete(u.symbol);
    }
  }
  close(): void {
    if (--this.sockets <= 0) {
      this.sockets = 0;
      this.symbols.clear();
      this.candles.clear();
    }
  }
}

/** One node's hub, as src/stream/accounts.ts counts: opens paired with closes, refs per symbol and per (symbol, timeframe). */
interface Hub { opens: number; symbolRefs: Map<string, number>; candleRefs: Map<string, number> }

const NODES = ['A', 'B', 'C'];
const SYMBOLS = ['EURUSD', 'BTC.X'];
const TFS: Timeframe[] = ['M1', 'H1'];
type Step =
  | { t: 'open' | 'close' | 'leave'; node: number }
  | { t: 'shardDies' }
  | { t: 'sub'; node: number; symbol: number; tfs: Timeframe[] }
  | { t: 'unsubSymbol' | 'unsubCandle'; node: number; symbol: number; tf: number };
const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ t: fc.constant('shardDies' as const) }),
  fc.record({ t: fc.constantFrom('open' as const, 'close' as const, 'leave' as const), node: fc.nat(2) }),
  fc.record({ t: fc.constant('sub' as const), node: fc.nat(2), symbol: fc.nat(1), tfs: fc.subarray(TFS) }),
  fc.record({ t: fc.constantFrom('unsubSymbol' as const, 'unsubCandle' as const), node: fc.nat(2), symbol: fc.nat(1), tf: fc.nat(1) }),
);

describe('StreamInterest (owner side, several nodes)', () => {
  it('the shard holds exactly the union of what the nodes\' hubs hold, whatever they do', () => {
    fc.assert(fc.property(fc.array(step, { maxLength: 60 }), (steps) => {
      // Seen from node A, the owner: which symbols other nodes want (what its relay publishes).
      const ledger = new StreamInterest('A');
      let shard = new ShardModel();
      const hubs = NODES.map((): Hub => ({ opens: 0, symbolRefs: new Map(), candleRefs: new Map() }));
      const acct = 'acc';
      for (const s of steps) {
        if (s.t === 'shardDies') {
          const told = ledger.shardLost((id) => id === acct);
          // Every node whose hub holds the stream, and no other, is named.
          expect([...told.keys()].sort()).toEqual(NODES.filter((_, i) => hubs[i]!.opens > 0));
          expect(told.get('A') ?? [acct]).toEqual([acct]);
          shard = new ShardModel();
          hubs[0] = { opens: 0, symbolRefs: new Map(), candleRefs: new Map() }; // A, the owner: its sockets closed
          let first = true;
          for (const [i, h] of hubs.entries()) {
            if (i === 0 || !told.has(NODES[i]!)) continue;
            for (let n = 0; n < h.opens; n++) {
              // The first open on the new thread is a reopen (the owner resyncs what was not emitted).
              expect(ledger.open(NODES[i]!, acct)).toBe(first);
              first = false;
              shard.open();
            }
            for (const symbol of h.symbolRefs.keys()) {
              const tfs = TFS.filter((tf) => h.candleRefs.has(`${symbol}|${tf}`));
              ledger.sub(NODES[i]!, acct, symbol, tfs);
              shard.sub(symbol, tfs);
            }
          }
          continue;
        }
        const node = NODES[s.node]!;
        const hub = hubs[s.node]!;
        if (s.t === 'open') {
          hub.opens++;
          shard.open();
          ledger.open(node, acct);
        } else if (s.t === 'close') {
          if (hub.opens === 0) continue; // a hub closes only what it opened
          if (--hub.opens === 0) { hub.symbolRefs.clear(); hub.candleRefs.clear(); }
          for (const u of ledger.close(node, acct)) shard.unsub(u);
          shard.close();
        } else if (s.t === 'leave') {
          // The node died: its hub is gone with whatever it held.
          for (const f of ledger.forgetNode(node)) {
            for (const u of f.unsubs) shard.unsub(u);
            for (let i = 0; i < f.closes; i++) shard.close();
          }
          hubs[s.node] = { opens: 0, symbolRefs: new Map(), candleRefs: new Map() };
        } else if (s.t === 'sub') {
          if (hub.opens === 0) continue; // sockets subscribe on an open account
          const symbol = SYMBOLS[s.symbol]!;
          hub.symbolRefs.set(symbol, (hub.symbolRefs.get(symbol) ?? 0) + 1);
          for (const tf of s.tfs) hub.candleRefs.set(`${symbol}|${tf}`, (hub.candleRefs.get(`${symbol}|${tf}`) ?? 0) + 1);
          ledger.sub(node, acct, symbol, s.tfs);
          shard.sub(symbol, s.tfs);
        } else if (s.t === 'unsubSymbol' || s.t === 'unsubCandle') {
          const symbol = SYMBOLS[s.symbol]!;
          // The hub sends an unsub when its own count of that symbol (or candle) falls to zero.
          const refs = s.t === 'unsubSymbol' ? hub.symbolRefs : hub.candleRefs;
          const k = s.t === 'unsubSymbol' ? symbol : `${symbol}|${TFS[s.tf]!}`;
          const n = refs.get(k) ?? 0;
          if (n === 0) continue;
          if (n > 1) { refs.set(k, n - 1); continue; }
          refs.delete(k);
          if (s.t === 'unsubSymbol') for (const tf of TFS) hub.candleRefs.delete(`${symbol}|${tf}`);
          const u = ledger.unsub(node, acct, symbol, s.t === 'unsubSymbol' ? undefined : [TFS[s.tf]!]);
          if (u) shard.unsub(u);
        }
        // The union of what the live hubs hold.
        const wantSymbols = new Set<string>();
        const wantCandles = new Map<string, Set<Timeframe>>();
        for (const h of hubs) {
          for (const sym of h.symbolRefs.keys()) wantSymbols.add(sym);
          for (const k of h.candleRefs.keys()) {
            const [sym, tf] = k.split('|') as [string, Timeframe];
            wantSymbols.add(sym);
            wantCandles.set(sym, (wantCandles.get(sym) ?? new Set()).add(tf));
          }
        }
        expect(shard.sockets).toBe(hubs.reduce((n, h) => n + h.opens, 0));
        expect(shard.symbols).toEqual(wantSymbols);
        expect(shard.candles).toEqual(wantCandles);
        for (const sym of SYMBOLS) {
          expect(ledger.wantedElsewhere(sym), sym).toBe(hubs.slice(1).some((h) => h.symbolRefs.has(sym)));
          // The nodes holding it: its ticks are withheld only when each of them is quiet (here: B alone is).
          const holders = NODES.filter((_, i) => i > 0 && hubs[i]!.symbolRefs.has(sym));
          expect(ledger.everyElsewhere(sym, (n) => n === 'B'), sym).toBe(holders.length > 0 && holders.every((n) => n === 'B'));
        }
      }
      // The account moved away: nothing of it is wanted here any more.
      ledger.dropAccount(acct);
      for (const sym of SYMBOLS) expect(ledger.wantedElsewhere(sym)).toBe(false);
      for (const sym of SYMBOLS) expect(ledger.everyElsewhere(sym, () => true)).toBe(false);
    }), { numRuns: 1000 });
  });

  it('one node\'s unsub does not take a symbol from another node\'s sockets', () => {
    const ledger = new StreamInterest();
    ledger.open('A', 'x');
    ledger.open('B', 'x');
    ledger.sub('A', 'x', 'EURUSD', ['M1']);
    ledger.sub('B', 'x', 'EURUSD', ['M1', 'H1']);
    expect(ledger.unsub('B', 'x', 'EURUSD')).toEqual({ symbol: 'EURUSD', timeframes: ['H1'] });
    expect(ledger.unsub('A', 'x', 'EURUSD')).toEqual({ symbol: 'EURUSD' });
  });
});
