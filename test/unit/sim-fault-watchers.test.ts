// Injected drops reach connections through their server (SimServer.faultWatchers, one fault
// listener per simulator instead of a closure per connection: issue 19's idle-account memory).
// What a closure per connection did by itself, the server's set has to do for many at once: a
// server-wide drop ends every connection of that server and none of another, a login's drop only
// that login's, and a connection that disconnected or was dropped no longer listens (a reconnect
// listens again, once).
import { describe, expect, it } from 'vitest';
import { connect, makeSim } from '../helpers/sim-helpers.js';

describe('simulated broker: drops reach the connections of their server', () => {
  it('a server-wide drop ends every connection of that server, none of another; a login drop only its own', async () => {
    const { sim, clock } = makeSim();
    const p5 = await Promise.all(['2001', '2002', '2003'].map((l) => connect(sim, 'Sim-P5-Demo', l)));
    const p4 = await Promise.all(['4001', '4002'].map((l) => connect(sim, 'Sim-P4-Demo', l)));
    // Two connections of one login both listen.
    const twin = await connect(sim, 'Sim-P5-Demo', '2002');
    expect(sim.server('Sim-P5-Demo')!.faultWatchers.size).toBe(4);
    expect(sim.server('Sim-P4-Demo')!.faultWatchers.size).toBe(2);

    sim.faults.set({ server: 'Sim-P5-Demo', login: '2002', kind: 'drop', durationMs: 1_000 });
    expect([...p5, twin].map((c) => c.state)).toEqual(['connected', 'disconnected', 'connected', 'disconnected']);
    expect(p4.map((c) => c.state)).toEqual(['connected', 'connected']);
    expect(sim.server('Sim-P5-Demo')!.faultWatchers.size).toBe(2);

    // Faults of other kinds end nothing.
    sim.faults.set({ server: 'Sim-P5-Demo', kind: 'latency', latencyMs: 5 });
    expect(p5[0]!.state).toBe('connected');

    sim.faults.set({ server: 'Sim-P5-Demo', kind: 'drop', durationMs: 1_000 });
    expect([...p5, twin].map((c) => c.state)).toEqual(['disconnected', 'disconnected', 'disconnected', 'disconnected']);
    expect(p4.map((c) => c.state)).toEqual(['connected', 'connected']);
    expect(sim.server('Sim-P5-Demo')!.faultWatchers.size).toBe(0);
    expect(sim.server('Sim-P4-Demo')!.faultWatchers.size).toBe(2);

    // Back after the outage: each listens again, once (connect twice adds nothing).
    clock.advance(1_001);
    for (const c of p5) await c.connect();
    await p5[0]!.connect();
    expect(sim.server('Sim-P5-Demo')!.faultWatchers.size).toBe(3);
  });

  it('a connection closed by its client no longer hears drops, nor is held by its server', async () => {
    const { sim } = makeSim();
    const a = await connect(sim, 'Sim-P5-Demo', '3001');
    const b = await connect(sim, 'Sim-P5-Demo', '3002');
    const states: string[] = [];
    a.on('state', (s) => states.push(s.state));
    await a.disconnect();
    expect(sim.server('Sim-P5-Demo')!.faultWatchers.has(a)).toBe(false);
    sim.faults.set({ server: 'Sim-P5-Demo', kind: 'drop', durationMs: 1_000 });
    // The closed one saw its own close only; the open one was dropped.
    expect(states).toEqual(['disconnected']);
    expect(b.state).toBe('disconnected');
  });
});
