// An XState actor that, while it rests in a state waiting only for events (no invoke, no timer),
// is kept as its snapshot instead of a live actor. A live root actor builds its own actor system
// and scope (about thirty closures): for an idle connected account that was the largest part of
// its memory (issue 19, docs/scale.md). The machine stays the source of truth: any event, and any
// use of `actor`, restores it from the persisted snapshot first (createActor({ snapshot })), which
// restores the state and context without running entry actions again.
import { createActor, type Actor, type AnyStateMachine, type InputFrom, type Snapshot, type SnapshotFrom, type StateValue } from 'xstate';

/** What a parked machine keeps: its persisted snapshot, or, when that holds nothing but a state and
 *  a context (active, no children, no history: every resting state of the connection machine), only
 *  these two. Each object of a persisted snapshot costs on every idle account (its own hidden class
 *  included: xstate builds it with a spread), and so would the full snapshot kept for reads. */
class Rest {
  constructor(readonly value: StateValue, readonly context: unknown) {}
}
type Parked = Rest | Snapshot<unknown>;

interface PersistedMachine { status: string; output?: unknown; error?: unknown; value: StateValue; context: unknown; children: object; historyValue?: object }

const isEmpty = (o: object | undefined) => {
  for (const _ in o) return false;
  return true;
};

/** Who holds a parked actor: hears its errors and says which snapshots rest (methods, not
 *  closures: a slot is its owner, and two closures each were two more objects per idle account). */
export interface ParkedOwner<M extends AnyStateMachine> {
  actorFailed(err: unknown): void;
  /** Whether a snapshot is a resting state (nothing running in it) that may be parked. */
  restful(s: SnapshotFrom<M>): boolean;
}

export class ParkedActor<M extends AnyStateMachine> {
  private live: Actor<M> | null;
  /** While parked: the machine's persisted snapshot, in its compact form when it has one. */
  private parked: Parked | null = null;
  private parkQueued = false;
  private stopped = false;

  constructor(
    private readonly machine: M,
    input: InputFrom<M>,
    private readonly owner: ParkedOwner<M>,
  ) {
    // The input is the first start's only: a restore takes the context from the snapshot.
    this.live = this.spawn({ input });
  }

  private spawn(opts: { input: InputFrom<M> } | { snapshot: Snapshot<unknown> }): Actor<M> {
    const a = createActor(this.machine, opts as { input: InputFrom<M> }) as Actor<M>;
    a.subscribe({ error: (err) => this.owner.actorFailed(err) });
    return a;
  }

  /** The live actor, restored first if it was parked. */
  get actor(): Actor<M> {
    if (!this.live) {
      const p = this.parked!;
      const persisted = p instanceof Rest
        ? { status: 'active', output: undefined, error: undefined, value: p.value, context: p.context, children: {}, historyValue: {} } as Snapshot<unknown>
        : p;
      this.live = this.spawn({ snapshot: persisted });
      this.parked = null;
      this.live.start();
    }
    return this.live;
  }

  /** The current state's value, without restoring a parked actor nor building a snapshot (the order's path reads it). */
  get value(): StateValue {
    if (this.live) return (this.live.getSnapshot() as { value: StateValue }).value;
    return (this.parked as { value: StateValue }).value;
  }

  /** The current snapshot, without restoring a parked actor (built from the parked state: reads of a
   *  parked one are rare, `value` serves the frequent one). */
  getSnapshot(): SnapshotFrom<M> {
    if (this.live) return this.live.getSnapshot() as SnapshotFrom<M>;
    const p = this.parked as Rest | PersistedMachine;
    return this.machine.resolveState({ value: p.value, context: p.context }) as SnapshotFrom<M>;
  }

  get isParked(): boolean {
    return this.live === null;
  }

  send(event: Parameters<Actor<M>['send']>[0]): void {
    this.actor.send(event);
    this.parkSoon();
  }

  /** Parks the actor after the current turn if it rests then (its transitions' effects have run). */
  parkSoon(): void {
    if (this.parkQueued || this.stopped) return;
    this.parkQueued = true;
    setImmediate(() => {
      this.parkQueued = false;
      const a = this.live;
      if (!a || this.stopped) return;
      const s = a.getSnapshot() as SnapshotFrom<M>;
      if ((s as Snapshot<unknown>).status !== 'active' || !this.owner.restful(s)) return;
      const p = a.getPersistedSnapshot() as PersistedMachine;
      this.parked = p.output === undefined && p.error === undefined && isEmpty(p.children) && isEmpty(p.historyValue) ? new Rest(p.value, p.context) : (p as Snapshot<unknown>);
      this.live = null;
      a.stop();
    });
  }

  /** Stops it for good (a parked one keeps answering reads with its last state). */
  stop(): void {
    this.stopped = true;
    this.live?.stop();
  }
}
