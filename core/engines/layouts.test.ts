// The encoder input's field layout on the wire, as the family lays it out (VisionFamily.encoderShape,
// ImageModelTensor.splitsPixels) and the gateway assembles it (model_gateway/src/routers/grpc/
// multimodal/assemble.rs): a flat family's pixel values are every image's rows, split by its sizes
// tensor (vLLM's flat_keys); a batched family's are [images, ...one image's dimensions], listed in
// batched_keys (else the vLLM servicer would take them as shared by every image); TokenSpeed gets
// each image's own slice, its first dimension kept.
import { describe, expect, it } from 'vitest';
import { PHI3_V } from '../multimodal/families/phi3-v.ts';
import { QWEN2_VL } from '../multimodal/families/qwen2-vl.ts';
import type * as vllm from '../gen/vllm/grpc/engine.ts';
import type * as ts from '../gen/tokenspeed/grpc/scheduler.ts';
import { ShmRequestScope, ShmWriter } from '../transport/shm-writer.ts';
import type { PlacementContext } from '../transport/placement.ts';
import type { EngineRequest, PreparedImage } from './engine.ts';
import { tokenSpeedEngine } from './tokenspeed.ts';
import { vllmEngine } from './vllm.ts';
import { resolveSampling } from './sampling.ts';

function placement(runtime: PlacementContext['runtime']): PlacementContext {
  const writer = new ShmWriter({ dir: '/dev/shm' });
  return {
    requestId: 'layouts-1',
    revision: 1,
    source: 'api',
    worker: 'grpc://127.0.0.1:1',
    runtime,
    decision: { shmEnabled: false, reason: 'mode_inline' },
    minBytes: 0,
    writer,
    scope: new ShmRequestScope(writer.dir),
  };
}

/** A batched family's image: one [1, 3, 2, 2] encoder input and no model-specific tensors (LLaVA-1.5's shape, small). */
const batchedImage = (fill: number): PreparedImage => ({
  pixelValues: new Float32Array(12).fill(fill),
  patches: 1,
  features: 12,
  encoderShape: [1, 3, 2, 2],
  modelTensors: [],
  placeholder: { offset: fill, length: 1 },
  mediaHash: Buffer.alloc(32, fill),
});

/** A Qwen image of `patches` rows of 1176 values: its grid and patch count as QWEN2_VL lays them out. */
const qwenImage = (patches: number, fill: number): PreparedImage => {
  const g = { gridT: 1, gridH: patches, gridW: 1, patches, features: 1176 };
  return {
    pixelValues: new Float32Array(patches * 1176).fill(fill),
    patches,
    features: 1176,
    encoderShape: QWEN2_VL.encoderShape(g, QWEN2_VL.defaults),
    modelTensors: QWEN2_VL.imageTensors(g),
    placeholder: { offset: fill * 10, length: patches / 4 },
    mediaHash: Buffer.alloc(32, fill),
  };
};

/** A Phi-3-vision image (its crops small: [1, 2, 1, 1, 1]) with its HD size and token count as PHI3_V lays them out. */
const phi3Image = (imageSize: [number, number], tokens: number, fill: number): PreparedImage => ({
  pixelValues: new Float32Array(2).fill(fill),
  patches: 1,
  features: 2,
  encoderShape: [1, 2, 1, 1, 1],
  modelTensors: PHI3_V.imageTensors({ patches: 1, tokens, imageSize }),
  placeholder: { offset: fill * 10, length: tokens },
  mediaHash: Buffer.alloc(32, fill),
});

const int64Values = (t: { payload?: { $case: string; value?: unknown } }) => {
  if (t.payload?.$case !== 'inline') throw new Error(`went ${t.payload?.$case}`);
  return Array.from(new BigInt64Array(Uint8Array.from(t.payload.value as Uint8Array).buffer), Number);
};

const request = (images: PreparedImage[]): EngineRequest => ({
  requestId: 'layouts-1',
  text: 'x',
  inputIds: [1, 2, 3],
  images,
  imageTokenId: 7,
  sampling: resolveSampling({}, {}, () => undefined),
  stream: false,
  encoderDtype: 'float32',
  encoderReadWrite: false,
});

describe('vLLM: pixel_values by the family layout', () => {
  it('a batched family: [2, 3, 2, 2] in prompt order, pixel_values in batched_keys, no flat key', async () => {
    const wire = await vllmEngine.buildRequest(request([batchedImage(1), batchedImage(2)]), placement('vllm'));
    const mm = (wire.message as vllm.GenerateRequest).mmInputs!;
    expect(mm.pixelValues!.shape).toEqual([2, 3, 2, 2]);
    expect(mm.batchedKeys).toEqual(['pixel_values']);
    expect(mm.flatKeys).toEqual({});
    expect(Object.keys(mm.modelSpecificTensors)).toEqual([]);
    const payload = mm.pixelValues!.payload!;
    if (payload.$case !== 'inline') throw new Error(`pixel_values went ${payload.$case}`);
    const values = new Float32Array(Uint8Array.from(payload.value).buffer);
    expect([values.length, values[0], values[11], values[12], values[23]]).toEqual([24, 1, 1, 2, 2]);
  });

  it('Qwen: every image’s rows, [616 + 4, 1176], split by patches_per_image (flat), the grid and sizes batched', async () => {
    const wire = await vllmEngine.buildRequest(request([qwenImage(616, 1), qwenImage(4, 2)]), placement('vllm'));
    const mm = (wire.message as vllm.GenerateRequest).mmInputs!;
    expect(mm.pixelValues!.shape).toEqual([620, 1176]);
    expect(mm.flatKeys).toEqual({ pixel_values: 'patches_per_image' });
    expect(mm.batchedKeys).toEqual(['image_grid_thw', 'patches_per_image']);
    expect(mm.modelSpecificTensors.image_grid_thw!.shape).toEqual([2, 3]);
  });
});

describe('a tensor with no field layout (Phi-3-vision’s num_img_tokens), as the gateway sends it', () => {
  const images = () => [phi3Image([1008, 1344], 1921, 1), phi3Image([1680, 672], 1657, 2)];

  it('vLLM: image_sizes and pixel_values batched, num_img_tokens in no key list (the servicer shares it among the items)', async () => {
    const wire = await vllmEngine.buildRequest(request(images()), placement('vllm'));
    const mm = (wire.message as vllm.GenerateRequest).mmInputs!;
    expect(mm.batchedKeys).toEqual(['image_sizes', 'pixel_values']);
    expect(mm.flatKeys).toEqual({});
    expect(int64Values(mm.modelSpecificTensors.image_sizes!)).toEqual([1008, 1344, 1680, 672]);
    expect(mm.modelSpecificTensors.num_img_tokens!.shape).toEqual([2]);
    expect(int64Values(mm.modelSpecificTensors.num_img_tokens!)).toEqual([1921, 1657]);
  });

  it('TokenSpeed: each item its own image_sizes row, and num_img_tokens whole', async () => {
    const wire = await tokenSpeedEngine.buildRequest(request(images()), placement('tokenspeed'));
    const items = (wire.message as ts.GenerateRequest).mmInputs!.items;
    expect(items.map((i) => int64Values(i.modelSpecificTensors.image_sizes!))).toEqual([
      [1008, 1344],
      [1680, 672],
    ]);
    expect(items.map((i) => int64Values(i.modelSpecificTensors.num_img_tokens!))).toEqual([
      [1921, 1657],
      [1921, 1657],
    ]);
  });
});

describe('TokenSpeed: each image its own encoder input, the gateway’s per-item slice', () => {
  it('a batched family: encoder_input [1, 3, 2, 2] per item; Qwen: [patches, 1176]', async () => {
    const batched = await tokenSpeedEngine.buildRequest(request([batchedImage(1), batchedImage(2)]), placement('tokenspeed'));
    const items = (batched.message as ts.GenerateRequest).mmInputs!.items;
    expect(items.map((i) => i.encoderInput!.shape)).toEqual([
      [1, 3, 2, 2],
      [1, 3, 2, 2],
    ]);
    const qwen = await tokenSpeedEngine.buildRequest(request([qwenImage(616, 1)]), placement('tokenspeed'));
    const qwenItems = (qwen.message as ts.GenerateRequest).mmInputs!.items;
    expect(qwenItems[0]!.encoderInput!.shape).toEqual([616, 1176]);
  });
});
