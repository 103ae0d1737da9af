// An account host in this thread, as a shard runs it (real SQLite in a temp dir, the embedded
// simulator), with one bound account, for tests of the shard's trade path without the threads.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { SecretBox } from '../../src/crypto/secretBox.js';
import { createLogger } from '../../src/log.js';
import type { TradeReply } from '../../src/runtime/hosts/accountCommands.js';
import { createAccountHost } from '../../src/runtime/hosts/accounts.js';
import type { ActorHost } from '../../src/runtime/hosts/context.js';
import { shardSettings } from '../../src/runtime/settings.js';
import { openDb, type Db } from '../../src/store/db.js';
import type { CommitGroup } from '../../src/store/commitGroup.js';
import { systemClock } from '../../src/util/clock.js';

export interface Cleanup {
  hosts: ActorHost[];
  dbs: { close(): void }[];
  dirs: string[];
}

/** What a test opened, stopped and removed after each test (hosts, then databases, then dirs). */
export function useCleanup(): Cleanup {
  const c: Cleanup = { hosts: [], dbs: [], dirs: [] };
  afterEach(() => {
    for (const h of c.hosts.splice(0)) h.stop();
    for (const d of c.dbs.splice(0)) d.close();
    for (const d of c.dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  return c;
}

export function tempDir(c: Cleanup, prefix: string): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  c.dirs.push(d);
  return d;
}

const key = randomBytes(32);
export const tradingAccountId = '66666666-6666-4666-8666-666666666666';

/** The host over `dir`'s database (created, or as a crash left it), its account bound. */
export async function bootTradingHost(c: Cleanup, dir: string, commitGroup?: CommitGroup): Promise<{ host: ActorHost; db: Db }> {
  const db = openDb(dir);
  c.dbs.push(db);
  const host = createAccountHost({
    shard: 0, shards: 1, db, log: createLogger('silent'), settings: shardSettings({ secretKeyHex: key.toString('hex') }), clock: systemClock, emit: () => {}, owns: () => true,
    ...(commitGroup ? { commitGroup } : {}),
  });
  c.hosts.push(host);
  host.rehydrate();
  await host.handlers['account.bind']!({ accountId: tradingAccountId, customerId: 'c', server: 'Sim-P5-Demo', login: 'chunks-1', passwordEnc: new SecretBox(key).seal('pw', tradingAccountId) });
  return { host, db };
}

/** An idempotent 0.01 BTCUSD buy with client order id `id`. */
export const sendOrder = (h: ActorHost, id: string) =>
  Promise.resolve(h.handlers['account.trade']!({ accountId: tradingAccountId, op: 'OrderSend', args: { symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 }, clientOrderId: id })) as Promise<TradeReply>;

/** Tickets of the account's open positions and orders. */
export const openTickets = async (h: ActorHost) => (await h.handlers['account.op']!({ accountId: tradingAccountId, op: 'OpenedOrdersTickets', args: {} })) as number[];

/** The phase of the idempotency record of `id` as `db` sees it (committed rows only, for another connection). */
export const phaseOf = (db: { prepare(sql: string): { get(...a: unknown[]): unknown } }, id: string) =>
  (db.prepare('SELECT phase FROM idempotency WHERE client_order_id = ?').get(id) as { phase: string } | undefined)?.phase;
