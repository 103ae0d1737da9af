// A deleted seat's simulated account leaves the shard's memory (sim-release.test.ts has the rule):
// the shard's account host, as DELETE /v1/seats/:id drives it (account.remove stops the account's
// connection), over the embedded simulator on the shard's SQLite. The login bound again later
// finds its account as it was.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SimBrokerConnection } from '../../src/broker/sim.js';
import { SecretBox } from '../../src/crypto/secretBox.js';
import { createLogger } from '../../src/log.js';
import { createAccountHost } from '../../src/runtime/hosts/accounts.js';
import type { TradeReply } from '../../src/runtime/hosts/accountCommands.js';
import { shardSettings } from '../../src/runtime/settings.js';
import { Simulator } from '../../src/sim/simulator.js';
import { openDb } from '../../src/store/db.js';
import { SqliteSimStore } from '../../src/store/simStore.js';
import { systemClock } from '../../src/util/clock.js';
import { testConfig } from '../helpers/sim-helpers.js';
import { tempDir, useCleanup } from '../helpers/tradingHost.js';

const c = useCleanup();
const key = randomBytes(32);
const box = new SecretBox(key);

describe('a deleted seat', () => {
  it("leaves no simulated account in the shard's memory; bound again, the login finds its account as it was", async () => {
    const db = openDb(tempDir(c, 'tagw-seat-release-'));
    c.dbs.push(db);
    const store = new SqliteSimStore(db, { checkpointMs: 0 });
    const sim = new Simulator({ config: testConfig(), store });
    const server = sim.server('Sim-P5-Demo')!;
    const host = createAccountHost({
      shard: 0, shards: 1, db, log: createLogger('silent'), settings: shardSettings({ secretKeyHex: key.toString('hex') }), clock: systemClock, emit: () => {}, owns: () => true,
    }, { broker: { factory: (cr) => new SimBrokerConnection(sim, cr), stop: () => sim.stop() } });
    c.hosts.push(host);
    host.rehydrate();
    const bind = (accountId: string) => host.handlers['account.bind']!({ accountId, customerId: 'c', server: 'Sim-P5-Demo', login: 'seat-1', passwordEnc: box.seal('pw', accountId) });
    const op = (accountId: string, name: string, args: Record<string, unknown> = {}) => Promise.resolve(host.handlers['account.op']!({ accountId, op: name, args })) as Promise<Record<string, unknown>>;
    const first = '77777777-7777-4777-8777-777777777777';
    await bind(first);
    const trade = async (opName: 'OrderSend' | 'OrderClose', args: Record<string, unknown>, clientOrderId: string) => {
      const r = (await host.handlers['account.trade']!({ accountId: first, op: opName, args, clientOrderId })) as TradeReply;
      expect(r.status, r.json).toBe(200);
      return JSON.parse(r.json) as Record<string, unknown>;
    };
    const sent = await trade('OrderSend', { symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 }, 'o1');
    await trade('OrderClose', { ticket: sent.ticket }, 'c1');
    const balance = (await op(first, 'AccountSummary')).balance;
    expect(server.accounts.get('seat-1')?.logins).toBe(1);
    // Its changes checkpointed (as a pass does within checkpointMs of them), the seat is removed.
    store.checkpoint();
    host.handlers['account.remove']!({ accountId: first });
    expect(server.accounts.has('seat-1')).toBe(false);
    expect(store.loadedAccounts).toBe(0);

    const second = '88888888-8888-4888-8888-888888888888';
    await bind(second);
    expect((await op(second, 'AccountSummary')).balance).toBe(balance);
    expect(server.accounts.get('seat-1')?.logins).toBe(1);
  });
});
