// The load images and what a worker must receive for them. Images are made with sharp at run
// time (no binary fixtures): photo-like content (gradients plus seeded noise) in every
// format the API takes, sizes from thumbnails to 1080p and an 8:1 strip. For each one the
// suite runs the same Qwen-VL preprocessing the router runs (decode, smart_resize, bicubic,
// normalize, patchify) in this process and keeps the FNV-1a of every tensor in each wire
// dtype: the fingerprints the reference worker must report for that image, byte for byte.
import { asQwenConfig } from '../../core/multimodal/families/index.ts';
import sharp, { type Sharp } from 'sharp';
import { decodeToRgb } from '../../core/multimodal/decode.ts';
import { loadModelDirectory } from '../../core/multimodal/model-dir.ts';
import { preprocessRgb } from '../../core/multimodal/qwen-vl.ts';
import { encodeFloat32As } from '../../core/transport/dtype.ts';
import { fnv1a64 } from '../../core/util/fnv.ts';
import { Rng } from './rng.ts';

export interface CorpusImage {
  name: string;
  format: 'png' | 'jpeg' | 'webp' | 'gif';
  width: number;
  height: number;
  bytes: Buffer;
  dataUrl: string;
  patches: number;
  features: number;
  gridThw: [number, number, number];
  /** FNV-1a state after the float32 / bfloat16 encoder bytes (a state, so vLLM's batch can be chained). */
  f32: { hi: number; lo: number };
  f32Bytes: number;
  /** The float32 encoder bytes themselves (a vLLM batch's fingerprint runs over several images'). */
  f32Raw: Uint8Array;
  bf16: { hi: number; lo: number };
  bf16Bytes: number;
}

const hex = (s: { hi: number; lo: number }) => s.hi.toString(16).padStart(8, '0') + s.lo.toString(16).padStart(8, '0');
function int64(values: readonly number[]): Uint8Array {
  return new Uint8Array(BigInt64Array.from(values.map((v) => BigInt(v))).buffer);
}
/** FNV-1a of `parts` one after the other, as if they were one buffer. */
function chained(states: Array<(seed: { hi: number; lo: number } | undefined) => { hi: number; lo: number }>): string {
  let s: { hi: number; lo: number } | undefined;
  for (const f of states) s = f(s);
  return hex(s ?? fnv1a64(new Uint8Array(0)));
}

async function photo(width: number, height: number, seed: number): Promise<Sharp> {
  const rng = new Rng(seed);
  const raw = Buffer.alloc(width * height * 3);
  const fx = rng.int(1, 5);
  const fy = rng.int(1, 5);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 3;
      const n = (Math.imul((x * 73856093) ^ (y * 19349663), seed | 1) >>> 24) & 63;
      raw[i] = ((x * 255 * fx) / width + n) & 255;
      raw[i + 1] = ((y * 255 * fy) / height + n) & 255;
      raw[i + 2] = (((x + y) * 128) / (width + height) + 2 * n) & 255;
    }
  }
  return sharp(raw, { raw: { width, height, channels: 3 } });
}

const SPECS: Array<{ name: string; format: CorpusImage['format']; width: number; height: number }> = [
  { name: 'thumb.png', format: 'png', width: 160, height: 120 },
  { name: 'vga.jpg', format: 'jpeg', width: 640, height: 480 },
  { name: 'svga.webp', format: 'webp', width: 800, height: 600 },
  { name: 'square.gif', format: 'gif', width: 500, height: 500 },
  { name: 'hd.jpg', format: 'jpeg', width: 1280, height: 720 },
  { name: 'xga.png', format: 'png', width: 1024, height: 768 },
  { name: 'strip.png', format: 'png', width: 1600, height: 200 },
  { name: 'fullhd.jpg', format: 'jpeg', width: 1920, height: 1080 },
];

const MIME: Record<CorpusImage['format'], string> = { png: 'image/png', jpeg: 'image/jpeg', webp: 'image/webp', gif: 'image/gif' };

export async function encodeImage(img: Sharp, format: CorpusImage['format']): Promise<Buffer> {
  if (format === 'png') return img.png({ compressionLevel: 6 }).toBuffer();
  if (format === 'jpeg') return img.jpeg({ quality: 85 }).toBuffer();
  if (format === 'webp') return img.webp({ quality: 80 }).toBuffer();
  return img.gif().toBuffer();
}

export async function makeCorpus(only?: readonly string[]): Promise<CorpusImage[]> {
  const out: CorpusImage[] = [];
  for (const [k, spec] of SPECS.entries()) {
    if (only && !only.includes(spec.name)) continue;
    out.push(await makeImage(spec, 1000 + k));
  }
  return out;
}

let bundled: ReturnType<typeof loadModelDirectory> | undefined;

export type ImageSpec = { name: string; format: CorpusImage['format']; width: number; height: number };

/** One photo-like image of this size and format from `seed` (another seed, other pixels), with what a worker must receive for it: the router's preprocessing run here. */
export async function makeImage(spec: ImageSpec, seed: number): Promise<CorpusImage> {
  return describeImage(spec, await photoBytes(spec, seed));
}

/** The encoded bytes of makeImage's image, without the preprocessing (describeImage, later: a load need not wait for it). */
export async function photoBytes(spec: ImageSpec, seed: number): Promise<Buffer> {
  return encodeImage(await photo(spec.width, spec.height, seed), spec.format);
}

/** What a worker must receive for these encoded bytes: the router's preprocessing, run here. */
export async function describeImage(spec: ImageSpec, bytes: Buffer): Promise<CorpusImage> {
  const model = await (bundled ??= loadModelDirectory());
  const rgb = await decodeToRgb(bytes);
  const p = preprocessRgb(rgb.rgb, rgb.width, rgb.height, asQwenConfig(model.imageConfig), { float32: true, bf16: false });
  const pv = p.pixelValues!;
  const f32Bytes = new Uint8Array(pv.buffer, pv.byteOffset, pv.byteLength);
  const bf16Bytes = encodeFloat32As('bfloat16', pv);
  return {
    ...spec,
    bytes,
    dataUrl: `data:${MIME[spec.format]};base64,${bytes.toString('base64')}`,
    patches: p.patches,
    features: p.features,
    gridThw: p.gridThw,
    f32: fnv1a64(f32Bytes),
    f32Bytes: f32Bytes.byteLength,
    f32Raw: new Uint8Array(f32Bytes),
    bf16: fnv1a64(bf16Bytes),
    bf16Bytes: bf16Bytes.byteLength,
  };
}

export interface ExpectedTensor {
  name: string;
  shape: number[];
  dtype: string;
  nbytes: number;
  fnv1a: string;
}

/**
 * What the reference worker must say it received for these images, tensor by tensor: its
 * names, shapes, dtypes, sizes and fingerprints (TokenSpeed: one item per image, bfloat16;
 * vLLM: one float32 batch, whose fingerprint runs over every image's float32 bytes in order).
 * A TokenSpeed worker labelled multimodal_encoder_dtype float32 gets float32 encoder inputs.
 */
export function expectedTensors(
  runtime: 'tokenspeed' | 'vllm',
  images: readonly CorpusImage[],
  tokenSpeedDtype: 'bfloat16' | 'float32' = 'bfloat16',
): ExpectedTensor[] {
  if (runtime === 'tokenspeed') {
    const f32 = tokenSpeedDtype === 'float32';
    return images.flatMap((im, i) => {
      const sfx = images.length > 1 ? `[${i}]` : '';
      return [
        {
          name: `encoder_input${sfx}`,
          shape: [im.patches, im.features],
          dtype: tokenSpeedDtype,
          nbytes: f32 ? im.f32Bytes : im.bf16Bytes,
          fnv1a: hex(f32 ? im.f32 : im.bf16),
        },
        { name: `image_grid_thw${sfx}`, shape: [1, 3], dtype: 'int64', nbytes: 24, fnv1a: hex(fnv1a64(int64(im.gridThw))) },
        { name: `patches_per_image${sfx}`, shape: [1], dtype: 'int64', nbytes: 8, fnv1a: hex(fnv1a64(int64([im.patches]))) },
      ];
    });
  }
  const rows = images.reduce((n, im) => n + im.patches, 0);
  return [
    {
      name: 'pixel_values',
      shape: [rows, images[0]!.features],
      dtype: 'float32',
      nbytes: images.reduce((n, im) => n + im.f32Bytes, 0),
      fnv1a: images.length === 1 ? hex(images[0]!.f32) : chained(images.map((im) => (seed) => fnv1a64(im.f32Raw, seed))),
    },
    {
      name: 'image_grid_thw',
      shape: [images.length, 3],
      dtype: 'int64',
      nbytes: 24 * images.length,
      fnv1a: hex(fnv1a64(int64(images.flatMap((im) => im.gridThw)))),
    },
    // pixel_values split into its images by this (the gateway's flat_keys), one row each.
    {
      name: 'patches_per_image',
      shape: [images.length],
      dtype: 'int64',
      nbytes: 8 * images.length,
      fnv1a: hex(fnv1a64(int64(images.map((im) => im.patches)))),
    },
  ];
}

export interface ReportedTensor {
  name: string;
  shape: number[];
  dtype: string;
  path: string;
  nbytes: number;
  fnv1a?: string;
}

/** The reference worker's sentence, `2 images: encoder_input[0] [r,c] bfloat16 via shm, N bytes, fnv1a H; …`, as tensors. */
export function parseWorkerReport(content: string): { images: number; tensors: ReportedTensor[] } | undefined {
  const head = /^(no images|(\d+) images?)[:.]/.exec(content);
  if (!head) return undefined;
  const tensors: ReportedTensor[] = [];
  const re = /([a-z_]+(?:\[\d+\])?) \[([\d,]*)\] (\w+) via (\w+), (\d+) bytes(?:, fnv1a ([0-9a-f]{16}))?/g;
  for (let m = re.exec(content); m; m = re.exec(content)) {
    tensors.push({
      name: m[1]!,
      shape: m[2] ? m[2].split(',').map(Number) : [],
      dtype: m[3]!,
      path: m[4]!,
      nbytes: Number(m[5]),
      ...(m[6] ? { fnv1a: m[6] } : {}),
    });
  }
  return { images: head[2] ? Number(head[2]) : 0, tensors };
}

/** Every difference between what the worker reported and what it must have received; [] when they agree. */
export function compareTensors(expected: readonly ExpectedTensor[], reported: readonly ReportedTensor[]): string[] {
  const problems: string[] = [];
  const byName = new Map(reported.map((t) => [t.name, t]));
  for (const e of expected) {
    const r = byName.get(e.name);
    if (!r) {
      problems.push(`${e.name} missing`);
      continue;
    }
    byName.delete(e.name);
    if (r.shape.join(',') !== e.shape.join(',')) problems.push(`${e.name} shape [${r.shape}] != [${e.shape}]`);
    if (r.dtype !== e.dtype) problems.push(`${e.name} dtype ${r.dtype} != ${e.dtype}`);
    if (r.nbytes !== e.nbytes) problems.push(`${e.name} ${r.nbytes} bytes != ${e.nbytes}`);
    if (r.fnv1a !== e.fnv1a) problems.push(`${e.name} fnv1a ${r.fnv1a} != ${e.fnv1a} (corrupted)`);
  }
  for (const extra of byName.keys()) problems.push(`unexpected tensor ${extra}`);
  return problems;
}

export { hex as fnvHex };
