import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BridgeBrokerConnection } from '../../src/broker/bridge.js';
import { dialectOf } from '../../src/broker/dialect.js';
import { ORDER_TYPES, orderTypeCode, parseOrderType } from '../../src/market/orders.js';
import { parseTimeframe } from '../../src/market/timeframes.js';
import { builtEntry } from '../helpers/build.js';
import { connect, makeSim } from '../helpers/sim-helpers.js';

describe('broker contract helpers', () => {
  it('parses order types by name (any case) or MT5 code', () => {
    expect(ORDER_TYPES.map((t) => orderTypeCode(t))).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(parseOrderType('buylimit')).toBe('BuyLimit');
    expect(parseOrderType('SellStopLimit')).toBe('SellStopLimit');
    expect(parseOrderType(5)).toBe('SellStop');
    expect(parseOrderType('1')).toBe('Sell');
    expect(parseOrderType(8)).toBeUndefined();
    expect(parseOrderType('Hold')).toBeUndefined();
  });
  it('parses timeframes by name or minutes', () => {
    expect(parseTimeframe('h4')).toBe('H4');
    expect(parseTimeframe(1440)).toBe('D1');
    expect(parseTimeframe('43200')).toBe('MN1');
    expect(parseTimeframe('M2')).toBeUndefined();
  });
  it('keeps P4/P5 differences in the dialect', () => {
    expect(dialectOf('P4')).toMatchObject({ stopLimitOrders: false, balanceHistory: false, ordersStream: false });
    expect(dialectOf('P5')).toMatchObject({ stopLimitOrders: true, balanceHistory: true, ordersStream: true });
  });
});

describe('latency fault', () => {
  // Decided on fake timers (setTimeout only; the simulator's clock is already a ManualClock): a reply
  // is held until the fault's latency has passed on the timer, and after clear() it is no longer held.
  afterEach(() => void vi.useRealTimers());
  it('delays replies by the configured time', async () => {
    const { sim } = makeSim();
    const c = await connect(sim);
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    sim.faults.set({ server: 'Sim-P5-Demo', kind: 'latency', latencyMs: 60 });
    let answered = false;
    const held = c.accountSummary().then(() => void (answered = true));
    await vi.advanceTimersByTimeAsync(59);
    expect(answered, 'answered before the latency passed').toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await held;
    expect(answered).toBe(true);
    expect(sim.faults.list().map((f) => f.kind)).toEqual(['latency']);
    expect(sim.faults.clear()).toBe(1);
    // Cleared: the reply comes without any timer running (a delayed one would wait for a timer forever).
    const timers = vi.getTimerCount();
    const free = c.accountSummary();
    expect(vi.getTimerCount(), 'a delay timer armed after clear()').toBe(timers);
    await free;
  });
});

describe('standalone simulator process', () => {
  it('npm run sim (the compiled build) starts a bridge server a client can trade on', async () => {
    const child = spawn(process.execPath, [builtEntry('src/simServer.ts'), '--port', '0', '--seed', '9'], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const lines = createInterface({ input: child.stdout! });
      const first = await new Promise<string>((resolve) => lines.once('line', resolve));
      const { listening } = JSON.parse(first) as { listening: number };
      const c = new BridgeBrokerConnection({ host: '127.0.0.1', port: listening, server: 'Sim-P4-Demo', login: '900', password: 'x' });
      await c.connect();
      expect(c.server.platform).toBe('P4');
      const q = await c.quote('EURUSD');
      expect(q?.symbol).toBe('EURUSD');
      await c.disconnect();
    } finally {
      child.kill('SIGTERM');
    }
  });
});

describe('account events are built only for listeners', () => {
  it('the simulator builds position/order lists for a connection only while it has listeners, across reconnects', async () => {
    const { sim } = makeSim();
    const c = await connect(sim);
    const host = sim.server('Sim-P5-Demo')!;
    const sinks = () => [...host.sinks.values()].reduce((n, s) => n + s.size, 0);
    const buy = () => c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.01 });
    expect(sinks()).toBe(0);
    expect((await buy()).ok).toBe(true);
    const lists: number[] = [];
    const offPositions = c.on('positions', (p) => lists.push(p.length));
    const offDeals = c.on('deal', () => undefined);
    expect(sinks()).toBe(1);
    await buy();
    expect(lists).toEqual([2]);
    offPositions();
    offPositions(); // a second call changes nothing
    expect(sinks()).toBe(1); // the deal listener still wants them
    offDeals();
    expect(sinks()).toBe(0);
    await buy();
    expect(lists).toEqual([2]);
    const offOrders = c.on('orders', () => undefined);
    await c.disconnect();
    expect(sinks()).toBe(0);
    await c.connect();
    expect(sinks()).toBe(1);
    offOrders();
    expect(sinks()).toBe(0);
  });
});
