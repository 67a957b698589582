// The TokenSpeed engine (package tokenspeed.grpc.scheduler). Its GenerateRequest carries one
// MultimodalItem per image in prompt order: the encoder input in the resolved wire dtype,
// image_grid_thw and patches_per_image as int64 side tensors, the image's placeholder range
// (Llama 4: its <|patch|> runs) and token id, and a content hash; every tensor is placed (inline or /dev/shm) through
// placeTensor. Discovery labels: model dtype and multimodal_encoder_dtype from GetModelInfo,
// the /dev/shm namespace token as the key shm_namespace_id of GetServerInfo's scheduler_info.
//
// The encoder-input dtype (docs/transport.md, "Tensor dtypes"):
//   SMG_TOKENSPEED_<IMAGE|VIDEO|AUDIO>_ENCODER_INPUT_DTYPE -> SMG_TOKENSPEED_ENCODER_INPUT_DTYPE
//   -> worker label multimodal_encoder_dtype -> bfloat16; an unknown spelling warns and uses float32.
import * as grpc from '@grpc/grpc-js';
import * as enc from '../gen/tokenspeed/grpc/encoder.ts';
import * as ts from '../gen/tokenspeed/grpc/scheduler.ts';
import { parseEncoderDtype } from '../transport/dtype.ts';
import { placeTensor, type PlacementContext } from '../transport/placement.ts';
import {
  messageFor,
  type EncodeItemRequest,
  type Engine,
  type EncoderDtypeChoice,
  type EngineCapabilities,
  type EngineConnection,
  type EngineFailure,
  type EngineRequest,
  type Modality,
  type PreparedImage,
  type WireRequest,
} from './engine.ts';
import type { EncoderDtype } from '../transport/vocabulary.ts';
import { ABORT_DEADLINE_MS, engineFailure, GRPC_CHANNEL_OPTIONS, grpcConnection, grpcTarget, unary } from './grpc.ts';
import { modelLabels, setLabel } from './labels.ts';
import { everyValueSet } from './sampling.ts';
import { tokenSpeedContentHash } from '../multimodal/media-hash.ts';
import { tensorDataFromPlaced } from './tensor-data.ts';
import { encoderBytes, int64Bytes, stackedImageTensors, type StackedTensor } from './tensors.ts';
import { embedRanges } from '../multimodal/prompt.ts';

/** TokenSpeed's encoder-input dtype chain (the header). */
export function tokenSpeedEncoderDtype(
  modality: Modality,
  env: Readonly<Record<string, string | undefined>>,
  labels: Readonly<Record<string, string>>,
): EncoderDtypeChoice {
  const perModality = `SMG_TOKENSPEED_${modality.toUpperCase()}_ENCODER_INPUT_DTYPE`;
  const candidates: Array<[string, string | undefined]> = [
    [perModality, env[perModality]],
    ['SMG_TOKENSPEED_ENCODER_INPUT_DTYPE', env.SMG_TOKENSPEED_ENCODER_INPUT_DTYPE],
    ['label multimodal_encoder_dtype', labels.multimodal_encoder_dtype],
  ];
  for (const [source, raw] of candidates) {
    if (raw === undefined || raw.trim() === '') continue;
    const dtype = parseEncoderDtype(raw);
    if (dtype) return { dtype, source };
    return {
      dtype: 'float32',
      source,
      warning: `unknown encoder dtype '${raw}' from ${source}: expected float32|fp32|f32, bfloat16|bf16 or float16|fp16|f16|half; using float32`,
    };
  }
  return { dtype: 'bfloat16', source: 'default' };
}

const capabilities: EngineCapabilities = {
  label: 'TokenSpeed',
  description: 'TokenSpeed (tokenspeed.grpc.scheduler): one item per image, /dev/shm lane, bfloat16 encoder input by default',
  shmLane: true,
  tokenAdvertisedIn: "the key shm_namespace_id of GetServerInfo's scheduler_info",
  encoderTensor: 'per_image',
  sendsEncodedImages: false,
  pd: 'parallel',
  encodes: true,
  gateway: { rdmaLane: true, epdEncode: true },
  encoderDtypes: ['float32', 'bfloat16', 'float16'],
  encoderDtype: tokenSpeedEncoderDtype,
  // The servicer hands an SHM encoder input already in the model's dtype to the scheduler by
  // name, which attaches it with SharedMemory(name): O_RDWR and a shared read-write map (it
  // reads every other tensor, and an Encode call's, with O_RDONLY). A worker that has not said
  // its model dtype is taken to attach: that is the servicer's rule when it has none.
  attachesShmReadWrite: (call, dtype, labels) => call === 'generate' && (labels.model_dtype === undefined || labels.model_dtype === dtype),
  stopStrings: true,
};

/**
 * One image's MultimodalItem: its encoder input (unless `pixels` is false), grid, patch count,
 * placeholder and content hash; every tensor placed. `readWrite`: the worker attaches the
 * encoder input's file read-write.
 */
async function itemOf(
  ctx: PlacementContext,
  image: PreparedImage,
  suffix: string,
  dtype: EncoderDtype,
  imageTokenId: number,
  pixels: boolean,
  readWrite: boolean,
  shared: readonly StackedTensor[],
): Promise<ts.MultimodalItem> {
  const encoder = pixels
    ? await placeTensor(ctx, { name: `encoder_input${suffix}`, shape: image.encoderShape, dtype, bytes: encoderBytes(image, dtype), readWrite })
    : undefined;
  // The family's tensors of this image (image_grid_thw, patches_per_image), each placed under
  // its name; one with no field layout (num_img_tokens) whole, every image's values, as the
  // gateway gives each item (assemble.rs, serialize_model_specific_for_item).
  const modelSpecificTensors: Record<string, ts.TensorData> = {};
  for (const t of image.modelTensors) {
    const whole = t.layout === 'shared' ? shared.find((s) => s.name === t.name) : undefined;
    modelSpecificTensors[t.name] = tensorDataFromPlaced(
      await placeTensor(ctx, { name: `${t.name}${suffix}`, shape: whole?.shape ?? t.shape, dtype: t.dtype, bytes: whole?.bytes ?? int64Bytes(t.values) }),
    );
  }
  return ts.MultimodalItem.fromPartial({
    modality: 1,
    contentHash: tokenSpeedContentHash(image.mediaHash),
    ...(encoder ? { encoderInput: tensorDataFromPlaced(encoder) } : {}),
    modelSpecificTensors,
    placeholders: embedRanges(image.placeholder),
    placeholderTokenId: imageTokenId,
  });
}

async function buildRequest(req: EngineRequest, ctx: PlacementContext): Promise<WireRequest> {
  const items: ts.MultimodalItem[] = [];
  const pixels = req.leg?.pixels ?? true;
  const shared = stackedImageTensors(req.images, 'shared');
  for (const [i, image] of req.images.entries())
    items.push(await itemOf(ctx, image, req.images.length > 1 ? `[${i}]` : '', req.encoderDtype, req.imageTokenId, pixels, req.encoderReadWrite, shared));
  const leg = req.leg;
  const message = ts.GenerateRequest.fromPartial({
    requestId: req.requestId,
    tokenized: { inputIds: req.inputIds, originalText: req.text },
    samplingParams: ts.SamplingParams.fromPartial(everyValueSet(req.sampling, capabilities.stopStrings)),
    stream: req.stream,
    ...(items.length ? { mmInputs: { items } } : {}),
    ...(leg?.kvBootstrap
      ? { kvBootstrapInfo: { bootstrapHost: leg.kvBootstrap.host, bootstrapPort: leg.kvBootstrap.port, bootstrapRoom: leg.kvBootstrap.room } }
      : {}),
    ...(leg?.encodeBootstrap?.length
      ? {
          encodeBootstrapInfo: {
            items: leg.encodeBootstrap.map((e) => ({ itemIndex: e.item, bootstrapHost: e.host, bootstrapPort: e.port, bootstrapRoom: e.room })),
          },
        }
      : {}),
  });
  return { runtime: 'tokenspeed', message };
}

/** One image's EncodeRequest: exactly that item (with its encoder input) and exactly its room. */
async function buildEncodeRequest(req: EncodeItemRequest, ctx: PlacementContext): Promise<WireRequest> {
  // The encode worker reads its encoder input (O_RDONLY) and publishes a segment of its own.
  // A tensor with no field layout is the request's, whole, in every item (the gateway's
  // encode items too: assemble.rs, serialize_model_specific_for_item).
  const shared = stackedImageTensors(req.requestImages, 'shared');
  const item = await itemOf(ctx, req.image, `[${req.index}]`, req.encoderDtype, req.imageTokenId, true, false, shared);
  const message = enc.EncodeRequest.fromPartial({
    requestId: `encode-${req.requestId}-${req.index}`,
    mmInputs: { items: [item] },
    items: [{ bootstrapRoom: req.room }],
  });
  return { runtime: 'tokenspeed', message: { encode: message } };
}

function connect(url: string): EngineConnection {
  const encoder = new enc.TokenSpeedEncoderClient(grpcTarget(url), grpc.credentials.createInsecure(), GRPC_CHANNEL_OPTIONS);
  const connection = grpcConnection({
    runtime: 'tokenspeed',
    url,
    client: new ts.TokenSpeedSchedulerClient(grpcTarget(url), grpc.credentials.createInsecure(), GRPC_CHANNEL_OPTIONS),
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
      setLabel(labels, 'model_dtype', model.modelDtype);
      setLabel(labels, 'multimodal_encoder_dtype', model.multimodalEncoderDtype);
      setLabel(labels, 'shm_namespace_id', server.schedulerInfo?.shm_namespace_id);
      setLabel(labels, 'tokenspeed_version', server.tokenspeedVersion);
      setLabel(labels, 'disaggregation_mode', server.schedulerInfo?.disaggregation_mode);
      return { labels };
    },
  });
  return {
    ...connection,
    encode(request, options) {
      const { encode } = messageFor<{ encode: enc.EncodeRequest }>(request, 'tokenspeed');
      let call: grpc.ClientUnaryCall | undefined;
      const done = new Promise<{ accepted: boolean } | { failure: EngineFailure }>((resolve) => {
        call = encoder.encode(encode, new grpc.Metadata(), { deadline: options.deadline }, (err, res) =>
          resolve(err ? { failure: engineFailure(err) } : { accepted: res.accepted }),
        );
      });
      return { done, cancel: () => call?.cancel() };
    },
    close() {
      connection.close();
      encoder.close();
    },
  };
}

export const tokenSpeedEngine: Engine = { runtime: 'tokenspeed', capabilities, connect, buildRequest, buildEncodeRequest };
