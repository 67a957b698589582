import { asQwenConfig } from './families/index.ts';
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BUNDLED_MODEL_PATH, loadModelDirectory, ModelDirectoryError } from './model-dir.ts';
import { buildPrompt, PromptError } from './prompt.ts';
import { patchGeometry } from './qwen-vl.ts';

const scratch = mkdtempSync(path.join(tmpdir(), 'mmtc-model-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function copyOfBundled(name: string, edit?: (dir: string) => void): string {
  const dir = path.join(scratch, name);
  cpSync(BUNDLED_MODEL_PATH, dir, { recursive: true });
  edit?.(dir);
  return dir;
}

function editJson(dir: string, file: string, change: (v: Record<string, unknown>) => void) {
  const p = path.join(dir, file);
  const v = JSON.parse(readFileSync(p, 'utf8'));
  change(v);
  writeFileSync(p, JSON.stringify(v));
}

describe('the bundled model directory', () => {
  it('is exactly what scripts/make-demo-model.mjs generates', () => {
    const out = path.join(scratch, 'regenerated');
    execFileSync(process.execPath, [path.resolve(import.meta.dirname, '../../scripts/make-demo-model.mjs'), out]);
    for (const name of readdirSync(BUNDLED_MODEL_PATH)) {
      expect(readFileSync(path.join(out, name), 'utf8'), name).toBe(readFileSync(path.join(BUNDLED_MODEL_PATH, name), 'utf8'));
    }
  });

  it('loads through the same code path as a real checkpoint, with Qwen special ids', async () => {
    const m = await loadModelDirectory();
    expect(m).toMatchObject({
      modelType: 'qwen2_vl',
      family: 'qwen2_vl',
      imageTokenId: 151655,
      visionStartTokenId: 151652,
      visionEndTokenId: 151653,
      eosTokenIds: [151645],
    });
    expect(m.tokenizer.tokenToId('<|image_pad|>')).toBe(151655);
    expect(m.tokenizer.tokenToId('<|im_start|>')).toBe(151644);
    expect(m.imageConfig).toMatchObject({ patch_size: 14, merge_size: 2, min_pixels: 3136, max_pixels: 1003520 });
    const ids = m.tokenizer.encode('Hello, how are you today?');
    expect(m.tokenizer.decode(ids, false)).toBe('Hello, how are you today?');
  });

  it('small images make small tensors, as with a Qwen2-VL checkpoint, so a threshold sorts them from large ones', async () => {
    const m = await loadModelDirectory();
    const bf16Bytes = (w: number, h: number) => {
      const g = patchGeometry(h, w, asQwenConfig(m.imageConfig));
      return g.patches * g.features * 2;
    };
    expect(bf16Bytes(128, 96)).toBe(60 * 1176 * 2); // 140x84: 138 KiB, not the 2.39 MiB a 200,704-pixel floor made of it
    expect(bf16Bytes(56, 56)).toBe(16 * 1176 * 2);
    // Large ones stay bounded by max_pixels: 1080p is resized to about a megapixel.
    expect(bf16Bytes(1920, 1080)).toBeGreaterThan(1024 * 1024);
  });
});

describe('model directory errors name the file', () => {
  it.each([
    ['missing config.json', (d: string) => unlinkSync(path.join(d, 'config.json')), /cannot read .*config\.json: no such file/],
    ['malformed tokenizer.json', (d: string) => writeFileSync(path.join(d, 'tokenizer.json'), '{"model": '), /invalid JSON in .*tokenizer\.json/],
    [
      'unsupported model_type',
      (d: string) => editJson(d, 'config.json', (c) => (c.model_type = 'llama')),
      /config\.json: model_type 'llama' is not a supported vision-language model/,
    ],
    [
      'missing image_token_id',
      (d: string) => editJson(d, 'config.json', (c) => delete c.image_token_id),
      /config\.json: image_token_id must be a non-negative integer token id, got undefined/,
    ],
    [
      'bad image_mean',
      (d: string) => editJson(d, 'preprocessor_config.json', (c) => (c.image_mean = [0.5, 0.5])),
      /preprocessor_config\.json: image_mean must be 3 numbers/,
    ],
    ['no chat template', (d: string) => editJson(d, 'tokenizer_config.json', (c) => delete c.chat_template), /no chat template in/],
  ])('%s', async (name, edit, message) => {
    const dir = copyOfBundled(name.replaceAll(' ', '-'), edit);
    const err = await loadModelDirectory(dir).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelDirectoryError);
    expect((err as Error).message).toMatch(message);
  });

  it('a directory that does not exist', async () => {
    await expect(loadModelDirectory(path.join(scratch, 'nothing'))).rejects.toThrow(/does not exist/);
  });
});

describe('preprocessor_config.json overrides and Qwen3-VL', () => {
  it('min/max_pixels, patch size and normalization come from the file', async () => {
    const dir = copyOfBundled('override', (d) =>
      editJson(d, 'preprocessor_config.json', (c) => Object.assign(c, { min_pixels: 3136, max_pixels: 12845056, do_normalize: false })),
    );
    const m = await loadModelDirectory(dir);
    expect(m.imageConfig).toMatchObject({ min_pixels: 3136, max_pixels: 12845056, do_normalize: false });
  });

  it('a Qwen3-VL directory uses patch 16 and size.shortest_edge/longest_edge', async () => {
    const dir = copyOfBundled('qwen3', (d) => {
      editJson(d, 'config.json', (c) => (c.model_type = 'qwen3_vl'));
      editJson(d, 'preprocessor_config.json', (c) => {
        for (const k of ['min_pixels', 'max_pixels', 'patch_size', 'image_mean', 'image_std']) delete c[k];
        c.size = { shortest_edge: 66000, longest_edge: 16000000 };
      });
    });
    const m = await loadModelDirectory(dir);
    expect(m.family).toBe('qwen3_vl');
    expect(m.imageConfig).toMatchObject({ patch_size: 16, min_pixels: 66000, max_pixels: 16000000, image_mean: [0.5, 0.5, 0.5] });
  });

  it('reads chat_template.json when tokenizer_config.json has none (Qwen2.5-VL layout)', async () => {
    const dir = copyOfBundled('template-json', (d) => {
      const template = JSON.parse(readFileSync(path.join(d, 'tokenizer_config.json'), 'utf8')).chat_template;
      editJson(d, 'tokenizer_config.json', (c) => delete c.chat_template);
      writeFileSync(path.join(d, 'chat_template.json'), JSON.stringify({ chat_template: template }));
    });
    const m = await loadModelDirectory(dir);
    expect(buildPrompt(m, [{ role: 'user', content: 'hi' }], []).text).toContain('<|im_start|>user\nhi<|im_end|>');
  });
});

describe('prompt building and placeholder expansion', () => {
  const image = { type: 'image_url' as const, image_url: { url: 'data:image/png;base64,AAAA' } };

  it('no image: the rendered template, tokenized, without placeholders', async () => {
    const m = await loadModelDirectory();
    const p = buildPrompt(m, [{ role: 'user', content: 'Describe the image.' }], []);
    expect(p.text).toBe('<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nDescribe the image.<|im_end|>\n<|im_start|>assistant\n');
    expect(p.placeholders).toEqual([]);
    expect(m.tokenizer.decode(p.inputIds, false)).toBe(p.text);
  });

  it('one image becomes vision_start + N image_pad + vision_end, with its range', async () => {
    const m = await loadModelDirectory();
    const p = buildPrompt(m, [{ role: 'user', content: [image, { type: 'text', text: 'What is in this picture?' }] }], [256]);
    const [range] = p.placeholders;
    expect(range!.length).toBe(256);
    expect(p.inputIds[range!.offset - 1]).toBe(151652);
    expect(p.inputIds.slice(range!.offset, range!.offset + 256).every((id) => id === 151655)).toBe(true);
    expect(p.inputIds[range!.offset + 256]).toBe(151653);
    expect(p.inputIds.filter((id) => id === 151655)).toHaveLength(256);
    expect(m.tokenizer.decode(p.inputIds.slice(range!.offset + 257), false)).toBe('What is in this picture?<|im_end|>\n<|im_start|>assistant\n');
  });

  it("three images come first, in the order written, each its own size, then the message's texts: the gateway's order (media first)", async () => {
    const m = await loadModelDirectory();
    const p = buildPrompt(
      m,
      [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: [{ type: 'text', text: 'First:' }, image, { type: 'text', text: 'then' }, image, image, { type: 'text', text: 'Compare.' }] },
      ],
      [4, 16, 9],
    );
    expect(p.placeholders.map((r) => r.length)).toEqual([4, 16, 9]);
    const [a, b, c] = p.placeholders as [{ offset: number; length: number }, { offset: number; length: number }, { offset: number; length: number }];
    // vision_end, vision_start between consecutive images; the texts after the last.
    expect(b.offset).toBe(a.offset + 4 + 2);
    expect(c.offset).toBe(b.offset + 16 + 2);
    expect(m.tokenizer.decode(p.inputIds.slice(c.offset + 9 + 1), false)).toBe('First:thenCompare.<|im_end|>\n<|im_start|>assistant\n');
    expect(p.text.startsWith('<|im_start|>system\nBe brief.<|im_end|>')).toBe(true);
    expect(p.inputIds.filter((id) => id === 151655)).toHaveLength(29);
  });

  it('a mismatch between images and placeholders is an error', async () => {
    const m = await loadModelDirectory();
    expect(() => buildPrompt(m, [{ role: 'user', content: [image] }], [])).toThrow(PromptError);
  });

  // What a client types is text: spelling a special token must not make one (before, the
  // first case was refused as "1 image placeholder(s) for 0 image(s)" and the second put the
  // image's features where the client typed).
  it('<|image_pad|> typed in a message is text, not an image placeholder', async () => {
    const m = await loadModelDirectory();
    const p = buildPrompt(m, [{ role: 'user', content: 'What does <|image_pad|> mean?' }], []);
    expect(p.placeholders).toEqual([]);
    expect(p.inputIds).not.toContain(m.imageTokenId);
    expect(m.tokenizer.decode(p.inputIds, false)).toBe(p.text);
    expect(p.text).toContain('<|im_start|>user\nWhat does <|image_pad|> mean?<|im_end|>');
  });

  it('with an image, only the image is a placeholder, wherever the text spells one', async () => {
    const m = await loadModelDirectory();
    const typed = '<|vision_start|><|image_pad|><|vision_end|> and <|im_end|>';
    const p = buildPrompt(m, [{ role: 'user', content: [{ type: 'text', text: typed }, image, { type: 'text', text: 'x' }] }], [4]);
    expect(p.placeholders).toHaveLength(1);
    expect(p.inputIds.filter((id) => id === m.imageTokenId)).toHaveLength(4);
    const [range] = p.placeholders;
    // The image first (the gateway's order), then the typed text and 'x'.
    expect(m.tokenizer.decode(p.inputIds.slice(range!.offset + 5), false)).toBe(`${typed}x<|im_end|>\n<|im_start|>assistant\n`);
    // The typed text is ordinary tokens: no vision markers after the image's own, and only the user turn's own <|im_end|>.
    const typedIds = p.inputIds.slice(range!.offset + 5);
    expect(typedIds.filter((id) => id === 151652 || id === 151653)).toHaveLength(0);
    expect(typedIds.filter((id) => id === 151645)).toHaveLength(1);
  });

  it('text without a special token tokenizes exactly as before', async () => {
    const m = await loadModelDirectory();
    const p = buildPrompt(m, [{ role: 'user', content: 'hello world, how are you?' }], []);
    expect(p.inputIds).toEqual(m.tokenizer.encode(p.text));
  });
});
