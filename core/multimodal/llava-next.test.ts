import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { addNoiseImages, makeTestImages } from '../test/images.ts';
import { runPythonScript } from '../test/python.ts';
import { f32ToBf16 } from '../transport/dtype.ts';
import { decodeToRgb } from './decode.ts';
import {
  anyresBandStarts,
  anyresGeometry,
  anyresMemoryBytes,
  anyresTokens,
  LLAVA_NEXT_DEFAULTS,
  preprocessAnyresRgb,
  selectBestResolution,
} from './llava-next.ts';
import { PreprocessPool } from './pool.ts';
import { ImageSizeError } from './qwen-vl.ts';
import { resizeBytes } from './resize-simd.ts';

const REFERENCE = path.resolve(import.meta.dirname, '../../scripts/reference/llava_next_reference.py');
const images = makeTestImages();
afterAll(() => images.remove());
// A portrait (3 x 1 tiles at 1008x336), a 1x1 image (scaled up, 1 x 2 at 336x672) and a
// 3000x20 strip (1 x 3 at 336x1008, 7 rows of pixels padded with black to 336).
addNoiseImages(images, 12, [
  ['tall.png', 900, 250],
  ['dot.png', 1, 1],
  ['strip.png', 20, 3000],
]);
const bytesOf = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

describe('LLaVA-NeXT anyres geometry (select_best_resolution, get_patch_output_size, vLLM’s token count)', () => {
  it('1920x1080: 672x672 keeps the most (672x378 of it), padded 147 above and 147 below: 2 x 2 tiles, 5 crops, 576 + 28·48 + 28 tokens', () => {
    expect(anyresGeometry(1080, 1920, LLAVA_NEXT_DEFAULTS)).toEqual({
      bestHeight: 672,
      bestWidth: 672,
      resizedHeight: 378,
      resizedWidth: 672,
      top: 147,
      left: 0,
      rows: 2,
      cols: 2,
      crops: 5,
      // 48x48 features, the height unpadded to 1080·48 // 1920 = 27 rows, less its odd padding: 48 − 2·10 = 28.
      tokens: 576 + 28 * 48 + 28,
    });
  });

  it('a portrait of 250x900 takes 1008x336 (3 x 1), a strip 336x1008 (1 x 3); a 1x1 image 336x672, the first of the least wasted', () => {
    expect(anyresGeometry(900, 250, LLAVA_NEXT_DEFAULTS)).toMatchObject({
      bestHeight: 1008,
      bestWidth: 336,
      rows: 3,
      cols: 1,
      crops: 4,
      resizedHeight: 1008,
      resizedWidth: 280,
    });
    expect(anyresGeometry(20, 3000, LLAVA_NEXT_DEFAULTS)).toMatchObject({
      bestHeight: 336,
      bestWidth: 1008,
      rows: 1,
      cols: 3,
      crops: 4,
      resizedHeight: 7,
      resizedWidth: 1008,
      top: 164,
    });
    expect(selectBestResolution(1, 1, LLAVA_NEXT_DEFAULTS.image_grid_pinpoints)).toEqual([336, 672]);
  });

  it('the unpadded rows follow vLLM’s integer division, not the gateway’s rounding: 500x341 keeps 32 rows of 48 where rounding gives 34', () => {
    // 333·48 / 500 = 31.968: vLLM's model takes 31 (integer division), padding (48 − 31) // 2 = 8, 32 rows; the gateway rounds to 32 and gets 48 − 2·8 = 32 too.
    expect(anyresTokens(333, 500, 2, 2, LLAVA_NEXT_DEFAULTS)).toBe(576 + 32 * 48 + 32);
    // 341·48 / 500 = 32.736: 32 by vLLM (padding 8, 32 rows); 33 rounded (padding 7, 34 rows) by the gateway.
    expect(anyresTokens(341, 500, 2, 2, LLAVA_NEXT_DEFAULTS)).toBe(576 + 32 * 48 + 32);
  });

  it('refuses a zero side, naming its size', () => {
    expect(() => anyresGeometry(0, 10, LLAVA_NEXT_DEFAULTS)).toThrow(new ImageSizeError('image of 10x0 pixels has a zero side'));
  });
});

const NAMES = ['photo.jpg', 'rgba.png', 'gray.png', 'hd.jpg', 'tall.png', 'dot.png', 'strip.png'];
const referenceOut = (name: string) => path.join(images.dir, `llava-next-${name}.f32`);
const REFERENCE_INFO = runPythonScript(REFERENCE, ['--each', ...NAMES.map((n) => `${images.file(n)}=${referenceOut(n)}`)])
  .trim()
  .split('\n')
  .map((line) => JSON.parse(line) as { best: number[]; resized: number[]; tiles: number; tokens: number; shape: number[] });

describe('LLaVA-NeXT encoder input agrees exactly with the processor run in Pillow and numpy', () => {
  it.each(NAMES.map((name, i) => [name, i] as const))('%s', async (name, i) => {
    const info = REFERENCE_INFO[i]!;
    const reference = readFileSync(referenceOut(name));
    const img = await decodeToRgb(images.bytes(name));
    const ours = preprocessAnyresRgb(img.rgb, img.width, img.height, LLAVA_NEXT_DEFAULTS);
    expect([ours.bestHeight, ours.bestWidth]).toEqual(info.best);
    expect([ours.resizedHeight, ours.resizedWidth]).toEqual(info.resized);
    expect([ours.crops, ours.tokens]).toEqual([info.tiles + 1, info.tokens]);
    expect(info.shape).toEqual([ours.crops, 3, 336, 336]);
    // Pillow's bicubic bytes, normalized; the SIMD kernels and the JavaScript resize alike.
    expect(bytesOf(ours.pixelValues!).equals(reference)).toBe(true);
    const js = preprocessAnyresRgb(img.rgb, img.width, img.height, LLAVA_NEXT_DEFAULTS, { javascript: true });
    expect(bytesOf(js.pixelValues!).equals(reference)).toBe(true);
  });

  it('other pinpoints: up to 3 x 3 crops (llava-v1.6 34b’s list is the default one; a checkpoint may give more)', async () => {
    const out = path.join(images.dir, 'llava-next-3x3.f32');
    const pinpoints: Array<[number, number]> = [
      [336, 1008],
      [1008, 1008],
      [672, 1008],
    ];
    const info = JSON.parse(runPythonScript(REFERENCE, [images.file('hd.jpg'), '--pinpoints', pinpoints.map(([h, w]) => `${h}x${w}`).join(','), '--out', out]));
    const img = await decodeToRgb(images.bytes('hd.jpg'));
    const ours = preprocessAnyresRgb(img.rgb, img.width, img.height, { ...LLAVA_NEXT_DEFAULTS, image_grid_pinpoints: pinpoints });
    expect(info.shape).toEqual([ours.crops, 3, 336, 336]);
    expect([ours.bestHeight, ours.bestWidth, ours.tokens]).toEqual([...info.best, info.tokens]);
    expect(bytesOf(ours.pixelValues!).equals(readFileSync(out))).toBe(true);
  });
});

describe('LLaVA-NeXT in the preprocessing pool', () => {
  it.each([1, 2])("a portrait's crops in the pool's memory on %i thread(s), float32 and bfloat16: the reference's bytes", async (threads) => {
    const reference = readFileSync(referenceOut('tall.png'));
    const pool = new PreprocessPool(threads);
    try {
      const r = await pool.run({ bytes: images.bytes('tall.png'), config: LLAVA_NEXT_DEFAULTS, bf16: true });
      expect([r.resizedHeight, r.resizedWidth, r.tokens, r.imageSize]).toEqual([1008, 280, REFERENCE_INFO[4]!.tokens, [900, 250]]);
      // Two threads: the tiles' rows split between them (the base image's resize on the first).
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

  it("counts the outputs, the level tables and both resizes' working space, laid out one after the other with the source pixels once and the tiles' resize in two bands", () => {
    const outputs = 4 * 3 * 336 * 336 * (4 + 2);
    const tables = 3 * 256 * (4 + 2);
    const bytes = anyresMemoryBytes(250, 900, LLAVA_NEXT_DEFAULTS, { float32: true, bf16: true });
    const base = resizeBytes(250, 900, 336, 336, [], outputs + tables);
    const split = anyresBandStarts(250, 900, LLAVA_NEXT_DEFAULTS);
    expect(split).toHaveLength(1);
    expect(split[0]).toBeGreaterThan(0);
    expect(split[0]).toBeLessThan(1008);
    expect(bytes).toBe(outputs + tables + base + resizeBytes(250, 900, 280, 1008, split, outputs + tables + base, undefined, 'bicubic', 0));
  });
});
