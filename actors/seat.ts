// Seat status (SPEC §3): a private seat is BUILDING_SERVER until its dedicated connection is
// prepared, then ACTIVE; a shared seat is ACTIVE from the start.
//
// Restart safety: xstate v5 does not reschedule `after` timers when an actor is restored from a
// persisted snapshot (checked against 5.33), so the durable fact is `readyAt`, and a restarted
// shard starts the machine from that input: the `resolving` state routes to `active` when the
// time has passed, otherwise `building` waits only the remaining time.
import { assign, setup } from 'xstate';
import { seatStatusAt, type SeatStatus } from './seatStatus.js';

export type { SeatStatus };

export interface SeatInput {
  seatId: string;
  /** Epoch ms at which preparation completes (creation time for a shared seat). */
  readyAt: number;
}

export interface SeatContext extends SeatInput {
  status: SeatStatus;
}

export const seatMachine = setup({
  types: {
    input: {} as SeatInput,
    context: {} as SeatContext,
    events: {} as { type: 'seat.prepared' },
  },
  actions: {
    /** Provided by the host: writes { seatId, status, readyAt } durably. */
    persist: (_args, _params: SeatContext) => {},
  },
  guards: {
    isPrepared: ({ context }) => seatStatusAt(context.readyAt, Date.now()) === 'ACTIVE',
  },
  delays: {
    remainingBuildTime: ({ context }) => Math.max(0, context.readyAt - Date.now()),
  },
}).createMachine({
  id: 'seat',
  context: ({ input }) => ({ ...input, status: 'BUILDING_SERVER' }),
  initial: 'resolving',
  states: {
    resolving: {
      always: [{ guard: 'isPrepared', target: 'active' }, { target: 'building' }],
    },
    building: {
      entry: [assign({ status: 'BUILDING_SERVER' }), { type: 'persist', params: ({ context }) => context }],
      after: { remainingBuildTime: 'active' },
      on: { 'seat.prepared': 'active' },
    },
    active: {
      type: 'final',
      entry: [assign({ status: 'ACTIVE' }), { type: 'persist', params: ({ context }) => context }],
    },
  },
});
