// Gateway session handles and their subscriptions. Handles survive a gateway restart (decision
// in docs/gateway.md): the row keeps a SHA-256 of the handle for lookups and the handle sealed
// with the gateway's secret box, so a repeated POST /v1/connect can answer the same handle
// without the plain value ever being stored. Only the shard that owns the account writes here;
// the main thread reads (handle -> account lookups on a cache miss).
import type { Db } from './db.js';

// Tables: migration 4 (src/store/migrations.ts).

export interface SessionRow {
  handle_hash: string;
  account_id: string;
  customer_id: string;
  platform: 'P4' | 'P5';
  handle_sealed: string;
  state: 'live' | 'invalidated';
  connected_at: number;
  invalidated_at: number | null;
}

export class SessionStore {
  private readonly q;
  constructor(private readonly db: Db) {
    this.q = {
      upsert: db.prepare(`INSERT INTO gateway_sessions (handle_hash, account_id, customer_id, platform, handle_sealed, state, connected_at, invalidated_at)
        VALUES (@handle_hash, @account_id, @customer_id, @platform, @handle_sealed, @state, @connected_at, @invalidated_at)
        ON CONFLICT(handle_hash) DO UPDATE SET state = excluded.state, invalidated_at = excluded.invalidated_at`),
      byHash: db.prepare<[string], SessionRow>('SELECT * FROM gateway_sessions WHERE handle_hash = ?'),
      live: db.prepare<[], SessionRow>("SELECT * FROM gateway_sessions WHERE state = 'live'"),
      liveOf: db.prepare<[string], SessionRow>("SELECT * FROM gateway_sessions WHERE account_id = ? AND state = 'live'"),
      delSubs: db.prepare('DELETE FROM gateway_subscriptions WHERE handle_hash = ?'),
      insSub: db.prepare('INSERT INTO gateway_subscriptions (handle_hash, sub_key, spec_json) VALUES (?, ?, ?)'),
      subs: db.prepare<[string], { sub_key: string; spec_json: string }>('SELECT sub_key, spec_json FROM gateway_subscriptions WHERE handle_hash = ? ORDER BY sub_key'),
    };
  }

  upsert(row: SessionRow): void {
    this.q.upsert.run(row);
  }
  byHash(hash: string): SessionRow | undefined {
    return this.q.byHash.get(hash);
  }
  live(): SessionRow[] {
    return this.q.live.all();
  }
  /** The live sessions of an account (cluster mode copies them to PostgreSQL). */
  liveOf(accountId: string): SessionRow[] {
    return this.q.liveOf.all(accountId);
  }
  /** Replaces the stored subscription set of a session in one transaction. */
  setSubscriptions(hash: string, specs: Record<string, unknown>): void {
    this.db.transaction(() => {
      this.q.delSubs.run(hash);
      for (const [k, v] of Object.entries(specs)) this.q.insSub.run(hash, k, JSON.stringify(v));
    })();
  }
  subscriptions(hash: string): Array<{ key: string; spec: unknown }> {
    return this.q.subs.all(hash).map((r) => ({ key: r.sub_key, spec: JSON.parse(r.spec_json) as unknown }));
  }
}
