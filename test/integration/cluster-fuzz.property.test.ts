// The HTTP surface of a cluster under hostile input (developers' guide, "Bad input"; SPEC §7), where
// http-fuzz.property.test.ts covers one node: two nodes (bridge mode, real NATS and PostgreSQL), and
// requests with hostile parameters and bodies (wrong types, NaN/Infinity, huge and negative numbers,
// unicode, overlong, duplicated) sent to an account's owner and to the other node, which forwards
// them over NATS. Property: every answer of either node is a JSON error of a spec status (never
// INTERNAL_ERROR) or a success, holds no secret, and the other node answers what the owner answers
// (the same status and code: forwarding loses nothing, and an order's retry through the other node
// is the owner's replay). Afterwards both nodes take a valid order.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_STATUS, type ErrorCode } from '../../src/errors.js';
import { startClusterGateways, useClusterEngines } from '../helpers/cluster.js';
import { TEST_MANAGEMENT_KEY, type TestGateway } from '../helpers/gateway.js';
import { hostileString, jsonHostile, NUMERIC_EDGE, sometimes } from '../helpers/hostileValues.js';
import { until } from '../helpers/until.js';

type Json = Record<string, any>;
const BROKER_PW = 'Br0ker-Pw-clusterfuzz-51c2';
/** SPEC §7's statuses and the HTTP layer's own (405, 408, 413, 415); 500 only as TERMINAL_ERROR. */
const ERROR_STATUSES = new Set([400, 401, 402, 403, 404, 405, 408, 409, 413, 415, 422, 429, 500, 501, 503]);
const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : (Math.random() * 2 ** 31) | 0;

const engines = useClusterEngines();
let nodes: TestGateway[] = [];
let owner: TestGateway;
let other: TestGateway;
let key = '';
let account = '';
let handle = '';
let cid = 0;
const mk = { authorization: `Bearer ${TEST_MANAGEMENT_KEY}` };

beforeAll(async () => {
  // Limits out of the way: a 429 on one node only would be no disagreement of theirs.
  nodes = await startClusterGateways(engines, ['fuzz-a', 'fuzz-b'], {
    shards: 1, leaseMs: 6_000, perNode: () => ({ authFailLimit: 1_000_000, keyRequestsPerSec: 1_000_000, keyOrdersPerSec: 1_000_000 }),
  });
  key = (await nodes[0]!.req('POST', '/v1/keys', { headers: mk, body: { label: 'fuzz' } })).body.key as string;
  const bound = await nodes[0]!.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'cluster-fuzz', password: BROKER_PW, server: 'Sim-P5-Demo' } });
  expect(bound.status, bound.text).toBe(200);
  account = bound.body.id as string;
  await until(() => nodes.some((n) => n.gw.cluster!.owned().includes(account)), 'the account to be held');
  const at = nodes.findIndex((n) => n.gw.cluster!.owned().includes(account));
  [owner, other] = [nodes[at]!, nodes[1 - at]!];
  const c = await other.req('POST', '/v1/connect', { headers: mk, body: { brokerAccountId: account } });
  expect(c.status, c.text).toBe(200);
  handle = c.body.handle as string;
  await until(async () => (await other.req('GET', `/AccountSummary?id=${account}`, { headers: { 'x-api-key': key } })).status === 200, 'the account to answer through the other node');
}, 60_000);

afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
});

/** Operations whose every answer both nodes must agree on, with plausible values per parameter
 *  (the first one a value the route takes). `id`/`handle` are added by the family. */
const OPS: Array<{ path: string; family: 'classic' | 'proxy'; params: Record<string, string[]> }> = [
  { path: '/AccountSummary', family: 'classic', params: {} },
  { path: '/GetQuote', family: 'classic', params: { symbol: ['BTCUSD', 'NOPE'], cached: ['0', '1'] } },
  { path: '/GetQuoteMany', family: 'classic', params: { symbols: ['BTCUSD,EURUSD', ',,'] } },
  { path: '/SymbolParams', family: 'classic', params: { symbol: ['EURUSD', 'eurusd'] } },
  { path: '/OpenedOrder', family: 'classic', params: { ticket: ['1', '-5'] } },
  { path: '/OrderHistory', family: 'classic', params: { from: ['2020-01-01T00:00:00', '2020-13-45T99:99:99'], to: ['2030-01-01T00:00:00', '1970-01-01T00:00:00'] } },
  { path: '/RequiredMargin', family: 'classic', params: { symbol: ['BTCUSD'], lots: ['0.01', '-1'], type: ['Buy', '7'], price: ['60000', '0'] } },
  // Each with a fresh clientOrderId: through the other node it is the owner's replay.
  { path: '/OrderSend', family: 'classic', params: { symbol: ['BTCUSD', 'NOPE'], operation: ['Buy', 'BuyStopLimit', '99'], volume: ['0.01', '0', '-0.01', '100000'], price: ['60000', '-1'], stoploss: ['0', '1.0'], takeprofit: ['0', '2.0'], comment: ['c', 'é😀'] } },
  { path: '/v1/proxy/GetQuote', family: 'proxy', params: { symbol: ['BTCUSD', 'NOPE'], msNotOlder: ['0', '-1'] } },
  { path: '/v1/proxy/SymbolParamsMany', family: 'proxy', params: { symbols: ['EURUSD', 'EURUSD,GBPUSD'], limit: ['1000', '0'], filter: ['digits', 'nope'] } },
  { path: '/v1/proxy/PriceHistory', family: 'proxy', params: { symbol: ['EURUSD'], from: ['2020-01-01T00:00:00'], to: ['2020-01-02T00:00:00'], timeFrame: ['1', '60', '0'], timeoutSeconds: ['5', '-1'] } },
  { path: '/v1/proxy/OpenedOrders', family: 'proxy', params: { sort: ['0', '9'], ascending: ['true', 'yes'] } },
  { path: '/v1/proxy/RequiredMargin', family: 'proxy', params: { symbol: ['BTCUSD'], lots: ['0.01', '-1'], type: ['0', 'Buy'], price: ['60000'] } },
  { path: '/v1/proxy/EquityHistory', family: 'proxy', params: { from: ['2020-01-01T00:00:00', 'x'], excludeSameBars: ['true', '2'] } },
];

/** A near-valid request has few hostile values, so it gets past validation into the owner's handlers more often. */
const value = (plausible: string[], nearValid: boolean) => fc.oneof(
  { weight: nearValid ? 30 : 4, arbitrary: fc.constantFrom(...plausible) },
  { weight: 2, arbitrary: hostileString },
  { weight: 1, arbitrary: fc.constantFrom(...NUMERIC_EDGE) },
);

const request = fc.tuple(fc.constantFrom(...OPS), fc.boolean()).chain(([op, nearValid]) => fc.record({
  op: fc.constant(op),
  // Each parameter mostly as the route takes it (so requests reach the owner's handlers), sometimes
  // hostile, missing or twice.
  query: fc.tuple(...Object.entries(op.params).map(([name, plausible]) => fc.oneof(
    { weight: nearValid ? 20 : 4, arbitrary: value(plausible, nearValid).map((v): Array<[string, string]> => [[name, v]]) },
    { weight: 1, arbitrary: fc.constant<Array<[string, string]>>([]) },
    { weight: 1, arbitrary: fc.tuple(value(plausible, nearValid), value(plausible, nearValid)).map(([a, b]): Array<[string, string]> => [[name, a], [name, b]]) },
  ))).map((parts) => parts.flat()),
  extra: sometimes(fc.tuple(fc.constantFrom('stopLoss', 'x', 'apiKey', '__proto__'), hostileString), 6),
  // The account (or session) itself now and then spoilt: unknown, twice, not a UUID.
  target: fc.oneof({ weight: 8, arbitrary: fc.constant('own') }, { weight: 1, arbitrary: fc.constantFrom('random', 'twice') }, { weight: 1, arbitrary: hostileString }),
}));

function urlOf(r: { op: (typeof OPS)[number]; query: Array<[string, string]>; extra: [string, string] | undefined; target: string }): string {
  const q = new URLSearchParams();
  const own = r.op.family === 'classic' ? account : handle;
  const name = r.op.family === 'classic' ? 'id' : 'handle';
  if (r.target === 'own') q.append(name, own);
  else if (r.target === 'random') q.append(name, crypto.randomUUID());
  else if (r.target === 'twice') { q.append(name, own); q.append(name, crypto.randomUUID()); }
  else q.append(name, r.target.replace(/[\ud800-\udfff]/g, '\ufffd'));
  for (const [k, v] of r.query) q.append(k, v.replace(/[\ud800-\udfff]/g, '\ufffd'));
  if (r.extra) q.append(r.extra[0], r.extra[1].replace(/[\ud800-\udfff]/g, '\ufffd'));
  if (r.op.path === '/OrderSend') q.append('clientOrderId', `cfz-${SEED}-${cid++}`);
  return `${r.op.path}?${q}`;
}

const secrets = () => [key, TEST_MANAGEMENT_KEY, BROKER_PW];

/** One answer's own checks; returns its status and code. */
function holds(node: string, url: string, r: { status: number; text: string; headers: Headers }): string {
  const what = `${node}: GET ${url.slice(0, 300)} answered ${r.status}: ${r.text.slice(0, 300)} (seed ${SEED})`;
  for (const s of secrets()) expect(r.text.includes(s) || [...r.headers.values()].some((v) => v.includes(s)), `a secret in the answer: ${what}`).toBe(false);
  if (r.status < 400) return String(r.status);
  expect(r.headers.get('content-type'), what).toContain('application/json');
  let body: Json;
  try {
    body = JSON.parse(r.text) as Json;
  } catch {
    throw new Error(`not JSON: ${what}`);
  }
  expect(ERROR_STATUSES.has(r.status), what).toBe(true);
  expect(body.error, what).not.toBe('INTERNAL_ERROR');
  expect(typeof body.message, what).toBe('string');
  expect(ERROR_STATUS[body.error as ErrorCode], `code and status disagree: ${what}`).toBe(r.status);
  return `${r.status} ${body.error}`;
}

async function send(n: TestGateway, url: string): Promise<{ status: number; text: string; headers: Headers }> {
  const res = await fetch(n.url + url, { headers: { 'x-api-key': key }, signal: AbortSignal.timeout(15_000) });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

describe('a cluster under hostile input', () => {
  it('answers each request on either node with a JSON error of a spec status or a success, and the other node answers as the owner', async () => {
    const seen = new Map<string, number>();
    await fc.assert(fc.asyncProperty(request, async (r) => {
      const url = urlOf(r);
      const a = holds('owner', url, await send(owner, url));
      const b = holds('other node', url, await send(other, url));
      seen.set(a, (seen.get(a) ?? 0) + 1);
      expect(b, `the other node answered ${b}, the owner ${a}: GET ${url.slice(0, 300)} (seed ${SEED})`).toBe(a);
    }), { numRuns: Number(process.env.FUZZ_RUNS ?? 150), seed: SEED });
    if (process.env.FUZZ_STATS) console.log([...seen].sort((x, y) => y[1] - x[1]));
    // The search reached the handlers as well as the refusals.
    expect(seen.get('200'), [...seen.keys()].join(', ')).toBeGreaterThan(0);
    expect([...seen.keys()].some((k) => k.startsWith('400 ')), [...seen.keys()].join(', ')).toBe(true);
  }, 90_000);

  it('answers tenancy writes with hostile bodies on either node with a JSON error of a spec status or a success', async () => {
    const body = fc.record({
      path: fc.constantFrom('/v1/keys', '/v1/broker-accounts', '/v1/seats', '/v1/connect'),
      fields: fc.dictionary(fc.constantFrom('label', 'readOnly', 'accountScoped', 'platform', 'user', 'password', 'server', 'privateHosting', 'region', 'brokerAccountId'), jsonHostile, { maxKeys: 4 }),
      raw: sometimes(fc.constantFrom('{', '{"label":', '[1,', '\ufeff{}', `{"label":"${'y'.repeat(70_000)}"}`), 5),
      on: fc.constantFrom(0, 1),
    });
    await fc.assert(fc.asyncProperty(body, async (b) => {
      const n = nodes[b.on]!;
      const res = await fetch(n.url + b.path, { method: 'POST', headers: { ...mk, 'content-type': 'application/json' }, body: b.raw ?? JSON.stringify(b.fields), signal: AbortSignal.timeout(15_000) });
      holds(`node ${b.on}`, `POST ${b.path} ${JSON.stringify(b.raw ?? b.fields).slice(0, 200)}`, { status: res.status, text: await res.text(), headers: res.headers });
    }), { numRuns: Number(process.env.FUZZ_BODY_RUNS ?? 60), seed: SEED });
  }, 90_000);

  it('both nodes take a valid order afterwards', async () => {
    for (const n of nodes) {
      const o = await send(n, `/OrderSend?id=${account}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=cfz-after-${SEED}-${cid++}`);
      expect([200, 400], o.text).toContain(o.status);
      if (o.status === 400) expect(JSON.parse(o.text).error, o.text).toBe('TRADE_REQUEST_ERROR');
    }
  });
});
