// The cluster scenarios' checker (test/helpers/orderLedger.ts) checked itself: a clean history (each
// id executed at most once, every 200 executed under the ticket it answered) passes, and each kind
// of damage to one (a doubled order, a 200 that never executed, a wrong ticket, a stray order) is
// flagged, naming the id.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { assertLedger, checkLedger, type Attempt, type BrokerOrder } from '../helpers/orderLedger.js';

const NODES = ['n-a', 'n-b', 'n-c'];
const failed = fc.constantFrom<number | 'refused'>('refused', 503, 409, 500);

/** Per id: its attempts (retries on any node) and whether the broker executed it. An id with a 200
 *  was executed; one with only failed attempts may or may not have been (a node died after sending it). */
const history = fc.uniqueArray(fc.stringMatching(/^[a-z0-9-]{1,12}$/), { minLength: 1, maxLength: 25 }).chain((ids) =>
  fc.tuple(...ids.map((id) => fc.record({
    id: fc.constant(id),
    fails: fc.array(fc.record({ node: fc.constantFrom(...NODES), status: failed }), { maxLength: 3 }),
    ok: fc.array(fc.constantFrom(...NODES), { maxLength: 2 }),
    executedAnyway: fc.boolean(),
  }))).map((rows) => {
    const attempts: Attempt[] = [];
    const broker: BrokerOrder[] = [];
    rows.forEach((r, i) => {
      const ticket = 1000 + i;
      for (const f of r.fails) attempts.push({ clientOrderId: r.id, node: f.node, status: f.status });
      for (const node of r.ok) attempts.push({ clientOrderId: r.id, node, status: 200, ticket });
      if (r.ok.length > 0 || (r.executedAnyway && r.fails.length > 0)) broker.push({ ticket, clientOrderId: r.id });
    });
    return { attempts, broker };
  }));

const clean = { doubled: [], missing: [], wrongTicket: [], unknown: [] };

describe('order ledger checker', () => {
  it('property: a clean history passes, in any order of attempts and broker rows', () => {
    fc.assert(fc.property(history, fc.integer(), ({ attempts, broker }, seed) => {
      const shuffled = [...attempts].sort((a, b) => ((a.clientOrderId.length * seed) % 7) - ((b.clientOrderId.length * seed) % 7));
      expect(checkLedger(shuffled, [...broker].reverse())).toStrictEqual(clean);
      assertLedger(shuffled, broker);
    }));
  });

  it('property: an order executed twice is flagged as doubled, with both tickets', () => {
    fc.assert(fc.property(history, fc.nat(), ({ attempts, broker }, pick) => {
      fc.pre(broker.length > 0);
      const victim = broker[pick % broker.length]!;
      const damaged = [...broker, { ticket: 99_999, clientOrderId: victim.clientOrderId }];
      const f = checkLedger(attempts, damaged);
      expect(f.doubled).toStrictEqual([{ clientOrderId: victim.clientOrderId, tickets: [victim.ticket, 99_999] }]);
      expect(f.missing).toStrictEqual([]);
      expect(() => assertLedger(attempts, damaged)).toThrow(`doubled ${victim.clientOrderId}: tickets ${victim.ticket},99999`);
    }));
  });

  it('property: a 200 that is not at the broker is flagged as missing', () => {
    fc.assert(fc.property(history, fc.nat(), ({ attempts, broker }, pick) => {
      const answered = [...new Set(attempts.filter((a) => a.status === 200).map((a) => a.clientOrderId))];
      fc.pre(answered.length > 0);
      const victim = answered[pick % answered.length]!;
      const damaged = broker.filter((o) => o.clientOrderId !== victim);
      const f = checkLedger(attempts, damaged);
      expect(f.missing).toStrictEqual([victim]);
      expect(f.doubled).toStrictEqual([]);
      expect(() => assertLedger(attempts, damaged)).toThrow(`missing ${victim}: answered 200 but not at the broker`);
    }));
  });

  it('property: an id executed without any 200 (outcome unknown to the client) is not a finding', () => {
    fc.assert(fc.property(history, ({ attempts, broker }) => {
      const unanswered = attempts.filter((a) => a.status !== 200);
      const ids = new Set(unanswered.map((a) => a.clientOrderId));
      expect(checkLedger(unanswered, broker.filter((o) => ids.has(o.clientOrderId)))).toStrictEqual(clean);
    }));
  });

  it('a 200 answering another order\'s ticket, and an order no client sent, are flagged', () => {
    const attempts: Attempt[] = [
      { clientOrderId: 'a', node: 'n-a', status: 'refused' },
      { clientOrderId: 'a', node: 'n-b', status: 200, ticket: 7 },
    ];
    expect(checkLedger(attempts, [{ ticket: 8, clientOrderId: 'a' }, { ticket: 9, clientOrderId: 'zz' }])).toStrictEqual({
      doubled: [], missing: [], wrongTicket: [{ clientOrderId: 'a', answered: 7, broker: 8 }], unknown: [{ ticket: 9, clientOrderId: 'zz' }],
    });
    expect(() => assertLedger(attempts, [{ ticket: 8, clientOrderId: 'a' }])).toThrow(/wrong ticket a: answered #7, the broker has #8/);
  });
});
