// The README tour with the SDK: a key, an account, a few calls, an order, some stream frames, the order closed.
//
//   eval "$(node --import tsx examples/tour.ts)"    # steps on stderr; exports TAGW_URL, TAGW_KEY, TAGW_ACCOUNT
//
// Reads the management key from GATEWAY_MANAGEMENT_KEY or DATA_DIR/bootstrap.json (./data by default);
// PORT and DATA_DIR as the gateway reads them.
// In your own project: import { TagwClient } from 'tagw/client'.
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import WebSocket from 'ws';
import { TagwClient, TagwError } from '../src/client/index.js';

export async function tour(baseUrl: string, managementKey: string, say: (line: string) => void): Promise<{ key: string; accountId: string }> {
  const admin = new TagwClient({ baseUrl, managementKey });
  const earlier = (await admin.keys.list()).keys.find((k) => k.label === 'tour' && !k.revoked);
  const { key } = earlier                                                           // shown once; only a hash is kept
    ? await admin.keys.replace(earlier.id, { label: 'tour' })                       // run again: the last run's key is revoked
    : await admin.keys.create({ label: 'tour' });
  const client = new TagwClient({ baseUrl, apiKey: key, WebSocket });
  const { id } = await client.connectEx({ user: 'alice', password: 's3cret', server: 'Sim-P5-Demo' });
  const acct = client.account(id);
  const summary = await acct.AccountSummary();
  say(`account ${id}: balance ${summary.balance} ${summary.currency}`);
  const q = await acct.GetQuote({ symbol: 'BTCUSD' });
  say(`BTCUSD ${q.bid} / ${q.ask}`);
  const order = await acct.OrderSend({ symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 });   // clientOrderId made by the SDK
  say(`order ${order.ticket} ${order.state} at ${order.openPrice}`);
  let n = 0;
  for await (const f of client.stream(id, { symbols: ['BTCUSD'] })) {
    say(`stream: ${f.type}${f.type === 'QUOTE' ? ` ${f.data.bid} / ${f.data.ask}` : ''}`);
    if (++n === 5) break;                                                             // leaving the loop closes the stream
  }
  const session = await client.connect(id);                                          // the gateway routes: a session handle
  const s = (await session.op.AccountSummary()) as { equity: number };
  say(`gateway session ${session.handle.slice(0, 12)}...: equity ${s.equity}`);
  const closed = await acct.OrderClose({ ticket: order.ticket });                     // the position closed: nothing left open
  const deal = closed.deals[0];
  say(`closed: deal ${deal?.ticket} at ${deal?.price}, profit ${deal?.profit}`);
  return { key, accountId: id };
}

if (process.argv[1] && import.meta.url === new URL(process.argv[1], 'file://').href) {
  const baseUrl = process.env.TAGW_URL ?? `http://127.0.0.1:${process.env.PORT ?? 8080}`;
  const file = resolve(process.env.DATA_DIR ?? 'data', 'bootstrap.json');
  const mk = process.env.GATEWAY_MANAGEMENT_KEY ?? (existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as { managementKey: string }).managementKey : undefined);
  const fail = (why: string): never => { console.error(`tour: ${why}`); process.exit(1); };   // one line, not a stack
  if (!mk) fail(`no management key: ${file} not found (export DATA_DIR as the gateway's, or GATEWAY_MANAGEMENT_KEY)`);
  const { key, accountId } = await tour(baseUrl, mk!, (l) => console.error(l)).catch((e: unknown) => {
    if (!(e instanceof TagwError)) throw e;
    return fail(e.code === 'NETWORK_ERROR' ? `no gateway answers at ${baseUrl} (NETWORK_ERROR): start it with npm start, and export PORT (and DATA_DIR) as you started it` : `${e.status} ${e.code}: ${e.message}`);
  });
  console.log(`export TAGW_URL=${baseUrl} TAGW_KEY=${key} TAGW_ACCOUNT=${accountId}`);
}
