// Kimi-K3 (model_type `kimi_k3`, moonshotai/Kimi-K3): the gateway's kimi_k3 spec
// (registry/kimi_k3.rs) and its KimiK3Processor (vision/processors/kimi_k3.rs): K2.5's MoonViT
// patches and wire layout (kimi-k25.ts) with four times its patch budget and its transparent
// pixels flattened over a chessboard (moonvit.ts, transparent-bg.ts). Its prompt differs:
//
// - K3 ships no Jinja chat template; the checkpoint renders XTML in Python
//   (encoding_k3.py::build_chat_segments, with a thinking_effort of max by default), which the
//   gateway ports (crates/tokenizer/src/encoders/kimi_k3_xtml.rs). KIMI_K3_CHAT_TEMPLATE is that
//   rendering for the messages mmtc takes (system, user and assistant text; no tools), held to
//   the Python reference's own outputs in families.test.ts. Content is a string: an image is one
//   <|media_pad|> (config.json media_placeholder_token_id, 163605) in the message's text.
// - Each image's <|media_pad|> becomes the checkpoint's make_image_prompt block with the image's
//   decoded size: <|media_begin|>, "image {width}x{height}" as text, <|media_content|>, its
//   tokens' <|media_pad|> run, <|media_end|> (the gateway's prompt_replacements; vLLM's
//   kimi_k3.py::_get_prompt_updates). The features go to the run alone: vLLM gets the block and
//   masks it by im_token_id, SGLang and TokenSpeed get the run (engines).
import { KIMI_K3_DEFAULTS } from '../moonvit.ts';
import type { ImageModelTensor, PromptTokenIds, VisionFamily } from './family.ts';
import { moonVitEncoderShape, moonVitImageTensors } from './moonvit-patches.ts';

const MEDIA_BEGIN = '<|media_begin|>';
const MEDIA_CONTENT = '<|media_content|>';
const MEDIA_END = '<|media_end|>';
/** The XTML control tokens the template writes. */
const XTML_TOKENS = ['<|open|>', '<|close|>', '<|sep|>', '<|end_of_msg|>'] as const;

/** The image's media block: its size as text between the wrapper tokens, then its run of `tokens` <|media_pad|>. */
function promptSequence(_tensors: readonly ImageModelTensor[], tokens: number, ids: PromptTokenIds, source: { width: number; height: number }): number[] {
  const id = (spelling: string) => ids.named[spelling]!;
  return [
    id(MEDIA_BEGIN),
    ...ids.text(`image ${source.width}x${source.height}`),
    id(MEDIA_CONTENT),
    ...new Array<number>(tokens).fill(ids.image),
    id(MEDIA_END),
  ];
}

const EFFORT_BODY =
  '`thinking_effort` guides on how much to think in your thinking channel (not including the response channel), ' +
  'supported values include `low`, `medium`, `high`, and `max`.\nNow the system is invoked with `thinking_effort={{ effort }}`.';

/**
 * build_chat_segments for system, user and assistant messages, thinking on (an assistant turn
 * carries an empty think channel before its response) and, as the served entry point does,
 * a thinking_effort of max unless `thinking_effort` is given (none: no directive; the Python
 * reference's own outputs, which families.test.ts compares with). A developer message has no
 * K3 rendering (the reference's loop skips unknown roles): refused rather than dropped.
 */
export const KIMI_K3_CHAT_TEMPLATE =
  '{%- if thinking is defined -%}{%- set think = thinking -%}{%- else -%}{%- set think = true -%}{%- endif -%}' +
  "{%- if thinking_effort is defined -%}{%- set effort = thinking_effort -%}{%- else -%}{%- set effort = 'max' -%}{%- endif -%}" +
  `{%- if think and effort -%}<|open|>message role="system" type="thinking-effort"<|sep|>${EFFORT_BODY}<|close|>message<|sep|><|end_of_msg|>{%- endif -%}` +
  '{%- for message in messages -%}' +
  "{%- if message['role'] == 'user' or message['role'] == 'system' -%}" +
  "<|open|>message role=\"{{ message['role'] }}\"<|sep|>{{ message['content'] }}<|close|>message<|sep|><|end_of_msg|>" +
  "{%- elif message['role'] == 'assistant' -%}" +
  '<|open|>message role="assistant"<|sep|>{%- if think -%}<|open|>think<|sep|><|close|>think<|sep|>{%- endif -%}' +
  "<|open|>response<|sep|>{{ message['content'] }}<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>" +
  "{%- else -%}{{ raise_exception('Kimi-K3 renders system, user and assistant messages, not ' + message['role']) }}{%- endif -%}" +
  '{%- endfor -%}' +
  '{%- if add_generation_prompt -%}<|open|>message role="assistant"<|sep|>{%- if think -%}<|open|>think<|sep|>{%- else -%}<|open|>response<|sep|>{%- endif -%}{%- endif -%}';

export const KIMI_K3: VisionFamily = {
  id: 'kimi_k3',
  label: 'Kimi-K3',
  gatewaySpec: 'kimi_k3',
  modelTypes: ['kimi_k3'],
  imageTokenKey: 'media_placeholder_token_id',
  tokenFallbacks: { media_placeholder_token_id: '<|media_pad|>' },
  visionMarkers: false,
  tiktoken: true,
  promptTokens: [MEDIA_BEGIN, MEDIA_CONTENT, MEDIA_END, ...XTML_TOKENS],
  promptSequence,
  chatTemplate: KIMI_K3_CHAT_TEMPLATE,
  defaults: KIMI_K3_DEFAULTS,
  imageTensors: moonVitImageTensors,
  encoderShape: moonVitEncoderShape,
};
