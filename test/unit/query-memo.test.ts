import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { parseQuery } from '../../src/http/request.js';
import { MEMO_MAX_ENTRIES, MEMO_MAX_QUERY, QueryMemo } from '../../src/http/queryMemo.js';
import { qList, qNumber, qString } from '../../src/http/schemas.js';
import { methodsByPath, validatedQuery } from '../../src/http/app.js';

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
