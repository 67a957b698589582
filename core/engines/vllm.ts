// The vLLM engine (package vllm.grpc.engine). Its GenerateRequest carries one batched
// MultimodalInputs: the float32 pixel_values of every image concatenated in prompt order,
// image_grid_thw as an int64 [n, 3] side tensor, the placeholder ranges, im_token_id, and
// the keys Qwen-VL's field config needs (pixel_values is flat, sized by image_grid_thw; the
// grid is batched and stays on the CPU). Every tensor is placed through placeTensor.
// Discovery labels: server_type and shm_namespace_id (GetServerInfoResponse field 10).
import * as grpc from '@grpc/grpc-js';
import * as vllm from '../gen/vllm/grpc/engine.ts';
import { placeTensor, type PlacementContext } from '../transport/placement.ts';
import { messageFor, type Engine, type EngineConnection, type EngineEvent, type EngineRequest, type WireRequest } from './engine.ts';
import { GRPC_CHANNEL_OPTIONS, grpcTarget, readGenerateStream, unary } from './grpc.ts';
import { modelLabels, setLabel } from './labels.ts';
import { tensorDataFromPlaced } from './tensor-data.ts';
import { float32Values, int64Bytes } from './tensors.ts';

async function buildRequest(req: EngineRequest, ctx: PlacementContext): Promise<WireRequest> {
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
  const message = vllm.GenerateRequest.fromPartial({
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
  return { runtime: 'vllm', message };
}

/** The neutral event of a vLLM Generate response. */
export function vllmEvent(res: vllm.GenerateResponse): EngineEvent | undefined {
  const r = res.response;
  if (r?.$case === 'chunk') return { kind: 'chunk', tokenIds: r.value.tokenIds, promptTokens: r.value.promptTokens, completionTokens: r.value.completionTokens };
  if (r?.$case === 'complete') {
    const v = r.value;
    return { kind: 'complete', tokenIds: v.outputIds, finishReason: v.finishReason, promptTokens: v.promptTokens, completionTokens: v.completionTokens, cachedTokens: v.cachedTokens };
  }
  return undefined;
}

function connect(url: string): EngineConnection {
  const client = new vllm.VllmEngineClient(grpcTarget(url), grpc.credentials.createInsecure(), GRPC_CHANNEL_OPTIONS);
  return {
    runtime: 'vllm',
    url,
    generate(request, options, sink) {
      const call = client.generate(messageFor<vllm.GenerateRequest>(request, 'vllm'), new grpc.Metadata(), { deadline: options.deadline });
      return readGenerateStream(call, vllmEvent, sink);
    },
    abort(requestId) {
      client.abort({ requestIds: [requestId] }, new grpc.Metadata(), { deadline: Date.now() + 2000 }, () => {});
    },
    health: (timeoutMs) => unary(client.healthCheck.bind(client), {}, timeoutMs),
    async info(timeoutMs) {
      const labels: Record<string, string> = {};
      const model = await unary(client.getModelInfo.bind(client), {}, timeoutMs);
      const server = await unary(client.getServerInfo.bind(client), {}, timeoutMs);
      modelLabels(labels, model);
      setLabel(labels, 'server_type', server.serverType);
      setLabel(labels, 'shm_namespace_id', server.shmNamespaceId);
      return { labels };
    },
    close: () => client.close(),
  };
}

export const vllmEngine: Engine = { runtime: 'vllm', connect, buildRequest };
