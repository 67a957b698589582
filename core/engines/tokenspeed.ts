// The TokenSpeed engine (package tokenspeed.grpc.scheduler). Its GenerateRequest carries one
// MultimodalItem per image in prompt order: the encoder input in the resolved wire dtype,
// image_grid_thw and patches_per_image as int64 side tensors, the image's placeholder range
// and token id, and a content hash; every tensor is placed (inline or /dev/shm) through
// placeTensor. Discovery labels: model dtype and multimodal_encoder_dtype from GetModelInfo,
// the /dev/shm namespace token as the key shm_namespace_id of GetServerInfo's scheduler_info.
import * as grpc from '@grpc/grpc-js';
import * as ts from '../gen/tokenspeed/grpc/scheduler.ts';
import { placeTensor, type PlacementContext } from '../transport/placement.ts';
import { messageFor, type Engine, type EngineConnection, type EngineEvent, type EngineRequest, type WireRequest } from './engine.ts';
import { GRPC_CHANNEL_OPTIONS, grpcTarget, readGenerateStream, unary } from './grpc.ts';
import { modelLabels, setLabel } from './labels.ts';
import { tensorDataFromPlaced } from './tensor-data.ts';
import { encoderBytes, int64Bytes } from './tensors.ts';

async function buildRequest(req: EngineRequest, ctx: PlacementContext): Promise<WireRequest> {
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
  const message = ts.GenerateRequest.fromPartial({
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
  return { runtime: 'tokenspeed', message };
}

/** The neutral event of a TokenSpeed Generate response. */
export function tokenSpeedEvent(res: ts.GenerateResponse): EngineEvent | undefined {
  const r = res.response;
  if (r?.$case === 'chunk') return { kind: 'chunk', tokenIds: r.value.tokenIds, promptTokens: r.value.promptTokens, completionTokens: r.value.completionTokens };
  if (r?.$case === 'complete') {
    const v = r.value;
    return { kind: 'complete', tokenIds: v.outputIds, finishReason: v.finishReason, promptTokens: v.promptTokens, completionTokens: v.completionTokens, cachedTokens: v.cachedTokens };
  }
  return undefined;
}

function connect(url: string): EngineConnection {
  const client = new ts.TokenSpeedSchedulerClient(grpcTarget(url), grpc.credentials.createInsecure(), GRPC_CHANNEL_OPTIONS);
  return {
    runtime: 'tokenspeed',
    url,
    generate(request, options, sink) {
      const call = client.generate(messageFor<ts.GenerateRequest>(request, 'tokenspeed'), new grpc.Metadata(), { deadline: options.deadline });
      return readGenerateStream(call, tokenSpeedEvent, sink);
    },
    abort(requestId, reason) {
      client.abort({ requestId, reason }, new grpc.Metadata(), { deadline: Date.now() + 2000 }, () => {});
    },
    health: (timeoutMs) => unary(client.healthCheck.bind(client), {}, timeoutMs),
    async info(timeoutMs) {
      const labels: Record<string, string> = {};
      const model = await unary(client.getModelInfo.bind(client), {}, timeoutMs);
      const server = await unary(client.getServerInfo.bind(client), {}, timeoutMs);
      modelLabels(labels, model);
      setLabel(labels, 'model_dtype', model.modelDtype);
      setLabel(labels, 'multimodal_encoder_dtype', model.multimodalEncoderDtype);
      setLabel(labels, 'shm_namespace_id', server.schedulerInfo?.shm_namespace_id);
      setLabel(labels, 'tokenspeed_version', server.tokenspeedVersion);
      return { labels };
    },
    close: () => client.close(),
  };
}

export const tokenSpeedEngine: Engine = { runtime: 'tokenspeed', connect, buildRequest };
