// Runs the WebAssembly SIMD resize kernels (resize.wat, compiled into core/gen/resize.wasm)
// with the coefficients of resize.ts: the same bytes as the JavaScript passes and as Pillow,
// several times faster (measured: docs/performance.md, "Where the comments' measurements went: transport and preprocessing").
//
// The module works in shared memory. A resize is planned once (coefficients and source
// pixels copied into the memory, every buffer laid out from a base offset) and then run as
// bands of output rows: one thread can run every band, or two threads holding instances on
// the same memory can each run one (the preprocessing pool does that for a lone image). Each
// band has its own intermediate and destination buffers, so the kernels' vector spill past a
// buffer's end never lands in rows another thread writes. Preprocessing plans into the memory
// that also holds the encoder input, so the scatter kernel writes the output in place; plain
// resizes use this thread's own memory, grown to the largest image seen and reused.
import { existsSync, readFileSync } from 'node:fs';
import {
  kernelSize,
  resampleCoefficients,
  sourceSpan,
  wholeOutput,
  type OutputWindow,
  type ResampleCoefficients,
  type ResampleFilter,
  type RowSink,
} from './resample.ts';

const WASM_PATH = new URL('../gen/resize.wasm', import.meta.url);

// The WebAssembly API, typed here: core is built without the DOM library that declares it.
export interface SharedWasmMemory {
  readonly buffer: SharedArrayBuffer;
  grow(pages: number): number;
}
interface WasmApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: unknown };
  Memory: new (descriptor: { initial: number; maximum: number; shared: true }) => SharedWasmMemory;
}
const wasm = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;
const SLACK = 16;
const PAGE = 65536;
/** The memory's declared maximum in resize.wat: 1 GiB. */
const MAX_PAGES = 16384;

export interface Kernels {
  memory: SharedWasmMemory;
  horizontal(src: number, inW: number, rows: number, dst: number, outW: number, pairs: number, starts: number, counts: number, vectors: number): void;
  vertical(src: number, stride: number, outH: number, dst: number, ksize: number, starts: number, counts: number, weights: number, rowShift: number): void;
  scatter(
    rowsPtr: number,
    stride: number,
    firstBlockRow: number,
    blockRows: number,
    outF: number,
    outB: number,
    kinds: number,
    P: number,
    m: number,
    F: number,
    T: number,
    gridW: number,
    rowStride: number,
    consts: number,
  ): void;
  /** `count` pixels of RGB bytes at `src` through the channels' level tables at `tables` (entries of `size` bytes: 4 or 2) to `dst` + c · `plane` + i · `step` (resize.wat). */
  levels(src: number, count: number, dst: number, plane: number, step: number, tables: number, size: number): void;
}

/** Bytes of the "levels" kernel's tables in a memory: float32 then bfloat16, 256 entries a channel. */
export const LEVEL_TABLES_BYTES = 3 * 256 * (4 + 2);

/** Where the bfloat16 tables start, past the float32 ones. */
export const BF16_TABLES_OFFSET = 3 * 256 * 4;

/** The "levels" kernel's tables into `memory` at `at`: each channel's float32 values of the 256 levels, then their bfloat16 bits. */
export function writeLevelTables(memory: SharedWasmMemory, at: number, levels: readonly Float32Array[], bf16Levels: readonly Uint16Array[]): void {
  levels.forEach((t, c) => new Float32Array(memory.buffer, at + c * 1024, 256).set(t.subarray(0, 256)));
  bf16Levels.forEach((t, c) => new Uint16Array(memory.buffer, at + BF16_TABLES_OFFSET + c * 512, 256).set(t.subarray(0, 256)));
}

/** A new shared memory of at least `bytes`, able to grow to the kernels' limit. */
export function newSharedMemory(bytes: number): SharedWasmMemory {
  return new wasm.Memory({ initial: Math.max(1, Math.ceil(bytes / PAGE)), maximum: MAX_PAGES, shared: true });
}

/** Bytes the kernels' memory can hold at most. */
export const MAX_KERNEL_BYTES = MAX_PAGES * PAGE;

let module: object | null | undefined;
let own: Kernels | null | undefined;

function compiled(): object | null {
  if (module !== undefined) return module;
  try {
    module = existsSync(WASM_PATH) ? new wasm.Module(readFileSync(WASM_PATH)) : null;
  } catch {
    module = null; // no WebAssembly SIMD or threads here
  }
  return module;
}

/** Kernels running on `memory` (an image's memory, possibly shared with another thread working on it). */
export function kernelsOn(memory: SharedWasmMemory): Kernels | null {
  const m = compiled();
  if (!m) return null;
  const exports = new wasm.Instance(m, { env: { memory } }).exports as Partial<Omit<Kernels, 'memory'>>;
  // A module generated before a kernel was added lacks it: no kernels then (the JavaScript passes run) rather than a call that throws.
  if (!exports.horizontal || !exports.vertical || !exports.scatter || !exports.levels) return null;
  return { memory, horizontal: exports.horizontal, vertical: exports.vertical, scatter: exports.scatter, levels: exports.levels };
}

/** This thread's kernels on its own memory, or null where WebAssembly SIMD or the generated module is unavailable. */
export function simdKernels(): Kernels | null {
  if (own !== undefined) return own;
  try {
    own = compiled() ? kernelsOn(newSharedMemory(PAGE)) : null;
  } catch {
    own = null; // no shared memory for the kernels (address space or memory limits): the JavaScript passes run
  }
  return own;
}

/** Whether the WebAssembly SIMD kernels can run in this process. */
export function simdAvailable(): boolean {
  return compiled() !== null;
}

interface CoefficientsAt {
  /** Weights per output pixel (vertical: taps; horizontal: tap pairs). */
  ksize: number;
  starts: number;
  counts: number;
  weights: number;
}

/** The horizontal kernel's coefficients: tap pairs, each weight split as hi · 2048 + lo (see resize.wat). */
interface PairCoefficients {
  pairs: number;
  start: Int32Array;
  count: Int32Array;
  vectors: Int16Array;
}

/** Source bytes R0 G0 B0 R1 G1 B1 as the 16-bit lanes R0 R1 G0 G1 B0 B1 0 0 (0x80: a zero byte). */
const PAIR_MASK = [0, 0x80, 3, 0x80, 1, 0x80, 4, 0x80, 2, 0x80, 5, 0x80, 0x80, 0x80, 0x80, 0x80];

function pairCoefficients(c: ResampleCoefficients): PairCoefficients {
  const n = c.start.length;
  const pairs = Math.ceil(c.ksize / 2);
  const count = new Int32Array(n);
  // The horizontal kernel's pair shuffle mask first (resize.wat), then the weights.
  const vectors = new Int16Array(8 + n * pairs * 16);
  new Uint8Array(vectors.buffer, 0, 16).set(PAIR_MASK);
  for (let x = 0; x < n; x++) {
    count[x] = Math.ceil(c.count[x]! / 2);
    for (let j = 0; j < count[x]!; j++) {
      const t = 2 * j;
      const w0 = c.weights[x * c.ksize + t]!;
      const w1 = t + 1 < c.count[x]! ? c.weights[x * c.ksize + t + 1]! : 0;
      const v = 8 + (x * pairs + j) * 16;
      for (let lane = 0; lane < 6; lane += 2) {
        vectors[v + lane] = w0 >> 11;
        vectors[v + lane + 1] = w1 >> 11;
        vectors[v + 8 + lane] = w0 & 2047;
        vectors[v + 8 + lane + 1] = w1 & 2047;
      }
    }
  }
  return { pairs, start: c.start, count, vectors };
}

/**
 * The coefficients of this thread's last resizes, by axis, filter, sizes and window: images of
 * one size (a camera's, a screen's) plan their resizes without computing them again (0.26 ms
 * for both axes of Phi-3-vision's 1080p resize, a loop of 200, warm). Read only; the eight most
 * recent axes kept, four two-pass resizes (a 1680-pixel axis's tap pairs take up to about 400 KB).
 */
const recentCoefficients = new Map<string, PairCoefficients | ResampleCoefficients>();
const RECENT_COEFFICIENTS = 8;

function coefficientsOf<C extends PairCoefficients | ResampleCoefficients>(key: string, make: () => C): C {
  let c = recentCoefficients.get(key) as C | undefined;
  if (c) recentCoefficients.delete(key);
  else c = make();
  recentCoefficients.set(key, c);
  if (recentCoefficients.size > RECENT_COEFFICIENTS) recentCoefficients.delete(recentCoefficients.keys().next().value!);
  return c;
}

/** Where one band's rows come from and go to, in the kernels' memory. */
export interface ResizeBand {
  /** Output rows [y0, y1). */
  y0: number;
  y1: number;
  /** Source rows [srcFirst, srcLast) the band reads. */
  srcFirst: number;
  srcLast: number;
  /** Horizontal-pass output (rows srcFirst..srcLast at outW), when there is a horizontal pass. */
  temp: number;
  /** Vertical-pass output (rows y0..y1), when there is a vertical pass. */
  dst: number;
}

/** A planned resize: plain numbers, so it can be posted to the thread running another band. */
export interface ResizePlan {
  width: number;
  height: number;
  outW: number;
  outH: number;
  /** The output columns and rows computed, [x0, x1) × [y0, y1) (all of them unless a window was asked for): the coefficients are the window's. */
  x0: number;
  x1: number;
  y0: number;
  src: number;
  horiz: CoefficientsAt | null;
  vert: CoefficientsAt | null;
  bands: ResizeBand[];
}

/**
 * Where every buffer of a resize goes, from sizes alone: no coefficient is computed, so the
 * pool can size an image's memory on the event loop in microseconds.
 */
function layoutResize(
  width: number,
  height: number,
  outW: number,
  outH: number,
  bandStarts: number[],
  base: number,
  window: OutputWindow = wholeOutput(outW, outH),
  filter: ResampleFilter = 'bicubic',
  sourceAt?: number,
): { plan: ResizePlan; end: number } {
  const needH = outW !== width;
  const needV = outH !== height;
  const edges = [window.y0, ...bandStarts.filter((y) => y > window.y0 && y < window.y1), window.y1];
  // The horizontal pass computes the window's columns; without one, rows are the source's, whole.
  const rowWidth = needH ? window.x1 - window.x0 : width;
  const stride = rowWidth * 3;
  let at = Math.ceil(base / 16) * 16;
  const take = (bytes: number) => {
    const offset = at;
    at += Math.ceil((bytes + SLACK) / 16) * 16;
    return offset;
  };
  const pairs = Math.ceil(kernelSize(width, outW, filter) / 2);
  const h = needH ? { ksize: pairs, starts: take(rowWidth * 4), counts: take(rowWidth * 4), weights: take(16 + rowWidth * pairs * 32) } : null;
  const vk = kernelSize(height, outH, filter);
  const rows = window.y1 - window.y0;
  const v = needV ? { ksize: vk, starts: take(rows * 4), counts: take(rows * 4), weights: take(rows * vk * 4) } : null;
  // The source pixels, unless another plan in this memory already holds them (at `sourceAt`).
  const srcAt = sourceAt ?? take(width * height * 3);
  const bands: ResizeBand[] = [];
  for (let b = 0; b + 1 < edges.length; b++) {
    const y0 = edges[b]!;
    const y1 = edges[b + 1]!;
    if (y1 <= y0) continue;
    const last = needV ? sourceSpan(height, outH, y1 - 1, filter) : undefined;
    const srcFirst = needV ? sourceSpan(height, outH, y0, filter).start : y0;
    const srcLast = last ? last.start + last.count : y1;
    const temp = needH ? take(stride * (srcLast - srcFirst)) : 0;
    const dst = needV ? take(stride * (y1 - y0)) : 0;
    bands.push({ y0, y1, srcFirst, srcLast, temp, dst });
  }
  return { plan: { width, height, outW, outH, x0: window.x0, x1: window.x1, y0: window.y0, src: srcAt, horiz: h, vert: v, bands }, end: at };
}

/** Bytes a planned resize occupies from `base` (to size a memory before planning into it). */
export function resizeBytes(
  width: number,
  height: number,
  outW: number,
  outH: number,
  bandStarts: number[] = [],
  base = 0,
  window: OutputWindow = wholeOutput(outW, outH),
  filter: ResampleFilter = 'bicubic',
  sourceAt?: number,
): number {
  return layoutResize(width, height, outW, outH, bandStarts, base, window, filter, sourceAt).end - base;
}

/**
 * Lay out a resize in the kernels' memory from byte `base` (growing the memory as needed)
 * and copy the source pixels and the coefficients in. `bandStarts` are the first output rows
 * of the bands after the first. With `sourceAt`, the source pixels are read where an earlier
 * plan in this memory copied the same image (`plan.src`), not copied again. Returns null when
 * the layout does not fit the memory's maximum or the memory cannot grow (the caller falls
 * back to the JavaScript passes).
 */
export function planResize(
  k: Kernels,
  src: Uint8Array,
  width: number,
  height: number,
  outW: number,
  outH: number,
  bandStarts: number[] = [],
  base = 0,
  window: OutputWindow = wholeOutput(outW, outH),
  filter: ResampleFilter = 'bicubic',
  sourceAt?: number,
): ResizePlan | null {
  const { plan, end } = layoutResize(width, height, outW, outH, bandStarts, base, window, filter, sourceAt);
  const pages = Math.ceil(end / PAGE);
  const have = k.memory.buffer.byteLength / PAGE;
  if (pages > MAX_PAGES) return null;
  try {
    if (pages > have) k.memory.grow(pages - have);
  } catch {
    return null; // the memory could not grow (address space or memory limits)
  }
  const mem = k.memory.buffer;
  const copy = (at: number, a: ArrayBufferView) => new Uint8Array(mem, at, a.byteLength).set(new Uint8Array(a.buffer, a.byteOffset, a.byteLength));
  if (plan.horiz) {
    const h = coefficientsOf(`h ${filter} ${width} ${outW} ${window.x0} ${window.x1}`, () =>
      pairCoefficients(resampleCoefficients(width, outW, window.x0, window.x1, filter)),
    );
    copy(plan.horiz.starts, h.start);
    copy(plan.horiz.counts, h.count);
    copy(plan.horiz.weights, h.vectors);
  }
  if (plan.vert) {
    const v = coefficientsOf(`v ${filter} ${height} ${outH} ${window.y0} ${window.y1}`, () => resampleCoefficients(height, outH, window.y0, window.y1, filter));
    copy(plan.vert.starts, v.start);
    copy(plan.vert.counts, v.count);
    copy(plan.vert.weights, v.weights);
  }
  if (sourceAt === undefined) copy(plan.src, src);
  return plan;
}

/**
 * Run band `index` of a plan, handing each finished output row to `emitRow` in order when
 * given. Returns where the band's rows are: row y at `at + (y - y0) * stride`.
 */
export function resizeBand(k: Kernels, plan: ResizePlan, index: number, emitRow?: RowSink): { at: number; stride: number } {
  const { width, horiz, vert } = plan;
  const band = plan.bands[index]!;
  // Rows of the window's columns after a horizontal pass; else the source's whole rows (cut at emit).
  const stride = (horiz ? plan.x1 - plan.x0 : width) * 3;
  const cut = horiz ? 0 : plan.x0 * 3;
  const rowBytes = (plan.x1 - plan.x0) * 3;
  // Where row y of the band's result sits: the source, the horizontal output or the vertical output.
  let image = plan.src;
  let firstRow = 0;
  if (horiz) {
    k.horizontal(
      plan.src + band.srcFirst * width * 3,
      width,
      band.srcLast - band.srcFirst,
      band.temp,
      plan.x1 - plan.x0,
      horiz.ksize,
      horiz.starts,
      horiz.counts,
      horiz.weights,
    );
    image = band.temp;
    firstRow = band.srcFirst;
  }
  if (vert) {
    const rows = band.y1 - band.y0;
    k.vertical(
      image,
      stride,
      rows,
      band.dst,
      vert.ksize,
      vert.starts + (band.y0 - plan.y0) * 4,
      vert.counts + (band.y0 - plan.y0) * 4,
      vert.weights + (band.y0 - plan.y0) * vert.ksize * 4,
      firstRow,
    );
    image = band.dst;
    firstRow = band.y0;
  }
  const at = image + (band.y0 - firstRow) * stride;
  if (emitRow) {
    const out = new Uint8Array(k.memory.buffer);
    for (let y = band.y0; y < band.y1; y++) {
      const rowAt = at + (y - band.y0) * stride + cut;
      emitRow(y, out.subarray(rowAt, rowAt + rowBytes));
    }
  }
  return { at, stride };
}

/** As resizeRgbInto, on the SIMD kernels in this thread; false when the image is too large for them. */
export function resizeRgbIntoSimd(
  k: Kernels,
  src: Uint8Array,
  width: number,
  height: number,
  outW: number,
  outH: number,
  emitRow: RowSink,
  window: OutputWindow = wholeOutput(outW, outH),
  filter: ResampleFilter = 'bicubic',
): boolean {
  const plan = planResize(k, src, width, height, outW, outH, [], 0, window, filter);
  if (!plan) return false;
  resizeBand(k, plan, 0, emitRow);
  return true;
}
