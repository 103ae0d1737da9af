// The idempotency store against a model (a map of (account, id) → record), on a real database:
// random claims (one at a time, settled in their claim's transaction, several in one group commit,
// rolled back), outcomes, removals, lookups, expiry purges, moves of the keys (by this store, by its
// timer, by another connection: another shard's store), and crashes (the connection dropped and
// the database opened again by a new store, with no move at stop: anywhere, between a claim's
// commit and its key's move too). A second claim of a key that holds a record is always refused,
// there are never two records of a key, every lookup agrees with the model, and the key index's
// invariant holds after every step (idempotencyKeys.ts: every record at or below `through` has its
// key, none above it has one, no key without its record).
import fc from 'fast-check';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDb, type Db } from '../../src/store/db.js';
import { IdempotencyStore, type IdemRow } from '../../src/store/idempotency.js';
import { ManualScheduler } from '../helpers/fullDisk.js';

const ACCOUNTS = ['acc-a', 'acc-b', 'acc-c'];
const IDS = ['o1', 'o2', 'o3', 'o4', 'o5'];
type Final = 'sent' | 'result' | 'uncertain' | 'removed';

type Op =
  | { op: 'claim'; a: number; i: number; ttl: number }
  | { op: 'claimSettled'; a: number; i: number; ttl: number; final: Final }
  | { op: 'group'; claims: { a: number; i: number; final: Final }[]; ttl: number }
  | { op: 'rolledBack' | 'removeRolledBack'; a: number; i: number }
  | { op: 'setResult' | 'setUncertain' | 'remove' | 'get' | 'exists'; a: number; i: number }
  | { op: 'purge'; advance: number }
  | { op: 'move' | 'failedMove' | 'timer' | 'otherMove' | 'crash' | 'stopAndReopen' };

const key = fc.record({ a: fc.nat(ACCOUNTS.length - 1), i: fc.nat(IDS.length - 1) });
const final = fc.constantFrom<Final>('sent', 'result', 'uncertain', 'removed');
const ttl = fc.integer({ min: 1, max: 50 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: key.chain((k) => ttl.map((t) => ({ op: 'claim' as const, ...k, ttl: t }))) },
  { weight: 4, arbitrary: fc.tuple(key, ttl, final).map(([k, t, f]) => ({ op: 'claimSettled' as const, ...k, ttl: t, final: f })) },
  { weight: 2, arbitrary: fc.tuple(fc.array(fc.tuple(key, final).map(([k, f]) => ({ ...k, final: f })), { minLength: 1, maxLength: 4 }), ttl).map(([claims, t]) => ({ op: 'group' as const, claims, ttl: t })) },
  { weight: 1, arbitrary: fc.tuple(fc.constantFrom('rolledBack', 'removeRolledBack') as fc.Arbitrary<'rolledBack' | 'removeRolledBack'>, key).map(([op, k]) => ({ op, ...k })) },
  { weight: 5, arbitrary: fc.tuple(fc.constantFrom('setResult', 'setUncertain', 'remove', 'get', 'exists') as fc.Arbitrary<'setResult' | 'setUncertain' | 'remove' | 'get' | 'exists'>, key).map(([op, k]) => ({ op, ...k })) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 30 }).map((advance) => ({ op: 'purge' as const, advance })) },
  { weight: 4, arbitrary: fc.constantFrom('move', 'failedMove', 'timer', 'otherMove', 'crash', 'stopAndReopen').map((op) => ({ op }) as Op) },
);

type Rec = Pick<IdemRow, 'params_hash' | 'phase' | 'status' | 'result_json' | 'created_at' | 'expires_at'>;

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** The key index's invariant, read from the tables (idempotencyKeys.ts). */
function checkInvariant(db: Db): void {
  const through = db.prepare('SELECT through FROM idempotency_moved').pluck().get() as number;
  expect(db.prepare('SELECT count(*) FROM idempotency i WHERE i.id <= ? AND NOT EXISTS (SELECT 1 FROM idempotency_keys k WHERE k.record = i.id AND k.account_id = i.account_id AND k.client_order_id = i.client_order_id)').pluck().get(through)).toBe(0);
  expect(db.prepare('SELECT count(*) FROM idempotency_keys k WHERE NOT EXISTS (SELECT 1 FROM idempotency i WHERE i.id = k.record AND i.id <= ?)').pluck().get(through)).toBe(0);
  // Every record written from now on lands above `through`.
  expect(db.prepare('SELECT coalesce(max(id), 0) FROM idempotency').pluck().get()).toBeGreaterThanOrEqual(through);
  expect(db.prepare('SELECT account_id, client_order_id FROM idempotency GROUP BY account_id, client_order_id HAVING count(*) > 1').all()).toEqual([]);
}

function run(ops: Op[]): void {
  const dir = mkdtempSync(join(tmpdir(), 'tagw-idem-keys-'));
  dirs.push(dir);
  let now = 1_000;
  const model = new Map<string, Rec>();
  const k = (a: number, i: number) => `${ACCOUNTS[a]}\u0000${IDS[i]}`;
  let scheduler = new ManualScheduler();
  let db = openDb(dir);
  let store = new IdempotencyStore(db, { now: () => now }, { scheduler });
  // Another shard: its own connection and store on the same file (its accounts are not these).
  const other = openDb(dir);
  const otherStore = new IdempotencyStore(other, { now: () => now }, { scheduler: new ManualScheduler() });
  const reopen = (graceful: boolean) => {
    if (graceful) store.stop();
    db.close();
    scheduler = new ManualScheduler();
    db = openDb(dir);
    store = new IdempotencyStore(db, { now: () => now }, { scheduler });
  };
  /** A claim, then what its transaction does to it before it commits. */
  const settle = (a: number, i: number, f: Final, seq: number, expiresAt: number) => {
    const [acc, id] = [ACCOUNTS[a]!, IDS[i]!];
    store.insertSent(acc, id, `h${seq}`, now, expiresAt);
    if (f === 'result') store.setResult(acc, id, 200, `{"n":${seq}}`);
    if (f === 'uncertain') store.setUncertain(acc, id);
    if (f === 'removed') store.remove(acc, id);
  };
  const modelAfter = (f: Final, seq: number, ttl: number): Rec | undefined => f === 'removed' ? undefined
    : { params_hash: `h${seq}`, phase: f, status: f === 'result' ? 200 : null, result_json: f === 'result' ? `{"n":${seq}}` : null, created_at: now, expires_at: now + ttl };
  try {
    ops.forEach((o, seq) => {
      switch (o.op) {
        case 'claim': {
          const taken = model.has(k(o.a, o.i));
          expect(store.insertSent(ACCOUNTS[o.a]!, IDS[o.i]!, `h${seq}`, now, now + o.ttl)).toBe(!taken);
          if (!taken) model.set(k(o.a, o.i), modelAfter('sent', seq, o.ttl)!);
          break;
        }
        case 'claimSettled':
        case 'group': {
          const claims = o.op === 'group' ? o.claims : [o];
          // As the shard's group commit: each claim written once (RecordClaim.write), all in one
          // transaction; one that meets a record (written before, or by a claim before it in the
          // group) fails the whole commit. A claim removed in its own transaction writes nothing.
          const present = new Set([...model.keys()]);
          const collides = claims.some((c) => {
            if (c.final === 'removed') return false;
            if (present.has(k(c.a, c.i))) return true;
            present.add(k(c.a, c.i));
            return false;
          });
          const write = () => store.batch(() => {
            for (const c of claims) store.writeOnce(() => settle(c.a, c.i, c.final, seq, now + o.ttl));
          });
          if (collides) {
            expect(write).toThrow(/already exists/);
          } else {
            write();
            for (const c of claims) {
              const m = modelAfter(c.final, seq, o.ttl);
              if (m) model.set(k(c.a, c.i), m);
            }
          }
          break;
        }
        case 'rolledBack': {
          // The claim's commit fails (a full disk, say): nothing of it stays.
          const taken = model.has(k(o.a, o.i));
          expect(() => store.batch(() => {
            store.writeOnce(() => store.insertSent(ACCOUNTS[o.a]!, IDS[o.i]!, `h${seq}`, now, now + 10));
            throw new Error('commit failed');
          })).toThrow(taken ? /already exists/ : /commit failed/);
          break;
        }
        case 'removeRolledBack':
          // A discarded record's removal in a commit that fails: the record stays.
          expect(() => store.batch(() => {
            store.remove(ACCOUNTS[o.a]!, IDS[o.i]!);
            throw new Error('commit failed');
          })).toThrow(/commit failed/);
          break;
        case 'setResult': {
          store.setResult(ACCOUNTS[o.a]!, IDS[o.i]!, 201, `{"set":${seq}}`);
          const m = model.get(k(o.a, o.i));
          if (m) Object.assign(m, { phase: 'result', status: 201, result_json: `{"set":${seq}}` });
          break;
        }
        case 'setUncertain': {
          store.setUncertain(ACCOUNTS[o.a]!, IDS[o.i]!);
          const m = model.get(k(o.a, o.i));
          if (m?.phase === 'sent') m.phase = 'uncertain';
          break;
        }
        case 'remove':
          store.remove(ACCOUNTS[o.a]!, IDS[o.i]!);
          model.delete(k(o.a, o.i));
          break;
        case 'get':
        case 'exists':
          break; // every key is looked up after each step
        case 'purge': {
          now += o.advance;
          let n = 0;
          for (const [key, m] of model) {
            if (m.expires_at <= now) {
              model.delete(key);
              n++;
            }
          }
          expect(store.purgeExpired(now)).toBe(n);
          break;
        }
        case 'move':
          store.moveKeys();
          break;
        case 'failedMove': {
          // The move's transaction fails after its keys are inserted: rolled back, nothing lost.
          db.exec("CREATE TEMP TRIGGER fail_move BEFORE UPDATE ON idempotency_moved BEGIN SELECT RAISE(ABORT, 'move failed'); END");
          const tail = db.prepare('SELECT count(*) FROM idempotency WHERE id > (SELECT through FROM idempotency_moved)').pluck().get() as number;
          try {
            if (tail > 0) expect(() => store.moveKeys()).toThrow(/move failed/);
            else store.moveKeys();
          } finally {
            db.exec('DROP TRIGGER fail_move');
          }
          break;
        }
        case 'timer':
          scheduler.fire();
          break;
        case 'otherMove':
          otherStore.moveKeys();
          break;
        case 'crash':
          reopen(false);
          break;
        case 'stopAndReopen':
          reopen(true);
          break;
      }
      checkInvariant(db);
      for (let a = 0; a < ACCOUNTS.length; a++) {
        for (let i = 0; i < IDS.length; i++) {
          const m = model.get(k(a, i));
          expect(store.exists(ACCOUNTS[a]!, IDS[i]!)).toBe(m !== undefined);
          const row = store.get(ACCOUNTS[a]!, IDS[i]!);
          expect(row && { params_hash: row.params_hash, phase: row.phase, status: row.status, result_json: row.result_json, created_at: row.created_at, expires_at: row.expires_at }).toEqual(m);
        }
      }
    });
    // At the end, after a crash: a second claim of every recorded key is refused.
    reopen(false);
    for (let a = 0; a < ACCOUNTS.length; a++) {
      for (let i = 0; i < IDS.length; i++) {
        const taken = model.has(k(a, i));
        expect(store.insertSent(ACCOUNTS[a]!, IDS[i]!, 'again', now, now + 1)).toBe(!taken);
      }
    }
    checkInvariant(db);
  } finally {
    db.close();
    other.close();
  }
}

describe('IdempotencyStore with its keys moved in bulk (idempotencyKeys.ts)', () => {
  it('property: claims, outcomes, removals, purges, moves and crashes in any order: one record per key, found as the model says', () => {
    fc.assert(fc.property(fc.array(opArb, { minLength: 1, maxLength: 40 }), run), { numRuns: 100 });
  }, 90_000);

  it('a record claimed and committed, then a crash before its key moved: found by the next process, its second claim refused', () => {
    run([{ op: 'claimSettled', a: 0, i: 0, ttl: 10, final: 'result' }, { op: 'crash' }, { op: 'claim', a: 0, i: 0, ttl: 10 }]);
  });

  it('the top record removed after its key moved: the next record still gets a key', () => {
    run([{ op: 'claim', a: 0, i: 0, ttl: 10 }, { op: 'claim', a: 0, i: 1, ttl: 10 }, { op: 'move' }, { op: 'remove', a: 0, i: 1 }, { op: 'remove', a: 0, i: 0 },
      { op: 'claim', a: 1, i: 0, ttl: 10 }, { op: 'move' }, { op: 'crash' }, { op: 'claim', a: 1, i: 0, ttl: 10 }]);
  });

  it('a second record of a key that reached the table anyway (no index refuses it) is reported by the move; the first stays the record', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tagw-idem-keys-'));
    dirs.push(dir);
    const db = openDb(dir);
    try {
      const errors: unknown[] = [];
      const store = new IdempotencyStore(db, { now: () => 1 }, { scheduler: new ManualScheduler(), log: { warn: () => {}, error: (msg, fields) => errors.push({ msg, ...fields }) } });
      expect(store.insertSent('acc', 'dup', 'first', 1, 99)).toBe(true);
      // Written past the store (another writer of the account's records, which the shard rules out).
      db.prepare("INSERT INTO idempotency (account_id, client_order_id, params_hash, phase, created_at, expires_at) VALUES ('acc', 'dup', 'second', 'sent', 2, 99)").run();
      expect(store.moveKeys()).toBe(1);
      expect(errors).toEqual([expect.objectContaining({ accountId: 'acc', clientOrderId: 'dup', record: 2 })]);
      expect(store.get('acc', 'dup')?.params_hash).toBe('first');
      expect(store.insertSent('acc', 'dup', 'third', 3, 99)).toBe(false);
    } finally {
      db.close();
    }
  });
});
