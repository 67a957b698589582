import { afterAll, describe, expect, it } from 'vitest';
import { DECODABLE, makeTestImages } from '../test/images.ts';
import sharp, { type Sharp } from 'sharp';
import { decodeToRgb, headerSize, ImageDecodeError, type Decoder } from './decode.ts';
import { nativeJpeg, type NativeJpeg } from './native-jpeg.ts';
import { runPython } from '../test/python.ts';

const images = makeTestImages();
afterAll(() => images.remove());

const pillowRgb = (bytes: Uint8Array) =>
  runPython(
    `
import sys
from PIL import Image
sys.stdout.buffer.write(Image.open(sys.stdin.buffer).convert('RGB').tobytes())
`,
    [],
    Buffer.from(bytes),
  );

it('the native JPEG decoder is built here (scripts/build-native.mjs; Debian: libjpeg62-turbo-dev)', () => {
  expect(nativeJpeg()).not.toBeNull();
});

// Every test runs on both JPEG paths: libjpeg-turbo where the native decoder is built, and
// sharp alone, what a machine without it decodes with.
const PATHS: ReadonlyArray<readonly [Decoder, () => NativeJpeg | null]> = [
  ['libjpeg-turbo', () => nativeJpeg()],
  ['sharp', () => null],
];
describe.each(PATHS)('decodeToRgb with JPEGs on %s (as Pillow convert("RGB"))', (jpegPath, jpeg) => {
  const decode = (bytes: Uint8Array, maxPixels?: number) => decodeToRgb(bytes, maxPixels, false, jpeg());

  it.each(DECODABLE)("%s decodes to exactly Pillow's RGB pixels", async (name) => {
    const img = await decode(images.bytes(name));
    expect([img.width, img.height]).toEqual([400, 300]);
    const expected = images.pillowRgb(name);
    expect(img.rgb.byteLength).toBe(expected.byteLength);
    expect(Buffer.from(img.rgb).equals(expected)).toBe(true);
    expect(img.decoder).toBe(name.endsWith('.jpg') ? jpegPath : 'sharp');
  });

  // Every iPhone photo carries a Display P3 profile; Pillow (HF's processors) and the gateway's
  // `image` crate read the stored values and apply no profile, so neither may mmtc.
  it.each([
    ['JPEG', (s: Sharp) => s.jpeg({ quality: 90 })],
    ['PNG', (s: Sharp) => s.png()],
    ['WebP', (s: Sharp) => s.webp({ lossless: true })],
  ] as const)('a %s with an embedded Display P3 profile decodes to the stored values, as Pillow reads them', async (_label, encode) => {
    const bytes = await encode(sharp(images.bytes('rgb.png')).withIccProfile('p3')).toBuffer();
    expect((await sharp(bytes).metadata()).icc?.length).toBeGreaterThan(0);
    const pillow = pillowRgb(bytes);
    const img = await decode(bytes);
    expect(img.rgb.byteLength).toBe(pillow.byteLength);
    expect(Buffer.from(img.rgb).equals(pillow)).toBe(true);
  });

  it('a CMYK JPEG is decoded by sharp and converted to RGB', async () => {
    const img = await decode(images.bytes('cmyk.jpg'));
    expect([img.width, img.height, img.rgb.byteLength, img.decoder]).toEqual([400, 300, 400 * 300 * 3, 'sharp']);
  });

  it('refuses formats the API does not accept, naming the format', async () => {
    await expect(decode(images.bytes('image.bmp'))).rejects.toThrow(/unsupported image format|not a decodable image/);
  });

  // The format check is done on the bytes: an SVG never reaches librsvg (whose XML errors,
  // "glib: XML parse error …", reached the client), nor a PDF poppler.
  it.each([
    ['svg', '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect'],
    ['svg', '<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY x SYSTEM "file:///etc/hostname">]><svg xmlns="http://www.w3.org/2000/svg"><text>&x;</text></svg>'],
    ['svg', '\ufeff  <svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>'],
    ['pdf', '%PDF-1.4\n%\u00e2\u00e3\n1 0 obj'],
    ['tiff', 'II*\u0000\u0008\u0000\u0000\u0000'],
  ])('refuses %s by its bytes, before any decoder, saying nothing of the decoder', async (format, text) => {
    const err = await decode(Buffer.from(text, format === 'svg' ? 'utf8' : 'latin1')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageDecodeError);
    expect((err as Error).message).toBe(`unsupported image format '${format}': expected JPEG, PNG, WebP or GIF`);
  });

  it('refuses bytes that are not an image', async () => {
    const err = await decode(Buffer.from('definitely not an image')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageDecodeError);
    expect((err as Error).message).toMatch(/^not a decodable image/);
  });

  // The operator sees the same refusal whichever path a machine has: sharp judges whatever
  // libjpeg warns of.
  it.each([
    ['cut in half', (b: Buffer) => b.subarray(0, Math.floor(b.length / 2))],
    ['cut after its header', (b: Buffer) => b.subarray(0, 700)],
  ])('refuses a JPEG %s, in sharp’s words', async (_label, cut) => {
    const err = await decode(cut(images.bytes('photo.jpg'))).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageDecodeError);
    expect((err as Error).message).toBe('cannot decode jpeg image (VipsJpeg: premature end of JPEG image)');
  });

  it('leaves a JPEG with a corrupt scan (a libjpeg warning, not an error) to sharp, which decodes it', async () => {
    const b = images.bytes('photo.jpg');
    const img = await decode(Buffer.concat([b.subarray(0, 2000), Buffer.alloc(3000, 0xff), b.subarray(5000)]));
    expect([img.width, img.height, img.decoder]).toEqual([400, 300, 'sharp']);
  });

  it('refuses a JPEG of more pixels than the limit, before decoding it', async () => {
    const err = await decode(images.bytes('photo.jpg'), 400 * 300 - 1).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageDecodeError);
    expect((err as Error).message).toBe('cannot decode jpeg image (Input image exceeds pixel limit)');
    expect((await decode(images.bytes('photo.jpg'), 400 * 300)).width).toBe(400);
  });
});

describe('the native JPEG decoder', () => {
  it('decodes a band of rows into memory it is given, the same bytes as the whole image there', () => {
    const native = nativeJpeg()!;
    for (const name of ['photo.jpg', 'photo444.jpg', 'progressive.jpg', 'gray.jpg']) {
      const whole = native.decode(images.bytes(name), 1e8);
      if (typeof whole === 'string') throw new Error(whole);
      const into = new Uint8Array(whole.rgb.byteLength);
      // Bands that start and end inside a 16-row MCU, and an empty one.
      for (const [from, to] of [
        [0, 77],
        [77, 77],
        [77, 211],
        [211, 300],
      ] as const) {
        const band = native.decode(images.bytes(name), 1e8, into, from, to);
        expect(typeof band, name).toBe('object');
      }
      expect(Buffer.from(into).equals(Buffer.from(whole.rgb)), name).toBe(true);
    }
  });

  it('answers why it leaves a file to sharp, and throws only for wrong arguments', () => {
    const native = nativeJpeg()!;
    expect(native.decode(images.bytes('cmyk.jpg'), 1e8)).toBe('not gray, YCbCr or RGB');
    expect(native.decode(images.bytes('photo.jpg'), 10)).toBe('more pixels than allowed');
    expect(native.decode(images.bytes('photo.jpg').subarray(0, 5000), 1e8)).toMatch(/^libjpeg: Premature end of JPEG file/);
    expect(native.decode(Buffer.from('not a jpeg'), 1e8)).toMatch(/^libjpeg: Not a JPEG file/);
    expect(() => native.decode(images.bytes('photo.jpg'), 1e8, new Uint8Array(10))).toThrow(/into: smaller than width \* height \* 3 bytes/);
    expect(() => (native.decode as (...a: unknown[]) => unknown)('bytes', 1)).toThrow(/decode\(bytes: Uint8Array/);
    const loose = native.decode as (...a: unknown[]) => unknown;
    expect(() => loose(images.bytes('photo.jpg'), Number.NaN)).toThrow(/decode\(bytes: Uint8Array/);
    expect(() => loose(images.bytes('photo.jpg'), 1e8, new Uint8Array(400 * 300 * 3), 10)).toThrow(/firstRow, endRow: expected both/);
    expect(() => loose(images.bytes('photo.jpg'), 1e8, new Uint8Array(400 * 300 * 3), Number.NaN, 20)).toThrow(/firstRow, endRow: expected both/);
    expect(() => loose(images.bytes('photo.jpg'), 1e8, new Uint8Array(400 * 300 * 3), 30, 20)).toThrow(/firstRow, endRow: expected both/);
    expect(() => loose(images.bytes('photo.jpg'), 1e8, undefined, 0, 20)).toThrow(/firstRow, endRow: expected both/);
  });
});

describe('headerSize', () => {
  it('reads the size from the header alone, as the decoder sees it', async () => {
    for (const name of DECODABLE) expect(headerSize(images.bytes(name)), name).toEqual({ width: 400, height: 300 });
    // Odd sizes, so a swapped or misread field shows; every container variant the API accepts.
    const base = sharp({ create: { width: 123, height: 45, channels: 4, background: { r: 200, g: 10, b: 90, alpha: 0.5 } } });
    const variants: Record<string, Buffer> = {
      'baseline JPEG': await base.clone().jpeg().toBuffer(),
      'progressive JPEG': await base.clone().jpeg({ progressive: true }).toBuffer(),
      'JPEG with EXIF': await base.clone().jpeg().withMetadata({ orientation: 6 }).toBuffer(),
      PNG: await base.clone().png().toBuffer(),
      GIF: await base.clone().gif().toBuffer(),
      'lossy WebP with alpha (VP8X)': await base.clone().webp({ quality: 70 }).toBuffer(),
      'lossy WebP (VP8)': await base.clone().removeAlpha().webp({ quality: 70 }).toBuffer(),
      'lossless WebP (VP8L)': await base.clone().webp({ lossless: true }).toBuffer(),
    };
    for (const [label, bytes] of Object.entries(variants)) {
      const decoded = await decodeToRgb(bytes);
      expect(headerSize(bytes), label).toEqual({ width: 123, height: 45 });
      expect([decoded.width, decoded.height], label).toEqual([123, 45]);
    }
    expect(headerSize(variants['baseline JPEG']!.subarray(0, 40))).toBeUndefined(); // cut before the frame header
    expect(headerSize(Buffer.from('not an image at all'))).toBeUndefined();
  });
});
