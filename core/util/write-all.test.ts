// The one write loop: every byte lands at its position however little each write takes, a write
// of nothing is an error, and a failing write's own error is what the caller gets.
import { closeSync, openSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeShmTestDir } from '../test/shm-dir.ts';
import { writeAll, writeAllAt, writeAllAtSync, writeAllSync } from './write-all.ts';

const shm = makeShmTestDir();
afterAll(() => shm.remove());

const bytes = Uint8Array.from({ length: 1000 }, (_, i) => (i * 31) & 255);

/** A file of `size` zero bytes the writes go into, and the writes a write function made. */
function shortWriter(size: number, most: number) {
  const file = new Uint8Array(size);
  const calls: Array<[number, number]> = [];
  const write = (chunk: Uint8Array, at: number) => {
    const n = Math.min(most, chunk.byteLength);
    file.set(chunk.subarray(0, n), at);
    calls.push([at, n]);
    return n;
  };
  return { file, calls, write };
}

describe('writeAll', () => {
  it.each(['sync', 'async'] as const)('%s: a write that takes 300 bytes at a time: all 1000, in order, at the position asked', async (mode) => {
    const w = shortWriter(1100, 300);
    if (mode === 'sync') writeAllSync(w.write, bytes, 100);
    else await writeAll(async (chunk, at) => w.write(chunk, at), bytes, 100);
    expect(w.calls).toEqual([
      [100, 300],
      [400, 300],
      [700, 300],
      [1000, 100],
    ]);
    expect(w.file.subarray(100)).toEqual(bytes);
    expect(w.file.subarray(0, 100).every((b) => b === 0)).toBe(true);
  });

  it.each(['sync', 'async'] as const)('%s: a write of nothing is EIO, "wrote <done> of <total> bytes"', async (mode) => {
    let left = 2;
    const write = (chunk: Uint8Array) => (left-- > 0 ? Math.min(400, chunk.byteLength) : 0);
    const run = mode === 'sync' ? async () => writeAllSync(write, bytes) : () => writeAll(async (chunk) => write(chunk), bytes);
    await expect(run()).rejects.toMatchObject({ code: 'EIO', message: 'wrote 800 of 1000 bytes' });
  });

  it.each(['sync', 'async'] as const)('%s: nothing to write calls no write', async (mode) => {
    const w = shortWriter(0, 1);
    if (mode === 'sync') writeAllSync(w.write, new Uint8Array(0));
    else await writeAll(async (chunk, at) => w.write(chunk, at), new Uint8Array(0));
    expect(w.calls).toEqual([]);
  });

  it.each(['sync', 'async'] as const)('%s: to a file descriptor, at an offset; ENOSPC as the kernel says it', async (mode) => {
    const file = path.join(shm.dir, `f-${mode}`);
    const fd = openSync(file, 'w+');
    try {
      if (mode === 'sync') writeAllAtSync(fd, bytes, 24);
      else await writeAllAt(fd, bytes, 24);
    } finally {
      closeSync(fd);
    }
    expect(readFileSync(file).subarray(24)).toEqual(Buffer.from(bytes));
    const full = openSync('/dev/full', 'w');
    try {
      const run = mode === 'sync' ? async () => writeAllAtSync(full, bytes) : () => writeAllAt(full, bytes);
      await expect(run()).rejects.toMatchObject({ code: 'ENOSPC' });
    } finally {
      closeSync(full);
    }
  });
});
