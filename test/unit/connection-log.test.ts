// The main thread's log of each account's connection phases (src/runtime/connectionLog.ts): a
// repeated phase is no change, the history keeps the last HISTORY_LENGTH changes, oldest first.
import { describe, expect, it } from 'vitest';
import { ConnectionLog, HISTORY_LENGTH } from '../../src/runtime/connectionLog.js';

describe('connection log', () => {
  it('records changes only, bounded to the last HISTORY_LENGTH, and counts reconnects and phases', () => {
    let t = 0;
    const log = new ConnectionLog(() => ++t);
    log.note('a', 'connecting');
    log.note('a', 'connecting');
    log.note('a', 'connected');
    log.note('b', 'connecting');
    expect(log.history('a').map((c) => c.phase)).toEqual(['connecting', 'connected']);
    for (let i = 0; i < HISTORY_LENGTH; i++) {
      log.note('a', 'reconnecting');
      log.note('a', 'connected');
    }
    const h = log.history('a');
    expect(h).toHaveLength(HISTORY_LENGTH);
    expect(h.at(-1)!.phase).toBe('connected');
    expect(h[0]!.phase).toBe('reconnecting');
    // Oldest first, each change's time after the one before.
    for (let i = 1; i < h.length; i++) expect(h[i]!.at).toBeGreaterThan(h[i - 1]!.at);
    expect(log.reconnects).toBe(HISTORY_LENGTH);
    expect(log.lastError('a')!.phase).toBe('reconnecting');
    expect(log.counts(['connecting', 'connected', 'reconnecting', 'refused'])).toEqual({ connecting: 1, connected: 1, reconnecting: 0, refused: 0 });
    log.forget('a');
    expect(log.history('a')).toEqual([]);
    expect(log.phase('b')).toBe('connecting');
  });

  it("keeps a failed login attempt's reason as the last error: one that never connected (no phase change), a refusal's, none for a drop after a reconnect", () => {
    let t = 0;
    const log = new ConnectionLog(() => ++t);
    log.note('a', 'connecting');
    expect(log.lastError('a')).toBeUndefined();
    log.note('a', { failed: 'bridge unreachable (ECONNREFUSED)' });
    log.note('a', { failed: 'bridge unreachable (ECONNREFUSED)' });
    expect(log.history('a').map((c) => c.phase)).toEqual(['connecting']); // no phase change
    expect(log.lastError('a')).toEqual({ at: 3, phase: 'connecting', reason: 'bridge unreachable (ECONNREFUSED)' });
    // Connected since: the attempt stays the last error, in the phase it was in.
    log.note('a', 'connected');
    expect(log.lastError('a')).toEqual({ at: 3, phase: 'connecting', reason: 'bridge unreachable (ECONNREFUSED)' });
    // A drop after it: the drop, with no reason (the attempt before the connection is not why).
    log.note('a', 'reconnecting');
    expect(log.lastError('a')).toEqual({ at: 5, phase: 'reconnecting' });
    // Then a refused login: the refusal, with the attempt's reason (reported just before the phase).
    log.note('a', { failed: 'invalid password for login 7 on Sim-P5-Demo' });
    log.note('a', 'refused');
    expect(log.lastError('a')).toEqual({ at: 7, phase: 'refused', reason: 'invalid password for login 7 on Sim-P5-Demo' });
    log.forget('a');
    expect(log.lastError('a')).toBeUndefined();
  });
});
