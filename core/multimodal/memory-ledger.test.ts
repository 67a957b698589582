import { describe, expect, it } from 'vitest';
import { MemoryLedger } from './memory-ledger.ts';
import { SharedMemoryArena } from './shared-memory-arena.ts';
import { MAX_KERNEL_BYTES } from './resize-simd.ts';

const MiB = 1024 * 1024;

/** A ledger of `budget` bytes that counts how often memory came back. */
function ledger(budget: number) {
  const returns = { count: 0 };
  return { ledger: new MemoryLedger<string>(budget, () => (returns.count += 1)), returns };
}

/** The reservation reserve() made (the test fails if it was refused). */
function reserved<T>(r: { reservation: T } | { refusal: unknown }): T {
  if (!('reservation' in r)) throw new Error(`refused: ${JSON.stringify(r.refusal)}`);
  return r.reservation;
}

describe('MemoryLedger', () => {
  it('refuses a cost above the whole budget, naming what it needs and the budget, and queues one within it', () => {
    const { ledger: l } = ledger(64 * MiB);
    expect(l.reserve({ shared: 40 * MiB, transient: 30 * MiB }, 'big')).toEqual({ refusal: { needs: 70 * MiB, budget: 64 * MiB } });
    expect(l.waiting).toBe(0);
    const r = reserved(l.reserve({ shared: 34 * MiB, transient: 30 * MiB }, 'fits exactly'));
    expect([l.waiting, r.holder, r.memory]).toEqual([1, 'fits exactly', undefined]);
    expect(l.use()).toEqual({ budget: 64 * MiB, inUse: 0, pooled: 0, arena: 0, resident: 0 }); // waiting costs nothing
  });

  it('leases the waiting reservations in order, each once what it needs has come back', () => {
    const { ledger: l, returns } = ledger(64 * MiB);
    const a = reserved(l.reserve({ shared: 0, transient: 40 * MiB }, 'a'));
    const b = reserved(l.reserve({ shared: 0, transient: 40 * MiB }, 'b'));
    const c = reserved(l.reserve({ shared: 0, transient: 8 * MiB }, 'c'));
    expect(l.leaseNext(false)).toBe(a);
    expect(l.use()).toMatchObject({ inUse: 40 * MiB, resident: 40 * MiB });
    // b does not fit beside a, and c, which would, does not overtake it.
    expect(l.leaseNext(false)).toBeUndefined();
    expect(l.waiting).toBe(2);
    a.finish(false);
    expect(returns.count).toBe(1);
    expect(l.leaseNext(false)).toBe(b);
    expect(l.leaseNext(false)).toBe(c); // 40 + 8 MiB fit
    expect(l.use()).toMatchObject({ inUse: 48 * MiB, resident: 48 * MiB });
    expect(l.leaseNext(false)).toBeUndefined(); // none waits
  });

  it('starts the first waiting reservation when nothing else is processed, whatever is resident', () => {
    const { ledger: l } = ledger(64 * MiB);
    const first = reserved(l.reserve({ shared: 0, transient: 60 * MiB }, 'first'));
    const second = reserved(l.reserve({ shared: 0, transient: 60 * MiB }, 'second'));
    expect(l.leaseNext(false)).toBe(first);
    expect(l.leaseNext(false)).toBeUndefined();
    expect(l.leaseNext(true)).toBe(second); // the caller says nothing else runs
    first.release();
    second.release();
    expect(l.use().inUse).toBe(0);
  });

  it('gives a reservation back once, however often it is released', () => {
    const { ledger: l, returns } = ledger(64 * MiB);
    const r = reserved(l.reserve({ shared: 16 * MiB, transient: 8 * MiB, arenaBytes: 10 * MiB }, 'image'));
    expect(l.leaseNext(true)).toBe(r);
    const memory = r.memory!;
    expect(memory.buffer.byteLength).toBe(SharedMemoryArena.sizeClass(10 * MiB));
    // The result lives in the memory: the decoder's buffers go back, the memory stays.
    r.finish(true);
    expect(l.use()).toMatchObject({ inUse: 16 * MiB, pooled: 0 });
    r.finish(true); // a second finish changes nothing
    r.release();
    r.release();
    r.finish(false);
    expect(returns.count).toBe(2);
    const arena = SharedMemoryArena.sizeClass(10 * MiB);
    expect(l.use()).toEqual({ budget: 64 * MiB, inUse: 0, pooled: arena, arena, resident: arena });
    // The memory is reused, not made again.
    const next = reserved(l.reserve({ shared: 16 * MiB, transient: 8 * MiB, arenaBytes: 10 * MiB }, 'next'));
    expect(l.leaseNext(true)?.memory).toBe(memory);
    next.release();
  });

  it('takes everything back from a task that failed, its memory too', () => {
    const { ledger: l, returns } = ledger(64 * MiB);
    const r = reserved(l.reserve({ shared: 2 * MiB, transient: 5 * MiB, arenaBytes: MiB }, 'fails'));
    l.leaseNext(true);
    expect(l.use()).toEqual({ budget: 64 * MiB, inUse: 7 * MiB, pooled: 0, arena: MiB, resident: 6 * MiB });
    r.release(); // what the pool does with a task whose thread failed
    expect(returns.count).toBe(1);
    expect(l.use()).toEqual({ budget: 64 * MiB, inUse: 0, pooled: MiB, arena: MiB, resident: MiB });
  });

  it('lets a reservation still waiting leave the queue without counting anything back', () => {
    const { ledger: l, returns } = ledger(64 * MiB);
    const a = reserved(l.reserve({ shared: 0, transient: 40 * MiB }, 'a'));
    const b = reserved(l.reserve({ shared: 0, transient: 40 * MiB }, 'b'));
    const c = reserved(l.reserve({ shared: 0, transient: 8 * MiB }, 'c'));
    l.leaseNext(false);
    b.release();
    expect([l.waiting, returns.count]).toEqual([1, 0]);
    expect(l.leaseNext(false)).toBe(c);
    expect(l.withdrawWaiting()).toEqual([]);
    a.release();
    c.release();
    expect(l.use().inUse).toBe(0);
  });

  it('lends arena memory outside any image, counted until it is released once', () => {
    const { ledger: l, returns } = ledger(64 * MiB);
    const borrowed = l.borrow(3 * MiB)!;
    const size = SharedMemoryArena.sizeClass(3 * MiB);
    expect(borrowed.memory.buffer.byteLength).toBe(size);
    expect(l.use()).toEqual({ budget: 64 * MiB, inUse: size, pooled: 0, arena: size, resident: size });
    borrowed.release();
    borrowed.release();
    expect(returns.count).toBe(1);
    expect(l.use()).toEqual({ budget: 64 * MiB, inUse: 0, pooled: size, arena: size, resident: size });
    // Beyond the arena's cap (the budget): nothing is lent and nothing counted.
    expect(l.borrow(65 * MiB)).toBeUndefined();
    expect(l.use().arena).toBe(size);
  });

  it('counts nothing for memory WebAssembly refuses', () => {
    // A budget above the kernels' 1 GiB: the arena may try to make a memory larger than a
    // WebAssembly memory can be, which throws a RangeError.
    const { ledger: l } = ledger(4 * MAX_KERNEL_BYTES);
    expect(l.borrow(MAX_KERNEL_BYTES + 1)).toBeUndefined();
    expect(l.use()).toMatchObject({ inUse: 0, arena: 0, pooled: 0 });
  });

  it('applies a lower budget to what is leased from then on', () => {
    const { ledger: l } = ledger(64 * MiB);
    const a = reserved(l.reserve({ shared: 0, transient: 20 * MiB }, 'a'));
    const b = reserved(l.reserve({ shared: 0, transient: 20 * MiB }, 'b'));
    l.leaseNext(false);
    l.setBudget(32 * MiB);
    expect(l.leaseNext(false)).toBeUndefined();
    expect(l.reserve({ shared: 0, transient: 33 * MiB }, 'c')).toEqual({ refusal: { needs: 33 * MiB, budget: 32 * MiB } });
    a.release();
    expect(l.leaseNext(false)).toBe(b);
    b.release();
  });
});
