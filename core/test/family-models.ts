// Small model directories of each vision family for tests (docs/preprocessing.md, "Model
// families"): the bundled demo directory's tokenizer and chat template (Qwen's), with the
// family's real config.json and preprocessor_config.json values and its special tokens moved
// to their real ids, so a directory loads through the same code path as the real checkpoint.
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { BUNDLED_MODEL_PATH } from '../multimodal/model-dir.ts';

/** Qwen3.5 / Qwen3.6 vocabulary: the bundled (Qwen2) special tokens, each 96401 ids higher (<|endoftext|> 248044, <|image_pad|> 248056). */
const QWEN3_5_SHIFT = 248044 - 151643;

/** config.json of a Qwen3.5 checkpoint (Qwen/Qwen3.5-*): top-level token ids, the text model under text_config. */
function qwen3_5Config(modelType: 'qwen3_5' | 'qwen3_5_moe'): Record<string, unknown> {
  return {
    architectures: [modelType === 'qwen3_5' ? 'Qwen3_5ForConditionalGeneration' : 'Qwen3_5MoeForConditionalGeneration'],
    model_type: modelType,
    image_token_id: 248056,
    video_token_id: 248057,
    vision_start_token_id: 248053,
    vision_end_token_id: 248054,
    text_config: { model_type: `${modelType}_text`, eos_token_id: 248046, max_position_embeddings: 262144, vocab_size: 248320 },
    vision_config: { model_type: modelType, patch_size: 16, spatial_merge_size: 2, temporal_patch_size: 2 },
    torch_dtype: 'bfloat16',
  };
}

/** preprocessor_config.json of a Qwen3-VL / Qwen3.5 checkpoint (size in pixels). */
const QWEN3_VL_PREPROCESSOR = {
  do_convert_rgb: true,
  do_normalize: true,
  do_rescale: true,
  do_resize: true,
  image_mean: [0.5, 0.5, 0.5],
  image_processor_type: 'Qwen2VLImageProcessorFast',
  image_std: [0.5, 0.5, 0.5],
  merge_size: 2,
  patch_size: 16,
  processor_class: 'Qwen3VLProcessor',
  resample: 3,
  rescale_factor: 0.00392156862745098,
  size: { longest_edge: 16777216, shortest_edge: 65536 },
  temporal_patch_size: 2,
};

/** config.json of Qwen/Qwen3-Omni-30B-A3B-*: the thinker's token ids under thinker_config (no vision_end_token_id there). */
const QWEN3_OMNI_CONFIG = {
  architectures: ['Qwen3OmniMoeForConditionalGeneration'],
  model_type: 'qwen3_omni_moe',
  enable_audio_output: false,
  thinker_config: {
    model_type: 'qwen3_omni_moe_thinker',
    audio_token_id: 151675,
    image_token_id: 151655,
    video_token_id: 151656,
    audio_start_token_id: 151669,
    vision_start_token_id: 151652,
    position_id_per_seconds: 13,
    text_config: { model_type: 'qwen3_omni_moe_text', eos_token_id: 151645, max_position_embeddings: 65536, vocab_size: 152064 },
    vision_config: { model_type: 'qwen3_omni_moe_vision_encoder', patch_size: 16, spatial_merge_size: 2, temporal_patch_size: 2 },
  },
};

/**
 * preprocessor_config.json of Qwen/Qwen3-Omni-30B-A3B-* (its image part, next to the Whisper
 * feature extractor's), with image_mean and image_std written out as the gateway takes them (0.5).
 */
const QWEN3_OMNI_PREPROCESSOR = {
  feature_extractor_type: 'WhisperFeatureExtractor',
  feature_size: 128,
  hop_length: 160,
  n_fft: 400,
  n_samples: 4800000,
  sampling_rate: 16000,
  image_processor_type: 'Qwen2VLImageProcessor',
  image_mean: [0.5, 0.5, 0.5],
  image_std: [0.5, 0.5, 0.5],
  patch_size: 16,
  temporal_patch_size: 2,
  merge_size: 2,
  min_pixels: 3136,
  max_pixels: 12845056,
  processor_class: 'Qwen3OmniMoeProcessor',
};

export type TestFamilyModel = 'qwen3_5' | 'qwen3_5_moe' | 'qwen3_omni_moe';

function writeJson(dir: string, name: string, value: unknown): void {
  writeFileSync(path.join(dir, name), `${JSON.stringify(value, null, 2)}\n`);
}

/** Move every added token's id by `shift`, in tokenizer.json and tokenizer_config.json alike. */
function shiftSpecialTokens(dir: string, shift: number): void {
  const tokenizerFile = path.join(dir, 'tokenizer.json');
  const tokenizer = JSON.parse(readFileSync(tokenizerFile, 'utf8')) as { added_tokens: Array<{ id: number }> };
  for (const t of tokenizer.added_tokens) t.id += shift;
  writeJson(dir, 'tokenizer.json', tokenizer);
  const configFile = path.join(dir, 'tokenizer_config.json');
  const config = JSON.parse(readFileSync(configFile, 'utf8')) as { added_tokens_decoder: Record<string, unknown> };
  config.added_tokens_decoder = Object.fromEntries(Object.entries(config.added_tokens_decoder).map(([id, t]) => [String(Number(id) + shift), t]));
  writeJson(dir, 'tokenizer_config.json', config);
}

/** Write a small model directory of `kind` at `dir` (which must not exist). */
export function makeFamilyModel(dir: string, kind: TestFamilyModel): string {
  cpSync(BUNDLED_MODEL_PATH, dir, { recursive: true });
  if (kind === 'qwen3_omni_moe') {
    writeJson(dir, 'config.json', QWEN3_OMNI_CONFIG);
    writeJson(dir, 'preprocessor_config.json', QWEN3_OMNI_PREPROCESSOR);
  } else {
    writeJson(dir, 'config.json', qwen3_5Config(kind));
    writeJson(dir, 'preprocessor_config.json', QWEN3_VL_PREPROCESSOR);
    shiftSpecialTokens(dir, QWEN3_5_SHIFT);
  }
  return dir;
}
