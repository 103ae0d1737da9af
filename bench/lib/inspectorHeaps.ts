// Each thread's heap after a full collection, read from outside a process started with
// `--inspect=127.0.0.1:0`: the inspector's HeapProfiler.collectGarbage on the main thread and, over
// its NodeWorker domain, on every worker thread, then Runtime.getHeapUsage. A heap in use read
// without a collection holds garbage of unknown age (it moves by tens of MiB with V8's timing);
// after one it is what the process holds.
import { createWriteStream, type WriteStream } from 'node:fs';
import WebSocket from 'ws';

export interface ThreadHeap { thread: string; usedBytes: number }

interface Pending { resolve: (v: any) => void; reject: (e: Error) => void }

export class InspectorHeaps {
  private seq = 0;
  private readonly pending = new Map<number, Pending>();
  /** Worker sessions by id: their title/url, and their own pending calls. */
  private readonly workers = new Map<string, { name: string; seq: number; pending: Map<number, Pending> }>();
  /** Where a heap snapshot being taken goes: by worker session id, '' for the main thread. */
  private readonly sinks = new Map<string, WriteStream>();

  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (data) => this.onMessage(JSON.parse(String(data))));
  }

  /** `stderr` text of the process: its "Debugger listening on ws://..." line. */
  static async connect(url: string): Promise<InspectorHeaps> {
    const ws = new WebSocket(url);
    await new Promise<void>((resolve, reject) => { ws.once('open', () => resolve()); ws.once('error', reject); });
    const me = new InspectorHeaps(ws);
    await me.call('NodeWorker.enable', { waitForDebuggerOnStart: false });
    return me;
  }

  private call(method: string, params: object = {}): Promise<any> {
    const id = ++this.seq;
    this.ws.send(JSON.stringify({ id, method, params }));
    return new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }));
  }

  private callWorker(sessionId: string, method: string, params: object = {}): Promise<any> {
    const w = this.workers.get(sessionId)!;
    const id = ++w.seq;
    void this.call('NodeWorker.sendMessageToWorker', { sessionId, message: JSON.stringify({ id, method, params }) });
    return new Promise((resolve, reject) => w.pending.set(id, { resolve, reject }));
  }

  private onMessage(m: any): void {
    if (m.method === 'HeapProfiler.addHeapSnapshotChunk') {
      this.sinks.get('')?.write(m.params.chunk);
    } else if (m.id !== undefined) {
      const p = this.pending.get(m.id);
      this.pending.delete(m.id);
      if (m.error) p?.reject(new Error(m.error.message));
      else p?.resolve(m.result);
    } else if (m.method === 'NodeWorker.attachedToWorker') {
      const { sessionId, workerInfo } = m.params;
      const name = String(workerInfo.url ?? workerInfo.title).replace(/^.*\//, '');
      this.workers.set(sessionId, { name, seq: 0, pending: new Map() });
    } else if (m.method === 'NodeWorker.detachedFromWorker') {
      this.workers.delete(m.params.sessionId);
    } else if (m.method === 'NodeWorker.receivedMessageFromWorker') {
      const w = this.workers.get(m.params.sessionId);
      const inner = JSON.parse(m.params.message);
      if (inner.method === 'HeapProfiler.addHeapSnapshotChunk') this.sinks.get(m.params.sessionId)?.write(inner.params.chunk);
      if (!w || inner.id === undefined) return;
      const p = w.pending.get(inner.id);
      w.pending.delete(inner.id);
      if (inner.error) p?.reject(new Error(inner.error.message));
      else p?.resolve(inner.result);
    }
  }

  /** Every thread collected, then its heap in use: main first, workers by their script's name. */
  async heaps(): Promise<ThreadHeap[]> {
    await this.call('HeapProfiler.collectGarbage');
    const out: ThreadHeap[] = [{ thread: 'main', usedBytes: (await this.call('Runtime.getHeapUsage')).usedSize }];
    for (const [sessionId, thread] of this.threads()) {
      await this.callWorker(sessionId, 'HeapProfiler.collectGarbage');
      out.push({ thread, usedBytes: (await this.callWorker(sessionId, 'Runtime.getHeapUsage')).usedSize });
    }
    return out;
  }

  /** Each worker's name by its session: its script's file name and its rank among those of that script. */
  private threads(): Map<string, string> {
    const seen = new Map<string, number>();
    const out = new Map<string, string>();
    for (const [sessionId, w] of this.workers) {
      const n = (seen.get(w.name) ?? 0) + 1;
      seen.set(w.name, n);
      out.set(sessionId, `${w.name}#${n}`);
    }
    return out;
  }

  /** A heap snapshot of `thread` (as heaps() names it) written to `file` (V8 collects first). */
  async snapshot(thread: string, file: string): Promise<void> {
    const sessionId = thread === 'main' ? '' : [...this.threads()].find(([, name]) => name === thread)?.[0];
    if (sessionId === undefined) throw new Error(`no thread ${thread}`);
    const sink = createWriteStream(file);
    this.sinks.set(sessionId, sink);
    try {
      if (sessionId) await this.callWorker(sessionId, 'HeapProfiler.takeHeapSnapshot', { reportProgress: false });
      else await this.call('HeapProfiler.takeHeapSnapshot', { reportProgress: false });
    } finally {
      this.sinks.delete(sessionId);
      await new Promise<void>((resolve, reject) => sink.end((err?: Error | null) => (err ? reject(err) : resolve())));
    }
  }

  close(): void {
    this.ws.close();
  }
}

/** The inspector's address from the process's stderr text, once it is there. */
export const inspectorUrl = (stderr: string): string | undefined => /Debugger listening on (ws:\/\/\S+)/.exec(stderr)?.[1];
