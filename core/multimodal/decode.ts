// Image bytes -> packed 8-bit RGB, the way Pillow's `Image.open(f).convert("RGB")` sees them:
// alpha is dropped (not composited), grayscale is replicated, palettes are expanded, GIFs
// give their first frame, and EXIF orientation is NOT applied (Qwen's reference does not
// rotate). Decoding is libvips via sharp; only the formats the API accepts get through.
import sharp, { type Metadata, type OutputInfo } from 'sharp';

export const ACCEPTED_FORMATS = ['jpeg', 'png', 'webp', 'gif'] as const;

export class ImageDecodeError extends Error {
  override readonly name = 'ImageDecodeError';
}

export interface RgbImage {
  width: number;
  height: number;
  /** width × height × 3 bytes, row-major RGB. */
  rgb: Uint8Array;
  format: string;
}

/** Keep decompression bombs out: refuse images above this many pixels before decoding. */
export const MAX_DECODE_PIXELS = 100_000_000;

export async function decodeToRgb(bytes: Uint8Array): Promise<RgbImage> {
  let meta: Metadata;
  try {
    meta = await sharp(bytes, { limitInputPixels: MAX_DECODE_PIXELS, failOn: 'error' }).metadata();
  } catch (err) {
    throw new ImageDecodeError(`not a decodable image (${firstLine(err)})`);
  }
  const format = meta.format ?? 'unknown';
  if (!(ACCEPTED_FORMATS as readonly string[]).includes(format)) {
    throw new ImageDecodeError(`unsupported image format '${format}': expected JPEG, PNG, WebP or GIF`);
  }
  let raw: { data: Buffer; info: OutputInfo };
  try {
    raw = await sharp(bytes, { limitInputPixels: MAX_DECODE_PIXELS, failOn: 'error', pages: 1 })
      .toColourspace(meta.channels !== undefined && meta.channels <= 2 ? 'b-w' : 'srgb')
      .raw({ depth: 'uchar' })
      .toBuffer({ resolveWithObject: true });
  } catch (err) {
    throw new ImageDecodeError(`cannot decode ${format} image (${firstLine(err)})`);
  }
  const { width, height, channels } = raw.info;
  return { width, height, rgb: toRgb(raw.data, width * height, channels), format };
}

function firstLine(err: unknown): string {
  return String((err as Error)?.message ?? err).split('\n')[0]!;
}

/** 1 (L), 2 (LA), 3 (RGB) or 4 (RGBA) channels -> RGB, alpha dropped. */
function toRgb(data: Uint8Array, pixels: number, channels: number): Uint8Array {
  if (channels === 3) return data;
  const out = new Uint8Array(pixels * 3);
  if (channels === 1 || channels === 2) {
    for (let i = 0, p = 0; i < pixels; i++, p += channels) {
      const v = data[p]!;
      out[3 * i] = v;
      out[3 * i + 1] = v;
      out[3 * i + 2] = v;
    }
    return out;
  }
  if (channels === 4) {
    for (let i = 0, p = 0; i < pixels; i++, p += 4) {
      out[3 * i] = data[p]!;
      out[3 * i + 1] = data[p + 1]!;
      out[3 * i + 2] = data[p + 2]!;
    }
    return out;
  }
  throw new ImageDecodeError(`unexpected ${channels}-channel image`);
}
