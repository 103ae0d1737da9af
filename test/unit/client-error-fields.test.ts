// What a bot branches on when a call fails: the error's code, typed (a misspelt 'RATE_LIMITD' is a
// type error, not a branch that never runs), and a broker rejection's reason and retcode as fields of
// their own (MARKET_CLOSED: wait for the session; REQUOTE: price again; NO_MONEY: size down), not
// `unknown`s to dig out of `body`. A fake fetch answers as the gateway does (bot walk: OrderSend of
// EURUSD at the weekend, BTCUSD with volume 0.001).
import { describe, expect, expectTypeOf, it } from 'vitest';
import { TagwClient, TagwError, type RejectReason, type TagwErrorCode } from '../../src/client/index.js';

const answering = (status: number, body: unknown): typeof fetch => async () =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });

async function failure(status: number, body: unknown): Promise<TagwError> {
  const client = new TagwClient({ baseUrl: 'http://gw.test', apiKey: 'k', fetch: answering(status, body), retry: { attempts: 1 } });
  try {
    await client.account('a').OrderSend({ symbol: 'EURUSD', operation: 'Buy', volume: 0.01 });
  } catch (e) {
    return e as TagwError;
  }
  throw new Error('no error');
}

describe('TagwError fields a bot branches on', () => {
  it("a broker rejection's reason and retcode are fields of the error", async () => {
    const e = await failure(400, { error: 'TRADE_REQUEST_ERROR', message: 'market is closed for EURUSD', reason: 'MARKET_CLOSED', retcode: 10018 });
    expect(e.code).toBe('TRADE_REQUEST_ERROR');
    expect(e.reason).toBe('MARKET_CLOSED');
    expect(e.retcode).toBe(10018);
  });

  it('other errors have neither; a reason that is not text is not passed off as one', async () => {
    const e = await failure(429, { error: 'RATE_LIMITED', message: 'slow down', retryAfterMs: 5 });
    expect(e.reason).toBeUndefined();
    expect(e.retcode).toBeUndefined();
    const odd = await failure(400, { error: 'TRADE_REQUEST_ERROR', message: 'x', reason: 7, retcode: 'no' });
    expect(odd.reason).toBeUndefined();
    expect(odd.retcode).toBeUndefined();
  });

  it('the types name the codes and reasons', () => {
    expectTypeOf<'RATE_LIMITED'>().toMatchTypeOf<TagwErrorCode>();
    expectTypeOf<'IDEMPOTENCY_UNCERTAIN'>().toMatchTypeOf<TagwErrorCode>();
    expectTypeOf<'TIMEOUT'>().toMatchTypeOf<TagwErrorCode>();
    expectTypeOf<'NETWORK_ERROR'>().toMatchTypeOf<TagwErrorCode>();
    expectTypeOf<'HTTP_502'>().toMatchTypeOf<TagwErrorCode>();
    expectTypeOf<'MARKET_CLOSED'>().toMatchTypeOf<RejectReason>();
    expectTypeOf<TagwError['reason']>().toEqualTypeOf<RejectReason | undefined>();
    expectTypeOf<TagwError['retcode']>().toEqualTypeOf<number | undefined>();
    const check = (e: TagwError) => {
      // @ts-expect-error a misspelt code cannot match
      if (e.code === 'RATE_LIMITD') return 1;
      // @ts-expect-error a misspelt reason cannot match
      if (e.reason === 'MARKET_CLOSD') return 2;
      return 0;
    };
    expect(check).toBeTypeOf('function');
  });
});
