// The reference worker's two ways of reading a /dev/shm tensor (docs/performance.md, "Router
// end to end"): into a pooled, pre-faulted buffer, or into a fresh buffer per tensor as the
// gateway's Python servicers do. Either way the worker reads exactly the bytes and unlinks the file.
import { afterAll, describe, expect, it } from 'vitest';
import { makeShmTestDir } from '../test/shm-dir.ts';
import { TensorReader } from '../transport/shm-reader.ts';
import { ShmWriter } from '../transport/shm-writer.ts';
import { FreshBuffers } from './server.ts';
import { TensorBufferPool } from '../transport/buffer-pool.ts';

const shm = makeShmTestDir();
afterAll(() => shm.remove());

const data = (n: number, seed: number) => Uint8Array.from({ length: n }, (_, i) => (i * 7 + seed) & 0xff);

describe('read buffers of the reference worker', () => {
  it.each([
    ['fresh', () => new FreshBuffers(), false],
    ['pooled', () => new TensorBufferPool(), true],
  ] as const)('%s: exact bytes, file unlinked; buffers reused only when pooled', async (_name, pool, reused) => {
    const writer = new ShmWriter({ dir: shm.dir });
    const reader = new TensorReader({ dir: shm.dir, pool: pool(), unlinkAfterRead: true });
    const buffers: ArrayBufferLike[] = [];
    for (const seed of [1, 2]) {
      const bytes = data(1 << 20, seed);
      const w = await writer.write(bytes);
      if (!w.ok) throw new Error(w.error);
      const read = reader.read({ shape: [1 << 20], dtype: 'uint8', payload: { kind: 'shm', handle: w.handle } });
      expect(Buffer.compare(read.bytes, Buffer.from(bytes))).toBe(0);
      buffers.push(read.bytes.buffer);
      read.release();
    }
    expect(buffers[0] === buffers[1]).toBe(reused);
    expect(shm.files()).toEqual([]);
  });
});
