import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { f32ToBf16 } from '../transport/dtype.ts';
import { makeTestImages } from '../test/images.ts';
import { runPythonScript } from '../test/python.ts';
import { decodeToRgb } from './decode.ts';
import {
  encoderFingerprint,
  encoderMemoryBytes,
  encoderMemoryIn,
  ImageSizeError,
  patchGeometry,
  preprocessRgb,
  preprocessRgbInBands,
  QWEN_VL_DEFAULTS,
  runPostedPreprocessBand,
  smartResize,
} from './qwen-vl.ts';
import { runPostedBand } from './posted-band.ts';
import { kernelsOn, newSharedMemory, planResize } from './resize-simd.ts';

const REFERENCE = path.resolve(import.meta.dirname, '../../scripts/reference/qwen_vl_reference.py');
const images = makeTestImages();
afterAll(() => images.remove());

describe('smart_resize', () => {
  const q2 = QWEN_VL_DEFAULTS.qwen2_vl;
  const q2Size = (h: number, w: number) => smartResize(h, w, 28, q2.min_pixels, q2.max_pixels);

  it('448x448 -> 448x448, grid 32x32, 256 tokens (Qwen2-VL defaults)', () => {
    expect(q2Size(448, 448)).toEqual({ height: 448, width: 448 });
    const g = patchGeometry(448, 448, q2);
    expect([g.gridT, g.gridH, g.gridW, g.tokens]).toEqual([1, 32, 32, 256]);
  });

  it('1400x1400 -> 980x980, 1225 tokens', () => {
    expect(q2Size(1400, 1400)).toEqual({ height: 980, width: 980 });
    expect(patchGeometry(1400, 1400, q2).tokens).toBe(1225);
  });

  it('1024x1024 -> 980x980, [4900, 1176], 23.0 MB float32', () => {
    const g = patchGeometry(1024, 1024, q2);
    expect([g.resizedHeight, g.resizedWidth, g.patches, g.features, g.tokens]).toEqual([980, 980, 4900, 1176, 1225]);
    expect(g.patches * g.features * 4).toBe(23_049_600);
  });

  it('scales small images up to min_pixels (ceil) and rounds half to even', () => {
    expect(q2Size(100, 100)).toEqual({ height: 448, width: 448 });
    // 42/28 = 1.5 rounds to 2 (even); 70/28 = 2.5 rounds to 2 (even).
    expect(smartResize(42, 70, 28, 0, 1e9)).toEqual({ height: 56, width: 56 });
    expect(smartResize(10, 10, 28, 0, 1e9)).toEqual({ height: 28, width: 28 });
  });

  it('Qwen3-VL uses patch 16 (factor 32)', () => {
    const q3 = QWEN_VL_DEFAULTS.qwen3_vl;
    expect(smartResize(1080, 1920, 32, q3.min_pixels, q3.max_pixels)).toEqual({ height: 1088, width: 1920 });
  });

  it('refuses a zero side and an aspect ratio above 200', () => {
    expect(() => q2Size(0, 10)).toThrow(new ImageSizeError('image of 10x0 pixels has a zero side'));
    expect(() => q2Size(1, 201)).toThrow('absolute aspect ratio must be at most 200, got 201.0');
    expect(q2Size(1, 200)).toEqual({ height: 56, width: 6356 });
  });
});

describe('encoder input agrees exactly with the Pillow + numpy reference', () => {
  const cases: Array<['qwen2_vl' | 'qwen3_vl', string, boolean]> = [
    ['qwen2_vl', 'photo.jpg', true],
    ['qwen2_vl', 'rgba.png', true],
    ['qwen2_vl', 'hd.jpg', true],
    ['qwen3_vl', 'photo.jpg', true],
    ['qwen3_vl', 'gray.png', true],
    ['qwen2_vl', 'lossy.webp', false],
  ];
  it.each(cases)('%s %s (normalize=%s)', async (family, name, normalize) => {
    const out = path.join(images.dir, `${family}-${name}.f32`);
    const info = JSON.parse(runPythonScript(REFERENCE, [family, images.file(name), '--out', out, ...(normalize ? [] : ['--no-normalize'])]));
    const cfg = normalize ? QWEN_VL_DEFAULTS[family] : { ...QWEN_VL_DEFAULTS[family], do_normalize: false };
    const img = await decodeToRgb(images.bytes(name));
    const ours = preprocessRgb(img.rgb, img.width, img.height, cfg, { bf16: true });
    expect([ours.resizedHeight, ours.resizedWidth]).toEqual(info.resized);
    expect([ours.patches, ours.features]).toEqual(info.shape);
    expect(ours.gridThw).toEqual(info.grid_thw);
    expect(ours.tokens).toBe(info.tokens);
    const reference = readFileSync(out);
    const bytesOf = (a: Float32Array | Uint16Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
    expect(bytesOf(ours.pixelValues!).equals(reference)).toBe(true);
    expect(encoderFingerprint(ours.pixelValues!)).toBe(info.fingerprint);
    // The fused bf16 output is exactly the float32 values rounded to bf16.
    expect(bytesOf(ours.bf16!).equals(Buffer.from(f32ToBf16(ours.pixelValues!)))).toBe(true);
    // The JavaScript passes (the fallback without WebAssembly SIMD) give the same bits.
    const js = preprocessRgb(img.rgb, img.width, img.height, cfg, { bf16: true, javascript: true });
    expect(bytesOf(js.pixelValues!).equals(reference)).toBe(true);
    expect(bytesOf(js.bf16!).equals(bytesOf(ours.bf16!))).toBe(true);
  });
});

describe('the WebAssembly scatter kernel', () => {
  // Every 8-bit level in every channel, plus a gradient: all 256 table entries are exercised.
  const w = 256;
  const h = 64;
  const rgb = new Uint8Array(w * h * 3).map((_, i) => {
    const px = Math.floor(i / 3);
    const c = i % 3;
    return c === 0 ? px % 256 : c === 1 ? (px * 7 + Math.floor(px / w)) % 256 : 255 - (px % 256);
  });
  const bytesOf = (a?: Float32Array | Uint16Array) => (a ? Buffer.from(a.buffer, a.byteOffset, a.byteLength) : undefined);
  const base = QWEN_VL_DEFAULTS.qwen2_vl;
  const configs: Array<[string, typeof base]> = [
    ['Qwen2-VL defaults', base],
    ['Qwen3-VL defaults', QWEN_VL_DEFAULTS.qwen3_vl],
    ['one temporal copy, merge 1', { ...base, temporal_patch_size: 1, merge_size: 1 }],
    ['three temporal copies, patch 4', { ...base, temporal_patch_size: 3, patch_size: 4, min_pixels: 1 }],
    ['no rescale, odd mean and std', { ...base, do_rescale: false, image_mean: [100.5, -3, 0.25], image_std: [57.3, 1e-3, 3] }],
    ['no normalize', { ...base, do_normalize: false }],
    ['neither', { ...base, do_rescale: false, do_normalize: false }],
  ];
  it.each(configs)('%s: the same float32 and bfloat16 bits as the JavaScript table', (_, cfg) => {
    for (const kinds of [{ bf16: true }, { bf16: true, float32: false }, { bf16: false }]) {
      const simd = preprocessRgb(rgb, w, h, cfg, kinds);
      const js = preprocessRgb(rgb, w, h, cfg, { ...kinds, javascript: true });
      expect(simd.memory, 'ran on the kernels').toBeDefined();
      expect(bytesOf(simd.pixelValues)?.equals(bytesOf(js.pixelValues)!) ?? js.pixelValues === undefined).toBe(true);
      expect(bytesOf(simd.bf16)?.equals(bytesOf(js.bf16)!) ?? js.bf16 === undefined).toBe(true);
    }
  });

  // The kernel walks a band's patches in the encoder input's order; two bands on two kernel
  // instances must write exactly the one-pass bytes, for patch sizes whose last 4-value step
  // overlaps the one before it by 1 to 3 values (5, 6, 7, 14) or not at all (4, 8, 16).
  const banded: Array<[string, typeof base]> = [
    ...configs,
    ...[5, 6, 7, 8].map((P): [string, typeof base] => [`patch ${P}`, { ...base, patch_size: P, min_pixels: 1 }]),
    ['patch 7, merge 3, three temporal copies', { ...base, patch_size: 7, merge_size: 3, temporal_patch_size: 3, min_pixels: 1 }],
  ];
  const tall = 160;
  const rgbTall = new Uint8Array(w * tall * 3).map((_, i) => (i * 131 + (i >> 7)) & 255);
  it.each(banded)('%s: in two bands, the same float32 and bfloat16 bits as the JavaScript table', async (_, cfg) => {
    for (const kinds of [{ bf16: true }, { bf16: true, float32: false }, { bf16: false }]) {
      const js = preprocessRgb(rgbTall, w, tall, cfg, { ...kinds, javascript: true });
      const wanted = { float32: kinds.float32 !== false, bf16: kinds.bf16 };
      const into = encoderMemoryIn(newSharedMemory(encoderMemoryBytes(w, tall, cfg, wanted)), js.patches * js.features, wanted);
      const bands: number[] = [];
      const out = await preprocessRgbInBands(rgbTall, w, tall, cfg, into, kinds, async (job) => {
        if ('band' in job) bands.push(job.band);
        return runPostedBand(job);
      });
      expect(out, 'split in two bands').not.toBeNull();
      expect(bands).toEqual([1]);
      expect(bytesOf(out!.pixelValues)?.equals(bytesOf(js.pixelValues)!) ?? js.pixelValues === undefined).toBe(true);
      expect(bytesOf(out!.bf16)?.equals(bytesOf(js.bf16)!) ?? js.bf16 === undefined).toBe(true);
    }
  });
});

describe('preprocessRgbInBands', () => {
  const w = 640;
  const h = 480;
  const rgb = new Uint8Array(w * h * 3).map((_, i) => (i * 131 + (i >> 7)) & 255);
  const cfg = QWEN_VL_DEFAULTS.qwen2_vl;
  const bytesOf = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
  const fresh = () => {
    const one = preprocessRgb(rgb, w, h, cfg);
    return {
      expected: Buffer.from(bytesOf(one.pixelValues!)),
      into: encoderMemoryIn(newSharedMemory(encoderMemoryBytes(w, h, cfg, { float32: true, bf16: false })), one.patches * one.features, {
        float32: true,
        bf16: false,
      }),
    };
  };

  it('runs its half here and the other half through the helper, with the same bytes as one pass', async () => {
    const { expected, into } = fresh();
    const bands: number[] = [];
    const out = await preprocessRgbInBands(rgb, w, h, cfg, into, {}, async (job) => {
      if ('band' in job) bands.push(job.band);
      return runPostedBand(job);
    });
    expect(bands).toEqual([1]);
    expect(bytesOf(out!.pixelValues!).equals(expected)).toBe(true);
  });

  it('refuses a band that is not whole merge-block rows, writing no encoder value', () => {
    const g = patchGeometry(h, w, cfg);
    const memory = newSharedMemory(encoderMemoryBytes(w, h, cfg, { float32: true, bf16: false }) + (1 << 20));
    const consts = g.patches * g.features * 4;
    const plan = planResize(kernelsOn(memory)!, rgb, w, h, g.resizedWidth, g.resizedHeight, [13], consts + 64)!;
    const job = { memory, plan, band: 0, cfg, geometry: g, f32At: 0, consts };
    expect(() => runPostedPreprocessBand(job)).toThrow(/rows 0\.\.13 are not whole merge-block rows of 28/);
    expect(new Float32Array(memory.buffer, 0, g.patches * g.features).every((v) => v === 0)).toBe(true);
  });

  it('makes up for a helper that fails by running its band here', async () => {
    const { expected, into } = fresh();
    const out = await preprocessRgbInBands(rgb, w, h, cfg, into, {}, () => Promise.reject(new Error('helper thread went away')));
    expect(bytesOf(out!.pixelValues!).equals(expected)).toBe(true);
  });
});
