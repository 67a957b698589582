// The reference worker's TokenSpeed face (service TokenSpeedScheduler, and TokenSpeedEncoder
// on an encode worker): what it advertises (its model dtype as model_dtype and
// multimodal_encoder_dtype, its sampling defaults, the /dev/shm token and its disaggregation
// mode inside scheduler_info) and its response messages. Where the items keep their tensors,
// and the servicer's checks of them, is tokenspeed-items.ts (an encoder input in the model's
// dtype is attached read-write, as the scheduler attaches it); the sampling rules are
// sampling-rules.ts; reading and checking are shared (receive.ts); an encode, prefill or decode
// worker serves by roles.ts.
import type * as grpc from '@grpc/grpc-js';
import { TokenSpeedEncoderService, type TokenSpeedEncoderServer } from '../gen/tokenspeed/grpc/encoder.ts';
import { TokenSpeedSchedulerService, type GenerateResponse, type TokenSpeedSchedulerServer } from '../gen/tokenspeed/grpc/scheduler.ts';
import { serveGenerate, type GenerateServing, type ResponseBuilder, type WorkerIdentity } from './receive.ts';
import { serveEncode, serveRoleGenerate } from './roles.ts';
import { judgeTokenSpeedSampling } from './sampling-rules.ts';
import { checkTokenized, tensorsOf } from './tokenspeed-items.ts';

export function addTokenSpeedService(server: grpc.Server, s: GenerateServing, id: WorkerIdentity): void {
  const { model } = s;
  const impl: TokenSpeedSchedulerServer = {
    generate(call) {
      const req = call.request;
      const build: ResponseBuilder<GenerateResponse> = {
        chunk: (tokenIds, completionTokens, promptTokens) => ({
          requestId: req.requestId,
          response: { $case: 'chunk', value: { tokenIds, promptTokens, completionTokens, cachedTokens: 0, outputLogprobs: undefined, index: 0 } },
        }),
        complete: (outputIds, finishReason, promptTokens, completionTokens, matchedStop) => ({
          requestId: req.requestId,
          response: {
            $case: 'complete',
            value: { outputIds, finishReason, promptTokens, completionTokens, cachedTokens: 0, outputLogprobs: undefined, matchedStop, index: 0 },
          },
        }),
      };
      if (s.role) return serveRoleGenerate(s, call, build);
      serveGenerate(
        s,
        call,
        () => {
          const inputIds = checkTokenized(req);
          const rules = judgeTokenSpeedSampling(req.samplingParams);
          return {
            requestId: req.requestId,
            stream: req.stream,
            inputIds,
            maxTokens: rules.maxTokens,
            stops: rules.stops,
            ...tensorsOf(req, { modelDtype: s.modelDtype }),
          };
        },
        build,
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
        defaultSamplingParamsJson: s.samplingDefaults,
        supportsVision: true,
        supportsMultimodal: true,
        supportedModalities: [1],
        modelDtype: s.modelDtype,
        multimodalEncoderDtype: s.modelDtype,
      });
    },
    getServerInfo(_call, cb) {
      cb(null, {
        serverArgs: { model_path: model.path },
        schedulerInfo: { ...(id.token ? { shm_namespace_id: id.token } : {}), ...(s.role ? { disaggregation_mode: s.role.role } : {}) },
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
  if (s.role?.role === 'encode')
    server.addService(TokenSpeedEncoderService, { encode: (call, cb) => serveEncode(s, call, cb) } satisfies TokenSpeedEncoderServer);
}
