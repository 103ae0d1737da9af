// Cluster mode, the owner: market data that a few of this node's sockets want goes to them first and
// to the relay once uWS has written their frames; with none or many local sockets the relay writes
// first (nothing to wait for / too long a wait for every other node). Every other event goes to the
// receivers first, as on one node.
import { describe, expect, it } from 'vitest';
import { FEW_LOCAL_SOCKETS, ownerOrder } from '../../src/gateway.js';
import type { ShardEvent } from '../../src/runtime/protocol.js';

const tick: ShardEvent = { kind: 'stream.tick', key: 'Srv', data: { server: 'Srv', tick: { symbol: 'EURUSD', bid: 1.1, ask: 1.1002, timeMsc: 1 }, source: 's0' } };
const candle = { kind: 'stream.candle', key: 'Srv', data: { server: 'Srv', candle: { symbol: 'EURUSD', timeframe: 'M1', closed: false, candle: { time: 60 } } } } as unknown as ShardEvent;
const positions: ShardEvent = { kind: 'stream.positions', key: 'acc', data: { src: 1, v: 1, positions: [] } };
const phase = { kind: 'stream.phase', key: 'acc', data: { phase: 'connected' } } as unknown as ShardEvent;

function order(ev: ShardEvent, sockets: number): string[] {
  const seen: string[] = [];
  ownerOrder(ev, {
    dispatch: (e) => seen.push(`local ${e.kind}`),
    relay: (e) => seen.push(`relay ${e.kind}`),
    relayAfterLocalWrites: (e) => seen.push(`relay after local writes ${e.kind}`),
    localSockets: () => sockets,
  });
  return seen;
}

describe('ownerOrder', () => {
  it('relays quotes and candles no local socket wants before the local receivers get them', () => {
    expect(order(tick, 0)).toEqual(['relay stream.tick', 'local stream.tick']);
    expect(order(candle, 0)).toEqual(['relay stream.candle', 'local stream.candle']);
  });

  it('hands quotes and candles a few local sockets want to them first, and to the relay after their writes', () => {
    for (const n of [1, FEW_LOCAL_SOCKETS]) {
      expect(order(tick, n)).toEqual(['local stream.tick', 'relay after local writes stream.tick']);
      expect(order(candle, n)).toEqual(['local stream.candle', 'relay after local writes stream.candle']);
    }
  });

  it('relays quotes and candles many local sockets want first: the other nodes do not wait for all their writes', () => {
    expect(order(tick, FEW_LOCAL_SOCKETS + 1)).toEqual(['relay stream.tick', 'local stream.tick']);
    expect(order(candle, 1000)).toEqual(['relay stream.candle', 'local stream.candle']);
  });

  it('hands account events to the local receivers first, then to the relay, whatever the sockets', () => {
    for (const n of [0, 1, 1000]) {
      expect(order(positions, n)).toEqual(['local stream.positions', 'relay stream.positions']);
      expect(order(phase, n)).toEqual(['local stream.phase', 'relay stream.phase']);
    }
  });
});
