// The account stream history in JetStream (src/cluster/jsHistory.ts) over a real nats-server -js:
// what one node writes another replays exactly (same bytes, in order), interleaved with other
// accounts; limits by count; an unknown epoch or a position never reached is not recovered; the
// history survives a nats-server kill and restart (file storage); a property against a model.
import { connect, type NatsConnection } from '@nats-io/transport-node';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JetStreamHistory, type NumberedFrame } from '../../src/cluster/jsHistory.js';
import { accountFrame } from '../../src/stream/frames.js';
import { startNats, type Engine } from '../helpers/engines.js';
import { until } from '../helpers/until.js';

let nats: Engine;
let ncA: NatsConnection, ncB: NatsConnection;
let A: JetStreamHistory, B: JetStreamHistory;
const limits = { maxEvents: 50, maxAgeMs: 60_000 };
const deal = { ticket: 0, timeMsc: 0 };
let n = 0;
const uniq = (p: string) => `${p}-${++n}`;

const frames = (epoch: string, from: number, to: number): NumberedFrame[] => {
  const out: NumberedFrame[] = [];
  for (let s = from; s <= to; s++) out.push({ epoch, seq: s, frame: accountFrame('TRADE', s, epoch, `{"ticket":${s}}`), deal: { ticket: s, timeMsc: s * 10 } });
  return out;
};

beforeAll(async () => {
  nats = await startNats();
  // Reconnects 0.2 s apart, not the client's default 2 s: the kill-and-restart case waits for one.
  [ncA, ncB] = await Promise.all([0, 1].map(() => connect({ servers: nats.url, reconnectTimeWait: 200 })));
  A = await JetStreamHistory.open({ nc: ncA, limits });
  B = await JetStreamHistory.open({ nc: ncB, limits });
});
afterAll(async () => {
  await Promise.all([ncA, ncB].map((nc) => nc?.close()));
  await nats?.stop();
});

describe('JetStreamHistory', () => {
  it('replays on another node exactly the frames after the position, the same bytes, in order', async () => {
    const acc = uniq('acc');
    const other = uniq('acc');
    await A.startEpoch(acc, 'e1', deal);
    for (let s = 1; s <= 20; s += 5) {
      await A.append(acc, frames('e1', s, s + 4));
      await A.append(other, frames('x', s, s + 4)); // interleaved in the stream
    }
    const r = await B.replay(acc, { epoch: 'e1', seq: 7 });
    expect(r.recovered).toBe(true);
    if (!r.recovered) return;
    expect(r.entries.map((e) => e.frame)).toEqual(frames('e1', 8, 20).map((f) => f.frame));
    expect(await B.replay(acc, { epoch: 'e1', seq: 20 })).toEqual({ recovered: true, entries: [] });
    const fromStart = await B.replay(acc, { epoch: 'e1', seq: 0 });
    expect(fromStart.recovered && fromStart.entries.map((e) => e.seq)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
  });

  it('does not recover another epoch, a position never reached, or an account with no history', async () => {
    const acc = uniq('acc');
    await A.startEpoch(acc, 'old', deal);
    await A.append(acc, frames('old', 1, 3));
    await A.startEpoch(acc, 'new', deal);
    await A.append(acc, frames('new', 1, 2));
    expect(await B.replay(acc, { epoch: 'old', seq: 1 })).toEqual({ recovered: false });
    expect(await B.replay(acc, { epoch: 'new', seq: 3 })).toEqual({ recovered: false });
    expect(await B.replay(uniq('none'), { epoch: 'new', seq: 0 })).toEqual({ recovered: false });
    const r = await B.replay(acc, { epoch: 'new', seq: 0 });
    expect(r.recovered && r.entries.map((e) => e.seq)).toEqual([1, 2]);
  });

  it('keeps maxEvents per account: a position before what is kept is not recovered, one inside is', async () => {
    const acc = uniq('acc');
    await A.startEpoch(acc, 'e', deal);
    await A.append(acc, frames('e', 1, 80));
    expect(await B.replay(acc, { epoch: 'e', seq: 10 })).toEqual({ recovered: false });
    const r = await B.replay(acc, { epoch: 'e', seq: 30 });
    expect(r.recovered && r.entries.length).toBe(50);
  });

  it('gives a new owner the last number and deal mark; a retried publish is not stored twice', async () => {
    const acc = uniq('acc');
    await A.startEpoch(acc, 'e', deal);
    await A.append(acc, frames('e', 1, 4));
    await B.append(acc, frames('e', 4, 4)); // the same frame again (a retry)
    const head = await B.head(acc);
    expect(head).toMatchObject({ epoch: 'e', seq: 4, deal: { ticket: 4, timeMsc: 40 } });
    const r = await B.replay(acc, { epoch: 'e', seq: 0 });
    expect(r.recovered && r.entries.map((e) => e.seq)).toEqual([1, 2, 3, 4]);
    expect(await B.head(uniq('none'))).toBeUndefined();
  });

  it('frames stored out of seq order (a retry stored lower seqs after higher ones): the head reads the lower one until the highest is stored again, then a new owner continues after it and a resume from before recovers', async () => {
    const acc = uniq('acc');
    await A.startEpoch(acc, 'e', deal);
    await A.append(acc, frames('e', 1, 2));
    // seq 3 lost in a reconnect while 4-6 went through; its retry stores 3-6 (4-6 are duplicates).
    await A.append(acc, frames('e', 4, 6));
    await A.append(acc, frames('e', 3, 6));
    expect(await B.head(acc)).toMatchObject({ epoch: 'e', seq: 3 }); // the hazard: a next owner would number 4 again
    await A.republish(acc, frames('e', 6, 6)[0]!, 'x1');
    expect(await B.head(acc)).toMatchObject({ epoch: 'e', seq: 6, deal: { ticket: 6, timeMsc: 60 } });
    const r = await B.replay(acc, { epoch: 'e', seq: 3 });
    expect(r.recovered && r.entries.map((e) => e.seq)).toEqual([4, 5, 6]);
    // From before the misordered part: not recovered (a snapshot follows), never a frame twice.
    expect((await B.replay(acc, { epoch: 'e', seq: 2 })).recovered).toBe(false);
  });
  it('a frame stored again after a retried store (republish) is replayed once: a resume across it recovers', async () => {
    const acc = uniq('acc');
    await A.startEpoch(acc, 'e', deal);
    await A.append(acc, frames('e', 1, 3));
    await A.republish(acc, frames('e', 3, 3)[0]!, 'x1');
    await A.append(acc, frames('e', 4, 5));
    for (const since of [0, 2]) {
      const r = await B.replay(acc, { epoch: 'e', seq: since });
      // Before, the copy counted as a frame: the replay ended one short and answered recovered:false.
      expect(r.recovered && r.entries.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5].filter((s) => s > since));
    }
  });

  it('a frame missing from the history (a store given up while later ones were stored): a replay across the hole answers recovered:false without waiting for the frame', async () => {
    // The read's JetStream fetches expire after ackTimeoutMs: long here, so a replay that waited
    // for frames that are not there would outlast the test (before: two expiries, 10 s with the
    // default 5 s, with the account's events held meanwhile; chaos seed 604312773).
    const slow = await JetStreamHistory.open({ nc: ncB, limits, ackTimeoutMs: 600_000 });
    const acc = uniq('acc');
    await A.startEpoch(acc, 'e', deal);
    await A.append(acc, frames('e', 1, 2));
    await A.append(acc, frames('e', 4, 6)); // 3 never stored
    expect(await slow.replay(acc, { epoch: 'e', seq: 1 })).toEqual({ recovered: false });
    expect(await slow.replay(acc, { epoch: 'e', seq: 4 })).toMatchObject({ recovered: true, entries: [{ seq: 5 }, { seq: 6 }] });
  }, 60_000);

  it('of nodes racing to start an account\'s first epoch, exactly one does; with a message there, none does', async () => {
    const acc = uniq('acc');
    const won = await Promise.all(['x', 'y', 'z'].map((e, i) => (i % 2 ? A : B).startFirstEpoch(acc, e, deal)));
    expect(won.filter(Boolean)).toHaveLength(1);
    const head = await B.head(acc);
    expect(head).toMatchObject({ epoch: ['x', 'y', 'z'][won.indexOf(true)], seq: 0 });
    expect(await A.startFirstEpoch(acc, 'late', deal)).toBe(false);
  });

  it('fast-check: any interleaving of accounts and epochs replays as a model history would', async () => {
    await fc.assert(fc.asyncProperty(
      fc.array(fc.record({ acc: fc.integer({ min: 0, max: 2 }), op: fc.constantFrom('append', 'append', 'append', 'epoch'), k: fc.integer({ min: 1, max: 4 }) }), { minLength: 1, maxLength: 25 }),
      fc.integer({ min: 0, max: 2 }), fc.integer({ min: 0, max: 200 }), fc.boolean(),
      async (ops, pick, sinceRaw, sameEpoch) => {
        const run = uniq('p');
        const model = [0, 1, 2].map((i) => ({ id: `${run}-${i}`, epochs: [`${run}e0`], frames: [] as NumberedFrame[], seq: 0 }));
        for (const m of model) await A.startEpoch(m.id, m.epochs[0]!, deal);
        for (const o of ops) {
          const m = model[o.acc]!;
          if (o.op === 'epoch') {
            m.epochs.push(`${run}e${m.epochs.length}`);
            m.seq = 0;
            m.frames = [];
            await A.startEpoch(m.id, m.epochs.at(-1)!, deal);
          } else {
            const f = frames(m.epochs.at(-1)!, m.seq + 1, m.seq + o.k);
            m.seq += o.k;
            m.frames.push(...f);
            await A.append(m.id, f);
          }
        }
        const m = model[pick]!;
        const epoch = sameEpoch ? m.epochs.at(-1)! : m.epochs[0]!;
        const since = { epoch, seq: sinceRaw % (m.seq + 3) };
        const r = await B.replay(m.id, since);
        const current = epoch === m.epochs.at(-1);
        if (!current || since.seq > m.seq) expect(r).toEqual({ recovered: false });
        else expect(r.recovered && r.entries.map((e) => e.frame)).toEqual(m.frames.filter((f) => f.seq > since.seq).map((f) => f.frame));
      },
    ), { numRuns: 25 });
  });

  it('survives a nats-server kill and restart (file storage)', async () => {
    const acc = uniq('acc');
    await A.startEpoch(acc, 'e', deal);
    await A.append(acc, frames('e', 1, 5));
    // B asked before its client is back would wait out the request's 5 s timeout: wait for the reconnect.
    const reconnected = (async () => {
      for await (const st of ncB.status()) if (st.type === 'reconnect') return;
    })();
    await nats.kill();
    await nats.restart();
    await reconnected;
    await until(async () => (await B.head(acc).catch(() => undefined))?.seq === 5, 'the history back after the restart', 15_000);
    const r = await B.replay(acc, { epoch: 'e', seq: 2 });
    expect(r.recovered && r.entries.map((e) => e.seq)).toEqual([3, 4, 5]);
  });
});
