import { afterAll, describe, expect, it } from 'vitest';
import { DECODABLE, makeTestImages } from '../test/images.ts';
import { decodeToRgb, ImageDecodeError } from './decode.ts';

const images = makeTestImages();
afterAll(() => images.remove());

describe('decodeToRgb (as Pillow convert("RGB"))', () => {
  it.each(DECODABLE)('%s decodes to exactly Pillow\'s RGB pixels', async (name) => {
    const img = await decodeToRgb(images.bytes(name));
    expect([img.width, img.height]).toEqual([400, 300]);
    const expected = images.pillowRgb(name);
    expect(img.rgb.byteLength).toBe(expected.byteLength);
    expect(Buffer.from(img.rgb).equals(expected)).toBe(true);
  });

  it('refuses formats the API does not accept, naming the format', async () => {
    await expect(decodeToRgb(images.bytes('image.bmp'))).rejects.toThrow(/unsupported image format|not a decodable image/);
  });

  it('refuses bytes that are not an image', async () => {
    const err = await decodeToRgb(Buffer.from('definitely not an image')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageDecodeError);
    expect((err as Error).message).toMatch(/^not a decodable image/);
  });

  it('refuses a truncated JPEG', async () => {
    const jpeg = images.bytes('photo.jpg');
    const err = await decodeToRgb(jpeg.subarray(0, Math.floor(jpeg.length / 2))).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageDecodeError);
  });
});
