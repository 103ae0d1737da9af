// Every route the SDK calls, as data. The classic and gateway lists are typed against the server's
// own tables (src/http/routes/classic.ts, proxySchemas.ts), so a route added or removed there fails
// the type check here; test/client-routes.test.ts compares the whole list with a running gateway.
import type { ClassicReadName, ClassicTradeName, ProxyOperation } from './types.js';
import type { OPERATION_DEFS } from '../http/routes/proxySchemas.js';

export const CLASSIC_READS: { readonly [N in ClassicReadName]: true } = {
  Account: true, AccountSummary: true, AccountDetails: true, IsInvestor: true, OpenedOrders: true, OpenedOrdersTickets: true,
  ClosedOrders: true, OpenedOrder: true, Symbols: true, SymbolList: true, ServerTimezone: true, ServerTimezoneInfo: true, Mails: true,
  GetQuoteMany: true, MarketWatchMany: true, IsTradeSessionMany: true, IsQuoteSessionMany: true, GetTickValueMany: true,
  TickValueWithSize: true, SymbolParamsMany: true, SymbolParams: true, SymbolSessions: true, IsTradeSession: true, IsQuoteSession: true,
  RequiredMargin: true, OrderHistory: true, BalanceHistory: true, GetQuote: true, CheckConnect: true, Ping: true,
};

export const CLASSIC_TRADES: { readonly [N in ClassicTradeName]: true } = {
  OrderSend: true, OrderModify: true, OrderClose: true, OrderDelete: true, OrderCloseBy: true,
};

/** Each operation's kind, as the server's table says (a mismatch fails the type check): `trade`
 *  operations carry no idempotency id, so the SDK never retries them after a lost answer. */
export const PROXY_OPERATIONS: { readonly [O in ProxyOperation]: (typeof OPERATION_DEFS)[O]['kind'] } = {
  CheckConnect: 'session', ConnectionStatus: 'session', Disconnect: 'session', Ping: 'session',
  Account: 'read', AccountSummary: 'read', AccountDetails: 'read', SymbolList: 'read', Symbols: 'read', SymbolParams: 'read',
  SymbolParamsMany: 'read', GetQuote: 'read', Quote: 'read', GetQuoteMany: 'read', MarketWatchMany: 'read', OpenedOrders: 'read',
  OpenedOrder: 'read', OpenedOrdersTickets: 'read', ClosedOrders: 'read', OrderHistory: 'read', RequiredMargin: 'read',
  OrderSendSafe: 'trade', OrderSend: 'trade', OrderModifySafe: 'trade', OrderModify: 'trade', OrderCloseSafe: 'trade',
  OrderClose: 'trade', OrderDelete: 'trade', PriceHistory: 'read', QuoteHistory: 'read', PriceHistoryV2: 'read',
  EquityHistory: 'read', Subscribe: 'subscribe', SubscribeMany: 'subscribe', UnSubscribe: 'subscribe', UnSubscribeMany: 'subscribe',
  SubscribeOhlc: 'subscribe', UnsubscribeOhlc: 'subscribe', SubscribeOrderBook: 'subscribe', UnsubscribeOrderBook: 'subscribe',
  SubscribedSymbols: 'read',
};

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** The provisioning, connection, news and simulator routes, by the SDK method that calls them. */
export const OTHER_ROUTES = {
  'seats.create': ['POST', '/v1/seats'],
  'seats.list': ['GET', '/v1/seats'],
  'seats.get': ['GET', '/v1/seats/:id'],
  'seats.createKey': ['POST', '/v1/seats/:id/keys'],
  'seats.listKeys': ['GET', '/v1/seats/:id/keys'],
  'seats.remove': ['DELETE', '/v1/seats/:id'],
  'keys.create': ['POST', '/v1/keys'],
  'keys.list': ['GET', '/v1/keys'],
  'keys.revoke': ['DELETE', '/v1/keys/:keyId'],
  'keys.replace': ['POST', '/v1/keys/:keyId/replace'],
  'keys.setLimits': ['PUT', '/v1/keys/:keyId/limits'],
  'keys.rotateManagementKey': ['POST', '/v1/management-key/rotate'],
  audit: ['GET', '/v1/audit'],
  whoami: ['GET', '/v1/whoami'],
  status: ['GET', '/v1/status'],
  'accounts.connections': ['GET', '/v1/accounts/connections'],
  'accounts.upgrade': ['POST', '/v1/accounts/:id/upgrade'],
  'accounts.upgradeAll': ['POST', '/v1/accounts/upgrade'],
  'accounts.addFault': ['POST', '/v1/accounts/:id/faults'],
  'accounts.listFaults': ['GET', '/v1/accounts/:id/faults'],
  'accounts.clearFaults': ['DELETE', '/v1/accounts/:id/faults'],
  'sim.addFault': ['POST', '/v1/sim/faults'],
  'sim.listFaults': ['GET', '/v1/sim/faults'],
  'sim.clearFaults': ['DELETE', '/v1/sim/faults'],
  'brokerAccounts.create': ['POST', '/v1/broker-accounts'],
  connect: ['POST', '/v1/connect'],
  connectEx: ['POST', '/ConnectEx'],
  news: ['GET', '/news'],
  stream: ['GET', '/v1/stream'],
  'session.socket': ['GET', '/ws'],
} as const satisfies Record<string, readonly [HttpMethod, string]>;

/** Every (method, path) the SDK calls, `:param` segments as the server writes them. */
export function sdkRoutes(): Array<{ method: HttpMethod; path: string }> {
  return [
    ...Object.keys(CLASSIC_READS).map((n) => ({ method: 'GET' as const, path: `/${n}` })),
    ...Object.keys(CLASSIC_TRADES).map((n) => ({ method: 'GET' as const, path: `/${n}` })),
    ...Object.keys(PROXY_OPERATIONS).map((n) => ({ method: 'GET' as const, path: `/v1/proxy/${n}` })),
    ...Object.values(OTHER_ROUTES).map(([method, path]) => ({ method, path })),
  ];
}
