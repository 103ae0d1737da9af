// HeldWrites (src/store/heldWrites.ts), the one loop the full-disk writers share: a write that meets
// a full disk is held, one retry timer runs while anything waits, the retry writes what is held
// (holding it again while the disk is still full), a stop tries once more and leaves no timer, and
// the log has one line when an episode begins and one when it ends. A model of it, run against the
// real helper with a scheduler in the test's hands (no time) and a disk whose fullness the commands set.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { FullDisk } from '../../src/store/fullDisk.js';
import { HeldWrites } from '../../src/store/heldWrites.js';
import { ManualScheduler } from '../helpers/fullDisk.js';

const full = () => Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });

interface Real {
  disk: { full: boolean };
  written: number[];
  lines: Array<{ level: string; msg: string }>;
  sched: ManualScheduler;
  held: HeldWrites<number>;
  write(items: number[]): void;
}

function real(): Real {
  const r = { disk: { full: false }, written: [] as number[], lines: [] as Array<{ level: string; msg: string }>, sched: new ManualScheduler() } as Real;
  const log = createLogger('info', {}, (line) => r.lines.push(JSON.parse(line) as { level: string; msg: string }));
  // A writer as TradeRecords is one: its own batch tried now, a retry writing what was held.
  r.write = (items) => {
    r.held.attempt(() => {
      if (r.disk.full) throw full();
      r.written.push(...items);
    }, items);
  };
  r.held = new HeldWrites<number>({ fullDisk: new FullDisk({ log, retryMs: 1_000 }), what: 'test writes', retry: (items) => r.write(items), sizeOf: () => 10, scheduler: r.sched });
  return r;
}

interface Model { full: boolean; written: number[]; held: number[]; armed: boolean; episode: boolean; begun: number; ended: number; next: number }

/** What the model says a write attempt of `items` does. */
function attempt(m: Model, items: number[]): void {
  if (m.full) {
    m.held.push(...items);
    m.armed = true;
    if (!m.episode) m.begun++;
    m.episode = true;
    return;
  }
  m.written.push(...items);
  if (m.held.length === 0) m.armed = false;
  if (m.episode) m.ended++;
  m.episode = false;
}

function retry(m: Model): void {
  m.armed = false;
  const items = m.held;
  m.held = [];
  attempt(m, items);
}

function check(m: Model, r: Real): void {
  const lines = (level: string, re: RegExp) => r.lines.filter((l) => l.level === level && re.test(l.msg)).length;
  // One expect() for all of it after each command (one per field was 40,000 calls of ~15 us).
  expect({
    written: r.written, held: r.held.held, size: r.held.size, retrying: r.held.retrying, waiting: r.held.waiting,
    // One timer while armed, never two.
    timers: r.sched.timers.size,
    fullLines: lines('error', /DATA_DIR is full/), roomLines: lines('info', /DATA_DIR has room again/),
    // Nothing lost, nothing twice: every item written or held, once.
    items: [...m.written, ...m.held].sort((a, b) => a - b),
  }).toEqual({
    written: m.written, held: m.held, size: m.held.length * 10, retrying: m.armed, waiting: m.armed || m.held.length > 0,
    timers: m.armed ? 1 : 0,
    fullLines: m.begun, roomLines: m.ended,
    items: Array.from({ length: m.next }, (_, i) => i),
  });
}

class Write implements fc.Command<Model, Real> {
  constructor(readonly n: number) {}
  check = () => true;
  run(m: Model, r: Real): void {
    const items = Array.from({ length: this.n }, () => m.next++);
    r.write(items);
    attempt(m, items);
    check(m, r);
  }
  toString = () => `write(${this.n})`;
}

class Disk implements fc.Command<Model, Real> {
  constructor(readonly full: boolean) {}
  check = () => true;
  run(m: Model, r: Real): void {
    m.full = r.disk.full = this.full;
    check(m, r);
  }
  toString = () => (this.full ? 'disk full' : 'disk has room');
}

class Fire implements fc.Command<Model, Real> {
  check = () => true;
  run(m: Model, r: Real): void {
    r.sched.fire();
    if (m.armed) retry(m);
    check(m, r);
  }
  toString = () => 'retry timer';
}

class OtherFailure implements fc.Command<Model, Real> {
  check = () => true;
  run(m: Model, r: Real): void {
    expect(() => r.held.attempt(() => {
      throw new Error('disk I/O error');
    }, [-1])).toThrow('disk I/O error');
    check(m, r);
  }
  toString = () => 'other failure';
}

class Stop implements fc.Command<Model, Real> {
  check = () => true;
  run(m: Model, r: Real): void {
    r.held.stop();
    if (m.armed || m.held.length > 0) retry(m);
    m.armed = false;
    // What still waits stays held, with no timer: the writer's to keep or lose.
    check(m, r);
  }
  toString = () => 'stop';
}

describe('HeldWrites', () => {
  it('holds what meets a full disk, retries it on one timer, in order, once each, and logs one line per episode', () => {
    const commands = [
      fc.integer({ min: 1, max: 3 }).map((n) => new Write(n)),
      fc.boolean().map((f) => new Disk(f)),
      fc.constant(new Fire()),
      fc.constant(new OtherFailure()),
      fc.constant(new Stop()),
    ];
    fc.assert(fc.property(fc.commands(commands, { maxCommands: 60, size: 'max' }), (cmds) => {
      fc.modelRun(() => ({ model: { full: false, written: [], held: [], armed: false, episode: false, begun: 0, ended: 0, next: 0 }, real: real() }), cmds);
    }), { numRuns: 80 });
  });

  it('a writer that keeps its rows itself (the simulator journal): the retry runs with nothing held, and a write a request waits for is not held', () => {
    const r = real();
    let tries = 0;
    const h = new HeldWrites<never>({ fullDisk: new FullDisk({ log: createLogger('silent'), retryMs: 5 }), what: 'journal', retry: () => tries++, scheduler: r.sched });
    expect(h.attempt(() => {
      throw full();
    })).toBe(false);
    expect([h.waiting, h.retrying, (h.reason as Error).message]).toEqual([true, true, 'database or disk is full']);
    r.sched.fire();
    expect([tries, h.waiting]).toEqual([1, false]);
    expect(() => h.attempt(() => {
      throw full();
    }, [], false)).toThrow('database or disk is full');
    expect(h.waiting).toBe(false);
  });
});

// The order of what is held. A writer of state rows per key (a seat's state: seats.ts, `keyOf`) and
// an append-only writer (journal rows: a later row waits behind what is held, as HistoryWrites' do)
// share one FullDisk. A seat's BUILDING row held on a full disk was written by the retry after its
// ACTIVE row, written at once when room returned: the stored state went backwards. Now the latest
// row of a key wins (the held one dropped once a newer one is written, replaced by one held after
// it), and the appended rows keep their order.
interface Ordered {
  disk: { full: boolean };
  /** What the disk holds: per key, the value of its row; the appended rows in order. */
  stored: Map<number, number>;
  appended: number[];
  sched: ManualScheduler;
  keyed: HeldWrites<{ key: number; v: number }>;
  log: HeldWrites<number>;
  /** Per key, the last value written (asked to be); the rows appended, in order. */
  last: Map<number, number>;
  rows: number[];
  next: number;
  /** A new row of `key` (its value the next number); a new appended row. */
  put(key: number): void;
  append(): void;
}

function ordered(): Ordered {
  const o = { disk: { full: false }, stored: new Map(), appended: [], sched: new ManualScheduler(), last: new Map(), rows: [], next: 0 } as unknown as Ordered;
  const fullDisk = new FullDisk({ log: createLogger('silent'), retryMs: 1_000 });
  const put = (rows: Array<{ key: number; v: number }>) => {
    o.keyed.attempt(() => {
      if (o.disk.full) throw full();
      for (const r of rows) o.stored.set(r.key, r.v);
    }, rows);
  };
  const append = (rows: number[]) => {
    o.log.attempt(() => {
      if (o.disk.full) throw full();
      o.appended.push(...rows);
    }, rows);
  };
  o.keyed = new HeldWrites({ fullDisk, what: 'seat state', keyOf: (r) => String(r.key), retry: put, scheduler: o.sched });
  o.log = new HeldWrites({ fullDisk, what: 'journal', retry: append, scheduler: o.sched });
  o.put = (key) => {
    const row = { key, v: o.next++ };
    o.last.set(key, row.v);
    put([row]);
  };
  o.append = () => {
    const row = o.next++;
    o.rows.push(row);
    if (o.log.waiting) o.log.hold([row]);
    else append([row]);
  };
  return o;
}

/** Every step: no key's stored value older than one stored before, nothing lost (stored or held, the
 *  last of each key), the appended rows a prefix of the rows in order, the held ones the rest. */
function checkOrdered(o: Ordered, before: Map<number, number>): void {
  for (const [k, v] of before) expect(o.stored.get(k)!).toBeGreaterThanOrEqual(v);
  const heldKeys = o.keyed.held.map((r) => r.key);
  expect(new Set(heldKeys).size).toBe(heldKeys.length); // one row a key
  for (const [k, v] of o.last) {
    const held = o.keyed.held.find((r) => r.key === k);
    expect(held ? held.v : o.stored.get(k)).toBe(v);
  }
  expect([...o.appended, ...o.log.held]).toEqual(o.rows);
}

type OrderedCommand = fc.Command<object, Ordered>;
const step = (name: string, f: (o: Ordered) => void): OrderedCommand => ({
  check: () => true,
  run: (_m, o) => {
    const before = new Map(o.stored);
    f(o);
    checkOrdered(o, before);
  },
  toString: () => name,
});

describe('HeldWrites: the order of what is held', () => {
  it('a key\'s stored row always ends as its last written, never older than one stored before; appended rows keep their order', () => {
    const commands = [
      fc.integer({ min: 0, max: 2 }).map((k) => step(`put(${k})`, (o) => o.put(k))),
      fc.constant(step('append', (o) => o.append())),
      fc.boolean().map((f) => step(f ? 'disk full' : 'disk has room', (o) => {
        o.disk.full = f;
      })),
      fc.constant(step('retry timer', (o) => o.sched.fire())),
      fc.constant(step('stop', (o) => {
        o.keyed.stop();
        o.log.stop();
      })),
    ];
    fc.assert(fc.property(fc.commands(commands, { maxCommands: 60, size: 'max' }), (cmds) => {
      let o: Ordered | undefined;
      fc.modelRun(() => ({ model: {}, real: (o = ordered()) }), cmds);
      // Room, and what waits written (the retry, or after a stop a flush): every key's row is its
      // last written, every appended row there, in order.
      o!.disk.full = false;
      o!.keyed.flush();
      o!.log.flush();
      expect([o!.keyed.waiting, o!.log.waiting]).toEqual([false, false]);
      expect(o!.stored).toEqual(o!.last);
      expect(o!.appended).toEqual(o!.rows);
    }), { numRuns: 100 });
  });

  it('the seat\'s case: BUILDING held, ACTIVE written at once with room, then the retry: ACTIVE stays', () => {
    const o = ordered();
    o.disk.full = true;
    o.put(1); // BUILDING
    o.disk.full = false;
    o.put(1); // ACTIVE, at once
    const active = o.stored.get(1);
    o.sched.fire();
    expect(o.stored.get(1)).toBe(active);
    expect([o.keyed.waiting, o.sched.timers.size]).toEqual([false, 0]);
  });
});
