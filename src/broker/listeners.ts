// The event side of a BrokerConnection, shared by the adapters: one listener set per event.
import type { BrokerEventName, BrokerEvents, Unsubscribe } from './types.js';

export class BrokerListeners {
  // A set per event, created by its first listener: an idle account's connection has listeners of a
  // few events only, and each empty Set still costs its table (issue 19, memory per idle account).
  private readonly sets: { [E in BrokerEventName]?: Set<(data: BrokerEvents[E]) => void> } = {};

  on<E extends BrokerEventName>(event: E, listener: (data: BrokerEvents[E]) => void): Unsubscribe {
    const sets = this.sets as { [K in BrokerEventName]?: Set<(data: BrokerEvents[E]) => void> };
    const set = (sets[event] ??= new Set());
    set.add(listener);
    return () => set.delete(listener);
  }

  emit<E extends BrokerEventName>(event: E, data: BrokerEvents[E]): void {
    const set = this.sets[event] as Set<(data: BrokerEvents[E]) => void> | undefined;
    if (set) for (const l of set) l(data);
  }
}
