// vLLM GenerateRequest from an engine-neutral request: one batched MultimodalInputs with the
// float32 pixel_values of every image concatenated in prompt order, image_grid_thw as an
// int64 [n, 3] side tensor, the placeholder ranges, im_token_id, and the keys Qwen-VL's
// field config needs (pixel_values is flat, sized by image_grid_thw; the grid is batched
// and stays on the CPU). Every tensor is placed through placeTensor.
import * as vllm from '../gen/vllm/grpc/engine.ts';
import { placeTensor, type PlacementContext } from '../transport/placement.ts';
import { tensorDataFromPlaced } from '../transport/wire.ts';
import { float32Values, int64Bytes } from './tensors.ts';
import type { EngineRequest } from './types.ts';

export async function buildVllmRequest(req: EngineRequest, ctx: PlacementContext): Promise<vllm.GenerateRequest> {
  let mmInputs: vllm.MultimodalInputs | undefined;
  if (req.images.length > 0) {
    const features = req.images[0]!.features;
    const rows = req.images.reduce((n, im) => n + im.patches, 0);
    let pixels: Float32Array;
    if (req.images.length === 1) pixels = float32Values(req.images[0]!);
    else {
      pixels = new Float32Array(rows * features);
      let at = 0;
      for (const im of req.images) {
        pixels.set(float32Values(im), at);
        at += im.patches * im.features;
      }
    }
    const pixelValues = await placeTensor(ctx, { name: 'pixel_values', shape: [rows, features], dtype: 'float32', bytes: new Uint8Array(pixels.buffer, pixels.byteOffset, pixels.byteLength) });
    const grid = await placeTensor(ctx, { name: 'image_grid_thw', shape: [req.images.length, 3], dtype: 'int64', bytes: int64Bytes(req.images.flatMap((im) => im.gridThw)) });
    mmInputs = vllm.MultimodalInputs.fromPartial({
      pixelValues: tensorDataFromPlaced(pixelValues),
      modelSpecificTensors: { image_grid_thw: tensorDataFromPlaced(grid) },
      imTokenId: req.imageTokenId,
      mmPlaceholders: req.images.map((im) => im.placeholder),
      mmHashes: req.images.map((im) => im.contentHash.toString('hex')),
      batchedKeys: ['image_grid_thw'],
      flatKeys: { pixel_values: 'image_grid_thw' },
      keepOnCpuKeys: ['image_grid_thw'],
      modality: 1,
    });
  }
  return vllm.GenerateRequest.fromPartial({
    requestId: req.requestId,
    input: { $case: 'tokenized', value: { originalText: req.text, inputIds: req.inputIds } },
    samplingParams: {
      ...(req.sampling.temperature !== undefined ? { temperature: req.sampling.temperature } : {}),
      topP: req.sampling.topP ?? 1,
      ...(req.sampling.maxTokens !== undefined ? { maxTokens: req.sampling.maxTokens } : {}),
      stop: req.sampling.stop ?? [],
    },
    stream: req.stream,
    ...(mmInputs ? { mmInputs } : {}),
  });
}
