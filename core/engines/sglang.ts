// The SGLang engine (package sglang.grpc.scheduler). Its GenerateRequest carries one batched
// MultimodalInputs, as the gateway builds it for Qwen2/2.5/3-VL: the float32 pixel_values of
// every image concatenated in prompt order, model_specific_tensors image_grid_thw (int64
// [n, 3]) and patches_per_image (int64 [n]), each image's encoded bytes (image_data), the
// modality, the image token id and one placeholder range per image (Llama 4: each image's
// <|patch|> runs, as the gateway's placeholders_for_bindings gives SGLang an image's patches).
//
// Its TensorData has inline bytes only: no /dev/shm handle exists in this protocol, so this
// engine states no SHM lane and every decision for it is inline with the reason
// runtime_inline_only (core/transport/decision.ts), whatever the mode. Tensors still go
// through placeTensor, so every one has its traffic event and metrics.
//
// Sampling as the gateway fills it (sampling.ts): every value set, since the servicer passes
// SGLang's proto3 zeros through as real values (a repetition_penalty of 0 divides the logits
// by zero; top_k 0 is not "off") and the gRPC path runs no SamplingParams.verify(). The
// gateway's SGLang workers run with skip_tokenizer_init, which refuses stop strings: the
// stops that are one token travel as stop_token_ids, and the router matches and trims every
// stop string itself (core/router/stop-matcher.ts). Discovery labels come from GetModelInfo
// (the model's sampling defaults among them), GetServerInfo (server_type, sglang_version) and
// GetLoads (dp_rank_count); it advertises no /dev/shm token.
import * as grpc from '@grpc/grpc-js';
import * as sg from '../gen/sglang/grpc/scheduler.ts';
import { placeTensor, type PlacedTensor, type PlacementContext } from '../transport/placement.ts';
import type { Engine, EngineCapabilities, EngineRequest, WireRequest } from './engine.ts';
import { ABORT_DEADLINE_MS, GRPC_CHANNEL_OPTIONS, grpcConnection, grpcTarget, unary } from './grpc.ts';
import { modelLabels, setLabel } from './labels.ts';
import { everyValueSet } from './sampling.ts';
import { concatenatedPixels, stackedImageTensors } from './tensors.ts';
import { embedRanges } from '../multimodal/prompt.ts';

const capabilities: EngineCapabilities = {
  label: 'SGLang',
  description: 'SGLang (sglang.grpc.scheduler): one batched pixel_values per request, inline only (its TensorData has no /dev/shm handle), float32',
  shmLane: false,
  tokenAdvertisedIn: undefined,
  encoderTensor: 'per_request',
  sendsEncodedImages: true,
  pd: undefined,
  encodes: false,
  gateway: { rdmaLane: false, epdEncode: false },
  encoderDtypes: ['float32'],
  encoderDtype: () => ({ dtype: 'float32', source: 'sglang takes float32 pixel_values' }),
  attachesShmReadWrite: () => false,
  stopStrings: false,
};

/** A placed tensor as SGLang's TensorData: its bytes, which are always inline here. */
function inlineTensorData(placed: PlacedTensor, name: string): sg.TensorData {
  if (placed.payload.kind !== 'inline') throw new Error(`${name} was placed in /dev/shm, but the sglang protocol carries tensors inline only`);
  const b = placed.payload.bytes;
  return { data: Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength), shape: placed.shape, dtype: placed.dtype };
}

async function buildRequest(req: EngineRequest, ctx: PlacementContext): Promise<WireRequest> {
  let mmInputs: sg.MultimodalInputs | undefined;
  if (req.images.length > 0) {
    const { pixels, shape } = concatenatedPixels(req.images);
    const pixelValues = await placeTensor(ctx, {
      name: 'pixel_values',
      shape,
      dtype: 'float32',
      bytes: new Uint8Array(pixels.buffer, pixels.byteOffset, pixels.byteLength),
    });
    const modelSpecificTensors: Record<string, sg.TensorData> = {};
    for (const t of stackedImageTensors(req.images))
      modelSpecificTensors[t.name] = inlineTensorData(await placeTensor(ctx, { name: t.name, shape: t.shape, dtype: t.dtype, bytes: t.bytes }), t.name);
    mmInputs = sg.MultimodalInputs.fromPartial({
      pixelValues: inlineTensorData(pixelValues, 'pixel_values'),
      modelSpecificTensors,
      imageData: req.images.map((im, i) => {
        if (!im.encoded) throw new Error(`image ${i} has no encoded bytes; the sglang protocol sends them with its tensors`);
        return Buffer.from(im.encoded.buffer, im.encoded.byteOffset, im.encoded.byteLength);
      }),
      modalities: ['image'],
      imTokenId: req.imageTokenId,
      mmPlaceholders: req.images.flatMap((im) => embedRanges(im.placeholder)),
    });
  }
  const message = sg.GenerateRequest.fromPartial({
    requestId: req.requestId,
    tokenized: { originalText: req.text, inputIds: req.inputIds },
    // No stop strings (a skip_tokenizer_init worker refuses them): their one-token ones as ids.
    samplingParams: sg.SamplingParams.fromPartial(everyValueSet(req.sampling, capabilities.stopStrings)),
    logprobStartLen: -1,
    stream: req.stream,
    ...(mmInputs ? { mmInputs } : {}),
  });
  return { runtime: 'sglang', message };
}

function connect(url: string) {
  return grpcConnection({
    runtime: 'sglang',
    url,
    client: new sg.SglangSchedulerClient(grpcTarget(url), grpc.credentials.createInsecure(), GRPC_CHANNEL_OPTIONS),
    abort(client, requestId, reason) {
      // Fire and forget: the router has cancelled its Generate call already; the Abort only spares
      // the worker the rest of the work, so neither its answer nor its failure changes anything.
      client.abort({ requestId, reason }, new grpc.Metadata(), { deadline: Date.now() + ABORT_DEADLINE_MS }, () => {});
    },
    async info(client, timeoutMs) {
      const labels: Record<string, string> = {};
      const model = await unary(client.getModelInfo.bind(client), {}, timeoutMs);
      const server = await unary(client.getServerInfo.bind(client), {}, timeoutMs);
      modelLabels(labels, model);
      setLabel(labels, 'server_type', server.serverType);
      setLabel(labels, 'sglang_version', server.sglangVersion);
      // How many data-parallel ranks schedule its requests (GetLoads). Optional: a server without
      // it (UNIMPLEMENTED), or one that does not answer in time, gets every other label, not this one.
      const loads = await unary(client.getLoads.bind(client), sg.GetLoadsRequest.fromPartial({}), timeoutMs).catch(() => undefined);
      if (loads && loads.dpRankCount > 0) setLabel(labels, 'dp_rank_count', String(loads.dpRankCount));
      return { labels };
    },
  });
}

export const sglangEngine: Engine = { runtime: 'sglang', capabilities, connect, buildRequest };
