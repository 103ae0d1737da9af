// The trading vocabulary: servers and quotes. Plain data, shared by every layer (edge, runtime,
// simulator, broker) and able to cross worker-thread MessagePorts and the bridge socket unchanged.
//
// Time convention: every `*Msc` / `time*` field is UTC (epoch ms, or epoch seconds where
// stated). Broker server time is derived by the consumer with `toServerTime()` from
// `./serverClock.js`, because `/v1/*` routes answer in server time and classic routes in UTC.

export type Platform = 'P4' | 'P5';

/** How a server's clock differs from UTC. `dst` names the daylight-saving rule applied on top
 *  of `standardOffsetMinutes` (+60 while in effect). Many MT brokers run "New York close"
 *  time: UTC+2, UTC+3 while US DST is in effect (rule 'US'). */
export type DstRule = 'none' | 'US' | 'EU';
export interface ServerTimeZone {
  /** Human description, e.g. "GMT+2/GMT+3 (US DST)". */
  readonly description: string;
  readonly standardOffsetMinutes: number;
  readonly dst: DstRule;
}

export interface ServerInfo {
  readonly name: string;
  readonly platform: Platform;
  /** Terminal/server build number, e.g. 4620 (P5) or 1420 (P4). */
  readonly build: number;
  readonly company: string;
  readonly timeZone: ServerTimeZone;
  /** The server's clock runs this far (ms) from the wall clock: a simulator process started at a
   *  fixed instant (`npm run sim -- --start`) says so in its hello. Absent (0): a real broker, or the
   *  embedded simulator (whose offset its shard knows: ShardSettings.simClockOffsetMs). */
  readonly clockOffsetMs?: number;
}

/** Latest quote. `timeMsc` is UTC epoch ms. */
export interface Tick {
  readonly symbol: string;
  readonly bid: number;
  readonly ask: number;
  readonly timeMsc: number;
  readonly volume?: number;
}

export interface ServerTime {
  readonly timeMsc: number;
  readonly serverTimeMsc: number;
  readonly utcOffsetMinutes: number;
}
