// A periodic task that runs only while it has work: armed by whoever creates work, it runs every
// `ms` while its task says more is pending, and then stays disarmed (no wake-ups of an idle node).
export class DemandTimer {
  private timer: ReturnType<typeof setTimeout> | null = null;
  private stopped = false;

  /** `task` returns whether work is still pending (it runs again `ms` later). */
  constructor(private readonly ms: number, private readonly task: () => boolean) {}

  /** Work was created: the task runs within `ms` (a no-op while armed). */
  arm(): void {
    if (this.timer || this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      if (this.task()) this.arm();
    }, this.ms);
    this.timer.unref?.();
  }

  get armed(): boolean {
    return this.timer !== null;
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
