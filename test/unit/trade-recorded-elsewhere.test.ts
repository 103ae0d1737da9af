// Cluster mode's trades: the idempotency record is the ledger's (PostgreSQL), and a retry of an
// uncertain one asks the broker by the record's request id (docs/cluster.md). A lost reply's error
// says what that retry does, not the single node's "answers 409".
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../src/errors.js';
import { BrokerDisconnectedError, BrokerTimeoutError } from '../../src/market/brokerErrors.js';
import { tradeRecordedElsewhere } from '../../src/runtime/hosts/tradeRequest.js';
import type { AccountEntry } from '../../src/runtime/hosts/accountEntry.js';

function entryFailing(err: Error, looked: unknown = null): { entry: AccountEntry; sent: string[]; released: () => number } {
  const sent: string[] = [];
  let released = 0;
  const conn = {
    orderSend: async (_req: unknown, o: { requestId: string }) => {
      sent.push(o.requestId);
      throw err;
    },
    lookupRequest: async () => looked,
  };
  const entry = { platform: 'MT5', build: 4000, acquire: async () => ({ conn, release: () => void released++ }) } as unknown as AccountEntry;
  return { entry, sent, released: () => released };
}

const order = { symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 };

describe('tradeRecordedElsewhere (cluster: the record is the ledger\'s)', () => {
  it('a reply lost after the send, unknown to the broker: 500 TERMINAL_ERROR saying a retry asks the broker again (not "answers 409")', async () => {
    const f = entryFailing(new BrokerTimeoutError(true));
    const err = await tradeRecordedElsewhere(f.entry, 'OrderSend', order, 'acct/lost-1/x').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 500, code: 'TERMINAL_ERROR' });
    expect((err as ApiError).message).toContain('asks the broker again');
    expect((err as ApiError).message).not.toContain('answers 409');
    expect(f.sent).toEqual(['acct/lost-1/x']);
    expect(f.released()).toBe(1);
  });

  it('a reply lost that the broker knows: its answer (200), sent once', async () => {
    const result = { ok: true, retcode: 10009, order: { ticket: 7 }, deals: [] };
    const f = entryFailing(new BrokerTimeoutError(true), { result });
    const reply = await tradeRecordedElsewhere(f.entry, 'OrderSend', order, 'acct/known-1/x').catch((e: unknown) => e);
    expect(reply).toMatchObject({ status: 200, replay: false });
    expect(f.sent).toEqual(['acct/known-1/x']);
  });

  it('certainly not sent (disconnected): 503 NOT_CONNECTED, retry', async () => {
    const f = entryFailing(new BrokerDisconnectedError('gone'));
    const err = await tradeRecordedElsewhere(f.entry, 'OrderSend', order, 'acct/ns-1/x').catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 503, code: 'NOT_CONNECTED' });
  });
});
