// One commit for the bookings of one batch of requests. A shard that receives several requests in
// one message opens the group; idempotent orders booked while it is open (in the batch's
// synchronous parts and microtasks) queue their claims and commit together at the end of the
// turn, then answer together. A lone request finds it closed and commits at once: no turn of
// delay where there is nothing to group. Under load the main thread sends the requests of one
// turn in one message, so the group follows the load: one commit per batch instead of per order.
export class CommitGroup {
  private open = false;
  private closers: Array<() => void> = [];

  /** Opens the group until the end of this turn (setImmediate: after the batch's microtasks). */
  openForTurn(): void {
    if (this.open) return;
    this.open = true;
    setImmediate(() => this.close());
  }

  get isOpen(): boolean {
    return this.open;
  }

  /** Runs `f` when the group closes (once). */
  onClose(f: () => void): void {
    this.closers.push(f);
  }

  private close(): void {
    this.open = false;
    const fs = this.closers;
    this.closers = [];
    for (const f of fs) f();
  }
}
