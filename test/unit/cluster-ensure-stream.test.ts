// ensureStream (src/cluster/jsHistory.ts): nodes that start at once all find no history stream and
// all add it; the server refuses the adds it gets while it creates the stream ("subjects overlap with
// an existing stream", seen in CI with three nodes opening at once). Those nodes must update the
// stream as found, not fail their start. The stand-in answers as nats-server did in that race.
import { describe, expect, it } from 'vitest';
import { ensureStream, replicasChange, type StreamAdmin } from '../../src/cluster/jsHistory.js';

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

  it('says what the stream had before its update (nothing when it made the stream), for the replicas check', async () => {
    const none = { info: async () => { throw new Error('stream not found'); }, add: async () => ({}), update: async () => ({}) } as unknown as StreamAdmin;
    expect(await ensureStream(none, config)).toBeUndefined();
    const some = { info: async () => ({ config: { ...config, num_replicas: 3 } }), add: async () => ({}), update: async () => ({}) } as unknown as StreamAdmin;
    expect(await ensureStream(some, { ...config, num_replicas: 1 })).toMatchObject({ num_replicas: 3 });
  });
});

describe('replicasChange: a start that changes the history stream\'s replicas says so', () => {
  it('nothing when the stream is new or keeps its count; a warning naming both counts and the setting otherwise', () => {
    expect(replicasChange(undefined, 3)).toBeUndefined();
    expect(replicasChange(3, 3)).toBeUndefined();
    const w = replicasChange(3, 1)!;
    expect(w).toMatch(/NATS_STREAM_REPLICAS=1/);
    expect(w).toMatch(/from 3 replicas to 1/);
    expect(w).toMatch(/give every node the same/);
  });
});
