// P4/P5 differences in one place (SPEC §1): P4 has no stop-limit orders, no balance
// history and no ORDERS stream; P4 market orders are tickets, P5 has positions.
import type { OrderType } from '../market/orders.js';
import type { Platform } from '../market/server.js';

export interface Dialect {
  readonly stopLimitOrders: boolean;
  readonly balanceHistory: boolean;
  /** Pending-order snapshots (ORDERS frames) exist. */
  readonly ordersStream: boolean;
  /** History style: P4 QuoteHistory (count bars back), P5 PriceHistory (from/to). */
  readonly history: 'QuoteHistory' | 'PriceHistory';
  readonly orderTypes: readonly OrderType[];
}

const P4: Dialect = {
  stopLimitOrders: false,
  balanceHistory: false,
  ordersStream: false,
  history: 'QuoteHistory',
  orderTypes: ['Buy', 'Sell', 'BuyLimit', 'SellLimit', 'BuyStop', 'SellStop'],
};
const P5: Dialect = {
  stopLimitOrders: true,
  balanceHistory: true,
  ordersStream: true,
  history: 'PriceHistory',
  orderTypes: ['Buy', 'Sell', 'BuyLimit', 'SellLimit', 'BuyStop', 'SellStop', 'BuyStopLimit', 'SellStopLimit'],
};

export function dialectOf(platform: Platform): Dialect {
  return platform === 'P4' ? P4 : P5;
}
