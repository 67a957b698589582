// The gateway's own Hugging Face golden fixture for Qwen image preprocessing, reproduced:
// lightseekorg/smg crates/multimodal/tests/fixtures/golden/qwen_preprocess_fingerprints.json
// (generated with transformers 4.57.1 and Pillow 12.2.0) and the test that reads it
// (crates/multimodal/tests/qwen_preprocess_golden.rs). Each case is a synthetic image resized
// and rescaled without normalization (do_normalize false), patchified; its fingerprint is FNV-1a
// 64 over each value as a byte, round(value x 255) half to even, clamped to [0, 255]. The
// expected shapes, grids and fingerprints below are the fixture's four image cases (its video
// case is a modality mmtc does not serve).
import { describe, expect, it } from 'vitest';
import { preprocessRgb, QWEN_VL_DEFAULTS, type QwenVlFamily } from './qwen-vl.ts';

const CASES: Array<{ model: QwenVlFamily; width: number; height: number; shape: [number, number]; grid: [number, number, number]; fnv1a: string }> = [
  { model: 'qwen2_vl', width: 37, height: 23, shape: [1092, 1176], grid: [1, 26, 42], fnv1a: '783a9142f0cbefb9' },
  { model: 'qwen2_vl', width: 259, height: 194, shape: [1064, 1176], grid: [1, 28, 38], fnv1a: '6081ce380d38da91' },
  { model: 'qwen3_vl', width: 37, height: 23, shape: [308, 1536], grid: [1, 14, 22], fnv1a: 'ea0821a9c7700bad' },
  { model: 'qwen3_vl', width: 259, height: 194, shape: [280, 1536], grid: [1, 14, 20], fnv1a: '45f7361bfce1b071' },
];

/** The fixture's image: pixel (x, y) is ((7x + 3y) % 256, (5x + 11y) % 256, (x + 2y) % 256). */
function goldenImage(width: number, height: number): Uint8Array {
  const rgb = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const at = (y * width + x) * 3;
      rgb[at] = (x * 7 + y * 3) % 256;
      rgb[at + 1] = (x * 5 + y * 11) % 256;
      rgb[at + 2] = (x + y * 2) % 256;
    }
  }
  return rgb;
}

function fnv1aPatchU8(values: Float32Array): string {
  let hash = 0xcbf29ce484222325n;
  for (const v of values) {
    const scaled = v * 255;
    const r = Math.round(scaled);
    const even = Math.abs(scaled % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
    hash ^= BigInt(Math.min(255, Math.max(0, even)));
    hash = (hash * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return hash.toString(16).padStart(16, '0');
}

describe("the gateway's Qwen preprocessing golden fixture", () => {
  it.each(CASES)('$model $width x $height: shape, grid and the patch bytes as Hugging Face gives them', ({ model, width, height, shape, grid, fnv1a }) => {
    const cfg = { ...QWEN_VL_DEFAULTS[model], do_normalize: false };
    const out = preprocessRgb(goldenImage(width, height), width, height, cfg, { float32: true, allocate: true });
    expect([out.patches, out.features]).toEqual(shape);
    expect(out.gridThw).toEqual(grid);
    expect(fnv1aPatchU8(out.pixelValues!)).toBe(fnv1a);
  });
});
