// What the router may do with a call when its account changes owner under it (docs/cluster.md,
// Forwarding). Two facts decide: an owner's refusal made before anything ran (NotHeldError), after
// which the call goes on to the next owner like one that found no owner; and whether a call the old
// owner may still be running can run at the new one too (mayRunAgain).
import { ApiError } from '../errors.js';
import type { CommandName } from '../runtime/protocol.js';
import { reachOf } from './commandReach.js';

/** The owner's side refused the call because this node does not hold the account's lease now (handing
 *  it over, its lease lapsed, or fenced in PostgreSQL at the claim): nothing reached the shard or the
 *  broker. The caller sees it (a 503) only once the owner wait passed without a next owner. */
export class NotHeldError extends ApiError {
  constructor(accountId: string) {
    super('SERVICE_UNAVAILABLE', `this node no longer holds account ${accountId} (it is being taken over); retry`, { headers: { 'retry-after': '1' } });
  }
}

/**
 * A call sent to an owner that has not answered when the account moved on: may the new owner run it
 * while the old one may still be (a live owner finishing a slow call)? A trade (commandReach.ts) only
 * with the caller's clientOrderId: the new owner's claim in PostgreSQL answers it as it answers a
 * retry (replay, 409 if the old owner had claimed it, 422) and fences the old owner's claim from then
 * on; without one its id is made on the owner, so a second run would be a second order. Any other
 * command if the shards would send it again after a restart (`retry`, CallOptions.retryOnRestart).
 */
export function mayRunAgain(op: CommandName, args: unknown, retry: boolean | undefined): boolean {
  if (reachOf(op, args as never) === 'trade') return keyedTrade(op, args);
  return retry !== false;
}

/** A trade the caller keyed with its clientOrderId: safe to send again with that id, never with another. */
export function keyedTrade(op: CommandName, args: unknown): boolean {
  return reachOf(op, args as never) === 'trade' && typeof (args as { clientOrderId?: unknown } | null)?.clientOrderId === 'string';
}
