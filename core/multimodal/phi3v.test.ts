import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { addNoiseImages, makeTestImages } from '../test/images.ts';
import { runPythonScript } from '../test/python.ts';
import { decodeToRgb } from './decode.ts';
import { f32ToBf16 } from '../transport/dtype.ts';
import { PHI3_VISION_DEFAULTS, phi3VisionBandStarts, phi3VisionGeometry, phi3VisionMemoryBytes, phi3VisionTokens, preprocessPhi3VisionRgb } from './phi3v.ts';
import { PreprocessPool } from './pool.ts';
import { resizeBytes } from './resize-simd.ts';
import { ImageSizeError } from './qwen-vl.ts';

const REFERENCE = path.resolve(import.meta.dirname, '../../scripts/reference/phi3v_reference.py');
const images = makeTestImages();
afterAll(() => images.remove());
// A portrait (transposed for the HD transform), a 1x1 image (scaled up to 4x4 tiles), a
// 3000x20 strip (one tile row of 16, 35 rows of pixels padded with white to 336), a 4:3
// image (4x3 tiles: the global image's columns summed, its rows picked; hd.jpg's 5x3 picks
// both) and a 5:2 one (5x2 tiles: its columns picked, its rows summed).
addNoiseImages(images, 11, [
  ['tall.png', 700, 300],
  ['four3.png', 480, 640],
  ['wide.png', 200, 500],
  ['dot.png', 1, 1],
  ['strip.png', 20, 3000],
]);
const bytesOf = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

describe('Phi-3-vision HD geometry (HD_transform, padding_336)', () => {
  it('1920x1080: scale 5 (5 · ceil(5 / 1.78) = 10 ≤ 16; 6 · 4 = 24 is not), 1680x945 padded to 1680x1008: 15 tiles, 2353 tokens', () => {
    expect(phi3VisionGeometry(1080, 1920, PHI3_VISION_DEFAULTS)).toEqual({
      transposed: false,
      resizedHeight: 945,
      resizedWidth: 1680,
      hdHeight: 1008,
      hdWidth: 1680,
      padStart: 31,
      tiles: 15,
      tokens: (15 + 1) * 144 + 1 + (3 + 1) * 12,
    });
  });

  it('a portrait is transposed: 300x700 becomes 720x1680 padded across its width to 1008x1680', () => {
    expect(phi3VisionGeometry(700, 300, PHI3_VISION_DEFAULTS)).toMatchObject({
      transposed: true,
      resizedHeight: 1680,
      resizedWidth: 720,
      hdHeight: 1680,
      hdWidth: 1008,
      padStart: 144,
      tiles: 15,
      tokens: 2377,
    });
  });

  it('num_crops bounds the tiles: a square is 4x4 of 16, 2x2 of 4', () => {
    expect(phi3VisionGeometry(500, 500, PHI3_VISION_DEFAULTS)).toMatchObject({ hdHeight: 1344, hdWidth: 1344, tiles: 16, tokens: 2509 });
    expect(phi3VisionGeometry(500, 500, { num_crops: 4 })).toMatchObject({ hdHeight: 672, hdWidth: 672, tiles: 4, tokens: phi3VisionTokens(672, 672) });
  });

  it('refuses a zero side, and an image too thin for the transform, naming its size', () => {
    expect(() => phi3VisionGeometry(0, 10, PHI3_VISION_DEFAULTS)).toThrow(new ImageSizeError('image of 10x0 pixels has a zero side'));
    expect(() => phi3VisionGeometry(1, 6000, PHI3_VISION_DEFAULTS)).toThrow(
      new ImageSizeError("image of 6000x1 pixels is too thin for Phi-3-vision's HD transform: its short side would be resized to 0 pixels (at most 5376 : 1)"),
    );
  });
});

const NAMES = ['photo.jpg', 'rgba.png', 'gray.png', 'hd.jpg', 'tall.png', 'dot.png', 'strip.png', 'four3.png', 'wide.png'];
const referenceOut = (name: string) => path.join(images.dir, `phi3v-${name}.f32`);
// One Python process for every image (importing torch is most of its time).
const REFERENCE_INFO = runPythonScript(REFERENCE, ['--each', ...NAMES.map((n) => `${images.file(n)}=${referenceOut(n)}`)])
  .trim()
  .split('\n')
  .map((line) => JSON.parse(line) as { resized: number[]; hd: number[]; tokens: number; shape: number[] });

describe('Phi-3-vision encoder input agrees exactly with the processor run in Pillow and torch', () => {
  it.each(NAMES.map((name, i) => [name, i] as const))('%s', async (name, i) => {
    const out = referenceOut(name);
    const info = REFERENCE_INFO[i]!;
    const img = await decodeToRgb(images.bytes(name));
    const ours = preprocessPhi3VisionRgb(img.rgb, img.width, img.height, PHI3_VISION_DEFAULTS);
    expect([ours.resizedHeight, ours.resizedWidth]).toEqual(info.resized);
    expect([ours.hdHeight, ours.hdWidth]).toEqual(info.hd);
    expect(ours.tokens).toBe(info.tokens);
    expect(info.shape).toEqual([17, 3, 336, 336]);
    // The tiles are Pillow's bilinear bytes normalized; the global image is torch's bicubic,
    // bit for bit (its fused multiply-adds, in its order). The SIMD kernels and the JavaScript resize alike.
    expect(bytesOf(ours.pixelValues!).equals(readFileSync(out))).toBe(true);
    const js = preprocessPhi3VisionRgb(img.rgb, img.width, img.height, PHI3_VISION_DEFAULTS, { javascript: true });
    expect(bytesOf(js.pixelValues!).equals(readFileSync(out))).toBe(true);
  });

  it('fewer crops: 4, as Phi-3.5-vision is run for many frames', async () => {
    const out = path.join(images.dir, 'phi3v-4.f32');
    const info = JSON.parse(runPythonScript(REFERENCE, [images.file('hd.jpg'), '--crops', '4', '--out', out]));
    const img = await decodeToRgb(images.bytes('hd.jpg'));
    const ours = preprocessPhi3VisionRgb(img.rgb, img.width, img.height, { ...PHI3_VISION_DEFAULTS, num_crops: 4 });
    expect(info.shape).toEqual([5, 3, 336, 336]);
    expect([ours.hdHeight, ours.hdWidth, ours.tokens]).toEqual([...info.hd, info.tokens]);
    expect(bytesOf(ours.pixelValues!).equals(readFileSync(out))).toBe(true);
  });
});

describe('Phi-3-vision in the preprocessing pool', () => {
  it.each([1, 2])("a portrait's crops and HD planes in the pool's memory on %i thread(s), float32 and bfloat16: the reference's bytes", async (threads) => {
    const reference = readFileSync(referenceOut('tall.png'));
    const pool = new PreprocessPool(threads);
    try {
      const r = await pool.run({ bytes: images.bytes('tall.png'), config: PHI3_VISION_DEFAULTS, bf16: true });
      expect([r.resizedHeight, r.resizedWidth, r.tokens, r.imageSize]).toEqual([1680, 720, 2377, [1680, 1008]]);
      // Two threads: the resize's rows (the HD image's columns) split between them.
      expect([r.inOutput, r.threads]).toEqual([true, threads]);
      expect(bytesOf(r.pixelValues!).equals(reference)).toBe(true);
      expect(
        Buffer.from(r.bf16!.buffer, r.bf16!.byteOffset, r.bf16!.byteLength).equals(Buffer.from(f32ToBf16(new Float32Array(Uint8Array.from(reference).buffer)))),
      ).toBe(true);
      r.release();
    } finally {
      await pool.close();
    }
  });

  it.each([
    ['1920x1080 (the global image picks rows and columns), float32 and bfloat16: picked from the float32 tiles just written', 'hd.jpg', true],
    ['1920x1080, bfloat16 alone: picked from the pixels through the float32 tables into a float32 crop in the pool memory', 'hd.jpg', false],
    ['640x480 (its rows picked, its columns summed), float32 and bfloat16: each read row summed from the float32 tiles', 'four3.png', true],
    ['640x480, bfloat16 alone: each read row summed from its values through the float32 tables, written in the SIMD kernels memory', 'four3.png', false],
    ['500x200 (its columns picked, its rows summed), float32 and bfloat16: each read row picked from the float32 tiles into the sums', 'wide.png', true],
    ['500x200, bfloat16 alone: each read row picked from its pixels through the float32 tables into the sums', 'wide.png', false],
    ['3000x20 (one tile row: the float32 crop for bfloat16 alone is the whole of the sums), bfloat16 alone', 'strip.png', false],
  ])("a landscape on two threads, %s: the reference's bytes", async (_, name, float32) => {
    const reference = readFileSync(referenceOut(name));
    const pool = new PreprocessPool(2);
    try {
      const r = await pool.run({ bytes: images.bytes(name), config: PHI3_VISION_DEFAULTS, bf16: true, float32 });
      expect([r.inOutput, r.threads, r.pixelValues !== undefined]).toEqual([true, 2, float32]);
      if (float32) expect(bytesOf(r.pixelValues!).equals(reference)).toBe(true);
      expect(
        Buffer.from(r.bf16!.buffer, r.bf16!.byteOffset, r.bf16!.byteLength).equals(Buffer.from(f32ToBf16(new Float32Array(Uint8Array.from(reference).buffer)))),
      ).toBe(true);
      r.release();
    } finally {
      await pool.close();
    }
  });

  it("counts the outputs, the global image's sums (and a portrait's HD planes), the resize's working space in two bands, a portrait's transposed copy and (bfloat16 alone) the global image's float32 crop", () => {
    // 300x700: a row of 336 sums for each of the 1680 HD rows and channels, the portrait's 1008x1680 HD float32 planes, the
    // resize of the transposed 700x300 to 1680x720 in the kernels' layout (split in two bands), a 300x700 transposed copy.
    const base = 17 * 3 * 336 * 336 * (4 + 2) + 3 * 1680 * 336 * 4 + 3 * 1008 * 1680 * 4;
    // Then the level tables (float32 and bfloat16, 256 levels of 3 channels) the SIMD kernels write the crops from.
    const tables = 3 * 256 * (4 + 2);
    const split = phi3VisionBandStarts(300, 700, PHI3_VISION_DEFAULTS);
    expect(split).toHaveLength(1);
    const resize = resizeBytes(700, 300, 1680, 720, split, base + tables, undefined, 'bilinear');
    expect(phi3VisionMemoryBytes(300, 700, PHI3_VISION_DEFAULTS, { float32: true, bf16: true })).toBe(base + tables + resize + 300 * 700 * 3);
    const bf16Base = base - 17 * 3 * 336 * 336 * 4;
    expect(phi3VisionMemoryBytes(300, 700, PHI3_VISION_DEFAULTS, { float32: false, bf16: true })).toBe(
      bf16Base + tables + resizeBytes(700, 300, 1680, 720, split, bf16Base + tables, undefined, 'bilinear') + 300 * 700 * 3 + 3 * 336 * 336 * 4,
    );
  });
});
