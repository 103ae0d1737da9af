// Bar boundaries on the broker server clock. D1 opens at server midnight, W1 on Sunday server
// midnight, MN1 on the 1st of the month (server calendar). Pure: the simulator builds bars with
// them, the runtime and the stream edge ask whether a bar is still open.
import { dstInterval, fromServerTime, type ServerClock } from './serverClock.js';
import { TIMEFRAME_MINUTES, type Timeframe } from './timeframes.js';

const DAY = 86_400_000;
/** Server-clock ms of the bar containing server-clock instant s. */
export function barStartServer(tf: Timeframe, s: number): number {
  switch (tf) {
    case 'W1': {
      const d = Math.floor(s / DAY);
      const dow = (d + 4) % 7; // 1970-01-01 was a Thursday
      return (d - dow) * DAY;
    }
    case 'MN1': {
      const date = new Date(s);
      return Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1);
    }
    default: {
      const len = TIMEFRAME_MINUTES[tf] * 60_000;
      return s - (((s % len) + len) % len);
    }
  }
}

/** Server-clock ms where the bar after the one starting at `startServer` begins. */
export function nextBarServer(tf: Timeframe, startServer: number): number {
  if (tf === 'MN1') {
    const date = new Date(startServer);
    return Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1);
  }
  return startServer + TIMEFRAME_MINUTES[tf] * 60_000;
}

/** [startUtc, endUtc) of the bar containing a UTC instant. When DST ends the server clock repeats
 *  an hour; a server time maps to its first occurrence, so the bar open just before the switch runs
 *  on to the first bar boundary after it (as bars are walked forward, from each end to the next) and
 *  an instant in the repeated hour belongs to that bar, not to one that ended an hour earlier. */
export function barRangeUtc(tf: Timeframe, utcMs: number, clock: ServerClock): [number, number] {
  const startS = barStartServer(tf, clock.toServer(utcMs));
  const endS = nextBarServer(tf, startS);
  const end = fromServerTime(endS, clock.tz);
  if (end <= utcMs) {
    // In the repeated hour: the bar is the one open at the last instant before the clock went back.
    const dst = dstInterval(clock.tz.dst, new Date(utcMs).getUTCFullYear());
    if (dst !== null && utcMs >= dst[1]) return barRangeUtc(tf, dst[1] - 1, clock);
  }
  return [fromServerTime(startS, clock.tz), end];
}
