// Inkling's patches (docs/preprocessing.md, "Patches (Inkling)") against the reference that
// runs Hugging Face's InklingImageProcessor steps in torch (scripts/reference/inkling_reference.py):
// bit for bit, float32 and bfloat16, directly and through the pool.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { f32ToBf16 } from '../transport/dtype.ts';
import { addNoiseImages, makeTestImages } from '../test/images.ts';
import { runPython, runPythonScript } from '../test/python.ts';
import { decodeToRgb } from './decode.ts';
import { INKLING_DEFAULTS, inklingGeometry, inklingLevels, inklingMemoryBytes, preprocessInklingRgb } from './inkling.ts';
import { PreprocessPool } from './pool.ts';
import { ImageSizeError } from './qwen-vl.ts';

const REFERENCE = path.resolve(import.meta.dirname, '../../scripts/reference/inkling_reference.py');
const images = makeTestImages();
afterAll(() => images.remove());
// A 1x1 dot, a 40x2000 strip, and 80x120: a width of whole patches still gets the padding column.
addNoiseImages(images, 9, [
  ['dot.png', 1, 1],
  ['strip.png', 40, 2000],
  ['whole.png', 80, 120],
]);
const bytesOf = (a: Float32Array | Uint16Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

describe('Inkling geometry (divide_to_patches)', () => {
  it('ceil(h / 40) rows of floor(w / 40) + 1 columns, a token a patch; never resized', () => {
    expect(inklingGeometry(300, 400, INKLING_DEFAULTS)).toEqual({ rows: 8, cols: 11, patches: 88 });
    expect(inklingGeometry(80, 120, INKLING_DEFAULTS)).toEqual({ rows: 2, cols: 4, patches: 8 });
    expect(inklingGeometry(1, 1, INKLING_DEFAULTS)).toEqual({ rows: 1, cols: 1, patches: 1 });
    expect(inklingGeometry(1080, 1920, INKLING_DEFAULTS).patches).toBe(27 * 49);
    expect(() => inklingGeometry(0, 5, INKLING_DEFAULTS)).toThrow(new ImageSizeError('image of 5x0 pixels has a zero side'));
  });

  it("the levels are torch's float32 arithmetic: (x − f32(mean·255)) / f32(std·255), the padding's −1 included", () => {
    const out = path.join(images.dir, 'inkling-levels.f32');
    runPython(
      `import sys, torch
mean = torch.tensor([0.48145466, 0.4578275, 0.40821073]) * (1.0 / (1 / 255))
std = torch.tensor([0.26862954, 0.26130258, 0.27577711]) * (1.0 / (1 / 255))
x = torch.cat([torch.arange(256, dtype=torch.float32), torch.tensor([-1.0])]).view(1, 257).repeat(3, 1).view(3, 1, 257)
open(sys.argv[1], 'wb').write(x.sub(mean.view(-1, 1, 1)).div(std.view(-1, 1, 1)).contiguous().numpy().tobytes())`,
      [out],
    );
    const ours = inklingLevels(INKLING_DEFAULTS);
    const joined = new Float32Array(3 * 257);
    ours.forEach((t, c) => joined.set(t, c * 257));
    expect(bytesOf(joined).equals(readFileSync(out))).toBe(true);
  });
});

describe('Inkling encoder input agrees exactly with the torch reference', () => {
  const NAMES = ['photo.jpg', 'rgba.png', 'gray.png', 'hd.jpg', 'dot.png', 'strip.png', 'whole.png'];
  const out = (name: string) => path.join(images.dir, `inkling-${name}.f32`);
  // One torch start for every image.
  const infos = runPythonScript(REFERENCE, ['--each', ...NAMES.map((n) => `${images.file(n)}=${out(n)}`)])
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { rows: number; cols: number; patches: number; shape: number[] });
  it.each(NAMES.map((n, i) => [n, i] as const))('%s', async (name, i) => {
    const info = infos[i]!;
    const img = await decodeToRgb(images.bytes(name));
    const ours = preprocessInklingRgb(img.rgb, img.width, img.height, INKLING_DEFAULTS, { bf16: true });
    expect([ours.rows, ours.cols, ours.patches]).toEqual([info.rows, info.cols, info.patches]);
    expect([ours.patches, 2, 40, 40, 3]).toEqual(info.shape);
    const reference = readFileSync(out(name));
    expect(bytesOf(ours.pixelValues!).equals(reference)).toBe(true);
    expect(bytesOf(ours.bf16!).equals(Buffer.from(f32ToBf16(ours.pixelValues!)))).toBe(true);
  });

  it('another patch and frame count (20 pixels, 3 frames), as preprocessor_config.json may set them', async () => {
    const out = path.join(images.dir, 'inkling-20.f32');
    runPythonScript(REFERENCE, [images.file('photo.jpg'), '--patch', '20', '--temporal', '3', '--out', out]);
    const img = await decodeToRgb(images.bytes('photo.jpg'));
    const ours = preprocessInklingRgb(img.rgb, img.width, img.height, { ...INKLING_DEFAULTS, patch_side: 20, temporal_patch_size: 3 });
    expect(bytesOf(ours.pixelValues!).equals(readFileSync(out))).toBe(true);
  });

  it.each([1, 2])(
    "through the pool on %i thread(s): in the pool's memory (its outputs, the level tables and a copy of the pixels, written on the SIMD kernels), the patch rows split between the threads, float32 and bfloat16",
    async (threads) => {
      const pool = new PreprocessPool(threads);
      try {
        const out = path.join(images.dir, 'inkling-pool-hd.f32');
        runPythonScript(REFERENCE, [images.file('hd.jpg'), '--out', out]);
        const reference = readFileSync(out);
        const r = await pool.run({ bytes: images.bytes('hd.jpg'), config: INKLING_DEFAULTS, bf16: true });
        expect([r.patches, r.features, r.tokens, r.inOutput, r.threads]).toEqual([27 * 49, 2 * 40 * 40 * 3, 27 * 49, true, threads]);
        expect(bytesOf(r.pixelValues!).equals(reference)).toBe(true);
        expect(bytesOf(r.bf16!).equals(Buffer.from(f32ToBf16(new Float32Array(Uint8Array.from(reference).buffer))))).toBe(true);
        r.release();
        const cost = pool.memoryCost(
          { bytes: images.bytes('hd.jpg'), config: INKLING_DEFAULTS, bf16: true },
          await pool.readHeader(images.bytes('hd.jpg'), INKLING_DEFAULTS),
        );
        expect(cost.shared).toBeGreaterThanOrEqual(inklingMemoryBytes(1920, 1080, INKLING_DEFAULTS, { float32: true, bf16: true }));
      } finally {
        await pool.close();
      }
    },
  );
});
