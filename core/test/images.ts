// Test images made by Pillow at test time (so no binary fixtures are committed), with
// Pillow's own `convert("RGB")` pixels beside each one as the decoding reference.
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runPython } from './python.ts';

const MAKE = `
import sys, numpy as np
from PIL import Image
out = sys.argv[1]
w, h = 400, 300
a = (np.add.outer(np.arange(h), np.arange(w)) % 256).astype(np.uint8)
rng = np.random.default_rng(7)
rgb = np.stack([a, a[::-1], rng.integers(0, 256, a.shape, dtype=np.uint8)], -1)
Image.fromarray(rgb).save(out + '/rgb.png')
Image.fromarray(rgb).save(out + '/photo.jpg', quality=90)
Image.fromarray(rgb).save(out + '/photo444.jpg', quality=92, subsampling=0)
Image.fromarray(a).save(out + '/gray.png')
Image.fromarray(a).save(out + '/gray.jpg', quality=90)
Image.fromarray(rgb).save(out + '/progressive.jpg', quality=90, progressive=True)
Image.fromarray(rgb).convert('CMYK').save(out + '/cmyk.jpg', quality=90)
Image.fromarray(a).convert('LA').save(out + '/gray_alpha.png')
Image.fromarray(np.dstack([rgb, a])).save(out + '/rgba.png')
Image.fromarray(rgb).convert('P', palette=Image.ADAPTIVE).save(out + '/palette.png')
Image.fromarray(rgb).save(out + '/lossless.webp', lossless=True)
Image.fromarray(rgb).save(out + '/lossy.webp', quality=80)
frames = [Image.fromarray(rgb).convert('P'), Image.fromarray(rgb[::-1].copy()).convert('P')]
frames[0].save(out + '/anim.gif', save_all=True, append_images=frames[1:])
big = np.dstack([(np.add.outer(np.arange(1080), np.arange(1920)) % 256).astype(np.uint8)] * 3)
Image.fromarray(big).save(out + '/hd.jpg', quality=85)
Image.fromarray(rgb).save(out + '/image.bmp')
for name in ['rgb.png', 'photo.jpg', 'photo444.jpg', 'gray.jpg', 'progressive.jpg', 'gray.png', 'gray_alpha.png', 'rgba.png', 'palette.png', 'lossless.webp', 'lossy.webp', 'anim.gif']:
    with open(out + '/' + name + '.rgb', 'wb') as fh:
        fh.write(Image.open(out + '/' + name).convert('RGB').tobytes())
`;

export const DECODABLE = [
  'rgb.png',
  'photo.jpg',
  'photo444.jpg',
  'gray.jpg',
  'progressive.jpg',
  'gray.png',
  'gray_alpha.png',
  'rgba.png',
  'palette.png',
  'lossless.webp',
  'lossy.webp',
  'anim.gif',
] as const;

let made: string | undefined;
/**
 * The images as Pillow made them, once for this process (about a second of Python each time,
 * and the test files of a vitest worker share its modules): every makeTestImages copies
 * them into a folder of its own, which its test may add to and remove. Under vitest they are
 * in the run's folder (core/test/global-setup.ts removes it), else removed on exit.
 */
function madeImages(): string {
  if (made) return made;
  const runDir = process.env.MMTC_TEST_RUN_DIR;
  const dir = mkdtempSync(path.join(runDir ?? tmpdir(), 'mmtc-images-made-'));
  if (!runDir) process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  runPython(MAKE, [dir]);
  made = dir;
  return dir;
}

export function makeTestImages(): { dir: string; file(name: string): string; bytes(name: string): Buffer; pillowRgb(name: string): Buffer; remove(): void } {
  const dir = mkdtempSync(path.join(tmpdir(), 'mmtc-images-'));
  cpSync(madeImages(), dir, { recursive: true });
  return {
    dir,
    file: (name) => path.join(dir, name),
    bytes: (name) => readFileSync(path.join(dir, name)),
    pillowRgb: (name) => readFileSync(path.join(dir, `${name}.rgb`)),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/**
 * Noise images of odd shapes beside `images`' (a portrait, a 1×1 dot, a strip: the sizes a
 * family's geometry treats apart), Pillow-written PNGs of uniform random pixels from `seed`,
 * each `[name, height, width]`.
 */
export function addNoiseImages(images: { dir: string }, seed: number, shapes: ReadonlyArray<readonly [string, number, number]>): void {
  runPython(
    `
import json, sys, numpy as np
from PIL import Image
rng = np.random.default_rng(int(sys.argv[2]))
for name, h, w in json.loads(sys.argv[3]):
    Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(sys.argv[1] + '/' + name)
`,
    [images.dir, String(seed), JSON.stringify(shapes)],
  );
}
