// GroupCommit (src/cluster/groupCommit.ts): a lone item leaves at once; what is submitted while a
// statement is out leaves as the next one; a batch that fails for a named reason runs its items
// alone; any other failure reaches every item of the batch.
import { describe, expect, it } from 'vitest';
import { GroupCommit } from '../../src/cluster/groupCommit.js';

/** A fake statement runner whose statements answer when told to. */
function runner(failMany?: (items: number[]) => Error | undefined) {
  const sent: Array<{ items: number[]; answer: () => void }> = [];
  const g = new GroupCommit<number, string>({
    one: (i) => new Promise((resolve) => sent.push({ items: [i], answer: () => resolve(`one ${i}`) })),
    many: (items) => new Promise((resolve, reject) => sent.push({
      items,
      answer: () => {
        const err = failMany?.(items);
        if (err) reject(err);
        else resolve(items.map((i) => `many ${i}`));
      },
    })),
    retryAlone: (err) => (err as Error).message === 'locked',
    max: 3,
  });
  const flush = () => new Promise((r) => setImmediate(r));
  return { g, sent, flush };
}

describe('GroupCommit', () => {
  it('sends a lone item at once, and what arrives meanwhile as one statement (at most max items)', async () => {
    const { g, sent, flush } = runner();
    const first = g.submit(1);
    expect(sent.map((s) => s.items)).toEqual([[1]]);
    const rest = [2, 3, 4, 5].map((i) => g.submit(i));
    sent[0]!.answer();
    expect(await first).toBe('one 1');
    await flush();
    expect(sent.map((s) => s.items)).toEqual([[1], [2, 3, 4]]);
    sent[1]!.answer();
    await flush();
    expect(sent.map((s) => s.items)).toEqual([[1], [2, 3, 4], [5]]);
    sent[2]!.answer();
    expect(await Promise.all(rest)).toEqual(['many 2', 'many 3', 'many 4', 'one 5']);
    expect(g.stats).toEqual({ batches: 1, batched: 3, alone: 2, retriedAlone: 0 });
  });

  it('runs a batch\'s items alone when it failed for a reason retryAlone names; fails them all otherwise', async () => {
    const { g, sent, flush } = runner((items) => new Error(items.includes(9) ? 'down' : 'locked'));
    const lead = g.submit(1);
    const batch = [2, 3].map((i) => g.submit(i));
    sent[0]!.answer();
    await lead;
    await flush();
    sent[1]!.answer(); // the batch [2, 3] fails 'locked'
    await flush();
    expect(sent.slice(2).map((s) => s.items)).toEqual([[2], [3]]);
    for (const s of sent.slice(2)) s.answer();
    expect(await Promise.all(batch)).toEqual(['one 2', 'one 3']);
    expect(g.stats.retriedAlone).toBe(1);
    await flush();

    const lead2 = g.submit(7);
    const down = [8, 9].map((i) => g.submit(i).catch((e: Error) => e.message));
    sent[4]!.answer();
    await lead2;
    await flush();
    sent[5]!.answer();
    expect(await Promise.all(down)).toEqual(['down', 'down']);
    await flush();
    // The group goes on after a failure.
    const after = g.submit(10);
    expect(sent[6]!.items).toEqual([10]);
    sent[6]!.answer();
    expect(await after).toBe('one 10');
  });
});
