// `node --import <this file>` with TAGW_REFUSE_IMPORTS="pg,@nats-io/": any import in the main thread
// of a bare specifier that is, or starts with, one of those fails with an error naming it
// (ERR_REFUSED_IMPORT). Tests that a process does not load a module it does not need start it so:
// it works only if it never asks. Worker threads (the shards) are not checked: they need what the
// main thread may do without (xstate, the simulator).
import { register } from 'node:module';
import { isMainThread } from 'node:worker_threads';

const list = (process.env.TAGW_REFUSE_IMPORTS ?? '').split(',').filter(Boolean);
let refused = [];

/** Hook thread: the list arrives from register()'s data. */
export function initialize(data) {
  refused = data.refused;
}

export async function resolve(specifier, context, next) {
  const hit = refused.find((r) => specifier === r || (r.endsWith('/') ? specifier.startsWith(r) : specifier.startsWith(`${r}/`)));
  if (hit) {
    const err = new Error(`refused import of '${specifier}' (TAGW_REFUSE_IMPORTS)`);
    err.code = 'ERR_REFUSED_IMPORT';
    throw err;
  }
  return next(specifier, context);
}

if (isMainThread && list.length > 0) register(import.meta.url, { data: { refused: list } });
