import { describe, expect, it } from 'vitest';
import { rowSums, rowsRead, torchBicubicPlane, torchCubicAxis } from './torch-bicubic.ts';
import { phi3VisionLevels, PHI3_VISION_DEFAULTS } from './phi3v.ts';

// A plane of normalized levels (as the HD image holds), from a fixed pseudo-random sequence.
function plane(height: number, width: number): Float32Array {
  const [levels] = phi3VisionLevels(PHI3_VISION_DEFAULTS);
  const out = new Float32Array(height * width);
  let s = 12345;
  for (let i = 0; i < out.length; i++) {
    s = (s * 1103515245 + 12345) >>> 0;
    out[i] = levels![(s >>> 16) & 255]!;
  }
  return out;
}

// torch's order of every product and sum for every output value, with no row or column skipped.
function everyTap(src: Float32Array, height: number, width: number, out: number): Float32Array {
  const cols = torchCubicAxis(width, out);
  const rows = torchCubicAxis(height, out);
  const sums = new Float32Array(height * out);
  for (let r = 0; r < height; r++) rowSums(src, r * width, cols.index, cols.weight, sums, r * out, out);
  const f = Math.fround;
  const into = new Float32Array(out * out);
  for (let y = 0; y < out; y++) {
    const [a0, a1, a2, a3] = [0, 1, 2, 3].map((j) => rows.index[y * 4 + j]! * out) as [number, number, number, number];
    const [w0, w1, w2, w3] = [0, 1, 2, 3].map((j) => rows.weight[y * 4 + j]!) as [number, number, number, number];
    for (let x = 0; x < out; x++) into[y * out + x] = f(sums[a3 + x]! * w3 + f(sums[a2 + x]! * w2 + f(sums[a0 + x]! * w0 + f(sums[a1 + x]! * w1))));
  }
  return into;
}

describe("torch's bicubic interpolate of an HD plane to 336 x 336 (Phi-3-vision's global image)", () => {
  it('an odd scale reads one source row in three (1008 rows) and every row of an even one (1344)', () => {
    expect(rowsRead(1008, 336).reduce((a, b) => a + b, 0)).toBe(336);
    expect([...rowsRead(1008, 336).subarray(0, 6)]).toEqual([0, 1, 0, 0, 1, 0]);
    expect(rowsRead(1344, 336).every((r) => r === 1)).toBe(true);
  });

  it.each([
    ['odd scales both ways (1008 x 1680: picks)', 1008, 1680],
    ['even scales both ways (1344 x 1344: every tap)', 1344, 1344],
    ['an even width, an odd height (1008 x 1344)', 1008, 1344],
    ['an odd width, an even height (1344 x 1680: rows summed from picked columns)', 1344, 1680],
  ])('%s: the same bits as every tap summed, whatever the unread rows of the sums hold', (_, height, width) => {
    const src = plane(height, width);
    const expected = everyTap(src, height, width, 336);
    const into = new Float32Array(336 * 336);
    // Stale working space in the pool's memory: rows the output does not read are never made.
    torchBicubicPlane(src, height, width, 336, 336, into, new Float32Array(height * 336).fill(NaN));
    expect(Buffer.from(into.buffer).equals(Buffer.from(expected.buffer))).toBe(true);
    expect(into.some(Number.isNaN)).toBe(false);
  });
});
