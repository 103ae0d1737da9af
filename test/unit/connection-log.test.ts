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
});
