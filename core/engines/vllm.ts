// The vLLM engine (package vllm.grpc.engine). Its GenerateRequest carries one batched
// MultimodalInputs: the float32 pixel_values of every image concatenated in prompt order,
// image_grid_thw as an int64 [n, 3] side tensor, the placeholder ranges, im_token_id, and
// the keys Qwen-VL's field config needs (pixel_values is flat, sized by image_grid_thw; the
// grid is batched and stays on the CPU). Every tensor is placed through placeTensor.
// Discovery labels: server_type and shm_namespace_id (GetServerInfoResponse field 10).
// The encoder input is always float32: the vLLM worker accepts float32, int64 and uint32 only.
import * as grpc from '@grpc/grpc-js';
import * as vllm from '../gen/vllm/grpc/engine.ts';
import { placeTensor, type PlacedTensor, type PlacementContext } from '../transport/placement.ts';
import type { Engine, EngineCapabilities, EngineRequest, WireRequest } from './engine.ts';
import { ABORT_DEADLINE_MS, GRPC_CHANNEL_OPTIONS, grpcConnection, grpcTarget, unary } from './grpc.ts';
import { modelLabels, setLabel } from './labels.ts';
import { tensorDataFromPlaced } from './tensor-data.ts';
import { concatenatedPixels, int64Bytes } from './tensors.ts';

const capabilities: EngineCapabilities = {
  label: 'vLLM',
  description: 'vLLM (vllm.grpc.engine): one batched pixel_values per request, /dev/shm lane, float32 only',
  shmLane: true,
  tokenAdvertisedIn: 'GetServerInfoResponse.shm_namespace_id (field 10)',
  encoderTensor: 'per_request',
  sendsEncodedImages: false,
  pd: 'sequential',
  encodes: false,
  gateway: { rdmaLane: false, epdEncode: false },
  encoderDtypes: ['float32'],
  encoderDtype: () => ({ dtype: 'float32', source: 'vllm accepts only float32' }),
};

/** What a prefill leg asks of vLLM's KV connector: keep the KV for a remote decode. */
const PREFILL_KV_TRANSFER_PARAMS = JSON.stringify({ do_remote_decode: true, do_remote_prefill: false });

async function buildRequest(req: EngineRequest, ctx: PlacementContext): Promise<WireRequest> {
  let mmInputs: vllm.MultimodalInputs | undefined;
  if (req.images.length > 0) {
    // A leg that does not consume the pixels (the decode) gets the images' metadata only.
    let pixelValues: PlacedTensor | undefined;
    if (req.leg?.pixels ?? true) {
      const { pixels, rows, features } = concatenatedPixels(req.images);
      pixelValues = await placeTensor(ctx, { name: 'pixel_values', shape: [rows, features], dtype: 'float32', bytes: new Uint8Array(pixels.buffer, pixels.byteOffset, pixels.byteLength) });
    }
    const grid = await placeTensor(ctx, { name: 'image_grid_thw', shape: [req.images.length, 3], dtype: 'int64', bytes: int64Bytes(req.images.flatMap((im) => im.gridThw)) });
    mmInputs = vllm.MultimodalInputs.fromPartial({
      ...(pixelValues ? { pixelValues: tensorDataFromPlaced(pixelValues) } : {}),
      modelSpecificTensors: { image_grid_thw: tensorDataFromPlaced(grid) },
      imTokenId: req.imageTokenId,
      mmPlaceholders: req.images.map((im) => im.placeholder),
      mmHashes: req.images.map((im) => im.contentHash.toString('hex')),
      batchedKeys: ['image_grid_thw'],
      ...(pixelValues ? { flatKeys: { pixel_values: 'image_grid_thw' } } : {}),
      keepOnCpuKeys: ['image_grid_thw'],
      modality: 1,
    });
  }
  const message = vllm.GenerateRequest.fromPartial({
    requestId: req.requestId,
    input: { $case: 'tokenized', value: { originalText: req.text, inputIds: req.inputIds } },
    samplingParams: req.leg?.prefillOnly
      ? // The prefill leg: one token, no stop conditions, the EOS ignored (vLLM returns the KV handoff once length-capped).
        { ...(req.sampling.temperature !== undefined ? { temperature: req.sampling.temperature } : {}), topP: req.sampling.topP ?? 1, maxTokens: 1, minTokens: 0, n: 1, stop: [], stopTokenIds: [], ignoreEos: true }
      : {
          ...(req.sampling.temperature !== undefined ? { temperature: req.sampling.temperature } : {}),
          topP: req.sampling.topP ?? 1,
          ...(req.sampling.maxTokens !== undefined ? { maxTokens: req.sampling.maxTokens } : {}),
          stop: req.sampling.stop ?? [],
        },
    stream: req.leg?.prefillOnly ? false : req.stream,
    ...(mmInputs ? { mmInputs } : {}),
    // The prefill leg asks for a KV handoff to a remote decode; the decode leg relays what the prefill returned.
    ...(req.leg?.kvTransferParamsJson !== undefined ? { kvTransferParamsJson: req.leg.kvTransferParamsJson } : req.leg?.prefillOnly ? { kvTransferParamsJson: PREFILL_KV_TRANSFER_PARAMS } : {}),
  });
  return { runtime: 'vllm', message };
}

function connect(url: string) {
  return grpcConnection({
    runtime: 'vllm',
    url,
    client: new vllm.VllmEngineClient(grpcTarget(url), grpc.credentials.createInsecure(), GRPC_CHANNEL_OPTIONS),
    abort(client, requestId) {
      client.abort({ requestIds: [requestId] }, new grpc.Metadata(), { deadline: Date.now() + ABORT_DEADLINE_MS }, () => {});
    },
    async info(client, timeoutMs) {
      const labels: Record<string, string> = {};
      const model = await unary(client.getModelInfo.bind(client), {}, timeoutMs);
      const server = await unary(client.getServerInfo.bind(client), {}, timeoutMs);
      modelLabels(labels, model);
      setLabel(labels, 'server_type', server.serverType);
      setLabel(labels, 'shm_namespace_id', server.shmNamespaceId);
      // Its KV connector and role, as the gateway reads them for PD.
      setLabel(labels, 'kv_connector', server.kvConnector);
      setLabel(labels, 'kv_role', server.kvRole);
      return { labels };
    },
  });
}

export const vllmEngine: Engine = { runtime: 'vllm', capabilities, connect, buildRequest };
