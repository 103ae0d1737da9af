// AdmissionQueue (src/util/admissionQueue.ts), the pacing of broker logins on a node
// (ACCOUNT_CREATION_CONCURRENCY), per key: whatever tasks of whichever tenants arrive and end
// in whatever order, at most `limit` run at once; each tenant's tasks start in the order they
// arrived; at most `maxQueued` of a tenant wait and one more of it is refused at once (and never
// runs), whatever the others have waiting; the tenants waiting are served in turn (no tenant starts
// two waiting tasks while another tenant waited through both and started none); a task that fails gives its place
// on; and 0 bounds nothing.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AdmissionQueue } from '../../src/util/admissionQueue.js';

const flush = () => new Promise<void>((r) => setImmediate(r));
const refusal = new Error('queue full');
const TENANTS = ['a', 'b', 'c'] as const;

type Op = { t: 'arrive'; tenant: number } | { t: 'end'; which: number; fail: boolean };
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ t: fc.constant('arrive' as const), tenant: fc.nat(TENANTS.length - 1) }),
  fc.record({ t: fc.constant('end' as const), which: fc.nat(20), fail: fc.boolean() }),
);

interface Task { id: number; tenant: string; queuedAt?: number; startedAt?: number }

describe('AdmissionQueue', () => {
  it('bounds running and waiting tasks per tenant, keeps each tenant in arrival order, serves the tenants in turn', async () => {
    await fc.assert(fc.asyncProperty(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 0, max: 3 }), fc.array(op, { maxLength: 80 }), async (limit, maxQueued, ops) => {
      const q = new AdmissionQueue(limit, maxQueued, () => refusal);
      const tasks: Task[] = [];
      const running = new Map<number, { resolve: () => void; reject: (e: Error) => void }>();
      const refused = new Set<number>();
      /** Starts so far, in order: the index of a start is its time below. */
      const starts: Task[] = [];
      for (const o of ops) {
        if (o.t === 'arrive') {
          const task: Task = { id: tasks.length, tenant: TENANTS[o.tenant]! };
          tasks.push(task);
          const waitingOfTenant = tasks.filter((x) => x.tenant === task.tenant && x.queuedAt !== undefined && x.startedAt === undefined && !refused.has(x.id)).length;
          const mustWait = running.size >= limit;
          const full = mustWait && waitingOfTenant >= maxQueued;
          if (mustWait && !full) task.queuedAt = starts.length;
          void q.run(task.tenant, () => new Promise<void>((resolve, reject) => {
            task.startedAt = starts.length;
            starts.push(task);
            running.set(task.id, { resolve, reject });
          })).catch((e: Error) => {
            if (e === refusal) refused.add(task.id);
          });
          await flush();
          expect(refused.has(task.id)).toBe(full);
          if (!mustWait) expect(running.has(task.id)).toBe(true);
        } else {
          const ids = [...running.keys()];
          if (ids.length === 0) continue;
          const id = ids[o.which % ids.length]!;
          const r = running.get(id)!;
          running.delete(id);
          if (o.fail) r.reject(new Error('task failed'));
          else r.resolve();
          await flush();
        }
        const waiting = tasks.filter((x) => x.queuedAt !== undefined && x.startedAt === undefined);
        // Places are never left empty while tasks wait, never more than limit taken.
        expect(running.size).toBeLessThanOrEqual(limit);
        if (waiting.length > 0) expect(running.size).toBe(limit);
        expect(q.state).toEqual({ active: running.size, queued: waiting.length });
        for (const t of TENANTS) expect(waiting.filter((x) => x.tenant === t).length).toBeLessThanOrEqual(maxQueued);
      }
      // Each tenant's tasks started in the order they arrived; a refused one never started.
      for (const t of TENANTS) {
        const mine = starts.filter((x) => x.tenant === t).map((x) => x.id);
        expect(mine).toEqual([...mine].sort((a, b) => a - b));
      }
      for (const id of refused) expect(tasks[id]!.startedAt).toBeUndefined();
      // In turn: between two starts from the queue of one tenant, every other tenant that had a task
      // waiting all along (since before the first of them, still waiting at the second) started one.
      for (const t of TENANTS) {
        const mine = starts.filter((x) => x.tenant === t && x.queuedAt !== undefined);
        for (let k = 1; k < mine.length; k++) {
          const [i, j] = [mine[k - 1]!.startedAt!, mine[k]!.startedAt!];
          const passedOver = TENANTS.filter((u) => u !== t
            && tasks.some((x) => x.tenant === u && x.queuedAt !== undefined && x.queuedAt <= i && (x.startedAt === undefined || x.startedAt > j))
            && !starts.slice(i + 1, j).some((x) => x.tenant === u));
          expect(passedOver, `tenant ${t} started #${mine[k - 1]!.id} then #${mine[k]!.id}`).toEqual([]);
        }
      }
    }), { numRuns: 300 });
  });

  it('one tenant with a long queue holds another up by one task, not by its queue', async () => {
    const q = new AdmissionQueue(1, 1000, () => refusal);
    const order: string[] = [];
    const ends: (() => void)[] = [];
    const task = (name: string) => () => new Promise<void>((r) => {
      order.push(name);
      ends.push(r);
    });
    const all = [q.run('bulk', task('bulk-0'))];
    for (let i = 1; i <= 50; i++) all.push(q.run('bulk', task(`bulk-${i}`)));
    all.push(q.run('other', task('other')));
    await flush();
    for (let i = 0; i < 3; i++) {
      ends.shift()!();
      await flush();
    }
    expect(order.slice(0, 4)).toEqual(['bulk-0', 'bulk-1', 'other', 'bulk-2']);
    while (ends.length > 0) {
      ends.shift()!();
      await flush();
    }
    await Promise.all(all);
  });

  it('a tenant refused for its full queue does not refuse another', async () => {
    const q = new AdmissionQueue(1, 2, () => refusal);
    const hold = new Promise<void>(() => undefined);
    void q.run('bulk', () => hold);
    void q.run('bulk', () => hold);
    void q.run('bulk', () => hold);
    await expect(q.run('bulk', () => hold)).rejects.toBe(refusal);
    void q.run('other', () => hold);
    await flush();
    expect(q.state).toEqual({ active: 1, queued: 3 });
  });

  it('limit 0 bounds nothing: every task runs at once', async () => {
    const q = new AdmissionQueue(0, 0, () => refusal);
    let running = 0;
    const ends: (() => void)[] = [];
    const all = Array.from({ length: 50 }, () => q.run('a', () => new Promise<void>((r) => {
      running++;
      ends.push(r);
    })));
    await flush();
    expect(running).toBe(50);
    for (const e of ends) e();
    await Promise.all(all);
  });
});
