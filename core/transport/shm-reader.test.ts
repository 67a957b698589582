import { existsSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeShmTestDir } from '../test/shm-dir.ts';
import { TensorBufferPool } from './buffer-pool.ts';
import { TensorReadError, TensorReader, unlinkAfterReadFromEnv, validateShmName, type WireTensor } from './shm-reader.ts';
import { ShmWriter } from './shm-writer.ts';

let shm: ReturnType<typeof makeShmTestDir>;
beforeEach(() => {
  shm = makeShmTestDir();
});
afterEach(() => shm.remove());

const f32 = (values: number[]) => new Uint8Array(Float32Array.from(values).buffer);

function shmTensor(name: string, nbytes: number, shape = [nbytes / 4], dtype = 'float32', offset = 0): WireTensor {
  return { shape, dtype, payload: { kind: 'shm', handle: { name, offset, nbytes, owner_id: 'smg:1' } } };
}

function readError(reader: TensorReader, tensor: WireTensor): TensorReadError {
  try {
    reader.read(tensor);
  } catch (err) {
    if (err instanceof TensorReadError) return err;
    throw err;
  }
  throw new Error('expected the read to fail');
}

describe('TensorReader', () => {
  it('reads what the writer wrote, then unlinks the file', async () => {
    const data = f32([1, 2, 3, 4, 5, 6]);
    const w = await new ShmWriter({ dir: shm.dir }).write(data);
    if (!w.ok) throw new Error(w.error);
    const read = new TensorReader({ dir: shm.dir, unlinkAfterRead: true }).read(shmTensor(w.handle.name, 24, [2, 3]));
    expect(read.path).toBe('shm');
    expect([...new Float32Array(read.bytes.buffer, read.bytes.byteOffset, 6)]).toEqual([1, 2, 3, 4, 5, 6]);
    expect(shm.files()).toEqual([]);
  });

  it('keeps the file when TOKENSPEED_UNLINK_MM_SHM_AFTER_READ is 0/false/no', async () => {
    expect(['0', 'false', 'NO', ' no '].map((v) => unlinkAfterReadFromEnv({ TOKENSPEED_UNLINK_MM_SHM_AFTER_READ: v }))).toEqual([false, false, false, false]);
    expect(['1', 'true', 'yes', ''].map((v) => unlinkAfterReadFromEnv({ TOKENSPEED_UNLINK_MM_SHM_AFTER_READ: v }))).toEqual([true, true, true, true]);
    expect(unlinkAfterReadFromEnv({})).toBe(true);
    const w = await new ShmWriter({ dir: shm.dir }).write(f32([7]));
    if (!w.ok) throw new Error(w.error);
    new TensorReader({ dir: shm.dir, unlinkAfterRead: false }).read(shmTensor(w.handle.name, 4));
    expect(shm.files()).toEqual([w.handle.name]);
  });

  it('reads at the offset and strips a leading slash from the name', () => {
    writeFileSync(path.join(shm.dir, 'smg-tokenspeed-1-1-1'), Buffer.concat([Buffer.from('skip'), Buffer.from(f32([42]))]));
    const read = new TensorReader({ dir: shm.dir }).read(shmTensor('/smg-tokenspeed-1-1-1', 4, [1], 'float32', 4));
    expect(new Float32Array(read.bytes.buffer, read.bytes.byteOffset, 1)[0]).toBe(42);
  });

  it.each([
    ['../x', "contains '/'"],
    ['a/b', "contains '/'"],
    ['.', "'.' is not a file name"],
    ['..', "'..' is not a file name"],
    ['/', 'empty'],
    ['', 'empty'],
    ['a\0b', 'contains NUL'],
  ])('refuses the name %j', (name, why) => {
    const err = readError(new TensorReader({ dir: shm.dir }), shmTensor(name, 4));
    expect(err.code).toBe('invalid_name');
    expect(err.message).toBe(`invalid shm name ${JSON.stringify(name)}: ${why}`);
    expect(() => validateShmName(name)).toThrow(TensorReadError);
  });

  it('refuses a symlink and does not unlink it', () => {
    writeFileSync(path.join(shm.dir, 'target'), Buffer.from(f32([1])));
    symlinkSync(path.join(shm.dir, 'target'), path.join(shm.dir, 'link'));
    const err = readError(new TensorReader({ dir: shm.dir }), shmTensor('link', 4));
    expect(err.code).toBe('symlink');
    expect(err.message).toBe(`refusing ${path.join(shm.dir, 'link')}: it is a symbolic link`);
    expect(shm.files()).toEqual(['link', 'target']);
  });

  it('refuses a directory', () => {
    mkdirSync(path.join(shm.dir, 'adir'));
    const err = readError(new TensorReader({ dir: shm.dir }), shmTensor('adir', 4));
    expect(err.code).toBe('not_regular_file');
    expect(existsSync(path.join(shm.dir, 'adir'))).toBe(true);
  });

  it('a short file is a byte length mismatch', () => {
    writeFileSync(path.join(shm.dir, 'short'), Buffer.alloc(10));
    const err = readError(new TensorReader({ dir: shm.dir }), shmTensor('short', 16));
    expect(err.code).toBe('length_mismatch');
    expect(err.message).toBe('byte length mismatch (expected 16, got 10)');
  });

  it('a handle asking for more than the file holds reserves only what is there, and is a length mismatch', () => {
    writeFileSync(path.join(shm.dir, 'small'), Buffer.alloc(4096, 1));
    const pool = new TensorBufferPool();
    const acquired: number[] = [];
    const acquire = pool.acquire.bind(pool);
    pool.acquire = (n: number) => (acquired.push(n), acquire(n));
    const reader = new TensorReader({ dir: shm.dir, pool, unlinkAfterRead: false });
    const err = readError(reader, shmTensor('small', 2 ** 31, [2 ** 29]));
    expect(err).toMatchObject({ code: 'length_mismatch', message: 'byte length mismatch (expected 2147483648, got 4096)' });
    expect(readError(reader, shmTensor('small', 16, [4], 'float32', 4090)).message).toBe('byte length mismatch (expected 16, got 6)');
    expect(readError(reader, shmTensor('small', 16, [4], 'float32', 2 ** 40)).message).toBe('byte length mismatch (expected 16, got 0)');
    expect(Math.max(...acquired)).toBe(4096);
  });

  it.each([
    [{ nbytes: -1 }, 'nbytes -1'],
    [{ nbytes: 1.5 }, 'nbytes 1.5'],
    [{ nbytes: 2 ** 53 }, 'nbytes 9007199254740992'],
    [{ offset: -1 }, 'offset -1'],
    [{ offset: 0.5 }, 'offset 0.5'],
    [{ offset: Number.NaN }, 'offset NaN'],
  ])('an offset or length that is not a non-negative integer is an invalid handle, before anything is opened: %j', (bad, what) => {
    writeFileSync(path.join(shm.dir, 'smg-tokenspeed-1-1-1'), Buffer.alloc(16));
    const tensor = shmTensor('smg-tokenspeed-1-1-1', 16, [4]);
    if (tensor.payload.kind === 'shm') Object.assign(tensor.payload.handle, bad);
    const err = readError(new TensorReader({ dir: shm.dir }), tensor);
    expect(err.code).toBe('invalid_handle');
    expect(err.message).toBe(`invalid shm handle for "smg-tokenspeed-1-1-1": ${what} is not a non-negative integer`);
    expect(shm.files()).toEqual(['smg-tokenspeed-1-1-1']);
  });

  it('nbytes must equal shape x dtype size', () => {
    writeFileSync(path.join(shm.dir, 'f'), Buffer.alloc(16));
    const err = readError(new TensorReader({ dir: shm.dir }), shmTensor('f', 16, [3], 'float32'));
    expect(err.code).toBe('shape_mismatch');
    expect(err.message).toBe('nbytes 16 does not match shape [3] x float32 (12 bytes)');
    const inline = readError(new TensorReader(), { shape: [2], dtype: 'bfloat16', payload: { kind: 'inline', bytes: new Uint8Array(3) } });
    expect(inline.code).toBe('shape_mismatch');
    expect(readError(new TensorReader(), { shape: [1], dtype: 'complex64', payload: { kind: 'inline', bytes: new Uint8Array(8) } }).message).toBe(
      "unsupported dtype 'complex64'",
    );
  });

  it('a missing file, a remote payload and no payload are distinct errors', () => {
    const reader = new TensorReader({ dir: shm.dir });
    expect(readError(reader, shmTensor('smg-tokenspeed-1-1-9', 4)).message).toBe(`cannot open ${path.join(shm.dir, 'smg-tokenspeed-1-1-9')}: ENOENT`);
    expect(readError(reader, { shape: [1], dtype: 'float32', payload: { kind: 'remote', transport: 'rdma', nbytes: 4 } }).message).toBe(
      'remote payload not supported',
    );
    expect(readError(reader, { shape: [1], dtype: 'float32', payload: { kind: 'none' } }).code).toBe('no_payload');
  });

  it('inline bytes are returned as they are', () => {
    const bytes = f32([3.5, -1]);
    const read = new TensorReader().read({ shape: [2], dtype: 'float32', payload: { kind: 'inline', bytes } });
    expect(read.path).toBe('inline');
    expect(Buffer.from(read.bytes).equals(Buffer.from(bytes))).toBe(true);
  });

  it('large reads reuse pooled buffers instead of allocating per tensor', async () => {
    const pool = new TensorBufferPool();
    const reader = new TensorReader({ dir: shm.dir, pool });
    const writer = new ShmWriter({ dir: shm.dir });
    const seen = new Set<ArrayBufferLike>();
    for (let i = 0; i < 3; i++) {
      const data = new Uint8Array(1024 * 1024).fill(i + 1);
      const w = await writer.write(data);
      if (!w.ok) throw new Error(w.error);
      const read = reader.read(shmTensor(w.handle.name, data.byteLength, [data.byteLength], 'uint8'));
      expect(read.bytes[0]).toBe(i + 1);
      expect(read.bytes[data.byteLength - 1]).toBe(i + 1);
      seen.add(read.bytes.buffer);
      read.release();
    }
    expect(seen.size).toBe(1);
    expect(pool.stats.buffers).toBe(1);
  });
});
