// Image bytes -> packed 8-bit RGB, the way Pillow's `Image.open(f).convert("RGB")` sees them:
// alpha is dropped (not composited), grayscale is replicated, palettes are expanded, GIFs
// give their first frame, EXIF orientation is NOT applied (Qwen's reference does not
// rotate), and an embedded colour profile is ignored (Pillow does not apply it, nor does the
// gateway's `image` crate: an iPhone's Display P3 photo reaches the model as its stored values).
// A JPEG goes to libjpeg-turbo directly where the optional native decoder is built
// (native-jpeg.ts: Pillow's own library and settings, in 40-75 % of sharp's time); everything
// else, and a JPEG that decoder leaves (CMYK, 12-bit, lossless, arithmetic-coded, any libjpeg
// warning), to libvips via sharp.
// Only the formats the API accepts get through.
import sharp, { type OutputInfo } from 'sharp';
import { nativeJpeg, type NativeJpeg } from './native-jpeg.ts';

export const ACCEPTED_FORMATS = ['jpeg', 'png', 'webp', 'gif'] as const;

// libvips caches operations by their arguments; every request brings new bytes, so the
// cache would only hold memory (and make repeated benchmark decodes look free).
sharp.cache(false);

export class ImageDecodeError extends Error {
  override readonly name = 'ImageDecodeError';
}

export interface RgbImage {
  width: number;
  height: number;
  /** width × height × 3 bytes, row-major RGB. */
  rgb: Uint8Array;
  format: string;
  /** width × height bytes of alpha, asked for (`keepAlpha`) and not wholly opaque: what Pillow sees as an alpha band or palette transparency. */
  alpha?: Uint8Array;
  /** Which decoder gave the pixels. */
  decoder: Decoder;
  /** Threads that decoded it: 2 when a helper decoded the bottom rows (decode-shared.ts). */
  decodeThreads?: number;
}

/** libjpeg-turbo through the native decoder, or libvips through sharp. */
export type Decoder = 'libjpeg-turbo' | 'sharp';

/** Keep decompression bombs out: refuse images above this many pixels before decoding (the router passes its own, lower, request limit). */
export const MAX_DECODE_PIXELS = 100_000_000;

/** The container format from its magic bytes, without asking the decoder (one pass fewer). */
export function sniffFormat(bytes: Uint8Array): string | undefined {
  const b = bytes;
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'jpeg';
  if (b.length >= 8 && b[0] === 0x89 && b[1] === 0x50 && b[2] === 0x4e && b[3] === 0x47 && b[4] === 0x0d && b[5] === 0x0a && b[6] === 0x1a && b[7] === 0x0a)
    return 'png';
  if (b.length >= 6 && b[0] === 0x47 && b[1] === 0x49 && b[2] === 0x46 && b[3] === 0x38) return 'gif';
  if (b.length >= 12 && b[0] === 0x52 && b[1] === 0x49 && b[2] === 0x46 && b[3] === 0x46 && b[8] === 0x57 && b[9] === 0x45 && b[10] === 0x42 && b[11] === 0x50)
    return 'webp';
  return undefined;
}

/**
 * Width and height from the container header, without the decoder (microseconds, on the
 * calling thread): JPEG's frame header, PNG's IHDR, GIF's logical screen, WebP's VP8, VP8L or
 * VP8X chunk. Undefined when the header is not one of those or is cut short.
 */
export function headerSize(bytes: Uint8Array): { width: number; height: number } | undefined {
  const b = bytes;
  const u16be = (i: number) => (b[i]! << 8) | b[i + 1]!;
  const u16le = (i: number) => b[i]! | (b[i + 1]! << 8);
  const u24le = (i: number) => b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16);
  const size = (width: number, height: number) => (width > 0 && height > 0 ? { width, height } : undefined);
  switch (sniffFormat(bytes)) {
    case 'png':
      if (b.length < 24) return undefined;
      return size(u16be(16) * 65536 + u16be(18), u16be(20) * 65536 + u16be(22));
    case 'gif':
      return b.length >= 10 ? size(u16le(6), u16le(8)) : undefined;
    case 'webp': {
      if (b.length < 30) return undefined;
      const chunk = String.fromCharCode(b[12]!, b[13]!, b[14]!, b[15]!);
      if (chunk === 'VP8X') return size(u24le(24) + 1, u24le(27) + 1);
      if (chunk === 'VP8L') {
        const bits = b[21]! | (b[22]! << 8) | (b[23]! << 16) | (b[24]! << 24);
        return size((bits & 0x3fff) + 1, ((bits >>> 14) & 0x3fff) + 1);
      }
      if (chunk === 'VP8 ') return size(u16le(26) & 0x3fff, u16le(28) & 0x3fff);
      return undefined;
    }
    case 'jpeg': {
      const frame = jpegFrame(b);
      return frame ? size(frame.width, frame.height) : undefined;
    }
    default:
      return undefined;
  }
}

/**
 * A JPEG's first start-of-frame (SOF0..SOF15 but DHT, JPG, DAC): its marker (0xc0 baseline,
 * 0xc1 extended sequential, 0xc2 progressive, 0xc3 lossless, 0xc9.. arithmetic) and size, from
 * a walk of the marker segments; undefined when the walk does not reach one.
 */
export function jpegFrame(b: Uint8Array): { marker: number; width: number; height: number } | undefined {
  const u16be = (i: number) => (b[i]! << 8) | b[i + 1]!;
  let i = 2;
  while (i + 9 < b.length) {
    if (b[i] !== 0xff) return undefined;
    const marker = b[i + 1]!;
    if (marker === 0xff) {
      i += 1; // fill byte
      continue;
    }
    if (marker === 0xd8 || marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      i += 2; // no length
      continue;
    }
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) return { marker, width: u16be(i + 7), height: u16be(i + 5) };
    if (marker === 0xd9 || marker === 0xda) return undefined; // end of image or scan before any frame
    i += 2 + u16be(i + 2);
  }
  return undefined;
}

/**
 * The JPEG frames the native decoder takes: Huffman-coded baseline, extended sequential and
 * progressive (what cameras, phones and encoders write). Lossless and arithmetic-coded ones go
 * to sharp, whose decoder refuses or takes them as it always has (libjpeg-turbo 3 decodes
 * lossless frames that sharp's refuses: the two paths must accept the same files).
 */
export const NATIVE_JPEG_FRAMES: ReadonlySet<number> = new Set([0xc0, 0xc1, 0xc2]);

/**
 * What a refused file most likely is, from its first bytes, for the error message only. The
 * format check never asks the decoder: libvips would parse an SVG with librsvg (an XML
 * parser, fonts, external references) or a PDF with poppler before anything refused it, and
 * its error text (libvips' and GLib's) reached the client.
 */
function refusedFormat(bytes: Uint8Array): string | undefined {
  const b = bytes;
  const ascii = (from: number, to: number) => String.fromCharCode(...b.subarray(from, to));
  if (b.length >= 2 && b[0] === 0x42 && b[1] === 0x4d) return 'bmp';
  if (b.length >= 4 && (ascii(0, 4) === 'II*\0' || (b[0] === 0x4d && b[1] === 0x4d && b[2] === 0 && b[3] === 0x2a))) return 'tiff';
  if (b.length >= 4 && ascii(0, 4) === '%PDF') return 'pdf';
  if (b.length >= 12 && ascii(4, 8) === 'ftyp') return /^(avif|avis)/.test(ascii(8, 12)) ? 'avif' : 'heif';
  if (b.length >= 4 && b[0] === 0 && b[1] === 0 && (b[2] === 1 || b[2] === 2) && b[3] === 0) return 'ico';
  if (b.length >= 2 && ((b[0] === 0xff && b[1] === 0x0a) || ascii(0, Math.min(b.length, 12)) === '\0\0\0\fJXL \r\n')) return 'jxl';
  const head = new TextDecoder('utf-8', { fatal: false })
    .decode(b.subarray(0, 512))
    .replace(/^\ufeff/, '')
    .trimStart()
    .toLowerCase();
  if (head.startsWith('<svg') || (head.startsWith('<?xml') && head.includes('<svg')) || head.startsWith('<!doctype svg')) return 'svg';
  if (head.startsWith('<')) return 'xml or html';
  return undefined;
}

/**
 * PNG's colour type (IHDR): 0 gray, 2 RGB, 3 palette, 4 gray with alpha, 6 RGBA. A gray or RGB
 * PNG's transparency chunk (a colour key) makes the decoder give an alpha channel Pillow does
 * not (it opens such an image as L or RGB): mmtc keeps it opaque, as Kimi-K3's processor keeps
 * an RGB image; a keyed gray one it would flatten where the key is (docs/preprocessing.md,
 * "MoonViT patches (Kimi-K2.5, Kimi-K3)", says where mmtc and the gateway differ on these).
 */
function pngColourType(bytes: Uint8Array): number | undefined {
  return bytes.length > 25 ? bytes[25] : undefined;
}

/**
 * `keepAlpha`: give the alpha channel too where the image has one that is not wholly opaque
 * (Kimi-K3 flattens it over its background). `jpeg`: the native JPEG decoder, null for sharp
 * alone (the tests run both).
 */
export async function decodeToRgb(
  bytes: Uint8Array,
  maxPixels: number = MAX_DECODE_PIXELS,
  keepAlpha = false,
  jpeg: NativeJpeg | null = nativeJpeg(),
): Promise<RgbImage> {
  const sniffed = sniffFormat(bytes);
  if (!sniffed) {
    const format = refusedFormat(bytes);
    throw new ImageDecodeError(
      format ? `unsupported image format '${format}': expected JPEG, PNG, WebP or GIF` : 'not a decodable image (expected JPEG, PNG, WebP or GIF)',
    );
  }
  const frame = sniffed === 'jpeg' ? jpegFrame(bytes) : undefined;
  if (jpeg && frame && NATIVE_JPEG_FRAMES.has(frame.marker)) {
    const decoded = jpeg.decode(bytes, maxPixels);
    // A string: the file is sharp's to decode or refuse (see NativeJpeg.decode).
    if (typeof decoded !== 'string') return { ...decoded, format: sniffed, decoder: 'libjpeg-turbo' };
  }
  let raw: { data: Buffer; info: OutputInfo };
  try {
    // No colour-space step: decoders give gray, gray+alpha, RGB or RGBA, all handled below.
    // Sequential access streams the decoder's rows straight into the output: much faster than
    // libvips' default of decoding into a whole intermediate image first (measured:
    // docs/performance.md, "Where the comments' measurements went: transport and preprocessing").
    // `ignoreIcc`: sharp would otherwise convert an image with an embedded profile to sRGB
    // (a Display P3 JPEG: 94 % of its bytes off Pillow's, by up to 113 levels).
    raw = await sharp(bytes, { limitInputPixels: maxPixels, failOn: 'error', pages: 1, sequentialRead: true, ignoreIcc: true })
      .raw({ depth: 'uchar' })
      .toBuffer({ resolveWithObject: true });
  } catch (err) {
    throw new ImageDecodeError(`cannot decode ${sniffed} image (${firstLine(err)})`);
  }
  const { width, height, channels } = raw.info;
  if (sniffed === 'jpeg' && channels === 4) {
    // CMYK JPEG: the one case where the decoder's channels are not RGB(A); convert to sRGB.
    const rgb = await sharp(bytes, { limitInputPixels: maxPixels, failOn: 'error' }).toColourspace('srgb').removeAlpha().raw({ depth: 'uchar' }).toBuffer();
    return { width, height, rgb, format: sniffed, decoder: 'sharp' };
  }
  const rgb = toRgb(raw.data, width * height, channels);
  const colourType = sniffed === 'png' ? pngColourType(bytes) : undefined;
  const colourKeyed = colourType === 0 || colourType === 2;
  const alpha = keepAlpha && (channels === 2 || channels === 4) && !colourKeyed ? alphaPlane(raw.data, width * height, channels) : undefined;
  return { width, height, rgb, format: sniffed, decoder: 'sharp', ...(alpha ? { alpha } : {}) };
}

/** The last channel of each pixel, or undefined when every pixel is opaque (then flattening changes nothing). */
function alphaPlane(data: Uint8Array, pixels: number, channels: number): Uint8Array | undefined {
  const alpha = new Uint8Array(pixels);
  let opaque = true;
  for (let i = 0, p = channels - 1; i < pixels; i++, p += channels) {
    const a = data[p]!;
    alpha[i] = a;
    if (a !== 255) opaque = false;
  }
  return opaque ? undefined : alpha;
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
