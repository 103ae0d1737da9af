// Per-object summary of a V8 heap snapshot file, and the difference of two divided by a count
// (bench/idle-heap.ts: bytes per account). Objects are grouped by type and constructor, closures
// by their source location, plain objects by their property names and retainer, the rest by the
// edge that holds them: enough to tell which of an account's objects is which.
import { readFileSync } from 'node:fs';

type Groups = Map<string, { n: number; b: number }>;

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[]; edge_types: [string[]] } };
  nodes: number[]; edges: number[]; strings: string[]; locations?: number[];
}

/** Groups of one snapshot file: by type, and by what each object is and who holds it. */
export function summarize(file: string): { byType: Groups; byWhat: Groups } {
  const s = JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
  const m = s.snapshot.meta;
  const nf = m.node_fields.length, ef = m.edge_fields.length;
  const [iT, iN, iS, iE] = ['type', 'name', 'self_size', 'edge_count'].map((f) => m.node_fields.indexOf(f)) as [number, number, number, number];
  const [eT, eN, eTo] = ['type', 'name_or_index', 'to_node'].map((f) => m.edge_fields.indexOf(f)) as [number, number, number];
  const types = m.node_types[0], etypes = m.edge_types[0];
  const { nodes, edges, strings } = s;
  const count = nodes.length / nf;
  const first = new Uint32Array(count + 1);
  for (let i = 0, e = 0; i < count; i++) { first[i] = e; e += nodes[i * nf + iE]! * ef; first[i + 1] = e; }
  const loc = new Map<number, string>();
  const l = s.locations ?? [];
  for (let i = 0; i < l.length; i += 4) loc.set(l[i]! / nf, `script ${l[i + 1]} line ${l[i + 2]! + 1}`);
  const holder = new Int32Array(count).fill(-1);
  const via: string[] = new Array<string>(count);
  for (let i = 0; i < count; i++) {
    for (let e = first[i]!; e < first[i + 1]!; e += ef) {
      const et = etypes[edges[e + eT]!]!;
      if (et === 'weak' || et === 'shortcut') continue;
      const to = edges[e + eTo]! / nf;
      if (holder[to] === -1) {
        holder[to] = i;
        via[to] = et === 'element' || et === 'hidden' ? `[${edges[e + eN]}]` : strings[edges[e + eN]!]!;
      }
    }
  }
  const type = (i: number) => types[nodes[i * nf + iT]!]!;
  const name = (i: number) => String(strings[nodes[i * nf + iN]!]);
  const props = (i: number, kind: string) => {
    const ks: string[] = [];
    for (let e = first[i]!; e < first[i + 1]!; e += ef) if (etypes[edges[e + eT]!] === kind) ks.push(strings[edges[e + eN]!]!);
    return ks.slice(0, 10).join(',');
  };
  const what = (i: number) => (type(i) === 'object' && name(i) === 'Object' ? `{${props(i, 'property')}}` : `${type(i)}:${name(i).slice(0, 40)}`);
  const byType: Groups = new Map();
  const byWhat: Groups = new Map();
  const add = (g: Groups, k: string, b: number) => {
    const x = g.get(k) ?? { n: 0, b: 0 };
    x.n++;
    x.b += b;
    g.set(k, x);
  };
  for (let i = 0; i < count; i++) {
    const t = type(i);
    const b = nodes[i * nf + iS]!;
    add(byType, t, b);
    const held = holder[i]! >= 0 ? ` <- ${what(holder[i]!)}.${via[i]}` : '';
    let k: string;
    if (t === 'closure') k = `closure ${name(i) || '(anonymous)'} @${loc.get(i) ?? '?'}`;
    else if (t === 'object' && name(i) === 'system / Context') k = `context(${props(i, 'context')})`;
    else if (t.endsWith('string') || t === 'number') k = `${t}${held}`;
    else k = `${what(i)}${held}`;
    add(byWhat, k, b);
  }
  return { byType, byWhat };
}

export interface DiffRow { what: string; bytes: number; count: number }

/** (b - a) / n per group, largest first; groups under `min` bytes left out. */
export function diff(a: Groups, b: Groups, n: number, min = 4): DiffRow[] {
  return [...new Set([...a.keys(), ...b.keys()])]
    .map((k) => ({ what: k, bytes: Math.round(((b.get(k)?.b ?? 0) - (a.get(k)?.b ?? 0)) / n), count: Math.round(((b.get(k)?.n ?? 0) - (a.get(k)?.n ?? 0)) / n * 100) / 100 }))
    .filter((r) => Math.abs(r.bytes) >= min)
    .sort((x, y) => y.bytes - x.bytes);
}

export const total = (g: Groups): number => [...g.values()].reduce((s, x) => s + x.b, 0);
