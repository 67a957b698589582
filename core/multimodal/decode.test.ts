import { afterAll, describe, expect, it } from 'vitest';
import { DECODABLE, makeTestImages } from '../test/images.ts';
import sharp from 'sharp';
import { decodeToRgb, headerSize, ImageDecodeError } from './decode.ts';
import { runPython } from '../test/python.ts';

const images = makeTestImages();
afterAll(() => images.remove());

describe('decodeToRgb (as Pillow convert("RGB"))', () => {
  it.each(DECODABLE)("%s decodes to exactly Pillow's RGB pixels", async (name) => {
    const img = await decodeToRgb(images.bytes(name));
    expect([img.width, img.height]).toEqual([400, 300]);
    const expected = images.pillowRgb(name);
    expect(img.rgb.byteLength).toBe(expected.byteLength);
    expect(Buffer.from(img.rgb).equals(expected)).toBe(true);
  });

  // Every iPhone photo carries a Display P3 profile; Pillow (HF's processors) and the gateway's
  // `image` crate read the stored values and apply no profile, so neither may mmtc.
  it.each([
    ['JPEG', (s: sharp.Sharp) => s.jpeg({ quality: 90 })],
    ['PNG', (s: sharp.Sharp) => s.png()],
    ['WebP', (s: sharp.Sharp) => s.webp({ lossless: true })],
  ] as const)('a %s with an embedded Display P3 profile decodes to the stored values, as Pillow reads them', async (_label, encode) => {
    const bytes = await encode(sharp(images.bytes('rgb.png')).withIccProfile('p3')).toBuffer();
    expect((await sharp(bytes).metadata()).icc?.length).toBeGreaterThan(0);
    const pillow = runPython(
      `
import sys
from PIL import Image
sys.stdout.buffer.write(Image.open(sys.stdin.buffer).convert('RGB').tobytes())
`,
      [],
      bytes,
    );
    const img = await decodeToRgb(bytes);
    expect(img.rgb.byteLength).toBe(pillow.byteLength);
    expect(Buffer.from(img.rgb).equals(pillow)).toBe(true);
  });

  it('refuses formats the API does not accept, naming the format', async () => {
    await expect(decodeToRgb(images.bytes('image.bmp'))).rejects.toThrow(/unsupported image format|not a decodable image/);
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
    const err = await decodeToRgb(Buffer.from(text, format === 'svg' ? 'utf8' : 'latin1')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageDecodeError);
    expect((err as Error).message).toBe(`unsupported image format '${format}': expected JPEG, PNG, WebP or GIF`);
  });

  it('refuses bytes that are not an image', async () => {
    const err = await decodeToRgb(Buffer.from('definitely not an image')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageDecodeError);
    expect((err as Error).message).toMatch(/^not a decodable image/);
  });

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

  it('refuses a truncated JPEG', async () => {
    const jpeg = images.bytes('photo.jpg');
    const err = await decodeToRgb(jpeg.subarray(0, Math.floor(jpeg.length / 2))).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageDecodeError);
  });
});
