// A model of /v1/stream's account stream for the SDK's property tests: events numbered per epoch,
// a bounded history, resume by `since` (RESUMED recovered:true + replay, or recovered:false +
// snapshot), and faults a real network adds: drops with events made meanwhile, replays that overlap
// what the client already has, stalls (the socket stays open and goes silent), restarts that keep or
// lose the epoch. Served over a fake WebSocket the SDK is given instead of a real one.
import type { WebSocketConstructor, WebSocketLike } from '../../src/client/socket.js';

export type Step =
  | { kind: 'events'; n: number }
  | { kind: 'drop'; overlap: number; inFlight: number }
  | { kind: 'stall' }
  | { kind: 'restart'; keepEpoch: boolean };

interface Frame { type: string; epoch: string; seq: number; data: Record<string, unknown> }

class FakeSocket implements WebSocketLike {
  readyState = 0;
  onopen: ((ev: any) => void) | null = null;
  onmessage: ((ev: any) => void) | null = null;
  onclose: ((ev: any) => void) | null = null;
  onerror: ((ev: any) => void) | null = null;
  constructor(readonly url: string, private readonly model: ModelGateway) {
    queueMicrotask(() => model.accept(this));
  }
  send(): void {}
  close(): void {
    this.readyState = 3;
    this.model.gone(this);
  }
  deliver(f: object): void {
    if (this.readyState === 1) this.onmessage?.({ data: JSON.stringify(f) });
  }
  serverClose(code: number): void {
    if (this.readyState === 3) return;
    this.readyState = 3;
    this.onclose?.({ code, reason: '' });
  }
}

let epochs = 0;

export class ModelGateway {
  epoch = `e${++epochs}`;
  seq = 0;
  /** TRADE tickets made so far (ticket i is the i-th event of the whole run). */
  produced = 0;
  /** RESUMED recovered:false answers sent. */
  unrecoverable = 0;
  private history: Frame[] = [];
  private current: FakeSocket | null = null;
  private stalled = false;
  private waiters: Array<() => void> = [];
  readonly WebSocket: WebSocketConstructor;

  constructor(private readonly historySize: number) {
    const model = this;
    this.WebSocket = class extends FakeSocket {
      constructor(url: string) {
        super(url, model);
      }
    };
  }

  accept(sock: FakeSocket): void {
    if (sock.readyState === 3) return;
    this.current?.serverClose(1006);
    this.current = sock;
    this.stalled = false;
    sock.readyState = 1;
    sock.onopen?.({});
    const since = new URL(sock.url).searchParams.get('since');
    if (since === null) {
      this.snapshot(sock);
    } else {
      const i = since.lastIndexOf(':');
      const epoch = since.slice(0, i);
      const seq = Number(since.slice(i + 1));
      const first = this.history[0]?.seq ?? this.seq + 1;
      if (epoch === this.epoch && seq <= this.seq && seq >= first - 1) {
        const replay = this.history.filter((f) => f.seq > seq);
        sock.deliver({ type: 'RESUMED', data: { recovered: true, replayed: replay.length } });
        for (const f of replay) sock.deliver(f);
      } else {
        this.unrecoverable++;
        sock.deliver({ type: 'RESUMED', data: { recovered: false, replayed: 0 } });
        this.snapshot(sock);
      }
    }
    for (const w of this.waiters.splice(0)) w();
  }

  gone(sock: FakeSocket): void {
    if (this.current === sock) this.current = null;
  }

  async run(steps: Step[]): Promise<void> {
    await this.connected();
    for (const s of steps) {
      switch (s.kind) {
        case 'events':
          this.events(s.n);
          break;
        case 'drop': {
          // Frames the client already got are sent again after the resume (the server cannot know
          // they arrived): `overlap` of them, on the same socket, before it drops.
          const again = s.overlap > 0 ? this.history.slice(-s.overlap) : [];
          const sock = this.current!;
          for (const f of again) sock.deliver(f);
          const next = this.nextConnection();
          sock.serverClose(1006);
          this.current = null;
          this.events(s.inFlight);
          await next;
          break;
        }
        case 'stall': {
          // The socket stays open but nothing arrives: only the client's heartbeat timeout helps.
          const next = this.nextConnection();
          this.stalled = true;
          this.events(2);
          await next;
          break;
        }
        case 'restart': {
          const next = this.nextConnection();
          this.current?.serverClose(1006);
          this.current = null;
          if (!s.keepEpoch) {
            this.epoch = `e${++epochs}`;
            this.seq = 0;
            this.history = [];
          } else {
            // docs/stream.md: after a restart the stream carries a snapshot pair of its own.
            this.append({ type: 'POSITIONS', data: { snapshot: true, positions: [] } });
          }
          await next;
          break;
        }
      }
    }
    await this.connected();
  }

  private events(n: number): void {
    for (let i = 0; i < n; i++) this.append({ type: 'TRADE', data: { ticket: ++this.produced } });
  }

  private append(e: { type: string; data: Record<string, unknown> }): void {
    const f: Frame = { ...e, epoch: this.epoch, seq: ++this.seq };
    this.history.push(f);
    if (this.history.length > this.historySize) this.history.shift();
    if (this.current && !this.stalled) this.current.deliver(f);
  }

  private snapshot(sock: FakeSocket): void {
    sock.deliver({ type: 'POSITIONS', epoch: this.epoch, seq: this.seq, data: { snapshot: true, positions: [] } });
  }

  private nextConnection(): Promise<void> {
    return new Promise((r) => this.waiters.push(r));
  }

  private async connected(): Promise<void> {
    if (this.current?.readyState !== 1) await this.nextConnection();
  }
}
