// The trading vocabulary: an account's figures and details.

import type { Platform } from './server.js';

export interface AccountSummary {
  readonly balance: number;
  readonly credit: number;
  readonly equity: number;
  /** Floating profit of open positions. */
  readonly profit: number;
  readonly margin: number;
  readonly freeMargin: number;
  /** Percent; 0 when there is no margin in use. */
  readonly marginLevel: number;
  readonly leverage: number;
  readonly currency: string;
}

export interface AccountDetails {
  readonly login: string;
  readonly name: string;
  readonly server: string;
  readonly platform: Platform;
  readonly timeZone: string;
  readonly utcOffsetMinutes: number;
  readonly currency: string;
  /** Percent margin levels. */
  readonly marginCall: number;
  readonly stopOut: number;
  readonly group: string;
  readonly type: 'demo' | 'real' | 'contest';
  readonly leverage: number;
  readonly company: string;
  /** Holder profile (personal data; SPEC §2 `/Account`). */
  readonly email: string;
  readonly phone: string;
  readonly country: string;
  readonly city: string;
  readonly address: string;
  readonly registrationTimeMsc: number;
}

export interface EquityPoint {
  readonly timeMsc: number;
  readonly balance: number;
  readonly equity: number;
}
