// Simulator configuration: one zod schema for the servers/symbols file, defaults in one
// place. `config/sim-servers.json` is the shipped default; tests build configs in code.
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { FAULT_KINDS, faultSpecProblem } from './faults.js';

const sessionWindow = z.object({ fromMin: z.number().int().min(0).max(1440), toMin: z.number().int().min(0).max(1440) });
/** A named preset or an explicit week (index 0 = Sunday), in server time. */
export const sessionsSchema = z.union([
  z.enum(['forex', 'index', 'always']),
  z.array(z.array(sessionWindow)).length(7),
]);

export const symbolConfigSchema = z.object({
  name: z.string().min(1),
  description: z.string(),
  currency: z.string().length(3),
  baseCurrency: z.string().min(1),
  marginCurrency: z.string().min(1),
  digits: z.number().int().min(0).max(8),
  contractSize: z.number().positive(),
  marginCalcMode: z.enum(['Forex', 'CFD', 'CFDLeverage']).default('Forex'),
  marginInitial: z.number().min(0).default(0),
  marginRate: z.number().positive().default(1),
  group: z.string(),
  volumeMin: z.number().positive().default(0.01),
  volumeMax: z.number().positive().default(100),
  volumeStep: z.number().positive().default(0.01),
  stopsLevel: z.number().int().min(0).default(10),
  freezeLevel: z.number().int().min(0).default(5),
  tradeMode: z.enum(['Full', 'LongOnly', 'ShortOnly', 'CloseOnly', 'Disabled']).default('Full'),
  tradeSessions: sessionsSchema.default('forex'),
  quoteSessions: sessionsSchema.default('forex'),
  swapLong: z.number().default(-5),
  swapShort: z.number().default(-2),
  commissionPerLot: z.number().min(0).default(3.5),
  /** Typical spread in points. */
  spread: z.number().int().min(0).default(10),
  /** Price around which the deterministic walk starts (long-run anchor). */
  basePrice: z.number().positive(),
  /** Standard deviation of the mid price per second, in points. */
  volatility: z.number().positive().default(5),
  ticksPerSecond: z.number().int().min(1).max(100_000).default(4),
  /** Replay a recorded CSV (time,bid,ask[,volume]) instead of generating ticks; `file` is
   *  relative to the config file. speed 1 = real time. */
  replay: z.object({ file: z.string(), speed: z.number().positive().default(1) }).optional(),
});
export type SimSymbolConfig = z.infer<typeof symbolConfigSchema>;

export const faultSpecSchema = z.object({
  kind: z.enum(FAULT_KINDS),
  login: z.string().optional(),
  /** drop: how long the outage lasts; mute: how long no ticks or candles are delivered; any other
   *  kind: when it ends (absent: it lasts until cleared or its count is used up). */
  durationMs: z.number().int().min(0).optional(),
  /** latency: added to every reply. */
  latencyMs: z.number().int().min(0).optional(),
  /** reject / timeoutAfterSend / unknownAfterSend: affect the next N trade requests... */
  count: z.number().int().min(1).optional(),
  /** ...or each trade request with this probability (seeded RNG). */
  probability: z.number().min(0).max(1).optional(),
  /** unknownAfterSend: how long after a trade it took the broker cannot be asked about it. */
  lookupFailMs: z.number().int().min(0).optional(),
}).superRefine((f, ctx) => {
  const problem = faultSpecProblem(f);
  if (problem) ctx.addIssue({ code: 'custom', path: problem.field ? [problem.field] : [], message: problem.message });
});
export type FaultSpecConfig = z.infer<typeof faultSpecSchema>;

export const serverConfigSchema = z.object({
  name: z.string().min(1),
  platform: z.enum(['P4', 'P5']),
  build: z.number().int().positive(),
  company: z.string().default('Simulated Markets Ltd'),
  timeZone: z.object({
    description: z.string(),
    standardOffsetMinutes: z.number().int().min(-720).max(840),
    dst: z.enum(['none', 'US', 'EU']),
  }),
  account: z
    .object({
      balance: z.number().min(0).default(10_000),
      leverage: z.number().int().positive().default(100),
      currency: z.string().length(3).default('USD'),
      marginCall: z.number().positive().default(100),
      stopOut: z.number().positive().default(50),
      group: z.string().default('demo\\standard'),
    })
    .prefault({}),
  symbols: z.array(symbolConfigSchema).min(1),
  faults: z.array(faultSpecSchema).default([]),
});
export type SimServerConfig = z.infer<typeof serverConfigSchema>;

export const simConfigSchema = z.object({
  seed: z.number().int().default(1),
  /** Price path resolution: one anchor point per segment; must divide 60000. */
  segmentMs: z
    .number()
    .int()
    .positive()
    .refine((v) => 60_000 % v === 0, 'segmentMs must divide 60000')
    .default(1000),
  /** How far back history (PriceHistory/QuoteHistory) reaches, in days. */
  historyDays: z.number().positive().default(35),
  servers: z.array(serverConfigSchema).min(1),
});
export type SimConfig = z.infer<typeof simConfigSchema>;
export type SimConfigInput = z.input<typeof simConfigSchema>;

export function parseSimConfig(input: unknown): SimConfig {
  return simConfigSchema.parse(input);
}

/** The shipped servers file, `config/sim-servers.json` at the package root: two levels up from
 *  this module in the sources (src/sim/), three in the build (dist/src/sim/). */
export const DEFAULT_CONFIG_PATH = ['../../config/sim-servers.json', '../../../config/sim-servers.json']
  .map((rel) => fileURLToPath(new URL(rel, import.meta.url)))
  .find((p) => existsSync(p)) ?? fileURLToPath(new URL('../../config/sim-servers.json', import.meta.url));

/** Read the CSV files of replayed symbols: per server name, symbol -> CSV text. */
export function loadReplayData(config: SimConfig, baseDir: string): Map<string, Map<string, string>> {
  const out = new Map<string, Map<string, string>>();
  for (const server of config.servers) {
    const m = new Map<string, string>();
    for (const s of server.symbols) if (s.replay) m.set(s.name, readFileSync(resolve(baseDir, s.replay.file), 'utf8'));
    out.set(server.name, m);
  }
  return out;
}

/** When symbols quote and trade: each symbol's own `tradeSessions`/`quoteSessions` (`sessions`, the
 *  default), or every symbol around the clock (`always`: a forex bench or demo on a weekend). */
export const MARKET_HOURS = ['sessions', 'always'] as const;
export type MarketHours = (typeof MARKET_HOURS)[number];

export interface SimConfigOverrides {
  seed?: number;
  marketHours?: MarketHours;
}

/** The config with the overrides applied: `marketHours: 'always'` replaces every symbol's sessions,
 *  so what the simulator does and the sessions it reports (SymbolSessions, IsTradeSession) agree. */
export function withOverrides(config: SimConfig, overrides: SimConfigOverrides): SimConfig {
  const seeded = overrides.seed !== undefined ? { ...config, seed: overrides.seed } : config;
  if (overrides.marketHours !== 'always') return seeded;
  return {
    ...seeded,
    servers: seeded.servers.map((server) => ({
      ...server,
      symbols: server.symbols.map((s) => ({ ...s, tradeSessions: 'always' as const, quoteSessions: 'always' as const })),
    })),
  };
}

export function loadSimConfig(path: string = DEFAULT_CONFIG_PATH, overrides: SimConfigOverrides = {}): SimConfig {
  const raw = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  return withOverrides(parseSimConfig(raw), overrides);
}
