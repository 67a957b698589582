// Small model directories of each vision family for tests (docs/preprocessing.md, "Model
// families"): the bundled demo directory's tokenizer and chat template (Qwen's; LLaVA's, LLaVA-NeXT's,
// Phi-3-vision's and Llama 4's own templates and their special tokens at their ids), with the family's real config.json and
// preprocessor_config.json values and its special tokens at their real ids, so a directory
// loads through the same code path as the real checkpoint.
import { cpSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { BUNDLED_MODEL_PATH } from '../multimodal/model-dir.ts';
import { BYTE_CHARS } from '../multimodal/tiktoken.ts';

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

/** config.json of llava-hf/llava-1.5-7b-hf: <image> at image_token_index 32000, the CLIP ViT-L/14-336 tower, the LLaMA text model. */
const LLAVA_CONFIG = {
  architectures: ['LlavaForConditionalGeneration'],
  ignore_index: -100,
  image_token_index: 32000,
  model_type: 'llava',
  pad_token_id: 32001,
  projector_hidden_act: 'gelu',
  text_config: {
    architectures: ['LlamaForCausalLM'],
    max_position_embeddings: 4096,
    model_type: 'llama',
    rms_norm_eps: 1e-5,
    torch_dtype: 'float16',
    vocab_size: 32064,
  },
  tie_word_embeddings: false,
  torch_dtype: 'float16',
  vision_config: {
    hidden_size: 1024,
    image_size: 336,
    intermediate_size: 4096,
    model_type: 'clip_vision_model',
    num_attention_heads: 16,
    num_hidden_layers: 24,
    patch_size: 14,
    projection_dim: 768,
    vocab_size: 32000,
  },
  vision_feature_layer: -2,
  vision_feature_select_strategy: 'default',
  vocab_size: 32064,
};

/** preprocessor_config.json of llava-hf/llava-1.5-7b-hf: Hugging Face's CLIPImageProcessor at 336 pixels. */
const LLAVA_PREPROCESSOR = {
  crop_size: { height: 336, width: 336 },
  do_center_crop: true,
  do_convert_rgb: true,
  do_normalize: true,
  do_rescale: true,
  do_resize: true,
  image_mean: [0.48145466, 0.4578275, 0.40821073],
  image_processor_type: 'CLIPImageProcessor',
  image_std: [0.26862954, 0.26130258, 0.27577711],
  processor_class: 'LlavaProcessor',
  resample: 3,
  rescale_factor: 0.00392156862745098,
  size: { shortest_edge: 336 },
};

/**
 * llava-hf's chat template, written without its {% generation %} tag (for training only):
 * `USER: <image>\n<image>\nWhat differs? ASSISTANT:` (each message's images first, then its text).
 */
const LLAVA_CHAT_TEMPLATE =
  "{% for message in messages %}{% if message['role'] != 'system' %}{{ message['role'].upper() + ': ' }}{% endif %}" +
  "{% if message['content'] is string %}{{ message['content'] + ' ' }}{% else %}" +
  "{% for content in message['content'] %}{% if content['type'] == 'image' %}{{ '<image>\n' }}{% endif %}{% endfor %}" +
  "{% for content in message['content'] %}{% if content['type'] == 'text' %}{{ content['text'] + ' ' }}{% endif %}{% endfor %}" +
  "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}";

/** The pinpoints of llava-hf/llava-v1.6-*-hf ([height, width]): up to 2 x 2 crops, or 1 x 3 and 3 x 1. */
const LLAVA_NEXT_PINPOINTS = [
  [336, 672],
  [672, 336],
  [672, 672],
  [1008, 336],
  [336, 1008],
];

/** config.json of llava-hf/llava-v1.6-mistral-7b-hf: <image> at image_token_index 32000, the CLIP ViT-L/14-336 tower, the Mistral text model, the pinpoints the model counts tokens by. */
const LLAVA_NEXT_CONFIG = {
  ...LLAVA_CONFIG,
  architectures: ['LlavaNextForConditionalGeneration'],
  image_grid_pinpoints: LLAVA_NEXT_PINPOINTS,
  model_type: 'llava_next',
  text_config: {
    architectures: ['MistralForCausalLM'],
    intermediate_size: 14336,
    max_position_embeddings: 32768,
    model_type: 'mistral',
    num_key_value_heads: 8,
    rms_norm_eps: 1e-5,
    rope_theta: 1000000.0,
    torch_dtype: 'bfloat16',
    vocab_size: 32064,
  },
  use_image_newline_parameter: true,
};

/** preprocessor_config.json of llava-hf/llava-v1.6-mistral-7b-hf: LlavaNextImageProcessor (CLIP's settings and the pinpoints). */
const LLAVA_NEXT_PREPROCESSOR = {
  ...LLAVA_PREPROCESSOR,
  aspect_ratio_setting: 'anyres',
  image_grid_pinpoints: LLAVA_NEXT_PINPOINTS,
  image_processor_type: 'LlavaNextImageProcessor',
  processor_class: 'LlavaNextProcessor',
};

/**
 * llava-hf/llava-v1.6-mistral-7b-hf's chat template, its selectattr filters written as tests:
 * `[INST] <image>\n<image>\nWhat differs? [/INST]` (each message's images first, then its text).
 */
const LLAVA_NEXT_CHAT_TEMPLATE =
  "{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' }}" +
  "{% if message['content'] is string %}{{ message['content'] }}{% else %}" +
  "{% for content in message['content'] %}{% if content['type'] == 'image' %}{{ '<image>\n' }}{% endif %}{% endfor %}" +
  "{% for content in message['content'] %}{% if content['type'] == 'text' %}{{ content['text'] }}{% endif %}{% endfor %}" +
  "{% endif %}{{ ' [/INST]' }}{% elif message['role'] == 'assistant' %}" +
  "{% if message['content'] is string %}{{ ' ' + message['content'] }}{% else %}{% for content in message['content'] %}{% if content['type'] == 'text' %}{{ ' ' + content['text'] }}{% endif %}{% endfor %}{% endif %}{{ '</s>' }}" +
  '{% endif %}{% endfor %}';

/** LLaMA's special tokens at their ids (<unk> 0, <s> 1, </s> 2, llava-hf's <image> 32000 and <pad> 32001). */
const LLAVA_SPECIALS: Array<[number, string]> = [
  [0, '<unk>'],
  [1, '<s>'],
  [2, '</s>'],
  [32000, '<image>'],
  [32001, '<pad>'],
];

/**
 * A small tokenizer with a LLaMA-vocabulary model's special tokens at their real ids (LLaVA-1.5,
 * Phi-3-vision): the bundled byte-level BPE (its 517 tokens moved 3 ids up, past <unk>, <s> and
 * </s>) with the model's added tokens in place of Qwen's. No npm package carries LLaMA's
 * 32000-token vocabulary as a tokenizer.json.
 */
function llamaVocabularyTokenizer(
  dir: string,
  specials: ReadonlyArray<[number, string]>,
  config: {
    chatTemplate: string;
    padToken: string;
    processorClass: string;
    maxLength: number;
    generation: Record<string, unknown>;
    /** bos, eos and unk tokens where they are not LLaMA's <s>, </s> and <unk>. */
    named?: { bos: string; eos: string; unk?: string };
  },
): void {
  const file = path.join(dir, 'tokenizer.json');
  const tokenizer = JSON.parse(readFileSync(file, 'utf8')) as { added_tokens: unknown[]; model: { vocab: Record<string, number> } };
  tokenizer.model.vocab = Object.fromEntries(Object.entries(tokenizer.model.vocab).map(([t, id]) => [t, id + 3]));
  const added = (id: number, content: string) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true });
  tokenizer.added_tokens = specials.map(([id, content]) => added(id, content));
  writeJson(dir, 'tokenizer.json', tokenizer);
  writeJson(dir, 'tokenizer_config.json', {
    add_bos_token: false,
    add_eos_token: false,
    added_tokens_decoder: Object.fromEntries(
      specials.map(([id, content]) => [String(id), { content, lstrip: false, normalized: false, rstrip: false, single_word: false, special: true }]),
    ),
    bos_token: config.named?.bos ?? '<s>',
    chat_template: config.chatTemplate,
    clean_up_tokenization_spaces: false,
    eos_token: config.named?.eos ?? '</s>',
    model_max_length: config.maxLength,
    pad_token: config.padToken,
    processor_class: config.processorClass,
    tokenizer_class: config.named ? 'PreTrainedTokenizerFast' : 'LlamaTokenizer',
    ...(config.named ? (config.named.unk ? { unk_token: config.named.unk } : {}) : { unk_token: '<unk>' }),
  });
  writeJson(dir, 'generation_config.json', config.generation);
}

/** config.json of microsoft/Phi-3-vision-128k-instruct: the Phi-3 text model, the CLIP ViT-L/14-336 image processor (144 tokens a crop); no image token id. */
const PHI3_V_CONFIG = {
  architectures: ['Phi3VForCausalLM'],
  auto_map: { AutoConfig: 'configuration_phi3_v.Phi3VConfig', AutoModelForCausalLM: 'modeling_phi3_v.Phi3VForCausalLM' },
  bos_token_id: 1,
  embd_layer: { embedding_cls: 'image', hd_transform_order: 'sub_glb', projection_cls: 'mlp', use_hd_transform: true, with_learnable_separator: true },
  eos_token_id: 2,
  hidden_size: 3072,
  img_processor: { image_dim_out: 1024, model_name: 'openai/clip-vit-large-patch14-336', name: 'clip_vision_model', num_img_tokens: 144 },
  max_position_embeddings: 131072,
  model_type: 'phi3_v',
  num_attention_heads: 32,
  num_hidden_layers: 32,
  original_max_position_embeddings: 4096,
  torch_dtype: 'bfloat16',
  vocab_size: 32064,
};

/** preprocessor_config.json of microsoft/Phi-3-vision-128k-instruct: its own Phi3VImageProcessor, 16 crops, CLIP's mean and std. */
const PHI3_V_PREPROCESSOR = {
  auto_map: { AutoProcessor: 'processing_phi3_v.Phi3VProcessor', AutoImageProcessor: 'image_processing_phi3_v.Phi3VImageProcessor' },
  num_crops: 16,
  image_mean: [0.48145466, 0.4578275, 0.40821073],
  image_processor_type: 'Phi3VImageProcessor',
  image_std: [0.26862954, 0.26130258, 0.27577711],
  processor_class: 'Phi3VProcessor',
  num_img_tokens: 144,
};

/** Phi-3-vision's chat template (tokenizer_config.json): content is one string. */
const PHI3_V_CHAT_TEMPLATE =
  "{% for message in messages %}{{'<|' + message['role'] + '|>' + '\n' + message['content'] + '<|end|>\n' }}{% endfor %}" +
  "{% if add_generation_prompt and messages[-1]['role'] != 'assistant' %}{{- '<|assistant|>\n' -}}{% endif %}";

/** Phi-3's special tokens at their ids (the Phi-3-mini vocabulary's, and Phi-3-vision's <|image|> 32044, the id vLLM's Phi-3-vision uses). */
const PHI3_V_SPECIALS: Array<[number, string]> = [
  [0, '<unk>'],
  [1, '<s>'],
  [2, '</s>'],
  [32000, '<|endoftext|>'],
  [32001, '<|assistant|>'],
  [32006, '<|system|>'],
  [32007, '<|end|>'],
  [32010, '<|user|>'],
  [32044, '<|image|>'],
];

/** config.json of meta-llama/Llama-4-Scout-17B-16E-Instruct: <|patch|> at image_token_index 200092, the 336-pixel tile tower (pixel shuffle 0.5: 144 tokens a tile), the text model under text_config. */
const LLAMA4_CONFIG = {
  architectures: ['Llama4ForConditionalGeneration'],
  boi_token_index: 200080,
  eoi_token_index: 200081,
  image_token_index: 200092,
  model_type: 'llama4',
  text_config: {
    bos_token_id: 200000,
    eos_token_id: [200001, 200007, 200008],
    max_position_embeddings: 10485760,
    model_type: 'llama4_text',
    pad_token_id: 200018,
    vocab_size: 202048,
  },
  tie_word_embeddings: false,
  torch_dtype: 'bfloat16',
  vision_config: {
    image_size: 336,
    model_type: 'llama4_vision_model',
    patch_size: 14,
    pixel_shuffle_ratio: 0.5,
    vision_output_dim: 4096,
  },
};

/** preprocessor_config.json of meta-llama/Llama-4-Scout-17B-16E-Instruct: Llama4ImageProcessorFast, 336-pixel tiles, at most 16. */
const LLAMA4_PREPROCESSOR = {
  do_convert_rgb: true,
  do_normalize: true,
  do_rescale: true,
  do_resize: true,
  image_mean: [0.5, 0.5, 0.5],
  image_processor_type: 'Llama4ImageProcessorFast',
  image_std: [0.5, 0.5, 0.5],
  max_patches: 16,
  processor_class: 'Llama4Processor',
  resample: 2,
  rescale_factor: 0.00392156862745098,
  resize_to_max_canvas: false,
  size: { height: 336, width: 336 },
};

/**
 * Llama 4's chat template, its tool and system-prompt parts left out:
 * `<|begin_of_text|><|header_start|>user<|header_end|>\n\n<|image|><|image|>What differs?<|eot|>`
 * (each message's parts in order; mmtc puts a message's images first, as the gateway does).
 */
const LLAMA4_CHAT_TEMPLATE =
  '{{- bos_token }}{%- for message in messages %}' +
  "{{- '<|header_start|>' + message['role'] + '<|header_end|>\n\n' }}" +
  "{%- if message['content'] is string %}{{- message['content'] }}{%- else %}{%- for content in message['content'] %}" +
  "{%- if content['type'] == 'image' %}{{- '<|image|>' }}{%- elif content['type'] == 'text' %}{{- content['text'] }}{%- endif %}" +
  '{%- endfor %}{%- endif %}{{- "<|eot|>" }}{%- endfor %}' +
  "{%- if add_generation_prompt %}{{- '<|header_start|>assistant<|header_end|>\n\n' }}{%- endif %}";

/** config.json of an Inkling checkpoint as the gateway and TokenSpeed read one: model_type inkling_mm_model, a vision tower (vision_config.decoder_dmodel). */
const INKLING_CONFIG = {
  architectures: ['InklingForConditionalGeneration'],
  model_type: 'inkling_mm_model',
  max_position_embeddings: 131072,
  torch_dtype: 'bfloat16',
  vision_config: { decoder_dmodel: 6144 },
};

/** preprocessor_config.json with Hugging Face's InklingImageProcessor defaults: 40-pixel patches, CLIP's mean and std, no pre-scaling. */
const INKLING_PREPROCESSOR = {
  image_processor_type: 'InklingImageProcessor',
  do_convert_rgb: true,
  do_normalize: true,
  do_rescale: true,
  image_mean: [0.48145466, 0.4578275, 0.40821073],
  image_std: [0.26862954, 0.26130258, 0.27577711],
  resample: 1,
  rescale_factor: 0.00392156862745098,
  rescale_image_frac: null,
  rescale_image_max_upscaled_long_edge: 2048,
  size: { height: 40, width: 40 },
};

/**
 * Inkling's TML control tokens. <|content_image|> (200005), <|content_audio_input|> (200020)
 * and the two placeholders (200053, 200054) are the ids the gateway's spec tests hold; the
 * others take free ids nearby (their real ids are in no source we read; no test depends on them).
 */
const INKLING_SPECIALS: Array<[number, string]> = [
  [200000, '<|endoftext|>'],
  [200001, '<|message_user|>'],
  [200002, '<|message_model|>'],
  [200003, '<|message_system|>'],
  [200004, '<|content_text|>'],
  [200005, '<|content_image|>'],
  [200006, '<|end_message|>'],
  [200020, '<|content_audio_input|>'],
  [200053, '<|unused_200053|>'],
  [200054, '<|unused_200054|>'],
];

/**
 * A TML chat template of the shape the gateway's Inkling spec expects (its checkpoint's is not
 * public): per message `<|message_{role}|>`, its parts in the order written (text after
 * `<|content_text|>`, an image as `<|content_image|><|unused_200054|>`), `<|end_message|>`.
 */
const INKLING_CHAT_TEMPLATE =
  "{%- for message in messages -%}{{- '<|message_' + (message['role'] == 'assistant' and 'model' or message['role']) + '|>' -}}" +
  "{%- if message['content'] is string -%}{{- '<|content_text|>' + message['content'] -}}{%- else -%}{%- for content in message['content'] -%}" +
  "{%- if content['type'] == 'image' -%}{{- '<|content_image|><|unused_200054|>' -}}{%- elif content['type'] == 'text' -%}{{- '<|content_text|>' + content['text'] -}}{%- endif -%}" +
  "{%- endfor -%}{%- endif -%}{{- '<|end_message|>' -}}{%- endfor -%}" +
  "{%- if add_generation_prompt -%}{{- '<|message_model|>' -}}{%- endif -%}";

/** Llama 4's special tokens at their ids (its tokenizer's BASIC, TEXT and VISION special tokens). */
const LLAMA4_SPECIALS: Array<[number, string]> = [
  [200000, '<|begin_of_text|>'],
  [200001, '<|end_of_text|>'],
  [200005, '<|header_start|>'],
  [200006, '<|header_end|>'],
  [200007, '<|eom|>'],
  [200008, '<|eot|>'],
  [200018, '<|finetune_right_pad|>'],
  [200080, '<|image_start|>'],
  [200081, '<|image_end|>'],
  [200084, '<|tile_x_separator|>'],
  [200085, '<|tile_y_separator|>'],
  [200090, '<|image|>'],
  [200092, '<|patch|>'],
];

/** config.json of moonshotai/Kimi-K2.5 (its text model under text_config, the MoonViT tower under vision_config). */
const KIMI_K25_CONFIG = {
  architectures: ['KimiK25ForConditionalGeneration'],
  auto_map: { AutoConfig: 'configuration_kimi_k25.KimiK25Config', AutoModel: 'modeling_kimi_k25.KimiK25ForConditionalGeneration' },
  bos_token_id: 163584,
  eos_token_id: 163585,
  ignore_index: -100,
  media_placeholder_token_id: 163605,
  model_type: 'kimi_k25',
  pad_token_id: 163839,
  tie_word_embeddings: false,
  torch_dtype: 'bfloat16',
  use_unified_vision_chunk: true,
  video_placeholder: '<|kimi_k25_video_placeholder|>',
  text_config: { architectures: ['DeepseekV3ForCausalLM'], model_type: 'deepseek_v3', max_position_embeddings: 262144, vocab_size: 163840 },
  vision_config: { patch_size: 14, merge_kernel_size: [2, 2], init_pos_emb_height: 64, init_pos_emb_width: 64 },
};

/** preprocessor_config.json of moonshotai/Kimi-K2.5: everything under media_proc_cfg (the gateway's preprocessor_config.rs test of it). */
const KIMI_K25_PREPROCESSOR = {
  auto_map: { AutoProcessor: 'kimi_k25_processor.KimiK25Processor' },
  media_proc_cfg: {
    in_patch_limit: 16384,
    patch_size: 14,
    image_mean: [0.5, 0.5, 0.5],
    image_std: [0.5, 0.5, 0.5],
    merge_kernel_size: 2,
    patch_limit_on_one_side: 512,
  },
};

/**
 * Kimi's special tokens at their ids. [BOS] to <|im_assistant|> and the four media tokens are the
 * ids the gateway's own tests hold (crates/tokenizer/tests/tiktoken_integration.rs,
 * registry/kimi_k3.rs, the Kimi media-token test); the others are placed where Kimi-K2's
 * tokenizer_config.json has them as far as we know, and no test depends on their ids.
 */
const KIMI_SPECIALS: Array<[number, string]> = [
  [163584, '[BOS]'],
  [163585, '[EOS]'],
  [163586, '<|im_end|>'],
  [163587, '<|im_user|>'],
  [163588, '<|im_assistant|>'],
  [163590, '<|start_header_id|>'],
  [163591, '<|end_header_id|>'],
  [163593, '[EOT]'],
  [163594, '<|im_system|>'],
  [163601, '<|im_middle|>'],
  [163602, '<|media_begin|>'],
  [163603, '<|media_content|>'],
  [163604, '<|media_end|>'],
  [163605, '<|media_pad|>'],
  [163838, '[UNK]'],
  [163839, '[PAD]'],
];

/**
 * Kimi's chat turns (`<|im_user|>user<|im_middle|>…<|im_end|>`) with each image as
 * `<|media_begin|>image<|media_content|><|media_pad|><|media_end|>`, as the checkpoint's
 * chat_template.jinja writes them (that template's tool, thinking and default-system parts left out).
 */
const KIMI_CHAT_TEMPLATE =
  "{%- for message in messages -%}{%- if message['role'] == 'system' -%}<|im_system|>system<|im_middle|>" +
  "{%- elif message['role'] == 'user' -%}<|im_user|>user<|im_middle|>{%- elif message['role'] == 'assistant' -%}<|im_assistant|>assistant<|im_middle|>" +
  "{%- else -%}<|im_system|>{{ message['role'] }}<|im_middle|>{%- endif -%}" +
  "{%- if message['content'] is string -%}{{ message['content'] }}{%- else -%}{%- for content in message['content'] -%}" +
  "{%- if content['type'] == 'image' -%}<|media_begin|>image<|media_content|><|media_pad|><|media_end|>" +
  "{%- elif content['type'] == 'text' -%}{{ content['text'] }}{%- endif -%}{%- endfor -%}{%- endif -%}<|im_end|>{%- endfor -%}" +
  '{%- if add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|>{%- endif -%}';

/** config.json of a Kimi-K3 checkpoint as the gateway reads one (registry/kimi_k3.rs: model_type, media_placeholder_token_id; its renderer by architectures). */
const KIMI_K3_CONFIG = {
  ...KIMI_K25_CONFIG,
  architectures: ['KimiK3ForConditionalGeneration'],
  auto_map: { AutoConfig: 'configuration_kimi_k3.KimiK3Config', AutoModel: 'modeling_kimi_k3.KimiK3ForConditionalGeneration' },
  model_type: 'kimi_k3',
  video_placeholder: undefined,
};

/** preprocessor_config.json of moonshotai/Kimi-K3: media_proc_cfg with K3's patch budget and its chessboard (the gateway's kimi_k3.rs, "verbatim from the checkpoint"). */
const KIMI_K3_PREPROCESSOR = {
  auto_map: { AutoProcessor: 'kimi_k3_processor.KimiK3Processor' },
  media_proc_cfg: {
    ...KIMI_K25_PREPROCESSOR.media_proc_cfg,
    in_patch_limit: 65536,
    transparent_bg_config: {
      pattern: 'chessboard',
      chessboard_square_size: 8,
      chessboard_square_on_top_left: true,
      chessboard_white_value: 255,
      chessboard_gray_value: 180,
    },
    transparent_bg_fill_stage: 'after_resize',
  },
};

/**
 * K3's XTML control tokens: their ids are in no public source we read (the gateway's tests
 * spell them, never number them), so they take reserved slots after the media tokens; no test
 * depends on the ids, only on each being one token.
 */
const KIMI_K3_XTML_SPECIALS: Array<[number, string]> = [
  [163606, '<|open|>'],
  [163607, '<|close|>'],
  [163608, '<|sep|>'],
  [163609, '<|end_of_msg|>'],
];

/** Kimi's ranks before its special tokens (len(mergeable_ranks) of its tiktoken.model). */
export const KIMI_RANKS = 163584;

/** GPT-2's bytes_to_unicode, inverted: a byte-level token's character to its byte. */
const byteLevelDecoder = (): Map<string, number> => new Map(BYTE_CHARS.map((ch, b) => [ch, b]));

/**
 * A tiktoken.model of Kimi's size from the bundled byte-level BPE: its 256 bytes, then its merges
 * in merge order (the same tokens, ranked as tiktoken ranks them), then filler tokens no UTF-8
 * text can hold (bytes 0xF5 to 0xFF) up to KIMI_RANKS, so Kimi's special tokens fall at their ids.
 */
function kimiRanks(dir: string): void {
  const tokenizer = JSON.parse(readFileSync(path.join(BUNDLED_MODEL_PATH, 'tokenizer.json'), 'utf8')) as {
    model: { merges: Array<string | [string, string]> };
  };
  const bytesOf = byteLevelDecoder();
  const raw = (name: string) => Buffer.from(Array.from(name, (ch) => bytesOf.get(ch)!));
  const ranked: Buffer[] = Array.from({ length: 256 }, (_, b) => Buffer.of(b));
  for (const merge of tokenizer.model.merges) {
    const [a, b] = typeof merge === 'string' ? (merge.split(' ') as [string, string]) : merge;
    ranked.push(raw(a + b));
  }
  const filler = [0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd, 0xfe, 0xff];
  for (let i = 0; ranked.length < KIMI_RANKS; i++) {
    const digits: number[] = [];
    for (let n = i; digits.length < 6; n = Math.floor(n / filler.length)) digits.push(filler[n % filler.length]!);
    ranked.push(Buffer.from(digits));
  }
  writeFileSync(path.join(dir, 'tiktoken.model'), ranked.map((bytes, rank) => `${bytes.toString('base64')} ${rank}`).join('\n') + '\n');
}

/**
 * Kimi's tokenizer files: tiktoken.model (no tokenizer.json), and tokenizer_config.json naming
 * its special tokens; K2.5's chat_template.jinja, or none for K3 (its checkpoint renders XTML in
 * code, with its control tokens).
 */
function kimiTokenizer(dir: string, k3 = false): void {
  rmSync(path.join(dir, 'tokenizer.json'));
  rmSync(path.join(dir, 'tokenizer_config.json'));
  kimiRanks(dir);
  writeJson(dir, 'tokenizer_config.json', {
    added_tokens_decoder: Object.fromEntries(
      [...KIMI_SPECIALS, ...(k3 ? KIMI_K3_XTML_SPECIALS : [])].map(([id, content]) => [
        String(id),
        { content, lstrip: false, normalized: false, rstrip: false, single_word: false, special: true },
      ]),
    ),
    auto_map: { AutoTokenizer: ['tokenization_kimi.TikTokenTokenizer', null] },
    bos_token: '[BOS]',
    eos_token: '[EOS]',
    pad_token: '[PAD]',
    unk_token: '[UNK]',
    model_max_length: 1048576,
    tokenizer_class: 'TikTokenTokenizer',
  });
  if (!k3) writeFileSync(path.join(dir, 'chat_template.jinja'), KIMI_CHAT_TEMPLATE);
  writeJson(dir, 'generation_config.json', { eos_token_id: 163586, max_length: 262144 });
}

export type TestFamilyModel = 'qwen3_5' | 'qwen3_5_moe' | 'qwen3_omni_moe' | 'llava' | 'llava_next' | 'kimi_k25' | 'kimi_k3' | 'phi3_v' | 'llama4' | 'inkling';

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
  if (kind === 'kimi_k25') {
    writeJson(dir, 'config.json', KIMI_K25_CONFIG);
    writeJson(dir, 'preprocessor_config.json', KIMI_K25_PREPROCESSOR);
    kimiTokenizer(dir);
  } else if (kind === 'kimi_k3') {
    writeJson(dir, 'config.json', KIMI_K3_CONFIG);
    writeJson(dir, 'preprocessor_config.json', KIMI_K3_PREPROCESSOR);
    kimiTokenizer(dir, true);
  } else if (kind === 'llava') {
    writeJson(dir, 'config.json', LLAVA_CONFIG);
    writeJson(dir, 'preprocessor_config.json', LLAVA_PREPROCESSOR);
    llamaVocabularyTokenizer(dir, LLAVA_SPECIALS, {
      chatTemplate: LLAVA_CHAT_TEMPLATE,
      padToken: '<pad>',
      processorClass: 'LlavaProcessor',
      maxLength: 4096,
      generation: { bos_token_id: 1, eos_token_id: 2, pad_token_id: 32001 },
    });
  } else if (kind === 'llava_next') {
    writeJson(dir, 'config.json', LLAVA_NEXT_CONFIG);
    writeJson(dir, 'preprocessor_config.json', LLAVA_NEXT_PREPROCESSOR);
    llamaVocabularyTokenizer(dir, LLAVA_SPECIALS, {
      chatTemplate: LLAVA_NEXT_CHAT_TEMPLATE,
      padToken: '<pad>',
      processorClass: 'LlavaNextProcessor',
      maxLength: 32768,
      generation: { bos_token_id: 1, eos_token_id: 2, pad_token_id: 32001 },
    });
  } else if (kind === 'phi3_v') {
    writeJson(dir, 'config.json', PHI3_V_CONFIG);
    writeJson(dir, 'preprocessor_config.json', PHI3_V_PREPROCESSOR);
    llamaVocabularyTokenizer(dir, PHI3_V_SPECIALS, {
      chatTemplate: PHI3_V_CHAT_TEMPLATE,
      padToken: '<|endoftext|>',
      processorClass: 'Phi3VProcessor',
      maxLength: 131072,
      generation: { bos_token_id: 1, eos_token_id: [32000, 32001, 32007], pad_token_id: 32000 },
    });
  } else if (kind === 'llama4') {
    writeJson(dir, 'config.json', LLAMA4_CONFIG);
    writeJson(dir, 'preprocessor_config.json', LLAMA4_PREPROCESSOR);
    llamaVocabularyTokenizer(dir, LLAMA4_SPECIALS, {
      chatTemplate: LLAMA4_CHAT_TEMPLATE,
      padToken: '<|finetune_right_pad|>',
      processorClass: 'Llama4Processor',
      maxLength: 10485760,
      generation: { bos_token_id: 200000, eos_token_id: [200001, 200007, 200008], pad_token_id: 200018 },
      named: { bos: '<|begin_of_text|>', eos: '<|eot|>' },
    });
  } else if (kind === 'inkling') {
    writeJson(dir, 'config.json', INKLING_CONFIG);
    writeJson(dir, 'preprocessor_config.json', INKLING_PREPROCESSOR);
    llamaVocabularyTokenizer(dir, INKLING_SPECIALS, {
      chatTemplate: INKLING_CHAT_TEMPLATE,
      padToken: '<|endoftext|>',
      processorClass: 'InklingProcessor',
      maxLength: 131072,
      generation: { eos_token_id: [200000, 200006] },
      named: { bos: '<|endoftext|>', eos: '<|end_message|>' },
    });
  } else if (kind === 'qwen3_omni_moe') {
    writeJson(dir, 'config.json', QWEN3_OMNI_CONFIG);
    writeJson(dir, 'preprocessor_config.json', QWEN3_OMNI_PREPROCESSOR);
  } else {
    writeJson(dir, 'config.json', qwen3_5Config(kind));
    writeJson(dir, 'preprocessor_config.json', QWEN3_VL_PREPROCESSOR);
    shiftSpecialTokens(dir, QWEN3_5_SHIFT);
  }
  return dir;
}
