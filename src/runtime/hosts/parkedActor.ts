// An XState actor that, while it rests in a state waiting only for events (no invoke, no timer),
// is kept as its snapshot instead of a live actor. A live root actor builds its own actor system
// and scope (about thirty closures): for an idle connected account that was the largest part of
// its memory (issue 19, docs/scale.md). The machine stays the source of truth: any event, and any
// use of `actor`, restores it from the persisted snapshot first (createActor({ snapshot })), which
// restores the state and context without running entry actions again.
import { createActor, type Actor, type AnyStateMachine, type InputFrom, type Snapshot, type SnapshotFrom } from 'xstate';

export class ParkedActor<M extends AnyStateMachine> {
  private live: Actor<M> | null;
  /** While parked: the snapshot reads answer from, and the persisted form the actor is restored from. */
  private parked: { snapshot: SnapshotFrom<M>; persisted: Snapshot<unknown> } | null = null;
  private parkQueued = false;
  private stopped = false;

  constructor(
    private readonly machine: M,
    private readonly input: InputFrom<M>,
    private readonly onError: (err: unknown) => void,
    /** Whether a snapshot is a resting state (nothing running in it) that may be parked. */
    private readonly restful: (s: SnapshotFrom<M>) => boolean,
  ) {
    this.live = this.spawn(undefined);
  }

  private spawn(snapshot: Snapshot<unknown> | undefined): Actor<M> {
    const a = createActor(this.machine, snapshot ? { input: this.input, snapshot } : { input: this.input }) as Actor<M>;
    a.subscribe({ error: this.onError });
    return a;
  }

  /** The live actor, restored first if it was parked. */
  get actor(): Actor<M> {
    if (!this.live) {
      this.live = this.spawn(this.parked!.persisted);
      this.parked = null;
      this.live.start();
    }
    return this.live;
  }

  /** The current snapshot, without restoring a parked actor. */
  getSnapshot(): SnapshotFrom<M> {
    return this.live ? (this.live.getSnapshot() as SnapshotFrom<M>) : this.parked!.snapshot;
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
      if ((s as Snapshot<unknown>).status !== 'active' || !this.restful(s)) return;
      this.parked = { snapshot: s, persisted: a.getPersistedSnapshot() };
      this.live = null;
      a.stop();
    });
  }

  /** Stops it for good (a parked one keeps answering reads with its last snapshot). */
  stop(): void {
    this.stopped = true;
    this.live?.stop();
  }
}
