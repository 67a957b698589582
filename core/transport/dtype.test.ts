import { describe, expect, it } from 'vitest';
import { bf16BitsFromF32Bits, f16BitsFromF32Bits, f32ToBf16, f32ToF16, parseEncoderDtype } from './dtype.ts';

const bitsOf = (x: number) => new Uint32Array(Float32Array.of(x).buffer)[0]!;
const floatOf = (bits: number) => new Float32Array(Uint32Array.of(bits >>> 0).buffer)[0]!;

/** Exact value of a float16 bit pattern, decoded independently of the encoder. */
function halfValue(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const man = h & 0x3ff;
  if (exp === 0x1f) return man ? Number.NaN : sign * Infinity;
  if (exp === 0) return sign * man * 2 ** -24;
  return sign * (1 + man / 1024) * 2 ** (exp - 15);
}

describe('float32 -> bfloat16', () => {
  it.each([
    ['+0', 0x00000000, 0x0000],
    ['-0', 0x80000000, 0x8000],
    ['1.0', 0x3f800000, 0x3f80],
    ['tie rounds to even (down)', 0x3f808000, 0x3f80],
    ['tie rounds to even (up)', 0x3f818000, 0x3f82],
    ['above tie rounds up', 0x3f808001, 0x3f81],
    ['smallest subnormal', 0x00000001, 0x0000],
    ['subnormal tie to even', 0x00018000, 0x0002],
    ['largest finite rounds to Inf', 0x7f7fffff, 0x7f80],
    ['+Inf', 0x7f800000, 0x7f80],
    ['-Inf', 0xff800000, 0xff80],
    ['quiet NaN', 0x7fc00000, 0x7fc0],
    ['NaN whose payload would round into Inf stays NaN', 0x7f80ffff, 0x7fc0],
    ['negative NaN keeps its sign', 0xffc00001, 0xffc0],
  ])('%s', (_name, input, expected) => {
    expect(bf16BitsFromF32Bits(input)).toBe(expected);
    const out = f32ToBf16(Float32Array.of(floatOf(input)));
    expect(out[0]! | (out[1]! << 8)).toBe(expected); // little-endian on the wire
  });

  it('is the nearest bfloat16 with ties to even on 200k random patterns', () => {
    let seed = 12345;
    const rand = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0);
    const inputs = new Float32Array(200_000);
    const bits = new Uint32Array(inputs.buffer);
    for (let i = 0; i < bits.length; i++) bits[i] = rand();
    const out = new Uint16Array(f32ToBf16(inputs).buffer);
    for (let i = 0; i < bits.length; i++) {
      const x = inputs[i]!;
      if (Number.isNaN(x)) {
        expect((out[i]! & 0x7f80) === 0x7f80 && (out[i]! & 0x7f) !== 0).toBe(true);
        continue;
      }
      const down = floatOf((bits[i]! & 0xffff0000) >>> 0);
      const up = floatOf(((bits[i]! & 0xffff0000) + 0x10000) >>> 0);
      const got = floatOf(out[i]! << 16);
      // Past the largest finite value, IEEE rounds as if the next step were 2^128 (then Inf).
      const upForDistance = Number.isFinite(up) ? up : Math.sign(up) * 2 ** 128;
      const dDown = Math.abs(x - down);
      const dUp = Math.abs(upForDistance - x);
      const want = dDown < dUp ? down : dUp < dDown ? up : ((bits[i]! >>> 16) & 1) === 0 ? down : up;
      if (!Object.is(got, want)) throw new Error(`bits 0x${bits[i]!.toString(16)}: got ${got}, want ${want}`);
    }
  });

  it('gives the same bytes whatever the alignment of the output (paired, 16-bit and byte paths)', () => {
    const values = Float32Array.from({ length: 1001 }, (_, i) => Math.sin(i) * 1e3 * (i % 7 === 0 ? -1 : 1));
    const aligned = Buffer.from(f32ToBf16(values));
    for (const offset of [1, 2, 3, 4]) {
      const backing = new Uint8Array(2 * values.length + 8);
      const out = f32ToBf16(values, backing.subarray(offset));
      expect(Buffer.from(out).equals(aligned), `offset ${offset}`).toBe(true);
    }
  });

  it('writes into a caller buffer and refuses one that is too small', () => {
    const out = new Uint8Array(8);
    expect(f32ToBf16(Float32Array.of(1, 2), out).byteLength).toBe(4);
    expect(() => f32ToBf16(Float32Array.of(1, 2, 3), new Uint8Array(4))).toThrow('output buffer holds 4 bytes, need 6');
  });
});

describe('float32 -> float16', () => {
  it.each([
    ['+0', 0, 0x0000],
    ['-0', -0, 0x8000],
    ['1', 1, 0x3c00],
    ['65504 (max half)', 65504, 0x7bff],
    ['65519 rounds down to 65504', 65519, 0x7bff],
    ['65520 ties to Inf', 65520, 0x7c00],
    ['1e6 overflows to Inf', 1e6, 0x7c00],
    ['-1e6 overflows to -Inf', -1e6, 0xfc00],
    ['+Inf', Infinity, 0x7c00],
    ['-Inf', -Infinity, 0xfc00],
    ['NaN', Number.NaN, 0x7e00],
    ['smallest normal 2^-14', 2 ** -14, 0x0400],
    ['largest subnormal', 1023 * 2 ** -24, 0x03ff],
    ['smallest subnormal 2^-24', 2 ** -24, 0x0001],
    ['2^-25 ties to even (0)', 2 ** -25, 0x0000],
    ['1.5 * 2^-24 ties to even (2)', 1.5 * 2 ** -24, 0x0002],
    ['2.5 * 2^-24 ties to even (2)', 2.5 * 2 ** -24, 0x0002],
    ['just above 2^-25 rounds up', floatOf(bitsOf(2 ** -25) + 1), 0x0001],
    ['1 + 2^-11 ties to even (1)', 1 + 2 ** -11, 0x3c00],
    ['1 + 3 * 2^-11 ties to even (up)', 1 + 3 * 2 ** -11, 0x3c02],
  ])('%s', (_name, value, expected) => {
    expect(f16BitsFromF32Bits(bitsOf(value))).toBe(expected);
    const out = f32ToF16(Float32Array.of(value));
    expect(out[0]! | (out[1]! << 8)).toBe(expected);
  });

  it('negative NaN keeps its sign', () => {
    expect(f16BitsFromF32Bits(0xffc00000)).toBe(0xfe00);
  });

  it('is the nearest float16 with ties to even over the whole finite range', () => {
    let seed = 777;
    const rand = () => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0);
    for (let i = 0; i < 100_000; i++) {
      // Spread magnitudes across subnormal, normal and overflow ranges.
      const x = floatOf(((rand() & 0x80000000) | ((0x30 + (rand() % 0x18)) << 23) | (rand() & 0x7fffff)) >>> 0);
      const h = f16BitsFromF32Bits(bitsOf(x));
      const got = halfValue(h);
      if (Math.abs(x) >= 65520) {
        expect(got).toBe(Math.sign(x) * Infinity);
        continue;
      }
      const next = halfValue(h + 1);
      const prev = (h & 0x7fff) === 0 ? -halfValue(h + 1) : halfValue(h - 1);
      const err = Math.abs(got - x);
      if (err > Math.abs(next - x) || err > Math.abs(prev - x)) throw new Error(`${x}: got ${got}`);
      if (err === Math.abs(next - x) || err === Math.abs(prev - x)) {
        if (err !== 0 && (h & 1) !== 0) throw new Error(`${x}: tie not to even (${h.toString(16)})`);
      }
    }
  });
});

describe('encoder dtype resolution', () => {
  it.each([
    ['fp32', 'float32'],
    [' F32 ', 'float32'],
    ['BF16', 'bfloat16'],
    ['half', 'float16'],
    ['fp16', 'float16'],
    ['f16', 'float16'],
  ])('spelling %j is %s', (raw, dtype) => {
    expect(parseEncoderDtype(raw)).toBe(dtype);
  });
});
