// The event side of a BrokerConnection, shared by the adapters: one listener set per event.
import type { BrokerEventName, BrokerEvents, Unsubscribe } from './types.js';

export class BrokerListeners {
  private readonly sets: { [E in BrokerEventName]: Set<(data: BrokerEvents[E]) => void> } = {
    tick: new Set(), positions: new Set(), orders: new Set(), deal: new Set(), candle: new Set(), state: new Set(),
  };

  on<E extends BrokerEventName>(event: E, listener: (data: BrokerEvents[E]) => void): Unsubscribe {
    const set = this.sets[event] as Set<(data: BrokerEvents[E]) => void>;
    set.add(listener);
    return () => set.delete(listener);
  }

  emit<E extends BrokerEventName>(event: E, data: BrokerEvents[E]): void {
    for (const l of this.sets[event] as Set<(data: BrokerEvents[E]) => void>) l(data);
  }
}
