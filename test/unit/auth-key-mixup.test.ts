// A key of the other kind in the wrong place (the README tour's $MK sent as x-api-key, a bot's API
// key sent to a management route) is still 401 INVALID_API_KEY, a failed authentication, but the
// message says which kind the route takes instead of "invalid or revoked", which sent a newcomer
// looking for a revocation that never happened. Only a holder of the whole key value learns its kind.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { Authenticator } from '../../src/auth/authenticator.js';
import { generateKey, hashSecret } from '../../src/auth/keys.js';
import { ApiError } from '../../src/errors.js';
import { openDb } from '../../src/store/db.js';
import { TenancyStore } from '../../src/store/tenancy.js';

const dir = mkdtempSync(join(tmpdir(), 'tagw-key-mixup-'));
const db = openDb(dir);
afterAll(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const MK = 'key-mixup-test-management-key-0123';
const store = new TenancyStore(db);
store.createCustomer('c1', 'operator', 0);
const api = generateKey('api');
store.insertKey({ id: api.id, customer_id: 'c1', kind: 'api', hash: hashSecret(api.secret), label: 'bot', read_only: 0, account_scoped: 0, seat_id: null, created_at: 0 });
const auth = new Authenticator(store, { value: MK, customerId: 'c1' });

function refusal(f: () => unknown): ApiError {
  try {
    f();
  } catch (e) {
    if (e instanceof ApiError) return e;
    throw e;
  }
  throw new Error('not refused');
}

it('the management key as x-api-key: 401 INVALID_API_KEY saying the route takes an API key', () => {
  const e = refusal(() => auth.authenticate('api', { 'x-api-key': MK }, false));
  expect([e.status, e.code]).toEqual([401, 'INVALID_API_KEY']);
  expect(e.message).toBe('this is the management key: trading and market-data routes take an API key (tagw_k_...) in x-api-key');
  expect(e.message).not.toContain(MK);
});

it('an API key on a management route: 401 INVALID_API_KEY saying the route takes the management key', () => {
  for (const headers of [{ authorization: `Bearer ${api.value}` }, { 'x-management-key': api.value }] as Record<string, string>[]) {
    const e = refusal(() => auth.authenticate('management', headers, true));
    expect([e.status, e.code]).toEqual([401, 'INVALID_API_KEY']);
    expect(e.message).toBe('this is an API key: this route takes the management key (Authorization: Bearer or x-management-key)');
    expect(e.message).not.toContain(api.secret);
  }
});

it('unknown values of either shape keep the plain message: nothing is told about a key one does not hold', () => {
  const fakeApi = generateKey('api').value;
  const fakeMk = generateKey('management').value;
  expect(refusal(() => auth.authenticate('api', { 'x-api-key': fakeMk }, false)).message).toBe('invalid or revoked API key');
  expect(refusal(() => auth.authenticate('api', { 'x-api-key': fakeApi }, false)).message).toBe('invalid or revoked API key');
  expect(refusal(() => auth.authenticate('management', { 'x-management-key': fakeApi }, true)).message).toBe('invalid or revoked management key');
  expect(auth.authenticate('api', { 'x-api-key': api.value }, false)?.kind).toBe('api');
  expect(auth.authenticate('management', { 'x-management-key': MK }, true)?.kind).toBe('management');
});
