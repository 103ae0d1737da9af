// The shard count of a test gateway or gateway process that names none: `TAGW_TEST_SHARDS=3` runs
// tests as an operator's many-core node does, accounts spread over shards; 1 when unset (a second
// shard thread costs ~0.2 CPU-s per start).
export const TEST_SHARDS = testShards(process.env.TAGW_TEST_SHARDS);

export function testShards(v: string | undefined): number {
  if (v === undefined || v === '') return 1;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > 64) throw new Error(`TAGW_TEST_SHARDS must be an integer 1-64, not ${JSON.stringify(v)}`);
  return n;
}
