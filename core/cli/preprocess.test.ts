import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runMmtc } from '../test/cli.ts';
import { makeTestImages } from '../test/images.ts';
import { runPythonScript } from '../test/python.ts';

const REFERENCE = path.resolve(import.meta.dirname, '../../scripts/reference/qwen_vl_reference.py');
const images = makeTestImages();
afterAll(() => images.remove());

describe('mmtc preprocess', () => {
  it('--json gives sizes, grid, tokens, bytes and the reference fingerprint', () => {
    const r = runMmtc(['preprocess', '--model', 'qwen3_vl', '--json', '--no-normalize', images.file('photo.jpg'), images.file('palette.png')]);
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout);
    for (const [i, name] of ['photo.jpg', 'palette.png'].entries()) {
      const ref = JSON.parse(runPythonScript(REFERENCE, ['qwen3_vl', images.file(name), '--no-normalize']));
      expect(out[i]).toMatchObject({
        width: 400,
        height: 300,
        resized: ref.resized,
        shape: ref.shape,
        grid_thw: ref.grid_thw,
        tokens: ref.tokens,
        dtype: 'float32',
        fingerprint: ref.fingerprint,
      });
      expect(out[i].nbytes).toBe(ref.shape[0] * ref.shape[1] * 4);
    }
  });

  it('uses the model directory settings and reports bfloat16 bytes', () => {
    const r = runMmtc([
      'preprocess',
      '--model-path',
      path.resolve(import.meta.dirname, '../../models/qwen2-vl-mini'),
      '--dtype',
      'bfloat16',
      images.file('hd.jpg'),
    ]);
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('input       1920x1080');
    expect(r.stdout).toContain('resized     1316x728');
    expect(r.stdout).toContain('shape       [4888, 1176]  grid_thw [1, 52, 94]  1222 tokens');
    expect(r.stdout).toContain(`encoder     bfloat16, ${4888 * 1176 * 2} bytes`);
    // A lone image is split between two pool threads (the pool has one per core).
    expect(r.stdout).toMatch(os.availableParallelism() > 1 ? /resize\+normalize\+layout [\d.]+ ms \(2 threads\)/ : /\(1 thread\)/);
  });

  it('--model llava: a 336-pixel CLIP crop of any image, [1, 3, 336, 336], 576 tokens, no grid', () => {
    const r = runMmtc(['preprocess', '--model', 'llava', images.file('hd.jpg')]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('family      llava');
    expect(r.stdout).toContain('resized     597x336');
    expect(r.stdout).toContain('shape       [1, 3, 336, 336]  576 tokens');
    expect(r.stdout).toContain(`encoder     float32, ${3 * 336 * 336 * 4} bytes`);
    // The crop's rows are split between two pool threads too.
    expect(r.stdout).toMatch(os.availableParallelism() > 1 ? /resize\+normalize\+layout [\d.]+ ms \(2 threads\)/ : /\(1 thread\)/);
  });

  it('--model kimi_k25: MoonViT patches of the image as it is (within the budget), padded to whole merge blocks, [patches, 3, 14, 14]', () => {
    const r = runMmtc(['preprocess', '--model', 'kimi_k25', images.file('hd.jpg')]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('family      kimi_k25');
    expect(r.stdout).toContain('resized     1920x1080');
    // 1920x1080 padded to 1932x1092: 138x78 patches of 14, 69x39 tokens.
    expect(r.stdout).toContain('shape       [10764, 3, 14, 14]  grid_thw [1, 78, 138]  2691 tokens');
    expect(r.stdout).toContain(`encoder     float32, ${10764 * 588 * 4} bytes`);
    const raw = runMmtc(['preprocess', '--model', 'kimi_k25', '--no-normalize', images.file('hd.jpg')]);
    expect(raw.status).toBe(2);
    expect(raw.stderr).toContain('error: --no-normalize is not available for the kimi_k25 family (its processor always normalizes)');
  });

  it("--model kimi_k3 and --model inkling: the image at its own size, as MoonViT patches under K3's budget and as 40-pixel patches in two frames", () => {
    const k3 = runMmtc(['preprocess', '--model', 'kimi_k3', images.file('hd.jpg')]);
    expect(k3.status, k3.stderr).toBe(0);
    expect(k3.stdout).toContain('family      kimi_k3');
    expect(k3.stdout).toContain('shape       [10764, 3, 14, 14]  grid_thw [1, 78, 138]  2691 tokens');
    const inkling = runMmtc(['preprocess', '--model', 'inkling', images.file('hd.jpg')]);
    expect(inkling.status, inkling.stderr).toBe(0);
    expect(inkling.stdout).toContain('family      inkling');
    expect(inkling.stdout).toContain('resized     1920x1080');
    // 27 rows of 1920 // 40 + 1 = 49 columns.
    expect(inkling.stdout).toContain('shape       [1323, 2, 40, 40, 3]  1323 tokens');
    expect(inkling.stdout).toContain(`encoder     float32, ${1323 * 9600 * 4} bytes`);
  });

  it('--model phi3_v: 17 HD crops of 336 pixels, the HD size as image_sizes and its tokens', () => {
    const r = runMmtc(['preprocess', '--model', 'phi3_v', images.file('hd.jpg')]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('family      phi3_v');
    // 1920x1080 at scale 5: 1680x945, padded with white to 1680x1008 (3x5 tiles).
    expect(r.stdout).toContain('resized     1680x945');
    expect(r.stdout).toContain('shape       [1, 17, 3, 336, 336]  image_sizes [1008, 1680]  2353 tokens');
    expect(r.stdout).toContain(`encoder     float32, ${17 * 3 * 336 * 336 * 4} bytes`);
    const raw = runMmtc(['preprocess', '--model', 'phi3_v', '--no-normalize', images.file('hd.jpg')]);
    expect(raw.status).toBe(2);
    expect(raw.stderr).toContain('error: --no-normalize is not available for the phi3_v family (its processor always normalizes)');
  });

  it("--model llava_next: the best pinpoint's tiles after a base image, the image's own size as image_sizes and its tokens", () => {
    const r = runMmtc(['preprocess', '--model', 'llava_next', images.file('hd.jpg')]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('family      llava_next');
    // 1920x1080 into 672x672: 672x378, padded with black above and below (2x2 tiles).
    expect(r.stdout).toContain('resized     672x378');
    expect(r.stdout).toContain('shape       [1, 5, 3, 336, 336]  image_sizes [1080, 1920]  1948 tokens');
    expect(r.stdout).toContain(`encoder     float32, ${5 * 3 * 336 * 336 * 4} bytes`);
  });

  it('--model llama4: the best canvas of 336-pixel tiles and a global tile, its aspect_ratios and 144 tokens a crop', () => {
    const r = runMmtc(['preprocess', '--model', 'llama4', images.file('hd.jpg')]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('family      llama4');
    // 1920x1080 into the 3 x 5 canvas (1680x1008): 1680x945, padded with black below.
    expect(r.stdout).toContain('resized     1680x945');
    expect(r.stdout).toContain('shape       [16, 3, 336, 336]  aspect_ratios [3, 5]  2304 tokens');
    expect(r.stdout).toContain(`encoder     float32, ${16 * 3 * 336 * 336 * 4} bytes`);
  });

  it('a missing image fails with its index and the cause, exit 1', () => {
    const r = runMmtc(['preprocess', images.file('photo.jpg'), '/no/such.png']);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('error: image 1: cannot read /no/such.png: no such file');
    expect(r.stdout).toContain('fingerprint');
  });
});
