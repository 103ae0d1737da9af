// Hosts seat actors in a shard. Every actor is subscribed with an error handler: an unhandled
// actor error would otherwise be rethrown from a timer and kill the worker.
import { createActor, type Actor } from 'xstate';
import { seatMachine, type SeatContext } from '../../../actors/seat.js';
import { TenancyStore } from '../../store/tenancy.js';
import type { SeatView } from '../protocol.js';
import type { ActorHost, ShardContext } from './context.js';

export function createSeatHost(ctx: ShardContext): ActorHost {
  const store = new TenancyStore(ctx.db);
  const actors = new Map<string, Actor<typeof seatMachine>>();
  const machine = seatMachine.provide({
    actions: {
      persist: (_a, c: SeatContext) => {
        store.upsertSeatState({ seat_id: c.seatId, status: c.status, ready_at: c.readyAt, updated_at: ctx.clock.now() });
      },
    },
  });

  const start = (seatId: string, readyAt: number) => {
    const actor = createActor(machine, { input: { seatId, readyAt } });
    actor.subscribe({ error: (err) => ctx.log.error('seat actor failed', { seatId, err }) });
    actors.set(seatId, actor);
    actor.start();
    return actor;
  };
  const view = (a: Actor<typeof seatMachine>): SeatView => {
    const c = a.getSnapshot().context;
    return { seatId: c.seatId, status: c.status, readyAt: c.readyAt };
  };

  return {
    handlers: {
      'seat.create': ({ seatId, readyAt }) => view(actors.get(seatId) ?? start(seatId, readyAt)),
      'seat.remove': ({ seatId }) => {
        const a = actors.get(seatId);
        actors.delete(seatId);
        a?.stop();
        return { stopped: a !== undefined };
      },
      'seat.get': ({ seatId }) => {
        const a = actors.get(seatId);
        if (a) return view(a);
        const row = store.seatState(seatId);
        return row ? view(start(seatId, row.ready_at)) : null;
      },
    },
    rehydrate() {
      let n = 0;
      for (const row of store.allSeatStates()) {
        if (!ctx.owns(row.seat_id) || actors.has(row.seat_id)) continue;
        start(row.seat_id, row.ready_at);
        n++;
      }
      return n;
    },
    actorCount: () => actors.size,
    stop() {
      for (const a of actors.values()) a.stop();
      actors.clear();
    },
  };
}
