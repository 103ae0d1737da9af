// A seat's status as a pure function of its readyAt (SPEC §3), apart from its machine (seat.ts):
// the HTTP edge reads it without loading xstate into the main thread (~15 ms of CPU at every start).

export type SeatStatus = 'BUILDING_SERVER' | 'ACTIVE';

/** A seat's status at `now`: what the machine resolves to when it starts. */
export function seatStatusAt(readyAt: number, now: number): SeatStatus {
  return readyAt <= now ? 'ACTIVE' : 'BUILDING_SERVER';
}
