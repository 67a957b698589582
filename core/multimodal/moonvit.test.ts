import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { f32ToBf16 } from '../transport/dtype.ts';
import { addNoiseImages, makeTestImages } from '../test/images.ts';
import { runPython, runPythonScript } from '../test/python.ts';
import { decodeToRgb } from './decode.ts';
import { KIMI_K25_DEFAULTS, KIMI_K3_DEFAULTS, moonVitGeometry, moonVitMemoryBytes, preprocessMoonVitRgb, type MoonVitImageConfig } from './moonvit.ts';
import { PreprocessPool } from './pool.ts';
import { ImageSizeError } from './qwen-vl.ts';

const REFERENCE = path.resolve(import.meta.dirname, '../../scripts/reference/moonvit_reference.py');
const images = makeTestImages();
afterAll(() => images.remove());
// A 1x1 image (padded to one merge block) and a 60x2000 strip (within the budget: padded to 84 wide).
addNoiseImages(images, 5, [
  ['dot.png', 1, 1],
  ['strip.png', 2000, 60],
]);
const bytesOf = (a: Float32Array | Uint16Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

describe('MoonViT geometry (navit_resize_image)', () => {
  it('600x400 stays as it is, padded to 616x420: 44x30 patches, 330 tokens (the gateway and HF agree)', () => {
    expect(moonVitGeometry(400, 600, KIMI_K25_DEFAULTS)).toEqual({
      resizedHeight: 400,
      resizedWidth: 600,
      paddedHeight: 420,
      paddedWidth: 616,
      gridH: 30,
      gridW: 44,
      tokens: 330,
    });
  });

  it('scales down (never up) to the patch budget and the per-side limit, truncating each side', () => {
    // 4000x3000: sqrt(16384 / (285 * 214)) = 0.5183..., 2073x1554 (int truncates), padded to 2100x1568.
    const g = moonVitGeometry(3000, 4000, KIMI_K25_DEFAULTS);
    expect([g.resizedWidth, g.resizedHeight, g.paddedWidth, g.paddedHeight]).toEqual([2073, 1554, 2100, 1568]);
    expect(moonVitGeometry(20, 30, KIMI_K25_DEFAULTS)).toMatchObject({ resizedHeight: 20, resizedWidth: 30, tokens: 2 });
    // 60x20000: the long side to 512 patches of 14, the short one scaled with it.
    expect(moonVitGeometry(20000, 60, KIMI_K25_DEFAULTS)).toMatchObject({ resizedHeight: 7168, resizedWidth: 21, paddedWidth: 28 });
  });

  it('refuses a zero side', () => {
    expect(() => moonVitGeometry(0, 10, KIMI_K25_DEFAULTS)).toThrow(new ImageSizeError('image of 10x0 pixels has a zero side'));
  });
});

describe('MoonViT encoder input agrees exactly with the Pillow + numpy reference', () => {
  const cases: Array<[string, MoonVitImageConfig, string[]]> = [
    ['photo.jpg', KIMI_K25_DEFAULTS, []],
    ['rgba.png', KIMI_K25_DEFAULTS, []],
    ['gray.png', KIMI_K25_DEFAULTS, []],
    ['hd.jpg', KIMI_K25_DEFAULTS, []],
    ['dot.png', KIMI_K25_DEFAULTS, []],
    ['strip.png', KIMI_K25_DEFAULTS, []],
    // A smaller budget: the 1920x1080 image scaled down to 1024 patches.
    ['hd.jpg', { ...KIMI_K25_DEFAULTS, in_patch_limit: 1024 }, ['--limit', '1024']],
  ];
  it.each(cases)('%s %#', async (name, cfg, args) => {
    const out = path.join(images.dir, `moonvit-${name}-${args.join('')}.f32`);
    const info = JSON.parse(runPythonScript(REFERENCE, [images.file(name), ...args, '--out', out]));
    const img = await decodeToRgb(images.bytes(name));
    const ours = preprocessMoonVitRgb(img.rgb, img.width, img.height, cfg, { bf16: true });
    expect([ours.resizedHeight, ours.resizedWidth]).toEqual(info.resized);
    expect([ours.paddedHeight, ours.paddedWidth]).toEqual(info.padded);
    expect([1, ours.gridH, ours.gridW]).toEqual(info.grid);
    expect(ours.tokens).toBe(info.tokens);
    expect([ours.gridH * ours.gridW, 3, 14, 14]).toEqual(info.shape);
    const reference = readFileSync(out);
    expect(bytesOf(ours.pixelValues!).equals(reference)).toBe(true);
    expect(bytesOf(ours.bf16!).equals(Buffer.from(f32ToBf16(ours.pixelValues!)))).toBe(true);
    const js = preprocessMoonVitRgb(img.rgb, img.width, img.height, cfg, { javascript: true });
    expect(bytesOf(js.pixelValues!).equals(reference)).toBe(true);
  });

  it('a mean and std other than 0.5: the reference multiplies by 1 / std, as mmtc does', async () => {
    const cfg: MoonVitImageConfig = { ...KIMI_K25_DEFAULTS, image_mean: [0.48145466, 0.4578275, 0.40821073], image_std: [0.26862954, 0.26130258, 0.27577711] };
    const out = path.join(images.dir, 'moonvit-clip-norm.f32');
    runPython(
      `import sys, json, importlib.util
spec = importlib.util.spec_from_file_location('ref', sys.argv[1]); ref = importlib.util.module_from_spec(spec); spec.loader.exec_module(ref)
x, info = ref.preprocess(sys.argv[2], mean=json.loads(sys.argv[3]), std=json.loads(sys.argv[4]))
open(sys.argv[5], 'wb').write(x.tobytes())`,
      [REFERENCE, images.file('photo.jpg'), JSON.stringify(cfg.image_mean), JSON.stringify(cfg.image_std), out],
    );
    const img = await decodeToRgb(images.bytes('photo.jpg'));
    const ours = preprocessMoonVitRgb(img.rgb, img.width, img.height, cfg);
    expect(bytesOf(ours.pixelValues!).equals(readFileSync(out))).toBe(true);
  });
});

describe('MoonViT in the preprocessing pool', () => {
  it.each<[string, MoonVitImageConfig, string[], string]>([
    // Scaled: the SIMD kernels resize in two bands (two threads) and scatter each patch row.
    ['hd.jpg under a 1024-patch budget', { ...KIMI_K25_DEFAULTS, in_patch_limit: 1024 }, ['--limit', '1024'], 'hd.jpg'],
    // 620x348: padded by 24 columns and 16 rows, a patch column and a patch row wholly padding.
    ['hd.jpg under an 1100-patch budget', { ...KIMI_K25_DEFAULTS, in_patch_limit: 1100 }, ['--limit', '1100'], 'hd.jpg'],
  ])('%s: the kernels give the reference bytes, float32 and bfloat16, the rows split between two threads', async (_, cfg, args, name) => {
    const pool = new PreprocessPool(2);
    try {
      const out = path.join(images.dir, `moonvit-pool-${name}-${args.join('')}.f32`);
      const info = JSON.parse(runPythonScript(REFERENCE, [images.file(name), ...args, '--out', out]));
      const reference = readFileSync(out);
      const r = await pool.run({ bytes: images.bytes(name), config: cfg, bf16: true });
      expect([r.resizedHeight, r.resizedWidth]).toEqual(info.resized);
      expect([r.gridH, r.gridW, r.tokens]).toEqual([info.grid[1], info.grid[2], info.tokens]);
      expect(r.inOutput).toBe(true);
      expect(r.threads).toBe(2);
      expect(bytesOf(r.pixelValues!).equals(reference)).toBe(true);
      expect(bytesOf(r.bf16!).equals(Buffer.from(f32ToBf16(new Float32Array(Uint8Array.from(reference).buffer))))).toBe(true);
      r.release();
    } finally {
      await pool.close();
    }
  });

  it("another mean and std (the kernel's arithmetic would differ): the pool's JavaScript scatter, the reference's bytes", async () => {
    const cfg: MoonVitImageConfig = {
      ...KIMI_K25_DEFAULTS,
      in_patch_limit: 1024,
      image_mean: [0.48145466, 0.4578275, 0.40821073],
      image_std: [0.26862954, 0.26130258, 0.27577711],
    };
    const out = path.join(images.dir, 'moonvit-pool-clip-norm.f32');
    runPython(
      `import sys, json, importlib.util
spec = importlib.util.spec_from_file_location('ref', sys.argv[1]); ref = importlib.util.module_from_spec(spec); spec.loader.exec_module(ref)
x, info = ref.preprocess(sys.argv[2], limit=1024, mean=json.loads(sys.argv[3]), std=json.loads(sys.argv[4]))
open(sys.argv[5], 'wb').write(x.tobytes())`,
      [REFERENCE, images.file('hd.jpg'), JSON.stringify(cfg.image_mean), JSON.stringify(cfg.image_std), out],
    );
    const pool = new PreprocessPool(1);
    try {
      const r = await pool.run({ bytes: images.bytes('hd.jpg'), config: cfg, bf16: false });
      expect(r.threads).toBe(1);
      expect(bytesOf(r.pixelValues!).equals(readFileSync(out))).toBe(true);
      r.release();
    } finally {
      await pool.close();
    }
  });

  it.each([1, 2])(
    "an image the budget keeps as it is: its rows scattered in the pool's memory (counted in its budget) on %i thread(s), the reference's bytes, float32 and bfloat16",
    async (threads) => {
      const pool = new PreprocessPool(threads);
      try {
        const out = path.join(images.dir, 'moonvit-pool-hd.f32');
        const info = JSON.parse(runPythonScript(REFERENCE, [images.file('hd.jpg'), '--out', out]));
        const reference = readFileSync(out);
        const r = await pool.run({ bytes: images.bytes('hd.jpg'), config: KIMI_K25_DEFAULTS, bf16: true });
        expect([r.patches, r.features, r.tokens, r.gridH, r.gridW]).toEqual([
          info.grid[1] * info.grid[2],
          3 * 14 * 14,
          info.tokens,
          info.grid[1],
          info.grid[2],
        ]);
        // Two threads: each scatters half of the patch rows, straight from the source's rows.
        expect([r.inOutput, r.threads]).toEqual([true, threads]);
        expect(bytesOf(r.pixelValues!).equals(reference)).toBe(true);
        expect(bytesOf(r.bf16!).equals(Buffer.from(f32ToBf16(new Float32Array(Uint8Array.from(reference).buffer))))).toBe(true);
        r.release();
        const cost = pool.memoryCost(
          { bytes: images.bytes('hd.jpg'), config: KIMI_K25_DEFAULTS, bf16: true },
          await pool.readHeader(images.bytes('hd.jpg'), KIMI_K25_DEFAULTS),
        );
        expect(cost.shared).toBeGreaterThanOrEqual(moonVitMemoryBytes(1920, 1080, KIMI_K25_DEFAULTS, { float32: true, bf16: true }));
      } finally {
        await pool.close();
      }
    },
  );
});

describe('Kimi-K3: transparent pixels over the chessboard, as the reference flattens them', () => {
  // Transparent images of every kind Pillow reads as transparent: RGBA with every alpha level
  // (a gradient over noise), gray with alpha (LA), a palette PNG and a GIF with a transparent
  // index, a wholly transparent image, and an RGB PNG with a colour key (Pillow keeps it RGB).
  runPython(
    `
import sys, numpy as np
from PIL import Image
d = sys.argv[1]
rng = np.random.default_rng(31)
h, w = 330, 470
rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
alpha = np.tile(np.linspace(0, 255, w).astype(np.uint8), (h, 1))
alpha[::7, :] = 0
alpha[3::11, :] = 255
Image.fromarray(np.dstack([rgb, alpha]), 'RGBA').save(d + '/k3-rgba.png')
Image.fromarray(np.dstack([rgb[:, :, 0], alpha]), 'LA').save(d + '/k3-la.png')
pal = Image.fromarray(rgb).quantize(64)
pal.info['transparency'] = 5
pal.save(d + '/k3-palette.png', transparency=5)
pal.save(d + '/k3-palette.gif', transparency=5)
Image.new('RGBA', (90, 61), (0, 0, 0, 0)).save(d + '/k3-clear.png')
Image.fromarray(rgb).save(d + '/k3-keyed.png', transparency=(rgb[0, 0, 0], rgb[0, 0, 1], rgb[0, 0, 2]))
`,
    [images.dir],
  );
  const K3_SMALL: MoonVitImageConfig = { ...KIMI_K3_DEFAULTS, in_patch_limit: 512 };
  const cases: Array<[string, MoonVitImageConfig, string[]]> = [
    // K3's own budget keeps these sizes: flattened at the image's size.
    ['k3-rgba.png', KIMI_K3_DEFAULTS, []],
    ['k3-la.png', KIMI_K3_DEFAULTS, []],
    ['k3-palette.png', KIMI_K3_DEFAULTS, []],
    ['k3-palette.gif', KIMI_K3_DEFAULTS, []],
    ['k3-clear.png', KIMI_K3_DEFAULTS, []],
    ['k3-keyed.png', KIMI_K3_DEFAULTS, []],
    ['photo.jpg', KIMI_K3_DEFAULTS, []],
    // A 512-patch budget scales them: resized with their alpha (premultiplied), then flattened.
    ['k3-rgba.png', K3_SMALL, ['--limit', '512']],
    ['k3-la.png', K3_SMALL, ['--limit', '512']],
    ['k3-palette.gif', K3_SMALL, ['--limit', '512']],
    ['k3-keyed.png', K3_SMALL, ['--limit', '512']],
    // Flattened before the resize (the reference's stage when the key is absent).
    [
      'k3-rgba.png',
      { ...K3_SMALL, transparent_bg: { ...KIMI_K3_DEFAULTS.transparent_bg!, stage: 'before_resize' } },
      ['--limit', '512', '--stage', 'before_resize'],
    ],
    // Another board: 5-pixel squares, gray 90.
    [
      'k3-rgba.png',
      { ...K3_SMALL, transparent_bg: { ...KIMI_K3_DEFAULTS.transparent_bg!, chessboard_square_size: 5, chessboard_gray_value: 90 } },
      ['--limit', '512', '--square', '5', '--gray', '90'],
    ],
  ];
  it.each(cases)('%s %#: the bytes of the reference, JavaScript and SIMD resize, and through the pool', async (name, cfg, args) => {
    const out = path.join(images.dir, `k3-${name}-${args.join('')}.f32`);
    const info = JSON.parse(runPythonScript(REFERENCE, [images.file(name), '--k3', ...args, '--out', out]));
    const reference = readFileSync(out);
    const img = await decodeToRgb(images.bytes(name), undefined, true);
    expect(img.alpha !== undefined).toBe(name !== 'k3-keyed.png' && name !== 'photo.jpg');
    const opts = img.alpha ? { alpha: img.alpha } : {};
    const ours = preprocessMoonVitRgb(img.rgb, img.width, img.height, cfg, opts);
    expect([ours.resizedHeight, ours.resizedWidth, ours.tokens]).toEqual([...info.resized, info.tokens]);
    expect(bytesOf(ours.pixelValues!).equals(reference)).toBe(true);
    const js = preprocessMoonVitRgb(img.rgb, img.width, img.height, cfg, { ...opts, javascript: true });
    expect(bytesOf(js.pixelValues!).equals(reference)).toBe(true);
    const pool = new PreprocessPool(2);
    try {
      const r = await pool.run({ bytes: images.bytes(name), config: cfg, bf16: true });
      expect(bytesOf(r.pixelValues!).equals(reference)).toBe(true);
      expect(bytesOf(r.bf16!).equals(Buffer.from(f32ToBf16(new Float32Array(Uint8Array.from(reference).buffer))))).toBe(true);
      r.release();
    } finally {
      await pool.close();
    }
  });

  it("a wholly transparent image is the bare board: 255 and 180 alone, top-left square white; K2.5's configuration drops the alpha (black)", async () => {
    const img = await decodeToRgb(images.bytes('k3-clear.png'), undefined, true);
    const k3 = preprocessMoonVitRgb(img.rgb, img.width, img.height, KIMI_K3_DEFAULTS, { alpha: img.alpha! });
    // Patch 0, channel 0: its first row is x 0..13 of y 0: 8 white pixels, then 6 gray.
    const level = (v: number) => Math.round((v * 0.5 + 0.5) * 255);
    expect(Array.from(k3.pixelValues!.subarray(0, 14), level)).toEqual([...Array(8).fill(255), ...Array(6).fill(180)]);
    const k25 = preprocessMoonVitRgb(img.rgb, img.width, img.height, KIMI_K25_DEFAULTS, { alpha: img.alpha! });
    expect(level(k25.pixelValues![0]!)).toBe(0);
  });
});
