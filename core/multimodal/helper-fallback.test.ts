// A lone image's helper thread that fails (its thread went away, its band threw): the lead
// makes its band up, and the encoder input is the bytes one thread writes (which the families'
// own tests hold to their references). The helper here is what the pool's thread entry hands a
// task; it refuses every band, as a helper whose thread died does.
import { afterAll, describe, expect, it } from 'vitest';
import { addNoiseImages, makeTestImages } from '../test/images.ts';
import { CLIP_336_DEFAULTS, clipMemoryBytes, preprocessClipRgb, preprocessClipShared } from './clip-image.ts';
import { decodeToRgb } from './decode.ts';
import { INKLING_DEFAULTS, inklingGeometry, inklingMemoryBytes, inklingPatchElements, preprocessInklingInBands, preprocessInklingRgb } from './inkling.ts';
import { LLAMA4_DEFAULTS, llama4CropElements, llama4Geometry, llama4MemoryBytes, preprocessLlama4Rgb, preprocessLlama4Shared } from './llama4.ts';
import { anyresCropElements, anyresGeometry, anyresMemoryBytes, LLAVA_NEXT_DEFAULTS, preprocessAnyresRgb, preprocessAnyresShared } from './llava-next.ts';
import { PHI3_VISION_DEFAULTS, phi3VisionElements, phi3VisionMemoryBytes, preprocessPhi3VisionRgb, preprocessPhi3VisionShared } from './phi3v.ts';
import { encoderMemoryIn, type BandHelper } from './qwen-vl.ts';
import { newSharedMemory } from './resize-simd.ts';

const images = makeTestImages();
afterAll(() => images.remove());
// A portrait: Phi-3-vision transposes it (its resize's rows are the HD image's columns).
addNoiseImages(images, 43, [['tall.png', 900, 250]]);

const kinds = { float32: true, bf16: true };
const bytesOf = (a: Float32Array | Uint16Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

/** A helper whose thread is gone: every band it is given fails. The jobs it was given, by kind. */
function failingHelper(): { helper: BandHelper; kinds: string[] } {
  const given: string[] = [];
  const helper: BandHelper = (job) => {
    given.push('kind' in job ? job.kind : 'qwen');
    return Promise.reject(new Error('helper thread went away'));
  };
  return { helper, kinds: given };
}

/** A pool-like memory laid out for `elements` of this image's encoder input, holding `bytes`. */
const pooled = (bytes: number, elements: number) => encoderMemoryIn(newSharedMemory(bytes), elements, kinds);

describe("a lone image's helper that fails: the lead makes its band up, the one-thread bytes", () => {
  it.each(['hd.jpg', 'tall.png'])('the crop families, %s', async (name) => {
    const img = await decodeToRgb(images.bytes(name));
    const { rgb, width: w, height: h } = img;
    const options = { bf16: true, float32: true };
    const cases = [
      {
        family: 'CLIP (LLaVA-1.5)',
        one: preprocessClipRgb(rgb, w, h, CLIP_336_DEFAULTS, options),
        shared: (helper: BandHelper) =>
          preprocessClipShared(
            rgb,
            w,
            h,
            CLIP_336_DEFAULTS,
            { ...options, memory: pooled(clipMemoryBytes(w, h, CLIP_336_DEFAULTS, kinds), 3 * 336 * 336) },
            helper,
          ),
      },
      {
        family: 'LLaVA-NeXT',
        one: preprocessAnyresRgb(rgb, w, h, LLAVA_NEXT_DEFAULTS, options),
        shared: (helper: BandHelper) =>
          preprocessAnyresShared(
            rgb,
            w,
            h,
            LLAVA_NEXT_DEFAULTS,
            {
              ...options,
              memory: pooled(
                anyresMemoryBytes(w, h, LLAVA_NEXT_DEFAULTS, kinds),
                anyresGeometry(h, w, LLAVA_NEXT_DEFAULTS).crops * anyresCropElements(LLAVA_NEXT_DEFAULTS),
              ),
            },
            helper,
          ),
      },
      {
        family: 'Llama 4',
        one: preprocessLlama4Rgb(rgb, w, h, LLAMA4_DEFAULTS, options),
        shared: (helper: BandHelper) =>
          preprocessLlama4Shared(
            rgb,
            w,
            h,
            LLAMA4_DEFAULTS,
            {
              ...options,
              memory: pooled(
                llama4MemoryBytes(w, h, LLAMA4_DEFAULTS, kinds),
                llama4Geometry(h, w, LLAMA4_DEFAULTS).crops * llama4CropElements(LLAMA4_DEFAULTS),
              ),
            },
            helper,
          ),
      },
      {
        family: 'Phi-3-vision',
        one: preprocessPhi3VisionRgb(rgb, w, h, PHI3_VISION_DEFAULTS, options),
        shared: (helper: BandHelper) =>
          preprocessPhi3VisionShared(
            rgb,
            w,
            h,
            PHI3_VISION_DEFAULTS,
            { ...options, memory: pooled(phi3VisionMemoryBytes(w, h, PHI3_VISION_DEFAULTS, kinds), phi3VisionElements(PHI3_VISION_DEFAULTS)) },
            helper,
          ),
      },
    ];
    for (const c of cases) {
      const { helper, kinds: given } = failingHelper();
      const shared = await c.shared(helper);
      // The band was offered (a crop job), refused, and written here: one thread, in the pool's memory.
      expect([c.family, given, shared.threads, shared.inMemory]).toEqual([c.family, ['crops'], 1, true]);
      expect([c.family, bytesOf(shared.pixelValues!).equals(bytesOf(c.one.pixelValues!))]).toEqual([c.family, true]);
      expect([c.family, bytesOf(shared.bf16!).equals(bytesOf(c.one.bf16!))]).toEqual([c.family, true]);
    }
  });

  it('Inkling', async () => {
    const img = await decodeToRgb(images.bytes('hd.jpg'));
    const { rgb, width: w, height: h } = img;
    const one = preprocessInklingRgb(rgb, w, h, INKLING_DEFAULTS, { bf16: true });
    const { helper, kinds: given } = failingHelper();
    const memory = pooled(
      inklingMemoryBytes(w, h, INKLING_DEFAULTS, kinds),
      inklingGeometry(h, w, INKLING_DEFAULTS).patches * inklingPatchElements(INKLING_DEFAULTS),
    );
    const shared = await preprocessInklingInBands(rgb, w, h, INKLING_DEFAULTS, memory, { bf16: true }, helper);
    expect([given, shared?.threads]).toEqual([['inkling'], 1]);
    expect(bytesOf(shared!.pixelValues!).equals(bytesOf(one.pixelValues!))).toBe(true);
    expect(bytesOf(shared!.bf16!).equals(bytesOf(one.bf16!))).toBe(true);
  });
});
