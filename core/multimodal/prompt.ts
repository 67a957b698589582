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
  return tokenizePrompt(model, renderChat(model, messages), imageTokens);
}

/** A prompt longer than the model's context: refused with OpenAI's context_length_exceeded. */
export class ContextLengthError extends Error {
  override readonly name = 'ContextLengthError';
  constructor(
    /** The prompt's tokens, or (atLeast) a lower bound of them when it was refused before being tokenized whole. */
    readonly promptTokens: number,
    readonly context: number,
    readonly atLeast: boolean,
  ) {
    super(`This model's maximum context length is ${context} tokens. However, your messages resulted in ${atLeast ? 'more than ' : ''}${atLeast ? context : promptTokens} tokens. Please reduce the length of the messages.`);
  }
}

/** Text above this many bytes is counted in slices first, the event loop free between them. */
export const COUNT_IN_SLICES_ABOVE = 256 * 1024;
const SLICE_BYTES = 64 * 1024;

/**
 * Tokens of `text` counted slice by slice (cut at whitespace), yielding to the event loop
 * between slices and stopping as soon as the count passes `limit`. A slice boundary can
 * shift a token, so the count may differ from the whole text's by one per slice.
 */
async function countInSlices(model: ModelDirectory, text: string, limit: number): Promise<{ tokens: number; slices: number }> {
  let tokens = 0;
  let slices = 0;
  for (let at = 0; at < text.length; ) {
    let end = Math.min(text.length, at + SLICE_BYTES);
    const space = text.indexOf(' ', end);
    if (end < text.length && space > 0 && space - end < 4096) end = space;
    tokens += model.tokenizer.encode(text.slice(at, end), { add_special_tokens: false }).ids.length;
    slices += 1;
    at = end;
    if (tokens > limit + slices) break;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  return { tokens, slices };
}

/**
 * buildPrompt, admitted against the context window without ever tokenizing much more text
 * than could fit: a prompt whose bytes alone prove it too long (every token covers at most
 * maxTokenBytes) is refused at once; a long one is counted in slices first; the whole prompt
 * is tokenized only when it can fit, and refused if it does not.
 */
export async function buildPromptWithin(model: ModelDirectory, messages: readonly ChatMessage[], imageTokens: readonly number[], context: number): Promise<BuiltPrompt> {
  const text = renderChat(model, messages);
  // Each image's one placeholder token becomes N.
  const imageExtra = imageTokens.reduce((n, t) => n + t - 1, 0);
  const bytes = Buffer.byteLength(text);
  const atLeast = Math.ceil(bytes / model.maxTokenBytes) + imageExtra;
  if (atLeast > context) throw new ContextLengthError(atLeast, context, true);
  if (bytes > COUNT_IN_SLICES_ABOVE) {
    const counted = await countInSlices(model, text, context - imageExtra);
    if (counted.tokens > context - imageExtra + counted.slices) throw new ContextLengthError(counted.tokens + imageExtra, context, true);
  }
  const built = tokenizePrompt(model, text, imageTokens);
  if (built.inputIds.length > context) throw new ContextLengthError(built.inputIds.length, context, false);
  return built;
}

function tokenizePrompt(model: ModelDirectory, text: string, imageTokens: readonly number[]): BuiltPrompt {
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
