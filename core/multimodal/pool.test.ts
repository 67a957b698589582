import sharp from 'sharp';
import { afterAll, describe, expect, it } from 'vitest';
import { toApiError } from '../router/errors.ts';
import { makeTestImages } from '../test/images.ts';
import { decodeToRgb, ImageDecodeError } from './decode.ts';
import { ImageMemoryError, PreprocessPool } from './pool.ts';
import { ImageSizeError, preprocessRgb, QWEN_VL_DEFAULTS } from './qwen-vl.ts';
import { InternalThreadError } from './thread-error.ts';

const images = makeTestImages();
const pool = new PreprocessPool(2);
afterAll(async () => {
  await pool.close();
  images.remove();
});

describe('PreprocessPool', () => {
  it('gives, off the main thread, the same encoder input as preprocessing in-thread', async () => {
    const cfg = QWEN_VL_DEFAULTS.qwen2_vl;
    const names = ['photo.jpg', 'rgba.png', 'gray.png', 'anim.gif'];
    const results = await Promise.all(names.map((n) => pool.run({ bytes: images.bytes(n), config: cfg, bf16: true })));
    for (const [i, r] of results.entries()) {
      const img = await decodeToRgb(images.bytes(names[i]!));
      const local = preprocessRgb(img.rgb, img.width, img.height, cfg, { bf16: true });
      const view = (a: Float32Array | Uint16Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
      expect(view(r.pixelValues!).equals(view(local.pixelValues!))).toBe(true);
      expect(view(r.bf16!).equals(view(local.bf16!))).toBe(true);
      expect(r.pixelValues!.buffer).toBeInstanceOf(SharedArrayBuffer); // pooled output memory
      r.release();
      expect(r).toMatchObject({ width: 400, height: 300, gridT: 1, gridH: 28, gridW: 38, tokens: 266 });
      expect(r.timings.decode).toBeGreaterThan(0);
    }
  });

  it('splits a lone image across two threads, with the same bytes as one thread', async () => {
    for (const [family, name] of [
      ['qwen2_vl', 'photo.jpg'],
      ['qwen3_vl', 'rgba.png'],
      ['qwen2_vl', 'gray.png'],
    ] as const) {
      const cfg = QWEN_VL_DEFAULTS[family];
      const r = await pool.run({ bytes: images.bytes(name), config: cfg, bf16: true });
      expect(r.threads, `${family} ${name}`).toBe(2);
      const img = await decodeToRgb(images.bytes(name));
      const local = preprocessRgb(img.rgb, img.width, img.height, cfg, { bf16: true });
      const view = (a: Float32Array | Uint16Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
      expect(view(r.pixelValues!).equals(view(local.pixelValues!)), `${family} ${name} float32`).toBe(true);
      expect(view(r.bf16!).equals(view(local.bf16!)), `${family} ${name} bfloat16`).toBe(true);
      r.release();
    }
  });

  it('keeps an image of one merge-block row on one thread, and gives whole images to each thread under load', async () => {
    const sharp = (await import('sharp')).default;
    const strip = await sharp({ create: { width: 1200, height: 20, channels: 3, background: '#8a4' } })
      .png()
      .toBuffer();
    const cfg = { ...QWEN_VL_DEFAULTS.qwen2_vl, min_pixels: 28 * 28 };
    const one = await pool.run({ bytes: strip, config: cfg, bf16: false });
    expect([[one.gridT, one.gridH, one.gridW], one.threads]).toEqual([[1, 2, 86], 1]);
    one.release();
    // No thread was kept waiting to help with it: the next lone image gets two.
    const next = await pool.run({ bytes: images.bytes('photo.jpg'), config: QWEN_VL_DEFAULTS.qwen2_vl, bf16: false });
    expect(next.threads).toBe(2);
    next.release();
    const busy = await Promise.all([1, 2, 3, 4].map(() => pool.run({ bytes: images.bytes('photo.jpg'), config: QWEN_VL_DEFAULTS.qwen2_vl, bf16: false })));
    // The first image to start had a free thread to help it; the two after it found others
    // queued behind them and ran whole, side by side.
    const threads = busy.map((r) => r.threads).sort();
    expect(threads.slice(0, 2)).toEqual([1, 1]);
    expect(threads[3]).toBe(2);
    for (const r of busy) r.release();
  });

  it('reuses released output memory for the next image', async () => {
    const cfg = QWEN_VL_DEFAULTS.qwen2_vl;
    const view = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
    const first = await pool.run({ bytes: images.bytes('photo.jpg'), config: cfg, bf16: false });
    const firstCopy = Buffer.from(view(first.pixelValues!));
    first.release();
    const second = await pool.run({ bytes: images.bytes('rgb.png'), config: cfg, bf16: false });
    // The released memory now holds the second image: first's (stale) view sees its values.
    expect(view(first.pixelValues!).equals(view(second.pixelValues!))).toBe(true);
    expect(view(second.pixelValues!).equals(firstCopy)).toBe(false);
    const third = await pool.run({ bytes: images.bytes('photo.jpg'), config: cfg, bf16: false });
    expect(view(third.pixelValues!).equals(firstCopy)).toBe(true); // live results never share memory
    expect(view(second.pixelValues!).equals(firstCopy)).toBe(false);
    second.release();
    third.release();
  });

  it('an image too extreme for smart_resize is refused before any thread works on it', async () => {
    const wide = await import('sharp').then((m) =>
      m
        .default({ create: { width: 2010, height: 10, channels: 3, background: '#fff' } })
        .png()
        .toBuffer(),
    );
    await expect(pool.run({ bytes: wide, config: QWEN_VL_DEFAULTS.qwen2_vl, bf16: false })).rejects.toThrow(
      'absolute aspect ratio must be at most 200, got 201.0',
    );
  });

  it('produces only bfloat16 when float32 is not asked for', async () => {
    const cfg = QWEN_VL_DEFAULTS.qwen2_vl;
    const both = await pool.run({ bytes: images.bytes('photo.jpg'), config: cfg, bf16: true });
    const only = await pool.run({ bytes: images.bytes('photo.jpg'), config: cfg, bf16: true, float32: false });
    expect(only.pixelValues).toBeUndefined();
    expect(
      Buffer.from(only.bf16!.buffer, only.bf16!.byteOffset, only.bf16!.byteLength).equals(
        Buffer.from(both.bf16!.buffer, both.bf16!.byteOffset, both.bf16!.byteLength),
      ),
    ).toBe(true);
    both.release();
    only.release();
  });

  it('gives the header geometry before the pixels are done, then the result', async () => {
    const order: string[] = [];
    const job = pool.start({ bytes: images.bytes('photo.jpg'), config: QWEN_VL_DEFAULTS.qwen2_vl, bf16: false });
    const header = job.header.then((h) => (order.push('header'), h));
    const result = job.result.then((r) => (order.push('result'), r));
    const [h, r] = await Promise.all([header, result]);
    expect(order).toEqual(['header', 'result']);
    expect(h).toMatchObject({ tokens: r.tokens, gridH: 28, gridW: 38, patches: r.patches });
    r.release();
    const bad = pool.start({ bytes: Buffer.from('nope'), config: QWEN_VL_DEFAULTS.qwen2_vl, bf16: false });
    expect(await bad.header).toBeUndefined(); // no header: the thread's decode error is what the caller sees
    await expect(bad.result).rejects.toBeInstanceOf(ImageDecodeError);
  });

  it('rebuilds decode errors as their own type', async () => {
    const err = await pool.run({ bytes: Buffer.from('nope'), config: QWEN_VL_DEFAULTS.qwen2_vl, bf16: false }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageDecodeError);
  });

  it('lets its memory go (and the router collect) after a quiet spell, not while requests it does not compute keep coming', async () => {
    let collections = 0;
    // The trim waits 1.5 s after the last request; a hit every 100 ms for 3 s outlasts it twice,
    // and only a gap of over 1.4 s between two of them (a stalled machine) would let it run.
    const quiet = new PreprocessPool(1, { idleTrimMs: 1500, onIdle: () => (collections += 1) });
    try {
      const r = await quiet.run({ bytes: images.bytes('photo.jpg'), config: QWEN_VL_DEFAULTS.qwen2_vl, bf16: true });
      r.release();
      // Pixel-cache hits every 100 ms for 3 s: nothing is let go (without stillBusy() the trim runs at 1.5 s).
      for (let i = 0; i < 30; i++) {
        quiet.stillBusy();
        await new Promise((done) => setTimeout(done, 100));
      }
      expect(collections).toBe(0);
      expect(quiet.memory().idleTrims).toBe(0);
      // Then quiet: released within the trim and the grace (bounded wait).
      for (let i = 0; i < 120 && collections === 0; i++) await new Promise((done) => setTimeout(done, 50));
      expect(collections).toBe(1);
      expect(quiet.memory().idleTrims).toBe(1);
    } finally {
      await quiet.close();
    }
  });

  it('refuses work after close', async () => {
    const closed = new PreprocessPool(1);
    await closed.close();
    await expect(closed.run({ bytes: Buffer.alloc(1), config: QWEN_VL_DEFAULTS.qwen2_vl, bf16: false })).rejects.toThrow('preprocessing pool is closed');
  });
});

/** What an image's preprocessing rejected with (the test fails if it did not). */
async function failure(result: Promise<unknown>): Promise<Error> {
  const err = await result.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof Error)) throw new Error(`expected a rejection with an Error, got ${String(err)}`);
  return err;
}

/** A PNG of one colour. */
const plainPng = (width: number, height: number) =>
  sharp({ create: { width, height, channels: 3, background: '#123456' } })
    .png()
    .toBuffer();

describe('errors from the pool threads', () => {
  const cfg = QWEN_VL_DEFAULTS.qwen2_vl;

  it('bytes that do not decode: an ImageDecodeError, a 400 naming the image', async () => {
    const err = await failure(pool.run({ bytes: Buffer.from('nope'), config: cfg, bf16: false }));
    expect(err).toBeInstanceOf(ImageDecodeError);
    expect(err.message).toBe('not a decodable image (expected JPEG, PNG, WebP or GIF)');
    const api = toApiError(err, { image: 1, imageParams: ['messages[0].content[0].image_url.url', 'messages[0].content[1].image_url.url'] });
    expect([api.status, api.message, api.param]).toEqual([
      400,
      'image 1: not a decodable image (expected JPEG, PNG, WebP or GIF)',
      'messages[0].content[1].image_url.url',
    ]);
  });

  it('an image the decoder refuses for its pixels (its header passed): an ImageDecodeError', async () => {
    const err = await failure(pool.run({ bytes: images.bytes('photo.jpg'), config: cfg, bf16: false, maxPixels: 100_000 }));
    expect(err).toBeInstanceOf(ImageDecodeError);
    expect(err.message).toBe('cannot decode jpeg image (Input image exceeds pixel limit)');
    expect(toApiError(err, { image: 0 }).status).toBe(400);
  });

  it('a decoded size smart_resize refuses, found in the thread: an ImageSizeError', async () => {
    // No header known (as for an image whose header does not parse): only the thread sees its size.
    const wide = await plainPng(2010, 10);
    const err = await failure(pool.start({ bytes: wide, config: cfg, bf16: false }, Promise.resolve(undefined)).result);
    expect(err).toBeInstanceOf(ImageSizeError);
    expect(err.message).toBe('image of 2010x10 pixels: absolute aspect ratio must be at most 200, got 201.0');
    expect(toApiError(err, { image: 0 }).message).toBe('image 0: image of 2010x10 pixels: absolute aspect ratio must be at most 200, got 201.0');
  });

  it("a fault of the thread's own keeps its name, message and stack: a 500 with its message", async () => {
    const err = await failure(pool.run({ bytes: images.bytes('photo.jpg'), config: cfg, bf16: false, float32: false }));
    expect(err).toBeInstanceOf(InternalThreadError);
    expect([err.name, err.message]).toEqual(['RangeError', 'preprocessRgb: asked for neither float32 nor bfloat16 output']);
    expect(err.stack).toMatch(/qwen-vl\.ts/); // where the thread threw it
    const api = toApiError(err);
    expect([api.status, api.message]).toEqual([500, 'internal error: preprocessRgb: asked for neither float32 nor bfloat16 output']);
  });
});

describe('the preprocessing memory budget, through the pool', () => {
  const cfg = QWEN_VL_DEFAULTS.qwen2_vl;

  it('refuses an image that could never fit, by name, before any thread or memory is used', async () => {
    const small = new PreprocessPool(1, { memoryBytes: 64 * 1024 * 1024 });
    try {
      const err = await failure(small.run({ bytes: await plainPng(4000, 4000), config: cfg, bf16: false }));
      expect(err).toBeInstanceOf(ImageMemoryError);
      // Its arena memory (encoder input and the resize's working space: 90.6 MiB, its size
      // class) and the decoder's buffers (two 4000x4000 RGB images: 91.6 MiB), in the
      // operator's words.
      expect(err.message).toBe('preprocessing this 4000x4000 image needs 182 MiB, above the preprocessing memory budget of 64.0 MiB (preprocess_memory_bytes)');
      expect(toApiError(err, { image: 0 }).status).toBe(413);
      expect(small.memory()).toMatchObject({ inUse: 0, arena: 0, resident: 0 });
    } finally {
      await small.close();
    }
  });

  it('comes back to its idle gauge after images that fail in the threads, and keeps using its memory', async () => {
    const gauged = new PreprocessPool(2);
    try {
      const ok = await gauged.run({ bytes: images.bytes('photo.jpg'), config: cfg, bf16: true });
      ok.release();
      const idle = gauged.memory();
      expect(idle).toMatchObject({ inUse: 0, pooled: idle.arena, resident: idle.arena });
      expect(idle.arena).toBeGreaterThan(0);
      // One after another, so no two need memory at once (the arena would grow, and keep it).
      const failures = [
        await failure(gauged.run({ bytes: Buffer.from('nope'), config: cfg, bf16: false })),
        await failure(gauged.run({ bytes: images.bytes('photo.jpg'), config: cfg, bf16: false, maxPixels: 100_000 })),
        await failure(gauged.run({ bytes: images.bytes('photo.jpg'), config: cfg, bf16: false, float32: false })),
        await failure(gauged.start({ bytes: await plainPng(2010, 10), config: cfg, bf16: false }, Promise.resolve(undefined)).result),
      ];
      expect(failures.map((e) => e.name)).toEqual(['ImageDecodeError', 'ImageDecodeError', 'RangeError', 'ImageSizeError']);
      // What mmtc_preprocess_memory_bytes shows (resident) is back where it was, nothing is counted in use.
      expect(gauged.memory()).toEqual(idle);
      const again = await gauged.run({ bytes: images.bytes('photo.jpg'), config: cfg, bf16: true });
      expect(again.pixelValues!.buffer).toBeInstanceOf(SharedArrayBuffer);
      expect(gauged.memory().pooled).toBe(0);
      again.release();
      expect(gauged.memory()).toEqual(idle);
    } finally {
      await gauged.close();
    }
  });

  it('keeps to one arena memory when two images would not fit the budget side by side', async () => {
    const names = ['photo.jpg', 'rgb.png', 'gray.png'];
    const probe = new PreprocessPool(1);
    const one = await probe.run({ bytes: images.bytes('photo.jpg'), config: cfg, bf16: false });
    one.release();
    const memoryOfOne = probe.memory().arena;
    await probe.close();
    // Room for one image's memory and its decoder's buffers (400x300: 720,000 bytes), not two.
    const budget = memoryOfOne + 1024 * 1024;
    const tight = new PreprocessPool(2, { memoryBytes: budget });
    try {
      const results = await Promise.all(
        names.map((n) =>
          tight.run({ bytes: images.bytes(n), config: cfg, bf16: false }).then((r) => {
            const copy = new Float32Array(r.pixelValues!);
            r.release();
            return copy;
          }),
        ),
      );
      for (const [i, values] of results.entries()) {
        const img = await decodeToRgb(images.bytes(names[i]!));
        const local = preprocessRgb(img.rgb, img.width, img.height, cfg);
        const expected = local.pixelValues!;
        expect(Buffer.from(values.buffer).equals(Buffer.from(expected.buffer, expected.byteOffset, expected.byteLength)), names[i]).toBe(true);
      }
      expect(tight.memory()).toMatchObject({ inUse: 0, arena: memoryOfOne, resident: memoryOfOne });
    } finally {
      await tight.close();
    }
  });
});
