// The live per-tensor traffic stream (one TensorEvent per placed tensor).
//
// The bus keeps a bounded ring of recent events and per-second aggregates; listeners get
// events in batches (the console wants ~10 updates a second, never one message per tensor).
// Publishing never blocks placement: a slow or failing listener cannot stall a request.
import type { SecondAggregate, TensorEvent } from '../transport/event-schema.ts';

type Listener = (batch: readonly TensorEvent[]) => void;

export class TensorEventBus {
  /** The last `capacity` events, oldest at `head`: a fixed array written round, so publishing costs the same at 20,000 events a second with the ring full (an array spliced at its front moved every kept event on each publish, which stalled a busy router's requests; measured: docs/performance.md, "The console's event ring"). */
  private readonly ring: Array<TensorEvent | undefined>;
  private head = 0;
  private size = 0;
  private readonly seconds: SecondAggregate[] = [];
  private readonly listeners = new Set<Listener>();
  private pending: TensorEvent[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly capacity = 10_000,
    private readonly keepSeconds = 300,
    private readonly batchMillis = 100,
  ) {
    this.ring = new Array<TensorEvent | undefined>(capacity).fill(undefined);
  }

  publish(event: TensorEvent): void {
    this.ring[(this.head + this.size) % this.capacity] = event;
    if (this.size < this.capacity) this.size += 1;
    else this.head = (this.head + 1) % this.capacity;
    this.aggregate(event);
    if (this.listeners.size === 0) return;
    this.pending.push(event);
    this.timer ??= setTimeout(() => this.flush(), this.batchMillis);
  }

  /** Deliver pending events now (also what the batch timer does). */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.pending;
    this.pending = [];
    if (batch.length === 0) return;
    for (const listener of this.listeners) {
      try {
        listener(batch);
      } catch {
        /* a listener's failure is its own */
      }
    }
  }

  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The newest `limit` events, oldest first. */
  recent(limit = this.capacity): TensorEvent[] {
    const n = Math.max(0, Math.min(Number.isFinite(limit) ? Math.floor(limit) : this.size, this.size));
    const out = new Array<TensorEvent>(n);
    for (let i = 0; i < n; i++) out[i] = this.ring[(this.head + this.size - n + i) % this.capacity]!;
    return out;
  }

  perSecond(): readonly SecondAggregate[] {
    return this.seconds;
  }

  private aggregate(event: TensorEvent): void {
    const second = Math.floor(event.time / 1000);
    let last = this.seconds.at(-1);
    if (!last || last.second !== second) {
      last = { second, tensors: { inline: 0, shm: 0, remote: 0 }, bytes: { inline: 0, shm: 0, remote: 0 }, shmWriteFailures: 0 };
      this.seconds.push(last);
      if (this.seconds.length > this.keepSeconds) this.seconds.shift();
    }
    last.tensors[event.path] += 1;
    last.bytes[event.path] += event.nbytes;
    if (event.reason === 'shm_write_failed') last.shmWriteFailures += 1;
  }
}
