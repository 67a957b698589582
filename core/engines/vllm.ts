// The vLLM engine (package vllm.grpc.engine). Its GenerateRequest carries one batched
// MultimodalInputs as the gateway builds it: the float32 pixel_values of every image
// concatenated in prompt order, and the field layout the servicer hands vLLM's
// MultiModalFieldConfig: pixel_values flat, split into images by patches_per_image (int64
// [n]); image_grid_thw (int64 [n, 3]) and patches_per_image batched; the grid kept on the CPU;
// one BLAKE3 media hash and one placeholder range per image (its whole sequence where it holds
// separators: Llama 4's), im_token_id, from which the servicer masks the positions that take
// features. Every tensor is
// placed through placeTensor. Sampling as the gateway fills it (sampling.ts); under sequential
// PD the KV handoff of the prefill worker's connector (kvHandoff). Discovery labels:
// server_type, shm_namespace_id (GetServerInfoResponse field 10), kv_connector, kv_role,
// kv_engine_id, dp_size, and the model's sampling defaults. The encoder input is always
// float32: the vLLM servicer accepts float32, int64 and uint32 only (and casts floats to the
// model's dtype itself).
import { randomBytes } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import * as vllm from '../gen/vllm/grpc/engine.ts';
import { mediaHashHex } from '../multimodal/media-hash.ts';
import { placeTensor, type PlacementContext } from '../transport/placement.ts';
import type { Engine, EngineCapabilities, EngineRequest, KvHandoff, KvHandoffPrefill, WireRequest } from './engine.ts';
import { ABORT_DEADLINE_MS, GRPC_CHANNEL_OPTIONS, grpcConnection, grpcTarget, unary } from './grpc.ts';
import { modelLabels, setLabel } from './labels.ts';
import type { SamplingOptions } from './sampling.ts';
import { tensorDataFromPlaced } from './tensor-data.ts';
import { concatenatedPixels, stackedImageTensors } from './tensors.ts';
import { wholeRange } from '../multimodal/prompt.ts';

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
  // It reads every /dev/shm tensor (O_RDONLY, pread) and unlinks it.
  attachesShmReadWrite: () => false,
  stopStrings: true,
};

/** vLLM's KV connectors the gateway tells apart (exact names, as GetServerInfo reports kv_transfer_config.kv_connector). */
export const NIXL_CONNECTOR = 'NixlConnector';
export const MOONCAKE_CONNECTOR = 'MooncakeConnector';

/** A UUID version 7 (48-bit Unix milliseconds, then random bits), as the gateway mints Mooncake transfer ids. */
function uuidV7(): string {
  const b = randomBytes(16);
  b.writeUIntBE(Date.now(), 0, 6);
  b[6] = (b[6]! & 0x0f) | 0x70;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/**
 * The KV handoff by the prefill worker's kv_connector, as the gateway picks it
 * (request_execution.rs): NIXL, the prefill asked to keep the KV for a remote decode and the
 * decode given what the prefill returned; Mooncake with the worker's engine id known, a
 * transfer id the router mints and the decode's parameters built from it; Mooncake without
 * one (or with data parallelism, whose per-rank engine ids this router does not pin), the
 * legacy typed host and port; any other connector or none, no tag: the decode takes what the
 * prefill returned, if anything, else computes the prompt again. Unlike the gateway (which
 * strips the decode's mm_inputs in every mode) a decode that recomputes gets the pixels, or
 * the model would read the image's placeholder tokens as text.
 */
function kvHandoff(prefill: KvHandoffPrefill): KvHandoff {
  const connector = prefill.labels.kv_connector || undefined;
  const recompute = (returned: string | undefined, why: string) =>
    returned !== undefined ? { kvTransferParamsJson: returned, pixels: false } : { pixels: true, recomputed: why };
  if (connector === NIXL_CONNECTOR) {
    return {
      mode: 'nixl',
      connector,
      says: 'NIXL: the prefill is asked to keep the KV for a remote decode; the decode gets what the prefill returns',
      prefill: { kvTransferParamsJson: JSON.stringify({ do_remote_decode: true, do_remote_prefill: false }) },
      decode: (returned) => recompute(returned, 'the NIXL prefill returned no kv_transfer_params_json: the decode computes the prompt again'),
    };
  }
  if (connector === MOONCAKE_CONNECTOR) {
    const engineId = prefill.labels.kv_engine_id;
    const dataParallel = Number(prefill.labels.dp_size ?? prefill.labels.data_parallel_size ?? 1) > 1;
    if (engineId && !dataParallel) {
      const transferId = `xfer-${uuidV7()}`;
      return {
        mode: 'mooncake',
        connector,
        says: `Mooncake: a transfer id per request; the decode pulls from engine ${engineId} at http://${prefill.host}:${prefill.port}`,
        prefill: { kvTransferParamsJson: JSON.stringify({ do_remote_decode: true, do_remote_prefill: false, transfer_id: transferId }) },
        decode: () => ({
          pixels: false,
          kvTransferParamsJson: JSON.stringify({
            do_remote_decode: false,
            do_remote_prefill: true,
            transfer_id: transferId,
            remote_engine_id: engineId,
            remote_bootstrap_addr: `http://${prefill.host}:${prefill.port}`,
          }),
        }),
      };
    }
    return {
      mode: 'mooncake_legacy',
      connector,
      says: `Mooncake without ${engineId ? 'a single engine id (data parallel)' : 'an engine id (kv_engine_id)'}: the legacy host and port ${prefill.host}:${prefill.port}`,
      prefill: {},
      decode: () => ({ pixels: false, kvTransferLegacy: { host: prefill.host, port: prefill.port } }),
    };
  }
  return {
    mode: 'none',
    connector,
    says: connector
      ? `${connector} is not a connector the gateway hands KV over with: no tag; the decode takes what the prefill returns, else computes the prompt again`
      : 'no KV connector: the decode takes what the prefill returns, else computes the prompt again',
    prefill: {},
    decode: (returned) =>
      recompute(
        returned,
        `the prefill worker has ${connector ? `KV connector ${connector}, which the gateway does not hand over with` : 'no KV connector'}: the decode computes the prompt again`,
      ),
  };
}

/** vLLM's SamplingParams, as the gateway fills them: temperature only when given, top_k 0 for off, special tokens skipped. */
function samplingParams(s: SamplingOptions, prefillOnly: boolean): vllm.SamplingParams {
  const common = {
    ...(s.temperature !== undefined ? { temperature: s.temperature } : {}),
    topP: s.topP,
    topK: Math.max(0, s.topK),
    minP: s.minP,
    frequencyPenalty: s.frequencyPenalty,
    presencePenalty: s.presencePenalty,
    repetitionPenalty: s.repetitionPenalty,
    skipSpecialTokens: true,
    spacesBetweenSpecialTokens: true,
    n: 1,
  };
  // The prefill leg of sequential PD: one token, no stop conditions, the EOS ignored (vLLM hands the KV over once length-capped).
  if (prefillOnly) return vllm.SamplingParams.fromPartial({ ...common, maxTokens: 1, minTokens: 0, stop: [], stopTokenIds: [], ignoreEos: true });
  return vllm.SamplingParams.fromPartial({ ...common, ...(s.maxTokens !== undefined ? { maxTokens: s.maxTokens } : {}), stop: s.stop });
}

/**
 * The batched MultimodalInputs as the gateway lays out the family's fields (for Qwen,
 * registry/qwen_vl.rs): pixel_values flat, split into images by the tensor the family names
 * (patches_per_image); the family's batched tensors one row per image (image_grid_thw,
 * patches_per_image), those it keeps on the CPU named so (the grid); a tensor with no field
 * layout (Phi-3-vision's num_img_tokens) in no key list, so vLLM shares it among the items;
 * one hash and one placeholder range per image.
 */
async function mmInputsOf(req: EngineRequest, ctx: PlacementContext): Promise<vllm.MultimodalInputs> {
  const { pixels, shape } = concatenatedPixels(req.images);
  const pixelValues = await placeTensor(ctx, {
    name: 'pixel_values',
    shape,
    dtype: 'float32',
    bytes: new Uint8Array(pixels.buffer, pixels.byteOffset, pixels.byteLength),
  });
  const stacked = stackedImageTensors(req.images);
  const modelSpecificTensors: Record<string, vllm.TensorData> = {};
  for (const t of stacked)
    modelSpecificTensors[t.name] = tensorDataFromPlaced(await placeTensor(ctx, { name: t.name, shape: t.shape, dtype: t.dtype, bytes: t.bytes }));
  const sizes = stacked.find((t) => t.splitsPixels);
  return vllm.MultimodalInputs.fromPartial({
    pixelValues: tensorDataFromPlaced(pixelValues),
    modelSpecificTensors,
    imTokenId: req.imageTokenId,
    mmPlaceholders: req.images.map((im) => wholeRange(im.placeholder)),
    mmHashes: req.images.map((im) => mediaHashHex(im.mediaHash)),
    // pixel_values flat by the family's sizes tensor, or batched (the gateway's vllm_field_layout_keys).
    batchedKeys: [...stacked.filter((t) => !t.shared).map((t) => t.name), ...(sizes ? [] : ['pixel_values'])],
    flatKeys: sizes ? { pixel_values: sizes.name } : {},
    keepOnCpuKeys: stacked.filter((t) => t.keepOnCpu).map((t) => t.name),
    modality: 1,
  });
}

async function buildRequest(req: EngineRequest, ctx: PlacementContext): Promise<WireRequest> {
  // A leg that does not consume the pixels (a decode that takes the KV) gets no mm_inputs at
  // all, as the gateway sends it: the servicer ignores mm_inputs without pixel_values anyway.
  const mmInputs = req.images.length > 0 && (req.leg?.pixels ?? true) ? await mmInputsOf(req, ctx) : undefined;
  const prefillOnly = req.leg?.prefillOnly === true;
  const message = vllm.GenerateRequest.fromPartial({
    requestId: req.requestId,
    input: { $case: 'tokenized', value: { originalText: req.text, inputIds: req.inputIds } },
    samplingParams: samplingParams(req.sampling, prefillOnly),
    stream: prefillOnly ? false : req.stream,
    ...(mmInputs ? { mmInputs } : {}),
    ...(req.leg?.kvTransferParamsJson !== undefined ? { kvTransferParamsJson: req.leg.kvTransferParamsJson } : {}),
    ...(req.leg?.kvTransferLegacy ? { kvTransferParams: { remoteHost: req.leg.kvTransferLegacy.host, remotePort: req.leg.kvTransferLegacy.port } } : {}),
  });
  return { runtime: 'vllm', message };
}

function connect(url: string) {
  return grpcConnection({
    runtime: 'vllm',
    url,
    client: new vllm.VllmEngineClient(grpcTarget(url), grpc.credentials.createInsecure(), GRPC_CHANNEL_OPTIONS),
    abort(client, requestId) {
      // Fire and forget: the router has cancelled its Generate call already; the Abort only spares
      // the worker the rest of the work, so neither its answer nor its failure changes anything.
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
      setLabel(labels, 'kv_engine_id', server.kvEngineId);
      if (server.dataParallelSize > 1) setLabel(labels, 'dp_size', String(server.dataParallelSize));
      return { labels };
    },
  });
}

export const vllmEngine: Engine = { runtime: 'vllm', capabilities, connect, buildRequest, kvHandoff };
