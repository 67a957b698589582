// A transparent image flattened over a background, as Kimi-K3's processor does it (the gateway's
// vision/transforms.rs, fill_transparent_bg, and vision/processors/kimi_k3.rs; the checkpoint's
// transparent_bg_config in preprocessor_config.json; docs/preprocessing.md, "MoonViT patches"):
// each pixel alpha · rgb + (1 − alpha) · background in float32, alpha = a / 255, truncated to a
// byte (numpy's astype(uint8)); the background a flat level or a chessboard of squares.
//
// With the "after_resize" stage the image is resized with its alpha, as Pillow resizes RGBA:
// the colour premultiplied by alpha (Pillow's RGBA → RGBa, (v · a + 128) scaled by 257 / 65536),
// every channel resized alike, then divided back (RGBa → RGBA: 255 · v / a, truncated, at most
// 255; a of 0 or 255 leaves the colour as it is).

export const TRANSPARENT_BG_PATTERNS = ['white', 'black', 'gray', 'chessboard'] as const;
export type TransparentBgPattern = (typeof TRANSPARENT_BG_PATTERNS)[number];

/** transparent_bg_fill_stage: composited before the resize (at the image's own size) or after it (at the resized size). */
export const TRANSPARENT_BG_STAGES = ['before_resize', 'after_resize'] as const;

/** transparent_bg_config and transparent_bg_fill_stage, as the checkpoint's processor reads them. */
export interface TransparentBackground {
  pattern: TransparentBgPattern;
  chessboard_square_size: number;
  chessboard_square_on_top_left: boolean;
  chessboard_white_value: number;
  chessboard_gray_value: number;
  stage: (typeof TRANSPARENT_BG_STAGES)[number];
}

/** Kimi-K3's shipped board (moonshotai/Kimi-K3 preprocessor_config.json, the gateway's default_transparent_bg). */
export const KIMI_K3_TRANSPARENT_BG: TransparentBackground = {
  pattern: 'chessboard',
  chessboard_square_size: 8,
  chessboard_square_on_top_left: true,
  chessboard_white_value: 255,
  chessboard_gray_value: 180,
  stage: 'after_resize',
};

/** The background level of pixel (x, y). */
function backgroundAt(bg: TransparentBackground, x: number, y: number): number {
  switch (bg.pattern) {
    case 'white':
      return 255;
    case 'black':
      return 0;
    case 'gray':
      return 128;
    case 'chessboard': {
      const s = bg.chessboard_square_size;
      const grayCell = bg.chessboard_square_on_top_left ? 1 : 0;
      return (Math.floor(y / s) + Math.floor(x / s)) % 2 === grayCell ? bg.chessboard_gray_value : bg.chessboard_white_value;
    }
  }
}

/** Flatten packed RGB with its alpha plane over the background, in place: trunc(α·v + (1 − α)·bg) in float32, α = a / 255. */
export function compositeOverBackground(rgb: Uint8Array, alpha: Uint8Array, width: number, height: number, bg: TransparentBackground): void {
  const f = Math.fround;
  // The blend of each (alpha, background) pair depends on the colour alone: the two products per alpha level.
  const levels = Float32Array.from({ length: 256 }, (_, a) => f(a / 255));
  for (let y = 0, i = 0; y < height; y++) {
    for (let x = 0; x < width; x++, i++) {
      const a = alpha[i]!;
      if (a === 255) continue;
      const w = levels[a]!;
      const back = f(f(1 - w) * backgroundAt(bg, x, y));
      for (let c = 3 * i; c < 3 * i + 3; c++) rgb[c] = Math.trunc(f(f(w * rgb[c]!) + back));
    }
  }
}

/** Pillow's RGBA → RGBa: each colour byte times its alpha, (t + (t >> 8)) >> 8 with t = v·a + 128. Into a new array. */
export function premultiplied(rgb: Uint8Array, alpha: Uint8Array): Uint8Array {
  const out = new Uint8Array(rgb.length);
  for (let i = 0; i < alpha.length; i++) {
    const a = alpha[i]!;
    for (let c = 3 * i; c < 3 * i + 3; c++) {
      const t = rgb[c]! * a + 128;
      out[c] = ((t >> 8) + t) >> 8;
    }
  }
  return out;
}

/** Pillow's RGBa → RGBA, in place: 255·v / a truncated and clipped to 255; a of 0 or 255 leaves v. */
export function unpremultiply(rgb: Uint8Array, alpha: Uint8Array): void {
  for (let i = 0; i < alpha.length; i++) {
    const a = alpha[i]!;
    if (a === 0 || a === 255) continue;
    for (let c = 3 * i; c < 3 * i + 3; c++) rgb[c] = Math.min(255, Math.floor((255 * rgb[c]!) / a));
  }
}

/** An alpha plane as a gray RGB image (each byte three times), for the RGB resize to resize it as Pillow resizes the alpha band. */
export function alphaAsRgb(alpha: Uint8Array): Uint8Array {
  const out = new Uint8Array(alpha.length * 3);
  for (let i = 0; i < alpha.length; i++) out[3 * i] = out[3 * i + 1] = out[3 * i + 2] = alpha[i]!;
  return out;
}

/** The first channel of a gray RGB image (a resized alpha plane). */
export function firstChannel(rgb: Uint8Array): Uint8Array {
  const out = new Uint8Array(rgb.length / 3);
  for (let i = 0; i < out.length; i++) out[i] = rgb[3 * i]!;
  return out;
}
