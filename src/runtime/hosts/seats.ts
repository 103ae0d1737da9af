// Hosts seat actors in a shard. Every actor is subscribed with an error handler: an unhandled
// actor error would otherwise be rethrown from a timer and kill the worker.
import { createActor, type Actor } from 'xstate';
import { seatMachine, type SeatContext, type SeatStatus } from '../../../actors/seat.js';
import { TenancyStore, type SeatStateRow } from '../../store/tenancy.js';
import { fullDiskOf } from '../../store/fullDisk.js';
import { HeldWrites } from '../../store/heldWrites.js';
import { errorMessage } from '../../util/errorMessage.js';
import type { SeatView } from '../protocol.js';
import type { ActorHost, ShardContext } from './context.js';

export function createSeatHost(ctx: ShardContext): ActorHost {
  const store = new TenancyStore(ctx.db);
  const actors = new Map<string, Actor<typeof seatMachine>>();
  // A seat becoming ACTIVE is its timer's write, no request's: on a full disk it waits for room
  // (the actor goes on; until written, a restart finds the seat building and finishes it again).
  // A seat's latest row wins (keyOf): its BUILDING row held, then its ACTIVE row written at once as
  // room returns, the retry does not write BUILDING after it.
  const upsert = (rows: SeatStateRow[]) => () => {
    for (const row of rows) store.upsertSeatState(row);
  };
  const rows: HeldWrites<SeatStateRow> = new HeldWrites<SeatStateRow>({
    fullDisk: fullDiskOf(ctx), what: 'seat state', keyOf: (row) => row.seat_id,
    retry: (held) => {
      try {
        rows.attempt(upsert(held), held);
      } catch (err) {
        ctx.log.error('a postponed background write failed', { what: 'seat state', err: errorMessage(err) });
      }
    },
  });
  const machine = seatMachine.provide({
    actions: {
      persist: (_a, c: SeatContext) => {
        const row = { seat_id: c.seatId, status: c.status, ready_at: c.readyAt, updated_at: ctx.clock.now() };
        rows.attempt(upsert([row]), [row]);
      },
    },
  });

  /** A seat's actor lives only while it is building: once ACTIVE (a final state, persisted on
   *  entry) its row says all there is, so an idle seat holds no actor and a restart starts none. */
  const start = (seatId: string, readyAt: number): SeatView => {
    const actor = createActor(machine, { input: { seatId, readyAt } });
    actor.subscribe({
      error: (err) => ctx.log.error('seat actor failed', { seatId, err }),
      complete: () => {
        if (actors.get(seatId) === actor) actors.delete(seatId);
      },
    });
    actors.set(seatId, actor);
    actor.start();
    return view(actor);
  };
  const view = (a: Actor<typeof seatMachine>): SeatView => {
    const c = a.getSnapshot().context;
    return { seatId: c.seatId, status: c.status, readyAt: c.readyAt };
  };
  const fromRow = (row: SeatStateRow): SeatView => ({ seatId: row.seat_id, status: row.status as SeatStatus, readyAt: row.ready_at });
  /** A seat as it is: its actor while it builds (started from its row if none runs), else its row. */
  const get = (seatId: string): SeatView | null => {
    const a = actors.get(seatId);
    if (a) return view(a);
    const row = store.seatState(seatId);
    if (!row) return null;
    return row.status === 'ACTIVE' ? fromRow(row) : start(seatId, row.ready_at);
  };

  return {
    handlers: {
      'seat.create': ({ seatId, readyAt }) => {
        const a = actors.get(seatId);
        if (a) return view(a);
        const row = store.seatState(seatId);
        return row?.status === 'ACTIVE' ? fromRow(row) : start(seatId, row?.ready_at ?? readyAt);
      },
      'seat.remove': ({ seatId }) => {
        const a = actors.get(seatId);
        actors.delete(seatId);
        a?.stop();
        return { stopped: a !== undefined };
      },
      'seat.get': ({ seatId }) => get(seatId),
      'seat.prepared': ({ seatId }) => {
        const seat = get(seatId);
        const a = actors.get(seatId);
        if (seat?.status !== 'BUILDING_SERVER' || !a) return seat;
        a.send({ type: 'seat.prepared' });
        return view(a);
      },
    },
    rehydrate() {
      let n = 0;
      // Only seats still building have an actor to restore (their timer); the rest are rows.
      for (const row of store.buildingSeatStates()) {
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
