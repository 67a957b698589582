// Where TokenSpeed keeps an image's tensors: one MultimodalItem per image, its encoder_input
// plus the model_specific_tensors image_grid_thw and patches_per_image. Shared by the
// reference worker's regular face (tokenspeed.ts) and its disaggregated roles (roles.ts).
import type { GenerateRequest } from '../gen/tokenspeed/grpc/scheduler.ts';
import { wireTensorFromTensorData } from '../engines/tensor-data.ts';
import { ENCODER_DTYPES, INDEX_DTYPES, RequestInvalid, type ImageCheck, type NamedTensor } from './receive.ts';

/**
 * Where a request's items keep their tensors. `pixels` false: the items must come without
 * their encoder input (a prefill under EPD, whose encode workers had it) and only their
 * model-specific tensors are read.
 */
export function tensorsOf(req: Pick<GenerateRequest, 'mmInputs'>, pixels = true): { images: number; tensors: NamedTensor[]; checks: ImageCheck[] } {
  const items = req.mmInputs?.items ?? [];
  const tensors: NamedTensor[] = [];
  const checks: ImageCheck[] = [];
  items.forEach((item, i) => {
    const suffix = items.length > 1 ? `[${i}]` : '';
    if (pixels && !item.encoderInput) throw new RequestInvalid(`item ${i} has no encoder_input`);
    if (!pixels && item.encoderInput) throw new RequestInvalid(`item ${i} carries pixel tensors: under EPD they go to the encode workers`);
    if (!item.modelSpecificTensors.image_grid_thw) throw new RequestInvalid(`item ${i} has no image_grid_thw tensor`);
    if (item.encoderInput) tensors.push({ name: `encoder_input${suffix}`, tensor: wireTensorFromTensorData(item.encoderInput), dtypes: ENCODER_DTYPES });
    for (const [key, t] of Object.entries(item.modelSpecificTensors).sort(([a], [b]) => (a < b ? -1 : 1))) {
      tensors.push({ name: `${key}${suffix}`, tensor: wireTensorFromTensorData(t), ...(key === 'image_grid_thw' || key === 'patches_per_image' ? { dtypes: INDEX_DTYPES } : {}) });
    }
    checks.push({ label: `item ${i}`, encoder: `encoder_input${suffix}`, grid: `image_grid_thw${suffix}`, gridRow: 0, placeholders: item.placeholders, placeholderTokenId: item.placeholderTokenId });
  });
  return { images: items.length, tensors, checks };
}

