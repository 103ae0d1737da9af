// Where the CLI finds the management key, first found wins: --management-key-file, stdin
// (--management-key-stdin), GATEWAY_MANAGEMENT_KEY (or managementKey in TAGW_CONFIG), then
// DATA_DIR/bootstrap.json (the key the gateway generated, kept current by `mgmt-key rotate`). Never
// an argument value: argv is visible to every user of the machine (ps) and kept in shell history.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config.js';
import { CliError, EXIT } from './errors.js';

export interface KeySources { managementKeyFile?: string | undefined; managementKeyStdin?: boolean | undefined }

export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export async function managementKeyOf(src: KeySources, config: Config): Promise<string> {
  if (src.managementKeyFile) {
    let text: string;
    try {
      text = readFileSync(src.managementKeyFile, 'utf8');
    } catch (e) {
      throw new CliError(EXIT.AUTH, `--management-key-file ${src.managementKeyFile}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
    return nonEmpty(text.trim(), '--management-key-file');
  }
  if (src.managementKeyStdin) return nonEmpty((await readStdin()).trim(), '--management-key-stdin');
  if (config.managementKey) return config.managementKey;
  const file = join(config.dataDir, 'bootstrap.json');
  let raw: string;
  try {
    raw = readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new CliError(EXIT.AUTH, code === 'ENOENT'
      ? `no management key: set GATEWAY_MANAGEMENT_KEY, use --management-key-file or --management-key-stdin, or run where ${file} exists (DATA_DIR=${config.dataDir})`
      : `${file}: ${code ?? (e as Error).message} (the file is readable by the gateway's user only)`);
  }
  try {
    const key = (JSON.parse(raw) as { managementKey?: unknown }).managementKey;
    if (typeof key === 'string' && key) return key;
  } catch {
    // reported below
  }
  throw new CliError(EXIT.AUTH, `${file}: no managementKey in it`);
}

function nonEmpty(key: string, where: string): string {
  if (!key) throw new CliError(EXIT.AUTH, `${where}: empty`);
  return key;
}
