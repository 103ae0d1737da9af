// Replies larger than one NATS message (the server's max_payload, 1 MiB by default): an order or
// deal history over a long range easily is. The owner keeps the encoded reply, answers the request
// with how many parts it has, and the caller fetches them in order on `tagw.node.<owner>.part`;
// a reply not fetched within `ttlMs` is dropped.
import { randomUUID } from 'node:crypto';

/** Room left in a message for the protocol around the payload. */
const HEADROOM = 4_096;

export interface PartsHandle { id: string; parts: number }
export interface PartRequest { id: string; i: number }

/** The largest payload to put in one message, given the server's limit. */
export function partSize(maxPayload: number | undefined): number {
  return Math.max(1_024, (maxPayload ?? 1_048_576) - HEADROOM);
}

export class ReplyParts {
  private readonly kept = new Map<string, { chunks: Uint8Array[]; timer: NodeJS.Timeout }>();
  /** Begins every id this process hands out: a request for another's (a twin process of the node
   *  id, which listens on the same subject) is not this one's to answer. */
  private readonly prefix = `${randomUUID()}.`;

  constructor(private readonly ttlMs: number) {}

  /** Keeps `bytes` in parts of at most `size` bytes. */
  keep(bytes: Uint8Array, size: number): PartsHandle {
    const chunks: Uint8Array[] = [];
    for (let at = 0; at < bytes.length; at += size) chunks.push(bytes.subarray(at, at + size));
    const id = this.prefix + randomUUID();
    const timer = setTimeout(() => this.kept.delete(id), this.ttlMs);
    timer.unref();
    this.kept.set(id, { chunks, timer });
    return { id, parts: chunks.length };
  }

  /** Whether `id` was handed out by this process (kept, fetched or expired since). */
  mine(id: unknown): boolean {
    return typeof id === 'string' && id.startsWith(this.prefix);
  }

  /** Part `i` (the last one fetched frees the reply); null when unknown or expired. */
  take(req: PartRequest): Uint8Array | null {
    const k = this.kept.get(req.id);
    const chunk = k?.chunks[req.i];
    if (!k || !chunk) return null;
    if (req.i === k.chunks.length - 1) {
      clearTimeout(k.timer);
      this.kept.delete(req.id);
    }
    return chunk;
  }

  get size(): number {
    return this.kept.size;
  }

  clear(): void {
    for (const k of this.kept.values()) clearTimeout(k.timer);
    this.kept.clear();
  }
}
