// The trading vocabulary: symbol specifications and trading sessions (server-clock minutes).

/** Minutes from server-clock midnight, [fromMin, toMin). */
export interface SessionWindow {
  readonly fromMin: number;
  readonly toMin: number;
}
/** Index 0 = Sunday ... 6 = Saturday, in server time. */
export type WeeklySessions = readonly (readonly SessionWindow[])[];

export type TradeMode = 'Full' | 'LongOnly' | 'ShortOnly' | 'CloseOnly' | 'Disabled';
/** Forex: lots*contractSize/leverage in margin currency. CFD: lots*contractSize*price
 *  (no leverage). CFDLeverage: lots*contractSize*price/leverage. Times marginRate. */
export type MarginCalcMode = 'Forex' | 'CFD' | 'CFDLeverage';

export interface SymbolInfo {
  readonly name: string;
  readonly description: string;
  /** Profit currency. */
  readonly currency: string;
  readonly baseCurrency: string;
  readonly marginCurrency: string;
  readonly digits: number;
  readonly point: number;
  readonly contractSize: number;
  readonly tickSize: number;
  /** Value of one tickSize move for 1 lot, in account currency, at the current price. */
  readonly tickValue: number;
  readonly marginCalcMode: MarginCalcMode;
  /** Fixed initial margin per lot in margin currency; 0 = use marginCalcMode. */
  readonly marginInitial: number;
  readonly marginMaintenance: number;
  /** Multiplier applied to the calculated margin. */
  readonly marginRate: number;
  /** e.g. "Forex\\Majors". */
  readonly group: string;
  readonly volumeMin: number;
  readonly volumeMax: number;
  readonly volumeStep: number;
  /** Minimum SL/TP/pending distance from the current price, in points. */
  readonly stopsLevel: number;
  /** Same value as stopsLevel (SPEC §2). */
  readonly limitPoints: number;
  /** Points within which an order or position can no longer be modified. */
  readonly freezeLevel: number;
  readonly tradeMode: TradeMode;
  readonly tradeSessions: WeeklySessions;
  readonly quoteSessions: WeeklySessions;
  /** Swap per lot per night, in points (MT "swap in points" mode). */
  readonly swapLong: number;
  readonly swapShort: number;
  /** Commission per lot per side in account currency (charged on each deal, negative). */
  readonly commissionPerLot: number;
  /** Typical spread in points. */
  readonly spread: number;
}
