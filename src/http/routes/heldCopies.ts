// One copy of a login's simulated account in a process (docs/simulator.md "one copy of a login").
// Each shard's embedded simulator loads a login from the one SQLite file; a shard that no longer
// binds a login lets its copy go once its checkpoint is written. On a full disk that write fails and
// the copy stays in its shard, inert, its rows held in memory (SqliteSimStore.release). Another
// shard loading the login then read older state, and once the disk had room the two copies' journal
// rows collided (the same sequence numbers): the later write refused, that shard's store stopped and
// the shard restarted with every account on it. So the main thread remembers which shard still holds
// which login (its reply to account.remove or a re-bind said so), and a bind that would load the
// login on another shard first asks the holder to let it go (sim.release: its checkpoint written
// now); still held, the bind is refused with 503 STORAGE_UNAVAILABLE and retry-after, and nothing is
// loaded. A shard that restarted holds nothing (the store is the truth): it answers released.
// Binds of a login are serialized per login (withAccountLogins / the login lock): no two run here at once.
import { apiError } from '../../errors.js';
import type { HeldCopy } from '../../runtime/hosts/accountCommands.js';
import type { Services } from '../services.js';
import { onePer } from '../../util/onePer.js';

/** Seconds a bind refused for a held copy is told to wait (a holder retries its write every minute of the clock, and at each ask). */
export const HELD_COPY_RETRY_AFTER_S = 5;

const keyOf = ({ server, login }: HeldCopy) => `${server}\u0000${login}`;

export class HeldCopies {
  /** Login -> the shard whose copy of it may still be there. */
  private readonly holders = new Map<string, number>();

  /** Logins a shard said it still holds (none in bridge mode: its simulator has one copy of each). */
  get size(): number {
    return this.holders.size;
  }

  holderOf(copy: HeldCopy): number | undefined {
    return this.holders.get(keyOf(copy));
  }

  /** `shard`'s reply said its copy of the login stays (its checkpoint could not be written). */
  held(copy: HeldCopy, shard: number): void {
    this.holders.set(keyOf(copy), shard);
  }

  /**
   * Before the login is loaded on `shard` (a bind): another shard holding it is asked to let it go
   * (`release` answers whether it still holds it). Still held: 503 STORAGE_UNAVAILABLE, nothing
   * loaded. The holder itself binding it again takes its own copy up, as it was; the entry stays,
   * as that bind may fail and leave the copy held once more (the next ask finds out).
   */
  async clearFor(copy: HeldCopy, shard: number, release: (holder: number) => Promise<boolean>): Promise<void> {
    const k = keyOf(copy);
    const holder = this.holders.get(k);
    if (holder === undefined || holder === shard) return;
    if (await release(holder)) {
      throw apiError('STORAGE_UNAVAILABLE', "this broker login's simulated account is still held by another of the gateway's threads, "
        + 'which cannot write it to DATA_DIR (the disk is full); it is not loaded twice: retry once the operator has freed space', {
        headers: { 'retry-after': String(HELD_COPY_RETRY_AFTER_S) },
      });
    }
    if (this.holders.get(k) === holder) this.holders.delete(k);
  }
}

/** The gateway's table (one per Services: tests run several gateways in one process). */
export const heldCopiesOf = onePer((_: Services) => new HeldCopies());

/** HeldCopies.clearFor for a bind of `copy` on the shard of `accountId`, asking the holder through sim.release. */
export function clearHeldCopy(s: Services, copy: HeldCopy, accountId: string): Promise<void> {
  return heldCopiesOf(s).clearFor(copy, s.shards.shardFor(accountId), (holder) =>
    s.shards.callShard(holder, 'sim.release', copy, { retryOnRestart: true }).then((r) => r.held));
}

/** A shard's reply that may name a copy it still holds (account.remove, a re-bind): noted, and the rest returned. */
export function noteHeldCopy<T extends { heldCopy?: HeldCopy }>(s: Services, accountId: string, reply: T): Omit<T, 'heldCopy'> {
  const { heldCopy, ...rest } = reply;
  if (heldCopy) heldCopiesOf(s).held(heldCopy, s.shards.shardFor(accountId));
  return rest;
}
