// The bridge over a real loopback socket: drops, lost replies, reconnect and resync, with
// the simulator's own state as the reference (no order or deal lost or duplicated).
import { afterEach, describe, expect, it } from 'vitest';
import { BridgeBrokerConnection } from '../../src/broker/bridge.js';
import { BrokerAuthError, BrokerTimeoutError } from '../../src/market/brokerErrors.js';
import type { Deal, TradeResult } from '../../src/market/orders.js';
import { startSimServer, type SimServerHandle } from '../../src/simServer.js';
import { makeSim, T0 } from '../helpers/sim-helpers.js';
import { until } from '../helpers/until.js';
import type { Socket } from 'node:net';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(login = '2001') {
  const { sim, clock } = makeSim();
  const handle: SimServerHandle = await startSimServer(sim, { port: 0 });
  cleanups.push(() => handle.close());
  // The bound every request gets: the timeout faults wait it out once, and every other request must
  // be answered within it (400 ms was not at load 8 in ci29: a resend timed out).
  const client = new BridgeBrokerConnection({ host: '127.0.0.1', port: handle.port, server: 'Sim-P5-Demo', login, password: 'pw', requestTimeoutMs: 2_000 });
  cleanups.push(() => client.disconnect());
  const deals: Deal[] = [];
  client.on('deal', (d) => deals.push(d));
  const states: string[] = [];
  client.on('state', (s) => states.push(s.state));
  await client.connect();
  return { sim, clock, handle, client, deals, states };
}

function simDeals(sim: ReturnType<typeof makeSim>['sim'], login: string) {
  return sim.options.store.deals('Sim-P5-Demo', login, 0, Number.MAX_SAFE_INTEGER);
}

describe('bridge connection over a real socket', () => {
  it('logs in, reports server info, trades and streams deals', async () => {
    const { client, deals } = await setup();
    expect(client.state).toBe('connected');
    expect(client.server).toMatchObject({ name: 'Sim-P5-Demo', platform: 'P5' });
    const r = await client.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.1, magic: 9 });
    expect(r.ok).toBe(true);
    await until(() => deals.length >= 1, 'the deal event');
    expect(deals.map((d) => d.entry)).toEqual(['in']);
    expect((await client.openedOrders()).positions).toHaveLength(1);
  });

  it('refuses a wrong password with BrokerAuthError', async () => {
    const { handle } = await setup('2002');
    const bad = new BridgeBrokerConnection({ host: '127.0.0.1', port: handle.port, server: 'Sim-P5-Demo', login: '2002', password: 'nope' });
    await expect(bad.connect()).rejects.toBeInstanceOf(BrokerAuthError);
    expect(bad.state).toBe('disconnected');
  });

  it('survives a socket destroyed mid-stream: nothing lost, nothing duplicated', async () => {
    const { sim, handle, client, deals, states } = await setup('2003');
    // Break the wire from inside the broker right when the 5th order executes: its reply
    // and the later ones are lost in flight.
    const host = sim.server('Sim-P5-Demo')!;
    let executed = 0;
    host.sinks.get(host.accounts.get('2003')!)!.add({
      positions: () => {},
      orders: () => {},
      deal: (d) => {
        if (d.entry === 'in' && ++executed === 5) handle.dropAll();
      },
    });
    const ids = Array.from({ length: 20 }, (_, i) => `req-${i}`);
    const outcomes = new Map<string, TradeResult | Error>();
    const inflight = ids.map((id) =>
      client.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.01 }, { requestId: id }).then(
        (r) => outcomes.set(id, r),
        (e: Error) => outcomes.set(id, e),
      ),
    );
    await Promise.all(inflight);
    expect(client.state).toBe('disconnected');
    const failed = ids.filter((id) => outcomes.get(id) instanceof Error);
    expect(failed.length).toBeGreaterThan(0);
    const executedBeforeResend = simDeals(sim, '2003').filter((d) => d.entry === 'in').length;
    expect(executedBeforeResend).toBeGreaterThanOrEqual(5);
    for (const id of failed) {
      const e = outcomes.get(id) as Error;
      expect(e).toBeInstanceOf(BrokerTimeoutError);
      expect((e as BrokerTimeoutError).sent).toBe(true);
      expect((e as BrokerTimeoutError).requestId).toBe(id);
    }
    await client.connect();
    expect(states.slice(-2)).toEqual(['connecting', 'connected']);
    // Resend the uncertain ones with the same request ids: executed ones are replayed.
    for (const id of failed) {
      const r = await client.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.01 }, { requestId: id });
      expect(r.ok).toBe(true);
    }
    const positions = (await client.openedOrders()).positions;
    expect(positions).toHaveLength(ids.length);
    const reference = simDeals(sim, '2003').filter((d) => d.entry !== 'balance');
    expect(reference).toHaveLength(ids.length);
    await until(() => deals.length >= reference.length, 'every deal event (a duplicate fails below)');
    const seen = deals.map((d) => d.ticket).sort((a, b) => a - b);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toEqual(reference.map((d) => d.ticket).sort((a, b) => a - b));
  });

  it('"timeout after send": the trade executes, the reply is lost, the resend is deduplicated', async () => {
    const { sim, client } = await setup('2004');
    sim.faults.set({ server: 'Sim-P5-Demo', login: '2004', kind: 'timeoutAfterSend', count: 1 });
    const err = await client.orderSend({ symbol: 'EURUSD', type: 'Sell', volume: 0.02 }, { requestId: 'lost-1' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BrokerTimeoutError);
    expect((err as BrokerTimeoutError).sent).toBe(true);
    expect((err as BrokerTimeoutError).requestId).toBe('lost-1');
    const lookup = await client.lookupRequest('lost-1');
    expect(lookup?.result.ok).toBe(true);
    const again = await client.orderSend({ symbol: 'EURUSD', type: 'Sell', volume: 0.02 }, { requestId: 'lost-1' });
    expect(again).toEqual(lookup!.result);
    expect((await client.openedOrders()).positions).toHaveLength(1);
  });

  it('a trade sent without a request id gets one, reported on the timeout for the resend', async () => {
    const { sim, client } = await setup('2006');
    sim.faults.set({ server: 'Sim-P5-Demo', login: '2006', kind: 'timeoutAfterSend', count: 1 });
    const err = (await client.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.01 }).catch((e: unknown) => e)) as BrokerTimeoutError;
    expect(err.requestId).toMatch(/^br-/);
    const again = await client.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.01 }, { requestId: err.requestId! });
    expect(again.ok).toBe(true);
    expect((await client.openedOrders()).positions).toHaveLength(1);
  });

  it('an injected drop closes the socket; reconnect works once the outage is over', async () => {
    const { sim, clock, client, deals } = await setup('2005');
    const r = await client.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.05 }, { requestId: 'a' });
    expect(r.ok).toBe(true);
    sim.faults.set({ server: 'Sim-P5-Demo', login: '2005', kind: 'drop', durationMs: 10_000 });
    await until(() => client.state === 'disconnected', 'the drop seen');
    // While disconnected, the position is closed at the broker (e.g. by an admin): its deal
    // must reach the client through the resync.
    const acc = sim.server('Sim-P5-Demo')!.accounts.get('2005')!;
    if (!r.ok) throw new Error('unreachable');
    acc.orderClose({ ticket: r.order.ticket });
    acc.flush();
    await expect(client.connect()).rejects.toThrow();
    clock.set(T0 + 10_001);
    await client.connect();
    await until(() => deals.length >= 2, 'the close\'s deal through the resync');
    expect(deals.map((d) => d.entry)).toEqual(['in', 'out']);
    expect((await client.openedOrders()).positions).toHaveLength(0);
  });
});

describe('a bridge that lost its state (standalone simulator restarted without --data)', () => {
  it('streams the new deals even though their tickets repeat tickets of the lost ones', async () => {
    // First life of the broker: three orders, their deals delivered.
    const first = makeSim();
    let handle = await startSimServer(first.sim, { port: 0 });
    const port = handle.port;
    const client = new BridgeBrokerConnection({ host: '127.0.0.1', port, server: 'Sim-P5-Demo', login: '2100', password: 'pw', requestTimeoutMs: 1_000 });
    cleanups.push(() => client.disconnect());
    const deals: Deal[] = [];
    client.on('deal', (d) => deals.push(d));
    await client.connect();
    for (let i = 0; i < 3; i++) expect((await client.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.01 })).ok).toBe(true);
    await until(() => deals.length >= 3, 'the three deal events');
    const before = deals.map((d) => d.ticket);
    expect(before).toHaveLength(3);
    await handle.close();
    await until(() => client.state === 'disconnected', 'the closed server seen');
    // Second life on the same port, state lost, a minute later: ticket numbers start over.
    const second = makeSim({ t0: T0 + 60_000 });
    handle = await startSimServer(second.sim, { port });
    cleanups.push(() => handle.close());
    await client.connect();
    for (let i = 0; i < 3; i++) expect((await client.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.01 })).ok).toBe(true);
    await until(() => deals.slice(3).filter((d) => d.entry === 'in').length >= 3, 'the second life\'s three deal events');
    const reference = simDeals(second.sim, '2100').filter((d) => d.entry === 'in').map((d) => d.ticket);
    expect(reference.some((t) => before.includes(t))).toBe(true); // the premise: tickets repeat
    const after = deals.slice(3).filter((d) => d.entry === 'in').map((d) => d.ticket);
    expect(after).toEqual(reference);
  });
});

describe('positions as deltas (hello feature positionsDelta)', () => {
  /** Bytes the client reads from its socket from now on. */
  function wireCounter(client: BridgeBrokerConnection) {
    let bytes = 0;
    (client as unknown as { socket: import('node:net').Socket }).socket.on('data', (d: string) => (bytes += d.length));
    return { take: () => { const b = bytes; bytes = 0; return b; } };
  }

  it('sends a trade the changed positions only, and the client still emits the full list', async () => {
    const { sim, client } = await setup('2101');
    const lists: { ticket: number }[][] = [];
    client.on('positions', (l) => lists.push(l.map((p) => ({ ticket: p.ticket }))));
    for (let i = 0; i < 30; i++) expect((await client.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.01 })).ok).toBe(true);
    const wire = wireCounter(client);
    const r = await client.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.01 });
    expect(r.ok).toBe(true);
    await until(() => lists.at(-1)?.length === 31, 'the trade\'s positions event');
    // 31 open positions are ~7 KB as a snapshot; the trade's frames stay far below it.
    expect(wire.take()).toBeLessThan(2500);
    const open = (await client.openedOrders()).positions.map((p) => p.ticket);
    expect(open).toHaveLength(31);
    expect(lists.at(-1)!.map((p) => p.ticket).sort()).toEqual([...open].sort());
    // A close removes the ticket from the emitted list.
    expect((await client.orderClose({ ticket: open[0]! })).ok).toBe(true);
    await until(() => lists.at(-1)?.length === 30, 'the close\'s positions event');
    expect(lists.at(-1)!.map((p) => p.ticket).sort()).toEqual(open.slice(1).sort());
    expect(sim.server('Sim-P5-Demo')).toBeDefined();
  });

  it('starts from an empty view at each login (a reconnect gets its positions anew)', async () => {
    const { handle, client } = await setup('2102');
    for (let i = 0; i < 3; i++) await client.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.01 });
    handle.dropAll();
    await until(() => client.state === 'disconnected', 'the drop seen');
    await client.connect();
    const lists: number[][] = [];
    client.on('positions', (l) => lists.push(l.map((p) => p.ticket)));
    await client.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.01 });
    await until(() => lists.length > 0 && lists.at(-1)!.length === 4, 'four positions emitted');
    expect(lists.at(-1)!.sort()).toEqual((await client.openedOrders()).positions.map((p) => p.ticket).sort());
  });

  it('keeps full snapshots for a client that does not ask for deltas', async () => {
    const { handle, client } = await setup('2103');
    for (let i = 0; i < 3; i++) await client.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.01 });
    const { connect } = await import('node:net');
    const raw = connect({ host: '127.0.0.1', port: handle.port });
    raw.setEncoding('utf8');
    let text = '';
    raw.on('data', (d: string) => (text += d));
    cleanups.push(() => void raw.destroy());
    raw.write(JSON.stringify({ id: 1, op: 'hello', args: { version: 1, server: 'Sim-P5-Demo', login: '2103', password: 'pw' } }) + '\n');
    await until(() => text.includes('"id":1'), 'the hello reply');
    expect(text).not.toContain('features');
    raw.write(JSON.stringify({ id: 2, op: 'orderSend', args: { req: { symbol: 'EURUSD', type: 'Buy', volume: 0.01 }, opts: { requestId: 'raw-1' } } }) + '\n');
    await until(() => text.includes('"event":"positions"'), 'a positions snapshot');
    const frame = text.split('\n').map((l) => (l ? JSON.parse(l) : {})).find((f) => f.event === 'positions');
    expect(frame.data).toHaveLength(4);
    expect(text).not.toContain('positionsDelta');
  });
});

describe('a trade\'s frames on the wire', () => {
  it('leave the simulator in one write (deal, positions and reply corked together)', async () => {
    const { sim } = makeSim();
    const handle = await startSimServer(sim, { port: 0 });
    cleanups.push(() => handle.close());
    // Count the writes reaching the simulator side's socket (a corked batch is one _writev).
    let writes = 0;
    handle.server.on('connection', (s: Socket) => {
      const w = s as unknown as { _write: (...a: unknown[]) => void; _writev: (...a: unknown[]) => void };
      const write = w._write.bind(s);
      const writev = w._writev.bind(s);
      w._write = (...a) => { writes++; write(...a); };
      w._writev = (...a) => { writes++; writev(...a); };
    });
    const client = new BridgeBrokerConnection({ host: '127.0.0.1', port: handle.port, server: 'Sim-P5-Demo', login: '2201', password: 'pw' });
    cleanups.push(() => client.disconnect());
    const deals: number[] = [];
    const lists: number[] = [];
    client.on('deal', (d) => deals.push(d.ticket));
    client.on('positions', (l) => lists.push(l.length));
    await client.connect();
    await client.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.01 });
    await until(() => deals.length === 1 && lists.at(-1) === 1, 'the first trade\'s events');
    writes = 0;
    expect((await client.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.01 })).ok).toBe(true);
    await until(() => deals.length >= 2 && lists.at(-1) === 2, 'the second trade\'s events');
    await new Promise((res) => setTimeout(res, 20)); // and no further write
    expect(deals).toHaveLength(2);
    expect(lists.at(-1)).toBe(2);
    expect(writes).toBe(1);
  });
});
