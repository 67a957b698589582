// The reference worker's SGLang face (service SglangScheduler): where this protocol keeps the
// tensors (one batched MultimodalInputs: pixel_values for every image, image_grid_thw one row
// per image, patches_per_image, one placeholder range per image (Llama 4: each image's <|patch|>
// runs, in order), and each image's encoded
// bytes in image_data), the dtypes its servicer decodes (float32, int64), its sampling
// rules as a worker under skip_tokenizer_init (sampling-rules.ts: no stop strings, stop token
// ids honoured, bounds held), what it advertises (its sampling defaults; no /dev/shm token: its
// TensorData has no handle, every tensor arrives inline), and its response messages. Reading
// and checking are shared (receive.ts).
import type * as grpc from '@grpc/grpc-js';
import {
  SglangSchedulerService,
  type GenerateRequest,
  type GenerateResponse,
  type SglangSchedulerServer,
  type TensorData,
} from '../gen/sglang/grpc/scheduler.ts';
import type { WireTensor } from '../transport/shm-reader.ts';
import {
  gridKeyIn,
  modelTensorDtypes,
  RequestInvalid,
  serveGenerate,
  type GenerateJob,
  type GenerateServing,
  type ImageCheck,
  type NamedTensor,
  type WorkerIdentity,
} from './receive.ts';
import { judgeSglangSampling } from './sampling-rules.ts';

const PIXEL_DTYPES = { allowed: new Set(['float32']), says: 'float32' };
// The servicer decodes float32 and int64 and reads any other dtype as float32 (a uint32 grid becomes garbage).
const SGLANG_DTYPES = {
  allowed: new Set(['float32', 'int64']),
  says: 'the SGLang servicer decodes float32 and int64 tensors only (any other it reads as float32)',
};

/** SGLang's TensorData is its bytes: inline, always. */
function wireTensor(t: TensorData): WireTensor {
  return { shape: t.shape, dtype: t.dtype, payload: { kind: 'inline', bytes: t.data } };
}

/**
 * The flat mm_placeholders of a request whose images hold more than one range each (Llama 4's
 * <|patch|> runs), handed to the images in order by the tokens the model gives each: the
 * servicer takes them as one item's offsets, the model embeds the images' features at them in
 * order, so each image's features must fill whole ranges.
 */
function rangesByImage(checks: ImageCheck[], ranges: ReadonlyArray<{ offset: number; length: number }>, gridKey: string | undefined): GenerateJob['layout'] {
  return ({ grids }, tokensOf) => {
    const grid = gridKey === undefined ? undefined : grids.get(gridKey);
    if (!grid)
      throw new RequestInvalid(
        `mm_inputs has ${ranges.length} placeholder ranges for ${checks.length} image_data entries, and no grid to tell which are whose`,
      );
    if (grid.length !== checks.length * tokensOf.gridWidth)
      throw new RequestInvalid(`mm_inputs has ${checks.length} image_data entries for ${grid.length / tokensOf.gridWidth} images (${gridKey}'s rows)`);
    let next = 0;
    checks.forEach((c, i) => {
      let tokens: number;
      try {
        tokens = tokensOf.tokensOf({ encoderShape: [], grid: grid.slice(i * tokensOf.gridWidth, (i + 1) * tokensOf.gridWidth) });
      } catch (err) {
        throw new RequestInvalid(`${c.label}: ${(err as Error).message}`);
      }
      let held = 0;
      while (held < tokens && next < ranges.length) {
        c.placeholders.push(ranges[next]!);
        held += ranges[next]!.length;
        next += 1;
      }
      if (held !== tokens)
        throw new RequestInvalid(
          `${c.label}: the placeholder ranges from ${c.placeholders[0]?.offset ?? 'the end'} hold ${held} tokens where its ${gridKey} gives ${tokens}`,
        );
    });
    if (next < ranges.length) throw new RequestInvalid(`mm_inputs has ${ranges.length - next} placeholder ranges past the images' tokens`);
  };
}

export function tensorsOf(req: GenerateRequest): { images: number; tensors: NamedTensor[]; checks: ImageCheck[]; layout?: GenerateJob['layout'] } {
  const mm = req.mmInputs;
  if (!mm) return { images: 0, tensors: [], checks: [] };
  if (!mm.pixelValues) throw new RequestInvalid('mm_inputs has no pixel_values');
  const gridKey = gridKeyIn(mm.modelSpecificTensors);
  // One range per image, or (a family whose images hold several: Llama 4) the ranges of every image in order, an image per image_data entry.
  const perImage = mm.mmPlaceholders.length === mm.imageData.length || gridKey === undefined || mm.imageData.length === 0;
  const images = perImage ? mm.mmPlaceholders.length : mm.imageData.length;
  if (mm.imageData.length !== images)
    throw new RequestInvalid(`mm_inputs has ${mm.imageData.length} image_data entries for ${images} image${images === 1 ? '' : 's'} in the prompt`);
  const empty = mm.imageData.findIndex((b) => b.byteLength === 0);
  if (empty >= 0) throw new RequestInvalid(`image_data[${empty}] is empty`);
  if (images > 0 && !mm.modalities.includes('image')) throw new RequestInvalid(`mm_inputs.modalities is [${mm.modalities.join(', ')}], without image`);
  const tensors: NamedTensor[] = [{ name: 'pixel_values', tensor: wireTensor(mm.pixelValues), dtypes: PIXEL_DTYPES }];
  for (const [key, t] of Object.entries(mm.modelSpecificTensors).sort(([a], [b]) => (a < b ? -1 : 1))) {
    tensors.push({ name: key, tensor: wireTensor(t), ...modelTensorDtypes(key) });
  }
  const checks: ImageCheck[] = Array.from({ length: images }, (_, i) => ({
    label: `image ${i}`,
    encoder: 'pixel_values',
    // The family's grid when the request has one (Qwen's image_grid_thw, Kimi's grid_thws); else the model's rule takes the image's pixel values (tokensOf).
    grid: gridKey,
    gridKey,
    gridRow: i,
    placeholders: perImage ? [mm.mmPlaceholders[i]!] : [],
    placeholderTokenId: mm.imTokenId,
  }));
  return { images, tensors, checks, ...(perImage ? {} : { layout: rangesByImage(checks, mm.mmPlaceholders, gridKey) }) };
}

export function addSglangService(server: grpc.Server, s: GenerateServing, id: WorkerIdentity): void {
  const { model } = s;
  const impl: SglangSchedulerServer = {
    generate(call) {
      const req = call.request;
      serveGenerate<GenerateResponse>(
        s,
        call,
        () => {
          if (!req.tokenized) throw new RequestInvalid('Tokenized input must be provided');
          const rules = judgeSglangSampling(req.samplingParams);
          return {
            requestId: req.requestId,
            stream: req.stream,
            inputIds: req.tokenized.inputIds,
            maxTokens: rules.maxTokens,
            stops: rules.stops,
            dtypeRule: SGLANG_DTYPES,
            ...tensorsOf(req),
          };
        },
        {
          chunk: (tokenIds, completionTokens, promptTokens) => ({
            requestId: req.requestId,
            response: { $case: 'chunk', value: { tokenIds, promptTokens, completionTokens, cachedTokens: 0, index: 0, reasoningTokens: 0 } },
          }),
          complete: (outputIds, finishReason, promptTokens, completionTokens, matchedStop) => ({
            requestId: req.requestId,
            response: {
              $case: 'complete',
              value: { outputIds, finishReason, promptTokens, completionTokens, cachedTokens: 0, matchedStop, index: 0, reasoningTokens: 0 },
            },
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
        isGeneration: true,
        preferredSamplingParams: '',
        weightVersion: 'reference',
        servedModelName: 'mmtc-reference',
        maxContextLength: model.maxContextLength,
        vocabSize: model.vocabSize,
        supportsVision: true,
        modelType: model.modelType,
        eosTokenIds: model.eosTokenIds,
        padTokenId: 0,
        bosTokenId: 0,
        maxReqInputLen: model.maxContextLength,
        architectures: model.architectures,
        id2labelJson: '',
        numLabels: 0,
        defaultSamplingParamsJson: s.samplingDefaults,
      });
    },
    getServerInfo(_call, cb) {
      cb(null, {
        serverArgs: { model_path: model.path },
        schedulerInfo: {},
        activeRequests: s.active.size,
        isPaused: false,
        lastReceiveTimestamp: Date.now() / 1000,
        uptimeSeconds: (Date.now() - id.started) / 1000,
        sglangVersion: 'mmtc-reference',
        serverType: 'grpc',
        startTime: { seconds: BigInt(Math.floor(id.started / 1000)), nanos: (id.started % 1000) * 1e6 },
        maxTotalNumTokens: model.maxContextLength,
      });
    },
    getLoads(_call, cb) {
      cb(null, {
        timestamp: new Date().toISOString(),
        version: 'mmtc-reference',
        dpRankCount: 1,
        loads: [
          {
            dpRank: 0,
            numRunningReqs: s.active.size,
            numWaitingReqs: 0,
            numTotalReqs: s.active.size,
            numUsedTokens: 0,
            maxTotalNumTokens: model.maxContextLength,
            tokenUsage: 0,
            genThroughput: 0,
            cacheHitRate: 0,
            utilization: 0,
            maxRunningRequests: 0,
          },
        ],
      });
    },
  };
  server.addService(SglangSchedulerService, impl);
}
