// An idle connected account's connection machine rests as its snapshot (src/runtime/hosts/parkedActor.ts):
// parked once connected, reads answered without restoring it, restored by its next event with its
// context intact and without running entry actions again, and parked again once it rests.
import { describe, expect, it } from 'vitest';
import { connectionMachine, type ConnectionPort } from '../../actors/connection.js';
import { ParkedActor } from '../../src/runtime/hosts/parkedActor.js';
import { until } from '../helpers/until.js';

const turn = () => new Promise((r) => setImmediate(r));

function connection() {
  const notices: string[] = [];
  let connects = 0;
  let p!: ParkedActor<typeof connectionMachine>;
  const port: ConnectionPort = {
    connect: async () => {
      connects++;
    },
    disconnect: async () => {},
    notify: (phase) => {
      notices.push(phase);
      if (phase === 'connected') p.parkSoon();
    },
  };
  p = new ParkedActor(connectionMachine, { accountId: 'a', backoffBaseMs: 1, backoffCapMs: 2, port }, { actorFailed: (err) => { throw err; }, restful: (s) => s.matches('connected') });
  return { p, notices, connects: () => connects };
}

describe('a parked connection machine', () => {
  it('rests as its snapshot once connected; reads do not restore it', async () => {
    const { p, notices } = connection();
    p.actor.start();
    for (let i = 0; i < 10 && !p.isParked; i++) await turn();
    expect(p.isParked).toBe(true);
    expect(p.getSnapshot().matches('connected')).toBe(true);
    expect(p.getSnapshot().context.everConnected).toBe(true);
    expect(p.value).toBe('connected');
    expect(p.isParked).toBe(true);
    expect(notices).toEqual(['connecting', 'connected']);
  });

  it('its next event restores it (context intact, no entry action run again), and it parks again once it rests', async () => {
    const { p, notices, connects } = connection();
    p.actor.start();
    for (let i = 0; i < 10 && !p.isParked; i++) await turn();
    p.send({ type: 'broker.dropped', reason: 'gone' });
    expect(p.isParked).toBe(false);
    expect(p.getSnapshot().context.lastError).toBe('gone');
    expect(notices).toEqual(['connecting', 'connected', 'reconnecting']);
    // The reconnect runs on a real (1-2 ms) backoff timer: awaited as a condition, not 50 polls of 5 ms.
    await until(() => p.isParked && p.getSnapshot().matches('connected'), 'the machine to reconnect and park again');
    expect(p.isParked).toBe(true);
    expect(connects()).toBe(2);
    expect(notices).toEqual(['connecting', 'connected', 'reconnecting', 'connected']);
    // An event the resting state ignores restores it, changes nothing, and it parks again.
    p.send({ type: 'check' });
    expect(p.getSnapshot().matches('connected')).toBe(true);
    await turn();
    expect(p.isParked).toBe(true);
    expect(notices).toHaveLength(4);
  });

  it('a drain from rest runs to the end (the actor restored for good)', async () => {
    const { p, notices } = connection();
    p.actor.start();
    for (let i = 0; i < 10 && !p.isParked; i++) await turn();
    p.send({ type: 'drain' });
    p.send({ type: 'drained' });
    for (let i = 0; i < 20 && p.getSnapshot().status !== 'done'; i++) await turn();
    expect(p.getSnapshot().status).toBe('done');
    expect(p.isParked).toBe(false);
    expect(notices.at(-1)).toBe('stopped');
  });
});
