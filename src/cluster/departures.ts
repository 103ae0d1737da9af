// Which nodes left the cluster, from the node list as read every third of the lease: a node live in
// one reading (heartbeat younger than the lease) and not in a later one died (SIGKILL: its heartbeat
// expired) or left (SIGTERM: its row removed). Each departure is reported once; a node seen again
// later (restarted under its NODE_ID) is a new presence. Pure logic.

export class Departures {
  private present = new Set<string>();
  /** Readings to let pass before judging again: after PostgreSQL was unreachable nobody could
   *  heartbeat, so every node looks expired until each has had a renewal period to do so. */
  private holdOff = 0;

  constructor(private readonly self: string, private readonly holdOffReadings = 3) {}

  /** A reading failed (PostgreSQL unreachable). */
  failed(): void {
    this.holdOff = this.holdOffReadings;
  }

  /** The nodes live in a reading: those departed since the last ones (this node never). */
  seen(live: Iterable<string>): string[] {
    const now = new Set(live);
    if (this.holdOff > 0) {
      this.holdOff--;
      for (const id of now) this.present.add(id);
      return [];
    }
    const gone = [...this.present].filter((id) => !now.has(id) && id !== this.self);
    this.present = now;
    return gone;
  }
}
