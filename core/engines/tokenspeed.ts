// TokenSpeed GenerateRequest from an engine-neutral request: one MultimodalItem per image in
// prompt order, the encoder input in the resolved wire dtype, image_grid_thw and
// patches_per_image as int64 side tensors, the image's placeholder range and token id, and
// a content hash. Every tensor is placed (inline or /dev/shm) through placeTensor.
import * as ts from '../gen/tokenspeed/grpc/scheduler.ts';
import type * as vllm from '../gen/vllm/grpc/engine.ts';
import { placeTensor, type PlacementContext } from '../transport/placement.ts';
import { tensorDataFromPlaced } from '../transport/wire.ts';
import { encoderBytes, int64Bytes } from './tensors.ts';
import type { EngineEvent, EngineRequest } from './types.ts';

export async function buildTokenSpeedRequest(req: EngineRequest, ctx: PlacementContext): Promise<ts.GenerateRequest> {
  const items: ts.MultimodalItem[] = [];
  for (const [i, image] of req.images.entries()) {
    const suffix = req.images.length > 1 ? `[${i}]` : '';
    const encoder = await placeTensor(ctx, { name: `encoder_input${suffix}`, shape: [image.patches, image.features], dtype: req.encoderDtype, bytes: encoderBytes(image, req.encoderDtype) });
    const grid = await placeTensor(ctx, { name: `image_grid_thw${suffix}`, shape: [1, 3], dtype: 'int64', bytes: int64Bytes(image.gridThw) });
    const patches = await placeTensor(ctx, { name: `patches_per_image${suffix}`, shape: [1], dtype: 'int64', bytes: int64Bytes([image.patches]) });
    items.push(
      ts.MultimodalItem.fromPartial({
        modality: 1,
        contentHash: image.contentHash,
        encoderInput: tensorDataFromPlaced(encoder),
        modelSpecificTensors: { image_grid_thw: tensorDataFromPlaced(grid), patches_per_image: tensorDataFromPlaced(patches) },
        placeholders: [image.placeholder],
        placeholderTokenId: req.imageTokenId,
      }),
    );
  }
  return ts.GenerateRequest.fromPartial({
    requestId: req.requestId,
    tokenized: { inputIds: req.inputIds, originalText: req.text },
    samplingParams: {
      ...(req.sampling.temperature !== undefined ? { temperature: req.sampling.temperature } : {}),
      ...(req.sampling.topP !== undefined ? { topP: req.sampling.topP } : {}),
      ...(req.sampling.maxTokens !== undefined ? { maxNewTokens: req.sampling.maxTokens } : {}),
      stop: req.sampling.stop ?? [],
    },
    stream: req.stream,
    ...(items.length ? { mmInputs: { items } } : {}),
  });
}

/**
 * The neutral event of a Generate response. Both protocols number their responses
 * differently but generate the same TypeScript shape, so one reader serves both.
 */
export function engineEvent(res: ts.GenerateResponse | vllm.GenerateResponse): EngineEvent | undefined {
  const r = res.response;
  if (r?.$case === 'chunk') return { kind: 'chunk', tokenIds: r.value.tokenIds, promptTokens: r.value.promptTokens, completionTokens: r.value.completionTokens };
  if (r?.$case === 'complete') {
    const v = r.value;
    return { kind: 'complete', tokenIds: v.outputIds, finishReason: v.finishReason, promptTokens: v.promptTokens, completionTokens: v.completionTokens, cachedTokens: v.cachedTokens };
  }
  return undefined;
}
