// Qwen3.5 and Qwen3-Omni model directories end to end (docs/preprocessing.md, "Model
// families"): a request with two images of different aspect ratios reaches a TokenSpeed and a
// vLLM reference worker, loaded from the same directory, with the family's encoder input (its
// processor settings, bit for bit), its tensors (image_grid_thw, patches_per_image) and each
// image's placeholder range as long as the worker's model computes from the grid it receives;
// a length that did not match would be refused by the worker (core/refworker/receive.ts).
import { asQwenConfig, familyById } from '../multimodal/families/index.ts';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeToRgb } from '../multimodal/decode.ts';
import { loadModelDirectory } from '../multimodal/model-dir.ts';
import { buildPrompt, promptTokenIdsOf, type ChatMessage } from '../multimodal/prompt.ts';
import { preprocessRgb } from '../multimodal/qwen-vl.ts';
import { encodeFloat32As } from '../transport/dtype.ts';
import { fnv1a64Hex } from '../util/fnv.ts';
import { makeFamilyModel, type TestFamilyModel } from '../test/family-models.ts';
import { makeTestImages } from '../test/images.ts';
import { runPython, runPythonScript } from '../test/python.ts';
import { useRouterRig } from '../test/router-rig.ts';
import type { RunningRouter } from './server.ts';

const images = makeTestImages();
const scratch = mkdtempSync(path.join(tmpdir(), 'mmtc-family-router-'));
const { startWorker, router } = useRouterRig();
afterAll(() => {
  images.remove();
  rmSync(scratch, { recursive: true, force: true });
});

// A tall 150x420 image next to the 400x300 photo: two aspect ratios, two grids.
const TALL = path.join(scratch, 'tall.png');
runPython(
  `import sys, numpy as np
from PIL import Image
y, x = np.mgrid[0:420, 0:150]
Image.fromarray(np.dstack([(x * 7) % 256, (y * 3) % 256, (x * y) % 256]).astype(np.uint8)).save(sys.argv[1])`,
  [TALL],
);
const IMAGES = [
  { bytes: images.bytes('photo.jpg'), mime: 'image/jpeg' },
  { bytes: readFileSync(TALL), mime: 'image/png' },
];

type TestImage = { bytes: Buffer; mime: string };
const messages = (pair: readonly TestImage[] = IMAGES): ChatMessage[] => [
  {
    role: 'user',
    content: [
      { type: 'image_url', image_url: { url: `data:${pair[0]!.mime};base64,${pair[0]!.bytes.toString('base64')}` } },
      { type: 'text', text: 'and' },
      { type: 'image_url', image_url: { url: `data:${pair[1]!.mime};base64,${pair[1]!.bytes.toString('base64')}` } },
      { type: 'text', text: 'What differs?' },
    ],
  },
];

/** The router's answer to the two images' chat (`pair`, else IMAGES): its content and prompt tokens (the test fails with the router's error unless 200). */
async function chat(
  r: RunningRouter,
  model: string,
  label = '',
  pair: readonly TestImage[] = IMAGES,
): Promise<{ content: string; promptTokens: number | undefined }> {
  const res = await fetch(`${r.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: messages(pair) }),
  });
  const body = (await res.json()) as { choices?: Array<{ message: { content: string } }>; error?: unknown; usage?: { prompt_tokens: number } };
  expect(res.status, `${label}${JSON.stringify(body.error)}`).toBe(200);
  return { content: body.choices![0]!.message.content, promptTokens: body.usage?.prompt_tokens };
}

/**
 * The two images (`pair`, else IMAGES) twice over /dev/shm to a TokenSpeed worker loaded from `dir`: each answer
 * holds every line of `expected` (the tensors as the worker read them), the second request's
 * images from the pixel cache (a link to the kept file), not the pool.
 */
async function shmThenCached(dir: string, model: string, expected: readonly string[], pair: readonly TestImage[] = IMAGES): Promise<void> {
  const worker = await startWorker('tokenspeed', ['--model-path', dir]);
  const r = await router(worker, 'shm', { model_path: dir });
  for (const round of ['computed', 'cached']) {
    const { content } = await chat(r, model, `${round}: `, pair);
    for (const line of expected) expect(content, round).toContain(line);
  }
  expect(r.context.pixelCache?.stats()).toMatchObject({ hits: 2, misses: 2 });
}

describe.each<[TestFamilyModel, string]>([
  ['qwen3_5', 'qwen3_5'],
  ['qwen3_omni_moe', 'qwen3_omni'],
])('a %s model directory', (kind, family) => {
  const dir = makeFamilyModel(path.join(scratch, kind), kind);

  it.each(['tokenspeed', 'vllm'] as const)(
    "%s: two images of different aspect ratios arrive with the family's tensors and token counts",
    async (runtime) => {
      const model = await loadModelDirectory(dir);
      expect(model.family).toBe(family);
      const expected = await Promise.all(
        IMAGES.map(async ({ bytes }) => {
          const img = await decodeToRgb(bytes);
          return preprocessRgb(img.rgb, img.width, img.height, asQwenConfig(model.imageConfig));
        }),
      );
      // Two aspect ratios: two different grids (landscape, portrait).
      expect(expected[0]!.gridW).toBeGreaterThan(expected[0]!.gridH);
      expect(expected[1]!.gridH).toBeGreaterThan(expected[1]!.gridW);
      const worker = await startWorker(runtime, ['--model-path', dir]);
      const r = await router(worker, 'inline', { model_path: dir });
      const { content, promptTokens } = await chat(r, kind);
      const F = expected[0]!.features;
      expect(F).toBe(1536); // 3 x 2 x 16 x 16: the Qwen3-VL processor's patches
      if (runtime === 'tokenspeed') {
        for (const [i, e] of expected.entries()) {
          const bf16 = encodeFloat32As('bfloat16', e.pixelValues!);
          expect(content).toContain(`encoder_input[${i}] [${e.patches},${F}] bfloat16 via inline, ${bf16.byteLength} bytes, fnv1a ${fnv1a64Hex(bf16)}`);
          expect(content).toContain(`image_grid_thw[${i}] [1,3] int64 via inline, 24 bytes`);
          expect(content).toContain(`patches_per_image[${i}] [1] int64 via inline, 8 bytes`);
        }
      } else {
        const joined = new Float32Array(expected.reduce((n, e) => n + e.pixelValues!.length, 0));
        joined.set(expected[0]!.pixelValues!);
        joined.set(expected[1]!.pixelValues!, expected[0]!.pixelValues!.length);
        const rows = expected[0]!.patches + expected[1]!.patches;
        expect(content).toContain(
          `pixel_values [${rows},${F}] float32 via inline, ${joined.byteLength} bytes, fnv1a ${fnv1a64Hex(encodeFloat32As('float32', joined))}`,
        );
        expect(content).toContain('image_grid_thw [2,3] int64 via inline, 48 bytes');
        expect(content).toContain('patches_per_image [2] int64 via inline, 16 bytes');
      }
      // The prompt the worker got: each image's placeholder as many tokens as its grid over merge².
      const prompt = buildPrompt(
        model,
        messages(),
        expected.map((e) => e.tokens),
      );
      expect(promptTokens).toBe(prompt.inputIds.length);
      expect(prompt.inputIds.filter((id) => id === model.imageTokenId)).toHaveLength(expected[0]!.tokens + expected[1]!.tokens);
    },
    60_000,
  ); // two worker processes and a router start from cold
});

// LLaVA-1.5 (docs/preprocessing.md, "CLIP crop (LLaVA-1.5)"): every image becomes one [1, 3, 336, 336] CLIP
// crop, bit for bit the Pillow + numpy reference written from Hugging Face's CLIPImageProcessor;
// vLLM gets them batched ([2, 3, 336, 336], pixel_values in batched_keys: no grid, no sizes),
// TokenSpeed one per item; each image is 576 <image> tokens, what the worker's model takes
// from a 336-pixel crop of 14-pixel patches (the worker refuses another count).
describe('a llava model directory', () => {
  const dir = makeFamilyModel(path.join(scratch, 'llava'), 'llava');
  const REFERENCE = path.resolve(import.meta.dirname, '../../scripts/reference/clip_reference.py');
  const reference = IMAGES.map((_, i) => {
    const file = path.join(scratch, `llava-${i}.f32`);
    const source = path.join(scratch, `llava-source-${i}`);
    writeFileSync(source, IMAGES[i]!.bytes);
    runPythonScript(REFERENCE, [source, '--out', file]);
    return new Float32Array(Uint8Array.from(readFileSync(file)).buffer);
  });

  it.each(['tokenspeed', 'vllm', 'sglang'] as const)(
    '%s: two images of different aspect ratios arrive as 336-pixel crops, 576 tokens each',
    async (runtime) => {
      const model = await loadModelDirectory(dir);
      expect(model.family).toBe('llava');
      const worker = await startWorker(runtime, ['--model-path', dir]);
      const r = await router(worker, 'inline', { model_path: dir });
      const { content, promptTokens } = await chat(r, 'llava');
      if (runtime === 'tokenspeed') {
        // The checkpoint's weights are float16 (config.json torch_dtype): the worker's encoder dtype, as TokenSpeed's rule gives it.
        for (const [i, values] of reference.entries()) {
          const f16 = encodeFloat32As('float16', values);
          expect(content).toContain(`encoder_input[${i}] [1,3,336,336] float16 via inline, ${f16.byteLength} bytes, fnv1a ${fnv1a64Hex(f16)}`);
        }
        expect(content).not.toContain('image_grid_thw');
      } else {
        // vLLM and SGLang: one batched pixel_values (SGLang with the encoded images beside it).
        const joined = new Float32Array(2 * 3 * 336 * 336);
        joined.set(reference[0]!);
        joined.set(reference[1]!, reference[0]!.length);
        expect(content).toContain(
          `pixel_values [2,3,336,336] float32 via inline, ${joined.byteLength} bytes, fnv1a ${fnv1a64Hex(encodeFloat32As('float32', joined))}`,
        );
        expect(content).not.toContain('image_grid_thw');
      }
      const prompt = buildPrompt(model, messages(), [576, 576]);
      expect(prompt.text).toBe('USER: <image>\n<image>\nand What differs? ASSISTANT:');
      expect(promptTokens).toBe(prompt.inputIds.length);
      expect(prompt.inputIds.filter((id) => id === 32000)).toHaveLength(2 * 576);
    },
    60_000,
  );

  it('TokenSpeed over /dev/shm: each crop written while it is preprocessed, read by the worker, the same bytes; again from the pixel cache', async () => {
    await shmThenCached(
      dir,
      'llava',
      reference.map((values, i) => {
        const f16 = encodeFloat32As('float16', values);
        return `encoder_input[${i}] [1,3,336,336] float16 via shm, ${f16.byteLength} bytes, fnv1a ${fnv1a64Hex(f16)}`;
      }),
    );
  }, 60_000);
});

// Kimi-K2.5 and Kimi-K3 (docs/preprocessing.md, "MoonViT patches (Kimi-K2.5, Kimi-K3)"): every
// image resized within its patch budget, zero-padded to whole 28-pixel merge blocks and cut into
// [3, 14, 14] patches, bit for bit the Pillow + numpy reference written from the checkpoint's
// processor (K3: a half-transparent PNG flattened over its chessboard); vLLM gets them flat
// ([patches, 3, 14, 14], split by patches_per_image) with grid_thws, TokenSpeed one item each;
// each image's <|media_pad|> is as many tokens as its grid over 2², what the worker's model
// computes from the grid_thws it receives (the worker refuses another count). K3's images are
// each its media block (its size as text, then the run), through its XTML rendering: vLLM gets
// the blocks and masks them by im_token_id, SGLang and TokenSpeed the runs.
const GLASS = path.join(scratch, 'glass.png');
runPython(
  `import sys, numpy as np
from PIL import Image
y, x = np.mgrid[0:420, 0:150]
Image.fromarray(np.dstack([(x * 7) % 256, (y * 3) % 256, (x * y) % 256, (y * 255) // 419]).astype(np.uint8), 'RGBA').save(sys.argv[1])`,
  [GLASS],
);

describe.each<[TestFamilyModel, readonly TestImage[], string[]]>([
  ['kimi_k25', IMAGES, []],
  ['kimi_k3', [IMAGES[0]!, { bytes: readFileSync(GLASS), mime: 'image/png' }], ['--k3']],
])('a %s model directory', (kind, pair, args) => {
  const dir = makeFamilyModel(path.join(scratch, kind), kind);
  const REFERENCE = path.resolve(import.meta.dirname, '../../scripts/reference/moonvit_reference.py');
  const reference = pair.map((image, i) => {
    const file = path.join(scratch, `${kind}-${i}.f32`);
    const source = path.join(scratch, `${kind}-source-${i}`);
    writeFileSync(source, image.bytes);
    const info = JSON.parse(runPythonScript(REFERENCE, [source, ...args, '--out', file])) as { grid: number[]; tokens: number };
    return {
      values: new Float32Array(Uint8Array.from(readFileSync(file)).buffer),
      grid: info.grid,
      tokens: info.tokens,
      patches: info.grid[1]! * info.grid[2]!,
    };
  });

  it.each(['tokenspeed', 'vllm', 'sglang'] as const)(
    "%s: two images of different aspect ratios arrive as MoonViT patches with grid_thws, each image's tokens its grid over 4",
    async (runtime) => {
      // 400x300 padded to 420x308 (22x30 patches, 165 tokens); 150x420 padded to 168x420 (30x12, 90).
      expect(reference.map((r) => [r.grid, r.tokens])).toEqual([
        [[1, 22, 30], 165],
        [[1, 30, 12], 90],
      ]);
      const model = await loadModelDirectory(dir);
      expect(model.family).toBe(kind);
      const worker = await startWorker(runtime, ['--model-path', dir]);
      const r = await router(worker, 'inline', { model_path: dir });
      const { content, promptTokens } = await chat(r, 'kimi', '', pair);
      if (runtime === 'tokenspeed') {
        // The checkpoint's weights are bfloat16 (config.json torch_dtype): the worker's encoder dtype.
        for (const [i, ref] of reference.entries()) {
          const bf16 = encodeFloat32As('bfloat16', ref.values);
          expect(content).toContain(`encoder_input[${i}] [${ref.patches},3,14,14] bfloat16 via inline, ${bf16.byteLength} bytes, fnv1a ${fnv1a64Hex(bf16)}`);
          expect(content).toContain(`grid_thws[${i}] [1,3] int64 via inline, 24 bytes`);
          expect(content).toContain(`patches_per_image[${i}] [1] int64 via inline, 8 bytes`);
        }
      } else {
        const joined = new Float32Array(reference[0]!.values.length + reference[1]!.values.length);
        joined.set(reference[0]!.values);
        joined.set(reference[1]!.values, reference[0]!.values.length);
        expect(content).toContain(
          `pixel_values [${reference[0]!.patches + reference[1]!.patches},3,14,14] float32 via inline, ${joined.byteLength} bytes, fnv1a ${fnv1a64Hex(encodeFloat32As('float32', joined))}`,
        );
        expect(content).toContain('grid_thws [2,3] int64 via inline, 48 bytes');
        expect(content).toContain('patches_per_image [2] int64 via inline, 16 bytes');
      }
      expect(content).not.toContain('image_grid_thw');
      const f = familyById(kind === 'kimi_k3' ? 'kimi_k3' : 'kimi_k25');
      const slots = [
        [400, 300, 165],
        [150, 420, 90],
      ].map(([width, height, tokens]) =>
        f.promptSequence ? f.promptSequence([], tokens!, promptTokenIdsOf(model), { width: width!, height: height! }) : tokens!,
      );
      const prompt = buildPrompt(model, messages(pair), slots);
      expect(promptTokens).toBe(prompt.inputIds.length);
      expect(prompt.inputIds.filter((id) => id === 163605)).toHaveLength(165 + 90);
      if (kind === 'kimi_k3') {
        expect(prompt.text).toContain('<|open|>message role="user"<|sep|><|media_pad|>\n<|media_pad|>\nand\nWhat differs?<|close|>message<|sep|>');
        expect(prompt.placeholders.map((p) => p.patches!.map((run) => run.length))).toEqual([[165], [90]]);
      }
    },
    60_000,
  );

  it('TokenSpeed over /dev/shm: the patches written while they are preprocessed, read by the worker, the same bytes; again from the pixel cache', async () => {
    await shmThenCached(
      dir,
      'kimi',
      reference.map((ref, i) => {
        const bf16 = encodeFloat32As('bfloat16', ref.values);
        return `encoder_input[${i}] [${ref.patches},3,14,14] bfloat16 via shm, ${bf16.byteLength} bytes, fnv1a ${fnv1a64Hex(bf16)}`;
      }),
      pair,
    );
  }, 60_000);
});

// Phi-3-vision (docs/preprocessing.md, "HD crops (Phi-3-vision)"): every image HD-transformed
// into at most 16 tiles of 336 pixels with a global image in front, [17, 3, 336, 336] bit for
// bit the checkpoint's processor run in Pillow and torch; vLLM gets them batched
// ([2, 17, 3, 336, 336]) with image_sizes batched and num_img_tokens shared, TokenSpeed one
// item each (num_img_tokens whole in every item, as the gateway gives it); each image's
// <|image|> is as many tokens as its HD size gives, what the worker's model computes from the
// image_sizes it receives (the worker refuses another count, or crops short of the tiles).
describe('a phi3_v model directory', () => {
  const dir = makeFamilyModel(path.join(scratch, 'phi3_v'), 'phi3_v');
  const REFERENCE = path.resolve(import.meta.dirname, '../../scripts/reference/phi3v_reference.py');
  // One Python process for both images (importing torch is most of its time).
  const files = IMAGES.map((image, i) => {
    const source = path.join(scratch, `phi3-source-${i}`);
    writeFileSync(source, image.bytes);
    return { source, out: path.join(scratch, `phi3-${i}.f32`) };
  });
  const infos = runPythonScript(REFERENCE, ['--each', ...files.map((f) => `${f.source}=${f.out}`)])
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { hd: number[]; tokens: number });
  const reference = files.map((f, i) => ({
    values: new Float32Array(Uint8Array.from(readFileSync(f.out)).buffer),
    hd: infos[i]!.hd,
    tokens: infos[i]!.tokens,
  }));
  const CROP = '[1,17,3,336,336]';

  it.each(['tokenspeed', 'vllm', 'sglang'] as const)(
    "%s: two images of different aspect ratios arrive as 17 HD crops with image_sizes and num_img_tokens, each image's tokens its HD size's",
    async (runtime) => {
      // 400x300 is 1344x1008 (12 tiles, 1921 tokens); 150x420 is transposed, 672x1680 (10 tiles, 1657).
      expect(reference.map((r) => [r.hd, r.tokens])).toEqual([
        [[1008, 1344], 1921],
        [[1680, 672], 1657],
      ]);
      const model = await loadModelDirectory(dir);
      expect(model.family).toBe('phi3_v');
      const worker = await startWorker(runtime, ['--model-path', dir]);
      const r = await router(worker, 'inline', { model_path: dir });
      const { content, promptTokens } = await chat(r, 'phi3');
      if (runtime === 'tokenspeed') {
        // The checkpoint's weights are bfloat16 (config.json torch_dtype): the worker's encoder dtype.
        for (const [i, ref] of reference.entries()) {
          const bf16 = encodeFloat32As('bfloat16', ref.values);
          expect(content).toContain(`encoder_input[${i}] ${CROP} bfloat16 via inline, ${bf16.byteLength} bytes, fnv1a ${fnv1a64Hex(bf16)}`);
          expect(content).toContain(`image_sizes[${i}] [1,2] int64 via inline, 16 bytes`);
          expect(content).toContain(`num_img_tokens[${i}] [2] int64 via inline, 16 bytes`);
        }
      } else {
        const joined = new Float32Array(reference[0]!.values.length + reference[1]!.values.length);
        joined.set(reference[0]!.values);
        joined.set(reference[1]!.values, reference[0]!.values.length);
        expect(content).toContain(
          `pixel_values [2,17,3,336,336] float32 via inline, ${joined.byteLength} bytes, fnv1a ${fnv1a64Hex(encodeFloat32As('float32', joined))}`,
        );
        expect(content).toContain('image_sizes [2,2] int64 via inline, 32 bytes');
        expect(content).toContain('num_img_tokens [2] int64 via inline, 16 bytes');
      }
      const prompt = buildPrompt(model, messages(), [1921, 1657]);
      // The string template: the message's images first, then its texts, a line each.
      expect(prompt.text).toBe('<|user|>\n<|image|>\n<|image|>\nand\nWhat differs?<|end|>\n<|assistant|>\n');
      expect(promptTokens).toBe(prompt.inputIds.length);
      expect(prompt.inputIds.filter((id) => id === 32044)).toHaveLength(1921 + 1657);
    },
    60_000,
  );

  it('TokenSpeed over /dev/shm: the crops written while they are preprocessed, read by the worker, the same bytes; again from the pixel cache', async () => {
    await shmThenCached(
      dir,
      'phi3',
      reference.flatMap((ref, i) => {
        const bf16 = encodeFloat32As('bfloat16', ref.values);
        // The cached image's tensors are the ones it was computed with.
        return [
          `encoder_input[${i}] ${CROP} bfloat16 via shm, ${bf16.byteLength} bytes, fnv1a ${fnv1a64Hex(bf16)}`,
          `num_img_tokens[${i}] [2] int64 via inline, 16 bytes`,
        ];
      }),
    );
  }, 60_000);
});

// LLaVA-NeXT (docs/preprocessing.md, "Anyres crops (LLaVA-NeXT)"): every image resized into the
// pinpoint that keeps the most of it, padded with black, cut into 336-pixel tiles after a base
// image of the whole, bit for bit the Pillow + numpy reference written from Hugging Face's
// LlavaNextImageProcessor. The 400x300 photo is 1 x 2 tiles (3 crops), the 1920x1080 image
// 2 x 2 (5 crops): the request pads the photo with two zero crops, as Hugging Face pads a batch
// and the gateway sends it; vLLM and SGLang get [2, 5, 3, 336, 336] with image_sizes batched,
// TokenSpeed one [1, 5, 3, 336, 336] item each. Each image's <image> is as many tokens as vLLM's
// model computes from its image_sizes (the worker refuses another count, or crops short of its tiles).
describe('a llava_next model directory', () => {
  const dir = makeFamilyModel(path.join(scratch, 'llava_next'), 'llava_next');
  const REFERENCE = path.resolve(import.meta.dirname, '../../scripts/reference/llava_next_reference.py');
  const PAIR: TestImage[] = [IMAGES[0]!, { bytes: images.bytes('hd.jpg'), mime: 'image/jpeg' }];
  const files = PAIR.map((image, i) => {
    const source = path.join(scratch, `llava-next-source-${i}`);
    writeFileSync(source, image.bytes);
    return { source, out: path.join(scratch, `llava-next-${i}.f32`) };
  });
  const infos = runPythonScript(REFERENCE, ['--each', ...files.map((f) => `${f.source}=${f.out}`)])
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { best: number[]; tiles: number; tokens: number });
  const CROP = 3 * 336 * 336;
  // Each image's crops padded with zero crops to the request's most (5).
  const padded = files.map((f) => {
    const own = new Float32Array(Uint8Array.from(readFileSync(f.out)).buffer);
    const values = new Float32Array(5 * CROP);
    values.set(own);
    return values;
  });

  it.each(['tokenspeed', 'vllm', 'sglang'] as const)(
    "%s: two images of 3 and 5 crops arrive padded to 5 with image_sizes, each image's tokens as the model unpads its tiles",
    async (runtime) => {
      expect(infos.map((i) => [i.best, i.tiles, i.tokens])).toEqual([
        [[336, 672], 2, 576 + 24 * 32 + 24],
        [[672, 672], 4, 576 + 28 * 48 + 28],
      ]);
      const model = await loadModelDirectory(dir);
      expect(model.family).toBe('llava_next');
      const worker = await startWorker(runtime, ['--model-path', dir]);
      const r = await router(worker, 'inline', { model_path: dir });
      const { content, promptTokens } = await chat(r, 'llava-next', '', PAIR);
      if (runtime === 'tokenspeed') {
        for (const [i, values] of padded.entries()) {
          // The checkpoint's weights are float16 (config.json torch_dtype): the worker's encoder dtype.
          const f16 = encodeFloat32As('float16', values);
          expect(content).toContain(`encoder_input[${i}] [1,5,3,336,336] float16 via inline, ${f16.byteLength} bytes, fnv1a ${fnv1a64Hex(f16)}`);
          expect(content).toContain(`image_sizes[${i}] [1,2] int64 via inline, 16 bytes`);
        }
      } else {
        const joined = new Float32Array(10 * CROP);
        joined.set(padded[0]!);
        joined.set(padded[1]!, 5 * CROP);
        expect(content).toContain(
          `pixel_values [2,5,3,336,336] float32 via inline, ${joined.byteLength} bytes, fnv1a ${fnv1a64Hex(encodeFloat32As('float32', joined))}`,
        );
        expect(content).toContain('image_sizes [2,2] int64 via inline, 32 bytes');
      }
      const tokens = infos.map((i) => i.tokens);
      const prompt = buildPrompt(model, messages(PAIR), tokens);
      // Mistral's template: the message's images first, then its texts.
      expect(prompt.text).toBe('[INST] <image>\n<image>\nandWhat differs? [/INST]');
      expect(promptTokens).toBe(prompt.inputIds.length);
      expect(prompt.inputIds.filter((id) => id === 32000)).toHaveLength(tokens[0]! + tokens[1]!);
    },
    60_000,
  );

  it('TokenSpeed over /dev/shm: one image alone goes as its own 3 crops, then padded beside a 5-crop image; again from the pixel cache', async () => {
    const worker = await startWorker('tokenspeed', ['--model-path', dir]);
    const r = await router(worker, 'shm', { model_path: dir });
    const own = new Float32Array(Uint8Array.from(readFileSync(files[0]!.out)).buffer);
    const f16 = encodeFloat32As('float16', own);
    for (const round of ['computed', 'cached']) {
      const res = await fetch(`${r.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          messages: [
            {
              role: 'user',
              content: [
                { type: 'image_url', image_url: { url: `data:image/jpeg;base64,${PAIR[0]!.bytes.toString('base64')}` } },
                { type: 'text', text: 'What is it?' },
              ],
            },
          ],
        }),
      });
      const body = (await res.json()) as { choices?: Array<{ message: { content: string } }>; error?: unknown };
      expect(res.status, `${round}: ${JSON.stringify(body.error)}`).toBe(200);
      expect(body.choices![0]!.message.content, round).toContain(
        `encoder_input [1,3,3,336,336] float16 via shm, ${f16.byteLength} bytes, fnv1a ${fnv1a64Hex(f16)}`,
      );
    }
    expect(r.context.pixelCache?.stats()).toMatchObject({ hits: 1, misses: 1 });
    // Beside the 1920x1080 image, the cached photo is padded to its 5 crops: a tensor of the request's own, over /dev/shm too.
    for (const round of ['the photo cached', 'both cached']) {
      const { content } = await chat(r, 'llava-next', `${round}: `, PAIR);
      for (const [i, values] of padded.entries()) {
        const f16 = encodeFloat32As('float16', values);
        expect(content, round).toContain(`encoder_input[${i}] [1,5,3,336,336] float16 via shm, ${f16.byteLength} bytes, fnv1a ${fnv1a64Hex(f16)}`);
      }
    }
    expect(r.context.pixelCache?.stats()).toMatchObject({ hits: 4, misses: 2 });
  }, 60_000);
});

// Llama 4 (docs/preprocessing.md, "Tiles (Llama 4)"): every image resized without distortion into
// its best canvas of 336-pixel tiles, padded at the bottom and right, cut into tiles with the whole
// image as a global tile after them, normalized in bfloat16, bit for bit the reference written
// from Hugging Face's Llama4ImageProcessor. The 400x300 photo is 1 x 2 tiles, the 150x420 image
// 2 x 1: three crops each, two sequences. vLLM and SGLang get the crops flat ([6, 3, 336, 336],
// split by patches_per_image) with aspect_ratios; TokenSpeed one item each. Each image's
// <|image|> becomes HF's _prompt_split_image; the worker's model embeds at its <|patch|> tokens
// (vLLM masks the whole range by im_token_id, SGLang and TokenSpeed get the <|patch|> runs), and
// refuses any other count than 144 a crop.
describe('a llama4 model directory', () => {
  const dir = makeFamilyModel(path.join(scratch, 'llama4'), 'llama4');
  const REFERENCE = path.resolve(import.meta.dirname, '../../scripts/reference/llama4_reference.py');
  const files = IMAGES.map((image, i) => {
    const source = path.join(scratch, `llama4-source-${i}`);
    writeFileSync(source, image.bytes);
    return { source, out: path.join(scratch, `llama4-${i}.f32`) };
  });
  const infos = runPythonScript(REFERENCE, ['--each', ...files.map((f) => `${f.source}=${f.out}`)])
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { aspect: number[]; crops: number; tokens: number; sequence: number });
  const reference = files.map((f) => new Float32Array(Uint8Array.from(readFileSync(f.out)).buffer));
  const PATCH = 200092;
  const sequence = (rows: number, cols: number): number[] => {
    const run = new Array<number>(144).fill(PATCH);
    const grid = Array.from({ length: rows }, () => [
      ...Array.from({ length: cols }, (_, c) => [...run, ...(c < cols - 1 ? [200084] : [])]).flat(),
      200085,
    ]).flat();
    return [200080, ...grid, 200090, ...run, 200081];
  };

  it.each(['tokenspeed', 'vllm', 'sglang'] as const)(
    '%s: a 1 x 2 and a 2 x 1 image arrive as 3 crops each with aspect_ratios and patches_per_image, each image its tiles’ <|patch|> runs between separators',
    async (runtime) => {
      expect(infos.map((i) => [i.aspect, i.crops, i.tokens, i.sequence])).toEqual([
        [[1, 2], 3, 432, 437],
        [[2, 1], 3, 432, 437],
      ]);
      const model = await loadModelDirectory(dir);
      expect(model.family).toBe('llama4');
      const worker = await startWorker(runtime, ['--model-path', dir]);
      const r = await router(worker, 'inline', { model_path: dir });
      const { content, promptTokens } = await chat(r, 'llama4');
      if (runtime === 'tokenspeed') {
        // The checkpoint's weights are bfloat16 (config.json torch_dtype): the worker's encoder dtype.
        for (const [i, values] of reference.entries()) {
          const bf16 = encodeFloat32As('bfloat16', values);
          expect(content).toContain(`encoder_input[${i}] [3,3,336,336] bfloat16 via inline, ${bf16.byteLength} bytes, fnv1a ${fnv1a64Hex(bf16)}`);
          expect(content).toContain(`aspect_ratios[${i}] [1,2] int64 via inline, 16 bytes`);
          expect(content).toContain(`patches_per_image[${i}] [1] int64 via inline, 8 bytes`);
        }
      } else {
        const joined = new Float32Array(reference[0]!.length + reference[1]!.length);
        joined.set(reference[0]!);
        joined.set(reference[1]!, reference[0]!.length);
        expect(content).toContain(
          `pixel_values [6,3,336,336] float32 via inline, ${joined.byteLength} bytes, fnv1a ${fnv1a64Hex(encodeFloat32As('float32', joined))}`,
        );
        expect(content).toContain('aspect_ratios [2,2] int64 via inline, 32 bytes');
        expect(content).toContain('patches_per_image [2] int64 via inline, 16 bytes');
      }
      const prompt = buildPrompt(model, messages(), [sequence(1, 2), sequence(2, 1)]);
      expect(prompt.text).toBe(
        '<|begin_of_text|><|header_start|>user<|header_end|>\n\n<|image|><|image|>andWhat differs?<|eot|><|header_start|>assistant<|header_end|>\n\n',
      );
      expect(promptTokens).toBe(prompt.inputIds.length);
      expect(prompt.inputIds.filter((id) => id === PATCH)).toHaveLength(2 * 432);
      // 1 x 2: a tile, <|tile_x_separator|>, a tile, <|tile_y_separator|>; 2 x 1: a tile and <|tile_y_separator|>, twice.
      expect(prompt.placeholders.map((p) => p.patches!.map((run) => run.length))).toEqual([
        [144, 144, 144],
        [144, 144, 144],
      ]);
    },
    60_000,
  );

  it('TokenSpeed over /dev/shm: the crops written while they are preprocessed, read by the worker, the same bytes; again from the pixel cache', async () => {
    await shmThenCached(
      dir,
      'llama4',
      reference.map((values, i) => {
        const bf16 = encodeFloat32As('bfloat16', values);
        return `encoder_input[${i}] [3,3,336,336] bfloat16 via shm, ${bf16.byteLength} bytes, fnv1a ${fnv1a64Hex(bf16)}`;
      }),
    );
  }, 60_000);
});

// Inkling (docs/preprocessing.md, "Patches (Inkling)"): each image as it is, [patches, 2, 40, 40,
// 3] bit for bit the torch reference of HF's processor, tokens_per_item batched; a message's
// parts in the order written; each image's range starts at <|content_image|> (vLLM masks it by
// im_token_id), SGLang and TokenSpeed get the run of <|unused_200054|>.
describe('an inkling model directory', () => {
  const dir = makeFamilyModel(path.join(scratch, 'inkling'), 'inkling');
  const REFERENCE = path.resolve(import.meta.dirname, '../../scripts/reference/inkling_reference.py');
  const files = IMAGES.map((image, i) => {
    const source = path.join(scratch, `inkling-source-${i}`);
    writeFileSync(source, image.bytes);
    return { source, out: path.join(scratch, `inkling-${i}.f32`) };
  });
  const infos = runPythonScript(REFERENCE, ['--each', ...files.map((f) => `${f.source}=${f.out}`)])
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { patches: number });
  const reference = files.map((f) => new Float32Array(Uint8Array.from(readFileSync(f.out)).buffer));

  it.each(['tokenspeed', 'vllm', 'sglang'] as const)(
    '%s: two images of different aspect ratios arrive as their 40-pixel patches with tokens_per_item, each image a run of its patches after <|content_image|>',
    async (runtime) => {
      // 400x300: 8 rows of 11 (the padding column included); 150x420: 11 rows of 4.
      expect(infos.map((i) => i.patches)).toEqual([88, 44]);
      const model = await loadModelDirectory(dir);
      expect(model.family).toBe('inkling');
      const worker = await startWorker(runtime, ['--model-path', dir]);
      const r = await router(worker, 'inline', { model_path: dir });
      const { content, promptTokens } = await chat(r, 'inkling');
      if (runtime === 'tokenspeed') {
        for (const [i, values] of reference.entries()) {
          const bf16 = encodeFloat32As('bfloat16', values);
          expect(content).toContain(
            `encoder_input[${i}] [${infos[i]!.patches},2,40,40,3] bfloat16 via inline, ${bf16.byteLength} bytes, fnv1a ${fnv1a64Hex(bf16)}`,
          );
          expect(content).toContain(`tokens_per_item[${i}] [1] int64 via inline, 8 bytes`);
        }
      } else {
        const joined = new Float32Array(reference[0]!.length + reference[1]!.length);
        joined.set(reference[0]!);
        joined.set(reference[1]!, reference[0]!.length);
        expect(content).toContain(
          `pixel_values [132,2,40,40,3] float32 via inline, ${joined.byteLength} bytes, fnv1a ${fnv1a64Hex(encodeFloat32As('float32', joined))}`,
        );
        expect(content).toContain('tokens_per_item [2] int64 via inline, 16 bytes');
      }
      const prompt = buildPrompt(model, messages(), [88, 44]);
      expect(prompt.text).toBe(
        '<|message_user|><|content_image|><|unused_200054|><|content_text|>and<|content_image|><|unused_200054|><|content_text|>What differs?<|end_message|><|message_model|>',
      );
      expect(promptTokens).toBe(prompt.inputIds.length);
      expect(prompt.placeholders.map((p) => [p.length, p.patches!.map((run) => run.length)])).toEqual([
        [89, [88]],
        [45, [44]],
      ]);
    },
    60_000,
  );

  it('TokenSpeed over /dev/shm: the patches written while they are preprocessed, read by the worker, the same bytes; again from the pixel cache', async () => {
    await shmThenCached(
      dir,
      'inkling',
      reference.map((values, i) => {
        const bf16 = encodeFloat32As('bfloat16', values);
        return `encoder_input[${i}] [${infos[i]!.patches},2,40,40,3] bfloat16 via shm, ${bf16.byteLength} bytes, fnv1a ${fnv1a64Hex(bf16)}`;
      }),
    );
  }, 60_000);
});
