// A connection's listeners per event (src/broker/listeners.ts): one listener is held as itself, a
// second turns them into a set; every listener hears each event once, in the order added, and its
// unsubscribe removes it alone.
import { describe, expect, it } from 'vitest';
import { BrokerListeners } from '../../src/broker/listeners.js';

const state = (n: number) => ({ state: 'connected' as const, timeMsc: n });

describe('broker listeners', () => {
  it('one, two and three listeners of an event hear it in order; each unsubscribe removes its own', () => {
    const l = new BrokerListeners();
    const heard: string[] = [];
    const offA = l.on('state', (s) => heard.push(`a${s.timeMsc}`));
    l.emit('state', state(1));
    const offB = l.on('state', (s) => heard.push(`b${s.timeMsc}`));
    const offC = l.on('state', (s) => heard.push(`c${s.timeMsc}`));
    l.emit('state', state(2));
    offB();
    offB(); // twice: nothing more
    l.emit('state', state(3));
    offA();
    offC();
    l.emit('state', state(4));
    expect(heard).toEqual(['a1', 'a2', 'b2', 'c2', 'a3', 'c3']);
  });

  it('events are apart: a listener of one hears no other, and removing the only one leaves none', () => {
    const l = new BrokerListeners();
    const heard: string[] = [];
    const off = l.on('state', () => heard.push('state'));
    l.on('tick', () => heard.push('tick'));
    l.emit('candle', { symbol: 'X', timeframe: 'M1', candle: { time: 0, open: 1, high: 1, low: 1, close: 1, tickVolume: 0, spread: 0, realVolume: 0 }, closed: false } as never);
    off();
    l.emit('state', state(1));
    l.emit('tick', { symbol: 'X' } as never);
    expect(heard).toEqual(['tick']);
    // An unsubscribe of a listener no longer there leaves the event's other listener alone.
    const offOld = l.on('state', () => heard.push('s1'));
    offOld();
    l.on('state', () => heard.push('s2'));
    offOld();
    l.emit('state', state(2));
    expect(heard).toEqual(['tick', 's2']);
  });
});
