// A bench's `--name value` options (one JSON line per run is the output; these only choose what runs).

/** The value after `--name`, or `def` when the option is not given. */
export function argText(name: string, def: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1]! : def;
}

/** The number after `--name`, or `def` when the option is not given. */
export function argNumber(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
}
