#!/usr/bin/env node
// Writes models/qwen2-vl-mini/: a small model directory in the real Qwen2-VL file formats
// (config.json, tokenizer.json, tokenizer_config.json, preprocessor_config.json), so the
// product runs out of the box through the same loader as a real checkpoint.
//
// The tokenizer is a byte-level BPE with Qwen2's pre-tokenizer, the 256 byte symbols at
// ids 0-255 and merges learned here from a fixed corpus (deterministic: ties broken by the
// pair's text), and Qwen's special tokens at their real ids (<|endoftext|> 151643 …
// <|image_pad|> 151655). The chat template is Qwen2-VL's. Output is byte-stable: the
// test suite regenerates it and compares with the committed files.
//
// Usage: node scripts/make-demo-model.mjs [OUT_DIR]
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const outDir = path.resolve(process.argv[2] ?? path.join(root, 'models', 'qwen2-vl-mini'));

const SPECIAL_TOKENS = [
  [151643, '<|endoftext|>'],
  [151644, '<|im_start|>'],
  [151645, '<|im_end|>'],
  [151646, '<|object_ref_start|>'],
  [151647, '<|object_ref_end|>'],
  [151648, '<|box_start|>'],
  [151649, '<|box_end|>'],
  [151650, '<|quad_start|>'],
  [151651, '<|quad_end|>'],
  [151652, '<|vision_start|>'],
  [151653, '<|vision_end|>'],
  [151654, '<|vision_pad|>'],
  [151655, '<|image_pad|>'],
  [151656, '<|video_pad|>'],
];

// Qwen2's pre-tokenizer split (Oniguruma syntax, as it appears in real tokenizer.json files).
const QWEN2_SPLIT = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// The same split for training here, in JavaScript syntax (no inline (?i:) groups).
const TRAIN_SPLIT = /'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+/gu;

const CORPUS = `
You are a helpful assistant. Describe the image. What is in this picture? The image shows
a photo of a cat, a dog, a street, a chart and a document with text. Please answer the
question about the images in detail, and explain what you see in each image.
1 image: encoder_input [4900,1176] bfloat16 via shm, 11524800 bytes, fnv1a 1f0e2d3c4b5a6978;
image_grid_thw [1,3] int64 via inline, 24 bytes; 2 images: pixel_values float32 via inline;
patches_per_image [1] int64 via shm; no images. The worker received the tensors and the
router sent them through shared memory or inside the message. Hello, how are you today?
The quick brown fox jumps over the lazy dog. Thank you! system user assistant
`.repeat(3);

const MERGES = 400;

function bytesToUnicode() {
  const bs = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n);
      n += 1;
    }
  }
  const map = new Map();
  bs.forEach((b, i) => map.set(b, String.fromCodePoint(cs[i])));
  return map;
}

function train() {
  const byteChar = bytesToUnicode();
  const vocab = {};
  [...byteChar.entries()].sort((a, b) => a[0] - b[0]).forEach(([, ch], i) => (vocab[ch] = i));
  const words = new Map();
  for (const piece of CORPUS.match(TRAIN_SPLIT) ?? []) {
    const symbols = [...Buffer.from(piece, 'utf8')].map((b) => byteChar.get(b)).join('\u0000');
    words.set(symbols, (words.get(symbols) ?? 0) + 1);
  }
  let seqs = [...words.entries()].map(([w, count]) => ({ symbols: w.split('\u0000'), count }));
  const merges = [];
  for (let step = 0; step < MERGES; step++) {
    const pairs = new Map();
    for (const { symbols, count } of seqs) {
      for (let i = 0; i + 1 < symbols.length; i++) {
        const key = `${symbols[i]} ${symbols[i + 1]}`;
        pairs.set(key, (pairs.get(key) ?? 0) + count);
      }
    }
    let best;
    let bestCount = 1;
    for (const [key, count] of [...pairs.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      if (count > bestCount) {
        best = key;
        bestCount = count;
      }
    }
    if (!best) break;
    const [a, b] = best.split(' ');
    merges.push(best);
    vocab[a + b] = Object.keys(vocab).length;
    seqs = seqs.map(({ symbols, count }) => {
      const next = [];
      for (let i = 0; i < symbols.length; i++) {
        if (i + 1 < symbols.length && symbols[i] === a && symbols[i + 1] === b) {
          next.push(a + b);
          i += 1;
        } else next.push(symbols[i]);
      }
      return { symbols: next, count };
    });
  }
  return { vocab, merges };
}

const CHAT_TEMPLATE =
  "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}{% for message in messages %}{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>{% elif content['type'] == 'video' or 'video' in content %}{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

const { vocab, merges } = train();
const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false };
const tokenizer = {
  version: '1.0',
  truncation: null,
  padding: null,
  added_tokens: SPECIAL_TOKENS.map(([id, content]) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true })),
  normalizer: { type: 'NFC' },
  pre_tokenizer: {
    type: 'Sequence',
    pretokenizers: [{ type: 'Split', pattern: { Regex: QWEN2_SPLIT }, behavior: 'Isolated', invert: false }, byteLevel],
  },
  post_processor: byteLevel,
  decoder: byteLevel,
  model: {
    type: 'BPE',
    dropout: null,
    unk_token: null,
    continuing_subword_prefix: '',
    end_of_word_suffix: '',
    fuse_unk: false,
    byte_fallback: false,
    ignore_merges: false,
    vocab,
    merges,
  },
};

const tokenizerConfig = {
  add_bos_token: false,
  add_prefix_space: false,
  added_tokens_decoder: Object.fromEntries(
    SPECIAL_TOKENS.map(([id, content]) => [String(id), { content, lstrip: false, normalized: false, rstrip: false, single_word: false, special: true }]),
  ),
  additional_special_tokens: [
    '<|im_start|>',
    '<|im_end|>',
    '<|object_ref_start|>',
    '<|object_ref_end|>',
    '<|box_start|>',
    '<|box_end|>',
    '<|quad_start|>',
    '<|quad_end|>',
    '<|vision_start|>',
    '<|vision_end|>',
    '<|vision_pad|>',
    '<|image_pad|>',
    '<|video_pad|>',
  ],
  bos_token: null,
  chat_template: CHAT_TEMPLATE,
  clean_up_tokenization_spaces: false,
  eos_token: '<|im_end|>',
  errors: 'replace',
  model_max_length: 32768,
  pad_token: '<|endoftext|>',
  split_special_tokens: false,
  tokenizer_class: 'Qwen2Tokenizer',
  unk_token: null,
};

const config = {
  architectures: ['Qwen2VLForConditionalGeneration'],
  bos_token_id: 151643,
  eos_token_id: 151645,
  image_token_id: 151655,
  max_position_embeddings: 32768,
  model_type: 'qwen2_vl',
  torch_dtype: 'bfloat16',
  video_token_id: 151656,
  vision_end_token_id: 151653,
  vision_start_token_id: 151652,
  vision_token_id: 151654,
  vocab_size: 151936,
  _comment: 'mmtc demo model: real Qwen2-VL file formats and special-token ids, a small vocabulary, no weights',
};

// min_pixels as the Qwen2-VL checkpoints ship it (Qwen2-VL-7B-Instruct: 3136, 56x56), so a small
// image stays small (128x96 -> 140x84, a 138 KiB bfloat16 encoder tensor) and an SHM threshold
// visibly sorts small images from large ones; max_pixels as SMG's Qwen2-VL default (1280x28x28),
// not the checkpoint's 12845056, so a 4K photo stays at about a megapixel as the gateway sends it.
const preprocessor = {
  do_convert_rgb: true,
  do_normalize: true,
  do_rescale: true,
  do_resize: true,
  image_mean: [0.48145466, 0.4578275, 0.40821073],
  image_processor_type: 'Qwen2VLImageProcessor',
  image_std: [0.26862954, 0.26130258, 0.27577711],
  max_pixels: 1003520,
  merge_size: 2,
  min_pixels: 3136,
  patch_size: 14,
  processor_class: 'Qwen2VLProcessor',
  resample: 3,
  rescale_factor: 0.00392156862745098,
  temporal_patch_size: 2,
};

// Sampling defaults in the shape Qwen2-VL-7B-Instruct's generation_config.json has them: what a
// vLLM or SGLang worker publishes as default_sampling_params_json, and the router applies to a
// request that leaves them out (core/engines/sampling.ts).
const generation = {
  bos_token_id: 151643,
  do_sample: true,
  eos_token_id: [151645, 151643],
  pad_token_id: 151643,
  repetition_penalty: 1.05,
  temperature: 0.01,
  top_k: 1,
  top_p: 0.001,
  _comment: 'mmtc demo model: sampling defaults a worker publishes from this file',
};

mkdirSync(outDir, { recursive: true });
const write = (name, value) => writeFileSync(path.join(outDir, name), `${JSON.stringify(value, null, 2)}\n`);
write('config.json', config);
write('tokenizer.json', tokenizer);
write('tokenizer_config.json', tokenizerConfig);
write('preprocessor_config.json', preprocessor);
write('generation_config.json', generation);
writeFileSync(
  path.join(outDir, 'README.md'),
  '# qwen2-vl-mini\n\nGenerated by `scripts/make-demo-model.mjs`; do not edit by hand. A model directory in the real Qwen2-VL\nfile formats (special tokens at their real ids, Qwen2-VL chat template and image processor\nsettings) with a small byte-level BPE vocabulary and no weights. `mmtc` uses it when no\n`--model-path` is given.\n',
);
process.stdout.write(`wrote ${path.relative(process.cwd(), outDir) || '.'} (${Object.keys(vocab).length} vocabulary entries, ${merges.length} merges)\n`);
