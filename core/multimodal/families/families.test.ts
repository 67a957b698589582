// The vision families (docs/preprocessing.md, "Model families"): each detected from a model
// directory's config.json as the gateway's registry detects it, with its real token ids and
// processor settings, and each family's encoder input equal, bit for bit, to the independent
// Pillow + numpy reference (scripts/reference/qwen_vl_reference.py) under its own settings.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeFamilyModel, type TestFamilyModel } from '../../test/family-models.ts';
import { makeTestImages } from '../../test/images.ts';
import { runPython, runPythonScript } from '../../test/python.ts';
import { decodeToRgb } from '../decode.ts';
import { loadModelDirectory, ModelDirectoryError } from '../model-dir.ts';
import { buildPrompt, promptTokenIdsOf } from '../prompt.ts';
import { encoderFingerprint, preprocessRgb } from '../qwen-vl.ts';
import { asQwenConfig, FAMILIES, familyById, familyOfModelType, processorOf, type FamilyId } from './index.ts';

const REFERENCE = path.resolve(import.meta.dirname, '../../../scripts/reference/qwen_vl_reference.py');
const scratch = mkdtempSync(path.join(tmpdir(), 'mmtc-families-'));
const images = makeTestImages();
afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
  images.remove();
});

// A 90x60 image (5400 pixels): below Qwen3-VL's 65536-pixel floor, above Qwen3-Omni's 3136.
const SMALL = path.join(scratch, 'small.png');
runPython(
  `import sys, numpy as np
from PIL import Image
y, x = np.mgrid[0:60, 0:90]
Image.fromarray(np.dstack([(x * 3) % 256, (y * 5) % 256, (x + y) % 256]).astype(np.uint8)).save(sys.argv[1])`,
  [SMALL],
);

/** A model directory of `kind` whose config.json and preprocessor_config.json have these keys over the family's, and its loader. */
function modelWithFiles(
  kind: TestFamilyModel,
  config: Record<string, unknown>,
  pre: Record<string, unknown>,
): { dir: string; load: () => ReturnType<typeof loadModelDirectory> } {
  const dir = makeFamilyModel(path.join(scratch, `${kind}-${Math.random().toString(36).slice(2)}`), kind);
  for (const [file, more] of [
    ['config.json', config],
    ['preprocessor_config.json', pre],
  ] as const)
    writeFileSync(path.join(dir, file), JSON.stringify({ ...JSON.parse(readFileSync(path.join(dir, file), 'utf8')), ...more }));
  return { dir, load: () => loadModelDirectory(dir) };
}

const model = (kind: TestFamilyModel) => loadModelDirectory(makeFamilyModel(path.join(scratch, `${kind}-${Math.random().toString(36).slice(2)}`), kind));

describe('detection from config.json, as the gateway registry does it by model_type', () => {
  it.each([
    ['qwen2_vl', 'qwen2_vl', 'qwen_vl'],
    ['qwen2_5_vl', 'qwen2_vl', 'qwen_vl'],
    ['qwen3_vl', 'qwen3_vl', 'qwen3_vl'],
    ['qwen3_vl_moe', 'qwen3_vl', 'qwen3_vl'],
    ['qwen3_5', 'qwen3_5', 'qwen3_vl'],
    ['qwen3_5_moe', 'qwen3_5', 'qwen3_vl'],
    ['qwen3_omni_moe', 'qwen3_omni', 'qwen3_omni'],
    ['qwen3_omni_moe_thinker', 'qwen3_omni', 'qwen3_omni'],
    ['llava', 'llava', 'llava'],
    ['kimi_k25', 'kimi_k25', 'kimi_k25'],
    ['kimi_k3', 'kimi_k3', 'kimi_k3'],
    ['phi3_v', 'phi3_v', 'phi3_v'],
    ['llama4', 'llama4', 'llama4'],
    ['inkling_mm_model', 'inkling', 'inkling'],
  ])('model_type %s is the %s family (the gateway spec %s)', (modelType, family, spec) => {
    expect(familyOfModelType(modelType)?.id).toBe(family);
    expect(familyOfModelType(modelType)?.gatewaySpec).toBe(spec);
  });

  it('a model_type no family takes is refused, naming every one that is', async () => {
    const dir = makeFamilyModel(path.join(scratch, 'paligemma'), 'qwen3_5');
    writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ model_type: 'paligemma', image_token_id: 5 }));
    await expect(loadModelDirectory(dir)).rejects.toThrow(
      new ModelDirectoryError(
        `${path.join(dir, 'config.json')}: model_type 'paligemma' is not a supported vision-language model (expected qwen3_omni_moe, qwen3_omni_moe_thinker, qwen3_vl, qwen3_vl_moe, qwen3_5, qwen3_5_moe, qwen2_vl, qwen2_5_vl, llava, llava_next, kimi_k25, kimi_k3, phi3_v, llama4, inkling_mm_model)`,
      ),
    );
  });
});

describe('Qwen3.5 / Qwen3.6 model directories', () => {
  it.each(['qwen3_5', 'qwen3_5_moe'] as const)('%s: the Qwen3-VL processor, its own token ids and context', async (kind) => {
    const m = await model(kind);
    expect(m).toMatchObject({
      modelType: kind,
      family: 'qwen3_5',
      imageTokenId: 248056,
      visionStartTokenId: 248053,
      visionEndTokenId: 248054,
      eosTokenIds: [248046],
    });
    expect(m.maxContextLength).toBe(262144);
    expect(m.imageConfig).toEqual(familyById('qwen3_vl').defaults);
    expect(m.tokenizer.idToToken(248056)).toBe('<|image_pad|>');
  });

  it('an image becomes <|vision_start|>, N x 248056, <|vision_end|>; N is the grid over merge²', async () => {
    const m = await model('qwen3_5');
    const img = await decodeToRgb(images.bytes('photo.jpg'));
    const g = processorOf(m.imageConfig).geometry(img.height, img.width);
    const p = buildPrompt(
      m,
      [
        {
          role: 'user',
          content: [
            { type: 'image_url', image_url: { url: 'x' } },
            { type: 'text', text: 'What is this?' },
          ],
        },
      ],
      [g.tokens],
    );
    const [range] = p.placeholders;
    // What the worker's model computes from the grid it receives: the same count.
    expect(g.tokens).toBe(processorOf(m.imageConfig).tokensOf({ encoderShape: [g.patches, g.features], grid: [g.gridT!, g.gridH!, g.gridW!] }));
    expect(range!.length).toBe(g.tokens);
    expect(p.inputIds[range!.offset - 1]).toBe(248053);
    expect(p.inputIds.slice(range!.offset, range!.offset + g.tokens).every((id) => id === 248056)).toBe(true);
    expect(p.inputIds[range!.offset + g.tokens]).toBe(248054);
  });
});

describe('Qwen3-Omni model directories (vision)', () => {
  it("the thinker_config's token ids, <|vision_end|> from the tokenizer, and Omni's pixel range", async () => {
    const m = await model('qwen3_omni_moe');
    expect(m).toMatchObject({
      modelType: 'qwen3_omni_moe',
      family: 'qwen3_omni',
      imageTokenId: 151655,
      visionStartTokenId: 151652,
      visionEndTokenId: 151653,
      eosTokenIds: [151645],
    });
    expect(m.maxContextLength).toBe(65536);
    expect(m.imageConfig).toMatchObject({ patch_size: 16, merge_size: 2, min_pixels: 3136, max_pixels: 12845056, image_mean: [0.5, 0.5, 0.5] });
    expect(m.imageConfig).toEqual(familyById('qwen3_omni').defaults);
  });

  it('a thinker_config without image_token_id is refused, naming it', async () => {
    const dir = makeFamilyModel(path.join(scratch, 'omni-no-image'), 'qwen3_omni_moe');
    const config = JSON.parse(readFileSync(path.join(dir, 'config.json'), 'utf8'));
    delete config.thinker_config.image_token_id;
    writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config));
    await expect(loadModelDirectory(dir)).rejects.toThrow(
      `${path.join(dir, 'config.json')}: thinker_config.image_token_id must be a non-negative integer token id, got undefined`,
    );
  });
});

describe('LLaVA-1.5 model directories', () => {
  it("config.json's image_token_index (32000), no vision markers, CLIP at 336 with the tower's 14-pixel patches", async () => {
    const m = await model('llava');
    expect(m).toMatchObject({ modelType: 'llava', family: 'llava', imageTokenId: 32000, visionStartTokenId: undefined, visionEndTokenId: undefined });
    expect(m.maxContextLength).toBe(4096);
    expect(m.imageConfig).toEqual(familyById('llava').defaults);
    expect(m.tokenizer.idToToken(32000)).toBe('<image>');
  });

  it('an image of any size is one <image> expanded to 576 tokens: (336 / 14)²; "full" keeps the CLS token (577)', async () => {
    const m = await model('llava');
    for (const [h, w] of [
      [300, 400],
      [1080, 1920],
      [457, 300],
    ])
      expect(processorOf(m.imageConfig).geometry(h!, w!)).toMatchObject({ patches: 1, features: 3 * 336 * 336, tokens: 576 });
    const p = buildPrompt(
      m,
      [
        {
          role: 'user',
          content: [
            { type: 'image_url', image_url: { url: 'x' } },
            { type: 'text', text: 'What is this?' },
          ],
        },
      ],
      [576],
    );
    expect(p.text).toBe('USER: <image>\nWhat is this? ASSISTANT:');
    expect(p.placeholders).toEqual([{ offset: 6, length: 576 }]);
    expect(p.inputIds.filter((id) => id === 32000)).toHaveLength(576);
    // What the worker's model computes from the pixel values it receives, and a shape it would refuse.
    expect(processorOf(m.imageConfig).tokensOf({ encoderShape: [1, 3, 336, 336] })).toBe(576);
    expect(() => processorOf(m.imageConfig).tokensOf({ encoderShape: [1, 3, 224, 224] })).toThrow(
      "an image's pixel values are [1, 3, 224, 224], expected [1, 3, 336, 336]",
    );
    const dir = makeFamilyModel(path.join(scratch, 'llava-full'), 'llava');
    const config = JSON.parse(readFileSync(path.join(dir, 'config.json'), 'utf8'));
    writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ ...config, vision_feature_select_strategy: 'full' }));
    expect(processorOf((await loadModelDirectory(dir)).imageConfig).geometry(300, 400).tokens).toBe(577);
  });

  it('a preprocessor_config.json or config.json value it cannot use is refused, naming the file, the key and the value', async () => {
    const dir = makeFamilyModel(path.join(scratch, 'llava-bad'), 'llava');
    writeFileSync(path.join(dir, 'preprocessor_config.json'), JSON.stringify({ crop_size: { height: 0, width: 336 } }));
    await expect(loadModelDirectory(dir)).rejects.toThrow(
      `${path.join(dir, 'preprocessor_config.json')}: crop_size must be a positive integer or an object with a positive integer height, got {"height":0,"width":336}`,
    );
    writeFileSync(path.join(dir, 'preprocessor_config.json'), JSON.stringify({ crop_size: 336, size: 336 }));
    const config = JSON.parse(readFileSync(path.join(dir, 'config.json'), 'utf8'));
    writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ ...config, vision_feature_select_strategy: 'cls_patch' }));
    await expect(loadModelDirectory(dir)).rejects.toThrow(
      `${path.join(dir, 'config.json')}: vision_feature_select_strategy must be "default" or "full", got "cls_patch"`,
    );
    // Older checkpoints write the sizes as plain numbers.
    writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config));
    expect((await loadModelDirectory(dir)).imageConfig).toMatchObject({ shortest_edge: 336, crop_height: 336, crop_width: 336 });
  });

  it.each<[string, Record<string, unknown>, Record<string, unknown>, (dir: string) => string]>([
    [
      'no crop',
      { do_center_crop: false },
      {},
      (d) => `${d}/preprocessor_config.json: do_center_crop false is not served (every image must be cropped to the tower's size)`,
    ],
    [
      "a crop other than the tower's",
      { crop_size: { height: 224, width: 224 }, size: { shortest_edge: 224 } },
      {},
      (d) =>
        `${d}/preprocessor_config.json: crop_size 224x224 differs from ${d}/config.json's vision_config.image_size 336, the crops the worker's model takes`,
    ],
    [
      'a shortest edge below the crop',
      { size: { shortest_edge: 300 } },
      {},
      (d) => `${d}/preprocessor_config.json: size.shortest_edge 300 is below the crop_size 336x336: no image would fill the crop`,
    ],
    ['another filter', { resample: 2 }, {}, (d) => `${d}/preprocessor_config.json: resample 2 is not served (3, bicubic, is)`],
    ['a zero std', { image_std: [0.26, 0, 0.27] }, {}, (d) => `${d}/preprocessor_config.json: image_std must not hold 0 (it divides), got [0.26,0,0.27]`],
    ['vision_config not an object', {}, { vision_config: 'clip' }, (d) => `${d}/config.json: vision_config must be an object, got "clip"`],
    [
      'a SigLIP tower',
      {},
      { vision_config: { model_type: 'siglip_vision_model', image_size: 336, patch_size: 14 } },
      (d) => `${d}/config.json: vision_config.model_type "siglip_vision_model" is not served (LLaVA-1.5 with a CLIP tower, clip_vision_model, is)`,
    ],
  ])('%s is refused at start, naming the file, the key and the value', async (label, pre, config, message) => {
    const dir = makeFamilyModel(path.join(scratch, `llava-refused-${label.replace(/\W+/g, '-')}`), 'llava');
    const read = (name: string) => JSON.parse(readFileSync(path.join(dir, name), 'utf8')) as Record<string, unknown>;
    writeFileSync(path.join(dir, 'preprocessor_config.json'), JSON.stringify({ ...read('preprocessor_config.json'), ...pre }));
    writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ ...read('config.json'), ...config }));
    await expect(loadModelDirectory(dir)).rejects.toThrow(new ModelDirectoryError(message(dir)));
  });
});

describe("each family's encoder input agrees exactly with the Pillow + numpy reference", () => {
  const cases: Array<[FamilyId, string, string]> = [
    ['qwen3_5', 'photo', 'photo.jpg'],
    ['qwen3_5', 'small', SMALL],
    ['qwen3_omni', 'photo', 'photo.jpg'],
    ['qwen3_omni', 'small', SMALL],
  ];
  it.each(cases)('%s, the %s image', async (family, label, file) => {
    const imagePath = path.isAbsolute(file) ? file : images.file(file);
    const out = path.join(scratch, `${family}-${label}.f32`);
    const info = JSON.parse(runPythonScript(REFERENCE, [family, imagePath, '--out', out]));
    const cfg = asQwenConfig(familyById(family).defaults);
    const img = await decodeToRgb(readFileSync(imagePath));
    const ours = preprocessRgb(img.rgb, img.width, img.height, cfg);
    expect([ours.resizedHeight, ours.resizedWidth]).toEqual(info.resized);
    expect([ours.patches, ours.features]).toEqual(info.shape);
    expect(ours.gridThw).toEqual(info.grid_thw);
    expect(ours.tokens).toBe(info.tokens);
    expect(Buffer.from(ours.pixelValues!.buffer, ours.pixelValues!.byteOffset, ours.pixelValues!.byteLength).equals(readFileSync(out))).toBe(true);
    expect(encoderFingerprint(ours.pixelValues!)).toBe(info.fingerprint);
  });

  it("Omni's own pixel range: a 90x60 image stays small under Omni, where Qwen3-VL scales it up to 65536 pixels", () => {
    const omni = processorOf(familyById('qwen3_omni').defaults).geometry(60, 90);
    const q3 = processorOf(familyById('qwen3_vl').defaults).geometry(60, 90);
    expect([omni.resizedHeight, omni.resizedWidth, omni.tokens]).toEqual([64, 96, 6]);
    expect([q3.resizedHeight, q3.resizedWidth]).toEqual([224, 320]);
  });
});

describe('every family names the tensors the gateway sends for it', () => {
  const qwen = FAMILIES.filter((f) => f.gatewaySpec.startsWith('qwen'));
  it.each(qwen.map((f) => [f.id, f] as const))('%s: image_grid_thw (kept on the CPU) and patches_per_image (splits pixel_values), both batched', (_, f) => {
    expect(f.imageTensors({ gridT: 1, gridH: 4, gridW: 6, patches: 24 })).toEqual([
      { name: 'image_grid_thw', dtype: 'int64', shape: [1, 3], values: [1, 4, 6], layout: 'batched', keepOnCpu: true },
      { name: 'patches_per_image', dtype: 'int64', shape: [1], values: [24], layout: 'batched', keepOnCpu: false, splitsPixels: true },
    ]);
  });

  it.each(['kimi_k25', 'kimi_k3'] as const)(
    '%s: grid_thws (kept on the CPU) and patches_per_image (splits pixel_values), both batched; pixel values [patches, 3, 14, 14]',
    (id) => {
      const f = familyById(id);
      expect(f.imageTensors({ gridT: 1, gridH: 4, gridW: 6, patches: 24 })).toEqual([
        { name: 'grid_thws', dtype: 'int64', shape: [1, 3], values: [1, 4, 6], layout: 'batched', keepOnCpu: true },
        { name: 'patches_per_image', dtype: 'int64', shape: [1], values: [24], layout: 'batched', keepOnCpu: false, splitsPixels: true },
      ]);
      expect(f.encoderShape({ patches: 24, features: 588 }, f.defaults)).toEqual([24, 3, 14, 14]);
    },
  );

  it('phi3_v: image_sizes (the HD size) batched, num_img_tokens with no layout (every item gets the whole); pixel values [1, 17, 3, 336, 336] per image', () => {
    const f = familyById('phi3_v');
    expect(f.imageTensors({ patches: 1, tokens: 2353, imageSize: [1008, 1680] })).toEqual([
      { name: 'image_sizes', dtype: 'int64', shape: [1, 2], values: [1008, 1680], layout: 'batched', keepOnCpu: false },
      { name: 'num_img_tokens', dtype: 'int64', shape: [1], values: [2353], layout: 'shared', keepOnCpu: false },
    ]);
    expect(f.encoderShape({ patches: 1, features: 17 * 3 * 336 * 336 }, f.defaults)).toEqual([1, 17, 3, 336, 336]);
  });
});

describe('Llama 4 model directories', () => {
  const withFiles = (config: Record<string, unknown>, pre: Record<string, unknown>) => modelWithFiles('llama4', config, pre);

  it("<|patch|> (image_token_index 200092) takes the features, the template's <|image|> (200090) is the placeholder; 336-pixel tiles, 16 at most, 144 tokens a crop", async () => {
    const m = await model('llama4');
    expect(m).toMatchObject({ modelType: 'llama4', family: 'llama4', imageTokenId: 200092, imagePlaceholderId: 200090, maxContextLength: 10485760 });
    expect(m.promptTokenIds).toEqual({
      '<|image_start|>': 200080,
      '<|image_end|>': 200081,
      '<|image|>': 200090,
      '<|tile_x_separator|>': 200084,
      '<|tile_y_separator|>': 200085,
    });
    expect(m.imageConfig).toEqual(familyById('llama4').defaults);
    const p = processorOf(m.imageConfig);
    expect(p.geometry(1080, 1920)).toMatchObject({ patches: 16, features: 3 * 336 * 336, tokens: 16 * 144, tiles: [3, 5] });
    expect(p.tokensOf({ encoderShape: [16, 3, 336, 336], grid: [16] })).toBe(2304);
    expect(() => p.tokensOf({ encoderShape: [16, 3, 336, 336] })).toThrow('no patches_per_image value: a Llama 4 model embeds an image by its crops');
    const f = familyById('llama4');
    expect(f.imageTensors({ patches: 16, tiles: [3, 5] })).toEqual([
      { name: 'aspect_ratios', dtype: 'int64', shape: [1, 2], values: [3, 5], layout: 'batched', keepOnCpu: false },
      { name: 'patches_per_image', dtype: 'int64', shape: [1], values: [16], layout: 'batched', keepOnCpu: false, splitsPixels: true },
    ]);
    expect(f.encoderShape({ patches: 16, features: 3 * 336 * 336 }, m.imageConfig)).toEqual([16, 3, 336, 336]);
    // Calibration: one square image per crop count (1, 5, 10 and 17 crops), the nearest to each target.
    const crop = 3 * 336 * 336 * 4;
    expect(p.sizesNear([0, 9 * crop, 1e12], 4)).toEqual([
      { width: 336, height: 336, nbytes: crop },
      { width: 1008, height: 1008, nbytes: 10 * crop },
      { width: 1344, height: 1344, nbytes: 17 * crop },
    ]);
  });

  it('an image becomes HF’s _prompt_split_image: 2 x 2 tiles are 4 runs of 144 <|patch|> with separators, then <|image|> and the global run (727 tokens)', async () => {
    const m = await model('llama4');
    const f = familyById('llama4');
    const seq = f.promptSequence!(f.imageTensors({ patches: 5, tiles: [2, 2] }), 720, promptTokenIdsOf(m), { width: 900, height: 900 });
    expect(seq).toHaveLength(727);
    const run = (n: number) => Array<number>(n).fill(200092);
    expect(seq).toEqual([200080, ...run(144), 200084, ...run(144), 200085, ...run(144), 200084, ...run(144), 200085, 200090, ...run(144), 200081]);
    // One tile: no grid, no separators.
    expect(f.promptSequence!(f.imageTensors({ patches: 1, tiles: [1, 1] }), 144, promptTokenIdsOf(m), { width: 300, height: 300 })).toEqual([
      200080,
      200090,
      ...run(144),
      200081,
    ]);
    const p = buildPrompt(
      m,
      [
        {
          role: 'user',
          content: [
            { type: 'image_url', image_url: { url: 'x' } },
            { type: 'text', text: 'hi' },
          ],
        },
      ],
      [seq],
    );
    expect(p.placeholders).toEqual([
      {
        offset: 5,
        length: 727,
        // After <|image_start|> at 5: a tile, <|tile_x_separator|>, a tile, <|tile_y_separator|>, twice; <|image|> at 586, the global run.
        patches: [6, 151, 296, 441, 587].map((offset) => ({ offset, length: 144 })),
      },
    ]);
  });

  it('max_patches and resize_to_max_canvas from preprocessor_config.json; refused: a tile the tower does not take, another filter, a non-square size, a vision tower of another patch', async () => {
    const ok = withFiles({}, { max_patches: 9, resize_to_max_canvas: true });
    expect((await ok.load()).imageConfig).toMatchObject({ max_patches: 9, resize_to_max_canvas: true });
    const tile = withFiles({}, { size: { height: 448, width: 448 } });
    await expect(tile.load()).rejects.toThrow(
      `${path.join(tile.dir, 'preprocessor_config.json')}: size 448x448 differs from ${path.join(tile.dir, 'config.json')}'s vision_config.image_size 336, the tiles the worker's model takes`,
    );
    const filter = withFiles({}, { resample: 3 });
    await expect(filter.load()).rejects.toThrow(`${path.join(filter.dir, 'preprocessor_config.json')}: resample 3 is not served (2, bilinear, is)`);
    const oblong = withFiles({}, { size: { height: 336, width: 672 } });
    await expect(oblong.load()).rejects.toThrow(
      `${path.join(oblong.dir, 'preprocessor_config.json')}: size 336x672 is not served (a square tile is; HF's processor refuses another)`,
    );
    const patch = withFiles({ vision_config: { image_size: 336, patch_size: 15, pixel_shuffle_ratio: 0.5 } }, {});
    await expect(patch.load()).rejects.toThrow(`${path.join(patch.dir, 'config.json')}: vision_config.patch_size 15 does not divide the 336-pixel tile`);
    const budget = withFiles({}, { max_patches: 0 });
    await expect(budget.load()).rejects.toThrow(`${path.join(budget.dir, 'preprocessor_config.json')}: max_patches must be a positive number, got 0`);
  });

  it("refuses a tokenizer without the prompt's tokens, naming the one it lacks", async () => {
    const dir = makeFamilyModel(path.join(scratch, 'llama4-no-sep'), 'llama4');
    const file = path.join(dir, 'tokenizer.json');
    const tokenizer = JSON.parse(readFileSync(file, 'utf8')) as { added_tokens: Array<{ content: string }> };
    tokenizer.added_tokens = tokenizer.added_tokens.filter((t) => t.content !== '<|tile_y_separator|>');
    writeFileSync(file, JSON.stringify(tokenizer));
    await expect(loadModelDirectory(dir)).rejects.toThrow(`${file}: no token "<|tile_y_separator|>" (Llama 4's prompt is written with it)`);
  });
});

describe('LLaVA-NeXT model directories', () => {
  const withFiles = (config: Record<string, unknown>, pre: Record<string, unknown>) => modelWithFiles('llava_next', config, pre);

  it("config.json's image_token_index (32000), CLIP at 336 with the five pinpoints; an image's tokens from its size, as vLLM's model counts them", async () => {
    const m = await model('llava_next');
    expect(m).toMatchObject({ modelType: 'llava_next', family: 'llava_next', imageTokenId: 32000, visionStartTokenId: undefined, maxContextLength: 32768 });
    expect(m.imageConfig).toEqual(familyById('llava_next').defaults);
    const p = processorOf(m.imageConfig);
    expect(p.geometry(1080, 1920)).toMatchObject({ patches: 1, features: 5 * 3 * 336 * 336, tokens: 1948, imageSize: [1080, 1920] });
    expect(p.tokensOf({ encoderShape: [1, 5, 3, 336, 336], grid: [1080, 1920] })).toBe(1948);
    // A request's padding is more crops than the image's tiles: the model drops them.
    expect(p.tokensOf({ encoderShape: [1, 5, 3, 336, 336], grid: [300, 400] })).toBe(1368);
    expect(() => p.tokensOf({ encoderShape: [1, 5, 3, 336, 336] })).toThrow("no image_sizes row: LLaVA-NeXT computes an image's tokens from its size");
    expect(familyById('llava_next').imageTensors({ patches: 1, imageSize: [300, 400] })).toEqual([
      { name: 'image_sizes', dtype: 'int64', shape: [1, 2], values: [300, 400], layout: 'batched', keepOnCpu: false },
    ]);
    expect(familyById('llava_next').encoderShape({ patches: 1, features: 3 * 3 * 336 * 336 }, m.imageConfig)).toEqual([1, 3, 3, 336, 336]);
    // Calibration: one image per crop count (3, 5 and 4 of the five pinpoints), the nearest to each target.
    const crop = 3 * 336 * 336 * 4;
    expect(p.sizesNear([0, 4 * crop, 1e12], 4)).toEqual([
      { width: 672, height: 336, nbytes: 3 * crop },
      { width: 336, height: 1008, nbytes: 4 * crop },
      { width: 672, height: 672, nbytes: 5 * crop },
    ]);
  });

  it('other pinpoints from preprocessor_config.json and config.json alike; refused where they differ, are not whole crops, or with "full"', async () => {
    const pinpoints = [
      [336, 1008],
      [1008, 1008],
    ];
    const ok = withFiles({ image_grid_pinpoints: pinpoints }, { image_grid_pinpoints: pinpoints });
    expect((await ok.load()).imageConfig).toMatchObject({ image_grid_pinpoints: pinpoints });
    const differ = withFiles({}, { image_grid_pinpoints: pinpoints });
    await expect(differ.load()).rejects.toThrow(
      `${path.join(differ.dir, 'preprocessor_config.json')}: image_grid_pinpoints [[336,1008],[1008,1008]] differs from ${path.join(differ.dir, 'config.json')}'s [[336,672],[672,336],[672,672],[1008,336],[336,1008]]: the processor's crops and the model's token count would disagree`,
    );
    // config.json naming none: the model takes LlavaNextConfig's default five, which the processor's must be too.
    const unnamed = withFiles({}, { image_grid_pinpoints: pinpoints });
    const config = JSON.parse(readFileSync(path.join(unnamed.dir, 'config.json'), 'utf8'));
    delete config.image_grid_pinpoints;
    writeFileSync(path.join(unnamed.dir, 'config.json'), JSON.stringify(config));
    await expect(unnamed.load()).rejects.toThrow(
      `${path.join(unnamed.dir, 'preprocessor_config.json')}: image_grid_pinpoints [[336,1008],[1008,1008]] differs from ${path.join(unnamed.dir, 'config.json')}'s [[336,672],[672,336],[672,672],[1008,336],[336,1008]] (its default: it names none): the processor's crops and the model's token count would disagree`,
    );
    const uneven = withFiles({ image_grid_pinpoints: [[336, 700]] }, { image_grid_pinpoints: [[336, 700]] });
    await expect(uneven.load()).rejects.toThrow(
      `${path.join(uneven.dir, 'preprocessor_config.json')}: image_grid_pinpoints must be a list of [height, width] pairs, each a whole number of 336x336 crops, got [[336,700]]`,
    );
    const full = withFiles({ vision_feature_select_strategy: 'full' }, {});
    await expect(full.load()).rejects.toThrow(
      `${path.join(full.dir, 'config.json')}: vision_feature_select_strategy "full" is not served for LLaVA-NeXT ("default" is)`,
    );
  });
});

describe('Phi-3-vision model directories', () => {
  it("the tokenizer's <|image|> (32044: config.json names no image token), preprocessor_config.json's 16 crops, a string-content chat template", async () => {
    const m = await model('phi3_v');
    expect(m).toMatchObject({
      modelType: 'phi3_v',
      family: 'phi3_v',
      imageTokenId: 32044,
      visionStartTokenId: undefined,
      maxContextLength: 131072,
      contentFormat: 'string',
    });
    expect(m.imageConfig).toEqual({ num_crops: 16, image_mean: [0.48145466, 0.4578275, 0.40821073], image_std: [0.26862954, 0.26130258, 0.27577711] });
  });

  it("a message's images become <|image|> lines before its text, as the gateway writes them for a string template; each <|image|> expands to its HD size's tokens", async () => {
    const m = await model('phi3_v');
    const processor = processorOf(m.imageConfig);
    const wide = processor.geometry(1080, 1920);
    const tall = processor.geometry(700, 300);
    expect([wide.tokens, tall.tokens]).toEqual([2353, 2377]);
    const p = buildPrompt(
      m,
      [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What differs?' },
            { type: 'image_url', image_url: { url: 'x' } },
            { type: 'image_url', image_url: { url: 'y' } },
          ],
        },
      ],
      [wide.tokens, tall.tokens],
    );
    expect(p.text).toBe('<|user|>\n<|image|>\n<|image|>\nWhat differs?<|end|>\n<|assistant|>\n');
    expect(p.inputIds[0]).toBe(32010);
    expect(p.placeholders).toEqual([
      { offset: p.inputIds.indexOf(32044), length: 2353 },
      { offset: p.inputIds.indexOf(32044) + 2353 + 1, length: 2377 },
    ]);
    expect(p.inputIds.filter((id) => id === 32044)).toHaveLength(2353 + 2377);
    // What the worker's model computes from the image_sizes row it receives, and its crops.
    expect(processor.tokensOf({ encoderShape: [1, 17, 3, 336, 336], grid: [1008, 1680] })).toBe(2353);
    expect(() => processor.tokensOf({ encoderShape: [1, 5, 3, 336, 336], grid: [1008, 1680] })).toThrow(
      new RangeError("an image's pixel values are [1, 5, 3, 336, 336], expected [1, crops, 3, 336, 336] with at least 16 crops for image_sizes [1008, 1680]"),
    );
    // A size that is not whole tiles is floored, as the model's hd_feature_transform takes it: 2 x 5 tiles.
    expect(processor.tokensOf({ encoderShape: [], grid: [1000, 1680] })).toBe((2 * 5 + 1) * 144 + 1 + 3 * 12);
    expect(() => processor.tokensOf({ encoderShape: [], grid: [300, 1680] })).toThrow(
      new RangeError("image_sizes row [300, 1680] is not an HD image's size: h and w must be whole numbers of at least 336"),
    );
  });

  it.each<[string, (dir: string) => void, (dir: string) => string]>([
    [
      'a crop other than 144 tokens',
      (d) => {
        const cfg = JSON.parse(readFileSync(path.join(d, 'config.json'), 'utf8'));
        cfg.img_processor.num_img_tokens = 256;
        writeFileSync(path.join(d, 'config.json'), JSON.stringify(cfg));
      },
      (d) =>
        `${d}/config.json: img_processor.num_img_tokens 256 is not served (144, the tokens of a 336-pixel crop that the processor and the model count, is)`,
    ],
    [
      'a fractional crop count',
      (d) => writeFileSync(path.join(d, 'preprocessor_config.json'), JSON.stringify({ num_crops: 4.5 })),
      (d) => `${d}/preprocessor_config.json: num_crops must be a positive integer, got 4.5`,
    ],
    [
      'a tokenizer without <|image|>',
      (d) => {
        const tok = JSON.parse(readFileSync(path.join(d, 'tokenizer.json'), 'utf8'));
        tok.added_tokens = tok.added_tokens.filter((t: { content: string }) => t.content !== '<|image|>');
        writeFileSync(path.join(d, 'tokenizer.json'), JSON.stringify(tok));
      },
      (d) => `${d}/config.json: no image_token_id, and ${d}/tokenizer.json has no <|image|> token to stand for it`,
    ],
  ])('%s is refused at start, naming the file and the value', async (label, spoil, message) => {
    const dir = makeFamilyModel(path.join(scratch, `phi3-refused-${label.replace(/\W+/g, '-')}`), 'phi3_v');
    spoil(dir);
    await expect(loadModelDirectory(dir)).rejects.toThrow(new ModelDirectoryError(message(dir)));
  });
});

describe('Kimi-K2.5 model directories', () => {
  it("config.json's media_placeholder_token_id (163605), tiktoken.model's tokenizer with Kimi's special tokens, media_proc_cfg's MoonViT settings", async () => {
    const m = await model('kimi_k25');
    expect(m).toMatchObject({ modelType: 'kimi_k25', family: 'kimi_k25', imageTokenId: 163605, visionStartTokenId: undefined, maxContextLength: 262144 });
    expect(m.imageConfig).toEqual({
      patch_size: 14,
      merge_size: 2,
      in_patch_limit: 16384,
      patch_limit_on_one_side: 512,
      image_mean: [0.5, 0.5, 0.5],
      image_std: [0.5, 0.5, 0.5],
    });
    expect(m.tokenizer.idToToken(163605)).toBe('<|media_pad|>');
    expect(m.tokenizer.tokenToId('<|im_user|>')).toBe(163587);
    // 163584 ranks, then 256 special ids (those tokenizer_config.json does not name are reserved).
    expect(m.tokenizer.vocabSize).toBe(163840);
    expect(m.tokenizer.idToToken(163700)).toBe('<|reserved_token_163700|>');
  });

  it('an image is <|media_begin|>image<|media_content|> and one <|media_pad|> expanded to its tokens, <|media_end|>', async () => {
    const m = await model('kimi_k25');
    const g = processorOf(m.imageConfig).geometry(300, 400);
    expect([g.patches, g.tokens]).toEqual([22 * 30, 11 * 15]);
    const p = buildPrompt(
      m,
      [
        {
          role: 'user',
          content: [
            { type: 'image_url', image_url: { url: 'x' } },
            { type: 'text', text: 'What is this?' },
          ],
        },
      ],
      [g.tokens],
    );
    expect(p.text).toBe(
      '<|im_user|>user<|im_middle|><|media_begin|>image<|media_content|><|media_pad|><|media_end|>What is this?<|im_end|><|im_assistant|>assistant<|im_middle|>',
    );
    expect(p.inputIds.slice(0, 3)).toEqual([163587, ...m.tokenizer.encode('user'), 163601].slice(0, 3));
    expect(p.placeholders).toEqual([{ offset: p.inputIds.indexOf(163605), length: 165 }]);
    expect(p.inputIds.filter((id) => id === 163605)).toHaveLength(165);
    expect(p.inputIds[p.placeholders[0]!.offset - 1]).toBe(163603);
    expect(p.inputIds[p.placeholders[0]!.offset + 165]).toBe(163604);
    // What the worker's model computes from the grid it receives.
    expect(processorOf(m.imageConfig).tokensOf({ encoderShape: [], grid: [1, 22, 30] })).toBe(165);
  });

  it.each<[string, (dir: string) => void, (dir: string) => string]>([
    ['no tokenizer at all', (d) => rmSync(path.join(d, 'tiktoken.model')), (d) => `cannot read ${d}/tokenizer.json: no such file (nor tiktoken.model)`],
    [
      'a malformed tiktoken.model line',
      (d) => writeFileSync(path.join(d, 'tiktoken.model'), 'AA== 0\nnot base64! 1\n'),
      (d) => `${d}/tiktoken.model:2: expected "<base64 token> <rank>", got "not base64! 1"`,
    ],
    [
      'an added token outside the special range',
      (d) => {
        const cfg = JSON.parse(readFileSync(path.join(d, 'tokenizer_config.json'), 'utf8'));
        cfg.added_tokens_decoder['12'] = { content: '<|oops|>', special: true };
        writeFileSync(path.join(d, 'tokenizer_config.json'), JSON.stringify(cfg));
      },
      (d) =>
        `${d}/tokenizer_config.json: added_tokens_decoder id 12 (<|oops|>) is outside Kimi's special range 163584..163839 (tiktoken.model has 163584 ranks)`,
    ],
    [
      'a tokenizer_config.json that does not name <|media_pad|>',
      (d) => {
        const cfg = JSON.parse(readFileSync(path.join(d, 'tokenizer_config.json'), 'utf8'));
        delete cfg.added_tokens_decoder['163605'];
        writeFileSync(path.join(d, 'tokenizer_config.json'), JSON.stringify(cfg));
      },
      (d) =>
        `${d}/tokenizer_config.json: token 163605 (config.json media_placeholder_token_id) is "<|reserved_token_163605|>", not "<|media_pad|>": the chat template's <|media_pad|> would not be found`,
    ],
    [
      'a fixed token count',
      (d) => writeFileSync(path.join(d, 'preprocessor_config.json'), JSON.stringify({ media_proc_cfg: { fixed_output_tokens: 256 } })),
      (d) => `${d}/preprocessor_config.json media_proc_cfg: fixed_output_tokens 256 is not served (tokens follow each image's grid)`,
    ],
    [
      "a patch size other than the tower's",
      (d) => writeFileSync(path.join(d, 'preprocessor_config.json'), JSON.stringify({ media_proc_cfg: { patch_size: 16 } })),
      (d) =>
        `${d}/preprocessor_config.json media_proc_cfg: patch_size 16 differs from ${d}/config.json's vision_config.patch_size 14, the patches the worker's model takes`,
    ],
    [
      'a zero patch budget',
      (d) => writeFileSync(path.join(d, 'preprocessor_config.json'), JSON.stringify({ media_proc_cfg: { in_patch_limit: 0 } })),
      (d) => `${d}/preprocessor_config.json media_proc_cfg: in_patch_limit must be a positive number, got 0`,
    ],
  ])('%s is refused at start, naming the file and the value', async (label, spoil, message) => {
    const dir = makeFamilyModel(path.join(scratch, `kimi-refused-${label.replace(/\W+/g, '-')}`), 'kimi_k25');
    spoil(dir);
    await expect(loadModelDirectory(dir)).rejects.toThrow(new ModelDirectoryError(message(dir)));
  });

  it('a Qwen directory without tokenizer.json is refused (only Kimi reads tiktoken.model)', async () => {
    const dir = makeFamilyModel(path.join(scratch, 'qwen-no-tokenizer'), 'qwen3_5');
    rmSync(path.join(dir, 'tokenizer.json'));
    await expect(loadModelDirectory(dir)).rejects.toThrow(
      new ModelDirectoryError(`cannot read ${dir}/tokenizer.json: no such file (Qwen3.5, Qwen3.6 checkpoints ship one)`),
    );
  });
});

describe('Kimi-K3 model directories', () => {
  it("K2.5's token ids and tiktoken.model, media_proc_cfg's 65536-patch budget and its chessboard (after the resize); no chat template in the directory: K3's XTML, content as a string", async () => {
    const m = await model('kimi_k3');
    expect(m).toMatchObject({ modelType: 'kimi_k3', family: 'kimi_k3', imageTokenId: 163605, imagePlaceholderId: 163605, contentFormat: 'string' });
    expect(m.imageConfig).toEqual({
      patch_size: 14,
      merge_size: 2,
      in_patch_limit: 65536,
      patch_limit_on_one_side: 512,
      image_mean: [0.5, 0.5, 0.5],
      image_std: [0.5, 0.5, 0.5],
      transparent_bg: {
        pattern: 'chessboard',
        chessboard_square_size: 8,
        chessboard_square_on_top_left: true,
        chessboard_white_value: 255,
        chessboard_gray_value: 180,
        stage: 'after_resize',
      },
    });
    // 4000x3000 keeps its size under K3's budget (285 x 214 patches < 65536), where K2.5 scales it to 2073x1554.
    expect(processorOf(m.imageConfig).geometry(3000, 4000)).toMatchObject({ resizedWidth: 4000, resizedHeight: 3000, tokens: 143 * 108 });
  });

  // The Python reference's own renderings (encoding_k3.py::build_chat_segments), as the gateway
  // holds its port to them: crates/tokenizer/tests/fixtures/kimi_k3/k3_render_fixtures.json.
  const THINK_MAX =
    '<|open|>message role="system" type="thinking-effort"<|sep|>`thinking_effort` guides on how much to think in your thinking channel (not including the response channel), supported values include `low`, `medium`, `high`, and `max`.\nNow the system is invoked with `thinking_effort=';
  it.each<[string, Array<{ role: string; content: string }>, Record<string, unknown>, string]>([
    [
      'plain_user_thinking',
      [{ role: 'user', content: 'Hi' }],
      { thinking_effort: null },
      '<|open|>message role="user"<|sep|>Hi<|close|>message<|sep|><|end_of_msg|><|open|>message role="assistant"<|sep|><|open|>think<|sep|>',
    ],
    [
      'system_user_thinking',
      [
        { role: 'system', content: 'You are helpful' },
        { role: 'user', content: 'Hi' },
      ],
      { thinking_effort: null },
      '<|open|>message role="system"<|sep|>You are helpful<|close|>message<|sep|><|end_of_msg|><|open|>message role="user"<|sep|>Hi<|close|>message<|sep|><|end_of_msg|><|open|>message role="assistant"<|sep|><|open|>think<|sep|>',
    ],
    [
      'plain_user_no_thinking',
      [{ role: 'user', content: 'Hi' }],
      { thinking: false },
      '<|open|>message role="user"<|sep|>Hi<|close|>message<|sep|><|end_of_msg|><|open|>message role="assistant"<|sep|><|open|>response<|sep|>',
    ],
    [
      'assistant_prior_turn',
      [
        { role: 'user', content: 'Hi' },
        { role: 'assistant', content: 'Hello!' },
        { role: 'user', content: 'Bye' },
      ],
      { thinking_effort: null },
      '<|open|>message role="user"<|sep|>Hi<|close|>message<|sep|><|end_of_msg|><|open|>message role="assistant"<|sep|><|open|>think<|sep|><|close|>think<|sep|><|open|>response<|sep|>Hello!<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|><|open|>message role="user"<|sep|>Bye<|close|>message<|sep|><|end_of_msg|><|open|>message role="assistant"<|sep|><|open|>think<|sep|>',
    ],
    [
      'thinking_effort_low',
      [{ role: 'user', content: 'Hi' }],
      { thinking_effort: 'low' },
      `${THINK_MAX}low\`.<|close|>message<|sep|><|end_of_msg|><|open|>message role="user"<|sep|>Hi<|close|>message<|sep|><|end_of_msg|><|open|>message role="assistant"<|sep|><|open|>think<|sep|>`,
    ],
  ])("K3's template renders the reference's %s exactly", async (_, messages, kwargs, expected) => {
    const m = await model('kimi_k3');
    expect(m.chatTemplate.render({ messages, add_generation_prompt: true, ...kwargs })).toBe(expected);
  });

  it("an image is the checkpoint's media block: <|media_begin|>, its decoded size as text, <|media_content|>, its <|media_pad|> run (where the features go), <|media_end|>; thinking_effort max, as served", async () => {
    const m = await model('kimi_k3');
    const f = familyById('kimi_k3');
    const g = processorOf(m.imageConfig).geometry(300, 400);
    const slot = f.promptSequence!(f.imageTensors(g), g.tokens, promptTokenIdsOf(m), { width: 400, height: 300 });
    const size = m.tokenizer.encodePlain('image 400x300');
    expect(slot).toEqual([163602, ...size, 163603, ...Array<number>(165).fill(163605), 163604]);
    const p = buildPrompt(
      m,
      [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is this?' },
            { type: 'image_url', image_url: { url: 'x' } },
          ],
        },
      ],
      [slot],
    );
    // The gateway's flattening for a string template: the image's <|media_pad|> first, then the text, a line apart.
    expect(p.text).toBe(
      `${THINK_MAX}max\`.<|close|>message<|sep|><|end_of_msg|><|open|>message role="user"<|sep|><|media_pad|>\nWhat is this?<|close|>message<|sep|><|end_of_msg|><|open|>message role="assistant"<|sep|><|open|>think<|sep|>`,
    );
    const at = p.inputIds.indexOf(163602);
    expect(p.placeholders).toEqual([{ offset: at, length: slot.length, patches: [{ offset: at + 2 + size.length, length: 165 }] }]);
    expect(p.inputIds.slice(at, at + slot.length)).toEqual(slot);
    expect(p.inputIds.filter((id) => id === 163606)).toHaveLength(4); // <|open|>: effort, user, assistant, think
  });

  it('a developer message is refused (K3 has no rendering for it) rather than dropped', async () => {
    const m = await model('kimi_k3');
    expect(() => buildPrompt(m, [{ role: 'developer', content: 'x' }], [])).toThrow(/Kimi-K3 renders system, user and assistant messages, not developer/);
  });

  it.each<[string, Record<string, unknown>, string]>([
    [
      'a stage it does not know',
      { transparent_bg_fill_stage: 'during_resize' },
      'transparent_bg_fill_stage must be "before_resize" or "after_resize", got "during_resize"',
    ],
    [
      'a pattern it does not know',
      { transparent_bg_config: { pattern: 'stripes' } },
      'transparent_bg_config: pattern must be one of "white", "black", "gray", "chessboard", got "stripes"',
    ],
    [
      'a square of 0',
      { transparent_bg_config: { pattern: 'chessboard', chessboard_square_size: 0 } },
      'transparent_bg_config: chessboard_square_size must be a positive number, got 0',
    ],
    [
      'a level past 255',
      { transparent_bg_config: { pattern: 'chessboard', chessboard_gray_value: 300 } },
      'transparent_bg_config: chessboard_gray_value must be an integer from 0 to 255, got 300',
    ],
    [
      'a corner that is not a boolean',
      { transparent_bg_config: { chessboard_square_on_top_left: 'yes' } },
      'transparent_bg_config: chessboard_square_on_top_left must be true or false, got "yes"',
    ],
  ])('%s is refused at start, naming the key and the value', async (_, media, message) => {
    const { dir, load } = modelWithFiles('kimi_k3', {}, { media_proc_cfg: { ...media } });
    await expect(load()).rejects.toThrow(
      new ModelDirectoryError(`${dir}/preprocessor_config.json media_proc_cfg${message.startsWith('transparent_bg_config') ? ' ' : ': '}${message}`),
    );
  });

  it('transparent_bg_config null drops alpha as K2.5 does; an object takes the reference defaults for the fields it leaves out; a stage alone keeps the board', async () => {
    expect((await modelWithFiles('kimi_k3', {}, { media_proc_cfg: { transparent_bg_config: null } }).load()).imageConfig).not.toHaveProperty('transparent_bg');
    expect((await modelWithFiles('kimi_k3', {}, { media_proc_cfg: { transparent_bg_config: { pattern: 'white' } } }).load()).imageConfig).toMatchObject({
      transparent_bg: { pattern: 'white', chessboard_square_size: 16, chessboard_gray_value: 200, stage: 'after_resize' },
    });
    expect((await modelWithFiles('kimi_k3', {}, { media_proc_cfg: { transparent_bg_fill_stage: 'before_resize' } }).load()).imageConfig).toMatchObject({
      transparent_bg: { pattern: 'chessboard', chessboard_square_size: 8, stage: 'before_resize' },
    });
  });
});

describe('Inkling model directories', () => {
  it("the tokenizer's <|unused_200054|> (config.json names no image token) and <|content_image|>, 40-pixel patches in 2 frames, CLIP's mean and std", async () => {
    const m = await model('inkling');
    expect(m).toMatchObject({ modelType: 'inkling_mm_model', family: 'inkling', imageTokenId: 200054, imagePlaceholderId: 200054, contentFormat: 'openai' });
    expect(m.promptTokenIds).toEqual({ '<|content_image|>': 200005 });
    expect(m.imageConfig).toEqual({
      patch_side: 40,
      temporal_patch_size: 2,
      image_mean: [0.48145466, 0.4578275, 0.40821073],
      image_std: [0.26862954, 0.26130258, 0.27577711],
    });
    expect(processorOf(m.imageConfig).geometry(300, 400)).toMatchObject({ resizedWidth: 400, resizedHeight: 300, patches: 88, tokens: 88, features: 9600 });
    const f = familyById('inkling');
    expect(f.imageTensors({ patches: 88 })).toEqual([
      { name: 'tokens_per_item', dtype: 'int64', shape: [1], values: [88], layout: 'batched', keepOnCpu: false, splitsPixels: true },
    ]);
    expect(f.encoderShape({ patches: 88, features: 9600 }, m.imageConfig)).toEqual([88, 2, 40, 40, 3]);
    expect(processorOf(m.imageConfig).tokensOf({ encoderShape: [88, 2, 40, 40, 3], grid: [88] })).toBe(88);
    // An image under 40 pixels a side is one patch (its column past the edge is the only one).
    expect(processorOf(m.imageConfig).geometry(32, 32)).toMatchObject({ patches: 1, tokens: 1 });
    expect(processorOf(m.imageConfig).tokensOf({ encoderShape: [1, 2, 40, 40, 3], grid: [1] })).toBe(1);
    expect(() => processorOf(m.imageConfig).tokensOf({ encoderShape: [], grid: [0] })).toThrow(
      "tokens_per_item 0 is not an image's patches (a positive count)",
    );
    expect(() => processorOf(m.imageConfig).tokensOf({ encoderShape: [88, 3, 40, 40], grid: [88] })).toThrow(
      'pixel_values are [88, 3, 40, 40], expected [patches, 2, 40, 40, 3]',
    );
  });

  it("a message's parts keep the order written; each image is <|content_image|> and its run of <|unused_200054|>, the range starting at <|content_image|> (the gateway's structural prefix), the run where the features go", async () => {
    const m = await model('inkling');
    const p = buildPrompt(
      m,
      [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'First' },
            { type: 'image_url', image_url: { url: 'a' } },
            { type: 'text', text: 'then' },
            { type: 'image_url', image_url: { url: 'b' } },
          ],
        },
      ],
      [88, 8],
    );
    expect(p.text).toBe(
      '<|message_user|><|content_text|>First<|content_image|><|unused_200054|><|content_text|>then<|content_image|><|unused_200054|><|end_message|><|message_model|>',
    );
    const first = p.inputIds.indexOf(200005);
    const second = p.inputIds.indexOf(200005, first + 1);
    expect(p.placeholders).toEqual([
      { offset: first, length: 89, patches: [{ offset: first + 1, length: 88 }] },
      { offset: second, length: 9, patches: [{ offset: second + 1, length: 8 }] },
    ]);
    expect(p.inputIds.filter((id) => id === 200054)).toHaveLength(96);
  });

  it.each<[string, Record<string, unknown>, string]>([
    ['a pre-scaling factor', { rescale_image_frac: 2 }, "rescale_image_frac 2 is not served (images go at their own size, the processor's default)"],
    ['a patch that is not square', { size: { height: 40, width: 32 } }, "size 40x32 is not served (a square patch is; HF's processor refuses another)"],
    ["the gateway's patch_size disagreeing", { patch_size: 32 }, 'patch_size 32 differs from size 40x40'],
    [
      "the gateway's patch_size as an object, disagreeing",
      { patch_size: { height: 40, width: 20 } },
      'patch_size {"height":40,"width":20} differs from size 40x40',
    ],
    ['no normalize', { do_normalize: false }, "do_normalize false is not served (Inkling's processor always patchifies, rescales and normalizes)"],
    ['no frames', { temporal_patch_size: 0 }, 'temporal_patch_size must be a positive number, got 0'],
  ])('%s is refused at start, naming the file, the key and the value', async (_, pre, message) => {
    const { dir, load } = modelWithFiles('inkling', {}, pre);
    await expect(load()).rejects.toThrow(new ModelDirectoryError(`${dir}/preprocessor_config.json: ${message}`));
  });
});
