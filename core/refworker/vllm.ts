// The reference worker's vLLM face (service VllmEngine): where this protocol keeps the
// tensors (one batched MultimodalInputs: pixel_values for every image, model-specific tensors,
// one placeholder range and one hash per image), the dtypes vLLM accepts (float32, int64,
// uint32 — anything else is refused as vLLM refuses it), how the servicer splits the batch
// into images (fieldLayout: the request's batched_keys / flat_keys as vLLM's
// MultiModalFieldConfig reads them), its sampling rules (sampling-rules.ts), what it
// advertises (shm_namespace_id, field 10 of GetServerInfoResponse; its KV connector under
// disaggregation), and its response messages. mm_inputs without pixel_values are ignored, as
// the servicer ignores them.
import type * as grpc from '@grpc/grpc-js';
import { VllmEngineService, type GenerateRequest, type GenerateResponse, type MultimodalInputs, type VllmEngineServer } from '../gen/vllm/grpc/engine.ts';
import { wireTensorFromTensorData } from '../engines/tensor-data.ts';
import {
  gridKeyIn,
  modelTensorDtypes,
  RequestInvalid,
  serveGenerate,
  type GenerateJob,
  type GenerateServing,
  type ImageCheck,
  type NamedTensor,
  type ResponseBuilder,
  type TokensOf,
  type TensorsRead,
  type WorkerIdentity,
} from './receive.ts';
import { judgeVllmSampling } from './sampling-rules.ts';
import { serveVllmRoleGenerate } from './vllm-roles.ts';

// What the router sends as the encoder input (vLLM's vision models take their pixel_values as float32).
const PIXEL_DTYPES = { allowed: new Set(['float32']), says: 'float32' };
const VLLM_DTYPES = { allowed: new Set(['float32', 'int64', 'uint32']), says: 'vLLM accepts float32, int64 and uint32 tensors' };

/**
 * How vLLM splits the request's batch into images, as the servicer configures it
 * (_build_preprocessed_mm_inputs) and MultiModalKwargsItems.from_hf_inputs checks it: each
 * key of batched_keys gives one image per leading row, each key of flat_keys one image per
 * entry of its sizes tensor (flattened), any other key is shared by every placeholder; every
 * key must give the same number of images ("Cannot merge different batch sizes"). A flat
 * split must also be the images' own rows (sizes summing to the rows, each image's size its
 * grid's patches), or the encoder is handed rows that are not its image's. Then every
 * placeholder needs an image and a hash (vLLM indexes both by placeholder).
 */
function fieldLayout(mm: MultimodalInputs, keys: readonly string[]): (read: TensorsRead, tokensOf: TokensOf) => void {
  return ({ grids, rows }, tokensOf) => {
    const batched = new Set(mm.batchedKeys);
    // Neither batched nor flat, the servicer takes pixel_values as shared: every image would get all of them.
    if (!batched.has('pixel_values') && !Object.hasOwn(mm.flatKeys, 'pixel_values') && mm.mmPlaceholders.length > 0)
      throw new RequestInvalid(
        "pixel_values is in neither batched_keys nor flat_keys: the servicer would take it as shared, every image handed every image's pixels (the gateway lays it out batched or flat)",
      );
    const counts: Array<[string, number]> = [];
    const splits: Array<{ key: string; sizesKey: string; sizes: readonly number[] }> = [];
    for (const key of keys) {
      if (batched.has(key)) {
        const t = key === 'pixel_values' ? mm.pixelValues : mm.modelSpecificTensors[key];
        counts.push([key, t?.shape[0] ?? 0]);
      } else if (Object.hasOwn(mm.flatKeys, key)) {
        const sizesKey = mm.flatKeys[key]!;
        const sizes = grids.get(sizesKey);
        if (!mm.modelSpecificTensors[sizesKey] && sizesKey !== 'pixel_values')
          throw new Error(`'${sizesKey}' (KeyError: flat_keys sizes ${key} by ${sizesKey}, a tensor the request does not carry)`);
        if (!sizes) throw new RequestInvalid(`flat_keys sizes ${key} by ${sizesKey}, which is not a small int64 tensor`);
        counts.push([key, sizes.length]);
        splits.push({ key, sizesKey, sizes });
      } else counts.push([key, mm.mmPlaceholders.length]);
    }
    if (new Set(counts.map(([, n]) => n)).size > 1)
      throw new RequestInvalid(
        `Cannot merge different batch sizes for modality='image'! Found: batch_sizes={${counts.map(([k, n]) => `'${k}': ${n}`).join(', ')}}`,
      );
    for (const { key, sizesKey, sizes } of splits) {
      const total = sizes.reduce((a, b) => a + b, 0);
      const have = rows.get(key);
      if (have !== undefined && total !== have)
        throw new RequestInvalid(
          `flat_keys splits ${key} by ${sizesKey} = [${sizes.join(', ')}], ${total} rows in all, but ${key} has ${have} rows: vLLM would hand the encoder rows that are not the images'`,
        );
      const gridKey = gridKeyIn(mm.modelSpecificTensors);
      const grid = gridKey === undefined ? undefined : grids.get(gridKey);
      if (key === 'pixel_values' && grid) {
        const width = tokensOf.gridWidth;
        sizes.forEach((n, i) => {
          const row = grid.slice(i * width, i * width + width);
          if (row.length === width && tokensOf.gridPatches(row) !== n)
            throw new RequestInvalid(
              `flat_keys gives image ${i} ${n} rows of pixel_values (${sizesKey}[${i}]), but its ${gridKey} ${row.join('x')} has ${tokensOf.gridPatches(row)} patches`,
            );
        });
      }
    }
    const images = counts[0]?.[1] ?? 0;
    if (mm.mmPlaceholders.length > images)
      throw new Error(`list index out of range (IndexError: ${mm.mmPlaceholders.length} placeholders for ${images} images)`);
    if (mm.mmPlaceholders.length > 0 && mm.mmHashes.length === 0)
      throw new Error(`'image' (KeyError: no mm_hashes for ${mm.mmPlaceholders.length} placeholders)`);
    if (mm.mmPlaceholders.length > mm.mmHashes.length)
      throw new Error(`list index out of range (IndexError: ${mm.mmPlaceholders.length} placeholders for ${mm.mmHashes.length} mm_hashes)`);
  };
}

/** Where the request keeps its tensors (none when it has no pixel_values: the servicer ignores such mm_inputs), and how they split into images. */
export function tensorsOf(req: GenerateRequest): { images: number; tensors: NamedTensor[]; checks: ImageCheck[]; layout?: GenerateJob['layout'] } {
  const mm = req.mmInputs;
  if (!mm?.pixelValues || req.input?.$case !== 'tokenized') return { images: 0, tensors: [], checks: [] };
  const tensors: NamedTensor[] = [{ name: 'pixel_values', tensor: wireTensorFromTensorData(mm.pixelValues), dtypes: PIXEL_DTYPES }];
  for (const [key, t] of Object.entries(mm.modelSpecificTensors).sort(([a], [b]) => (a < b ? -1 : 1))) {
    tensors.push({
      name: key,
      tensor: wireTensorFromTensorData(t),
      ...modelTensorDtypes(key),
    });
  }
  const gridKey = gridKeyIn(mm.modelSpecificTensors);
  const checks = mm.mmPlaceholders.map((p, i) => ({
    label: `image ${i}`,
    encoder: 'pixel_values',
    // The family's grid when the request has one (Qwen's image_grid_thw, Kimi's grid_thws); else the model's rule takes the image's pixel values (tokensOf).
    grid: gridKey,
    gridKey,
    gridRow: i,
    placeholders: [p],
    placeholderTokenId: mm.imTokenId,
    // The servicer's is_embed: the range's positions holding im_token_id take the features.
    masksByToken: true,
  }));
  return {
    images: mm.mmPlaceholders.length,
    tensors,
    checks,
    layout: fieldLayout(
      mm,
      tensors.map((t) => t.name),
    ),
  };
}

/** Image placeholder tokens in a prompt sent without pixels to a worker that computes it: the model would read them as text. */
export function imageTokensWithoutPixels(inputIds: readonly number[], imageTokenId: number): number {
  let n = 0;
  for (const id of inputIds) if (id === imageTokenId) n += 1;
  return n;
}

/**
 * A request whose prompt holds the model's image placeholder tokens but carries no pixels, to
 * a worker that computes the prompt itself: vLLM would accept it and read those tokens as
 * text, a garbage answer. The reference worker refuses it.
 */
export function withPixelsForImageTokens(j: GenerateJob, imageTokenId: number): GenerateJob {
  const n = j.tensors.length === 0 ? imageTokensWithoutPixels(j.inputIds, imageTokenId) : 0;
  if (n > 0)
    throw new RequestInvalid(
      `the prompt holds ${n} image placeholder tokens (id ${imageTokenId}) but the request carries no pixel_values: the model would read the image's placeholders as text`,
    );
  return j;
}

export function addVllmService(server: grpc.Server, s: GenerateServing, id: WorkerIdentity): void {
  const { model } = s;
  const impl: VllmEngineServer = {
    generate(call) {
      const req = call.request;
      const build = (kvTransferParamsJson?: string): ResponseBuilder<GenerateResponse> => ({
        chunk: (tokenIds, completionTokens, promptTokens) => ({
          response: {
            $case: 'chunk',
            value: { tokenIds, promptTokens, completionTokens, cachedTokens: 0, outputLogprobs: undefined, inputLogprobs: undefined, index: 0 },
          },
        }),
        complete: (outputIds, finishReason, promptTokens, completionTokens, matchedStop) => ({
          response: {
            $case: 'complete',
            value: {
              outputIds,
              finishReason,
              promptTokens,
              completionTokens,
              cachedTokens: 0,
              outputLogprobs: undefined,
              inputLogprobs: undefined,
              index: 0,
              matchedStop,
              kvTransferParamsJson,
              kvTransferParams: undefined,
            },
          },
        }),
      });
      const job = (): GenerateJob => {
        const rules = judgeVllmSampling(req.samplingParams);
        const inputIds = req.input?.$case === 'tokenized' ? req.input.value.inputIds : [];
        const mm = tensorsOf(req);
        return { requestId: req.requestId, stream: req.stream, inputIds, maxTokens: rules.maxTokens, stops: rules.stops, dtypeRule: VLLM_DTYPES, ...mm };
      };
      if (s.role) return serveVllmRoleGenerate(s, call, job, build);
      serveGenerate<GenerateResponse>(s, call, () => withPixelsForImageTokens(job(), model.imageTokenId), build());
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
        defaultSamplingParamsJson: s.samplingDefaults,
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
        kvConnector: s.role?.kvConnector ?? '',
        kvRole: !s.role?.kvConnector ? '' : s.role.role === 'prefill' ? 'kv_producer' : 'kv_consumer',
        kvEngineId: s.role ? s.role.url : '',
        dataParallelSize: 1,
        shmNamespaceId: id.token ?? '',
      });
    },
  };
  server.addService(VllmEngineService, impl);
}
