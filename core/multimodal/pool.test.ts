import { afterAll, describe, expect, it } from 'vitest';
import { makeTestImages } from '../test/images.ts';
import { decodeToRgb, ImageDecodeError } from './decode.ts';
import { PreprocessPool } from './pool.ts';
import { preprocessRgb, QWEN_VL_DEFAULTS } from './qwen-vl.ts';

const images = makeTestImages();
const pool = new PreprocessPool(2);
afterAll(async () => {
  await pool.close();
  images.remove();
});

describe('PreprocessPool', () => {
  it('gives, off the main thread, the same encoder input as preprocessing in-thread', async () => {
    const cfg = QWEN_VL_DEFAULTS.qwen2_vl;
    const names = ['photo.jpg', 'rgba.png', 'gray.png', 'anim.gif'];
    const results = await Promise.all(names.map((n) => pool.run({ bytes: images.bytes(n), config: cfg, bf16: true })));
    for (const [i, r] of results.entries()) {
      const img = await decodeToRgb(images.bytes(names[i]!));
      const local = preprocessRgb(img.rgb, img.width, img.height, cfg, { bf16: true });
      expect(Buffer.from(r.pixelValues.buffer).equals(Buffer.from(local.pixelValues.buffer))).toBe(true);
      expect(Buffer.from(r.bf16!.buffer).equals(Buffer.from(local.bf16!.buffer))).toBe(true);
      expect(r).toMatchObject({ width: 400, height: 300, gridThw: [1, 28, 38], tokens: 266 });
      expect(r.timings.decode).toBeGreaterThan(0);
    }
  });

  it('rebuilds decode errors as their own type', async () => {
    const err = await pool.run({ bytes: Buffer.from('nope'), config: QWEN_VL_DEFAULTS.qwen2_vl, bf16: false }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageDecodeError);
  });

  it('refuses work after close', async () => {
    const closed = new PreprocessPool(1);
    await closed.close();
    await expect(closed.run({ bytes: Buffer.alloc(1), config: QWEN_VL_DEFAULTS.qwen2_vl, bf16: false })).rejects.toThrow('preprocessing pool is closed');
  });
});
