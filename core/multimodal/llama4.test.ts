import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { addNoiseImages, makeTestImages } from '../test/images.ts';
import { runPythonScript } from '../test/python.ts';
import { f32ToBf16 } from '../transport/dtype.ts';
import { decodeToRgb } from './decode.ts';
import { llama4Canvases, llama4Geometry, llama4Levels, llama4MemoryBytes, LLAMA4_DEFAULTS, preprocessLlama4Rgb } from './llama4.ts';
import { PreprocessPool } from './pool.ts';
import { encoderMemoryIn, ImageSizeError } from './qwen-vl.ts';
import { newSharedMemory } from './resize-simd.ts';

const REFERENCE = path.resolve(import.meta.dirname, '../../scripts/reference/llama4_reference.py');
const images = makeTestImages();
afterAll(() => images.remove());
// A portrait (3 x 1 tiles), a 1x1 dot (one tile, scaled up to it), a 3000x20 strip (1 x 9,
// its 20 rows padded with black to 336) and a 200x150 image (one tile, scaled up to 336 wide).
addNoiseImages(images, 41, [
  ['tall.png', 900, 250],
  ['dot.png', 1, 1],
  ['strip.png', 20, 3000],
  ['small.png', 150, 200],
]);
const bytesOf = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

interface ReferenceInfo {
  width: number;
  height: number;
  canvas: number[];
  resized: number[];
  aspect: number[];
  crops: number;
  tokens: number;
  sequence: number;
  shape: number[];
}

describe('Llama 4 tile geometry (find_supported_resolutions, get_best_fit, get_max_res_without_distortion)', () => {
  it('1920x1080 takes the 3 x 5 canvas (1008x1680), resized to 1680x945 at its top left: 15 tiles and the global one, 16 · 144 tokens', () => {
    expect(llama4Geometry(1080, 1920, LLAMA4_DEFAULTS)).toEqual({
      canvasHeight: 1008,
      canvasWidth: 1680,
      resizedHeight: 945,
      resizedWidth: 1680,
      rows: 3,
      cols: 5,
      crops: 16,
      tokens: 16 * 144,
    });
  });

  it('an image no larger than a tile is one crop with no global tile; a 1x1 dot is scaled up to the tile, a 200x150 image to 336 wide', () => {
    expect(llama4Geometry(1, 1, LLAMA4_DEFAULTS)).toMatchObject({ rows: 1, cols: 1, crops: 1, tokens: 144, resizedHeight: 336, resizedWidth: 336 });
    expect(llama4Geometry(150, 200, LLAMA4_DEFAULTS)).toMatchObject({ crops: 1, resizedHeight: 252, resizedWidth: 336 });
    // One pixel over a tile: the 2 x 2 canvas, the image kept at its size (no upscaling past a tile).
    expect(llama4Geometry(337, 337, LLAMA4_DEFAULTS)).toMatchObject({ rows: 2, cols: 2, crops: 5, resizedHeight: 337, resizedWidth: 337 });
  });

  it('the canvases of max_patches 4 in HF’s order (grouped by aspect ratio as they first appear)', () => {
    expect(llama4Canvases(4, 336)).toEqual([
      [336, 1344],
      [672, 672],
      [336, 336],
      [1344, 336],
      [336, 1008],
      [1008, 336],
      [336, 672],
      [672, 336],
    ]);
  });

  it('agrees with the reference on 600 sizes and three tile budgets (16, 9, 5)', () => {
    let seed = 11;
    const next = (n: number) => 1 + ((seed = (seed * 1103515245 + 12345) % 2147483648) % n);
    const sizes = Array.from({ length: 600 }, (_, i): [number, number] => (i < 400 ? [next(4000), next(4000)] : [next(700), next(700)]));
    for (const budget of [16, 9, 5]) {
      const reference = runPythonScript(REFERENCE, ['--sizes', sizes.map(([h, w]) => `${h}x${w}`).join(','), '--max-patches', String(budget)])
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as ReferenceInfo);
      const ours = sizes.map(([h, w]) => {
        const g = llama4Geometry(h, w, { ...LLAMA4_DEFAULTS, max_patches: budget });
        return {
          canvas: [g.canvasHeight, g.canvasWidth],
          resized: [g.resizedHeight, g.resizedWidth],
          aspect: [g.rows, g.cols],
          crops: g.crops,
          tokens: g.tokens,
        };
      });
      expect(ours).toEqual(reference.map(({ canvas, resized, aspect, crops, tokens }) => ({ canvas, resized, aspect, crops, tokens })));
    }
  });

  it('refuses a zero side, naming its size', () => {
    expect(() => llama4Geometry(0, 10, LLAMA4_DEFAULTS)).toThrow(new ImageSizeError('image of 10x0 pixels has a zero side'));
  });
});

describe('Llama 4 normalizes in bfloat16, as HF’s processor does', () => {
  it('each level is bf16((bf16(x · rescale) − 0.5) / 0.5): level 0 is −1, 255 is 1, 128 is 0.0078125 (float32 arithmetic: 0.0039216); the gateway’s values differ on 127 levels', () => {
    const [red] = llama4Levels(LLAMA4_DEFAULTS);
    expect([red![0], red![255], red![128]]).toEqual([-1, 1, 0.0078125]);
    // Every value is a bfloat16 (its low 16 bits zero): float32 and bfloat16 wire dtypes carry the same values.
    expect(new Uint32Array(red!.buffer).every((bits) => (bits & 0xffff) === 0)).toBe(true);
    // The gateway's float32 x · (1 / 127.5) − 1, which the worker rounds to bfloat16, is one bfloat16 step off HF's on 127 of the 256 levels (64: −0.498046875 against −0.49609375).
    const scale = Math.fround(1 / 127.5);
    const gateway = new Float32Array(256).map((_, v) => Math.fround(Math.fround(v * scale) - 1));
    const gatewayBf16 = new Uint16Array(f32ToBf16(gateway).buffer);
    const oursBf16 = new Uint16Array(f32ToBf16(red!).buffer);
    expect(oursBf16.filter((bits, v) => bits !== gatewayBf16[v]).length).toBe(127);
    expect(oursBf16[64]).not.toBe(gatewayBf16[64]);
  });
});

const NAMES = ['photo.jpg', 'rgba.png', 'gray.png', 'hd.jpg', 'tall.png', 'dot.png', 'strip.png', 'small.png'];
const referenceOut = (name: string) => path.join(images.dir, `llama4-${name}.f32`);
const REFERENCE_INFO = runPythonScript(REFERENCE, ['--each', ...NAMES.map((n) => `${images.file(n)}=${referenceOut(n)}`)])
  .trim()
  .split('\n')
  .map((line) => JSON.parse(line) as ReferenceInfo);

describe('Llama 4 encoder input agrees exactly with the processor run in Pillow, numpy and torch', () => {
  it.each(NAMES.map((name, i) => [name, i] as const))('%s', async (name, i) => {
    const info = REFERENCE_INFO[i]!;
    const reference = readFileSync(referenceOut(name));
    const img = await decodeToRgb(images.bytes(name));
    const ours = preprocessLlama4Rgb(img.rgb, img.width, img.height, LLAMA4_DEFAULTS);
    expect([ours.canvasHeight, ours.canvasWidth]).toEqual(info.canvas);
    expect([ours.resizedHeight, ours.resizedWidth]).toEqual(info.resized);
    expect([ours.rows, ours.cols, ours.crops, ours.tokens]).toEqual([...info.aspect, info.crops, info.tokens]);
    expect(info.shape).toEqual([ours.crops, 3, 336, 336]);
    // Pillow's bilinear bytes, normalized; the SIMD kernels and the JavaScript resize alike.
    expect(bytesOf(ours.pixelValues!).equals(reference)).toBe(true);
    const js = preprocessLlama4Rgb(img.rgb, img.width, img.height, LLAMA4_DEFAULTS, { javascript: true });
    expect(bytesOf(js.pixelValues!).equals(reference)).toBe(true);
  });

  it('another tile budget: max_patches 5 fits the 1080p image in 2 x 2 tiles (scale 0.35; 1 x 4 and 1 x 5 keep 0.31) and the global one', async () => {
    const out = path.join(images.dir, 'llama4-5.f32');
    const info = JSON.parse(runPythonScript(REFERENCE, [images.file('hd.jpg'), '--max-patches', '5', '--out', out])) as ReferenceInfo;
    const img = await decodeToRgb(images.bytes('hd.jpg'));
    const ours = preprocessLlama4Rgb(img.rgb, img.width, img.height, { ...LLAMA4_DEFAULTS, max_patches: 5 });
    expect([ours.rows, ours.cols, ours.crops]).toEqual([...info.aspect, info.crops]);
    expect(info.aspect).toEqual([2, 2]);
    expect(bytesOf(ours.pixelValues!).equals(readFileSync(out))).toBe(true);
  });
});

describe('Llama 4 in the preprocessing pool', () => {
  it.each([1, 2])(
    "a 1080p image's 16 crops in the pool's memory on %i thread(s), float32 and bfloat16: the reference's bytes, its tiles and crops",
    async (threads) => {
      const reference = readFileSync(referenceOut('hd.jpg'));
      const pool = new PreprocessPool(threads);
      try {
        const r = await pool.run({ bytes: images.bytes('hd.jpg'), config: LLAMA4_DEFAULTS, bf16: true });
        expect([r.patches, r.tokens, r.tiles]).toEqual([16, 16 * 144, [3, 5]]);
        // Two threads: the canvas's rows split between them (the global tile's resize on the first).
        expect([r.inOutput, r.threads]).toEqual([true, threads]);
        expect(bytesOf(r.pixelValues!).equals(reference)).toBe(true);
        expect(
          Buffer.from(r.bf16!.buffer, r.bf16!.byteOffset, r.bf16!.byteLength).equals(
            Buffer.from(f32ToBf16(new Float32Array(Uint8Array.from(reference).buffer))),
          ),
        ).toBe(true);
        r.release();
      } finally {
        await pool.close();
      }
    },
  );

  it("a 1080p image's budget (its 16 crops and both resizes' working space) holds it: in a memory of that size it runs there, the reference's bytes; a page less, in memory of its own", async () => {
    const img = await decodeToRgb(images.bytes('hd.jpg'));
    const kinds = { float32: true, bf16: false };
    const bytes = llama4MemoryBytes(img.width, img.height, LLAMA4_DEFAULTS, kinds);
    const elements = 16 * 3 * 336 * 336;
    // The outputs, 20.7 MiB, and the working space of the 1680x945 and 336x336 resizes (the source once), under 40 MB in all.
    expect(bytes).toBeGreaterThan(elements * 4);
    expect(bytes).toBeLessThan(40e6);
    const fitting = encoderMemoryIn(newSharedMemory(bytes), elements, kinds);
    const ours = preprocessLlama4Rgb(img.rgb, img.width, img.height, LLAMA4_DEFAULTS, { memory: fitting });
    expect(ours.inMemory).toBe(true);
    expect(bytesOf(ours.pixelValues!).equals(readFileSync(referenceOut('hd.jpg')))).toBe(true);
    const short = encoderMemoryIn(newSharedMemory(bytes - 65536), elements, kinds);
    expect(preprocessLlama4Rgb(img.rgb, img.width, img.height, LLAMA4_DEFAULTS, { memory: short }).inMemory).toBe(false);
    // The most an image takes: 4 x 4 tiles and the global one.
    expect(llama4Geometry(5000, 5000, LLAMA4_DEFAULTS).crops).toBe(17);
  });
});
