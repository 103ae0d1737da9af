// Cluster mode, the owner: market data goes to the relay before this node's own receivers (the
// relay writes it to NATS at once; the hub's frames wait for uWS's drain after the turn anyway),
// every other event to the receivers first, as on one node.
import { describe, expect, it } from 'vitest';
import { ownerOrder } from '../../src/gateway.js';
import type { ShardEvent } from '../../src/runtime/protocol.js';

const tick: ShardEvent = { kind: 'stream.tick', key: 'Srv', data: { server: 'Srv', tick: { symbol: 'EURUSD', bid: 1.1, ask: 1.1002, timeMsc: 1 } } };
const candle = { kind: 'stream.candle', key: 'Srv', data: { server: 'Srv', candle: { symbol: 'EURUSD', timeframe: 'M1', closed: false, candle: { time: 60 } } } } as unknown as ShardEvent;
const positions: ShardEvent = { kind: 'stream.positions', key: 'acc', data: { v: 1, positions: [] } };
const phase = { kind: 'stream.phase', key: 'acc', data: { phase: 'connected' } } as unknown as ShardEvent;

function order(ev: ShardEvent): string[] {
  const seen: string[] = [];
  ownerOrder(ev, (e) => seen.push(`local ${e.kind}`), (e) => seen.push(`relay ${e.kind}`));
  return seen;
}

describe('ownerOrder', () => {
  it('relays quotes and candles before the local receivers get them', () => {
    expect(order(tick)).toEqual(['relay stream.tick', 'local stream.tick']);
    expect(order(candle)).toEqual(['relay stream.candle', 'local stream.candle']);
  });

  it('hands account events to the local receivers first, then to the relay', () => {
    expect(order(positions)).toEqual(['local stream.positions', 'relay stream.positions']);
    expect(order(phase)).toEqual(['local stream.phase', 'relay stream.phase']);
  });
});
