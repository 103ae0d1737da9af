// `npm run chaos` (both files) or `npm run chaos -- single` (this one; CHAOS_MINUTES, default 10, 0
// for one schedule; CHAOS_SEED to replay one): the single-node default, one gateway process with
// SHARDS=3 over one SQLite file and the embedded simulator in each shard, under random fault
// schedules one after another (test/helpers/chaosSchedule.ts, singleScheduleArb: SIGKILL and a
// restart on the same data dir, at a random moment or just after a shard moved idempotency keys;
// SIGSTOP/SIGCONT; SIGTERM and a restart, or SIGKILL during its drain; a seat removed (its clients
// stopped first, or trading on) and its login bound again by a new seat on another shard; simulator
// faults on a login through POST /v1/sim/faults) while idempotent bots
// trade on four fresh accounts per schedule (two on the simulator's P5 server, two on its P4 server:
// mixedBot, market orders, closes, pending orders placed, modified and deleted), retrying each
// clientOrderId after a refusal or a 503, and as the answers advise (followsRetryAdvice: a reply lost
// after sending is a 500 TERMINAL_ERROR, then 409 final:false, with retry-after), and the SDK's streams of one account per server follow
// through a proxy to whichever process runs. After each schedule, once requests are accepted again:
// the cluster run's checks (test/helpers/chaosCheck.ts) against the simulator's book as its shards
// left it in the database (read from a backup of the live file): each login's whole history, across
// its seats, against it; every final answer 200 or 409 IDEMPOTENCY_UNCERTAIN; every 503 clean; no
// hung request; every accepted order's TRADE once on the streams. Not part of `npm test`.
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { shardOf } from '../../src/runtime/protocol.js';
import { loadSimConfig } from '../../src/sim/config.js';
import { Simulator } from '../../src/sim/simulator.js';
import { openDb } from '../../src/store/db.js';
import { SqliteSimStore } from '../../src/store/simStore.js';
import { addSummary, checkLedgers, checkStreams, newTotals, summarize, watchStream, type History } from '../helpers/chaosCheck.js';
import { describeSingleStep, singleScheduleArb, type SingleFault, type SingleStep } from '../helpers/chaosSchedule.js';
import type { ClusterAccount, SimServer } from '../helpers/clusterProcs.js';
import { followsRetryAdvice, mixedBot, startTraffic, tally, type Answer, type Targets, type Traffic } from '../helpers/clusterTraffic.js';
import type { BrokerBook } from '../helpers/orderLedger.js';
import { cleanupProcesses, startProcess, tempDir, type GatewayProcess } from '../helpers/process.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcpProxy.js';
import { until } from '../helpers/until.js';

const MINUTES = Number(process.env.CHAOS_MINUTES ?? 10);
if (!(MINUTES >= 0)) throw new Error(`CHAOS_MINUTES=${process.env.CHAOS_MINUTES}: a number of minutes (0: one schedule)`);
const SEED = process.env.CHAOS_SEED === undefined ? undefined : Number(process.env.CHAOS_SEED);
/** An attempt with no answer this long hung (tradeVia gives up at 20 s). */
const HUNG_MS = 19_000;
const SHARDS = 3;
/** Clients per account (CHAOS_CLIENTS, default 2): more, more orders in flight at each fault. */
const CLIENTS = Number(process.env.CHAOS_CLIENTS ?? 2);
if (!(CLIENTS >= 1)) throw new Error(`CHAOS_CLIENTS=${process.env.CHAOS_CLIENTS}: clients per account, at least 1`);
const MK = 'single-chaos-management-key-0123456789';
/** Each schedule's fresh accounts; the streams followed: the first of each server's; the others
 *  may be re-bound (REBINDABLE[f.slot] of a 'rebind' fault). */
const SERVERS: readonly SimServer[] = ['Sim-P5-Demo', 'Sim-P5-Demo', 'Sim-P4-Demo', 'Sim-P4-Demo'];
const WATCHED = [0, 2];
const REBINDABLE = [1, 3];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const dataDir = tempDir('tagw-chaos-single-');
const node = { id: 'gw', url: '', port: 0 };
let proc: GatewayProcess | undefined;
let state: 'running' | 'stopped' | 'down' = 'down';
/** What the bots send to: the one process while it runs. */
const targets: Targets = { nodes: [node], running: () => (state === 'running' ? [node] : []) };
/** The streams' way in: new connections go to the running process's port. */
let proxy: TcpProxy | undefined;
/** The logs of the processes this schedule ended (for its error lines, and CHAOS_DEBUG's files). */
const ended: string[] = [];
let debugDir: string | undefined;
/** Where the running process's log of this schedule starts. */
let logFrom = 0;

afterAll(async () => {
  if (state === 'stopped') proc?.child.kill('SIGCONT');
  await proxy?.close();
  cleanupProcesses();
});

async function launch(): Promise<void> {
  if (proc) ended.push(proc.output().slice(logFrom));
  proc = startProcess({ GATEWAY_MANAGEMENT_KEY: MK, SHARDS: String(SHARDS), LOG_LEVEL: 'info' }, dataDir);
  logFrom = 0;
  node.url = await proc.listening;
  node.port = Number(new URL(node.url).port);
  state = 'running';
  if (!proxy) {
    proxy = await startTcpProxy(node.port);
    proxy.target(() => node.port);
  }
}

async function kill(): Promise<void> {
  state = 'down';
  proc!.child.kill('SIGKILL');
  await proc!.exited;
}

/** Kills timed on a key move this schedule: those that saw one, and those that waited 5 s for none. */
const killsAtMove = { afterMove: 0, noMove: 0 };

/** SIGKILL `afterMoveMs` after idempotency_moved.through next changes (5 s at most: then at once). */
async function killAtMove(afterMoveMs: number): Promise<void> {
  const db = new Database(join(dataDir, 'tagw.sqlite'), { readonly: true, fileMustExist: true });
  try {
    const through = db.prepare('SELECT through FROM idempotency_moved').pluck();
    const first = through.get();
    const deadline = Date.now() + 5_000;
    while (through.get() === first && Date.now() < deadline) await sleep(2);
    killsAtMove[through.get() === first ? 'noMove' : 'afterMove']++;
  } finally {
    db.close();
  }
  await sleep(afterMoveMs);
  await kill();
}

async function term(): Promise<void> {
  state = 'down';
  proc!.child.kill('SIGTERM');
  const code = await Promise.race([proc!.exited, sleep(30_000).then(() => 'hung' as const)]);
  if (code !== 0) throw new Error(`SIGTERM: the gateway ${code === 'hung' ? 'did not exit in 30 s' : `exited ${code}`}\n${proc!.output().slice(-4_000)}`);
}

/** A management request, sent again while the process is down or answers 503 (60 s at most).
 *  `unanswered`: an earlier attempt got no answer (it may have been carried out). */
async function manage(method: string, path: string, body?: unknown): Promise<{ status: number; body: any; unanswered: boolean }> {
  const deadline = Date.now() + 60_000;
  let unanswered = false;
  for (;;) {
    try {
      const r = await fetch(node.url + path, {
        method, headers: { authorization: `Bearer ${MK}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}), signal: AbortSignal.timeout(20_000),
      });
      const text = await r.text();
      if (r.status !== 503 || Date.now() > deadline) return { status: r.status, body: text ? JSON.parse(text) : undefined, unanswered };
    } catch (err) {
      if (Date.now() > deadline) throw err;
      unanswered = true;
    }
    await sleep(200);
  }
}

let apiKey: string | undefined;

/** A seat (on another shard than `notOn`'s, if given) bound to `login` on `server`. */
async function bindSeat(server: SimServer, login: string, notOn?: string): Promise<ClusterAccount> {
  apiKey ??= (await manage('POST', '/v1/keys', { label: 'chaos' })).body.key as string;
  let seat: string | undefined;
  if (notOn !== undefined) {
    while (seat === undefined) {
      const r = await manage('POST', '/v1/seats', {});
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      // One on the same shard stays, unbound (no login: nothing runs for it).
      if (shardOf(r.body.id as string, SHARDS) !== shardOf(notOn, SHARDS)) seat = r.body.id as string;
    }
  }
  const deadline = Date.now() + 30_000;
  for (;;) {
    const r = await manage('POST', '/ConnectEx', { ...(seat ? { id: seat } : {}), user: login, password: 'pw', server });
    if (r.status === 200) return { id: r.body.id as string, key: apiKey, login, server };
    // A login still let go of by its removed seat's shard may be refused a moment.
    if (Date.now() > deadline) throw new Error(`ConnectEx of ${login}: ${r.status} ${JSON.stringify(r.body)}`);
    await sleep(200);
  }
}

/** An account's slot in a schedule: its login, the seats that held it, and every client's requests
 *  (`removedUnder`: the final answers of clients whose seat was removed while they traded). */
interface Slot { server: SimServer; login: string; acct: ClusterAccount; traffic: Traffic; past: Traffic[]; gen: number; tag: string; removedUnder: Set<Answer> }

function startSlotTraffic(slot: Slot): Traffic {
  return startTraffic(targets, slot.acct, { tag: `${slot.tag}-g${slot.gen}`, clients: CLIENTS, pauseMs: 400, bot: mixedBot, retry: followsRetryAdvice });
}

/** The login's whole history, across its seats. */
const historyOf = (s: Slot): History => {
  const all = [...s.past, s.traffic];
  return { log: all.flatMap((t) => t.log), finals: all.flatMap((t) => t.finals) };
};

async function carryOut(f: SingleFault, slots: Slot[]): Promise<void> {
  switch (f.kind) {
    case 'kill':
      await kill();
      await sleep(f.downMs);
      return launch();
    case 'killAtMove':
      await killAtMove(f.afterMoveMs);
      await sleep(f.downMs);
      return launch();
    case 'freeze':
      state = 'stopped';
      proc!.child.kill('SIGSTOP');
      await sleep(f.ms);
      proc!.child.kill('SIGCONT');
      state = 'running';
      return;
    case 'term':
      await term();
      return launch();
    case 'termKill':
      state = 'down';
      proc!.child.kill('SIGTERM');
      await Promise.race([proc!.exited, sleep(f.afterMs)]);
      await kill();
      return launch();
    case 'rebind': {
      // As an operator would: the clients of the seat stop, the seat goes, a new one takes its login.
      const slot = slots[REBINDABLE[f.slot]!]!;
      if (!f.live) await slot.traffic.stop();
      // A removal whose answer the process took with it when killed may have been done: 404 then.
      const r = await manage('DELETE', `/v1/seats/${slot.acct.id}`);
      expect(r.status === 200 || (r.status === 404 && r.unanswered), `DELETE /v1/seats: ${r.status} ${JSON.stringify(r.body)}`).toBe(true);
      if (f.live) {
        // Its clients' requests from here on, and those in flight, may find the seat gone: 404.
        await slot.traffic.stop();
        for (const a of slot.traffic.finals) if (a.status === 404) slot.removedUnder.add(a);
      }
      const old = slot.acct.id;
      slot.acct = await bindSeat(slot.server, slot.login, old);
      slot.past.push(slot.traffic);
      slot.gen++;
      slot.traffic = startSlotTraffic(slot);
      return;
    }
    case 'sim': {
      const slot = slots[f.slot]!;
      const fields = f.fault === 'latency' ? { latencyMs: Math.min(f.ms, 1_500), durationMs: f.ms }
        : f.fault === 'drop' ? { durationMs: f.ms }
          : f.fault === 'unknownAfterSend' ? { probability: 0.5, lookupFailMs: f.ms, durationMs: f.ms }
            : { probability: 0.5, durationMs: f.ms };
      const r = await manage('POST', '/v1/sim/faults', { server: slot.server, login: slot.login, kind: f.fault, ...fields });
      expect(r.status, `POST /v1/sim/faults: ${JSON.stringify(r.body)}`).toBe(201);
      return;
    }
  }
}

/** The simulator's book of each login as its shards left it in the database: a backup of the live
 *  file (consistent while the process writes), loaded by the simulator's own store. */
async function readBooks(logins: ReadonlyArray<{ server: SimServer; login: string }>): Promise<BrokerBook[]> {
  const dir = mkdtempSync(join(tmpdir(), 'tagw-chaos-book-'));
  try {
    const live = new Database(join(dataDir, 'tagw.sqlite'), { readonly: true, fileMustExist: true });
    try {
      await live.backup(join(dir, 'tagw.sqlite'));
    } finally {
      live.close();
    }
    const db = openDb(dir, { migrate: false });
    try {
      const store = new SqliteSimStore(db, { checkpointMs: 1e12 });
      const sim = new Simulator({ config: loadSimConfig(), store });
      return logins.map(({ server, login }) => {
        const acc = sim.server(server)!.login(login, 'pw');
        const to = Number.MAX_SAFE_INTEGER;
        return { deals: store.deals(server, login, 0, to), history: store.historyOrders(server, login, 0, to), positions: acc.positionList(), orders: acc.pendingList() };
      });
    } finally {
      db.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('single-node chaos', () => {
  it(`random fault schedules for ${MINUTES} min on one gateway (SHARDS=${SHARDS}, SQLite, embedded simulator): nothing doubled, nothing answered 200 lost, only clean 503s`, async () => {
    await launch();
    const totals = newTotals();
    // One schedule per fast-check run under a seed of its own (printed first), as the cluster run:
    // no schedule abandoned half-way, a failure reported as drawn (CHAOS_SEED replays it first).
    const firstSeed = SEED ?? Math.floor(Math.random() * 2 ** 31);
    const deadline = Date.now() + MINUTES * 60_000;
    for (let round = 1; round === 1 || Date.now() < deadline; round++) {
      const seed = firstSeed + round - 1;
      await fc.assert(fc.asyncProperty(singleScheduleArb(SERVERS.length, REBINDABLE.length), async (steps: SingleStep[]) => {
        console.log(`schedule ${round} (CHAOS_SEED=${seed}):\n  ${steps.map(describeSingleStep).join('\n  ')}`);
        const slots: Slot[] = [];
        for (const [i, server] of SERVERS.entries()) {
          const login = `s${firstSeed}-r${round}-${i}`;
          slots.push({ server, login, acct: await bindSeat(server, login), past: [], gen: 0, tag: `r${round}-${i}`, removedUnder: new Set() } as unknown as Slot);
        }
        // The streams first: every order's TRADE is owed to them.
        const watched = await Promise.all(WATCHED.map((i) => watchStream(slots[i]!.acct, proxy!.url)));
        for (const slot of slots) slot.traffic = startSlotTraffic(slot);
        const started = Date.now();
        let stopped = 0;
        let recovered = 0;
        try {
          for (const s of steps) {
            await Promise.all([carryOut(s.fault, slots), s.also ? sleep(s.alsoAfterMs ?? 0).then(() => carryOut(s.also!, slots)) : undefined]);
            await sleep(s.pauseMs);
          }
          expect((await manage('DELETE', '/v1/sim/faults')).status).toBe(200);
          const after = Date.now();
          await until(() => slots.every((s) => s.traffic.log.some((a) => a.status === 200 && a.sentAt >= after)), `orders accepted again after schedule ${round}`, 60_000)
            .catch((err: Error) => {
              throw new Error(`${err.message}; attempts since, per account: ${slots.map((s) => tally(s.traffic.log.filter((a) => a.sentAt >= after)) || 'none answered').join(' | ')}`);
            });
          recovered = Date.now();
        } finally {
          await Promise.all(slots.map((s) => s.traffic.stop()));
          stopped = Date.now();
        }
        const histories = slots.map(historyOf);
        // The gateway's error lines this schedule, each message once (a SIGKILL leaves none to write).
        const logs = [...ended, proc!.output().slice(logFrom)];
        const errorLines = logs.flatMap((o) => o.split('\n')).filter((l) => l.includes('"level":"error"'));
        if (process.env.CHAOS_DEBUG) {
          debugDir ??= mkdtempSync(join(tmpdir(), 'tagw-chaos-single-'));
          writeFileSync(join(debugDir, `schedule-${round}.log`), [...ended.map((o, i) => `--- process ${i + 1} (ended) ---\n${o}`), '--- running process ---', proc!.output()].join('\n'));
          console.log(`gateway log: ${debugDir}/schedule-${round}.log`);
          for (const w of watched) console.log(`stream frames of ${w.acct.server} (account ${w.acct.id}): ${w.frames.join(' ')}`);
          for (const h of histories) console.log(h.log.map((x) => `${x.kind ?? 'open'}${x.target ? `#${x.target}` : ''} ${x.clientOrderId}:${x.status}${x.ticket ? `#${x.ticket}` : ''} ${new Date(x.sentAt).toISOString()}+${x.answeredAt - x.sentAt}`).join('\n'));
        }
        // Nothing changes the books once the clients stopped (no stops, no fills).
        const books = await readBooks(slots);
        await checkStreams(round, WATCHED.map((i, k) => ({ w: watched[k]!, history: histories[i]!, book: books[i]! })), recovered);
        checkLedgers(round, slots.map((s, i) => ({
          what: `${s.server} ${s.login}`, history: histories[i]!, book: books[i]!,
          alsoFinal: (a) => s.removedUnder.has(a) && (a.body as { error?: unknown } | null)?.error === 'NOT_FOUND',
        })), HUNG_MS);
        const sum = summarize({ round, seed, faults: steps.reduce((n, s) => n + (s.also ? 2 : 1), 0), histories, books, watched, started, stopped });
        addSummary(totals, sum);
        ended.length = 0;
        logFrom = proc!.output().length;
        const errors = [...new Set(errorLines.map((l) => {
          const e = JSON.parse(l) as { msg: string; code?: string; route?: string };
          return [e.msg, e.code, e.route].filter(Boolean).join(' ');
        }))];
        console.log(JSON.stringify({ ...sum, killsAtMove, errorLines: errorLines.length, errors }));
        killsAtMove.afterMove = killsAtMove.noMove = 0;
        // Two records of one clientOrderId found by a key move (idempotencyKeys.ts): an id claimed twice.
        expect(errorLines.filter((l) => l.includes('second record of one clientOrderId')), `schedule ${round}: ids recorded twice`).toStrictEqual([]);
      }), { numRuns: 1, seed, endOnFailure: true });
    }
    console.log(JSON.stringify({ chaos: 'single', minutes: MINUTES, shards: SHARDS, clients: CLIENTS, ...totals }));
    // A last graceful stop: it exits 0.
    await term();
    expect(totals.schedules).toBeGreaterThan(0);
  }, MINUTES * 60_000 + 300_000);
});
