// A shard works the requests of one message through in chunks (src/runtime/requestChunks.ts): each
// chunk's idempotent orders commit together and are answered before the next chunk is booked, so
// the main thread writes the first answers while the shard works on the rest. Requests are handled
// in arrival order, and a stopping shard handles the ones still waiting.
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { requestChunks } from '../../src/runtime/requestChunks.js';
import { CommitGroup } from '../../src/store/commitGroup.js';
import { bootTradingHost, phaseOf, sendOrder, tempDir, useCleanup } from '../helpers/tradingHost.js';

const cleanup = useCleanup();
const turn = () => new Promise((r) => setImmediate(r));

describe('requests of one message, in chunks', () => {
  it('a chunk is committed and answered before the next is booked: 70 orders, chunks of 32', async () => {
    const dir = tempDir(cleanup, 'tagw-chunks-');
    const group = new CommitGroup();
    const { host } = await bootTradingHost(cleanup, dir, group);
    const reader = new Database(join(dir, 'tagw.sqlite'), { readonly: true, fileMustExist: true });
    cleanup.dbs.push(reader);
    const ids = Array.from({ length: 70 }, (_, i) => `k-${i}`);
    const onDisk = () => ids.filter((id) => phaseOf(reader, id) === 'result').length;
    const seenAtAnswer = new Map<string, number>();
    const answers: Promise<unknown>[] = [];
    const chunks = requestChunks<string>(group, (id) => {
      answers.push(sendOrder(host, id).then((r) => seenAtAnswer.set(id, onDisk()) && r));
    }, 32);
    chunks.run(ids);
    await Promise.all(answers.slice(0, 32));
    expect(answers).toHaveLength(32); // the next chunk waits for the next turn
    // The first chunk is answered with its own 32 records on disk, none of the next chunk's.
    expect(new Set(ids.slice(0, 32).map((id) => seenAtAnswer.get(id)))).toEqual(new Set([32]));
    while (answers.length < 70) await turn();
    await Promise.all(answers);
    expect(new Set(ids.slice(32, 64).map((id) => seenAtAnswer.get(id)))).toEqual(new Set([64]));
    expect(new Set(ids.slice(64).map((id) => seenAtAnswer.get(id)))).toEqual(new Set([70]));
  });

  it('a batch arriving while another waits is handled after it, in arrival order; a stop handles what waits', async () => {
    const group = new CommitGroup();
    const handled: string[] = [];
    const chunks = requestChunks<string>(group, (r) => handled.push(r), 3);
    chunks.run(['a1', 'a2', 'a3', 'a4', 'a5', 'a6', 'a7']);
    chunks.run(['b1', 'b2']);
    expect(handled).toEqual(['a1', 'a2', 'a3']);
    await turn();
    expect(handled).toEqual(['a1', 'a2', 'a3', 'a4', 'a5', 'a6']);
    chunks.run(['c1']);
    chunks.drain();
    expect(handled).toEqual(['a1', 'a2', 'a3', 'a4', 'a5', 'a6', 'a7', 'b1', 'b2', 'c1']);
    await turn();
    await turn();
    expect(handled).toHaveLength(10);
  });

  it('a lone request opens no commit group (it commits at once); a chunk of two or more does', async () => {
    const group = new CommitGroup();
    const open: boolean[] = [];
    const chunks = requestChunks<string>(group, () => open.push(group.isOpen), 2);
    chunks.run(['x']);
    await turn();
    chunks.run(['y', 'z', 'w']);
    await turn();
    expect(open).toEqual([false, true, true, false]);
  });
});
