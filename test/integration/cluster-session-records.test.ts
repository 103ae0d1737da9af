// Gateway sessions in PostgreSQL (src/cluster/sessionRecords.ts) against a real server and real
// SQLite files: the owner's copy is fenced by its lease, any node reads it, and the next owner's
// restore brings the live sessions and their subscriptions into its SQLite (ending one it still
// had that ended elsewhere).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { acquireLeases, type Lease } from '../../src/cluster/leases.js';
import { SessionRecords } from '../../src/cluster/sessionRecords.js';
import { createLogger } from '../../src/log.js';
import { openDb, type Db } from '../../src/store/db.js';
import { SessionStore, type SessionRow } from '../../src/store/sessions.js';
import { postgresForFile } from '../helpers/postgres.js';

const server = postgresForFile();
const dirs: string[] = [];
const dbs: Db[] = [];
afterAll(() => {
  for (const d of dbs) d.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function node(nodeId: string, leases: Map<string, Lease>): { records: SessionRecords; store: SessionStore } {
  const dir = mkdtempSync(join(tmpdir(), 'tagw-sessrec-'));
  dirs.push(dir);
  const sqlite = openDb(dir);
  dbs.push(sqlite);
  const records = new SessionRecords({
    pool: server.pool, sqlite, nodeId, keeper: { leaseOf: (id) => leases.get(id) }, clock: { now: () => 1_700_000_000_000 }, log: createLogger('silent'),
  });
  return { records, store: new SessionStore(sqlite) };
}

const row = (hash: string, accountId: string): SessionRow => ({
  handle_hash: hash, account_id: accountId, customer_id: 'c1', platform: 'P5', handle_sealed: `sealed-${hash}`, state: 'live', connected_at: 1_000, invalidated_at: null,
});

describe('gateway session records', () => {
  it('the owner copies an account\'s live sessions under its lease; a stale owner writes nothing; the next owner restores them', async () => {
    const acct = 'sess-acct-1';
    const aLeases = new Map<string, Lease>();
    const bLeases = new Map<string, Lease>();
    const a = node('sess-a', aLeases);
    const b = node('sess-b', bLeases);
    const [la] = await acquireLeases(server.pool, 'sess-a', [acct], 600_000);
    aLeases.set(acct, la!);

    a.store.upsert(row('h1', acct));
    a.store.setSubscriptions('h1', { 'quote:BTCUSD': { kind: 'quote', symbol: 'BTCUSD', intervalMs: 0 } });
    expect(await a.records.sync(acct)).toBe('written');
    expect(await b.records.byHash('h1')).toEqual(row('h1', acct));
    // Not the owner (no lease here): nothing is written.
    expect(await b.records.sync(acct)).toBe('fenced');

    // b takes the account over (a paused past its lease): a's later copy is fenced and changes nothing.
    await server.pool.query(`UPDATE account_leases SET expires_at = now() - interval '1 millisecond' WHERE account_id = $1`, [acct]);
    const [lb] = await acquireLeases(server.pool, 'sess-b', [acct], 600_000);
    bLeases.set(acct, lb!);
    a.store.upsert({ ...row('h1', acct), state: 'invalidated', invalidated_at: 2_000 });
    expect(await a.records.sync(acct)).toBe('fenced');
    expect(await b.records.byHash('h1')).toBeDefined();

    // b had an older session of the account in its SQLite, ended since: restore ends it there.
    b.store.upsert(row('h0', acct));
    expect(await b.records.restore([acct])).toBe(1);
    expect(b.store.liveOf(acct).map((r) => r.handle_hash)).toEqual(['h1']);
    expect(b.store.byHash('h0')?.state).toBe('invalidated');
    expect(b.store.subscriptions('h1')).toEqual([{ key: 'quote:BTCUSD', spec: { kind: 'quote', symbol: 'BTCUSD', intervalMs: 0 } }]);

    // The new owner's Disconnect (no live session left in its SQLite) ends it for every node.
    b.store.upsert({ ...row('h1', acct), state: 'invalidated', invalidated_at: 3_000 });
    expect(await b.records.sync(acct)).toBe('written');
    expect(await a.records.byHash('h1')).toBeUndefined();
  });
});
