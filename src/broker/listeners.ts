// The event side of a BrokerConnection, shared by the adapters: the listeners of each event.
import type { BrokerEventName, BrokerEvents, Unsubscribe } from './types.js';

type Listener<E extends BrokerEventName> = (data: BrokerEvents[E]) => void;
type Fn = (data: unknown) => void;

export class BrokerListeners {
  // Per event, its one listener, or a Set once it has several: an idle account's connection has
  // one listener of one event (its slot's, of its state), and a Set costs its table (~160 B) on
  // every idle account (issue 19, memory per idle account).
  private readonly by: Partial<Record<BrokerEventName, Fn | Set<Fn>>> = {};

  on<E extends BrokerEventName>(event: E, listener: Listener<E>): Unsubscribe {
    const l = listener as Fn;
    const had: Fn | Set<Fn> | undefined = this.by[event];
    if (had === undefined) this.by[event] = l;
    else if (typeof had === 'function') this.by[event] = new Set<Fn>([had, l]);
    else had.add(l);
    return () => this.off(event, l);
  }

  private off(event: BrokerEventName, l: Fn): void {
    const had: Fn | Set<Fn> | undefined = this.by[event];
    if (had === l) this.by[event] = undefined;
    else if (typeof had === 'object') had.delete(l);
  }

  emit<E extends BrokerEventName>(event: E, data: BrokerEvents[E]): void {
    const had: Fn | Set<Fn> | undefined = this.by[event];
    if (typeof had === 'function') had(data);
    else if (had) for (const l of had) l(data);
  }
}
