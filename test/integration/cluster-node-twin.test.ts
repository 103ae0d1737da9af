// The start's NODE_ID check (nodeTwin.ts refuseLiveTwin) against a real PostgreSQL: the earlier
// process's heartbeat is young, and its answers over NATS (liveness.ts) are scripted, so what the
// start concludes from each sequence is seen without timing (the whole-process cases:
// cluster-restart-reclaim.test.ts).
import { beforeAll, describe, expect, it } from 'vitest';
import type { Alive } from '../../src/cluster/liveness.js';
import { NodeIdInUseError, refuseLiveTwin } from '../../src/cluster/nodeTwin.js';
import { postgresForFile } from '../helpers/postgres.js';

const pg = postgresForFile();
const LEASE_MS = 60_000;
const EARLIER = 1;
const ME = 2;

beforeAll(async () => {
  await pg.pool.query(`INSERT INTO cluster_nodes (node_id, heartbeat_at, incarnation) VALUES ('n1', now(), $1)`, [EARLIER]);
});

/** `ask` answering `answers` in turn; `asked` counts the questions. */
function scripted(...answers: Alive[]) {
  const s = { asked: 0, ask: async (): Promise<Alive> => answers[Math.min(s.asked++, answers.length - 1)]! };
  return s;
}

describe('a start under a NODE_ID whose earlier process heartbeated within the lease', () => {
  it('a question left unanswered once, then answered by the earlier process: a live twin, the start refused', async () => {
    const s = scripted('silent', { incarnation: EARLIER });
    // Before: one unanswered question (a live process stalled past CLUSTER_ALIVE_ASK_MS on a loaded
    // machine) counted as gone, and the start took the live process's leases over.
    await expect(refuseLiveTwin(pg.pool, 'n1', ME, LEASE_MS, s.ask)).rejects.toBeInstanceOf(NodeIdInUseError);
    expect(s.asked).toBe(2);
  });

  it('two questions in a row unanswered while NATS answers (frozen or cut off): taken over', async () => {
    const s = scripted('silent', 'silent');
    await expect(refuseLiveTwin(pg.pool, 'n1', ME, LEASE_MS, s.ask)).resolves.toBe('silent');
    expect(s.asked).toBe(2);
  });

  it('nobody listening (a dead process): taken over after one question', async () => {
    const s = scripted('gone');
    await expect(refuseLiveTwin(pg.pool, 'n1', ME, LEASE_MS, s.ask)).resolves.toBe('gone');
    expect(s.asked).toBe(1);
  });

  it('an answer of the earlier incarnation at once: the start refused after one question', async () => {
    const s = scripted({ incarnation: EARLIER });
    await expect(refuseLiveTwin(pg.pool, 'n1', ME, LEASE_MS, s.ask)).rejects.toBeInstanceOf(NodeIdInUseError);
    expect(s.asked).toBe(1);
  });
});
