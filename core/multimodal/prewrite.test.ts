// The pool writing an image's encoder input to its /dev/shm file as the bands are done
// (docs/transport.md, "Writing a tensor"): the file holds exactly the bytes the worker must
// read, in the wire encoding, made as the router makes its files; when it cannot be written
// as asked, nothing of ours is left and nothing that is not ours is touched.
import { lstatSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeShmTestDir } from '../test/shm-dir.ts';
import { makeTestImages } from '../test/images.ts';
import { PreprocessPool } from './pool.ts';
import { patchGeometry, QWEN_VL_DEFAULTS } from './qwen-vl.ts';

const images = makeTestImages();
const shm = makeShmTestDir();
const pools = { split: new PreprocessPool(2), single: new PreprocessPool(1) };
afterAll(async () => {
  await Promise.all(Object.values(pools).map((p) => p.close()));
  images.remove();
  shm.remove();
});

let seq = 0;
const fileName = () => `smg-tokenspeed-${process.pid}-${BigInt(Date.now()) * 1_000_000n}-${++seq}`;
const view = (a: Float32Array | Uint16Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

describe('the pool writing the encoder input to its /dev/shm file', () => {
  it.each([
    ['two threads, float32', 'split', 'float32'],
    ['two threads, bfloat16 only', 'split', 'bf16'],
    ['one thread, float32', 'single', 'float32'],
    ['one thread, bfloat16 only', 'single', 'bf16'],
  ] as const)('%s: the file holds exactly the output bytes, mode 0600', async (_name, which, kind) => {
    const cfg = QWEN_VL_DEFAULTS.qwen2_vl;
    const g = patchGeometry(300, 400, cfg); // photo.jpg is 400x300
    const nbytes = g.patches * g.features * (kind === 'float32' ? 4 : 2);
    const name = fileName();
    const file = path.join(shm.dir, name);
    const r = await pools[which].run({ bytes: images.bytes('photo.jpg'), config: cfg, bf16: kind === 'bf16', float32: kind === 'float32', shm: { path: file, nbytes, kind } });
    try {
      expect(r.shm).toMatchObject({ written: true });
      expect(r.threads).toBe(which === 'split' ? 2 : 1);
      const st = lstatSync(file);
      expect(st.isFile()).toBe(true);
      expect(st.mode & 0o777).toBe(0o600);
      expect(readFileSync(file).equals(view(kind === 'float32' ? r.pixelValues! : r.bf16!))).toBe(true);
    } finally {
      r.release();
    }
    expect(shm.files()).toEqual([name]); // the worker unlinks it after reading; here the test does
    unlinkSync(file);
  });

  it('writes nothing, and leaves nothing, when the decoded image does not match the size the file was named for', async () => {
    const file = path.join(shm.dir, fileName());
    const r = await pools.split.run({ bytes: images.bytes('photo.jpg'), config: QWEN_VL_DEFAULTS.qwen2_vl, bf16: false, shm: { path: file, nbytes: 1234, kind: 'float32' } });
    r.release();
    expect(r.shm).toEqual({ written: false, error: 'the decoded image does not match its header' });
    expect(r.pixelValues).toBeDefined(); // the image itself is fine: the router places it the usual way
    expect(shm.files()).toEqual([]);
  });

  it('never writes into, or removes, a file that exists under the name', async () => {
    const name = fileName();
    const file = path.join(shm.dir, name);
    writeFileSync(file, 'not ours', { flag: 'wx' });
    const g = patchGeometry(300, 400, QWEN_VL_DEFAULTS.qwen2_vl);
    const r = await pools.split.run({ bytes: images.bytes('photo.jpg'), config: QWEN_VL_DEFAULTS.qwen2_vl, bf16: false, shm: { path: file, nbytes: g.patches * g.features * 4, kind: 'float32' } });
    r.release();
    expect(r.shm).toMatchObject({ written: false });
    expect((r.shm as { error: string }).error).toMatch(/EEXIST/);
    expect(readFileSync(file, 'utf8')).toBe('not ours');
    expect(shm.files()).toEqual([name]);
    unlinkSync(file);
  });

  it('leaves no file when the image does not decode', async () => {
    const file = path.join(shm.dir, fileName());
    await expect(pools.split.run({ bytes: Buffer.from('\xff\xd8\xffnot a jpeg at all'), config: QWEN_VL_DEFAULTS.qwen2_vl, bf16: false, shm: { path: file, nbytes: 4096, kind: 'float32' } })).rejects.toThrow();
    expect(shm.files()).toEqual([]);
  });
});
