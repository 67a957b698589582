import { describe, expect, it } from 'vitest';
import { runPython } from '../test/python.ts';
import { kernelsOn, planResize, resizeBand, simdKernels } from './resize-simd.ts';
import { resampleCoefficients } from './resample.ts';
import { resizeRgb, resizeRgbInto, resizeRgbIntoJs } from './resize.ts';

// Each case: source w×h -> output w×h. Down- and up-scaling, odd sizes, 1-pixel sides,
// extreme aspect ratios, one unchanged side (a skipped pass), and no change at all.
const CASES: Array<[number, number, number, number]> = [
  [640, 480, 224, 224],
  [100, 80, 37, 53],
  [33, 17, 66, 34],
  [1, 50, 3, 7],
  [50, 1, 28, 28],
  [1, 1, 28, 28],
  [1000, 5, 28, 28],
  [3, 900, 28, 56],
  [7, 7, 7, 14],
  [9, 9, 9, 9],
  [257, 131, 256, 130],
  [400, 300, 532, 392],
  [1920, 1080, 980, 560],
];

function sourceImage(w: number, h: number, seed: number): Uint8Array {
  // Noise plus gradients: hits clipping at 0 and 255 and every rounding path.
  const out = new Uint8Array(w * h * 3);
  let s = seed;
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      s = (Math.imul(s, 1103515245) + 12345) >>> 0;
      const o = (y * w + x) * 3;
      out[o] = (s >>> 24) & 0xff;
      out[o + 1] = (x * 255) / Math.max(1, w - 1);
      out[o + 2] = (x + y) % 2 === 0 ? 255 : 0;
    }
  }
  return out;
}

const PILLOW_RESIZE = `
import sys, struct
from PIL import Image
data = sys.stdin.buffer.read()
pos = 0
out = []
while pos < len(data):
    w, h, ow, oh, f = struct.unpack_from('<5I', data, pos); pos += 20
    n = w * h * 3
    im = Image.frombytes('RGB', (w, h), data[pos:pos + n]); pos += n
    out.append(im.resize((ow, oh), Image.BILINEAR if f else Image.BICUBIC).tobytes())
sys.stdout.buffer.write(b''.join(out))
`;

describe('Pillow-exact bicubic resize', () => {
  it.each(['bicubic', 'bilinear'] as const)('matches Pillow byte for byte on every case, %s (SIMD kernels and JavaScript)', (filter) => {
    const inputs = CASES.map(([w, h], i) => sourceImage(w, h, i + 1));
    const payload = Buffer.concat(
      CASES.flatMap(([w, h, ow, oh], i) => {
        const head = Buffer.alloc(20);
        [w, h, ow, oh, filter === 'bilinear' ? 1 : 0].forEach((v, k) => head.writeUInt32LE(v, k * 4));
        return [head, Buffer.from(inputs[i]!)];
      }),
    );
    const pillow = runPython(PILLOW_RESIZE, [], payload);
    let pos = 0;
    CASES.forEach(([w, h, ow, oh], i) => {
      const expected = pillow.subarray(pos, pos + ow * oh * 3);
      pos += ow * oh * 3;
      for (const implementation of ['auto', 'js'] as const) {
        const ours = Buffer.from(resizeRgb(inputs[i]!, w, h, ow, oh, implementation, filter));
        const mismatch = ours.findIndex((v, k) => v !== expected[k]);
        expect(mismatch, `${implementation}: ${w}x${h} -> ${ow}x${oh}: first differing byte`).toBe(-1);
      }
    });
    expect(pos).toBe(pillow.byteLength);
  });

  it('gives the same bytes in bands, each band run by its own instance on the shared memory', () => {
    const k = simdKernels()!;
    const other = kernelsOn(k.memory)!; // what a helper thread builds from the posted memory
    // Down both ways, up both ways, one pass skipped each way, no pass at all.
    for (const [w, h, ow, oh] of [
      [1920, 1080, 980, 560],
      [33, 17, 66, 34],
      [257, 131, 257, 64],
      [100, 80, 37, 80],
      [9, 9, 9, 9],
      [40, 13, 1, 12],
      [7, 30, 5, 9],
    ] as const) {
      const src = sourceImage(w, h, 7);
      const whole = resizeRgb(src, w, h, ow, oh, 'js');
      for (const starts of [[Math.floor(oh / 2)], [1, oh - 1], [Math.floor(oh / 3), Math.floor((2 * oh) / 3)]]) {
        const plan = planResize(k, src, w, h, ow, oh, starts)!;
        expect(plan.bands.map((b) => [b.y0, b.y1])).toEqual([0, ...starts].map((s, i) => [s, [...starts, oh][i]]));
        // Last band first, alternating instances; the rows are read back only once every band
        // has run, so a band that spilled into rows another band wrote before it would show.
        const at: Array<{ at: number; stride: number }> = [];
        for (let b = plan.bands.length - 1; b >= 0; b--) at[b] = resizeBand(b % 2 ? other : k, plan, b);
        const banded = new Uint8Array(ow * oh * 3);
        const memory = new Uint8Array(k.memory.buffer);
        plan.bands.forEach((band, b) => banded.set(memory.subarray(at[b]!.at, at[b]!.at + (band.y1 - band.y0) * at[b]!.stride), band.y0 * ow * 3));
        const mismatch = Buffer.from(banded).findIndex((v, i) => v !== whole[i]);
        expect(mismatch, `${w}x${h} -> ${ow}x${oh} in bands from ${starts.join(',')}`).toBe(-1);
      }
    }
  });

  it('runs on the WebAssembly SIMD kernels here', () => {
    expect(simdKernels()).not.toBeNull();
  });

  it('uses 22-bit fixed-point weights that sum to one', () => {
    const c = resampleCoefficients(1920, 980);
    for (let i = 0; i < 980; i++) {
      let sum = 0;
      for (let k = 0; k < c.count[i]!; k++) sum += c.weights[i * c.ksize + k]!;
      expect(Math.abs(sum - (1 << 22))).toBeLessThanOrEqual(c.count[i]!);
    }
  });

  it('refuses a buffer of the wrong size', () => {
    expect(() => resizeRgb(new Uint8Array(10), 2, 2, 4, 4)).toThrow('expected 12 bytes of RGB for 2x2, got 10');
  });
});

describe('a window of the output (a crop after the resize) is computed alone', () => {
  // Each output pixel's taps are its own: the window's bytes are the whole resize's there, on
  // both implementations, with one pass skipped (an unchanged side) or neither.
  const windows: Array<[string, [number, number, number, number], { x0: number; x1: number; y0: number; y1: number }]> = [
    ['a landscape crop, columns cut', [1920, 1080, 597, 336], { x0: 130, x1: 466, y0: 0, y1: 336 }],
    ['a portrait crop, rows cut', [300, 457, 336, 511], { x0: 0, x1: 336, y0: 87, y1: 423 }],
    ['an upscale', [120, 90, 448, 336], { x0: 56, x1: 392, y0: 0, y1: 336 }],
    ['the width unchanged (no horizontal pass)', [64, 200, 64, 90], { x0: 10, x1: 50, y0: 5, y1: 80 }],
    ['the height unchanged (no vertical pass)', [200, 64, 90, 64], { x0: 3, x1: 70, y0: 9, y1: 40 }],
  ];
  it.each(windows)('%s', (_, [w, h, ow, oh], win) => {
    const src = sourceImage(w, h, 5);
    const whole = resizeRgb(src, w, h, ow, oh, 'js');
    const expected: number[][] = [];
    for (let y = win.y0; y < win.y1; y++) expected.push(Array.from(whole.subarray((y * ow + win.x0) * 3, (y * ow + win.x1) * 3)));
    for (const run of [resizeRgbInto, resizeRgbIntoJs]) {
      const rows: number[][] = [];
      const ys: number[] = [];
      run(src, w, h, ow, oh, (y, rgb) => (ys.push(y), rows.push(Array.from(rgb))), win);
      expect(ys).toEqual(Array.from({ length: win.y1 - win.y0 }, (_, i) => win.y0 + i));
      expect(rows).toEqual(expected);
    }
  });
});
