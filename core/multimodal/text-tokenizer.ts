// A model's text tokenizer, as the router and the reference worker use it: one interface over
// the two kinds a checkpoint ships (docs/preprocessing.md, "Tokenizers"): Hugging Face's
// tokenizer.json (@huggingface/tokenizers) and tiktoken's BPE ranks (tiktoken.model, Kimi's;
// tiktoken.ts).
import type { Tokenizer } from '@huggingface/tokenizers';

export interface TextTokenizer {
  /** Ids of `text`, the added tokens it spells (the chat template's markup: `<|im_end|>`, …) taken as those tokens. */
  encode(text: string): number[];
  /** Ids of `text` as plain text: an added token's spelling in it is tokenized like any other text (what a client wrote). */
  encodePlain(text: string): number[];
  /** The text of `ids`; `skipSpecial` leaves the special tokens out (what a completion shows). */
  decode(ids: readonly number[], skipSpecial: boolean): string;
  /** The spellings the tokenizer turns into one added token. */
  addedTokens(): string[];
  tokenToId(token: string): number | undefined;
  idToToken(id: number): string | undefined;
  /** Entries in the vocabulary, added tokens included. */
  vocabSize: number;
  /** Most UTF-8 bytes one token can stand for: text of N bytes has at least N / this many tokens. */
  maxTokenBytes: number;
}

/** The tokenizer's parts behind encode(), driven to tokenize text without looking for added tokens in it. */
interface TokenizerParts {
  normalizer: ((text: string) => string) | null;
  pre_tokenizer: ((text: string, options?: { section_index?: number }) => string[]) | null;
  model: ((pieces: string[]) => string[]) & { unk_token_id?: number };
  token_to_id(token: string): number | undefined;
}

/** tokenizer.json's tokenizer (@huggingface/tokenizers), as a TextTokenizer. */
export function huggingFaceTokenizer(tokenizer: Tokenizer, json: Record<string, unknown>): TextTokenizer {
  const vocab = tokenizer.get_vocab(true) as Map<string, number> | Record<string, number>;
  const entries = vocab instanceof Map ? [...vocab.keys()] : Object.keys(vocab);
  let longest = 1;
  // get_vocab can hold an entry without a token string (an added token's slot): skip it.
  for (const token of entries) if (typeof token === 'string' && token.length > longest) longest = token.length;
  // Byte-level BPE (Qwen's tokenizers) writes one character per byte; other vocabularies write characters, each up to 4 UTF-8 bytes.
  const byteLevel = JSON.stringify([json.pre_tokenizer, json.decoder]).includes('ByteLevel');
  let added: string[] | undefined;
  const parts = tokenizer as unknown as TokenizerParts;
  return {
    encode: (text) => tokenizer.encode(text, { add_special_tokens: false }).ids,
    // What encode() does to the text between added tokens (normalizer, pre-tokenizer, BPE), without first looking for added tokens in it.
    encodePlain: (text) => {
      if (text === '') return [];
      const normalized = parts.normalizer ? parts.normalizer(text) : text;
      const pieces = parts.pre_tokenizer ? parts.pre_tokenizer(normalized, { section_index: 0 }) : [normalized];
      return parts.model(pieces).map((token) => parts.token_to_id(token) ?? parts.model.unk_token_id ?? 0);
    },
    // The tokenizer refuses an empty list; no tokens are no text.
    decode: (ids, skipSpecial) => (ids.length ? tokenizer.decode([...ids], { skip_special_tokens: skipSpecial }) : ''),
    addedTokens: () => (added ??= [...tokenizer.get_added_tokens_decoder().values()].map((t) => t.content).filter((c) => c.length > 0)),
    tokenToId: (token) => tokenizer.token_to_id(token) ?? undefined,
    idToToken: (id) => tokenizer.id_to_token(id) ?? undefined,
    vocabSize: entries.length,
    maxTokenBytes: byteLevel ? longest : longest * 4,
  };
}
