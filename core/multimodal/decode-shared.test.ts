// A lone JPEG decoded by two threads (decode-shared.ts): the same pixels as one thread, in
// every JPEG layout, whether the helper decodes its rows, fails, or is another pool thread.
import { afterAll, describe, expect, it } from 'vitest';
import { makeTestImages } from '../test/images.ts';
import { runPython } from '../test/python.ts';
import { decodeToRgb } from './decode.ts';
import { decodeJpegShared, sharedDecodeSplit, SHARED_DECODE_MIN_PIXELS } from './decode-shared.ts';
import { nativeJpeg } from './native-jpeg.ts';
import { PreprocessPool } from './pool.ts';
import { runPostedBand } from './posted-band.ts';
import type { BandHelper } from './qwen-vl.ts';
import { CLIP_336_DEFAULTS } from './clip-image.ts';
import { LLAMA4_DEFAULTS } from './llama4.ts';
import { QWEN_VL_DEFAULTS } from './qwen-vl.ts';

const images = makeTestImages();
// Sizes that are not whole MCUs, and every sequential layout libjpeg decodes differently.
runPython(
  `
import sys, numpy as np
from PIL import Image
out = sys.argv[1]
rng = np.random.default_rng(11)
def card(w, h):
    y, x = np.mgrid[0:h, 0:w]
    r = (128 + 100 * np.sin(x / 37.0) * np.cos(y / 23.0)).astype(np.uint8)
    g = ((x * 255) // w).astype(np.uint8)
    b = (((x // 64 + y // 64) % 2) * 200 + rng.integers(0, 40, (h, w))).astype(np.uint8)
    return Image.fromarray(np.dstack([r, g, b]))
card(1999, 1003).save(out + '/odd420.jpg', quality=90)
card(1280, 1024).save(out + '/big444.jpg', quality=90, subsampling=0)
card(1600, 1000).save(out + '/big422.jpg', quality=90, subsampling=1)
card(1500, 900).save(out + '/bigprogressive.jpg', quality=90, progressive=True)
card(1500, 900).convert('L').save(out + '/biggray.jpg', quality=90)
for name in ['odd420.jpg', 'big444.jpg', 'big422.jpg', 'bigprogressive.jpg', 'biggray.jpg']:
    with open(out + '/' + name + '.rgb', 'wb') as fh:
        fh.write(Image.open(out + '/' + name).convert('RGB').tobytes())
`,
  [images.dir],
);
afterAll(() => images.remove());
const SEQUENTIAL = ['odd420.jpg', 'big444.jpg', 'big422.jpg', 'biggray.jpg'] as const;
const LARGE = ['hd.jpg', ...SEQUENTIAL, 'bigprogressive.jpg'] as const;
const rgbOf = (img: Awaited<ReturnType<typeof decodeJpegShared>>) => {
  if (img === null || img === 'declined') throw new Error(`not decoded by two threads: ${img}`);
  return img;
};

/** A helper on this thread: runs the posted job as the pool's helper thread would. */
const inThread = ((job) => Promise.resolve(runPostedBand(job))) as BandHelper;

describe('decodeJpegShared', () => {
  it.each(SEQUENTIAL)("%s: the two threads' rows are exactly Pillow's pixels", async (name) => {
    const img = rgbOf(await decodeJpegShared(images.bytes(name), 1e8, inThread));
    expect([img.decoder, img.decodeThreads]).toEqual(['libjpeg-turbo', 2]);
    expect(Buffer.from(img.rgb).equals(images.pillowRgb(name))).toBe(true);
  });

  it('one image after another reuses the thread’s buffer, each decoded whole', async () => {
    const first = rgbOf(await decodeJpegShared(images.bytes('big444.jpg'), 1e8, inThread));
    expect(Buffer.from(first.rgb).equals(images.pillowRgb('big444.jpg'))).toBe(true);
    const second = rgbOf(await decodeJpegShared(images.bytes('odd420.jpg'), 1e8, inThread));
    expect(second.rgb.buffer).toBe(first.rgb.buffer);
    expect(Buffer.from(second.rgb).equals(images.pillowRgb('odd420.jpg'))).toBe(true);
  });

  it('a helper that fails leaves the image to one thread (null), which then decodes it whole', async () => {
    let asked = 0;
    const failing = ((job) => {
      asked += 1;
      expect(job).toMatchObject({ kind: 'decode', firstRow: sharedDecodeSplit(1003), endRow: 1003 });
      return Promise.reject(new Error('helper thread went away'));
    }) as BandHelper;
    expect(await decodeJpegShared(images.bytes('odd420.jpg'), 1e8, failing)).toBeNull();
    expect(asked).toBe(1);
    const alone = await decodeToRgb(images.bytes('odd420.jpg'));
    expect([alone.decoder, alone.decodeThreads ?? 1]).toEqual(['libjpeg-turbo', 1]);
    expect(Buffer.from(alone.rgb).equals(images.pillowRgb('odd420.jpg'))).toBe(true);
  });

  it('leaves to one thread what is not for two, and a file libjpeg warns of to sharp', async () => {
    const refused = ((): Promise<undefined> => {
      throw new Error('no job should be posted');
    }) as unknown as BandHelper;
    const jpeg = images.bytes('odd420.jpg');
    expect(await decodeJpegShared(images.bytes('photo.jpg'), 1e8, refused)).toBeNull(); // 400×300: below SHARED_DECODE_MIN_PIXELS
    expect(400 * 300).toBeLessThan(SHARED_DECODE_MIN_PIXELS);
    expect(await decodeJpegShared(images.bytes('rgb.png'), 1e8, refused)).toBeNull();
    expect(await decodeJpegShared(jpeg, 1999 * 1003 - 1, refused)).toBeNull();
    expect(await decodeJpegShared(jpeg, 1e8, refused, null)).toBeNull(); // no native decoder
    // Progressive: both threads would read the whole file before writing a row.
    expect(await decodeJpegShared(images.bytes('bigprogressive.jpg'), 1e8, refused)).toBeNull();
    // Cut short: the helper's rows are missing, libjpeg warns, and the file is sharp's, which
    // refuses it in its words, as for one thread.
    const cut = jpeg.subarray(0, Math.floor(jpeg.length * 0.8));
    expect(await decodeJpegShared(cut, 1e8, inThread)).toBe('declined');
    await expect(decodeToRgb(cut, undefined, false, null)).rejects.toThrow('cannot decode jpeg image (VipsJpeg: premature end of JPEG image)');
  });
});

describe('a lone JPEG through the pool', () => {
  it('two threads (the decode shared, then the bands) give the bytes one thread gives, image after image', async () => {
    expect(nativeJpeg()).not.toBeNull();
    const two = new PreprocessPool(2);
    const one = new PreprocessPool(1);
    try {
      for (const config of [QWEN_VL_DEFAULTS.qwen2_vl, CLIP_336_DEFAULTS, LLAMA4_DEFAULTS]) {
        for (const name of ['hd.jpg', 'odd420.jpg', 'bigprogressive.jpg']) {
          const alone = await one.run({ bytes: images.bytes(name), config, bf16: true, float32: false });
          const shared = await two.run({ bytes: images.bytes(name), config, bf16: true, float32: false });
          expect([shared.threads, shared.decoder, shared.decodeThreads, alone.threads, alone.decodeThreads], name).toEqual([
            2,
            'libjpeg-turbo',
            name === 'bigprogressive.jpg' ? 1 : 2,
            1,
            1,
          ]);
          expect(
            Buffer.from(shared.bf16!.buffer, shared.bf16!.byteOffset, shared.bf16!.byteLength).equals(
              Buffer.from(alone.bf16!.buffer, alone.bf16!.byteOffset, alone.bf16!.byteLength),
            ),
            name,
          ).toBe(true);
          alone.release();
          shared.release();
        }
      }
      // Concurrent images (no helper to spare) and lone ones in turn: every helper is released.
      const burst = await Promise.all(LARGE.map((name) => two.run({ bytes: images.bytes(name), config: CLIP_336_DEFAULTS, bf16: true, float32: false })));
      for (const r of burst) r.release();
      // A lone JPEG cut short: the helper's rows fail, sharp refuses the file; the helper is
      // released, and the next lone image has it again.
      const jpeg = images.bytes('odd420.jpg');
      await expect(two.run({ bytes: jpeg.subarray(0, Math.floor(jpeg.length * 0.8)), config: CLIP_336_DEFAULTS, bf16: true, float32: false })).rejects.toThrow(
        'cannot decode jpeg image (VipsJpeg: premature end of JPEG image)',
      );
      const after = await two.run({ bytes: images.bytes('odd420.jpg'), config: CLIP_336_DEFAULTS, bf16: true, float32: false });
      expect([after.threads, after.decodeThreads]).toEqual([2, 2]);
      after.release();
    } finally {
      await Promise.all([two.close(), one.close()]);
    }
  }, 60_000);
});
