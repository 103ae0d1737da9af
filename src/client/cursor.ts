// The position of a /v1/stream client in its account's event stream, pure: which account events
// (POSITIONS, ORDERS, TRADE: `seq` per account plus `epoch`) to deliver, which to drop as already
// delivered, and what to ask for (`since=<epoch>:<seq>`) on reconnect. The rules are docs/stream.md's
// ("A client keeps one cursor per account"). The socket client feeds it every frame; property tests
// feed it random disconnect schedules.

export interface StreamPosition {
  epoch: string;
  seq: number;
}

/** `<epoch>:<seq>`. */
export function formatSince(p: StreamPosition): string {
  return `${p.epoch}:${p.seq}`;
}

/** The gateway's form of `since` (docs/stream.md *Resuming*): an epoch of 1-32 characters from
 *  `A-Z a-z 0-9 _ -`, a seq below 2^53 without leading zeros. Anything else it refuses before the
 *  upgrade (400), which a WebSocket does not show: the stream asked `/Ping` (fine) and reconnected
 *  for ever. So `stream()` refuses it at once; `test/integration/client-pure.test.ts` holds this
 *  parser to the gateway's (`src/stream/history.ts`). */
const SINCE = /^([A-Za-z0-9_-]{1,32}):(0|[1-9][0-9]{0,15})$/;

export function parseSince(s: string): StreamPosition | undefined {
  const m = SINCE.exec(s);
  if (!m) return undefined;
  const seq = Number(m[2]);
  return Number.isSafeInteger(seq) ? { epoch: m[1]!, seq } : undefined;
}

/** What a frame carries that the cursor reads. */
export interface PositionedFrame {
  type: string;
  seq?: number | undefined;
  epoch?: string | undefined;
  data?: unknown;
}

export type Verdict =
  /** New: deliver it (and the position moves to it). */
  | 'deliver'
  /** Already delivered (a replay overlapping what arrived before the drop): drop it. */
  | 'duplicate'
  /** A frame after a hole in the same epoch: do not deliver; reconnect with `since` so the
   *  gateway replays the hole (or says recovered:false). */
  | 'gap'
  /** Not an account event (quotes, candles, heartbeats, acknowledgements): deliver, position unchanged. */
  | 'unpositioned';

/** The account-event types. QUOTE and CANDLE carry a `seq`/`epoch` too, of their market topic: not this stream. */
export const ACCOUNT_EVENT_TYPES: ReadonlySet<string> = new Set(['POSITIONS', 'ORDERS', 'TRADE']);

export function isPositioned(f: PositionedFrame): f is PositionedFrame & StreamPosition {
  return ACCOUNT_EVENT_TYPES.has(f.type) && typeof f.epoch === 'string' && typeof f.seq === 'number';
}

function isSnapshot(f: PositionedFrame): boolean {
  return typeof f.data === 'object' && f.data !== null && (f.data as { snapshot?: unknown }).snapshot === true;
}

export class StreamCursor {
  private pos: StreamPosition | undefined;
  /** The next account event may start anywhere: after a recovered:false (fresh snapshots follow
   *  at the account's current position) or on a first connect. */
  private rebase = true;
  /** Frame types delivered at the current position (a snapshot pair shares one seq). */
  private typesAtPos = new Set<string>();

  constructor(start?: StreamPosition) {
    if (start) {
      this.pos = { epoch: start.epoch, seq: start.seq };
      this.rebase = false;
    }
  }

  /** Where to resume from: undefined before the first account event. */
  get position(): StreamPosition | undefined {
    return this.pos ? { ...this.pos } : undefined;
  }

  /** The current epoch (undefined before the first account event), without a copy of the position. */
  get epoch(): string | undefined {
    return this.pos?.epoch;
  }

  since(): string | undefined {
    return this.pos ? formatSince(this.pos) : undefined;
  }

  /** The gateway answered a resume: recovered:false means its replay could not cover the gap, so
   *  fresh snapshots follow and the position starts again from them. */
  resumed(recovered: boolean): void {
    if (!recovered) this.rebase = true;
  }

  accept(f: PositionedFrame): Verdict {
    if (!isPositioned(f)) return 'unpositioned';
    const p = this.pos;
    if (this.rebase || !p || f.epoch !== p.epoch) {
      // First event, fresh snapshots after a recovered:false, or a new epoch (the gateway cannot
      // vouch for continuity; the stream client tells the bot to reconcile): start from here.
      this.rebase = false;
      this.moveTo(f);
      return 'deliver';
    }
    if (f.seq < p.seq) return 'duplicate';
    if (f.seq === p.seq) {
      // A socket's initial POSITIONS/ORDERS pair carries one seq: each type once at a position.
      if (!isSnapshot(f) || this.typesAtPos.has(f.type)) return 'duplicate';
      this.typesAtPos.add(f.type);
      return 'deliver';
    }
    if (f.seq > p.seq + 1) return 'gap';
    this.moveTo(f);
    return 'deliver';
  }

  private moveTo(f: StreamPosition & { type: string }): void {
    // Updated in place (`position` hands out copies): no allocation per account event.
    if (this.pos) {
      this.pos.epoch = f.epoch;
      this.pos.seq = f.seq;
    } else {
      this.pos = { epoch: f.epoch, seq: f.seq };
    }
    this.typesAtPos.clear();
    this.typesAtPos.add(f.type);
  }
}
