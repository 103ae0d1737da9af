import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { parseQuery, splitParam } from '../../src/http/request.js';
import { MEMO_MAX_ENTRIES, MEMO_MAX_QUERY, QueryMemo } from '../../src/http/queryMemo.js';
import { ORDER_SEND_VARIES, tradeQuery } from '../../src/http/routes/classic.js';
import { qList, qNumber, qString } from '../../src/http/schemas.js';
import { methodsByPath } from '../../src/http/allowedMethods.js';
import { queryError, validatedQuery } from '../../src/http/validation.js';

function counted() {
  let runs = 0;
  const schema = z.object({
    id: z.preprocess((v) => {
      runs++;
      return v;
    }, qString()),
    volume: qNumber().optional(),
    symbol: qList().optional(),
  });
  return { memo: new QueryMemo(schema), runs: () => runs };
}
const parse = (m: QueryMemo, raw: string) => m.parse(raw, () => parseQuery(raw));

describe('QueryMemo (validated queries by raw string)', () => {
  it('validates a repeated query once and hands out the same frozen result', () => {
    const { memo, runs } = counted();
    const a = parse(memo, 'id=abc&volume=0.5&symbol=EURUSD,GBPUSD');
    const b = parse(memo, 'id=abc&volume=0.5&symbol=EURUSD,GBPUSD');
    expect(a).toEqual({ ok: true, data: { id: 'abc', volume: 0.5, symbol: ['EURUSD', 'GBPUSD'] } });
    expect(b.ok && a.ok && b.data === a.data).toBe(true);
    expect(runs()).toBe(1);
    const data = (a as { data: { volume: number; symbol: string[] } }).data;
    expect(() => { data.volume = 2; }).toThrow(TypeError);
    expect(() => data.symbol.push('X')).toThrow(TypeError);
  });

  it('keeps no failure: a bad query is refused every time', () => {
    const { memo, runs } = counted();
    expect(parse(memo, 'id=abc&volume=0x1').ok).toBe(false);
    expect(parse(memo, 'id=abc&volume=0x1').ok).toBe(false);
    expect(runs()).toBe(2);
    expect(memo.size).toBe(0);
  });

  it('splits the raw string only on a miss', () => {
    const { memo } = counted();
    let splits = 0;
    const raw = 'id=abc';
    memo.parse(raw, () => (splits++, parseQuery(raw)));
    memo.parse(raw, () => (splits++, parseQuery(raw)));
    expect(splits).toBe(1);
  });

  it('keeps nothing for a route whose query carries a secret', () => {
    const memo = new QueryMemo(z.object({ user: qString(), password: qString() }), { keep: false });
    const raw = 'user=1&password=hunter2';
    expect(memo.parse(raw, () => parseQuery(raw))).toEqual({ ok: true, data: { user: '1', password: 'hunter2' } });
    expect(memo.size).toBe(0);
  });

  it('is bounded: long strings are not kept and a full map starts over', () => {
    const { memo } = counted();
    expect(parse(memo, `id=${'x'.repeat(MEMO_MAX_QUERY)}`).ok).toBe(true);
    expect(memo.size).toBe(0);
    for (let i = 0; i <= MEMO_MAX_ENTRIES; i++) parse(memo, `id=a${i}`);
    expect(memo.size).toBeLessThanOrEqual(MEMO_MAX_ENTRIES);
    expect(memo.size).toBeGreaterThan(0);
  });
});

describe('QueryMemo with a varying parameter (/OrderSend and its clientOrderId)', () => {
  const schema = tradeQuery('OrderSend');
  /** What the route answers without any memo: the whole query validated, its error as the 400 says it. */
  const direct = (raw: string) => {
    const r = schema.safeParse(parseQuery(raw));
    return r.success ? { ok: true, data: r.data } : { ok: false, error: queryError(r.error).message };
  };
  const viaMemo = (memo: QueryMemo, raw: string) => {
    const r = parse(memo, raw);
    return r.ok ? { ok: true, data: r.data } : { ok: false, error: queryError(r.error).message };
  };

  it('validates the rest of a repeated order once, and each clientOrderId by itself', () => {
    let runs = 0;
    const counting = z.preprocess((v) => (runs++, v), schema);
    const memo = new QueryMemo(counting, { varies: ORDER_SEND_VARIES });
    const rest = 'id=11111111-1111-4111-8111-000000000001&symbol=BTCUSD&operation=Buy&volume=0.01';
    expect(viaMemo(memo, `${rest}&clientOrderId=a1`)).toEqual(direct(`${rest}&clientOrderId=a1`));
    expect(viaMemo(memo, `${rest}&clientOrderId=a2`)).toEqual(direct(`${rest}&clientOrderId=a2`));
    expect(viaMemo(memo, `clientOrderId=a%2D3&${rest}`)).toEqual(direct(`clientOrderId=a%2D3&${rest}`));
    expect(viaMemo(memo, rest)).toEqual(direct(rest));
    expect(runs).toBe(1);
    // A clientOrderId the route refuses is refused on a hit too, with the route's message.
    const bad = viaMemo(memo, `${rest}&clientOrderId=`);
    expect(bad).toEqual(direct(`${rest}&clientOrderId=`));
    expect(bad.ok).toBe(true); // '' is a string: the shard answers for its format
    expect(runs).toBe(1);
  });

  it.each([
    ['taken as it is (anyString)', ORDER_SEND_VARIES],
    ['run through its schema', { ...ORDER_SEND_VARIES, anyString: false }],
  ])('answers every query exactly as validating the whole of it does, hit or miss: the varying parameter %s', (_, varies) => {
    const id = fc.constantFrom('id=11111111-1111-4111-8111-000000000001', 'accountId=11111111-1111-4111-8111-000000000001', 'id=', 'id=x&accountId=y');
    const other = fc.constantFrom(
      'symbol=BTCUSD', 'symbol=EURUSD&symbol=GBPUSD', 'operation=Buy', 'operation=7', 'operation=', 'volume=0.01', 'volume=abc', 'lots=0.02',
      'lots=0.01&volume=0.02', 'comment=hello%20there', 'comment=a+b', 'magic=-1', 'magic=12', 'stopLoss=1', 'stoploss=1', 'expiration=2026-02-30',
      'stoplimit=1&stopLimitPrice=2', 'client%4FrderId=zz', 'clientorderid=q', 'price=1e3', '', 'comment=clientOrderId', 'comment=%26clientOrderId%3Dx', 'clientOrderIdX=1', 'comment', 'client%4FrderId=c1', 'comment=clientOrderId=c1',
    );
    const coid = fc.constantFrom('clientOrderId=c1', 'clientOrderId=c2', 'clientOrderId=c%201', 'clientOrderId', 'clientOrderId=', 'clientOrderId=c1&clientOrderId=c1', 'clientOrderId=c1&clientOrderId=c2', 'clientOrderId=%ZZ');
    // Mostly a valid order, so that rests are kept and later queries hit them.
    const rest = fc.tuple(id, fc.array(other, { maxLength: 2 })).map(([i, more]) => [i, 'symbol=BTCUSD', 'operation=Buy', 'volume=0.01', ...more] as const);
    const shuffled = rest.chain((parts) => fc.shuffledSubarray([...parts], { minLength: parts.length }));
    const query = fc.tuple(fc.integer({ min: 0, max: 2 }), fc.option(coid, { nil: undefined }), fc.integer({ min: 0, max: 5 }));
    fc.assert(fc.property(fc.array(shuffled, { minLength: 1, maxLength: 3 }), fc.array(query, { minLength: 1, maxLength: 25 }), (rests, queries) => {
      const memo = new QueryMemo(schema, { varies });
      for (const [which, c, at] of queries) {
        const parts: string[] = [...rests[which % rests.length]!];
        if (c !== undefined) parts.splice(at % (parts.length + 1), 0, c);
        const raw = parts.join('&');
        expect(viaMemo(memo, raw), raw).toEqual(direct(raw));
      }
    }), { numRuns: 600 });
  });

  it('splits only a query where the parameter comes once and no other key is percent-encoded', () => {
    expect(splitParam('a=1&clientOrderId=x%2Dy&b=2', 'clientOrderId')).toEqual({ rest: 'a=1&b=2', value: 'x-y' });
    expect(splitParam('a=1', 'clientOrderId')).toEqual({ rest: 'a=1', value: undefined });
    expect(splitParam('clientOrderId', 'clientOrderId')).toEqual({ rest: '', value: '' });
    expect(splitParam('clientOrderIdX=1&a=2', 'clientOrderId')).toEqual({ rest: 'clientOrderIdX=1&a=2', value: undefined });
    expect(splitParam('clientOrderId=1&clientOrderId=1', 'clientOrderId')).toBeUndefined();
    expect(splitParam('client%4FrderId=1&clientOrderId=2', 'clientOrderId')).toBeUndefined();
    expect(splitParam('a=%41&clientOrderId=2', 'clientOrderId')).toEqual({ rest: 'a=%41', value: '2' });
  });
});

describe('validatedQuery (the HTTP layer over the memo)', () => {
  const request = (raw: string) => {
    const r = { rawQuery: raw, splits: 0, get query() { this.splits++; return parseQuery(raw); } };
    return r;
  };

  it('does not split the raw query of a request the memo already knows', () => {
    const { memo } = counted();
    const first = request('id=abc&volume=1');
    expect(validatedQuery(first, memo)).toEqual({ id: 'abc', volume: 1 });
    expect(first.splits).toBe(1);
    const again = request('id=abc&volume=1');
    expect(validatedQuery(again, memo)).toEqual({ id: 'abc', volume: 1 });
    expect(again.splits).toBe(0);
  });

  it('answers a bad query with a 400 naming the parameter, and a route without a schema with the split query', () => {
    const { memo } = counted();
    expect(() => validatedQuery(request('id=abc&volume=x'), memo)).toThrow(expect.objectContaining({ status: 400, message: expect.stringContaining("'volume'") }));
    expect(validatedQuery(request('a=1&a=2'), undefined)).toEqual({ a: ['1', '2'] });
  });
});

describe('methodsByPath (405 or 404 in the fallback)', () => {
  const route = (method: string, path: string) => ({ method, path }) as never;
  const allowed = methodsByPath([route('get', '/v1/seats'), route('post', '/v1/seats'), route('get', '/v1/seats/:id'), route('delete', '/v1/keys/:keyId'), route('any', '/v1/proxy/:op'), route('get', '/a.b')]);

  it('lists the methods of every route whose path matches, parameters as one segment', () => {
    expect(allowed('/v1/seats')).toEqual(['GET', 'POST']);
    expect(allowed('/v1/seats/s1')).toEqual(['GET']);
    expect(allowed('/v1/keys/k1')).toEqual(['DELETE']);
  });

  it('matches nothing else: other depths, other literals, regex characters taken literally, and any-method routes', () => {
    expect(allowed('/v1/seats/s1/x')).toEqual([]);
    expect(allowed('/v1/keys')).toEqual([]);
    expect(allowed('/aXb')).toEqual([]);
    expect(allowed('/a.b')).toEqual(['GET']);
    expect(allowed('/v1/proxy/Ping')).toEqual([]);
  });
});
