// The idempotency record machine alone: durability order, phases, and the 24 h expiry as a timer state.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createActor } from 'xstate';
import { freshRecord, idempotencyMachine, NotSentError, type IdempotencyContext, type StoredResult } from '../../actors/idempotency.js';

const DAY = 24 * 3_600_000;
beforeEach(() => {
  vi.useFakeTimers({ now: 1_700_000_000_000 });
});
afterEach(() => {
  vi.useRealTimers();
});

/**
 * Starts a record and plays the host's part: on entering `sent` it runs `exec` (the broker call)
 * and reports the outcome as the host does (`done` / `failed` for a certain non-send / `lost`).
 */
function run(phase: 'new' | 'sent' | 'result' | 'uncertain', exec: () => Promise<StoredResult>, result?: StoredResult) {
  const log: string[] = [];
  const m = idempotencyMachine.provide({
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
  const send = () => {
    actor.send({ type: 'send' });
    if (!actor.getSnapshot().matches('sent')) return;
    log.push('execute');
    exec().then(
      (r) => actor.send({ type: 'done', result: r }),
      (err: unknown) => actor.send(err instanceof NotSentError ? { type: 'failed' } : { type: 'lost' }),
    );
  };
  return { actor, log, send };
}

describe('idempotency machine', () => {
  it('persists the sent phase before the order is executed, then the result', async () => {
    const { actor, log, send } = run('new', async () => ({ status: 200, json: '{"ticket":1}' }));
    expect(actor.getSnapshot().value).toBe('new');
    send();
    await vi.advanceTimersByTimeAsync(0);
    expect(log).toEqual(['persistSent', 'execute', 'persistResult:200']);
    expect(actor.getSnapshot().value).toBe('result');
  });

  it('a failure after send is uncertain; a certain non-send is discarded (forgotten)', async () => {
    const a = run('new', () => Promise.reject(new Error('reply lost')));
    a.send();
    await vi.advanceTimersByTimeAsync(0);
    expect(a.actor.getSnapshot().value).toBe('uncertain');
    expect(a.log).toEqual(['persistSent', 'execute', 'persistUncertain']);
    const b = run('new', () => Promise.reject(new NotSentError('disconnected')));
    b.send();
    await vi.advanceTimersByTimeAsync(0);
    expect(b.actor.getSnapshot().status).toBe('done');
    expect(b.log).toEqual(['persistSent', 'execute', 'forget']);
  });

  it('outcome events count only while sent: no result without a durable send, no second send', () => {
    const a = run('new', async () => ({ status: 200, json: '{}' }));
    a.actor.send({ type: 'done', result: { status: 200, json: '{"forged":true}' } });
    a.actor.send({ type: 'lost' });
    expect(a.actor.getSnapshot().value).toBe('new');
    expect(a.log).toEqual([]);
    const b = run('result', async () => ({ status: 200, json: '{}' }), { status: 200, json: '{"ticket":1}' });
    b.actor.send({ type: 'send' });
    b.actor.send({ type: 'lost' });
    expect(b.actor.getSnapshot().value).toBe('result');
    expect(b.actor.getSnapshot().context.result).toEqual({ status: 200, json: '{"ticket":1}' });
    expect(b.log).toEqual([]);
  });

  it('a fresh claim started from freshRecord() is in new and goes new → sent → result like one from input', async () => {
    const log: string[] = [];
    const m = idempotencyMachine.provide({
      actions: {
        persistSent: (_a, c: IdempotencyContext) => void log.push(`persistSent:${c.phase}:${c.clientOrderId}`),
        persistResult: (_a, c: IdempotencyContext) => void log.push(`persistResult:${c.result!.status}`),
      },
    });
    const input = { accountId: 'a', clientOrderId: 'x', paramsHash: 'h', expiresAt: Date.now() + DAY };
    const actor = createActor(m, { snapshot: freshRecord(m, input), input: { ...input, phase: 'new' } });
    actor.start();
    expect(actor.getSnapshot().value).toBe('new');
    actor.send({ type: 'send' });
    expect(log).toEqual(['persistSent:sent:x']);
    actor.send({ type: 'done', result: { status: 200, json: '{"ticket":7}' } });
    expect(actor.getSnapshot().value).toBe('result');
    expect(actor.getSnapshot().context.result).toEqual({ status: 200, json: '{"ticket":7}' });
    expect(log).toEqual(['persistSent:sent:x', 'persistResult:200']);
    // Resting: no timer of its own (the host lets it go; its row expires).
    await vi.advanceTimersByTimeAsync(DAY);
    expect(actor.getSnapshot().value).toBe('result');
  });

  it('restored: sent without result → recovering (never re-executed); result stays result, uncertain stays uncertain', () => {
    const exec = vi.fn(async () => ({ status: 200, json: '{}' }));
    const a = run('sent', exec);
    expect(a.actor.getSnapshot().value).toBe('recovering');
    a.send(); // a new send is not accepted: the id was possibly sent already
    expect(a.actor.getSnapshot().value).toBe('recovering');
    const b = run('result', exec, { status: 400, json: '{"error":"TRADE_REQUEST_ERROR"}' });
    expect(b.actor.getSnapshot().value).toBe('result');
    expect(run('uncertain', exec).actor.getSnapshot().value).toBe('uncertain');
    expect(exec).not.toHaveBeenCalled();
  });

  it('recovering: the broker\'s record of the request becomes the result (persisted); unknown to it → uncertain; never freed', () => {
    const found = run('sent', vi.fn());
    found.actor.send({ type: 'done', result: { status: 200, json: '{"ticket":7}' } });
    expect(found.actor.getSnapshot().value).toBe('result');
    expect(found.actor.getSnapshot().context.result).toEqual({ status: 200, json: '{"ticket":7}' });
    expect(found.log).toEqual(['persistResult:200']);
    const unknown = run('sent', vi.fn());
    unknown.actor.send({ type: 'failed' }); // not a recovery outcome: ignored
    expect(unknown.actor.getSnapshot().value).toBe('recovering');
    unknown.actor.send({ type: 'lost' });
    expect(unknown.actor.getSnapshot().value).toBe('uncertain');
    expect(unknown.log).toEqual(['persistUncertain']);
  });

  it('recovering: notExecuted (an in-process broker has no trace of it) frees the id; nothing persisted but the removal', () => {
    const r = run('sent', vi.fn());
    r.actor.send({ type: 'notExecuted' });
    expect(r.actor.getSnapshot().value).toBe('discarded');
    expect(r.actor.getSnapshot().status).toBe('done');
    expect(r.log).toEqual(['forget']);
    // Only a recovery outcome: a record in flight (sent by this process) ignores it.
    const live = run('new', () => new Promise<StoredResult>(() => {}));
    live.send();
    live.actor.send({ type: 'notExecuted' });
    expect(live.actor.getSnapshot().value).toBe('sent');
  });

  it('expires 24 h after creation: a recovering record by its timer, a resting one when brought back after that', async () => {
    const rec = run('sent', async () => ({ status: 200, json: '{}' }));
    await vi.advanceTimersByTimeAsync(DAY - 1);
    expect(rec.actor.getSnapshot().value).toBe('recovering');
    await vi.advanceTimersByTimeAsync(1);
    expect(rec.actor.getSnapshot().status).toBe('done');
    expect(rec.log).toContain('forget');
    // A resting record holds no timer (the host keeps it as its row); restored late, it is expired.
    const resting = run('result', async () => ({ status: 200, json: '{}' }), { status: 200, json: '{}' });
    await vi.advanceTimersByTimeAsync(2 * DAY);
    expect(resting.actor.getSnapshot().value).toBe('result');
    const forgotten: string[] = [];
    const m = idempotencyMachine.provide({ actions: { forget: () => void forgotten.push('forget') } });
    const expired = createActor(m, {
      input: { accountId: 'a', clientOrderId: 'old', paramsHash: 'h', phase: 'result', expiresAt: Date.now() - 1, result: { status: 200, json: '{}' } },
    }).start();
    expect(expired.getSnapshot().status).toBe('done');
    expect(forgotten).toEqual(['forget']);
  });
});
