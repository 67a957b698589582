// Tensor dtypes on the wire (docs/transport.md, "Tensor dtypes").
//
// Preprocessing produces float32; the encoder input travels in the worker's wire dtype.
// float32 -> bfloat16: round to nearest even on the bit pattern (add 0x7FFF plus the lowest
// kept bit, keep the top 16 bits); NaN stays a quiet NaN with its sign (0x0040 forced on, as
// Rust's `half` and PyTorch do, so it can never round into Inf). float32 -> float16: IEEE
// round to nearest even with subnormals, overflow to ±Inf, NaN -> 0x7E00 with its sign.
// All wire bytes are little-endian and row-major; both loops run on the bit patterns.
//
// Which dtype a worker's encoder input travels in is its runtime's rule, and its engine's
// to state (core/engines/, EngineCapabilities.encoderDtype); this module only spells and
// converts dtypes.

import type { EncoderDtype } from './vocabulary.ts';

export type { EncoderDtype };

export const ELEMENT_SIZES: Readonly<Record<string, number>> = {
  float32: 4,
  float16: 2,
  bfloat16: 2,
  float64: 8,
  int64: 8,
  uint64: 8,
  int32: 4,
  uint32: 4,
  int16: 2,
  uint16: 2,
  int8: 1,
  uint8: 1,
  bool: 1,
};

export function elementSize(dtype: string): number | undefined {
  return ELEMENT_SIZES[dtype];
}

const SPELLINGS: Readonly<Record<string, EncoderDtype>> = {
  float32: 'float32',
  fp32: 'float32',
  f32: 'float32',
  bfloat16: 'bfloat16',
  bf16: 'bfloat16',
  float16: 'float16',
  fp16: 'float16',
  f16: 'float16',
  half: 'float16',
};

/** Accepted spellings, trimmed and case-insensitive; undefined for anything else. */
export function parseEncoderDtype(raw: string): EncoderDtype | undefined {
  return SPELLINGS[raw.trim().toLowerCase()];
}

/** float32 bit pattern -> bfloat16 bit pattern, round to nearest even. */
export function bf16BitsFromF32Bits(bits: number): number {
  if ((bits & 0x7fffffff) > 0x7f800000) return ((bits >>> 16) | 0x0040) & 0xffff;
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

/** float32 bit pattern -> float16 bit pattern, IEEE round to nearest even. */
export function f16BitsFromF32Bits(bits: number): number {
  const sign = (bits >>> 16) & 0x8000;
  const abs = bits & 0x7fffffff;
  if (abs > 0x7f800000) return sign | 0x7e00; // NaN
  if (abs >= 0x477ff000) return sign | 0x7c00; // >= 65520 rounds to Inf (and Inf itself)
  if (abs >= 0x38800000) {
    // Normal half: rebias the exponent (127 -> 15) and round the 13 dropped bits.
    const rebased = abs - 0x38000000;
    return sign | ((rebased + 0x0fff + ((rebased >>> 13) & 1)) >>> 13);
  }
  if (abs < 0x33000000) return sign; // below half the smallest subnormal: ±0
  // Subnormal half: shift the full significand into place, rounding to nearest even.
  const exponent = abs >>> 23;
  const mantissa = (abs & 0x7fffff) | 0x800000;
  const shift = 126 - exponent; // 14..24 bits dropped
  const kept = mantissa >>> shift;
  const dropped = mantissa & ((1 << shift) - 1);
  const half = 1 << (shift - 1);
  const roundUp = dropped > half || (dropped === half && (kept & 1) === 1);
  return sign | (kept + (roundUp ? 1 : 0));
}

/**
 * float32 values -> bfloat16 bytes (little-endian), in one pass over the bit patterns.
 * `out` may be a pooled buffer of at least 2 × n bytes.
 */
export function f32ToBf16(input: Float32Array, out?: Uint8Array): Uint8Array {
  const n = input.length;
  const bytes = out ?? new Uint8Array(n * 2);
  if (bytes.byteLength < n * 2) throw new RangeError(`output buffer holds ${bytes.byteLength} bytes, need ${n * 2}`);
  // Int32 view: the JIT keeps every step in 32-bit integer registers (a Uint32 view makes
  // negative floats' bit patterns doubles). Sums stay within int32 for every non-NaN input.
  const src = new Int32Array(input.buffer, input.byteOffset, n);
  const dst = bytes.byteOffset % 2 === 0 ? new Uint16Array(bytes.buffer, bytes.byteOffset, n) : undefined;
  if (dst && bytes.byteOffset % 4 === 0) {
    // Two results per 32-bit store (little-endian: element 2j in the low half).
    const pairs = new Int32Array(bytes.buffer, bytes.byteOffset, n >> 1);
    for (let j = 0, i = 0; j < pairs.length; j++, i += 2) {
      const a = src[i]!;
      const b = src[i + 1]!;
      const lo = (a & 0x7fffffff) > 0x7f800000 ? (a >>> 16) | 0x0040 : ((a + 0x7fff + ((a >>> 16) & 1)) | 0) >>> 16;
      const hi = (b & 0x7fffffff) > 0x7f800000 ? (b >>> 16) | 0x0040 : ((b + 0x7fff + ((b >>> 16) & 1)) | 0) >>> 16;
      pairs[j] = lo | (hi << 16);
    }
    if (n & 1) dst[n - 1] = bf16BitsFromF32Bits(src[n - 1]! >>> 0);
  } else if (dst) {
    for (let i = 0; i < n; i++) {
      const bits = src[i]!;
      dst[i] = (bits & 0x7fffffff) > 0x7f800000 ? (bits >>> 16) | 0x0040 : ((bits + 0x7fff + ((bits >>> 16) & 1)) | 0) >>> 16;
    }
  } else {
    for (let i = 0; i < n; i++) {
      const h = bf16BitsFromF32Bits(src[i]! >>> 0);
      bytes[2 * i] = h & 0xff;
      bytes[2 * i + 1] = h >>> 8;
    }
  }
  return bytes.subarray(0, n * 2);
}

/** float32 values -> float16 bytes (little-endian). */
export function f32ToF16(input: Float32Array, out?: Uint8Array): Uint8Array {
  const n = input.length;
  const bytes = out ?? new Uint8Array(n * 2);
  if (bytes.byteLength < n * 2) throw new RangeError(`output buffer holds ${bytes.byteLength} bytes, need ${n * 2}`);
  const src = new Uint32Array(input.buffer, input.byteOffset, n);
  for (let i = 0; i < n; i++) {
    const h = f16BitsFromF32Bits(src[i]!);
    bytes[2 * i] = h & 0xff;
    bytes[2 * i + 1] = h >>> 8;
  }
  return bytes.subarray(0, n * 2);
}

/** The little-endian bytes of float32 values in `dtype`: a view for float32, a conversion otherwise. */
export function encodeFloat32As(dtype: EncoderDtype, values: Float32Array): Uint8Array {
  if (dtype === 'float32') return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  return dtype === 'bfloat16' ? f32ToBf16(values) : f32ToF16(values);
}
