// The reference worker's TokenSpeed face (service TokenSpeedScheduler): where this protocol
// keeps an image's tensors (one MultimodalItem per image: encoder_input plus the
// model_specific_tensors image_grid_thw and patches_per_image), what it advertises
// (multimodal_encoder_dtype bfloat16, the /dev/shm token inside scheduler_info), and its
// response messages. Reading and checking are shared (receive.ts).
import type * as grpc from '@grpc/grpc-js';
import { TokenSpeedSchedulerService, type GenerateRequest, type GenerateResponse, type TokenSpeedSchedulerServer } from '../gen/tokenspeed/grpc/scheduler.ts';
import { wireTensorFromTensorData } from '../engines/tensor-data.ts';
import { ENCODER_DTYPES, INDEX_DTYPES, RequestInvalid, serveGenerate, type GenerateServing, type ImageCheck, type NamedTensor, type WorkerIdentity } from './receive.ts';

function tensorsOf(req: GenerateRequest): { images: number; tensors: NamedTensor[]; checks: ImageCheck[] } {
  const items = req.mmInputs?.items ?? [];
  const tensors: NamedTensor[] = [];
  const checks: ImageCheck[] = [];
  items.forEach((item, i) => {
    const suffix = items.length > 1 ? `[${i}]` : '';
    if (!item.encoderInput) throw new RequestInvalid(`item ${i} has no encoder_input`);
    if (!item.modelSpecificTensors.image_grid_thw) throw new RequestInvalid(`item ${i} has no image_grid_thw tensor`);
    tensors.push({ name: `encoder_input${suffix}`, tensor: wireTensorFromTensorData(item.encoderInput), dtypes: ENCODER_DTYPES });
    for (const [key, t] of Object.entries(item.modelSpecificTensors).sort(([a], [b]) => (a < b ? -1 : 1))) {
      tensors.push({ name: `${key}${suffix}`, tensor: wireTensorFromTensorData(t), ...(key === 'image_grid_thw' || key === 'patches_per_image' ? { dtypes: INDEX_DTYPES } : {}) });
    }
    checks.push({ label: `item ${i}`, encoder: `encoder_input${suffix}`, grid: `image_grid_thw${suffix}`, gridRow: 0, placeholders: item.placeholders, placeholderTokenId: item.placeholderTokenId });
  });
  return { images: items.length, tensors, checks };
}

export function addTokenSpeedService(server: grpc.Server, s: GenerateServing, id: WorkerIdentity): void {
  const { model } = s;
  const impl: TokenSpeedSchedulerServer = {
    generate(call) {
      const req = call.request;
      serveGenerate<GenerateResponse>(
        s,
        call,
        () => ({ requestId: req.requestId, stream: req.stream, inputIds: req.tokenized?.inputIds ?? [], maxTokens: req.samplingParams?.maxNewTokens, ...tensorsOf(req) }),
        {
          chunk: (tokenIds, completionTokens, promptTokens) => ({ requestId: req.requestId, response: { $case: 'chunk', value: { tokenIds, promptTokens, completionTokens, cachedTokens: 0, outputLogprobs: undefined, index: 0 } } }),
          complete: (outputIds, finishReason, promptTokens, completionTokens) => ({
            requestId: req.requestId,
            response: { $case: 'complete', value: { outputIds, finishReason, promptTokens, completionTokens, cachedTokens: 0, outputLogprobs: undefined, matchedStop: undefined, index: 0 } },
          }),
        },
      );
    },
    healthCheck(_call, cb) {
      cb(null, { healthy: true, message: 'reference worker ready' });
    },
    abort(call, cb) {
      cb(null, { success: s.active.delete(call.request.requestId), message: '' });
    },
    getModelInfo(_call, cb) {
      cb(null, {
        modelPath: model.path,
        tokenizerPath: model.path,
        servedModelName: 'mmtc-reference',
        modelType: model.modelType,
        architectures: model.architectures,
        maxContextLength: model.maxContextLength,
        maxReqInputLen: model.maxContextLength,
        vocabSize: model.vocabSize,
        eosTokenIds: model.eosTokenIds,
        padTokenId: 0,
        bosTokenId: 0,
        weightVersion: 'reference',
        defaultSamplingParamsJson: '',
        supportsVision: true,
        supportsMultimodal: true,
        supportedModalities: [1],
        modelDtype: 'bfloat16',
        multimodalEncoderDtype: 'bfloat16',
      });
    },
    getServerInfo(_call, cb) {
      cb(null, {
        serverArgs: { model_path: model.path },
        schedulerInfo: id.token ? { shm_namespace_id: id.token } : {},
        activeRequests: s.active.size,
        isPaused: false,
        uptimeSeconds: (Date.now() - id.started) / 1000,
        maxTotalNumTokens: model.maxContextLength,
        tokenspeedVersion: 'mmtc-reference',
        startTime: { seconds: BigInt(Math.floor(id.started / 1000)), nanos: (id.started % 1000) * 1e6 },
      });
    },
  };
  server.addService(TokenSpeedSchedulerService, impl);
}
