// The SDK's fault calls are typed from the routes' schemas. Bot walk (benchmarking): they took any
// JsonObject, so `{ kind: 'latency', latency: 200 }` (for latencyMs) or `kind: 'disconnect'` compiled and
// came back 400 at run time; their answers were JsonObject, so `(await addFault(...)).shards` did not compile.
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { TagwClient } from '../../src/client/index.js';

describe('fault call types', () => {
  it('bodies and answers of accounts.addFault and sim.*', () => {
    type AddAccountFault = TagwClient['accounts']['addFault'];
    type AddSimFault = TagwClient['sim']['addFault'];
    expectTypeOf<Parameters<AddAccountFault>[1]['kind']>().toEqualTypeOf<'drop' | 'latency' | 'reject' | 'timeoutAfterSend' | 'unknownAfterSend' | 'mute'>();
    expectTypeOf<Awaited<ReturnType<AddSimFault>>['shards']>().toEqualTypeOf<number>();
    expectTypeOf<Awaited<ReturnType<AddAccountFault>>['id']>().toEqualTypeOf<number>();
    expectTypeOf<Awaited<ReturnType<TagwClient['sim']['listFaults']>>['faults'][number]['shard']>().toEqualTypeOf<number>();
    const use = async (c: TagwClient) => {
      await c.accounts.addFault('id', { kind: 'latency', latencyMs: 200, durationMs: 5_000 });
      await c.sim.addFault({ server: 'Sim-P5-Demo', kind: 'reject', count: 1 });
      // @ts-expect-error latencyMs, not latency
      await c.accounts.addFault('id', { kind: 'latency', latency: 200 });
      // @ts-expect-error no such kind
      await c.sim.addFault({ server: 'Sim-P5-Demo', kind: 'disconnect', durationMs: 1 });
      // @ts-expect-error a server-wide fault names its server
      await c.sim.addFault({ kind: 'mute', durationMs: 1 });
    };
    expect(use).toBeTypeOf('function');
  });
});
