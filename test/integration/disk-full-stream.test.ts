// The /v1/stream account history on a full DATA_DIR (docs/storage.md, docs/stream.md "History").
// Each batch of account events is written before its frames leave, so a client is never ahead of
// what a restart finds. In bridge mode the broker's events keep coming while the gateway's disk is
// full (they need no write of the gateway's to happen): before, the failed write was logged (one
// error line a batch) and the frames sent anyway, never stored. Now the batch waits in memory and
// is written, then sent, once there is room, in order, each frame once. A real tmpfs filled to the
// last byte, a real gateway in bridge mode over loopback TCP, a real /v1/stream socket.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SimBrokerConnection } from '../../src/broker/sim.js';
import { createLogger } from '../../src/log.js';
import { fillUp } from '../helpers/fullDisk.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startBridgeSim, type BridgeSim } from '../helpers/sim-helpers.js';
import { expectAccountStream, mustOpen, type StreamClient } from '../helpers/stream-helpers.js';
import { until } from '../helpers/until.js';

let mnt: string;
let mounted = false;
let bs: BridgeSim;
let t: TestGateway | undefined;
const logs: Array<{ level: string; msg: string; what?: string; accountId?: string }> = [];
const clients: StreamClient[] = [];

beforeAll(async () => {
  mnt = mkdtempSync(join(tmpdir(), 'tagw-full-stream-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64m', 'tmpfs', mnt], { stdio: 'pipe' });
    mounted = true;
  } catch (err) {
    throw new Error(`this test mounts a 64 MiB tmpfs and needs root (or CAP_SYS_ADMIN) for it: ${(err as { stderr?: Buffer }).stderr?.toString().trim() || String(err)}`);
  }
  mkdirSync(join(mnt, 'data'));
  bs = await startBridgeSim();
  const log = createLogger('warn', {}, (line) => logs.push(JSON.parse(line) as (typeof logs)[number]));
  // The bound on what waits at its least (64 KiB): the first test stays far below it, the second passes it.
  t = await startTestGateway({ brokerMode: 'bridge', bridgeUrl: bs.url, storageCheckMs: 20, storageMinFreeMb: 1, streamHistoryHeldMaxBytes: 64 * 1024 }, { dataDir: join(mnt, 'data'), log });
}, 60_000);
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await t?.stop();
  await bs?.close();
  rmSync(join(mnt, 'filler'), { force: true });
  if (mounted) execFileSync('umount', [mnt]);
  rmSync(mnt, { recursive: true, force: true });
});

/** A P5 account bound to the broker login `user`, a key, a socket on it after its snapshot, and a
 *  reader of its history rows on disk. */
async function streamedAccount(gw: TestGateway, user: string) {
  const h = mgmt(gw.managementKey);
  const bound = await gw.req('POST', '/ConnectEx', { headers: h, body: { user, password: 'pw', server: 'Sim-P5-Demo' } });
  expect(bound.status, bound.text).toBe(200);
  const id = bound.body.id as string;
  const key = (await gw.req('POST', '/v1/keys', { headers: h, body: { label: user } })).body.key as string;
  const c = await mustOpen(gw.url, { id, apiKey: key, heartbeat: '0' });
  clients.push(c);
  const snapshot = await c.next('ORDERS', 0);
  const reader = new Database(join(gw.dataDir, 'tagw.sqlite'), { readonly: true, fileMustExist: true });
  const stored = () => (reader.prepare('SELECT seq FROM stream_history WHERE account_id = ? ORDER BY seq').all(id) as Array<{ seq: number }>).map((r) => r.seq);
  return { h, id, key, c, snapshot, reader, stored };
}

describe('the /v1/stream history on a full DATA_DIR', () => {
  it('account frames wait for their history rows: sent once written, in order and once each, the rows on disk; quotes go on', async () => {
    const gw = t!;
    const { id, key, c, snapshot, reader, stored } = await streamedAccount(gw, 'full-stream');
    c.send({ action: 'subscribe', symbol: 'BTCUSD' });
    await c.next('QUOTE', 0);
    const accountFrames = () => c.frames.filter((f) => f.type === 'POSITIONS' || f.type === 'ORDERS' || f.type === 'TRADE').filter((f) => f.seq > snapshot.seq);
    // The same broker login, traded at the broker itself (another terminal): its events reach the gateway.
    const other = new SimBrokerConnection(bs.sim, { server: 'Sim-P5-Demo', login: 'full-stream', password: 'pw' });
    await other.connect();
    let fresh: StreamClient | undefined;
    const failed = () => logs.some((l) => /DATA_DIR is full: background writes wait/.test(l.msg) && l.what === 'stream history');
    let orders = 0;
    const trade = async () => {
      const before = stored().length;
      await other.orderSend({ symbol: 'BTCUSD', type: 'Buy', volume: 0.01 });
      orders++;
      await until(() => failed() || stored().length > before, 'the trade\'s events written or waiting');
    };
    try {
      gw.gw.services.db.pragma('wal_checkpoint(TRUNCATE)');
      const filler = fillUp(mnt);
      try {
        // The WAL may still have room for a few batches (pages the shards' writes added between the
        // test's checkpoint and the filler, reused once a checkpoint resets it): those trades' frames
        // are stored and sent, and a later trade meets the full disk (ci37: not within 10).
        for (let i = 0; i < 40 && !failed(); i++) await trade();
        expect(failed()).toBe(true);
        // /readyz says what waits on the main thread (the history first; its alive mark, should its
        // period come meanwhile, named after it).
        const ready = await gw.req('GET', '/readyz');
        expect([ready.status, ready.body.storage.mainWaiting]).toEqual([503, { since: expect.any(Number), what: expect.stringMatching(/^stream history(, stream history mark)?$/) }]);
        // A quote sent after the failed write: an account frame sent with it would have come before.
        await c.next('QUOTE');
        const storedWhileFull = stored();
        expect(accountFrames().map((f) => f.seq).filter((seq) => !storedWhileFull.includes(seq))).toEqual([]);
        const sentWhileFull = accountFrames().length;
        await other.orderSend({ symbol: 'BTCUSD', type: 'Buy', volume: 0.02 });
        orders++;
        await c.next('QUOTE');
        expect(accountFrames()).toHaveLength(sentWhileFull);
        expect(stored()).toEqual(storedWhileFull);
        // A socket that comes now: its snapshot (the lists as of frames not stored yet) waits too,
        // or a restart would find it ahead.
        fresh = await mustOpen(gw.url, { id, apiKey: key, heartbeat: '0' });
        clients.push(fresh);
        fresh.send({ action: 'subscribe', symbol: 'BTCUSD' });
        await fresh.next('QUOTE', 0);
        await fresh.next('QUOTE');
        expect(fresh.of('POSITIONS')).toEqual([]);
      } finally {
        rmSync(filler);
      }
      const freshSnapshot = await fresh!.next('ORDERS', 0);
      expect(stored()).toContain(freshSnapshot.seq);
      // Room again: written, then sent.
      await c.until(() => accountFrames().filter((f) => f.type === 'TRADE').length >= orders, 15_000, 'every TRADE frame once there is room');
      const sent = accountFrames().map((f) => f.seq);
      expect(new Set(sent).size).toBe(sent.length);
      expect(stored()).toEqual(expect.arrayContaining(sent));
      expectAccountStream(c.frames);
      expect(logs.filter((l) => l.msg === 'stream history write failed')).toEqual([]);
      expect(logs.filter((l) => /DATA_DIR is full: background writes wait/.test(l.msg))).toHaveLength(1);
      expect((await gw.req('GET', '/readyz')).body.storage.mainWaiting).toBeUndefined();
    } finally {
      await other.disconnect();
      reader.close();
    }
  }, 60_000);

  it('past STREAM_HISTORY_HELD_MAX_BYTES an account\'s waiting frames are dropped, never sent: its stream begins a new epoch (4014, the resume answers recovered:false), sent unstored until there is room, then stored again', async () => {
    const gw = t!;
    const { h, id, key, c, snapshot, reader, stored: storedSeqs } = await streamedAccount(gw, 'full-stream-cap');
    const epochOnDisk = () => (reader.prepare('SELECT epoch FROM stream_epochs WHERE account_id = ?').get(id) as { epoch: string } | undefined)?.epoch;
    const other = new SimBrokerConnection(bs.sim, { server: 'Sim-P5-Demo', login: 'full-stream-cap', password: 'pw' });
    await other.connect();
    const overflowLines = () => logs.filter((l) => /reached STREAM_HISTORY_HELD_MAX_BYTES/.test(l.msg));
    const metric = async (name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec((await gw.req('GET', '/metrics', { headers: h })).text)?.[1]);
    let r: StreamClient | undefined;
    let fresh: { epoch: string; seq: number } | undefined;
    try {
      gw.gw.services.db.pragma('wal_checkpoint(TRUNCATE)');
      const filler = fillUp(mnt);
      try {
        // Each order adds a position: the account's POSITIONS frames grow, and wait with its TRADEs.
        for (let i = 0; i < 300 && !c.closed; i++) {
          await other.orderSend({ symbol: 'BTCUSD', type: 'Buy', volume: 0.01 });
          if (i % 10 === 9) expect(await metric('tagw_stream_history_held_bytes')).toBeLessThanOrEqual(64 * 1024);
        }
        await c.until(() => c.closed, 15_000, 'the socket closed when its frames passed the bound');
        expect(c.closed!.code).toBe(4014);
        // One line an episode (stream-history-held.test.ts counts them with the timers in hand); here
        // the file system can free a little meanwhile (a WAL shrinking), a write then succeeds and ends
        // the episode, and the next overflow begins another (ci24: two lines). Every one is this account's.
        const lines = overflowLines();
        expect(lines.length).toBeGreaterThanOrEqual(1);
        expect(lines.map((l) => l.accountId)).toEqual(lines.map(() => id));
        expect(await metric('tagw_stream_history_overflows_total')).toBeGreaterThanOrEqual(lines.length);
        // Nothing the socket got was missing from the disk: the frames that waited were never sent.
        const stored = storedSeqs();
        const got = c.frames.filter((f) => f.epoch === snapshot.epoch && f.seq > snapshot.seq && f.type !== 'RESUMED');
        expect(got.map((f) => f.seq).filter((seq) => !stored.includes(seq))).toEqual([]);
        // The client resumes from where it was: that position is gone, so recovered:false and fresh snapshots of the new epoch.
        const cursor = got.at(-1)?.seq ?? snapshot.seq;
        r = await mustOpen(gw.url, { id, apiKey: key, heartbeat: '0', since: `${snapshot.epoch}:${cursor}` });
        clients.push(r);
        const resumed = await r.next('RESUMED', 0);
        expect(resumed.data).toEqual({ recovered: false, replayed: 0 });
        const snap = await r.next('ORDERS', 0);
        const now = (fresh = { epoch: snap.epoch!, seq: snap.seq });
        expect(now.epoch).not.toBe(snapshot.epoch);
        // Its new epoch goes on while the disk is still full: sent as it comes (no disk holds it, no restart can contradict it).
        await other.orderSend({ symbol: 'BTCUSD', type: 'Sell', volume: 0.01 });
        const trade = await r.until((x) => x.frames.find((f) => f.type === 'TRADE' && f.epoch === now.epoch), 15_000, 'a TRADE of the new epoch while the disk is full');
        expect(epochOnDisk()).not.toBe(now.epoch);
        expect(storedSeqs()).not.toContain(trade.seq);
        expect(r.closed).toBeNull();
      } finally {
        rmSync(filler);
      }
      // Room again: the new epoch is written where it stands, and stored before sent from then on.
      await until(() => epochOnDisk() === fresh!.epoch, 'the new epoch written once there is room');
      const before = r!.frames.length;
      await other.orderSend({ symbol: 'BTCUSD', type: 'Sell', volume: 0.01 });
      const next = await r!.until((x) => x.frames.slice(before).find((f) => f.type === 'TRADE'), 15_000, 'a TRADE once there is room');
      expect(storedSeqs()).toContain(next.seq);
      // Written fresh: no row of the epoch before is left under it.
      expect(storedSeqs().every((seq) => seq > fresh!.seq)).toBe(true);
      expectAccountStream(r!.frames);
    } finally {
      await other.disconnect();
      reader.close();
    }
  }, 90_000);
});
