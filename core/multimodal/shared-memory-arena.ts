// The preprocessing pool's shared WebAssembly memories: an arena that only grows, up to a cap.
// V8 never frees a shared WebAssembly.Memory once another thread has received it (the worker
// threads and this one all hold it in their wasm engines; measured: docs/performance.md,
// "Where the comments' measurements went: the preprocessing pool"). So memories are never let
// go here: they are kept and reused (best fit, by size; grown in place when none fits), and
// the arena stops growing at its cap, beyond which an image is processed with the JavaScript
// passes in ordinary memory. After a burst, releasePages() hands the free memories' pages back
// to the system (native/memtrim; where it is not built, the arena stays resident but bounded
// by the cap).
//
// The arena knows its memories and their bytes; what the budget admits is the ledger's rule
// (memory-ledger.ts), the only caller of acquire() and release().
import { memTrim } from './memory-release.ts';
import { newSharedMemory, type SharedWasmMemory } from './resize-simd.ts';

const PAGE = 65536;

export class SharedMemoryArena {
  private readonly free: SharedWasmMemory[] = [];
  private createdBytes = 0;
  private pooledBytes = 0;

  constructor(
    /** The most bytes of memories the arena creates; raised, never lowered (its memories are never freed). */
    public cap: number,
  ) {}

  /** The size a memory for `bytes` is created with: four classes per doubling, from 1 MiB, in whole pages. */
  static sizeClass(bytes: number): number {
    const exact = 2 ** (Math.ceil(4 * Math.log2(Math.max(bytes, 1 << 20))) / 4);
    return Math.ceil(exact / PAGE) * PAGE;
  }

  /** Bytes of every memory created (they are never freed). */
  get created(): number {
    return this.createdBytes;
  }

  /** Bytes of the memories not in use. */
  get pooled(): number {
    return this.pooledBytes;
  }

  /** Whether a free memory already holds `bytes` (taking it grows nothing). */
  fitsFree(bytes: number): boolean {
    return this.free.some((m) => m.buffer.byteLength >= bytes);
  }

  /**
   * A memory of at least `bytes`, or undefined when the arena is at its cap and none fits, or
   * the process could not reserve the memory (the caller then works in ordinary memory).
   */
  acquire(bytes: number): SharedWasmMemory | undefined {
    // Best fit: the smallest free memory that is large enough; of equals, the one given back
    // last (its pages are the likeliest to be resident still).
    let best = -1;
    for (let i = this.free.length - 1; i >= 0; i--) {
      const size = this.free[i]!.buffer.byteLength;
      if (size >= bytes && (best < 0 || size < this.free[best]!.buffer.byteLength)) best = i;
    }
    if (best >= 0) return this.take(best);
    const cls = SharedMemoryArena.sizeClass(bytes);
    if (this.createdBytes + cls <= this.cap) {
      const memory = reserved(() => newSharedMemory(cls));
      if (memory) this.createdBytes += cls;
      return memory;
    }
    // Grow the largest free memory in place, if the arena can take the difference.
    let largest = -1;
    for (let i = 0; i < this.free.length; i++) if (largest < 0 || this.free[i]!.buffer.byteLength > this.free[largest]!.buffer.byteLength) largest = i;
    if (largest >= 0) {
      const memory = this.free[largest]!;
      const size = memory.buffer.byteLength;
      if (this.createdBytes + cls - size <= this.cap && reserved(() => memory.grow((cls - size) / PAGE)) !== undefined) {
        // Grown while still free: it counts as pooled at its new size until take() hands it out.
        this.pooledBytes += cls - size;
        this.createdBytes += cls - size;
        return this.take(largest);
      }
    }
    return undefined;
  }

  private take(i: number): SharedWasmMemory {
    const [memory] = this.free.splice(i, 1);
    this.pooledBytes -= memory!.buffer.byteLength;
    return memory!;
  }

  /** A memory back for reuse (an image may have grown it: its new size counts). */
  release(memory: SharedWasmMemory, sizeWhenTaken: number): void {
    const size = memory.buffer.byteLength;
    this.createdBytes += size - sizeWhenTaken;
    this.pooledBytes += size;
    this.free.push(memory);
  }

  /** Hand the free memories' pages back to the system; returns the bytes released. */
  releasePages(): number {
    const native = memTrim();
    if (!native) return 0;
    let released = 0;
    for (const memory of this.free) released += native.releasePages(new Uint8Array(memory.buffer));
    return released;
  }
}

/**
 * What `reserve` returns, or undefined when WebAssembly refuses the memory with a RangeError:
 * the process could not reserve it (a shared memory reserves its whole maximum, 1 GiB, up
 * front: an address space limited by ulimit -v refuses it) or it would pass the kernels' 1 GiB
 * maximum. Nothing is counted for it, and the caller works without pooled memory. Other errors
 * (none is known to come from these calls) are not ours to hide.
 */
function reserved<T>(reserve: () => T): T | undefined {
  try {
    return reserve();
  } catch (err) {
    if (err instanceof RangeError) return undefined;
    throw err;
  }
}
