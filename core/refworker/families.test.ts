// The reference worker judges an image's tokens as the worker's model computes them, by the
// model's family (core/multimodal/families): a Qwen image from its grid row, a LLaVA-1.5 image
// from the pixel values it receives ([1, 3, 336, 336]: 576 tokens). A count or a shape the
// model would not take is refused, as a vLLM request whose pixel_values the servicer would
// hand every image whole (in neither batched_keys nor flat_keys).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { GenerateRequest } from '../gen/vllm/grpc/engine.ts';
import { familyById } from '../multimodal/families/index.ts';
import { loadModelDirectory } from '../multimodal/model-dir.ts';
import { promptTokenIdsOf } from '../multimodal/prompt.ts';
import { makeFamilyModel } from '../test/family-models.ts';
import { TensorReader } from '../transport/shm-reader.ts';
import { receive, RequestInvalid, tokensOfModel } from './receive.ts';
import { tensorsOf } from './vllm.ts';

const scratch = mkdtempSync(path.join(tmpdir(), 'mmtc-refworker-families-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const llava = await loadModelDirectory(makeFamilyModel(path.join(scratch, 'llava'), 'llava'));
const reader = new TensorReader({ unlinkAfterRead: false });

/** A vLLM request of `images` LLaVA crops of `side` pixels, each placed with `tokens` placeholder tokens. */
function llavaRequest(o: { images: number; side?: number; tokens?: number; batchedKeys?: string[] }): GenerateRequest {
  const side = o.side ?? 336;
  const tokens = o.tokens ?? 576;
  const inputIds = [1, 2, ...Array.from({ length: o.images }, () => Array<number>(tokens).fill(32000)).flat(), 3];
  return {
    requestId: 'r',
    input: { $case: 'tokenized', value: { originalText: 'x', inputIds } },
    stream: false,
    mmInputs: {
      pixelValues: { shape: [o.images, 3, side, side], dtype: 'float32', payload: { $case: 'inline', value: Buffer.alloc(o.images * 3 * side * side * 4) } },
      modelSpecificTensors: {},
      imTokenId: 32000,
      mmPlaceholders: Array.from({ length: o.images }, (_, i) => ({ offset: 2 + i * tokens, length: tokens })),
      mmHashes: Array.from({ length: o.images }, (_, i) => `h${i}`),
      batchedKeys: o.batchedKeys ?? ['pixel_values'],
      flatKeys: {},
      keepOnCpuKeys: [],
      modality: 1,
    },
  } as unknown as GenerateRequest;
}

function judge(req: GenerateRequest, model = llava): string {
  const input = req.input as { value: { inputIds: number[] } };
  const job = { requestId: 'r', stream: false, inputIds: input.value.inputIds, maxTokens: undefined, ...tensorsOf(req) };
  return receive('vllm', job, reader, false, tokensOfModel(model));
}

const kimi = await loadModelDirectory(makeFamilyModel(path.join(scratch, 'kimi'), 'kimi_k25'));
const int64 = (values: number[], shape: number[]) => ({
  shape,
  dtype: 'int64',
  payload: { $case: 'inline', value: Buffer.from(BigInt64Array.from(values.map(BigInt)).buffer) },
});

/** A vLLM request of one Kimi image of grid 1 x h x w, its grid under `gridKey`, placed with `tokens` placeholder tokens. */
function kimiRequest(o: { h: number; w: number; tokens: number; gridKey?: string }): GenerateRequest {
  const patches = o.h * o.w;
  const inputIds = [1, ...Array<number>(o.tokens).fill(163605), 2];
  const gridKey = o.gridKey ?? 'grid_thws';
  return {
    requestId: 'r',
    input: { $case: 'tokenized', value: { originalText: 'x', inputIds } },
    stream: false,
    mmInputs: {
      pixelValues: { shape: [patches, 3, 14, 14], dtype: 'float32', payload: { $case: 'inline', value: Buffer.alloc(patches * 588 * 4) } },
      modelSpecificTensors: { [gridKey]: int64([1, o.h, o.w], [1, 3]), patches_per_image: int64([patches], [1]) },
      imTokenId: 163605,
      mmPlaceholders: [{ offset: 1, length: o.tokens }],
      mmHashes: ['h0'],
      batchedKeys: [gridKey, 'patches_per_image'],
      flatKeys: { pixel_values: 'patches_per_image' },
      keepOnCpuKeys: [gridKey],
      modality: 1,
    },
  } as unknown as GenerateRequest;
}

describe('a Kimi-K2.5 worker (vLLM)', () => {
  it('takes an image of 22x30 patches with 165 tokens (its grid_thws over 2x2)', () => {
    expect(judge(kimiRequest({ h: 22, w: 30, tokens: 165 }), kimi)).toMatch(/^1 image: pixel_values \[660,3,14,14\] float32/);
  });

  it("refuses a count other than its grid gives, a grid that is not an image's, and a Qwen grid (image_grid_thw) its model does not read", () => {
    expect(() => judge(kimiRequest({ h: 22, w: 30, tokens: 660 }), kimi)).toThrow(
      new RequestInvalid('image 0: placeholder length 660 does not match grid 1x22x30 (165 tokens)'),
    );
    expect(() => judge(kimiRequest({ h: 3, w: 3, tokens: 2 }), kimi)).toThrow(
      new RequestInvalid("image 0: grid_thws row [1, 3, 3] is not an image's grid: t must be 1 and h, w positive multiples of 2"),
    );
    expect(() => judge(kimiRequest({ h: 22, w: 30, tokens: 165, gridKey: 'image_grid_thw' }), kimi)).toThrow(
      new RequestInvalid("image 0: its grid is image_grid_thw, but the model reads grid_thws (KeyError: 'grid_thws')"),
    );
  });
});

const phi3 = await loadModelDirectory(makeFamilyModel(path.join(scratch, 'phi3'), 'phi3_v'));

/** A vLLM request of one Phi-3-vision image of `crops` crops, its image_sizes [h, w] under `sizesKey`, placed with `tokens` placeholder tokens. */
function phi3Request(o: { h: number; w: number; tokens: number; crops?: number; sizesKey?: string }): GenerateRequest {
  const crops = o.crops ?? 17;
  const inputIds = [1, ...Array<number>(o.tokens).fill(32044), 2];
  const sizesKey = o.sizesKey ?? 'image_sizes';
  return {
    requestId: 'r',
    input: { $case: 'tokenized', value: { originalText: 'x', inputIds } },
    stream: false,
    mmInputs: {
      pixelValues: { shape: [1, crops, 3, 336, 336], dtype: 'float32', payload: { $case: 'inline', value: Buffer.alloc(crops * 3 * 336 * 336 * 4) } },
      modelSpecificTensors: { [sizesKey]: int64([o.h, o.w], [1, 2]), num_img_tokens: int64([o.tokens], [1]) },
      imTokenId: 32044,
      mmPlaceholders: [{ offset: 1, length: o.tokens }],
      mmHashes: ['h0'],
      batchedKeys: [sizesKey, 'pixel_values'],
      flatKeys: {},
      keepOnCpuKeys: [],
      modality: 1,
    },
  } as unknown as GenerateRequest;
}

describe('a Phi-3-vision worker (vLLM)', () => {
  it('takes an image of 17 crops whose image_sizes is 1008x1680 with 2353 tokens', () => {
    expect(judge(phi3Request({ h: 1008, w: 1680, tokens: 2353 }), phi3)).toMatch(/^1 image: pixel_values \[1,17,3,336,336\] float32/);
  });

  it("refuses a count other than its image_sizes gives, a size that is not an HD image's, crops short of its tiles, and a Qwen grid its model does not read", () => {
    expect(() => judge(phi3Request({ h: 1008, w: 1680, tokens: 1921 }), phi3)).toThrow(
      new RequestInvalid('image 0: placeholder length 1921 does not match grid 1008x1680 (2353 tokens)'),
    );
    expect(() => judge(phi3Request({ h: 1000, w: 1680, tokens: 2353 }), phi3)).toThrow(
      new RequestInvalid('image 0: placeholder length 2353 does not match grid 1000x1680 (1621 tokens)'),
    );
    expect(() => judge(phi3Request({ h: 300, w: 1680, tokens: 2353 }), phi3)).toThrow(
      new RequestInvalid("image 0: image_sizes row [300, 1680] is not an HD image's size: h and w must be whole numbers of at least 336"),
    );
    expect(() => judge(phi3Request({ h: 1008, w: 1680, tokens: 2353, crops: 5 }), phi3)).toThrow(
      new RequestInvalid(
        "image 0: an image's pixel values are [1, 5, 3, 336, 336], expected [1, crops, 3, 336, 336] with at least 16 crops for image_sizes [1008, 1680]",
      ),
    );
    expect(() => judge(phi3Request({ h: 1008, w: 1680, tokens: 2353, sizesKey: 'image_grid_thw' }), phi3)).toThrow(
      new RequestInvalid("image 0: its grid is image_grid_thw, but the model reads image_sizes (KeyError: 'image_sizes')"),
    );
  });
});

const llavaNext = await loadModelDirectory(makeFamilyModel(path.join(scratch, 'llava-next'), 'llava_next'));

/** A vLLM request of LLaVA-NeXT images of `sizes` [h, w], their crops padded to `crops`, each placed with its `tokens`. */
function llavaNextRequest(o: { sizes: Array<[number, number]>; tokens: number[]; crops: number }): GenerateRequest {
  const n = o.sizes.length;
  let at = 1;
  const placeholders = o.tokens.map((length) => ({ offset: (at += length) - length, length }));
  const inputIds = [1, ...o.tokens.flatMap((t) => Array<number>(t).fill(32000)), 2];
  return {
    requestId: 'r',
    input: { $case: 'tokenized', value: { originalText: 'x', inputIds } },
    stream: false,
    mmInputs: {
      pixelValues: {
        shape: [n, o.crops, 3, 336, 336],
        dtype: 'float32',
        payload: { $case: 'inline', value: Buffer.alloc(n * o.crops * 3 * 336 * 336 * 4) },
      },
      modelSpecificTensors: { image_sizes: int64(o.sizes.flat(), [n, 2]) },
      imTokenId: 32000,
      mmPlaceholders: placeholders,
      mmHashes: o.sizes.map((_, i) => `h${i}`),
      batchedKeys: ['image_sizes', 'pixel_values'],
      flatKeys: {},
      keepOnCpuKeys: [],
      modality: 1,
    },
  } as unknown as GenerateRequest;
}

describe('a LLaVA-NeXT worker (vLLM)', () => {
  // 1080x1920: 2 x 2 tiles, 576 + 28·48 + 28 = 1948 tokens; 900x250: 3 x 1 (1008x336), 576 + 72·20 + 72 = 2088, as the model unpads them.
  it('takes a request of two images padded to 5 crops, each counted from its image_sizes as the model unpads its tiles', () => {
    expect(
      judge(
        llavaNextRequest({
          sizes: [
            [1080, 1920],
            [900, 250],
          ],
          tokens: [1948, 2088],
          crops: 5,
        }),
        llavaNext,
      ),
    ).toMatch(/^2 images: pixel_values \[2,5,3,336,336\] float32/);
  });

  it('refuses a count other than the model computes, and crops short of the tiles image_sizes asks for', () => {
    // The gateway's rounding: 341·48 / 500 = 32.736 rounded to 33 leaves 34 unpadded rows; the model's integer division 32.
    expect(() => judge(llavaNextRequest({ sizes: [[341, 500]], tokens: [576 + 34 * 48 + 34], crops: 5 }), llavaNext)).toThrow(
      new RequestInvalid(`image 0: placeholder length ${576 + 34 * 48 + 34} does not match grid 341x500 (${576 + 32 * 48 + 32} tokens)`),
    );
    expect(() => judge(llavaNextRequest({ sizes: [[1080, 1920]], tokens: [1948], crops: 3 }), llavaNext)).toThrow(
      new RequestInvalid(
        "image 0: an image's pixel values are [1, 3, 3, 336, 336], expected [1, crops, 3, 336, 336] with at least 5 crops for image_sizes [1080, 1920]",
      ),
    );
  });
});

describe('a LLaVA-1.5 worker (vLLM)', () => {
  it('takes two batched [1, 3, 336, 336] images of 576 tokens each', () => {
    expect(judge(llavaRequest({ images: 2 }))).toMatch(/^2 images: pixel_values \[2,3,336,336\] float32 via inline, 2709504 bytes$/);
  });

  it('refuses 575 tokens for an image, naming what the model computes from its pixel values', () => {
    expect(() => judge(llavaRequest({ images: 1, tokens: 575 }))).toThrow(
      new RequestInvalid('image 0: placeholder length 575 does not match its pixel values [1, 3, 336, 336] (576 tokens)'),
    );
  });

  it('refuses a crop the model does not take (224 pixels)', () => {
    expect(() => judge(llavaRequest({ images: 1, side: 224, tokens: 256 }))).toThrow(
      new RequestInvalid("image 0: an image's pixel values are [1, 3, 224, 224], expected [1, 3, 336, 336]"),
    );
  });

  it('refuses pixel_values in neither batched_keys nor flat_keys (the servicer would give every image all of them)', () => {
    expect(() => judge(llavaRequest({ images: 2, batchedKeys: [] }))).toThrow(/^pixel_values is in neither batched_keys nor flat_keys/);
  });
});

describe('a Qwen worker (TokenSpeed), under EPD', () => {
  it('refuses a prefill item without image_grid_thw even though its pixels went to the encode worker', async () => {
    const { tensorsOf: itemsOf } = await import('./tokenspeed-items.ts');
    const { receiveTensors } = await import('./receive.ts');
    const qwen = await loadModelDirectory();
    const req = {
      mmInputs: {
        items: [
          {
            modality: 1,
            contentHash: Buffer.from('h'),
            modelSpecificTensors: {},
            placeholders: [{ offset: 1, length: 4 }],
            placeholderTokenId: qwen.imageTokenId,
          },
        ],
      },
    };
    const job = {
      requestId: 'r',
      stream: false,
      inputIds: [1, ...Array<number>(4).fill(qwen.imageTokenId), 2],
      maxTokens: undefined,
      ...itemsOf(req as never, { pixels: false }),
    };
    expect(() => receiveTensors('tokenspeed', job, reader, false, tokensOfModel(qwen), undefined, false)).toThrow(
      new RequestInvalid("item 0: no image_grid_thw tensor (the model computes an image's tokens from its grid)"),
    );
  });
});

const llama4 = await loadModelDirectory(makeFamilyModel(path.join(scratch, 'llama4'), 'llama4'));
const LLAMA4_PATCH = 200092;

/** One Llama 4 image of `rows` x `cols` tiles in the prompt, as HF's _prompt_split_image writes it, after a token and before one. */
function llama4Prompt(rows: number, cols: number): number[] {
  const LLAMA4 = familyById('llama4');
  const crops = rows * cols + (rows * cols > 1 ? 1 : 0);
  const tensors = LLAMA4.imageTensors({ patches: crops, tiles: [rows, cols] });
  return [1, ...LLAMA4.promptSequence!(tensors, crops * 144, promptTokenIdsOf(llama4), { width: cols * 336, height: rows * 336 }), 2];
}

/** A vLLM request of one Llama 4 image of `crops` crops (patches_per_image) in `inputIds`, its whole range placed, im_token_id `imTokenId`. */
function llama4Request(o: { inputIds: number[]; crops: number; imTokenId?: number; side?: number }): GenerateRequest {
  const side = o.side ?? 336;
  return {
    requestId: 'r',
    input: { $case: 'tokenized', value: { originalText: 'x', inputIds: o.inputIds } },
    stream: false,
    mmInputs: {
      pixelValues: { shape: [o.crops, 3, side, side], dtype: 'float32', payload: { $case: 'inline', value: Buffer.alloc(o.crops * 3 * side * side * 4) } },
      modelSpecificTensors: { aspect_ratios: int64([1, 2], [1, 2]), patches_per_image: int64([o.crops], [1]) },
      ...(o.imTokenId !== undefined ? { imTokenId: o.imTokenId } : {}),
      mmPlaceholders: [{ offset: 1, length: o.inputIds.length - 2 }],
      mmHashes: ['h0'],
      batchedKeys: ['aspect_ratios', 'patches_per_image'],
      flatKeys: { pixel_values: 'patches_per_image' },
      keepOnCpuKeys: [],
      modality: 1,
    },
  } as unknown as GenerateRequest;
}

describe('a Llama 4 worker', () => {
  it('vLLM: takes a 1 x 2 image (3 crops) placed as its whole sequence, the <|patch|> positions (im_token_id) masked in: 432 of its 437', () => {
    const inputIds = llama4Prompt(1, 2);
    expect(inputIds).toHaveLength(2 + 437);
    expect(judge(llama4Request({ inputIds, crops: 3, imTokenId: LLAMA4_PATCH }), llama4)).toMatch(/^1 image: pixel_values \[3,3,336,336\] float32/);
  });

  it('vLLM: refuses the range without im_token_id (every position would take a feature), a sequence of another canvas, crops no image has, and tiles its tower does not take', () => {
    expect(() => judge(llama4Request({ inputIds: llama4Prompt(1, 2), crops: 3, imTokenId: LLAMA4_PATCH, side: 448 }), llama4)).toThrow(
      new RequestInvalid('image 0: pixel_values are [3, 3, 448, 448], expected [crops, 3, 336, 336]'),
    );
    expect(() => judge(llama4Request({ inputIds: llama4Prompt(1, 2), crops: 3 }), llama4)).toThrow(
      new RequestInvalid('image 0: placeholder length 437 does not match patches_per_image 3 (432 tokens)'),
    );
    // A one-tile image's sequence (144 patches) for 3 crops.
    expect(() => judge(llama4Request({ inputIds: llama4Prompt(1, 1), crops: 3, imTokenId: LLAMA4_PATCH }), llama4)).toThrow(
      new RequestInvalid('image 0: placeholder range [1, 148) holds 144 image tokens (id 200092), but patches_per_image 3 gives 432'),
    );
    expect(() => judge(llama4Request({ inputIds: llama4Prompt(1, 2), crops: 2, imTokenId: LLAMA4_PATCH }), llama4)).toThrow(
      new RequestInvalid("image 0: patches_per_image 2 is not an image's crops: 1, or 3 to 17 (its tiles and the global tile)"),
    );
  });

  it('SGLang: takes two images as their <|patch|> runs, flat, in order; refuses their whole ranges (they hold the separators)', async () => {
    const { tensorsOf: sglangTensorsOf } = await import('./sglang.ts');
    const first = llama4Prompt(1, 2).slice(1, -1);
    const second = llama4Prompt(2, 1).slice(1, -1);
    const inputIds = [1, ...first, ...second, 2];
    const runsOf = (seq: number[], from: number) =>
      seq.flatMap((id, i) =>
        id === LLAMA4_PATCH && seq[i - 1] !== LLAMA4_PATCH ? [{ offset: from + i, length: seq.slice(i).findIndex((x) => x !== LLAMA4_PATCH) }] : [],
      );
    const request = (mmPlaceholders: Array<{ offset: number; length: number }>) => ({
      requestId: 'r',
      tokenized: { originalText: 'x', inputIds },
      mmInputs: {
        pixelValues: { shape: [6, 3, 336, 336], dtype: 'float32', data: Buffer.alloc(6 * 3 * 336 * 336 * 4) },
        modelSpecificTensors: {
          aspect_ratios: { shape: [2, 2], dtype: 'int64', data: Buffer.from(BigInt64Array.from([1n, 2n, 2n, 1n]).buffer) },
          patches_per_image: { shape: [2], dtype: 'int64', data: Buffer.from(BigInt64Array.from([3n, 3n]).buffer) },
        },
        imageData: [Buffer.from('a'), Buffer.from('b')],
        modalities: ['image'],
        imTokenId: LLAMA4_PATCH,
        mmPlaceholders,
      },
    });
    const sglangJudge = (req: ReturnType<typeof request>) =>
      receive(
        'sglang',
        { requestId: 'r', stream: false, inputIds, maxTokens: undefined, ...sglangTensorsOf(req as never) },
        reader,
        false,
        tokensOfModel(llama4),
      );
    const runs = [...runsOf(first, 1), ...runsOf(second, 1 + first.length)];
    expect(runs).toHaveLength(6);
    expect(sglangJudge(request(runs))).toMatch(/^2 images: pixel_values \[6,3,336,336\] float32/);
    expect(() =>
      sglangJudge(
        request([
          { offset: 1, length: first.length },
          { offset: 1 + first.length, length: second.length },
        ]),
      ),
    ).toThrow(new RequestInvalid('image 0: placeholder range holds ids other than 200092'));
    // One run short: the second image's ranges hold 288 tokens where its 3 crops give 432.
    expect(() => sglangJudge(request(runs.slice(0, 5)))).toThrow(
      new RequestInvalid('image 1: the placeholder ranges from 439 hold 288 tokens where its patches_per_image gives 432'),
    );
  });
});

const inkling = await loadModelDirectory(makeFamilyModel(path.join(scratch, 'inkling'), 'inkling'));
const INKLING_PAD = 200054;
const CONTENT_IMAGE = 200005;

/** A vLLM request of one Inkling image of `patches` patches: the range from <|content_image|> over its run, as the gateway places it. */
function inklingRequest(o: { patches: number; run?: number; imTokenId?: number; shape?: number[] }): GenerateRequest {
  const run = o.run ?? o.patches;
  const inputIds = [1, CONTENT_IMAGE, ...Array<number>(run).fill(INKLING_PAD), 2];
  const shape = o.shape ?? [o.patches, 2, 40, 40, 3];
  return {
    requestId: 'r',
    input: { $case: 'tokenized', value: { originalText: 'x', inputIds } },
    stream: false,
    mmInputs: {
      pixelValues: { shape, dtype: 'float32', payload: { $case: 'inline', value: Buffer.alloc(shape.reduce((a, b) => a * b, 4)) } },
      modelSpecificTensors: { tokens_per_item: int64([o.patches], [1]) },
      ...(o.imTokenId !== undefined ? { imTokenId: o.imTokenId } : {}),
      mmPlaceholders: [{ offset: 1, length: run + 1 }],
      mmHashes: ['h0'],
      batchedKeys: ['tokens_per_item'],
      flatKeys: { pixel_values: 'tokens_per_item' },
      keepOnCpuKeys: [],
      modality: 1,
    },
  } as unknown as GenerateRequest;
}

describe('an Inkling worker', () => {
  it('vLLM: takes an image placed from its <|content_image|>, the run of <|unused_200054|> (im_token_id) masked in; a one-patch image too', () => {
    expect(judge(inklingRequest({ patches: 88, imTokenId: INKLING_PAD }), inkling)).toMatch(/^1 image: pixel_values \[88,2,40,40,3\] float32/);
    expect(judge(inklingRequest({ patches: 1, imTokenId: INKLING_PAD }), inkling)).toMatch(/^1 image: pixel_values \[1,2,40,40,3\] float32/);
  });

  it('vLLM: refuses the range without im_token_id (the <|content_image|> would take a feature), a run short of the patches, and patches laid out channels first', () => {
    expect(() => judge(inklingRequest({ patches: 88 }), inkling)).toThrow(
      new RequestInvalid('image 0: placeholder length 89 does not match tokens_per_item 88 (88 tokens)'),
    );
    expect(() => judge(inklingRequest({ patches: 88, run: 87, imTokenId: INKLING_PAD }), inkling)).toThrow(
      new RequestInvalid('image 0: placeholder range [1, 89) holds 87 image tokens (id 200054), but tokens_per_item 88 gives 88'),
    );
    expect(() => judge(inklingRequest({ patches: 88, imTokenId: INKLING_PAD, shape: [88, 3, 40, 40] }), inkling)).toThrow(
      new RequestInvalid('image 0: pixel_values are [88, 3, 40, 40], expected [patches, 2, 40, 40, 3]'),
    );
  });
});
