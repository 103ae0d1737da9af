// A restart reads bound accounts a page at a time (the shard's background restore, the start-up
// check of sealed passwords): every live binding exactly once, in seat id order, removed seats
// left out; the password check stops at the first password that opens and still refuses a key
// that opens none, counting them all.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config.js';
import { SecretBox } from '../../src/crypto/secretBox.js';
import { createLogger } from '../../src/log.js';
import { checkSealedPasswords } from '../../src/startupChecks.js';
import { AccountStore } from '../../src/store/accounts.js';
import { openDb, type Db } from '../../src/store/db.js';
import { TenancyStore } from '../../src/store/tenancy.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A database with `n` bound accounts, passwords sealed with `key`; the seats in `removed` are removed. */
function withAccounts(n: number, key: Buffer, removed: Set<number> = new Set()): { db: Db; ids: string[] } {
  const dir = mkdtempSync(join(tmpdir(), 'tagw-accounts-'));
  dirs.push(dir);
  const db = openDb(dir);
  const tenancy = new TenancyStore(db);
  const store = new AccountStore(db);
  const box = new SecretBox(key);
  tenancy.createCustomer('c1', 'c1', 1);
  const ids: string[] = [];
  db.transaction(() => {
    for (let i = 0; i < n; i++) {
      const id = `seat-${String(i).padStart(5, '0')}`;
      tenancy.insertSeat({ id, customer_id: 'c1', private_hosting: 0, region: null, created_at: 1 });
      store.upsert({ seat_id: id, customer_id: 'c1', platform: 'P5', server: 'Sim-P5-Demo', login: `l${i}`, password_enc: box.seal('pw', id), build: null, created_at: 1, updated_at: 1 });
      if (removed.has(i)) tenancy.removeSeat(id, 'c1', 2);
      else ids.push(id);
    }
  })();
  return { db, ids };
}

describe('bound accounts read in pages', () => {
  it('livePage: every live binding once, in seat id order, across pages; removed seats left out', () => {
    const { db, ids } = withAccounts(600, randomBytes(32), new Set([0, 255, 256, 599]));
    const store = new AccountStore(db);
    const seen: string[] = [];
    let after = '';
    for (let page = store.livePage(after, 256); page.length > 0; page = store.livePage(after, 256)) {
      seen.push(...page.map((r) => r.seat_id));
      after = page[page.length - 1]!.seat_id;
    }
    expect(seen).toEqual(ids);
    expect(seen).toEqual(store.live().map((r) => r.seat_id).sort());
    db.close();
  });

  it('a key that opens none of the passwords is refused with all of them counted, past the first page', () => {
    const { db } = withAccounts(300, randomBytes(32));
    const config = { dataDir: '/x', secretKeyReset: false } as Config;
    expect(() => checkSealedPasswords(db, randomBytes(32), config, createLogger('silent'))).toThrow(/opens none of the 300 broker passwords/);
    expect(() => checkSealedPasswords(db, randomBytes(32), { ...config, secretKeyReset: true }, createLogger('silent'))).not.toThrow();
    db.close();
  });

  it('the right key: the check reads one page, however many accounts there are', () => {
    const key = randomBytes(32);
    const { db } = withAccounts(600, key);
    const store = AccountStore.prototype;
    const livePage = store.livePage;
    let pages = 0;
    store.livePage = function (this: AccountStore, after: string, limit: number) {
      pages++;
      return livePage.call(this, after, limit);
    };
    try {
      checkSealedPasswords(db, key, { dataDir: '/x', secretKeyReset: false } as Config, createLogger('silent'));
    } finally {
      store.livePage = livePage;
    }
    expect(pages).toBe(1);
    db.close();
  });
});
