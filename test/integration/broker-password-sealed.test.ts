// A bound account's broker password stays sealed in its shard: the connection unseals it at each
// login (the first connect and every reconnect) and keeps no plain copy. Real account host, real
// bridge connection to a real simulator server over loopback TCP (it takes the first password of a
// login and refuses any other after, so a reconnect that logs in proves the right one was unsealed).
import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes, randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { SecretBox } from '../../src/crypto/secretBox.js';
import { createLogger } from '../../src/log.js';
import { createAccountHost } from '../../src/runtime/hosts/accounts.js';
import type { ShardContext } from '../../src/runtime/hosts/context.js';
import { shardSettings } from '../../src/runtime/settings.js';
import { openDb, type Db } from '../../src/store/db.js';
import { systemClock } from '../../src/util/clock.js';
import { startBridgeSim, type BridgeSim } from '../helpers/sim-helpers.js';
import { until } from '../helpers/until.js';

let bs: BridgeSim;
let db: Db;
const dir = mkdtempSync(join(tmpdir(), 'tagw-sealed-'));
beforeAll(async () => {
  bs = await startBridgeSim();
  db = openDb(dir);
});
afterAll(async () => {
  await bs?.close();
  db?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Paths under `root` (own fields, Map and Set members, byte buffers) whose value holds `secret`. */
function holders(root: unknown, secret: string): string[] {
  const seen = new Set<object>();
  const found: string[] = [];
  const bytes = Buffer.from(secret);
  const visit = (v: unknown, path: string): void => {
    if (typeof v === 'string') {
      if (v.includes(secret)) found.push(path);
      return;
    }
    if (typeof v !== 'object' || v === null || seen.has(v)) return;
    seen.add(v);
    if (ArrayBuffer.isView(v)) {
      if (Buffer.from(v.buffer, v.byteOffset, v.byteLength).includes(bytes)) found.push(path);
      return;
    }
    if (v instanceof Map) for (const [k, x] of v) { visit(k, `${path}<key>`); visit(x, `${path}.get(${String(k)})`); }
    if (v instanceof Set) for (const x of v) visit(x, `${path}<member>`);
    for (const k of Reflect.ownKeys(v)) {
      let x: unknown;
      try {
        x = (v as Record<string | symbol, unknown>)[k];
      } catch {
        continue; // a getter that throws out of context
      }
      visit(x, `${path}.${String(k)}`);
    }
  };
  visit(root, 'entry');
  // It went as far as the bridge connection and its socket.
  expect([...seen].map((o) => o.constructor?.name)).toEqual(expect.arrayContaining(['BridgeBrokerConnection', 'Socket']));
  return found;
}

it('after bind and connect no field of the account entry holds the plain password; a reconnect logs in with it', async () => {
  const key = randomBytes(32);
  const id = randomUUID();
  const password = `pw-${randomBytes(12).toString('hex')}`;
  const ctx: ShardContext = {
    shard: 0, shards: 1, db, log: createLogger('silent'), clock: systemClock, emit: () => {}, owns: () => true,
    settings: shardSettings({ secretKeyHex: key.toString('hex'), brokerMode: 'bridge', bridgeUrl: bs.url, timing: { reconnectBaseMs: 20, reconnectCapMs: 200 } }),
  };
  const host = createAccountHost(ctx);
  const bound = await host.handlers['account.bind']!({ accountId: id, customerId: 'c', server: 'Sim-P5-Demo', login: `sealed-${id.slice(0, 8)}`, passwordEnc: new SecretBox(key).seal(password, id) });
  expect(bound.phase).toBe('connected');
  const entry = await ctx.accounts!.ensure(id);
  await entry.whenConnected(5_000);
  expect(holders(entry, password)).toEqual([]);

  // The bridge goes away and comes back: the connection logs in again by itself.
  await bs.stopBridge();
  await until(() => entry.phase() !== 'connected', 'the connection to notice the outage');
  await bs.restartBridge();
  const conn = await entry.whenConnected(15_000);
  expect((await conn.accountSummary()).currency).toBeTypeOf('string');
  expect(holders(entry, password)).toEqual([]);
  host.stop?.();
}, 60_000);
