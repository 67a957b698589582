// From chat messages to the token ids a Qwen-VL worker expects.
//
// The chat template renders one `<|vision_start|><|image_pad|><|vision_end|>` per image;
// after tokenizing, each image's single `<|image_pad|>` is expanded to N copies, N =
// grid_t·grid_h·grid_w / merge², and its placeholder range (offset of the first pad, N) is
// recorded in prompt order, as the workers' PlaceholderRange wants it.
import type { ModelDirectory } from './model-dir.ts';

export type ChatContentPart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } };
export interface ChatMessage {
  role: string;
  content: string | ChatContentPart[] | null;
}

export interface BuiltPrompt {
  text: string;
  inputIds: number[];
  placeholders: Array<{ offset: number; length: number }>;
}

export class PromptError extends Error {
  override readonly name = 'PromptError';
}

export function renderChat(model: ModelDirectory, messages: readonly ChatMessage[]): string {
  const templated = messages.map((m) => ({
    role: m.role,
    content: typeof m.content === 'string' || m.content === null ? (m.content ?? '') : m.content.map((p) => (p.type === 'text' ? { type: 'text', text: p.text } : { type: 'image', image_url: p.image_url.url })),
  }));
  try {
    return model.chatTemplate.render({ messages: templated, add_generation_prompt: true, add_vision_id: false, ...model.templateTokens });
  } catch (err) {
    throw new PromptError(`the chat template failed to render these messages: ${(err as Error).message}`);
  }
}

/** Render, tokenize and expand image placeholders; `imageTokens[i]` is image i's N. */
export function buildPrompt(model: ModelDirectory, messages: readonly ChatMessage[], imageTokens: readonly number[]): BuiltPrompt {
  const text = renderChat(model, messages);
  const ids = model.tokenizer.encode(text, { add_special_tokens: false }).ids;
  const pads: number[] = [];
  ids.forEach((id, i) => id === model.imageTokenId && pads.push(i));
  if (pads.length !== imageTokens.length) {
    throw new PromptError(`the rendered prompt has ${pads.length} image placeholder(s) for ${imageTokens.length} image(s)`);
  }
  const inputIds: number[] = [];
  const placeholders: BuiltPrompt['placeholders'] = [];
  let from = 0;
  pads.forEach((at, i) => {
    for (let k = from; k < at; k++) inputIds.push(ids[k]!);
    placeholders.push({ offset: inputIds.length, length: imageTokens[i]! });
    for (let k = 0; k < imageTokens[i]!; k++) inputIds.push(model.imageTokenId);
    from = at + 1;
  });
  for (let k = from; k < ids.length; k++) inputIds.push(ids[k]!);
  return { text, inputIds, placeholders };
}
