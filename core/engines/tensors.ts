// The tensors of one image in the wire layout every engine shares: the encoder input in the
// wire dtype (bytes straight from the preprocessing output, converted only when the fused
// bf16 pass did not already produce them), every image's float32 rows concatenated for an
// engine with one encoder tensor per request, and int64 side tensors.
import { f32ToF16 } from '../transport/dtype.ts';
import type { PreparedImage } from './engine.ts';
import type { ImageModelTensor } from '../multimodal/families/index.ts';

export function float32Values(image: PreparedImage): Float32Array {
  if (!image.pixelValues) throw new Error('float32 encoder input requested but preprocessing produced only bfloat16');
  return image.pixelValues;
}

export function encoderBytes(image: PreparedImage, dtype: 'float32' | 'bfloat16' | 'float16'): Uint8Array {
  if (dtype === 'bfloat16') {
    if (!image.bf16) throw new Error('bfloat16 encoder input requested but preprocessing did not produce it');
    return new Uint8Array(image.bf16.buffer, image.bf16.byteOffset, image.bf16.byteLength);
  }
  const values = float32Values(image);
  return dtype === 'float32' ? new Uint8Array(values.buffer, values.byteOffset, values.byteLength) : f32ToF16(values);
}

export function int64Bytes(values: readonly number[]): Uint8Array {
  return new Uint8Array(BigInt64Array.from(values.map((v) => BigInt(v))).buffer);
}

/**
 * A request's images with their crops padded with zeros to its most, as Hugging Face's
 * processor pads a batch (LLaVA-NeXT: an image's [1, crops, 3, H, W] has its own count; vLLM's
 * model drops the padding, the gateway sends it): each padded image gets its own copy. The
 * images as they are when their crops agree (every other family's always do). An image must
 * have its values in memory (not a pixel-cache link) to be padded.
 */
export function paddedToBatch(images: readonly PreparedImage[]): PreparedImage[] {
  const crops = (im: PreparedImage) => (im.encoderShape.length === 5 ? im.encoderShape[1]! : 0);
  const most = Math.max(0, ...images.map(crops));
  if (images.every((im) => crops(im) === most)) return [...images];
  return images.map((im) => {
    if (crops(im) === most) return im;
    if (im.encoderShape.length !== 5) throw new Error(`image of encoder shape [${im.encoderShape.join(', ')}] among images of [1, crops, ...] ones`);
    const features = (im.features / crops(im)) * most;
    const padded = <T extends Float32Array | Uint16Array>(values: T | undefined, make: (n: number) => T): T | undefined => {
      if (!values) return undefined;
      if (values.length !== im.features)
        throw new Error(`an image's encoder input of ${values.length} values where its shape says ${im.features}: its values are not in memory`);
      const out = make(features);
      out.set(values);
      return out;
    };
    const pixelValues = padded(im.pixelValues, (n) => new Float32Array(n));
    const bf16 = padded(im.bf16, (n) => new Uint16Array(n));
    const { pixelValues: _f, bf16: _b, ...rest } = im;
    return { ...rest, ...(pixelValues ? { pixelValues } : {}), ...(bf16 ? { bf16 } : {}), features, encoderShape: [1, most, ...im.encoderShape.slice(2)] };
  });
}

/**
 * Every image's float32 encoder input in prompt order, concatenated along the first axis as
 * the gateway's batch is (flat or batched alike): [rows, features] for Qwen, [images, 3, H, W]
 * for a batched family. One image's own buffer when it is alone.
 */
export function concatenatedPixels(images: readonly PreparedImage[]): { pixels: Float32Array; shape: number[] } {
  const features = images[0]!.features;
  const rows = images.reduce((n, im) => n + im.patches, 0);
  const shape = [rows, ...images[0]!.encoderShape.slice(1)];
  if (images.length === 1) return { pixels: float32Values(images[0]!), shape };
  const pixels = new Float32Array(rows * features);
  let at = 0;
  for (const im of images) {
    pixels.set(float32Values(im), at);
    at += im.patches * im.features;
  }
  return { pixels, shape };
}

/** One model-specific tensor of a request: every image's stacked (batched, or shared: each item gets the whole), with its layout's keys. */
export interface StackedTensor {
  name: string;
  dtype: 'int64';
  shape: number[];
  bytes: Uint8Array;
  keepOnCpu: boolean;
  splitsPixels: boolean;
  /** No field layout: the whole tensor goes to every item (vLLM's shared field; TokenSpeed's items each get it). */
  shared: boolean;
}

/**
 * The images' model-specific tensors (the family's, PreparedImage.modelTensors) stacked along
 * their leading dimension in prompt order, for an engine with one tensor per request; with
 * `layout`, only the tensors of that layout (TokenSpeed's items take the shared ones whole).
 * Every image of a request comes from the same family, so carries the same tensors in the
 * same order.
 */
export function stackedImageTensors(images: readonly PreparedImage[], layout?: ImageModelTensor['layout']): StackedTensor[] {
  if (images.length === 0) return [];
  return images[0]!.modelTensors.flatMap((first, k) => {
    if (layout !== undefined && first.layout !== layout) return [];
    const parts = images.map((im, i) => {
      const t = im.modelTensors[k];
      if (t?.name !== first.name) throw new Error(`image ${i} has no ${first.name} tensor where image 0 has it: images of one request come from one family`);
      return t;
    });
    const rows = parts.reduce((n, t) => n + t.shape[0]!, 0);
    return {
      name: first.name,
      dtype: first.dtype,
      shape: [rows, ...first.shape.slice(1)],
      bytes: int64Bytes(parts.flatMap((t) => t.values)),
      keepOnCpu: first.keepOnCpu,
      splitsPixels: first.splitsPixels === true,
      shared: first.layout === 'shared',
    };
  });
}
