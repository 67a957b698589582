// Where TokenSpeed keeps an image's tensors, and how its servicer judges them: one
// MultimodalItem per image, its encoder_input plus the model_specific_tensors image_grid_thw
// and patches_per_image. Shared by the reference worker's regular face (tokenspeed.ts) and its
// disaggregated roles (roles.ts). The servicer's _mm_inputs_from_itemized_proto, to the
// letter where a request could break it: the item's modality (IMAGE, VIDEO or AUDIO), at least
// one placeholder range and none empty, one placeholder token per modality. An encoder input
// sent through /dev/shm must be float32, bfloat16 or float16; one in the model's dtype at
// offset 0 is not read by the servicer but handed to the scheduler, which attaches its file
// read-write (TensorReader.attach): its byte count must match its shape and the item must
// carry a content hash (the scheduler pads by it). Anything else is read, O_RDONLY.
import type { GenerateRequest } from '../gen/tokenspeed/grpc/scheduler.ts';
import { wireTensorFromTensorData } from '../engines/tensor-data.ts';
import { elementSize } from '../transport/dtype.ts';
import { TensorReadError, validateShmName } from '../transport/shm-reader.ts';
import { ENCODER_DTYPES, gridKeyIn, modelTensorDtypes, RequestInvalid, type ImageCheck, type NamedTensor } from './receive.ts';

const SHM_FEATURE_DTYPES = new Set(['bfloat16', 'float16', 'float32']);
const MODALITY_NAMES: Readonly<Record<number, string>> = { 1: 'IMAGE', 2: 'AUDIO', 3: 'VIDEO' };

/**
 * Where a request's items keep their tensors. `pixels` false: the items must come without
 * their encoder input (a prefill under EPD, whose encode workers had it) and only their
 * model-specific tensors are read. `modelDtype`: the dtype a Generate item's encoder input is
 * attached in rather than read. `encode`: an Encode call's item (its modality may be left
 * unspecified, meaning IMAGE; its encoder input is always read).
 */
export function tensorsOf(
  req: Pick<GenerateRequest, 'mmInputs'>,
  o: { pixels?: boolean; modelDtype?: string; encode?: boolean } = {},
): { images: number; tensors: NamedTensor[]; checks: ImageCheck[] } {
  const pixels = o.pixels ?? true;
  const modelDtype = o.encode ? undefined : o.modelDtype;
  const items = req.mmInputs?.items ?? [];
  const tensors: NamedTensor[] = [];
  const checks: ImageCheck[] = [];
  const tokenIds = new Map<string, number>();
  items.forEach((item, i) => {
    const suffix = items.length > 1 ? `[${i}]` : '';
    const modality = MODALITY_NAMES[item.modality === 0 && o.encode ? 1 : item.modality];
    if (!modality) throw new RequestInvalid(`Unsupported multimodal item modality: ${item.modality}`);
    if (pixels && !item.encoderInput) throw new RequestInvalid(`item ${i} has no encoder_input`);
    if (!pixels && item.encoderInput) throw new RequestInvalid(`item ${i} carries pixel tensors: under EPD they go to the encode workers`);
    if (modality === 'IMAGE' && item.modelSpecificTensors.video_grid_thw) throw new RequestInvalid('IMAGE MultimodalItem must not carry video_grid_thw');
    if (item.placeholders.length === 0) throw new RequestInvalid('MultimodalItem carried no placeholders');
    if (item.placeholders.some((p) => p.length <= 0)) throw new RequestInvalid('MultimodalItem.placeholders.length must be > 0');
    if (item.placeholderTokenId !== undefined) {
      const current = tokenIds.get(modality);
      if (current !== undefined && current !== item.placeholderTokenId)
        throw new RequestInvalid(`Conflicting placeholder_token_id for ${modality}: ${current} != ${item.placeholderTokenId}`);
      tokenIds.set(modality, item.placeholderTokenId);
    }
    if (item.encoderInput) {
      const tensor = wireTensorFromTensorData(item.encoderInput);
      let attach = false;
      if (tensor.payload.kind === 'shm') {
        const { handle } = tensor.payload;
        if (!SHM_FEATURE_DTYPES.has(tensor.dtype)) throw new RequestInvalid(`Unsupported TensorData dtype for SHM feature: '${tensor.dtype}'`);
        attach = modelDtype !== undefined && tensor.dtype === modelDtype && handle.offset === 0;
        if (attach) {
          const expected = tensor.shape.reduce((a, b) => a * b, 1) * (elementSize(tensor.dtype) ?? 0);
          if (handle.nbytes !== expected)
            throw new RequestInvalid(
              `TensorData.shm byte length mismatch for dtype=${tensor.dtype}, shape=[${tensor.shape.join(', ')}]: expected ${expected}, got ${handle.nbytes}`,
            );
          try {
            validateShmName(handle.name);
          } catch (err) {
            if (!(err instanceof TensorReadError)) throw err;
            throw new RequestInvalid(`Invalid TensorData.shm name: '${handle.name}'`);
          }
          if (item.contentHash.byteLength === 0)
            throw new RequestInvalid('SHM-backed multimodal items must carry content hash or pad_value before TokenSpeed consumes them');
        }
      }
      tensors.push({ name: `encoder_input${suffix}`, tensor, dtypes: ENCODER_DTYPES, ...(attach ? { attach } : {}) });
    }
    for (const [key, t] of Object.entries(item.modelSpecificTensors).sort(([a], [b]) => (a < b ? -1 : 1))) {
      tensors.push({
        name: `${key}${suffix}`,
        tensor: wireTensorFromTensorData(t),
        ...modelTensorDtypes(key),
      });
    }
    const gridKey = gridKeyIn(item.modelSpecificTensors);
    checks.push({
      label: `item ${i}`,
      encoder: `encoder_input${suffix}`,
      // The family's grid when the item has one (Qwen's image_grid_thw, Kimi's grid_thws); else the model's rule takes the item's encoder input (tokensOf).
      grid: gridKey === undefined ? undefined : `${gridKey}${suffix}`,
      gridKey,
      gridRow: 0,
      placeholders: item.placeholders,
      placeholderTokenId: item.placeholderTokenId,
    });
  });
  return { images: items.length, tensors, checks };
}

/** The servicer's first checks of a Generate request: a tokenized prompt that is not empty. */
export function checkTokenized(req: Pick<GenerateRequest, 'tokenized'>): readonly number[] {
  if (!req.tokenized) throw new RequestInvalid('GenerateRequest.tokenized is required');
  if (req.tokenized.inputIds.length === 0) throw new RequestInvalid('GenerateRequest.tokenized.input_ids is empty');
  return req.tokenized.inputIds;
}
