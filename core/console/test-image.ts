// Synthetic images for the console's own traffic (test requests, calibration, the probe of
// the doctor): deterministic noise, so PNG and WebP cannot shrink them to nothing and the
// same size always gives the same bytes, encoded by the same decoder library the router
// decodes with.
import sharp from 'sharp';
import type { TEST_IMAGE_FORMATS } from './contract.ts';

export type TestImageFormat = (typeof TEST_IMAGE_FORMATS)[number];

const MIME: Record<TestImageFormat, string> = { png: 'image/png', jpeg: 'image/jpeg', webp: 'image/webp' };

export async function syntheticImage(width: number, height: number, format: TestImageFormat): Promise<Buffer> {
  const pixels = Buffer.allocUnsafe(width * height * 3);
  let x = 0x9e3779b9 ^ (width * 73856093) ^ (height * 19349663);
  for (let i = 0; i < pixels.length; i++) {
    // xorshift32: cheap, repeatable noise
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    pixels[i] = x & 0xff;
  }
  const image = sharp(pixels, { raw: { width, height, channels: 3 } });
  return format === 'png'
    ? image.png({ compressionLevel: 1 }).toBuffer()
    : format === 'jpeg'
      ? image.jpeg({ quality: 85 }).toBuffer()
      : image.webp({ quality: 80 }).toBuffer();
}

/**
 * A chat request carrying one synthetic image, as an OpenAI client would send it. Probes and
 * calibration need only a short answer; a test request the operator reads asks for enough
 * tokens that the reference worker's account of what it received is not cut short.
 */
export async function syntheticChat(width: number, height: number, format: TestImageFormat, maxTokens = 64): Promise<Record<string, unknown>> {
  const bytes = await syntheticImage(width, height, format);
  return {
    max_tokens: maxTokens,
    messages: [
      {
        role: 'user',
        content: [
          { type: 'image_url', image_url: { url: `data:${MIME[format]};base64,${bytes.toString('base64')}` } },
          { type: 'text', text: 'mmtc console test request' },
        ],
      },
    ],
  };
}
