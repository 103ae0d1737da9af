// What commands print: JSON for scripts (--json), a table or key/value lines for people. Secrets
// appear only in the one-time reveal of a created key (revealSecret).

export interface Column<R> { header: string; value: (row: R) => unknown }

const cell = (v: unknown): string => (v === null || v === undefined || v === '' ? '-' : typeof v === 'string' ? v : typeof v === 'object' ? JSON.stringify(v) : String(v));

/** A plain text table: a header line, then one line per row, columns padded to the widest cell. */
export function table<R>(rows: readonly R[], columns: readonly Column<R>[]): string {
  const cells = rows.map((r) => columns.map((c) => cell(c.value(r)).replace(/[\r\n\t]/g, ' ')));
  const widths = columns.map((c, i) => Math.max(c.header.length, ...cells.map((row) => row[i]!.length)));
  const line = (vals: string[]) => vals.map((v, i) => (i === vals.length - 1 ? v : v.padEnd(widths[i]!))).join('  ').trimEnd();
  const out = [line(columns.map((c) => c.header)), ...cells.map(line)];
  if (rows.length === 0) out.push('(none)');
  return `${out.join('\n')}\n`;
}

/** Aligned `name: value` lines. */
export function fields(entries: ReadonlyArray<[string, unknown]>): string {
  const w = Math.max(...entries.map(([k]) => k.length));
  return `${entries.map(([k, v]) => `${`${k}:`.padEnd(w + 1)} ${cell(v)}`).join('\n')}\n`;
}

/** A short, readable form of an ISO time: `2026-11-24 19:20:05Z`. */
export const when = (iso: string | null | undefined): string | null => (iso ? iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z') : null);

export class Output {
  constructor(readonly json: boolean, private readonly out: NodeJS.WritableStream = process.stdout) {}

  /** `data` as JSON, or what `human` renders from it. */
  print<T>(data: T, human: (d: T) => string): void {
    this.out.write(this.json ? `${JSON.stringify(data, null, 2)}\n` : human(data));
  }

  /** The one time a secret is shown (a new key): people get it on a line of its own with a warning. */
  revealSecret(data: Record<string, unknown> & { key: string }, human: string): void {
    this.out.write(this.json ? `${JSON.stringify(data, null, 2)}\n` : `${human}\n\n  ${data.key}\n\nShown once: store it now (only a hash is kept).\n`);
  }
}
