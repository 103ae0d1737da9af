// The idempotency record machine alone: durability order, phases, and the 24 h expiry as a timer state.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createActor, fromPromise } from 'xstate';
import { idempotencyMachine, NotSentError, type IdempotencyContext, type StoredResult } from '../actors/idempotency.js';

const DAY = 24 * 3_600_000;
beforeEach(() => {
  vi.useFakeTimers({ now: 1_700_000_000_000 });
});
afterEach(() => {
  vi.useRealTimers();
});

function run(phase: 'new' | 'sent' | 'result' | 'uncertain', exec: () => Promise<StoredResult>, result?: StoredResult) {
  const log: string[] = [];
  const m = idempotencyMachine.provide({
    actors: { execute: fromPromise(() => { log.push('execute'); return exec(); }) },
    actions: {
      persistSent: () => void log.push('persistSent'),
      persistResult: (_a, c: IdempotencyContext) => void log.push(`persistResult:${c.result!.status}`),
      persistUncertain: () => void log.push('persistUncertain'),
      forget: () => void log.push('forget'),
    },
  });
  const actor = createActor(m, {
    input: { accountId: 'a', clientOrderId: 'x', paramsHash: 'h', phase, expiresAt: Date.now() + DAY, ...(result ? { result } : {}) },
  });
  actor.start();
  return { actor, log };
}

describe('idempotency machine', () => {
  it('persists the sent phase before the order is executed, then the result', async () => {
    const { actor, log } = run('new', async () => ({ status: 200, body: { ticket: 1 } }));
    expect(actor.getSnapshot().value).toBe('new');
    actor.send({ type: 'send' });
    await vi.advanceTimersByTimeAsync(0);
    expect(log).toEqual(['persistSent', 'execute', 'persistResult:200']);
    expect(actor.getSnapshot().value).toBe('result');
  });

  it('a failure after send is uncertain; a certain non-send is discarded (forgotten)', async () => {
    const a = run('new', () => Promise.reject(new Error('reply lost')));
    a.actor.send({ type: 'send' });
    await vi.advanceTimersByTimeAsync(0);
    expect(a.actor.getSnapshot().value).toBe('uncertain');
    expect(a.log).toEqual(['persistSent', 'execute', 'persistUncertain']);
    const b = run('new', () => Promise.reject(new NotSentError('disconnected')));
    b.actor.send({ type: 'send' });
    await vi.advanceTimersByTimeAsync(0);
    expect(b.actor.getSnapshot().status).toBe('done');
    expect(b.log).toEqual(['persistSent', 'execute', 'forget']);
  });

  it('restored: sent without result → uncertain (never re-executed); result stays result', () => {
    const exec = vi.fn(async () => ({ status: 200, body: {} }));
    const a = run('sent', exec);
    expect(a.actor.getSnapshot().value).toBe('uncertain');
    const b = run('result', exec, { status: 400, body: { error: 'TRADE_REQUEST_ERROR' } });
    expect(b.actor.getSnapshot().value).toBe('result');
    expect(exec).not.toHaveBeenCalled();
  });

  it('expires 24 h after creation', async () => {
    const { actor, log } = run('result', async () => ({ status: 200, body: {} }), { status: 200, body: {} });
    await vi.advanceTimersByTimeAsync(DAY - 1);
    expect(actor.getSnapshot().value).toBe('result');
    await vi.advanceTimersByTimeAsync(1);
    expect(actor.getSnapshot().status).toBe('done');
    expect(log).toContain('forget');
  });
});
