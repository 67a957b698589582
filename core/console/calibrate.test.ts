import { describe, expect, it } from 'vitest';
import { calibrationNote, calibrationSizes, comparePaths, findCrossover, minSamplesForWinner, type Winner } from './calibrate.ts';
import { KIMI_K25_DEFAULTS } from '../multimodal/moonvit.ts';
import { PHI3_VISION_DEFAULTS } from '../multimodal/phi3v.ts';
import { QWEN_VL_DEFAULTS } from '../multimodal/qwen-vl.ts';

const KiB = 1024;
const around = (center: number, spread: number, n = 15) => Array.from({ length: n }, (_, i) => center + spread * ((i / (n - 1)) * 2 - 1));

describe('calibration: a winner only beyond the noise', () => {
  it('separated samples have a winner; overlapping ones are a tie', () => {
    expect(comparePaths(around(10, 1), around(5, 1)).winner).toBe('shm');
    expect(comparePaths(around(5, 1), around(10, 1)).winner).toBe('inline');
    // Medians 2% apart inside a spread of ±50%: noise.
    expect(comparePaths(around(10, 5), around(9.8, 5)).winner).toBe('tie');
    // Perfectly separated but 1% apart: below CLEAR_SHARE, a tie all the same.
    expect(comparePaths(around(10, 0.01), around(9.9, 0.01)).winner).toBe('tie');
  });

  it('the fewest samples that can separate two paths', () => {
    const n = minSamplesForWinner();
    const sep = (k: number) =>
      comparePaths(
        Array.from({ length: k }, (_, i) => 100 + i),
        Array.from({ length: k }, (_, i) => 1 + i),
      ).winner;
    expect(sep(n)).toBe('shm');
    expect(sep(n - 1)).toBe('tie');
  });

  it('one sample per path can never be told apart from the noise', () => {
    expect(comparePaths([10], [1]).winner).toBe('tie');
    expect(comparePaths([1, 2, 3], [10, 20, 30]).winner).toBe('tie');
  });

  it('the share of pairs in which SHM was faster', () => {
    expect(comparePaths([10, 10], [1, 1]).shmFasterShare).toBe(1);
    expect(comparePaths([1, 1], [10, 10]).shmFasterShare).toBe(0);
  });
});

describe('calibration: the crossover', () => {
  const pts = (winners: Winner[]) => winners.map((winner, i) => ({ nbytes: 16 * KiB * 4 ** i, winner }));

  it('is the smallest size SHM clearly wins with no larger size won by inline; the threshold is the midpoint below it', () => {
    expect(findCrossover(pts(['inline', 'inline', 'shm', 'shm']))).toEqual({ crossoverBytes: 256 * KiB, recommendedMinBytes: 128 * KiB });
    // Ties above the crossover do not move it; ties below it are within the noise either way.
    expect(findCrossover(pts(['inline', 'tie', 'shm', 'tie']))).toEqual({ crossoverBytes: 256 * KiB, recommendedMinBytes: 128 * KiB });
    expect(findCrossover(pts(['shm', 'shm', 'shm']))).toEqual({ crossoverBytes: 16 * KiB, recommendedMinBytes: 16 * KiB });
  });

  it('an inline win above an SHM win starts the search above it', () => {
    expect(findCrossover(pts(['shm', 'inline', 'shm', 'shm']))).toEqual({ crossoverBytes: 256 * KiB, recommendedMinBytes: 128 * KiB });
    expect(findCrossover(pts(['shm', 'shm', 'inline']))).toEqual({ crossoverBytes: null, recommendedMinBytes: null });
  });

  it('no clear crossover when SHM never clearly wins, and the note says so with the measured range', () => {
    const ties = pts(['tie', 'tie', 'tie']);
    expect(findCrossover(ties)).toEqual({ crossoverBytes: null, recommendedMinBytes: null });
    expect(calibrationNote(ties, null, 3)).toMatch(
      /^No clear crossover: at every measured size \(16\.0 KiB to 256 KiB\) .* within the noise of 3 samples per size/,
    );
    expect(calibrationNote(pts(['inline', 'inline']), null, 15)).toMatch(/^Inline was clearly faster at every measured size \(16\.0 KiB to 64\.0 KiB\)/);
    expect(calibrationNote(pts(['inline', 'shm', 'tie']), 64 * KiB, 15)).toBe(
      'SHM was clearly faster at 64.0 KiB and inline at no size above 64.0 KiB; at 256 KiB the two are within the noise (measured 16.0 KiB to 256 KiB). The threshold sits between 64.0 KiB and the next smaller size measured.',
    );
    expect(calibrationNote(pts(['inline', 'tie', 'shm']), 256 * KiB, 15)).toBe(
      'SHM is clearly faster from 256 KiB on (measured 16.0 KiB to 256 KiB); the threshold sits between that and the next smaller size measured. At 64.0 KiB the difference is within the noise (either path is as fast).',
    );
  });
});

describe('calibration: the sizes it measures', () => {
  it("are square images whose encoder tensor is nearest each target, by the model's patch geometry and the wire's element size", () => {
    const side = (plans: Array<{ width: number; height: number; nbytes: number }>) => plans.map((p) => [p.width, p.height, p.nbytes]);
    // Qwen2-VL (patch 14, merge 2: sides of 28 px), float32: 1176 values a patch.
    expect(side(calibrationSizes(QWEN_VL_DEFAULTS.qwen2_vl, 4))).toEqual([
      [28, 28, 18816],
      [56, 56, 75264],
      [112, 112, 301056],
      [196, 196, 921984],
      [420, 420, 4233600],
      [840, 840, 16934400],
      [1176, 1176, 33191424],
    ]);
    // Qwen3-VL (patch 16: sides of 32 px), bfloat16.
    expect(side(calibrationSizes(QWEN_VL_DEFAULTS.qwen3_vl, 2))).toEqual([
      [32, 32, 12288],
      [64, 64, 49152],
      [160, 160, 307200],
      [288, 288, 995328],
      [576, 576, 3981312],
      [1184, 1184, 16822272],
      [1664, 1664, 33226752],
    ]);
    // Kimi-K2.5 (MoonViT, patches of 14 merged 2×2: sides of 28 px, within its 16384-patch budget, so no image is scaled), float32.
    const kimi = side(calibrationSizes(KIMI_K25_DEFAULTS, 4));
    expect(kimi.map(([w]) => w)).toEqual([28, 84, 140, 308, 588, 1176, 1680]);
    for (const [w, h, nbytes] of kimi) expect([w! % 28, h, nbytes]).toEqual([0, w, (w! / 14) ** 2 * 3 * 14 * 14 * 4]);
    expect(kimi.at(-1)![2]).toBeGreaterThan(30 * 1024 * 1024);
    // Phi-3-vision: every image is the same 17 crops of 336 pixels, whatever its size: one size to measure.
    expect(side(calibrationSizes(PHI3_VISION_DEFAULTS, 4))).toEqual([[336, 336, 17 * 3 * 336 * 336 * 4]]);
  });
});
