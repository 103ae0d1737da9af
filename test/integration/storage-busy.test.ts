// DATA_DIR's database locked by another process past the busy wait (busy_timeout, 5 s: a sqlite3
// shell left in a transaction, a copy tool): SQLite gives up with SQLITE_BUSY and rolls the write
// back. The client gets 503 STORAGE_BUSY with retry-after, not 500 "internal error"; the operator a
// warning naming the route; nothing of the refused write stays; once the lock is gone, it works.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { dbPath } from '../../src/store/db.js';
import { isStorageBusy, toApiError } from '../../src/errors.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { otherWriter } from '../helpers/otherWriter.js';

let t: TestGateway;
const logs: Array<{ level: string; msg: string; route?: string }> = [];

beforeAll(async () => {
  const log = createLogger('warn', {}, (line) => logs.push(JSON.parse(line) as { level: string; msg: string }));
  t = await startTestGateway({}, { log });
}, 60_000);
afterAll(async () => {
  await t?.stop();
});

describe('the database locked past its busy wait', () => {
  it('maps SQLITE_BUSY and its extended codes to 503 STORAGE_BUSY, nothing else', () => {
    for (const code of ['SQLITE_BUSY', 'SQLITE_BUSY_SNAPSHOT', 'SQLITE_LOCKED']) {
      const e = toApiError(Object.assign(new Error('database is locked'), { code }));
      expect([e.code, e.status, e.headers?.['retry-after']]).toEqual(['STORAGE_BUSY', 503, '1']);
    }
    expect(isStorageBusy(Object.assign(new Error('x'), { code: 'SQLITE_CONSTRAINT' }))).toBe(false);
    expect(toApiError(new Error('database is locked')).code).toBe('INTERNAL_ERROR');
  });

  it('a management write answers 503 STORAGE_BUSY with retry-after, keeps nothing, and works once the lock is gone', async () => {
    const keysBefore = (await t.req('GET', '/v1/keys', { headers: mgmt(t.managementKey) })).body;
    const holder = otherWriter(dbPath(t.dataDir), 6_000, 'DELETE FROM audit_log WHERE 0');
    await holder.locked;
    const refused = await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'busy' } });
    expect(refused.status, refused.text).toBe(503);
    expect(refused.body.error).toBe('STORAGE_BUSY');
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(refused.body.message).toMatch(/locked by another writer/);
    expect(logs.some((l) => l.level === 'warn' && /locked past its busy wait/.test(l.msg) && l.route === '/v1/keys')).toBe(true);
    expect(logs.some((l) => l.level === 'error')).toBe(false);
    await holder.done;
    expect((await t.req('GET', '/v1/keys', { headers: mgmt(t.managementKey) })).body).toEqual(keysBefore);
    const made = await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'after' } });
    expect(made.status, made.text).toBe(201);
  }, 30_000);
});
