// ensureStream (src/cluster/jsHistory.ts): nodes that start at once all find no history stream and
// all add it; the server refuses the adds it gets while it creates the stream ("subjects overlap with
// an existing stream", seen in CI with three nodes opening at once). Those nodes must update the
// stream as found, not fail their start. The stand-in answers as nats-server did in that race.
import { describe, expect, it } from 'vitest';
import { ensureStream, type StreamAdmin } from '../../src/cluster/jsHistory.js';

const config = { name: 'S', subjects: ['s.*'], max_age: 1 };

/** A stream API where another node's add lands between this node's info and its own add. */
function racedServer(refusal: string) {
  let exists = false;
  const calls: string[] = [];
  const api = {
    info: async () => {
      calls.push('info');
      if (!exists) {
        exists = true; // another node's add, in flight: this node's own add is refused
        throw new Error('stream not found');
      }
      return {};
    },
    update: async () => (calls.push('update'), {}),
    add: async () => {
      calls.push('add');
      throw new Error(refusal);
    },
  } as unknown as StreamAdmin;
  return { api, calls };
}

describe('ensureStream', () => {
  for (const refusal of ['subjects overlap with an existing stream', 'stream name already in use with a different configuration']) {
    it(`a node whose add lost the race ("${refusal}") updates the stream the winner made`, async () => {
      const { api, calls } = racedServer(refusal);
      await ensureStream(api, config);
      expect(calls).toEqual(['info', 'add', 'info', 'update']);
    });
  }

  it('adds the stream when there is none, updates it when there is one', async () => {
    const made: string[] = [];
    const none = { info: async () => { throw new Error('stream not found'); }, add: async () => (made.push('add'), {}), update: async () => (made.push('update'), {}) } as unknown as StreamAdmin;
    await ensureStream(none, config);
    const some = { info: async () => ({}), add: async () => (made.push('add'), {}), update: async () => (made.push('update'), {}) } as unknown as StreamAdmin;
    await ensureStream(some, config);
    expect(made).toEqual(['add', 'update']);
  });

  it('any other refusal is the start failing (no retry loop that hides a real error)', async () => {
    const api = { info: async () => { throw new Error('stream not found'); }, add: async () => { throw new Error('insufficient resources'); }, update: async () => ({}) } as unknown as StreamAdmin;
    await expect(ensureStream(api, config)).rejects.toThrow(/insufficient resources/);
  });
});
