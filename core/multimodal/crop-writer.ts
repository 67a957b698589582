// Writing one image's crops, [crops, 3, H, W] in float32 and/or bfloat16, through per-channel
// level tables as a resize's rows come out: what LLaVA-1.5's CLIP crop (clip-image.ts),
// LLaVA-NeXT's anyres crops (llava-next.ts), Llama 4's tiles (llama4.ts) and Phi-3-vision's HD
// tiles (phi3v.ts) share. The outputs live in
// the pool's memory when it holds them (and the resizes and the table lookups then run on the
// SIMD kernels there, the tables copied in beside them), else in arrays of their own (and the
// lookups in JavaScript). In the pool's memory, with a helper thread, an image's resizes
// are split between two threads by their estimated cost (cropSplit): the helper runs a band of
// output rows of one of them (CropBandJob), this thread the rest; each writes its own rows.
import { f32ToBf16 } from '../transport/dtype.ts';
import { bf16LevelTables, memoryHolding, outputViews, shareWithHelper, type BandHelper, type EncoderMemory } from './qwen-vl.ts';
import { kernelSize, wholeOutput, type OutputWindow, type ResampleFilter, type RowSink } from './resample.ts';
import { resizeRgbInto, resizeRgbIntoJs } from './resize.ts';
import {
  BF16_TABLES_OFFSET,
  kernelsOn,
  LEVEL_TABLES_BYTES,
  planResize,
  resizeBand,
  resizeBytes,
  writeLevelTables,
  type Kernels,
  type ResizePlan,
  type SharedWasmMemory,
} from './resize-simd.ts';
import { pickedColumns, pickedRows, rowSummer, rowsRead, torchCubicAxis } from './torch-bicubic.ts';

/**
 * Where a resized image's rows land: a canvas of tiles, the resized image placed in it at
 * (top, left); `transposed`: the resize ran on the transposed image, so its row y is the
 * canvas's column top + y and its pixel x the canvas's row left + x.
 */
export interface TilePlacement {
  top: number;
  left: number;
  transposed?: boolean;
  /** Tiles in a canvas row. */
  cols: number;
  /** The resized image's width. */
  resizedWidth: number;
  /** The crop index of the canvas's first tile. */
  first: number;
}

/**
 * The resized image's rows as float32 values on the whole canvas (`height` × `width`), placed as
 * in the tiles: summed as they come out, each canvas row's four-column sums of torch's bicubic
 * interpolate toward `sumsWidth` columns (torch-bicubic.ts rowSummer) into `sums`, [3, height,
 * sumsWidth], for the rows an interpolate to `sumsHeight` rows reads (rowsRead); or, for a transposed placement (its rows come out as the canvas's columns),
 * written into the channel planes `hd`, [3, height, width], for the caller to sum once whole.
 */
export type CanvasPlanes = { width: number; height: number } & (
  | {
      sums: Float32Array;
      sumsWidth: number;
      sumsHeight: number;
      /**
       * The interpolate's output planes, [3, sumsHeight, sumsWidth], where each of its rows is
       * one source row (torch-bicubic.ts pickedRows: an odd integer scale): those rows' sums
       * are the output rows, written there instead of into `sums`.
       */
      output?: Float32Array;
      /** With `output`: its values rounded to bfloat16 (nearest even), [3, sumsHeight, sumsWidth], written with them. */
      outputBf16?: Uint16Array;
      /** In the pool's memory: byte offsets of each thread's row (3 · width float32), where the SIMD kernels write a row's values before it is summed. */
      rowsAt?: readonly [number, number];
    }
  | { hd: Float32Array }
);

/** One resize of the image, and where its rows go: crops, and the canvas planes when given. */
export interface CropResize {
  outW: number;
  outH: number;
  /** Only these output rows and columns are computed (a crop of the resized image: CLIP's); rows are numbered in the whole resized image. */
  window?: OutputWindow;
  place: TilePlacement;
  canvas?: CanvasPlanes;
}

/** A resize to one crop's own size, written whole into crop `index`. */
export const intoCrop = (index: number, width: number): TilePlacement => ({ top: 0, left: 0, cols: 1, resizedWidth: width, first: index });

/** The crops' shape and where they are in a shared memory: plain data, so a helper thread can write into them. */
export interface CropLayout {
  cropHeight: number;
  cropWidth: number;
  elements: number;
  f32At?: number;
  bf16At?: number;
  /** Per channel, the encoder value of each 8-bit level (float32). */
  levels: Float32Array[];
  /** Where the level tables are in the shared memory (writeLevelTables): the SIMD kernels write the crops there. */
  tablesAt?: number;
}

/**
 * The writers of crop rows and columns on the SIMD kernels (resize.wat "levels"): the rows come
 * out of the kernels' resize in the same memory as the outputs and the tables.
 */
function kernelPutters(k: Kernels, layout: CropLayout): { put: Put; putColumn: Put } {
  const TW = layout.cropWidth;
  const plane = layout.cropHeight * TW;
  const crop = 3 * plane;
  const { f32At, bf16At, tablesAt } = layout;
  const write = (step: number) => (index: number, y: number, x: number, line: Uint8Array, from: number, count: number) => {
    const src = line.byteOffset + from * 3;
    const at = index * crop + y * TW + x;
    if (f32At !== undefined) k.levels(src, count, f32At + at * 4, plane * 4, step * 4, tablesAt!, 4);
    if (bf16At !== undefined) k.levels(src, count, bf16At + at * 2, plane * 2, step * 2, tablesAt! + BF16_TABLES_OFFSET, 2);
  };
  return { put: write(1), putColumn: write(TW) };
}

/** Writes pixels into crops: `count` pixels of `line` from pixel `from` into crop `index`'s row `y` from column `x`. */
type Put = (index: number, y: number, x: number, line: Uint8Array, from: number, count: number) => void;

/**
 * The writers of crop rows and columns in JavaScript, for rows the JavaScript resize (or this
 * thread's own kernels, in another memory) hands over: a row's pixels one value apart, a
 * column's a crop row apart.
 */
function jsPutters(
  layout: CropLayout,
  out: Float32Array | undefined,
  bf: Uint16Array | undefined,
  bfLevels: readonly Uint16Array[],
): { put: Put; putColumn: Put } {
  const TW = layout.cropWidth;
  const plane = layout.cropHeight * TW;
  const crop = 3 * plane;
  const levels = layout.levels;
  const write =
    (step: number): Put =>
    (index, y, x, line, from, count) => {
      for (let c = 0; c < 3; c++) {
        const at = index * crop + c * plane + y * TW + x;
        if (out) {
          const table = levels[c]!;
          for (let i = 0; i < count; i++) out[at + i * step] = table[line[(from + i) * 3 + c]!]!;
        }
        if (bf) {
          const table = bfLevels[c]!;
          for (let i = 0; i < count; i++) bf[at + i * step] = table[line[(from + i) * 3 + c]!]!;
        }
      }
    };
  return { put: write(1), putColumn: write(TW) };
}

/** A row sink for a resize placed in a canvas of tiles: each row's pixels go to the tiles they cross (`put` for rows, `putColumn` for a transposed placement). */
function tileRows(put: Put, putColumn: Put, layout: Pick<CropLayout, 'cropHeight' | 'cropWidth'>, g: TilePlacement): RowSink {
  const T = layout.cropHeight;
  const TW = layout.cropWidth;
  if (g.transposed)
    return (y, line) => {
      const px = g.top + y;
      const tileCol = Math.floor(px / TW);
      for (let x = 0; x < g.resizedWidth;) {
        const py = g.left + x;
        const tileRow = Math.floor(py / T);
        const count = Math.min(g.resizedWidth - x, (tileRow + 1) * T - py);
        putColumn(g.first + tileRow * g.cols + tileCol, py - tileRow * T, px - tileCol * TW, line, x, count);
        x += count;
      }
    };
  return (y, line) => {
    const py = g.top + y;
    const tileRow = Math.floor(py / T);
    for (let x = 0; x < g.resizedWidth;) {
      const px = g.left + x;
      const tileCol = Math.floor(px / TW);
      const count = Math.min(g.resizedWidth - x, (tileCol + 1) * TW - px);
      put(g.first + tileRow * g.cols + tileCol, py - tileRow * T, px - tileCol * TW, line, x, count);
      x += count;
    }
  };
}

/** A row sink writing the canvas planes, or summing the rows, placed as `g` (after the tile sink: `tiles`, the float32 crops it writes). */
function canvasRows(
  levels: readonly Float32Array[],
  canvas: CanvasPlanes,
  g: TilePlacement,
  tiles: { out: Float32Array; layout: CropLayout } | undefined,
  simd: { k: Kernels; tablesAt: number; thread: 0 | 1 } | undefined,
): RowSink {
  const W = canvas.width;
  const plane = canvas.height * W;
  const [l0, l1, l2] = levels as [Float32Array, Float32Array, Float32Array];
  if ('hd' in canvas) {
    if (!g.transposed) throw new RangeError('canvas planes are written for a transposed placement only: sum the rows of another');
    const hd = canvas.hd;
    if (simd && hd.buffer === simd.k.memory.buffer)
      return (y, line) => simd.k.levels(line.byteOffset, g.resizedWidth, hd.byteOffset + (g.left * W + g.top + y) * 4, plane * 4, W * 4, simd.tablesAt, 4);
    return (y, line) => {
      for (let x = 0, at = g.left * W + g.top + y; x < g.resizedWidth; x++, at += W) {
        hd[at] = l0[line[x * 3]!]!;
        hd[plane + at] = l1[line[x * 3 + 1]!]!;
        hd[2 * plane + at] = l2[line[x * 3 + 2]!]!;
      }
    };
  }
  if (g.transposed) throw new RangeError("a transposed placement's rows are the canvas's columns: write them into planes, not sums");
  const { sums, sumsWidth: outW, sumsHeight: outH } = canvas;
  const columnTaps = torchCubicAxis(W, outW);
  const sumRow = rowSummer(columnTaps);
  const read = rowsRead(canvas.height, outH);
  const { top, left, resizedWidth: n } = g;
  const height = canvas.height;
  // Each read row's sums: its output row's, where the output rows are picks and written here; else its own row of sums.
  const outputRow = canvas.output ? pickedRows(height, outH) : undefined;
  const into = outputRow ? canvas.output! : sums;
  const channelAt = outputRow ? (c: number, r: number) => (c * outH + outputRow[r]!) * outW : (c: number, r: number) => (c * height + r) * outW;
  // One canvas row, a channel after another; the columns outside the resized image are not
  // read (the canvas is as wide as it). On the SIMD kernels, this thread's row in their memory.
  const rowsAt = simd && canvas.rowsAt ? canvas.rowsAt[simd.thread] : undefined;
  const rows = rowsAt !== undefined ? new Float32Array(simd!.k.memory.buffer, rowsAt, 3 * W) : new Float32Array(3 * W);
  const r0 = rows.subarray(0, W);
  const r1 = rows.subarray(W, 2 * W);
  const r2 = rows.subarray(2 * W);
  // With float32 tiles covering the canvas's width, the row is copied back from them (the tile
  // sink wrote it just before): cheaper than the level tables again.
  const T = tiles?.layout.cropHeight ?? 0;
  const TW = tiles?.layout.cropWidth ?? 0;
  const fromTiles = tiles && g.cols * TW === W ? tiles.out : undefined;
  // Picked columns read straight from the tiles (each one's place in a tile row: its tile's,
  // then its own), or else from the row's pixels through the level tables when the resized
  // image spans the canvas.
  const columns = pickedColumns(columnTaps);
  const columnAt = fromTiles ? columns?.map((col) => Math.floor(col / TW) * 3 * T * TW + (col % TW)) : undefined;
  const pixelAt = !fromTiles && left === 0 && n === W ? columns?.map((col) => col * 3) : undefined;
  const write = (r: number, line: Uint8Array) => {
    if (pixelAt) {
      for (let c = 0; c < 3; c++) {
        const table = levels[c]!;
        const to = channelAt(c, r);
        for (let x = 0; x < outW; x++) into[to + x] = table[line[pixelAt[x]! + c]!]!;
      }
      return;
    }
    if (fromTiles && columnAt) {
      const tileRow = Math.floor(r / T);
      const rowAt = (g.first + tileRow * g.cols) * 3 * T * TW + (r - tileRow * T) * TW;
      for (let c = 0; c < 3; c++) {
        const from = rowAt + c * T * TW;
        const to = channelAt(c, r);
        for (let x = 0; x < outW; x++) into[to + x] = fromTiles[from + columnAt[x]!]!;
      }
      return;
    }
    if (fromTiles) {
      const tileRow = Math.floor(r / T);
      for (let j = 0; j < g.cols; j++) {
        const at = (g.first + tileRow * g.cols + j) * 3 * T * TW + (r - tileRow * T) * TW;
        r0.set(fromTiles.subarray(at, at + TW), j * TW);
        r1.set(fromTiles.subarray(at + T * TW, at + T * TW + TW), j * TW);
        r2.set(fromTiles.subarray(at + 2 * T * TW, at + 2 * T * TW + TW), j * TW);
      }
    } else if (rowsAt !== undefined) simd!.k.levels(line.byteOffset, n, rowsAt + left * 4, W * 4, 4, simd!.tablesAt, 4);
    else
      for (let x = 0; x < n; x++) {
        r0[left + x] = l0[line[x * 3]!]!;
        r1[left + x] = l1[line[x * 3 + 1]!]!;
        r2[left + x] = l2[line[x * 3 + 2]!]!;
      }
    sumRow(r0, 0, into, channelAt(0, r));
    sumRow(r1, 0, into, channelAt(1, r));
    sumRow(r2, 0, into, channelAt(2, r));
  };
  const bf = outputRow ? canvas.outputBf16 : undefined;
  if (!bf)
    return (y, line) => {
      if (read[top + y]) write(top + y, line);
    };
  // The output row's bfloat16 too, on the thread that wrote it (not left to the lead).
  return (y, line) => {
    const r = top + y;
    if (!read[r]) return;
    write(r, line);
    for (let c = 0; c < 3; c++) {
      const at = channelAt(c, r);
      f32ToBf16(into.subarray(at, at + outW), new Uint8Array(bf.buffer, bf.byteOffset + at * 2, outW * 2));
    }
  };
}

/** Both sinks of a resize: its tiles, then its canvas planes when it has them. */
function resizeRows(
  put: Put,
  putColumn: Put,
  layout: CropLayout,
  r: Pick<CropResize, 'place' | 'canvas'>,
  out: Float32Array | undefined,
  simd?: { k: Kernels; thread: 0 | 1 },
): RowSink {
  const tiles = tileRows(put, putColumn, layout, r.place);
  if (!r.canvas) return tiles;
  const tablesAt = layout.tablesAt;
  const canvas = canvasRows(layout.levels, r.canvas, r.place, out && { out, layout }, simd && tablesAt !== undefined ? { ...simd, tablesAt } : undefined);
  return (y, line) => {
    tiles(y, line);
    canvas(y, line);
  };
}

/**
 * Estimated nanoseconds of a resize on the SIMD kernels with its rows written out: its
 * horizontal pass reads every source row's taps, its vertical pass every output pixel's, and
 * each output pixel's three values go through the level tables (the kernels' "levels"; fitted
 * to bench:preprocess's 1080p resizes: docs/performance.md, "Crops on two threads").
 */
function resizeCost(width: number, height: number, r: Pick<CropResize, 'outW' | 'outH' | 'window'>, filter: ResampleFilter): number {
  const w = windowOf(r);
  const columns = w.x1 - w.x0;
  const rows = w.y1 - w.y0;
  // The horizontal pass runs over the source rows the window's rows read (about its share of them).
  const taps = ((height * rows) / r.outH) * columns * kernelSize(width, r.outW, filter) + rows * columns * kernelSize(height, r.outH, filter);
  return 0.35 * taps + 3 * rows * columns;
}

const windowOf = (r: Pick<CropResize, 'outW' | 'outH' | 'window'>): OutputWindow => r.window ?? wholeOutput(r.outW, r.outH);

/**
 * How two threads share an image's resizes: the helper takes output rows [start, end) of
 * resize `index` (the costliest), about half of all the work; this thread the rest. Null when
 * there is nothing to share.
 */
export function cropSplit(width: number, height: number, resizes: readonly CropResize[], filter: ResampleFilter): { index: number; start: number } | null {
  if (resizes.length === 0) return null;
  const costs = resizes.map((r) => resizeCost(width, height, r, filter));
  const total = costs.reduce((a, b) => a + b, 0);
  let index = 0;
  for (let i = 1; i < costs.length; i++) if (costs[i]! > costs[index]!) index = i;
  const { y0, y1 } = windowOf(resizes[index]!);
  const rows = Math.round(((y1 - y0) * total) / 2 / costs[index]!);
  if (rows < 1 || (resizes.length === 1 && y1 - y0 < 2)) return null;
  return { index, start: Math.max(y0, y1 - rows) };
}

/** Where the helper's band starts (cropSplit), as a processor's bandStarts says it: none when one thread does the image (the pool then offers no helper). */
export function cropBandStarts(width: number, height: number, resizes: readonly CropResize[], filter: ResampleFilter): number[] {
  const split = cropSplit(width, height, resizes, filter);
  return split ? [split.start] : [];
}

/** The output rows where the bands after the first start, for resize `i` under `split`. */
const bandsOf = (split: { index: number; start: number } | null, i: number, r: CropResize): number[] =>
  split && split.index === i && split.start > windowOf(r).y0 ? [split.start] : [];

/**
 * Bytes of the crop writer's working space from `base`: the level tables, then the resizes
 * laid out one after the other for two threads (the source pixels once, the split resize in
 * two bands), as planCropResizes lays them out.
 */
export function cropResizesBytes(width: number, height: number, resizes: readonly CropResize[], base: number, filter: ResampleFilter): number {
  const split = cropSplit(width, height, resizes, filter);
  let at = base + LEVEL_TABLES_BYTES;
  resizes.forEach((r, i) => {
    at += resizeBytes(width, height, r.outW, r.outH, bandsOf(split, i, r), at, windowOf(r), filter, i === 0 ? undefined : 0);
  });
  return at - base;
}

/** The resizes planned from `base` as cropResizesBytes lays them out: null when one does not fit. */
function planCropResizes(
  k: Kernels,
  rgb: Uint8Array,
  width: number,
  height: number,
  resizes: readonly CropResize[],
  split: { index: number; start: number } | null,
  base: number,
  filter: ResampleFilter,
): ResizePlan[] | null {
  const plans: ResizePlan[] = [];
  let at = base;
  for (let i = 0; i < resizes.length; i++) {
    const r = resizes[i]!;
    const source = i === 0 ? undefined : plans[0]!.src;
    const plan = planResize(k, rgb, width, height, r.outW, r.outH, bandsOf(split, i, r), at, windowOf(r), filter, source);
    if (!plan) return null;
    plans.push(plan);
    at += resizeBytes(width, height, r.outW, r.outH, bandsOf(split, i, r), at, windowOf(r), filter, source);
  }
  return plans;
}

/** A band of one of an image's resizes, posted to a helper thread: plain data over the pool's shared memory. */
export interface CropBandJob {
  kind: 'crops';
  memory: SharedWasmMemory;
  layout: CropLayout;
  plan: ResizePlan;
  band: number;
  place: TilePlacement;
  /** The canvas planes (CanvasPlanes) by their byte offsets in the memory. */
  canvas?: { width: number; height: number } & (
    { sumsAt: number; sumsWidth: number; sumsHeight: number; outputAt?: number; outputBf16At?: number; rowsAt?: readonly [number, number] } | { hdAt: number }
  );
}

/** Run a band another thread posted (what a helper thread does). */
export function runPostedCropBand(job: CropBandJob): undefined {
  const kernels = kernelsOn(job.memory);
  if (!kernels) throw new Error('the helper thread has no WebAssembly SIMD kernels');
  if (job.layout.tablesAt === undefined) throw new Error("a crop band job without the level tables' place in the shared memory");
  const buffer = job.memory.buffer;
  const { layout, canvas: c } = job;
  const out = layout.f32At !== undefined ? new Float32Array(buffer, layout.f32At, layout.elements) : undefined;
  const canvas: CanvasPlanes | undefined =
    c &&
    ('hdAt' in c
      ? { width: c.width, height: c.height, hd: new Float32Array(buffer, c.hdAt, 3 * c.height * c.width) }
      : {
          width: c.width,
          height: c.height,
          sums: new Float32Array(buffer, c.sumsAt, 3 * c.height * c.sumsWidth),
          sumsWidth: c.sumsWidth,
          sumsHeight: c.sumsHeight,
          ...(c.outputAt !== undefined ? { output: new Float32Array(buffer, c.outputAt, 3 * c.sumsHeight * c.sumsWidth) } : {}),
          ...(c.outputBf16At !== undefined ? { outputBf16: new Uint16Array(buffer, c.outputBf16At, 3 * c.sumsHeight * c.sumsWidth) } : {}),
          ...(c.rowsAt ? { rowsAt: c.rowsAt } : {}),
        });
  const { put, putColumn } = kernelPutters(kernels, layout);
  resizeBand(
    kernels,
    job.plan,
    job.band,
    resizeRows(put, putColumn, layout, { place: job.place, ...(canvas ? { canvas } : {}) }, out, { k: kernels, thread: 1 }),
  );
  return undefined;
}

/** A resize's canvas planes by their byte offsets, for a job: null when they are not in `memory` (the job cannot be posted). */
function postedCanvas(canvas: CanvasPlanes, memory: SharedWasmMemory): CropBandJob['canvas'] | null {
  const values = 'hd' in canvas ? [canvas.hd] : [canvas.sums, ...(canvas.output ? [canvas.output] : []), ...(canvas.outputBf16 ? [canvas.outputBf16] : [])];
  if (values.some((v) => v.buffer !== memory.buffer)) return null;
  return 'hd' in canvas
    ? { width: canvas.width, height: canvas.height, hdAt: canvas.hd.byteOffset }
    : {
        width: canvas.width,
        height: canvas.height,
        sumsAt: canvas.sums.byteOffset,
        sumsWidth: canvas.sumsWidth,
        sumsHeight: canvas.sumsHeight,
        ...(canvas.output ? { outputAt: canvas.output.byteOffset } : {}),
        ...(canvas.outputBf16 ? { outputBf16At: canvas.outputBf16.byteOffset } : {}),
        ...(canvas.rowsAt ? { rowsAt: canvas.rowsAt } : {}),
      };
}

/**
 * A crop family's image, ready to run: its writer, its resizes, the padding beside them (the
 * values no resize writes) and what finishes it once they have run.
 */
export interface CropWork<R> {
  w: CropWriter;
  resizes: readonly CropResize[];
  padding?: () => void;
  finish: () => R;
}

/** The work on this thread. */
export function runCrops<R>(work: CropWork<R>): R {
  work.w.resizeEach(work.resizes, work.padding);
  return work.finish();
}

/** The work shared with `helper` where the pool's memory and kernels allow (resizeShared), and the threads that did it. */
export async function shareCrops<R>(work: CropWork<R>, helper: BandHelper | undefined): Promise<R & { threads: number }> {
  const threads = await work.w.resizeShared(work.resizes, helper, work.padding);
  return { ...work.finish(), threads };
}

/** An image's geometry with the crops a writer wrote: its outputs, and whether they are in the pool's memory. */
export function withCrops<G extends object>(
  g: G,
  w: Pick<CropWriter, 'pixelValues' | 'bf16' | 'inMemory'>,
): G & { pixelValues?: Float32Array; bf16?: Uint16Array; inMemory: boolean } {
  return { ...g, ...(w.pixelValues ? { pixelValues: w.pixelValues } : {}), ...(w.bf16 ? { bf16: w.bf16 } : {}), inMemory: w.inMemory };
}

export interface CropWriter {
  pixelValues?: Float32Array;
  bf16?: Uint16Array;
  /** Whether the outputs are in the pool's memory. */
  inMemory: boolean;
  /** Rows [r0, r1) × columns [c0, c1) of a canvas of tiles (`cols` a row, crop `first` its first) set to the value of 8-bit level `level`. */
  fillCanvas(g: Pick<TilePlacement, 'cols' | 'first'>, r0: number, r1: number, c0: number, c1: number, level: number): void;
  /** `alongside` (the padding: values no resize writes), then each resize in turn, on this thread, its rows written where it is placed. */
  resizeEach(resizes: readonly CropResize[], alongside?: () => void): void;
  /**
   * The resizes split with `helper` (cropSplit) when the outputs are in the pool's memory and
   * the kernels run there, `alongside` run here while the helper starts on its band; else
   * resizeEach. Resolves to the threads that wrote the crops.
   */
  resizeShared(resizes: readonly CropResize[], helper: BandHelper | undefined, alongside?: () => void): Promise<number>;
}

export function cropWriter(
  rgb: Uint8Array,
  width: number,
  height: number,
  o: {
    crops: number;
    cropHeight: number;
    cropWidth: number;
    /** Per channel, the encoder value of each 8-bit level (float32). */
    levels: Float32Array[];
    filter: ResampleFilter;
    /** Bytes of the pool's memory this image needs (its outputs and resizes): the memory is used only when it holds them. */
    bytes: number;
    /** Where the resizes' working space starts in the pool's memory (default: after the outputs). */
    resizeAt?: number;
    bf16?: boolean;
    float32?: boolean;
    memory?: EncoderMemory;
    javascript?: boolean;
  },
): CropWriter {
  const elements = o.crops * 3 * o.cropHeight * o.cropWidth;
  const kinds = { float32: o.float32 !== false, bf16: o.bf16 === true };
  const memory = memoryHolding(o.memory, elements, kinds, o.bytes);
  const views = memory ? outputViews(memory, kinds) : {};
  const out = kinds.float32 ? (views.pixelValues ?? new Float32Array(elements)) : undefined;
  const bf = kinds.bf16 ? (views.bf16 ?? new Uint16Array(elements)) : undefined;
  // The working space in the pool's memory: the level tables, then the resizes (cropResizesBytes).
  const base = memory ? (o.resizeAt ?? memory.scratchAt) : 0;
  const resizesAt = base + LEVEL_TABLES_BYTES;
  const layout: CropLayout = {
    cropHeight: o.cropHeight,
    cropWidth: o.cropWidth,
    elements,
    levels: o.levels,
    ...(memory && out ? { f32At: memory.f32At! } : {}),
    ...(memory && bf ? { bf16At: memory.bf16At! } : {}),
    ...(memory ? { tablesAt: base } : {}),
  };
  const bfLevels = bf16LevelTables(o.levels);
  if (memory) writeLevelTables(memory.memory, base, o.levels, bfLevels);
  const { put, putColumn } = jsPutters(layout, out, bf, bfLevels);
  // The SIMD kernels over the pool's memory, and their writers: once for the image.
  const k = memory && !o.javascript ? kernelsOn(memory.memory) : null;
  const simd = k ? kernelPutters(k, layout) : undefined;
  const resizeEach = (resizes: readonly CropResize[], alongside?: () => void) => {
    alongside?.();
    for (const r of resizes) {
      const plan = k ? planResize(k, rgb, width, height, r.outW, r.outH, [], resizesAt, windowOf(r), o.filter) : null;
      if (k && simd && plan) resizeBand(k, plan, 0, resizeRows(simd.put, simd.putColumn, layout, r, out, { k, thread: 0 }));
      else
        (o.javascript ? resizeRgbIntoJs : resizeRgbInto)(rgb, width, height, r.outW, r.outH, resizeRows(put, putColumn, layout, r, out), windowOf(r), o.filter);
    }
  };
  return {
    ...(out ? { pixelValues: out } : {}),
    ...(bf ? { bf16: bf } : {}),
    inMemory: memory !== undefined,
    fillCanvas: (g, r0, r1, c0, c1, level) => {
      const T = o.cropHeight;
      const TW = o.cropWidth;
      const plane = T * TW;
      for (let r = r0; r < r1; r++) {
        const tileRow = Math.floor(r / T);
        for (let x = c0; x < c1;) {
          const tileCol = Math.floor(x / TW);
          const count = Math.min(c1 - x, (tileCol + 1) * TW - x);
          const index = g.first + tileRow * g.cols + tileCol;
          for (let c = 0; c < 3; c++) {
            const at = (3 * index + c) * plane + (r - tileRow * T) * TW + (x - tileCol * TW);
            out?.fill(o.levels[c]![level]!, at, at + count);
            bf?.fill(bfLevels[c]![level]!, at, at + count);
          }
          x += count;
        }
      }
    },
    resizeEach,
    resizeShared: async (resizes, helper, alongside) => {
      const split = cropSplit(width, height, resizes, o.filter);
      const shared = resizes[split?.index ?? 0]?.canvas;
      const canvas = shared && memory ? postedCanvas(shared, memory.memory) : undefined;
      const plans = k && helper && split && canvas !== null ? planCropResizes(k, rgb, width, height, resizes, split, resizesAt, o.filter) : null;
      if (!k || !simd || !helper || !split || !plans) {
        resizeEach(resizes, alongside);
        return 1;
      }
      const helperBand = bandsOf(split, split.index, resizes[split.index]!).length;
      const job: CropBandJob = {
        kind: 'crops',
        memory: memory!.memory,
        layout,
        plan: plans[split.index]!,
        band: helperBand,
        place: resizes[split.index]!.place,
        ...(canvas ? { canvas } : {}),
      };
      const { helped } = await shareWithHelper(
        helper,
        job,
        () => runPostedCropBand(job),
        () => {
          alongside?.();
          resizes.forEach((r, i) => {
            if (i === split.index && helperBand === 0) return;
            resizeBand(k, plans[i]!, 0, resizeRows(simd.put, simd.putColumn, layout, r, out, { k, thread: 0 }));
          });
        },
      );
      return helped ? 2 : 1;
    },
  };
}
