// The one source of "now" (UTC epoch ms). Components take a Clock so tests and the embedded
// simulator can run on a clock of their own; production passes systemClock.
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** `base` shifted by `offsetMs` (`base` itself for 0). */
export function shiftedClock(base: Clock, offsetMs: number): Clock {
  return offsetMs === 0 ? base : { now: () => base.now() + offsetMs };
}

/** The system clock shifted by `offsetMs` (the system clock itself for 0). */
export function offsetClock(offsetMs: number): Clock {
  return shiftedClock(systemClock, offsetMs);
}
