// The pool writing an image's encoder input to the /dev/shm file the router created for it, as
// the bands are done (docs/transport.md, "Written while the image is preprocessed"): the file
// holds exactly the bytes the worker must read, in the wire encoding; when it cannot be
// written as asked, the thread says why, closes it and leaves it to the router (which
// unlinks it), the image itself is still returned, and nothing else is touched.
import { execFileSync } from 'node:child_process';
import { lstatSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
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
/** The empty file ShmWriter.reserve creates for the tensor. */
const reserved = () => {
  const name = fileName();
  const file = path.join(shm.dir, name);
  writeFileSync(file, '', { flag: 'wx', mode: 0o600 });
  return { name, file };
};

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
    const { name, file } = reserved();
    const r = await pools[which].run({
      bytes: images.bytes('photo.jpg'),
      config: cfg,
      bf16: kind === 'bf16',
      float32: kind === 'float32',
      shm: { path: file, nbytes, kind },
    });
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

  it('writes nothing when the decoded image does not match the size the file was made for', async () => {
    const { name, file } = reserved();
    const r = await pools.split.run({
      bytes: images.bytes('photo.jpg'),
      config: QWEN_VL_DEFAULTS.qwen2_vl,
      bf16: false,
      shm: { path: file, nbytes: 1234, kind: 'float32' },
    });
    r.release();
    expect(r.shm).toEqual({ written: false, error: 'the decoded image does not match its header' });
    expect(r.pixelValues).toBeDefined(); // the image itself is fine: the router places it the usual way
    expect(statSync(file).size).toBe(0);
    expect(shm.files()).toEqual([name]); // the router's to unlink
    unlinkSync(file);
  });

  it.each(['split', 'single'] as const)(
    '%s: a write that fails (ENOSPC) is reported, not thrown: the image is returned whole and the request goes on',
    async (which) => {
      const cfg = QWEN_VL_DEFAULTS.qwen2_vl;
      const g = patchGeometry(300, 400, cfg);
      // /dev/full takes the open and fails every write with ENOSPC, as a full /dev/shm does.
      const r = await pools[which].run({
        bytes: images.bytes('photo.jpg'),
        config: cfg,
        bf16: false,
        shm: { path: '/dev/full', nbytes: g.patches * g.features * 4, kind: 'float32' },
      });
      try {
        expect(r.threads).toBe(which === 'split' ? 2 : 1);
        expect(r.shm).toMatchObject({ written: false });
        expect((r.shm as { error: string }).error).toMatch(/^write \/dev\/full: ENOSPC/);
        const again = await pools.single.run({ bytes: images.bytes('photo.jpg'), config: cfg, bf16: false });
        expect(view(r.pixelValues!).equals(view(again.pixelValues!))).toBe(true);
        again.release();
      } finally {
        r.release();
      }
      // The pool is still whole: the next image through it is fine.
      const next = await pools[which].run({ bytes: images.bytes('photo.jpg'), config: cfg, bf16: false });
      next.release();
    },
  );

  it('never follows a symbolic link put in place of the file, and never blocks on a FIFO', async () => {
    const outside = mkdtempSync(path.join(os.tmpdir(), 'mmtc-prewrite-'));
    const target = path.join(outside, 'target');
    writeFileSync(target, 'not ours');
    const g = patchGeometry(300, 400, QWEN_VL_DEFAULTS.qwen2_vl);
    const task = (file: string) => ({
      bytes: images.bytes('photo.jpg'),
      config: QWEN_VL_DEFAULTS.qwen2_vl,
      bf16: false,
      shm: { path: file, nbytes: g.patches * g.features * 4, kind: 'float32' as const },
    });
    try {
      const link = path.join(shm.dir, fileName());
      symlinkSync(target, link);
      const viaLink = await pools.split.run(task(link));
      viaLink.release();
      expect((viaLink.shm as { error: string }).error).toMatch(/ELOOP/);
      expect(readFileSync(target, 'utf8')).toBe('not ours');
      unlinkSync(link);
      const fifo = path.join(shm.dir, fileName());
      execFileSync('mkfifo', [fifo]);
      const viaFifo = await pools.split.run(task(fifo));
      viaFifo.release();
      expect((viaFifo.shm as { error: string }).error).toMatch(/ENXIO/);
      expect(lstatSync(fifo).isFIFO()).toBe(true);
      unlinkSync(fifo);
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
    expect(shm.files()).toEqual([]);
  });

  it('writes nothing when the image does not decode (the router removes the file with the failed request)', async () => {
    const { name, file } = reserved();
    await expect(
      pools.split.run({
        bytes: Buffer.from('\xff\xd8\xffnot a jpeg at all'),
        config: QWEN_VL_DEFAULTS.qwen2_vl,
        bf16: false,
        shm: { path: file, nbytes: 4096, kind: 'float32' },
      }),
    ).rejects.toThrow();
    expect(statSync(file).size).toBe(0);
    expect(shm.files()).toEqual([name]);
    unlinkSync(file);
  });
});
