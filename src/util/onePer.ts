// One value per object, made at its first use and dropped with the object: a gateway's tables kept
// beside its Services (tests run several gateways in one process), a store per database connection.
// The WeakMap's get-or-make, written once (src/market keeps its own: it imports nothing).
export function onePer<K extends object, V>(make: (key: K) => V): (key: K) => V {
  const made = new WeakMap<K, V>();
  return (key) => {
    let v = made.get(key);
    if (v === undefined) made.set(key, (v = make(key)));
    return v;
  };
}
