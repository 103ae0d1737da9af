// The SDK's parameter types say what the server's schemas accept, not only what they parse to. Bot
// walk: `timeFrame: 1` (minutes, which the server takes) did not compile, the type being the parsed
// name; `operation: 0` neither on /OrderSend, whose schema reads a name or a code. Schemas that take
// more than they give say so with `accepting` (src/http/schemas.ts), and the SDK types from that.
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { AccountApi, ClassicParams, GatewaySession, ProxyParams, StreamOptions } from '../../src/client/index.js';
import type { OrderTypeInput } from '../../src/market/orders.js';
import type { TimeframeInput } from '../../src/market/timeframes.js';

describe('parameter types', () => {
  it('a timeframe: its name in any case or its minutes', () => {
    expectTypeOf<ProxyParams<'PriceHistoryV2'>['timeFrame']>().toEqualTypeOf<TimeframeInput>();
    expectTypeOf<1>().toMatchTypeOf<TimeframeInput>();
    expectTypeOf<'M1' | 'h4' | 240 | '1440'>().toMatchTypeOf<TimeframeInput>();
    expectTypeOf<2>().not.toMatchTypeOf<TimeframeInput>();
    expectTypeOf<'M2'>().not.toMatchTypeOf<TimeframeInput>();
    expectTypeOf<NonNullable<ProxyParams<'SubscribeOhlc'>['timeframe']>>().toEqualTypeOf<TimeframeInput>();
    // P4's QuoteHistory takes names only (its schema is an enum): unchanged.
    expectTypeOf<ProxyParams<'QuoteHistory'>['timeframe']>().toEqualTypeOf<'M1' | 'M5' | 'M15' | 'M30' | 'H1' | 'H4' | 'D1' | 'W1' | 'MN1'>();
  });

  it('order types and sides by code; P4 OrderSend by its six names', () => {
    expectTypeOf<0 | 7 | '3' | 'BuyLimit' | 'selllimit'>().toMatchTypeOf<ClassicParams<'OrderSend'>['operation']>();
    expectTypeOf<OrderTypeInput>().toMatchTypeOf<ClassicParams<'OrderSend'>['operation']>();
    // Any other text still compiles (the server refuses it with a 400 naming the parameter): a bot's
    // `operation: string` from its configuration keeps compiling.
    expectTypeOf<string>().toMatchTypeOf<ClassicParams<'OrderSend'>['operation']>();
    expectTypeOf<8>().not.toMatchTypeOf<ClassicParams<'OrderSend'>['operation']>();
    expectTypeOf<0 | 1 | 'buy' | 'SELL'>().toMatchTypeOf<NonNullable<ClassicParams<'RequiredMargin'>['type']>>();
    expectTypeOf<0 | 1 | 'Buy' | 'sell'>().toMatchTypeOf<NonNullable<ProxyParams<'RequiredMargin'>['type']>>();
    expectTypeOf<ProxyParams<'OrderSend'>['operation']>().toEqualTypeOf<
      'Buy' | 'Sell' | 'BuyLimit' | 'SellLimit' | 'BuyStop' | 'SellStop' | 'buy' | 'sell' | 'buylimit' | 'selllimit' | 'buystop' | 'sellstop'
    >();
  });

  it("a stream's timeframes: names or minutes, as its subscribe message takes them", () => {
    expectTypeOf<readonly ['M1', 60]>().toMatchTypeOf<NonNullable<StreamOptions['timeframes']>>();
    expectTypeOf<readonly string[]>().toMatchTypeOf<NonNullable<StreamOptions['timeframes']>>();
  });

  it('lists stay readonly-friendly, numbers numbers', () => {
    expectTypeOf<readonly string[]>().toMatchTypeOf<ClassicParams<'GetQuoteMany'>['symbols']>();
    expectTypeOf<ClassicParams<'OrderSend'>['volume']>().toEqualTypeOf<number | undefined>();
    expectTypeOf<ProxyParams<'OrderSendSafe'>['operation']>().toEqualTypeOf<number>();
  });

  it('the calls compile as a bot writes them', () => {
    const use = async (acct: AccountApi, s: GatewaySession) => {
      await s.op.PriceHistoryV2({ symbol: 'BTCUSD', from: new Date(), to: new Date(), timeFrame: 1 });
      await s.op.SubscribeOhlc({ symbol: 'BTCUSD', timeframe: 'H1' });
      await acct.OrderSend({ symbol: 'BTCUSD', operation: 0, volume: 0.01 });
      const fromConfig: string = 'Buy';
      await acct.OrderSend({ symbol: 'BTCUSD', operation: fromConfig, volume: 0.01 });
      // @ts-expect-error 2 minutes is no timeframe
      await s.op.PriceHistoryV2({ symbol: 'BTCUSD', from: new Date(), to: new Date(), timeFrame: 2 });
      // @ts-expect-error P4's OrderSend has no stop-limit orders
      await s.op.OrderSend({ symbol: 'BTCUSD', operation: 'BuyStopLimit', volume: 0.01 });
    };
    expect(use).toBeTypeOf('function');
  });
});
