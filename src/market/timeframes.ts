// The trading vocabulary: timeframes and bars (bid-based, boundaries on the broker server clock).

export const TIMEFRAMES = ['M1', 'M5', 'M15', 'M30', 'H1', 'H4', 'D1', 'W1', 'MN1'] as const;
export type Timeframe = (typeof TIMEFRAMES)[number];
const MINUTES = {
  M1: 1,
  M5: 5,
  M15: 15,
  M30: 30,
  H1: 60,
  H4: 240,
  D1: 1440,
  W1: 10080,
  MN1: 43200,
} as const satisfies Record<Timeframe, number>;
/** Minutes per timeframe (MN1 nominal 43200, as MT numbers it). */
export const TIMEFRAME_MINUTES: Readonly<Record<Timeframe, number>> = MINUTES;
export type TimeframeMinutes = (typeof MINUTES)[Timeframe];
/** What `parseTimeframe` reads: a name (any case: M1, h4) or its minutes, as a number or digits. */
export type TimeframeInput = Timeframe | Lowercase<Timeframe> | TimeframeMinutes | `${TimeframeMinutes}`;
export function parseTimeframe(value: string | number): Timeframe | undefined {
  if (typeof value === 'number' || /^\d+$/.test(value)) {
    const minutes = Number(value);
    return TIMEFRAMES.find((tf) => TIMEFRAME_MINUTES[tf] === minutes);
  }
  const upper = value.toUpperCase();
  return TIMEFRAMES.find((tf) => tf === upper);
}

/** Bid-based bar. Boundaries follow the broker SERVER clock (D1 opens at server midnight,
 *  W1 on Sunday server midnight, MN1 on the 1st). `time` is the UTC instant of the bar open
 *  in epoch seconds; `serverTime` is the same instant on the server clock (UTC + offset),
 *  which is what SPEC §6 CANDLE `time` carries. */
export interface Candle {
  readonly time: number;
  readonly serverTime: number;
  readonly open: number;
  readonly high: number;
  readonly low: number;
  readonly close: number;
  /** Tick count. */
  readonly ticks: number;
  readonly volume: number;
}

export interface CandleEvent {
  readonly symbol: string;
  readonly timeframe: Timeframe;
  readonly candle: Candle;
  /** true once the bar is finished (the first tick of the next bar arrived). */
  readonly closed: boolean;
}
