import { describe, expect, it } from 'vitest';
import { MAX_KERNEL_BYTES } from './resize-simd.ts';
import { SharedMemoryArena } from './shared-memory-arena.ts';

const MiB = 1024 * 1024;
const sizeOf = SharedMemoryArena.sizeClass;

describe('SharedMemoryArena', () => {
  it('makes memories in four size classes per doubling, from 1 MiB, in whole 64 KiB pages', () => {
    expect([sizeOf(1), sizeOf(MiB), sizeOf(MiB + 1), sizeOf(2 * MiB)]).toEqual([MiB, MiB, 1310720, 2 * MiB]);
    for (const bytes of [1, 5 * MiB, 200 * MiB + 3]) {
      const cls = sizeOf(bytes);
      expect(cls % 65536).toBe(0);
      expect(cls).toBeGreaterThanOrEqual(bytes);
      expect(cls).toBeLessThan(Math.max(bytes, MiB) * 2 ** 0.25 + 65536);
    }
  });

  it('reuses the smallest free memory that holds the request, and counts what is free', () => {
    const arena = new SharedMemoryArena(64 * MiB);
    const small = arena.acquire(MiB)!;
    const large = arena.acquire(8 * MiB)!;
    expect([arena.created, arena.pooled]).toEqual([9 * MiB, 0]);
    arena.release(large, large.buffer.byteLength);
    arena.release(small, small.buffer.byteLength);
    expect(arena.pooled).toBe(9 * MiB);
    expect(arena.fitsFree(4 * MiB)).toBe(true);
    expect(arena.acquire(512 * 1024)).toBe(small);
    expect(arena.acquire(4 * MiB)).toBe(large);
    expect([arena.created, arena.pooled]).toEqual([9 * MiB, 0]);
  });

  it('grows a free memory in place when a new one would pass its cap, and stops at the cap', () => {
    const arena = new SharedMemoryArena(4 * MiB);
    const memory = arena.acquire(MiB)!;
    arena.release(memory, memory.buffer.byteLength);
    const grown = arena.acquire(3 * MiB);
    expect(grown).toBe(memory);
    expect(memory.buffer.byteLength).toBe(sizeOf(3 * MiB));
    expect([arena.created, arena.pooled]).toEqual([sizeOf(3 * MiB), 0]);
    expect(arena.acquire(MiB)).toBeUndefined(); // at its cap, nothing free
    // A memory that grew while in use counts at its new size.
    memory.grow(4);
    arena.release(memory, sizeOf(3 * MiB));
    expect([arena.created, arena.pooled]).toEqual([sizeOf(3 * MiB) + 4 * 65536, sizeOf(3 * MiB) + 4 * 65536]);
  });

  it('counts nothing, and loses no free memory, when WebAssembly refuses a memory or its growth', () => {
    const over = sizeOf(MAX_KERNEL_BYTES + 1); // beyond what a WebAssembly memory may hold (RangeError)
    const arena = new SharedMemoryArena(2 * over);
    expect(arena.acquire(MAX_KERNEL_BYTES + 1)).toBeUndefined();
    expect([arena.created, arena.pooled]).toEqual([0, 0]);
    // Growing the one free memory in place instead would pass the kernels' maximum too.
    const tight = new SharedMemoryArena(over);
    const memory = tight.acquire(MiB)!;
    tight.release(memory, memory.buffer.byteLength);
    expect(tight.acquire(MAX_KERNEL_BYTES + 1)).toBeUndefined();
    expect([tight.created, tight.pooled, memory.buffer.byteLength]).toEqual([MiB, MiB, MiB]);
    expect(tight.acquire(MiB)).toBe(memory); // still there for the next image
  });
});
