// Pillow-exact resize of 8-bit RGB images: the same bytes as Pillow's
// `Image.resize((w, h), Image.BICUBIC)`, which is what Qwen-VL's reference image processor
// feeds the model, and as `Image.BILINEAR` (Phi-3-vision's) with `filter`. Any other
// bicubic (libvips, canvas, OpenCV) differs by a few levels on most pixels, and those
// differences reach the encoder.
//
// The algorithm is Pillow's Resample.c: the filter (Keys' cubic kernel with a = -0.5 and
// support 2, or the triangle with support 1: resample.ts), widened by the scale when
// downsampling; per output pixel the taps are filter((x + xmin - center + 0.5) / filterscale),
// normalised to sum 1, then converted to 22-bit fixed point (round half away from zero). A
// horizontal pass into an 8-bit intermediate, then a vertical pass; a pass whose side is
// unchanged is skipped. Each sum starts at 1 << 21 (rounding) and is clipped to 0..255 after
// an arithmetic shift by 22. The double-precision steps are written in Pillow's evaluation
// order so that every coefficient comes out bit-identical.
import {
  PRECISION_BITS,
  resampleCoefficients,
  wholeOutput,
  type OutputWindow,
  type ResampleCoefficients,
  type ResampleFilter,
  type RowSink,
} from './resample.ts';
import { resizeRgbIntoSimd, simdKernels } from './resize-simd.ts';

const HALF = 1 << (PRECISION_BITS - 1);
const clip8 = (ss: number) => {
  const v = ss >> PRECISION_BITS;
  return v < 0 ? 0 : v > 255 ? 255 : v;
};

/** Horizontal pass over rows [y0, y1) of `src` (width `inW`, 3 channels). */
function resizeHorizontal(src: Uint8Array, inW: number, rows: number, rowOffset: number, outW: number, c: ResampleCoefficients): Uint8Array {
  const out = new Uint8Array(outW * rows * 3);
  const { ksize, start, count, weights } = c;
  for (let y = 0; y < rows; y++) {
    const rowIn = (y + rowOffset) * inW * 3;
    const rowOut = y * outW * 3;
    for (let xx = 0; xx < outW; xx++) {
      const xmin = start[xx]!;
      const n = count[xx]!;
      const kb = xx * ksize;
      let s0 = HALF;
      let s1 = HALF;
      let s2 = HALF;
      let p = rowIn + xmin * 3;
      for (let x = 0; x < n; x++, p += 3) {
        const w = weights[kb + x]!;
        s0 = (s0 + Math.imul(src[p]!, w)) | 0;
        s1 = (s1 + Math.imul(src[p + 1]!, w)) | 0;
        s2 = (s2 + Math.imul(src[p + 2]!, w)) | 0;
      }
      const o = rowOut + xx * 3;
      out[o] = clip8(s0);
      out[o + 1] = clip8(s1);
      out[o + 2] = clip8(s2);
    }
  }
  return out;
}

/**
 * Vertical pass, one output row at a time: each tap adds a whole source row, scaled by one
 * weight, into an Int32 accumulator (contiguous, so the JIT keeps it in a tight loop).
 * `emitRow(y, rgb)` receives each finished row; the buffer is reused for the next row.
 */
function resizeVertical(src: Uint8Array, width: number, outH: number, c: ResampleCoefficients, rowShift: number, emitRow: RowSink): void {
  const { ksize, start, count, weights } = c;
  const stride = width * 3;
  const row = new Uint8Array(stride);
  const taps = new Int32Array(ksize);
  for (let yy = 0; yy < outH; yy++) {
    const base = (start[yy]! - rowShift) * stride;
    const n = count[yy]!;
    for (let t = 0; t < n; t++) taps[t] = weights[yy * ksize + t]!;
    for (let i = 0; i < stride; i++) {
      let s = HALF;
      let p = base + i;
      for (let t = 0; t < n; t++, p += stride) s += src[p]! * taps[t]!;
      const v = s >> PRECISION_BITS;
      row[i] = v < 0 ? 0 : v > 255 ? 255 : v;
    }
    emitRow(yy, row);
  }
}

/** The source is packed RGB of its stated size. */
export function checkRgbBytes(src: Uint8Array, width: number, height: number): void {
  if (src.byteLength !== width * height * 3) throw new RangeError(`expected ${width * height * 3} bytes of RGB for ${width}x${height}, got ${src.byteLength}`);
}

/**
 * Resize packed 8-bit RGB (`width * height * 3` bytes) to outW × outH exactly as Pillow
 * does, handing every output row to `emitRow` in order. Runs on the WebAssembly SIMD
 * kernels when they are available (resize-simd.ts), else on the JavaScript passes below;
 * both give the same bytes.
 */
export function resizeRgbInto(
  src: Uint8Array,
  width: number,
  height: number,
  outW: number,
  outH: number,
  emitRow: RowSink,
  window: OutputWindow = wholeOutput(outW, outH),
  filter: ResampleFilter = 'bicubic',
): void {
  checkRgbBytes(src, width, height);
  const k = simdKernels();
  if (k && resizeRgbIntoSimd(k, src, width, height, outW, outH, emitRow, window, filter)) return;
  resizeRgbIntoJs(src, width, height, outW, outH, emitRow, window, filter);
}

/**
 * The JavaScript passes: the fallback, and the second implementation the tests hold the
 * kernels to. With a `window`, only its rows and columns are computed; `emitRow(y, rgb)` gets
 * row y's pixels [x0, x1). `filter`: Pillow's BICUBIC unless said.
 */
export function resizeRgbIntoJs(
  src: Uint8Array,
  width: number,
  height: number,
  outW: number,
  outH: number,
  emitRow: RowSink,
  window: OutputWindow = wholeOutput(outW, outH),
  filter: ResampleFilter = 'bicubic',
): void {
  checkRgbBytes(src, width, height);
  const { x0, x1, y0, y1 } = window;
  const needH = outW !== width;
  const needV = outH !== height;
  const vert = needV ? resampleCoefficients(height, outH, y0, y1, filter) : undefined;
  // Without a horizontal pass the rows are the source's, whole: the window's columns are cut at emit.
  const rowWidth = needH ? x1 - x0 : width;
  const cut = needH ? (r: Uint8Array) => r : (r: Uint8Array) => r.subarray(x0 * 3, x1 * 3);
  let rows = src;
  let rowShift = 0;
  if (needH) {
    // Only the rows the vertical pass will read, as Pillow does.
    const first = vert ? vert.start[0]! : y0;
    const last = vert ? vert.start[y1 - y0 - 1]! + vert.count[y1 - y0 - 1]! : y1;
    rows = resizeHorizontal(src, width, last - first, first, x1 - x0, resampleCoefficients(width, outW, x0, x1, filter));
    rowShift = first;
  }
  if (vert) {
    resizeVertical(rows, rowWidth, y1 - y0, vert, rowShift, (yy, r) => emitRow(yy + y0, cut(r)));
    return;
  }
  const stride = rowWidth * 3;
  for (let y = y0; y < y1; y++) emitRow(y, cut(rows.subarray((y - rowShift) * stride, (y - rowShift + 1) * stride)));
}

/** Resize to a new packed RGB buffer (for tests, tools and callers that want the image). */
export function resizeRgb(
  src: Uint8Array,
  width: number,
  height: number,
  outW: number,
  outH: number,
  implementation: 'auto' | 'js' = 'auto',
  filter: ResampleFilter = 'bicubic',
): Uint8Array {
  const out = new Uint8Array(outW * outH * 3);
  (implementation === 'js' ? resizeRgbIntoJs : resizeRgbInto)(src, width, height, outW, outH, (y, rgb) => out.set(rgb, y * outW * 3), undefined, filter);
  return out;
}
