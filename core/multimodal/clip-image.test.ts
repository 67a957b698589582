import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { f32ToBf16 } from '../transport/dtype.ts';
import { makeTestImages } from '../test/images.ts';
import { runPython, runPythonScript } from '../test/python.ts';
import { CLIP_336_DEFAULTS, clipGeometry, clipMemoryBytes, clipResizeSize, preprocessClipRgb } from './clip-image.ts';
import { PreprocessPool } from './pool.ts';
import { decodeToRgb } from './decode.ts';
import { ImageSizeError } from './qwen-vl.ts';

const REFERENCE = path.resolve(import.meta.dirname, '../../scripts/reference/clip_reference.py');
const images = makeTestImages();
afterAll(() => images.remove());
// A portrait whose long side truncates where rounding would not (336·457/300 = 511.84: Hugging Face 511, rounded 512),
// and a small image CLIP scales up.
runPython(
  `
import sys, numpy as np
from PIL import Image
rng = np.random.default_rng(11)
Image.fromarray(rng.integers(0, 256, (457, 300, 3), dtype=np.uint8)).save(sys.argv[1] + '/portrait.png')
Image.fromarray(rng.integers(0, 256, (90, 120, 3), dtype=np.uint8)).save(sys.argv[1] + '/small.png')
`,
  [images.dir],
);

describe('CLIP resize and crop geometry (Hugging Face CLIPImageProcessor)', () => {
  it('the short side to 336, the long one truncated: 1920x1080 -> 597x336, 300x457 -> 336x511', () => {
    expect(clipResizeSize(1080, 1920, 336)).toEqual({ height: 336, width: 597 });
    expect(clipResizeSize(457, 300, 336)).toEqual({ height: 511, width: 336 });
    expect(clipResizeSize(336, 336, 336)).toEqual({ height: 336, width: 336 });
  });

  it('the center crop starts at (h - 336) // 2, (w - 336) // 2', () => {
    expect(clipGeometry(1080, 1920, CLIP_336_DEFAULTS)).toEqual({ resizedHeight: 336, resizedWidth: 597, top: 0, left: 130, height: 336, width: 336 });
    expect(clipGeometry(457, 300, CLIP_336_DEFAULTS)).toMatchObject({ top: 87, left: 0 });
  });

  it('refuses a zero side, and a resize that leaves the image smaller than its crop', () => {
    expect(() => clipGeometry(0, 10, CLIP_336_DEFAULTS)).toThrow(new ImageSizeError('image of 10x0 pixels has a zero side'));
    expect(() => clipGeometry(100, 120, { ...CLIP_336_DEFAULTS, do_resize: false })).toThrow(
      'image of 120x100 pixels is 120x100 after its resize, smaller than the 336x336 crop',
    );
  });
});

describe('CLIP encoder input agrees exactly with the Pillow + numpy reference', () => {
  it.each(['photo.jpg', 'rgba.png', 'gray.png', 'hd.jpg', 'portrait.png', 'small.png'])('%s', async (name) => {
    const out = path.join(images.dir, `clip-${name}.f32`);
    const info = JSON.parse(runPythonScript(REFERENCE, [images.file(name), '--out', out]));
    const img = await decodeToRgb(images.bytes(name));
    const ours = preprocessClipRgb(img.rgb, img.width, img.height, CLIP_336_DEFAULTS, { bf16: true });
    expect([ours.resizedHeight, ours.resizedWidth]).toEqual(info.resized);
    expect([3, ours.height, ours.width]).toEqual(info.shape);
    const bytesOf = (a: Float32Array | Uint16Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
    expect(bytesOf(ours.pixelValues!).equals(readFileSync(out))).toBe(true);
    // bfloat16 is the float32 values rounded; the JavaScript resize gives the same bits.
    expect(bytesOf(ours.bf16!).equals(Buffer.from(f32ToBf16(ours.pixelValues!)))).toBe(true);
    const js = preprocessClipRgb(img.rgb, img.width, img.height, CLIP_336_DEFAULTS, { javascript: true });
    expect(bytesOf(js.pixelValues!).equals(readFileSync(out))).toBe(true);
  });
});

describe('CLIP in the preprocessing pool', () => {
  it.each([1, 2])(
    "resizes in the pool's memory (counted in its budget) on %i thread(s) and gives the reference's bytes, float32 and bfloat16",
    async (threads) => {
      const pool = new PreprocessPool(threads);
      try {
        const out = path.join(images.dir, 'clip-pool-hd.f32');
        runPythonScript(REFERENCE, [images.file('hd.jpg'), '--out', out]);
        const reference = readFileSync(out);
        const r = await pool.run({ bytes: images.bytes('hd.jpg'), config: CLIP_336_DEFAULTS, bf16: true });
        // Two threads: the crop's rows split between them.
        expect([r.patches, r.features, r.tokens, r.threads]).toEqual([1, 3 * 336 * 336, 576, threads]);
        expect(r.inOutput).toBe(true);
        const bytesOf = (a: Float32Array | Uint16Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
        expect(bytesOf(r.pixelValues!).equals(reference)).toBe(true);
        expect(bytesOf(r.bf16!).equals(Buffer.from(f32ToBf16(new Float32Array(Uint8Array.from(reference).buffer))))).toBe(true);
        r.release();
        // What the pool reserves for it from its budget: at least the outputs and the resize's working space.
        const cost = pool.memoryCost(
          { bytes: images.bytes('hd.jpg'), config: CLIP_336_DEFAULTS, bf16: true },
          await pool.readHeader(images.bytes('hd.jpg'), CLIP_336_DEFAULTS),
        );
        expect(cost.shared).toBeGreaterThanOrEqual(clipMemoryBytes(1920, 1080, CLIP_336_DEFAULTS, { float32: true, bf16: true }));
      } finally {
        await pool.close();
      }
    },
  );
});
