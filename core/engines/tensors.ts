// The tensors of one image in the wire layout both engines share: the encoder input in the
// wire dtype (bytes straight from the preprocessing output, converted only when the fused
// bf16 pass did not already produce them) and int64 side tensors.
import { f32ToF16 } from '../transport/dtype.ts';
import type { PreparedImage } from './types.ts';

export function encoderBytes(image: PreparedImage, dtype: 'float32' | 'bfloat16' | 'float16'): Uint8Array {
  if (dtype === 'float32') return new Uint8Array(image.pixelValues.buffer, image.pixelValues.byteOffset, image.pixelValues.byteLength);
  if (dtype === 'bfloat16') {
    if (!image.bf16) throw new Error('bfloat16 encoder input requested but preprocessing did not produce it');
    return new Uint8Array(image.bf16.buffer, image.bf16.byteOffset, image.bf16.byteLength);
  }
  return f32ToF16(image.pixelValues);
}

export function int64Bytes(values: readonly number[]): Uint8Array {
  return new Uint8Array(BigInt64Array.from(values.map((v) => BigInt(v))).buffer);
}
