// tiktoken's BPE (tiktoken.ts) held to an independent implementation: Hugging Face's byte-level
// BPE (@huggingface/tokenizers) over the same vocabulary, the bundled one's tokens ranked in its
// merge order, as a tiktoken.model would rank them; and Kimi's split pattern, special tokens and
// reserved ids.
import { Tokenizer } from '@huggingface/tokenizers';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { KIMI_RANKS, makeFamilyModel } from '../test/family-models.ts';
import { BUNDLED_MODEL_PATH } from './model-dir.ts';
import { KIMI_PATTERN, kimiChunks, kimiTokenizer, parseTiktokenRanks, TiktokenError, tiktokenTokenizer } from './tiktoken.ts';

const scratch = mkdtempSync(path.join(tmpdir(), 'mmtc-tiktoken-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const dir = makeFamilyModel(path.join(scratch, 'kimi'), 'kimi_k25');
const ranks = parseTiktokenRanks(readFileSync(path.join(dir, 'tiktoken.model'), 'utf8'), 'tiktoken.model');
const config = JSON.parse(readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>;
const kimi = kimiTokenizer(ranks, config, 'tokenizer_config.json');
const pieces = (text: string) => [...text.matchAll(KIMI_PATTERN)].map((m) => m[0]);

describe("tiktoken's byte-pair merges", () => {
  const json = JSON.parse(readFileSync(path.join(BUNDLED_MODEL_PATH, 'tokenizer.json'), 'utf8'));
  const hf = new Tokenizer(json, JSON.parse(readFileSync(path.join(BUNDLED_MODEL_PATH, 'tokenizer_config.json'), 'utf8')));
  // Text both split alike (lower-case words, spaces, punctuation): Qwen's pattern and Kimi's differ on digits, case and Han.
  it.each(['hello world', 'the quick brown fox jumps over the lazy dog', 'what is in this picture?', 'a, b; c: (d) — e…', '  spaced   out  '])(
    '%j: the same tokens as Hugging Face BPE over the same vocabulary',
    (text) => {
      const theirs = hf.encode(text, { add_special_tokens: false }).ids.map((id) => hf.id_to_token(id));
      const ours = kimi.encode(text).map((id) => kimi.idToToken(id));
      expect(ours).toEqual(theirs);
      expect(kimi.decode(kimi.encode(text), false)).toBe(text);
    },
  );

  it('a piece of no merges is its bytes; a piece the ranks hold whole is one token', () => {
    expect(kimi.encode('\u00e9')).toEqual([0xc3, 0xa9]);
    expect(kimi.encode('zq')).toEqual([0x7a, 0x71]);
    const whole = [...ranks].find(([bytes, rank]) => rank > 255 && /^[a-z]{3,}$/.test(bytes))!;
    expect(kimi.encode(whole[0])).toEqual([whole[1]]);
  });

  it('long pieces merge as the plain quadratic algorithm does (lowest rank first, the leftmost of equals), in n log n', () => {
    // The textbook _byte_pair_merge, written here independently of tiktoken.ts.
    const plain = (piece: string): number[] => {
      let parts = Array.from(piece);
      for (;;) {
        let best = Infinity;
        let at = -1;
        for (let i = 0; i + 1 < parts.length; i++) {
          const r = ranks.get(parts[i]! + parts[i + 1]!) ?? Infinity;
          if (r < best) [best, at] = [r, i];
        }
        if (at < 0) return parts.map((p) => ranks.get(p)!);
        parts = [...parts.slice(0, at), parts[at]! + parts[at + 1]!, ...parts.slice(at + 2)];
      }
    };
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let n = 0; n < 20; n++) {
      const piece = Array.from({ length: 5 + Math.floor(random() * 300) }, () => 'etaoinshrdlu'[Math.floor(random() * 12)]).join('');
      expect(kimi.encode(piece), piece).toEqual(plain(piece));
    }
    const long = 'hello'.repeat(20_000);
    const t = performance.now();
    expect(kimi.decode(kimi.encode(long), false)).toBe(long);
    expect(performance.now() - t).toBeLessThan(20_000); // n² would take minutes
  });
});

describe("Kimi's split pattern (tokenization_kimi.py's pat_str)", () => {
  it.each<[string, string[]]>([
    ['你好world', ['你好', 'world']],
    ['12345', ['123', '45']],
    ["don't DON'T", ["don't", " DON'T"]],
    ['Hello, World!\n\nok', ['Hello', ',', ' World', '!\n\n', 'ok']],
    ['a  \n b', ['a', '  \n', ' b']],
  ])('%j splits as %j', (text, expected) => {
    expect(pieces(text)).toEqual(expected);
    expect(kimi.decode(kimi.encode(text), false)).toBe(text);
  });
});

describe("Kimi's special tokens", () => {
  it('the named ones at their ids, the rest of the 256 reserved; text spelling one is that token (allowed_special="all")', () => {
    expect(KIMI_RANKS).toBe(163584);
    expect(kimi.tokenToId('[BOS]')).toBe(163584);
    expect(kimi.tokenToId('<|media_pad|>')).toBe(163605);
    expect(kimi.idToToken(163839)).toBe('[PAD]');
    expect(kimi.idToToken(163589)).toBe('<|reserved_token_163589|>');
    expect(kimi.encode('a<|im_end|>b')).toEqual([...kimi.encode('a'), 163586, ...kimi.encode('b')]);
    expect(kimi.encodePlain('<|im_end|>')).not.toContain(163586);
    expect(kimi.decode(kimi.encodePlain('<|im_end|>'), true)).toBe('<|im_end|>');
    // Skipping special tokens leaves out what Hugging Face's decode does (all_special_ids: bos, eos, unk, pad, the additional ones); the others stay.
    expect(kimi.decode([...kimi.encode('hi'), 163586, 163585], true)).toBe('hi');
    expect(kimi.decode([...kimi.encode('hi'), 163586], false)).toBe('hi<|im_end|>');
    expect(kimi.decode([163602, ...kimi.encode('hi'), 163700], true)).toBe('<|media_begin|>hi<|reserved_token_163700|>');
    expect(kimi.addedTokens()).toContain('<|media_begin|>');
  });

  it('an id in neither the ranks nor the special tokens is refused, naming it', () => {
    expect(() => kimi.decode([163840], false)).toThrow(new TiktokenError('token id 163840 is not in the vocabulary'));
  });
});

describe("tokenization_kimi.py's cuts before tiktoken", () => {
  it('a run of more than 25,000 non-space (or space) code points is cut; text under that is one chunk', () => {
    expect(kimiChunks('a b')).toEqual(['a b']);
    expect(kimiChunks('')).toEqual([]);
    const run = 'x'.repeat(25_001);
    expect(kimiChunks(`ab ${run}`).map((c) => c.length)).toEqual([3 + 25_000, 1]);
    // Code points, not UTF-16 units: 25,000 emoji are one run under the limit.
    expect(kimiChunks('\u{1F600}'.repeat(25_000))).toHaveLength(1);
  });
});

describe('tiktoken.model', () => {
  it('a rank file that lacks a single byte is refused when that byte is met', () => {
    const t = tiktokenTokenizer(new Map([['a', 0]]), /./gsu, new Map());
    expect(() => t.encode('ab')).toThrow('byte 98 has no rank (tiktoken.model must rank every single byte)');
  });

  it('a duplicate token, a repeated rank, a sparse rank or an empty added token is refused, naming the file and the line or id', () => {
    expect(() => parseTiktokenRanks('YQ== 0\nYQ== 1\n', 'f')).toThrow(new TiktokenError('f:2: token "YQ==" is listed twice'));
    expect(() => parseTiktokenRanks('YQ== 0\nYg== 0\n', 'f')).toThrow(new TiktokenError("f:2: rank 0 is already line 1's"));
    expect(() => kimiTokenizer(parseTiktokenRanks('YQ== 0\n', 'f'), { added_tokens_decoder: { '1': { content: '' } } }, 'cfg')).toThrow(
      'cfg: added_tokens_decoder["1"] must be an integer id with a non-empty string content, got {"content":""}',
    );
    expect(() => kimiTokenizer(parseTiktokenRanks('YQ== 0\nYg== 7\n', 'f'), {}, 'cfg')).toThrow(
      'cfg: tiktoken.model\'s rank 7 (of "Yg==") is not below its 2 ranks: Kimi\'s special tokens start after dense ranks',
    );
  });
});
