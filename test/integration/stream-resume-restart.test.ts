// Resume across a gateway restart (docs/stream.md "History"): the gateway is SIGKILLed and started
// again on the same DATA_DIR; a client that was away reconnects with since=<epoch>:<seq> and gets
// RESUMED recovered:true, the account frames it missed before the kill (the bytes a connected socket
// got), a resync snapshot pair inside the stream, then live frames in the same epoch. Quotes after
// the restart carry a new market epoch (their seq started again).
import { afterAll, afterEach, expect, it } from 'vitest';
import { cleanupProcesses, startProcess } from '../helpers/process.js';
import { expectAccountStream, mustOpen, type Frame, type StreamClient } from '../helpers/stream-helpers.js';

const MK = 'resume-restart-management-key-0123456789';
const clients: StreamClient[] = [];
const ACCOUNT = new Set(['POSITIONS', 'ORDERS', 'TRADE']);
const accountFrames = (c: StreamClient) => c.frames.filter((f) => ACCOUNT.has(f.type));

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  cleanupProcesses();
});
afterAll(cleanupProcesses);

it('a client away across a SIGKILL and restart resumes with recovered:true: the missed frames, a resync pair, then live', async () => {
  const a = startProcess({ GATEWAY_MANAGEMENT_KEY: MK });
  let url = await a.listening;
  const mk = { authorization: `Bearer ${MK}` };
  const key = ((await (await fetch(`${url}/v1/keys`, { method: 'POST', headers: mk, body: JSON.stringify({ label: 'bot' }) })).json()) as { key: string }).key;
  const bind = await fetch(`${url}/ConnectEx`, { method: 'POST', headers: mk, body: JSON.stringify({ user: 'restart-1', password: 'pw', server: 'Sim-P5-Demo' }) });
  expect(bind.status).toBe(200);
  const id = ((await bind.json()) as { id: string }).id;
  const open = async (q: Record<string, string> = {}) => {
    const c = await mustOpen(url, { id, apiKey: key, heartbeat: '0', ...q });
    clients.push(c);
    return c;
  };
  const buy = async () => {
    const r = await fetch(`${url}/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01`, { headers: { 'x-api-key': key } });
    expect(r.status, await r.text()).toBe(200);
  };

  // A second account with no event at all: its socket's snapshot is at seq 0 of its epoch.
  const bind2 = await fetch(`${url}/ConnectEx`, { method: 'POST', headers: mk, body: JSON.stringify({ user: 'restart-2', password: 'pw', server: 'Sim-P5-Demo' }) });
  const id2 = ((await bind2.json()) as { id: string }).id;
  const quiet = await mustOpen(url, { id: id2, apiKey: key, heartbeat: '0' });
  clients.push(quiet);
  const quietAt = await quiet.next('ORDERS', 0, 10_000);
  expect(quietAt.seq).toBe(0);
  const witness = await open();
  const away = await open();
  await away.until((x) => x.of('ORDERS').length >= 1, 10_000, 'the snapshot pair');
  away.send({ action: 'subscribe', symbol: 'BTCUSD' });
  const q1 = await away.next('QUOTE', 0, 10_000);
  const cursor = accountFrames(away).at(-1)!;
  await away.close();
  await buy();
  await buy();
  // A frame reaches a socket only after it is in the database: the witness has what a restart finds.
  await witness.until((x) => x.of('TRADE').length >= 2 && accountFrames(x).at(-1)!.type === 'POSITIONS', 10_000, 'both deals');
  const before = accountFrames(witness).filter((f) => f.seq > cursor.seq);

  a.child.kill('SIGKILL');
  await a.exited;
  const b = startProcess({ GATEWAY_MANAGEMENT_KEY: MK }, a.dir);
  url = await b.listening;

  const back = await open({ since: `${cursor.epoch}:${cursor.seq}` });
  await back.until((x) => x.frames.length >= 1 + (x.frames[0]?.data.replayed ?? 0), 10_000, 'the replay');
  expect(back.frames[0]).toEqual({ type: 'RESUMED', data: { recovered: true, replayed: expect.any(Number) } });
  const replayed = back.frames.slice(1, 1 + back.frames[0]!.data.replayed);
  expect(replayed.slice(0, before.length)).toEqual(before);
  // The resync pair (replayed if it was recorded before this socket came, live otherwise).
  const resync = await back.until((x) => {
    const acc = accountFrames(x);
    const i = acc.findIndex((f: Frame) => f.type === 'POSITIONS' && f.data.snapshot === true);
    return i >= 0 && acc[i + 1]?.type === 'ORDERS' ? acc[i]! : undefined;
  }, 15_000, 'the resync pair');
  expect(resync.seq).toBeGreaterThan(before.at(-1)!.seq);
  expect(resync.epoch).toBe(cursor.epoch);
  expect(resync.data.positions).toHaveLength(2);
  // Live, same epoch, consecutive.
  const n = back.frames.length;
  await buy();
  const live = await back.next('TRADE', n, 10_000);
  expect(live.epoch).toBe(cursor.epoch);
  expectAccountStream(back.frames);
  // The quiet account resumes too: nothing missed, then its resync pair.
  const quietBack = await mustOpen(url, { id: id2, apiKey: key, heartbeat: '0', since: `${quietAt.epoch}:0` });
  clients.push(quietBack);
  await quietBack.until((x) => x.of('ORDERS').length >= 1, 15_000, 'the quiet account\'s resync pair');
  expect(quietBack.frames[0]).toMatchObject({ type: 'RESUMED', data: { recovered: true } });
  expect(quietBack.of('POSITIONS')[0]).toMatchObject({ epoch: quietAt.epoch, seq: 1, data: { snapshot: true } });
  // Market data: the counters started again with the process, under a new epoch.
  back.send({ action: 'subscribe', symbol: 'BTCUSD' });
  const q2 = await back.next('QUOTE', n, 10_000);
  expect(typeof q1.epoch).toBe('string');
  expect(q2.epoch).not.toBe(q1.epoch);
}, 60_000);
