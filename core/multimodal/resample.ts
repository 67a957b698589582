// The resampling arithmetic of Pillow's Resample.c, shared by the JavaScript passes
// (resize.ts) and the WebAssembly SIMD kernels (resize-simd.ts): a filter of some support
// (bicubic: Keys' cubic kernel with a = -0.5, support 2; bilinear: the triangle, support 1),
// widened by the scale when downsampling, per output pixel the taps
// filter((x + xmin - center + 0.5) / filterscale) normalised to sum 1 and converted to
// 22-bit fixed point (round half away from zero), in Pillow's evaluation order so that every
// coefficient comes out bit-identical.
export const PRECISION_BITS = 22;

function bicubic(x: number): number {
  const a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

function bilinear(x: number): number {
  if (x < 0.0) x = -x;
  if (x < 1.0) return 1.0 - x;
  return 0.0;
}

/** Pillow's filters mmtc resizes with: BICUBIC (Qwen, CLIP, MoonViT) and BILINEAR (Phi-3-vision's HD transform). */
export type ResampleFilter = 'bicubic' | 'bilinear';
const FILTERS: Record<ResampleFilter, { fn: (x: number) => number; support: number }> = {
  bicubic: { fn: bicubic, support: 2.0 },
  bilinear: { fn: bilinear, support: 1.0 },
};

export interface ResampleCoefficients {
  /** Taps per output pixel (the stride of `weights`). */
  ksize: number;
  /** First source index for each output pixel. */
  start: Int32Array;
  /** Number of taps actually used for each output pixel. */
  count: Int32Array;
  /** Fixed-point weights, `ksize` per output pixel. */
  weights: Int32Array;
}

function filterScale(inSize: number, outSize: number, filter: ResampleFilter): { scale: number; filterscale: number; support: number } {
  const scale = inSize / outSize;
  const filterscale = scale < 1.0 ? 1.0 : scale;
  return { scale, filterscale, support: FILTERS[filter].support * filterscale };
}

/** Taps per output pixel (the stride of the weights) for a resize of inSize to outSize. */
export function kernelSize(inSize: number, outSize: number, filter: ResampleFilter = 'bicubic'): number {
  return Math.ceil(filterScale(inSize, outSize, filter).support) * 2 + 1;
}

/** The source pixels output pixel `xx` reads: first index and count (no weights computed). */
export function sourceSpan(inSize: number, outSize: number, xx: number, filter: ResampleFilter = 'bicubic'): { start: number; count: number } {
  const { scale, support } = filterScale(inSize, outSize, filter);
  const center = (xx + 0.5) * scale;
  let xmin = Math.trunc(center - support + 0.5);
  if (xmin < 0) xmin = 0;
  let xmax = Math.trunc(center + support + 0.5);
  if (xmax > inSize) xmax = inSize;
  return { start: xmin, count: xmax - xmin };
}

/**
 * The coefficients of output pixels [from, to) of a resize of inSize to outSize (all of them
 * by default): each output pixel's taps are its own, so a window of the output (a crop after
 * the resize) is computed, and takes memory, for its pixels alone.
 */
export function resampleCoefficients(inSize: number, outSize: number, from = 0, to = outSize, filter: ResampleFilter = 'bicubic'): ResampleCoefficients {
  const { scale, filterscale } = filterScale(inSize, outSize, filter);
  const ksize = kernelSize(inSize, outSize, filter);
  const fn = FILTERS[filter].fn;
  const n = to - from;
  const start = new Int32Array(n);
  const count = new Int32Array(n);
  const weights = new Int32Array(n * ksize);
  const k = new Float64Array(ksize);
  const ss = 1.0 / filterscale;
  for (let xx = from; xx < to; xx++) {
    const i = xx - from;
    const center = (xx + 0.5) * scale;
    const { start: xmin, count: xmax } = sourceSpan(inSize, outSize, xx, filter);
    let ww = 0.0;
    for (let x = 0; x < xmax; x++) {
      const w = fn((x + xmin - center + 0.5) * ss);
      k[x] = w;
      ww += w;
    }
    for (let x = 0; x < xmax; x++) {
      const v = ww !== 0.0 ? k[x]! / ww : k[x]!;
      weights[i * ksize + x] = v < 0 ? Math.trunc(-0.5 + v * (1 << PRECISION_BITS)) : Math.trunc(0.5 + v * (1 << PRECISION_BITS));
    }
    start[i] = xmin;
    count[i] = xmax;
  }
  return { ksize, start, count, weights };
}

/** Receives output row `y` as packed RGB; the buffer is reused after the call returns. */
export type RowSink = (y: number, rgb: Uint8Array) => void;

/** A window of the resized image, [x0, x1) × [y0, y1): only its pixels are computed and emitted (a crop after the resize). */
export interface OutputWindow {
  x0: number;
  x1: number;
  y0: number;
  y1: number;
}

/** The whole output, as a window. */
export const wholeOutput = (outW: number, outH: number): OutputWindow => ({ x0: 0, x1: outW, y0: 0, y1: outH });
