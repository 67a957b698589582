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
  const lineOfRank = new Map<number, number>();
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
    // tiktoken's CoreBPE refuses this too (its encoder and decoder would differ in length).
    if (lineOfRank.has(value)) throw new TiktokenError(`${file}:${i + 1}: rank ${value} is already line ${lineOfRank.get(value)}'s`);
    lineOfRank.set(value, i + 1);
    ranks.set(bytes, value);
  }
  return ranks;
}

/** GPT-2's bytes_to_unicode: the printable character a byte is written as in a token's name (the names HF's tokenizers give tiktoken's tokens). */
export const BYTE_CHARS: readonly string[] = (() => {
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

/**
 * The ids of one piece (latin1 bytes) by byte-pair merging, as tiktoken's _byte_pair_merge: the
 * adjacent pair of lowest rank merged first, the leftmost of equal ranks. The parts are a
 * linked list and the pairs a heap keyed (rank, position), so a long piece costs n log n, not n².
 */
function bytePairEncode(piece: string, ranks: Map<string, number>): number[] {
  const n = piece.length;
  const next = Int32Array.from({ length: n + 1 }, (_, i) => i + 1);
  const prev = Int32Array.from({ length: n + 1 }, (_, i) => i - 1);
  const alive = new Uint8Array(n + 1).fill(1);
  /** The rank of the part at `i` merged with the one after it. */
  const pairRank = (i: number) => {
    const j = next[i]!;
    return j >= n ? Infinity : (ranks.get(piece.slice(i, next[j])) ?? Infinity);
  };
  const rankAt = new Float64Array(n + 1);
  // A binary heap of [rank, position]; entries whose rank is no longer the position's are skipped.
  const heap: Array<[number, number]> = [];
  const less = (a: [number, number], b: [number, number]) => a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]);
  const push = (e: [number, number]) => {
    heap.push(e);
    for (let k = heap.length - 1; k > 0;) {
      const up = (k - 1) >> 1;
      if (!less(heap[k]!, heap[up]!)) break;
      [heap[k], heap[up]] = [heap[up]!, heap[k]!];
      k = up;
    }
  };
  const pop = (): [number, number] => {
    const top = heap[0]!;
    const last = heap.pop()!;
    if (heap.length) {
      heap[0] = last;
      for (let k = 0; ;) {
        const l = 2 * k + 1;
        const r = l + 1;
        let m = k;
        if (l < heap.length && less(heap[l]!, heap[m]!)) m = l;
        if (r < heap.length && less(heap[r]!, heap[m]!)) m = r;
        if (m === k) break;
        [heap[k], heap[m]] = [heap[m]!, heap[k]!];
        k = m;
      }
    }
    return top;
  };
  for (let i = 0; i < n; i++) {
    rankAt[i] = pairRank(i);
    if (rankAt[i]! < Infinity) push([rankAt[i]!, i]);
  }
  while (heap.length) {
    const [rank, i] = pop();
    if (!alive[i] || rankAt[i] !== rank) continue;
    // Merge the part at i with the next one.
    const j = next[i]!;
    alive[j] = 0;
    next[i] = next[j]!;
    if (next[j]! <= n) prev[next[j]!] = i;
    rankAt[i] = pairRank(i);
    if (rankAt[i] < Infinity) push([rankAt[i], i]);
    const before = prev[i]!;
    if (before >= 0) {
      rankAt[before] = pairRank(before);
      if (rankAt[before] < Infinity) push([rankAt[before], before]);
    }
  }
  const ids: number[] = [];
  for (let i = 0; i < n; i = next[i]!) {
    const id = ranks.get(piece.slice(i, next[i]));
    if (id === undefined) throw new TiktokenError(`byte ${piece.charCodeAt(i)} has no rank (tiktoken.model must rank every single byte)`);
    ids.push(id);
  }
  return ids;
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\\-/]/g, '\\$&');

/**
 * A tiktoken BPE tokenizer: its ranks, the pattern that splits text into pieces, and its special
 * tokens by spelling. `skipped`: the special ids a decode that skips special tokens leaves out
 * (every special id when not given); `chunks`: how text is cut before it is encoded.
 */
export function tiktokenTokenizer(
  ranks: Map<string, number>,
  pattern: RegExp,
  special: ReadonlyMap<string, number>,
  options: { skipped?: ReadonlySet<number>; chunks?: (text: string) => string[] } = {},
): TextTokenizer {
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
  const chunks = options.chunks ?? ((text: string) => [text]);
  const encodePlainChunk = (text: string): number[] => {
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
  const encodeChunk = (text: string): number[] => {
    if (!specialPattern) return encodePlainChunk(text);
    const ids: number[] = [];
    let at = 0;
    for (const m of text.matchAll(specialPattern)) {
      ids.push(...encodePlainChunk(text.slice(at, m.index)), special.get(m[0])!);
      at = m.index + m[0].length;
    }
    ids.push(...encodePlainChunk(text.slice(at)));
    return ids;
  };
  return {
    encode: (text) => chunks(text).flatMap(encodeChunk),
    encodePlain: (text) => chunks(text).flatMap(encodePlainChunk),
    decode: (ids, skipSpecial) => {
      const parts: Buffer[] = [];
      for (const id of ids) {
        const bytes = bytesOf[id];
        if (bytes !== undefined) parts.push(Buffer.from(bytes, 'latin1'));
        else if (specialOf.has(id)) {
          if (!skipSpecial || (options.skipped && !options.skipped.has(id))) parts.push(Buffer.from(specialOf.get(id)!, 'utf8'));
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

/** Python's str.isspace(): Unicode category Zs, or bidirectional class WS, B or S (\t to \r, and the separators 0x1c to 0x1f). */
const PYTHON_SPACES = new Set(
  [...'\t\n\v\f\r\u001c\u001d\u001e\u001f \u0085\u00a0\u1680\u2028\u2029\u202f\u205f\u3000'].concat(
    Array.from({ length: 11 }, (_, i) => String.fromCharCode(0x2000 + i)),
  ),
);
const isPythonSpace = (ch: string) => PYTHON_SPACES.has(ch);

/**
 * How tokenization_kimi.py's encode cuts text before tiktoken sees it: 400,000-character
 * chunks, each cut where a run of whitespace or of non-whitespace would pass 25,000 characters
 * (_split_whitespaces_or_nonwhitespaces; characters are code points, as Python counts them).
 */
export function kimiChunks(text: string): string[] {
  const out: string[] = [];
  const points = Array.from(text);
  for (let c = 0; c < points.length; c += 400_000) {
    const chunk = points.slice(c, c + 400_000);
    let runLength = 0;
    let runIsSpace = chunk.length > 0 && isPythonSpace(chunk[0]!);
    let start = 0;
    for (let i = 0; i < chunk.length; i++) {
      const isSpace = isPythonSpace(chunk[i]!);
      if (runIsSpace !== isSpace) {
        runLength = 1;
        runIsSpace = isSpace;
      } else if (++runLength > 25_000) {
        out.push(chunk.slice(start, i).join(''));
        start = i;
        runLength = 1;
      }
    }
    out.push(chunk.slice(start).join(''));
  }
  return out;
}

/** The special tokens tokenization_kimi.py names when tokenizer_config.json gives no additional_special_tokens. */
const KIMI_ADDITIONAL_SPECIAL = [
  '<|im_end|>',
  '<|im_user|>',
  '<|im_assistant|>',
  '<|start_header_id|>',
  '<|end_header_id|>',
  '[EOT]',
  '<|im_system|>',
  '<|im_middle|>',
];

const textOf = (value: unknown): string | undefined =>
  typeof value === 'string' ? value : typeof (value as { content?: unknown } | null)?.content === 'string' ? (value as { content: string }).content : undefined;

/**
 * Kimi's tokenizer from tiktoken.model's ranks and tokenizer_config.json: ids from the number of
 * ranks on are special, named by its added_tokens_decoder or `<|reserved_token_{id}|>`. A decode
 * that skips special tokens leaves out what Hugging Face's does for it (all_special_ids: the
 * bos, eos, unk and pad tokens and the additional special tokens), the others stay as text.
 */
export function kimiTokenizer(ranks: Map<string, number>, tokenizerConfig: Record<string, unknown>, file: string): TextTokenizer {
  const base = ranks.size;
  for (const [bytes, id] of ranks)
    if (id >= base)
      throw new TiktokenError(
        `${file}: tiktoken.model's rank ${id} (of ${JSON.stringify(Buffer.from(bytes, 'latin1').toString('base64'))}) is not below its ${base} ranks: Kimi's special tokens start after dense ranks`,
      );
  const named = new Map<number, string>();
  const decoder = tokenizerConfig.added_tokens_decoder;
  if (decoder !== undefined) {
    if (decoder === null || typeof decoder !== 'object' || Array.isArray(decoder))
      throw new TiktokenError(`${file}: added_tokens_decoder must be an object of id to {content}, got ${JSON.stringify(decoder).slice(0, 80)}`);
    for (const [key, entry] of Object.entries(decoder as Record<string, unknown>)) {
      const id = Number(key);
      const content = (entry as { content?: unknown } | null)?.content;
      if (!Number.isInteger(id) || typeof content !== 'string' || content === '')
        throw new TiktokenError(
          `${file}: added_tokens_decoder[${JSON.stringify(key)}] must be an integer id with a non-empty string content, got ${JSON.stringify(entry)}`,
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
  const additional = Array.isArray(tokenizerConfig.additional_special_tokens) ? tokenizerConfig.additional_special_tokens.map(textOf) : KIMI_ADDITIONAL_SPECIAL;
  const roles = [tokenizerConfig.bos_token ?? '[BOS]', tokenizerConfig.eos_token ?? '[EOS]', tokenizerConfig.unk_token, tokenizerConfig.pad_token].map(textOf);
  const skipped = new Set([...roles, ...additional].flatMap((t) => (t !== undefined && special.has(t) ? [special.get(t)!] : [])));
  return tiktokenTokenizer(ranks, KIMI_PATTERN, special, { skipped, chunks: kimiChunks });
}
