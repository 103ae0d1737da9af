// The chaos run's check of a bot's whole mix (test/helpers/orderLedger.ts, bookFindings): a clean
// history against the broker's book passes, with every state an uncertain answer allows, and each
// kind of damage (a position closed twice or not at all, a close answered for another position, a
// pending order lost, left after its delete, at a price other than its last modify, placed twice, or
// one no client placed) is named.
import { describe, expect, it } from 'vitest';
import type { Deal, Order, Position } from '../../src/market/orders.js';
import { bookFindings, type Attempt, type BrokerBook } from '../helpers/orderLedger.js';

const deal = (entry: 'in' | 'out', order: number, position: number, comment: string): Deal => ({
  ticket: 9000 + order, order, position, symbol: 'BTCUSD', type: entry === 'in' ? 'Buy' : 'Sell', entry, volume: 0.01, price: 65_000, timeMsc: 1, magic: 0, comment, commission: 0, swap: 0, profit: 0,
});
const position = (ticket: number, comment: string): Position => ({
  kind: 'position', ticket, symbol: 'BTCUSD', type: 'Buy', volume: 0.01, openPrice: 65_000, openTimeMsc: 1, currentPrice: 65_000, sl: 0, tp: 0, magic: 0, comment, commission: 0, swap: 0, profit: 0,
});
const pendingOrder = (ticket: number, comment: string, openPrice: number, state: Order['state'] = 'placed'): Order => ({
  kind: 'order', ticket, symbol: 'BTCUSD', type: 'BuyLimit', state, volume: 0.01, volumeInitial: 0.01, openPrice, openTimeMsc: 1, sl: 0, tp: 0, magic: 0, comment, commission: 0, swap: 0, profit: 0, positionId: 0,
});
const at = (a: Omit<Attempt, 'node'>): Attempt => ({ node: 'n-a', ...a });

// Opened #1 and #2; closed #1 (close c1, closing order #11); #2 stays open. Placed #3 at 32000,
// moved it to 31990, then #4 at 31000 and deleted it. Then uncertain: the close of #2 (c2), a
// modify of #3 (to 31980), a delete of nothing else, and a placement (p5) whose answer never came.
const attempts: Attempt[] = [
  at({ clientOrderId: 'o1', kind: 'open', status: 200, ticket: 1 }),
  at({ clientOrderId: 'o2', kind: 'open', status: 503 }),
  at({ clientOrderId: 'o2', kind: 'open', status: 200, ticket: 2 }),
  at({ clientOrderId: 'p3', kind: 'place', price: 32_000, status: 200, ticket: 3 }),
  at({ clientOrderId: 'c1', kind: 'close', target: 1, status: 'refused' }),
  at({ clientOrderId: 'c1', kind: 'close', target: 1, status: 200, ticket: 11 }),
  at({ clientOrderId: 'm3', kind: 'modify', target: 3, price: 31_990, status: 200, ticket: 3 }),
  at({ clientOrderId: 'p4', kind: 'place', price: 31_000, status: 200, ticket: 4 }),
  at({ clientOrderId: 'd4', kind: 'delete', target: 4, status: 200, ticket: 4 }),
  at({ clientOrderId: 'c2', kind: 'close', target: 2, status: 409 }),
  at({ clientOrderId: 'm3b', kind: 'modify', target: 3, price: 31_980, status: 409 }),
  at({ clientOrderId: 'p5', kind: 'place', price: 30_000, status: 409 }),
];
const book = (over: Partial<BrokerBook> = {}): BrokerBook => ({
  deals: [deal('in', 1, 1, 'o1'), deal('in', 2, 2, 'o2'), deal('out', 11, 1, 'c1')],
  history: [pendingOrder(4, 'p4', 31_000, 'cancelled')],
  positions: [position(2, 'o2')],
  orders: [pendingOrder(3, 'p3', 31_990)],
  ...over,
});

describe('the broker book check', () => {
  it('passes a clean history, in each state an uncertain answer allows', () => {
    expect(bookFindings(attempts, book())).toStrictEqual([]);
    // c2 ran, m3b ran, p5 ran: each allowed.
    expect(bookFindings(attempts, book({
      deals: [...book().deals, deal('out', 12, 2, 'c2')], positions: [],
      orders: [pendingOrder(3, 'p3', 31_980), pendingOrder(5, 'p5', 30_000)],
    }))).toStrictEqual([]);
  });

  it('flags an order, placement or close whose final answer said not done (a 4xx), yet at the broker', () => {
    const refused = [
      ...attempts,
      at({ clientOrderId: 'o6', kind: 'open', status: 503 }), at({ clientOrderId: 'o6', kind: 'open', status: 404 }),
      at({ clientOrderId: 'p7', kind: 'place', price: 29_000, status: 404 }),
      at({ clientOrderId: 'o8', kind: 'open', status: 404 }),
      // Its first answer lost, then 404: it may have run (it did: #9 below).
      at({ clientOrderId: 'o9', kind: 'open', status: 'refused' }), at({ clientOrderId: 'o9', kind: 'open', status: 404 }),
    ];
    // o8 refused and not there, o9 unknown: clean either way.
    expect(bookFindings(refused, book())).toStrictEqual([]);
    expect(bookFindings(refused, book({ deals: [...book().deals, deal('in', 9, 9, 'o9')], positions: [position(2, 'o2'), position(9, 'o9')] }))).toStrictEqual([]);
    expect(bookFindings(refused, book({ deals: [...book().deals, deal('in', 6, 6, 'o6')], positions: [position(2, 'o2'), position(6, 'o6')], orders: [pendingOrder(3, 'p3', 31_990), pendingOrder(7, 'p7', 29_000)] }))).toStrictEqual([
      'open o6 answered 404 at last, but the broker has it',
      'place p7 answered 404 at last, but the broker has it',
      "pending order #7 'p7' at 29000 in the book, not one the clients placed and kept",
    ]);
  });

  it('flags a position closed twice, and a 200 close that closed another position', () => {
    expect(bookFindings(attempts, book({ deals: [...book().deals, deal('out', 12, 1, 'c2')] }))).toStrictEqual(['position #1 closed 2 times: \'c1\', \'c2\'']);
    expect(bookFindings(attempts, book({ deals: [deal('in', 1, 1, 'o1'), deal('in', 2, 2, 'o2'), deal('out', 11, 2, 'c1')], positions: [position(1, 'o1')] }))).toStrictEqual([
      'close c1 of #1 answered 200 but closed #2',
      'position #1 is open at the broker, the clients were told closed',
    ]);
  });

  it('flags a position lost (closed with no close answered) and a close answered but not done', () => {
    const told = attempts.filter((a) => a.clientOrderId !== 'c2');
    expect(bookFindings(told, book({ positions: [] }))).toStrictEqual(['position #2 is closed at the broker, the clients were told open']);
    expect(bookFindings(attempts, book({ deals: book().deals.slice(0, 2), positions: [position(1, 'o1'), position(2, 'o2')] }))).toStrictEqual([
      'missing close c1: answered 200 but not at the broker (attempts n-a:refused n-a:200#11)',
      'position #1 is open at the broker, the clients were told closed',
    ]);
  });

  it('flags a pending order lost, left after its delete, at another price, placed twice, or placed by no client', () => {
    // Cancelled with no delete answered.
    expect(bookFindings(attempts, book({ orders: [], history: [...book().history, pendingOrder(3, 'p3', 31_990, 'cancelled')] }))).toStrictEqual(['pending order #3 is absent at the broker, the clients were told at 31990 or at 31980']);
    expect(bookFindings(attempts, book({ orders: [pendingOrder(3, 'p3', 31_990), pendingOrder(4, 'p4', 31_000)] }))).toStrictEqual([
      'pending order #4 is at 31000 at the broker, the clients were told absent',
    ]);
    expect(bookFindings(attempts, book({ orders: [pendingOrder(3, 'p3', 32_000)] }))).toStrictEqual([
      'pending order #3 is at 32000 at the broker, the clients were told at 31990 or at 31980',
    ]);
    expect(bookFindings(attempts, book({ orders: [pendingOrder(3, 'p3', 31_990), pendingOrder(6, 'p3', 32_000)] }))).toStrictEqual([
      'doubled placement p3: tickets 3,6 (attempts n-a:200#3)',
      'pending order #6 \'p3\' at 32000 in the book, not one the clients placed and kept',
    ]);
    expect(bookFindings(attempts, book({ orders: [pendingOrder(3, 'p3', 31_990), pendingOrder(7, 'zz', 1)] }))).toStrictEqual([
      'unknown placement #7 at the broker under \'zz\', never sent',
      'pending order #7 \'zz\' at 1 in the book, not one the clients placed and kept',
    ]);
    // A placement whose answer never came may be there, but only at its own price.
    expect(bookFindings(attempts, book({ orders: [pendingOrder(3, 'p3', 31_990), pendingOrder(5, 'p5', 29_000)] }))).toStrictEqual([
      'pending order #5 \'p5\' at 29000 in the book, not one the clients placed and kept',
    ]);
  });
});
