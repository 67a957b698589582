// The reference worker's vLLM face (service VllmEngine): where this protocol keeps the
// tensors (one batched MultimodalInputs: pixel_values for every image, image_grid_thw one
// row per image, one placeholder range per image), the dtypes vLLM accepts (float32, int64,
// uint32 — anything else is refused as vLLM refuses it), what it advertises
// (shm_namespace_id, field 10 of GetServerInfoResponse), and its response messages.
import type * as grpc from '@grpc/grpc-js';
import { VllmEngineService, type GenerateRequest, type GenerateResponse, type VllmEngineServer } from '../gen/vllm/grpc/engine.ts';
import { wireTensorFromTensorData } from '../engines/tensor-data.ts';
import { INDEX_DTYPES, RequestInvalid, serveGenerate, type GenerateServing, type ImageCheck, type NamedTensor, type ResponseBuilder, type WorkerIdentity } from './receive.ts';
import { serveVllmRoleGenerate } from './vllm-roles.ts';

// What the router sends as the encoder input (vLLM's Qwen-VL takes its pixel_values as float32).
const PIXEL_DTYPES = { allowed: new Set(['float32']), says: 'float32' };
const VLLM_DTYPES = { allowed: new Set(['float32', 'int64', 'uint32']), says: 'vLLM accepts float32, int64 and uint32 tensors' };

/** Where the request keeps its tensors; `pixels` false: a decode leg's, which must come without pixel_values. */
export function tensorsOf(req: GenerateRequest, pixels = true): { images: number; tensors: NamedTensor[]; checks: ImageCheck[] } {
  const mm = req.mmInputs;
  if (!mm) return { images: 0, tensors: [], checks: [] };
  if (pixels && !mm.pixelValues) throw new RequestInvalid('mm_inputs has no pixel_values');
  if (!pixels && mm.pixelValues) throw new RequestInvalid('decode received pixel tensors (mm_inputs.pixel_values)');
  if (!mm.modelSpecificTensors.image_grid_thw) throw new RequestInvalid('mm_inputs has no image_grid_thw tensor');
  const tensors: NamedTensor[] = mm.pixelValues ? [{ name: 'pixel_values', tensor: wireTensorFromTensorData(mm.pixelValues), dtypes: PIXEL_DTYPES }] : [];
  for (const [key, t] of Object.entries(mm.modelSpecificTensors).sort(([a], [b]) => (a < b ? -1 : 1))) {
    tensors.push({ name: key, tensor: wireTensorFromTensorData(t), ...(key === 'image_grid_thw' ? { dtypes: INDEX_DTYPES } : {}) });
  }
  const checks = mm.mmPlaceholders.map((p, i) => ({ label: `image ${i}`, encoder: 'pixel_values', grid: 'image_grid_thw', gridRow: i, placeholders: [p], placeholderTokenId: mm.imTokenId }));
  return { images: mm.mmPlaceholders.length, tensors, checks };
}

export function addVllmService(server: grpc.Server, s: GenerateServing, id: WorkerIdentity): void {
  const { model } = s;
  const impl: VllmEngineServer = {
    generate(call) {
      const req = call.request;
      const build = (kvTransferParamsJson?: string): ResponseBuilder<GenerateResponse> => ({
        chunk: (tokenIds, completionTokens, promptTokens) => ({ response: { $case: 'chunk', value: { tokenIds, promptTokens, completionTokens, cachedTokens: 0, outputLogprobs: undefined, inputLogprobs: undefined, index: 0 } } }),
        complete: (outputIds, finishReason, promptTokens, completionTokens) => ({
          response: {
            $case: 'complete',
            value: { outputIds, finishReason, promptTokens, completionTokens, cachedTokens: 0, outputLogprobs: undefined, inputLogprobs: undefined, index: 0, matchedStop: undefined, kvTransferParamsJson },
          },
        }),
      });
      const job = (pixels = true) => ({
        requestId: req.requestId,
        stream: req.stream,
        inputIds: req.input?.$case === 'tokenized' ? req.input.value.inputIds : [],
        maxTokens: req.samplingParams?.maxTokens,
        dtypeRule: VLLM_DTYPES,
        ...tensorsOf(req, pixels),
      });
      if (s.role) return serveVllmRoleGenerate(s, call, job, build);
      serveGenerate<GenerateResponse>(s, call, job, build());
    },
    healthCheck(_call, cb) {
      cb(null, { healthy: true, message: 'reference worker ready' });
    },
    abort(call, cb) {
      for (const requestId of call.request.requestIds) s.active.delete(requestId);
      cb(null, {});
    },
    getModelInfo(_call, cb) {
      cb(null, {
        modelPath: model.path,
        isGeneration: true,
        maxContextLength: model.maxContextLength,
        vocabSize: model.vocabSize,
        supportsVision: true,
        servedModelName: 'mmtc-reference',
        tokenizerPath: model.path,
        modelType: model.modelType,
        architectures: model.architectures,
        eosTokenIds: model.eosTokenIds,
        padTokenId: 0,
        bosTokenId: 0,
        maxReqInputLen: model.maxContextLength,
        defaultSamplingParamsJson: '',
      });
    },
    getServerInfo(_call, cb) {
      cb(null, {
        activeRequests: s.active.size,
        isPaused: false,
        lastReceiveTimestamp: Date.now() / 1000,
        uptimeSeconds: (Date.now() - id.started) / 1000,
        serverType: 'mmtc-reference',
        // A prefill worker produces the KV a decode worker consumes (vLLM's KV connector roles).
        kvConnector: s.role ? 'NixlConnector' : '',
        kvRole: s.role?.role === 'prefill' ? 'kv_producer' : s.role?.role === 'decode' ? 'kv_consumer' : '',
        kvEngineId: s.role ? s.role.url : '',
        dataParallelSize: 1,
        shmNamespaceId: id.token ?? '',
      });
    },
  };
  server.addService(VllmEngineService, impl);
}
