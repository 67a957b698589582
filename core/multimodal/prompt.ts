// From chat messages to the token ids a vision-language worker expects.
//
// The chat template renders one placeholder per image (Qwen's
// `<|vision_start|><|image_pad|><|vision_end|>`); after tokenizing, each image's single
// placeholder is expanded to N copies of the image token, N its tokens (Qwen's
// grid_t·grid_h·grid_w / merge²), or to the family's sequence (Llama 4's tiles and
// separators around its <|patch|> runs: VisionFamily.promptSequence), and its placeholder
// range (offset, length) is recorded in prompt order, as the workers' PlaceholderRange wants
// it, with the runs of the image token inside a sequence.
//
// What a client writes is text, whatever it spells: `<|image_pad|>` typed in a message was
// tokenized as the image placeholder token (and counted as an image, so a request was
// refused for a mismatch or, worse, an image's features went where the client typed). The
// messages' own text is tokenized as plain text, never as the tokenizer's added tokens; only
// the template's own markup is (literalSegments).
import { randomBytes } from 'node:crypto';
import { familyById } from './families/index.ts';
import type { PromptTokenIds } from './families/family.ts';
import type { ModelDirectory } from './model-dir.ts';

export type ChatContentPart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } };
export interface ChatMessage {
  role: string;
  content: string | ChatContentPart[] | null;
}

/** Where an image's tokens sit in the prompt; `patches`, where they are more than the image token repeated: the runs of it (where the features go). */
export interface PlaceholderRange {
  offset: number;
  length: number;
  patches?: Array<{ offset: number; length: number }>;
}

export interface BuiltPrompt {
  text: string;
  inputIds: number[];
  placeholders: PlaceholderRange[];
}

/**
 * The ranges an image's features go to, as the gateway gives SGLang and TokenSpeed their
 * placeholders (assemble.rs, placeholders_for_bindings preferring patches): the runs of the
 * image token where its range holds other tokens too, else the range.
 */
export const embedRanges = (p: PlaceholderRange): Array<{ offset: number; length: number }> => p.patches ?? [{ offset: p.offset, length: p.length }];

/** An image's whole range, as the gateway gives vLLM its placeholder (the servicer masks it by im_token_id). */
export const wholeRange = (p: PlaceholderRange): { offset: number; length: number } => ({ offset: p.offset, length: p.length });

/** The ids a family's prompt sequence is made of, from the model's tokenizer (VisionFamily.promptSequence). */
export const promptTokenIdsOf = (model: ModelDirectory): PromptTokenIds => ({
  image: model.imageTokenId,
  named: model.promptTokenIds,
  text: (s) => model.tokenizer.encodePlain(s),
});

/** An image's tokens in the prompt: N copies of the image token, or the family's whole sequence (VisionFamily.promptSequence). */
export type ImageSlot = number | readonly number[];

const slotLength = (slot: ImageSlot): number => (typeof slot === 'number' ? slot : slot.length);

/** The runs of `token` in `ids` from `offset`, as prompt ranges. */
function runsOf(ids: readonly number[], token: number, offset: number): Array<{ offset: number; length: number }> {
  const runs: Array<{ offset: number; length: number }> = [];
  ids.forEach((id, i) => {
    if (id !== token) return;
    const last = runs[runs.length - 1];
    if (last && last.offset + last.length === offset + i) last.length += 1;
    else runs.push({ offset: offset + i, length: 1 });
  });
  return runs;
}

export class PromptError extends Error {
  override readonly name = 'PromptError';
}

/** The rendered prompt; `segments` when a message's text spells an added token: the text in pieces, `literal` for the messages' own. */
interface RenderedChat {
  text: string;
  segments?: Array<{ text: string; literal: boolean }>;
}

function messageTexts(messages: readonly ChatMessage[]): string[] {
  return messages.flatMap((m) => (typeof m.content === 'string' ? [m.content] : (m.content ?? []).flatMap((p) => (p.type === 'text' ? [p.text] : []))));
}

/**
 * A message's parts as one string, for a template that takes content as a string
 * (content-format.ts): each image's placeholder token first, then the texts, joined by
 * newlines, as the gateway writes them (chat_utils.rs, transform_content_field) and vLLM does.
 */
function flattenedParts(model: ModelDirectory, parts: readonly ChatContentPart[], text: (t: string) => string): string {
  const placeholder = model.tokenizer.idToToken(model.imagePlaceholderId)!;
  return partsInOrder(model, parts)
    .map((p) => (p.type === 'text' ? text(p.text) : placeholder))
    .join('\n');
}

/**
 * A message's parts with its images first, each kind in the order written: the gateway's
 * order for every family mmtc serves (chat_utils.rs, transform_content_field, MediaPartOrder::
 * MediaFirst, "matching vLLM front placement"), so the prompt is the one the gateway's request
 * would give the worker.
 */
function mediaFirst(parts: readonly ChatContentPart[]): ChatContentPart[] {
  return [...parts.filter((p) => p.type === 'image_url'), ...parts.filter((p) => p.type !== 'image_url')];
}

/** A message's parts in its family's order: as written (Inkling: VisionFamily.authoredOrder), else images first. */
const partsInOrder = (model: ModelDirectory, parts: readonly ChatContentPart[]): readonly ChatContentPart[] =>
  familyById(model.family).authoredOrder ? parts : mediaFirst(parts);

function renderTemplate(model: ModelDirectory, messages: readonly ChatMessage[], text: (t: string) => string): string {
  const templated = messages.map((m) => ({
    role: m.role,
    content:
      typeof m.content === 'string' || m.content === null
        ? text(m.content ?? '')
        : model.contentFormat === 'string'
          ? flattenedParts(model, m.content, text)
          : partsInOrder(model, m.content).map((p) =>
              p.type === 'text' ? { type: 'text', text: text(p.text) } : { type: 'image', image_url: p.image_url.url },
            ),
  }));
  try {
    return model.chatTemplate.render({ messages: templated, add_generation_prompt: true, add_vision_id: false, ...model.templateTokens });
  } catch (err) {
    throw new PromptError(`the chat template failed to render these messages: ${(err as Error).message}`);
  }
}

/**
 * The prompt, and, when some message text contains an added token's spelling, where the
 * messages' own text lies in it: the template is rendered with each text replaced by a
 * marker no client can forge (a random nonce in private-use characters), then the markers
 * are put back as literal segments.
 */
function renderChatSegments(model: ModelDirectory, messages: readonly ChatMessage[]): RenderedChat {
  const added = model.tokenizer.addedTokens();
  if (!messageTexts(messages).some((t) => added.some((a) => t.includes(a)))) return { text: renderTemplate(model, messages, (t) => t) };
  const nonce = randomBytes(8).toString('hex');
  const texts: string[] = [];
  const marked = renderTemplate(model, messages, (t) => {
    texts.push(t);
    return `\ue000${nonce}${texts.length - 1}\ue001`;
  });
  const segments: Array<{ text: string; literal: boolean }> = [];
  const marker = new RegExp(`\ue000${nonce}(\\d+)\ue001`, 'g');
  let at = 0;
  for (const m of marked.matchAll(marker)) {
    if (m.index > at) segments.push({ text: marked.slice(at, m.index), literal: false });
    segments.push({ text: texts[Number(m[1])]!, literal: true });
    at = m.index + m[0].length;
  }
  if (at < marked.length) segments.push({ text: marked.slice(at), literal: false });
  return { text: segments.map((s) => s.text).join(''), segments };
}

export function renderChat(model: ModelDirectory, messages: readonly ChatMessage[]): string {
  return renderChatSegments(model, messages).text;
}

/** Render, tokenize and expand image placeholders; `imageTokens[i]` is image i's N (or its sequence). */
export function buildPrompt(model: ModelDirectory, messages: readonly ChatMessage[], imageTokens: readonly ImageSlot[]): BuiltPrompt {
  return tokenizePrompt(model, renderChatSegments(model, messages), imageTokens);
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
    super(
      `This model's maximum context length is ${context} tokens. However, your messages resulted in ${atLeast ? 'more than ' : ''}${atLeast ? context : promptTokens} tokens. Please reduce the length of the messages.`,
    );
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
  for (let at = 0; at < text.length;) {
    let end = Math.min(text.length, at + SLICE_BYTES);
    const space = text.indexOf(' ', end);
    if (end < text.length && space > 0 && space - end < 4096) end = space;
    tokens += model.tokenizer.encode(text.slice(at, end)).length;
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
export async function buildPromptWithin(
  model: ModelDirectory,
  messages: readonly ChatMessage[],
  imageTokens: readonly ImageSlot[],
  context: number,
): Promise<BuiltPrompt> {
  const rendered = renderChatSegments(model, messages);
  const { text } = rendered;
  // Each image's one placeholder token becomes N.
  const imageExtra = imageTokens.reduce<number>((n, t) => n + slotLength(t) - 1, 0);
  const bytes = Buffer.byteLength(text);
  const atLeast = Math.ceil(bytes / model.maxTokenBytes) + imageExtra;
  if (atLeast > context) throw new ContextLengthError(atLeast, context, true);
  if (bytes > COUNT_IN_SLICES_ABOVE) {
    const counted = await countInSlices(model, text, context - imageExtra);
    if (counted.tokens > context - imageExtra + counted.slices) throw new ContextLengthError(counted.tokens + imageExtra, context, true);
  }
  const built = tokenizePrompt(model, rendered, imageTokens);
  if (built.inputIds.length > context) throw new ContextLengthError(built.inputIds.length, context, false);
  return built;
}

function tokenizePrompt(model: ModelDirectory, { text, segments }: RenderedChat, imageTokens: readonly ImageSlot[]): BuiltPrompt {
  const { tokenizer } = model;
  const ids = segments ? segments.flatMap((s) => (s.literal ? tokenizer.encodePlain(s.text) : tokenizer.encode(s.text))) : tokenizer.encode(text);
  const pads: number[] = [];
  ids.forEach((id, i) => id === model.imagePlaceholderId && pads.push(i));
  if (pads.length !== imageTokens.length) {
    throw new PromptError(`the rendered prompt has ${pads.length} image placeholder(s) for ${imageTokens.length} image(s)`);
  }
  const inputIds: number[] = [];
  const placeholders: BuiltPrompt['placeholders'] = [];
  // The token the template writes before each placeholder that the image's range starts at (Inkling's <|content_image|>).
  const prefixText = familyById(model.family).structuralPrefix;
  const prefix = prefixText === undefined ? undefined : model.promptTokenIds[prefixText];
  let from = 0;
  pads.forEach((at, i) => {
    for (let k = from; k < at; k++) inputIds.push(ids[k]!);
    const slot = imageTokens[i]!;
    if (typeof slot === 'number' && prefix !== undefined) {
      if (inputIds.at(-1) !== prefix)
        throw new PromptError(`the rendered prompt's image placeholder ${i} does not follow ${prefixText}, which its range starts at`);
      placeholders.push({ offset: inputIds.length - 1, length: slot + 1, patches: [{ offset: inputIds.length, length: slot }] });
      for (let k = 0; k < slot; k++) inputIds.push(model.imageTokenId);
    } else if (typeof slot === 'number') {
      placeholders.push({ offset: inputIds.length, length: slot });
      for (let k = 0; k < slot; k++) inputIds.push(model.imageTokenId);
    } else {
      placeholders.push({ offset: inputIds.length, length: slot.length, patches: runsOf(slot, model.imageTokenId, inputIds.length) });
      for (const id of slot) inputIds.push(id);
    }
    from = at + 1;
  });
  for (let k = from; k < ids.length; k++) inputIds.push(ids[k]!);
  return { text, inputIds, placeholders };
}
