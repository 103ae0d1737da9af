// A stand-in shard worker that cannot start (as a shard whose database it may not write): every
// start throws, as the real worker's does when its store will not open.
export default async function runShard() {
  throw Object.assign(new Error('attempt to write a readonly database'), { code: 'SQLITE_READONLY' });
}
