// Reusable, pre-faulted buffers for tensors read out of /dev/shm.
//
// A fresh large allocation costs its page faults on first touch (far slower than the read
// itself: measured, docs/performance.md, "Where the comments' measurements went: transport and preprocessing"), so a worker that reads a 32 MiB tensor per request into a
// new buffer spends most of its time faulting. The pool keeps buffers by power-of-two size
// class, touched once when created, and hands out leases; small tensors (< 256 KiB) come from
// Node's slab allocator, which is already cheap.
const SMALL = 256 * 1024;

export interface BufferLease {
  /** Exactly the requested length. */
  readonly bytes: Buffer;
  /** Give the memory back; the bytes must not be used afterwards. */
  release(): void;
}

function sizeClass(n: number): number {
  let c = SMALL;
  while (c < n) c *= 2;
  return c;
}

export class TensorBufferPool {
  private readonly free = new Map<number, Buffer[]>();
  private pooledBytes = 0;

  /** Buffers beyond `maxPooledBytes` are dropped on release instead of kept. */
  constructor(private readonly maxPooledBytes = 512 * 1024 * 1024) {}

  acquire(n: number): BufferLease {
    if (n < SMALL) {
      const bytes = Buffer.allocUnsafe(n);
      return { bytes, release: () => {} };
    }
    const cls = sizeClass(n);
    const list = this.free.get(cls);
    let backing = list?.pop();
    if (backing) this.pooledBytes -= cls;
    else {
      backing = Buffer.allocUnsafeSlow(cls);
      backing.fill(0); // fault every page in now, once, instead of on each request's read
    }
    let released = false;
    const owned = backing;
    return {
      bytes: owned.subarray(0, n),
      release: () => {
        if (released) return;
        released = true;
        if (this.pooledBytes + cls > this.maxPooledBytes) return;
        this.pooledBytes += cls;
        const l = this.free.get(cls) ?? [];
        l.push(owned);
        this.free.set(cls, l);
      },
    };
  }

  get stats(): { pooledBytes: number; buffers: number } {
    let buffers = 0;
    for (const l of this.free.values()) buffers += l.length;
    return { pooledBytes: this.pooledBytes, buffers };
  }
}
