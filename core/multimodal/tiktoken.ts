// tiktoken's byte-pair encoding (a model directory's tiktoken.model: one base64 token and its
// rank per line), as a TextTokenizer (text-tokenizer.ts), and the Kimi K2 / K2.5 / K3 tokenizer
// built on it (docs/preprocessing.md, "Tokenizers"): the checkpoint's tokenization_kimi.py, as
// the gateway loads it (crates/tokenizer/src/kimi_k2_tokenizer.rs): its Han-aware split
// pattern, and 256 special tokens from the number of ranks on, named by
// tokenizer_config.json's added_tokens_decoder, the rest `<|reserved_token_{id}|>`.
//
// Encoding is tiktoken's: special tokens first (allowed_special="all", as Kimi's encode asks),
// then each piece the pattern splits the text between them into, as UTF-8 bytes, is one token
// when the ranks have it whole, else merged pair by pair, the lowest rank first (the leftmost of
// equal ranks), from single bytes.
import type { TextTokenizer } from './text-tokenizer.ts';

export class TiktokenError extends Error {
  override readonly name = 'TiktokenError';
}

/** Token bytes (as a latin1 string, one character per byte) to rank, from tiktoken.model's text; errors name the file and the line. */
export function parseTiktokenRanks(text: string, file: string): Map<string, number> {
  const ranks = new Map<string, number>();
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line === '') continue;
    const [token, rank, extra] = line.split(' ');
    const value = Number(rank);
    if (extra !== undefined || token === undefined || !/^[A-Za-z0-9+/]*={0,2}$/.test(token) || !Number.isInteger(value) || value < 0)
      throw new TiktokenError(`${file}:${i + 1}: expected "<base64 token> <rank>", got ${JSON.stringify(line.slice(0, 80))}`);
    const bytes = Buffer.from(token, 'base64').toString('latin1');
    if (bytes === '') throw new TiktokenError(`${file}:${i + 1}: an empty token`);
    if (ranks.has(bytes)) throw new TiktokenError(`${file}:${i + 1}: token ${JSON.stringify(token)} is listed twice`);
    ranks.set(bytes, value);
  }
  return ranks;
}

/** GPT-2's bytes_to_unicode: the printable character a byte is written as in a token's name (the names HF's tokenizers give tiktoken's tokens). */
const BYTE_CHARS: string[] = (() => {
  const printable = new Set<number>();
  for (const [a, b] of [
    [33, 126],
    [161, 172],
    [174, 255],
  ] as const)
    for (let x = a; x <= b; x++) printable.add(x);
  let next = 256;
  return Array.from({ length: 256 }, (_, b) => String.fromCodePoint(printable.has(b) ? b : next++));
})();

/** The ids of one piece (latin1 bytes) by byte-pair merging, as tiktoken's _byte_pair_merge. */
function bytePairEncode(piece: string, ranks: Map<string, number>): number[] {
  const starts = Array.from({ length: piece.length + 1 }, (_, i) => i);
  const rankAt = (i: number) => (i + 2 < starts.length ? (ranks.get(piece.slice(starts[i], starts[i + 2])) ?? Infinity) : Infinity);
  const pairRanks = starts.map((_, i) => rankAt(i));
  for (;;) {
    let best = Infinity;
    let at = -1;
    for (let i = 0; i < starts.length - 1; i++)
      if (pairRanks[i]! < best) {
        best = pairRanks[i]!;
        at = i;
      }
    if (at < 0) break;
    starts.splice(at + 1, 1);
    pairRanks.splice(at + 1, 1);
    pairRanks[at] = rankAt(at);
    if (at > 0) pairRanks[at - 1] = rankAt(at - 1);
  }
  const ids: number[] = [];
  for (let i = 0; i < starts.length - 1; i++) {
    const id = ranks.get(piece.slice(starts[i], starts[i + 1]));
    if (id === undefined) throw new TiktokenError(`byte ${piece.charCodeAt(starts[i]!)} has no rank (tiktoken.model must rank every single byte)`);
    ids.push(id);
  }
  return ids;
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\\-/]/g, '\\$&');

/** A tiktoken BPE tokenizer: its ranks, the pattern that splits text into pieces, and its special tokens by spelling. */
export function tiktokenTokenizer(ranks: Map<string, number>, pattern: RegExp, special: ReadonlyMap<string, number>): TextTokenizer {
  if (!pattern.global) throw new TypeError('the split pattern must be global');
  const bytesOf: string[] = [];
  let maxBytes = 1;
  for (const [bytes, id] of ranks) {
    bytesOf[id] = bytes;
    if (bytes.length > maxBytes) maxBytes = bytes.length;
  }
  const specialOf = new Map<number, string>();
  for (const [text, id] of special) {
    specialOf.set(id, text);
    maxBytes = Math.max(maxBytes, Buffer.byteLength(text));
  }
  const spellings = [...special.keys()].sort((a, b) => b.length - a.length);
  const specialPattern = spellings.length ? new RegExp(spellings.map(escapeRegExp).join('|'), 'g') : undefined;
  const cache = new Map<string, number[]>();
  const encodePlain = (text: string): number[] => {
    const ids: number[] = [];
    for (const m of text.matchAll(pattern)) {
      const piece = Buffer.from(m[0], 'utf8').toString('latin1');
      const whole = ranks.get(piece);
      if (whole !== undefined) ids.push(whole);
      else {
        let merged = cache.get(piece);
        if (!merged) {
          merged = bytePairEncode(piece, ranks);
          if (cache.size < 4096) cache.set(piece, merged);
        }
        ids.push(...merged);
      }
    }
    return ids;
  };
  return {
    encode: (text) => {
      if (!specialPattern) return encodePlain(text);
      const ids: number[] = [];
      let at = 0;
      for (const m of text.matchAll(specialPattern)) {
        ids.push(...encodePlain(text.slice(at, m.index)), special.get(m[0])!);
        at = m.index + m[0].length;
      }
      ids.push(...encodePlain(text.slice(at)));
      return ids;
    },
    encodePlain,
    decode: (ids, skipSpecial) => {
      const parts: Buffer[] = [];
      for (const id of ids) {
        const bytes = bytesOf[id];
        if (bytes !== undefined) parts.push(Buffer.from(bytes, 'latin1'));
        else if (specialOf.has(id)) {
          if (!skipSpecial) parts.push(Buffer.from(specialOf.get(id)!, 'utf8'));
        } else throw new TiktokenError(`token id ${id} is not in the vocabulary`);
      }
      return Buffer.concat(parts).toString('utf8');
    },
    addedTokens: () => spellings,
    tokenToId: (token) => {
      const id = special.get(token);
      if (id !== undefined) return id;
      let bytes = '';
      for (const ch of token) {
        const b = BYTE_CHARS.indexOf(ch);
        if (b < 0) return undefined;
        bytes += String.fromCharCode(b);
      }
      return ranks.get(bytes);
    },
    idToToken: (id) => specialOf.get(id) ?? (bytesOf[id] === undefined ? undefined : Array.from(bytesOf[id], (c) => BYTE_CHARS[c.charCodeAt(0)]!).join('')),
    vocabSize: ranks.size + special.size,
    maxTokenBytes: maxBytes,
  };
}

/**
 * Kimi's split pattern (tokenization_kimi.py's pat_str, Rust regex syntax) in JavaScript's `v`
 * mode: `[A&&[^\p{Han}]]` is `[A--\p{Script=Han}]`; `(?i:'s|…)` is written out case by case
 * (with `ſ`, which folds to s); `\s` is Unicode's White_Space, as the Rust regex crate's is.
 */
export const KIMI_PATTERN = new RegExp(
  [
    String.raw`[\p{Script=Han}]+`,
    String.raw`[^\r\n\p{L}\p{N}]?[[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]--\p{Script=Han}]*[[\p{Ll}\p{Lm}\p{Lo}\p{M}]--\p{Script=Han}]+(?:'[sSſ]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?`,
    String.raw`[^\r\n\p{L}\p{N}]?[[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]--\p{Script=Han}]+[[\p{Ll}\p{Lm}\p{Lo}\p{M}]--\p{Script=Han}]*(?:'[sSſ]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?`,
    String.raw`\p{N}{1,3}`,
    String.raw` ?[^\p{White_Space}\p{L}\p{N}]+[\r\n]*`,
    String.raw`\p{White_Space}*[\r\n]+`,
    String.raw`\p{White_Space}+(?!\P{White_Space})`,
    String.raw`\p{White_Space}+`,
  ].join('|'),
  'gv',
);

/** Kimi reserves this many special-token ids after its ranks. */
export const KIMI_SPECIAL_SLOTS = 256;

/**
 * Kimi's tokenizer from tiktoken.model's ranks and tokenizer_config.json's added_tokens_decoder:
 * ids from the number of ranks on are special, named by the config or `<|reserved_token_{id}|>`.
 */
export function kimiTokenizer(ranks: Map<string, number>, addedTokensDecoder: unknown, file: string): TextTokenizer {
  const base = ranks.size;
  for (const [bytes, id] of ranks)
    if (id >= base)
      throw new TiktokenError(
        `${file}: tiktoken.model's rank ${id} (of ${JSON.stringify(Buffer.from(bytes, 'latin1').toString('base64'))}) is not below its ${base} ranks: Kimi's special tokens start after dense ranks`,
      );
  const named = new Map<number, string>();
  if (addedTokensDecoder !== undefined) {
    if (addedTokensDecoder === null || typeof addedTokensDecoder !== 'object' || Array.isArray(addedTokensDecoder))
      throw new TiktokenError(`${file}: added_tokens_decoder must be an object of id to {content}, got ${JSON.stringify(addedTokensDecoder).slice(0, 80)}`);
    for (const [key, entry] of Object.entries(addedTokensDecoder as Record<string, unknown>)) {
      const id = Number(key);
      const content = (entry as { content?: unknown } | null)?.content;
      if (!Number.isInteger(id) || typeof content !== 'string')
        throw new TiktokenError(
          `${file}: added_tokens_decoder[${JSON.stringify(key)}] must be an integer id with a string content, got ${JSON.stringify(entry)}`,
        );
      if (id < base || id >= base + KIMI_SPECIAL_SLOTS)
        throw new TiktokenError(
          `${file}: added_tokens_decoder id ${id} (${content}) is outside Kimi's special range ${base}..${base + KIMI_SPECIAL_SLOTS - 1} (tiktoken.model has ${base} ranks)`,
        );
      named.set(id, content);
    }
  }
  const special = new Map<string, number>();
  for (let id = base; id < base + KIMI_SPECIAL_SLOTS; id++) special.set(named.get(id) ?? `<|reserved_token_${id}|>`, id);
  return tiktokenTokenizer(ranks, KIMI_PATTERN, special);
}
