// Runs the WebAssembly SIMD resize kernels (resize.wat, compiled into core/gen/resize.wasm)
// with the coefficients of resize.ts: the same bytes as the JavaScript passes and as Pillow,
// about 4x faster. One module instance per thread; its memory grows to the largest image
// seen and is reused.
import { existsSync, readFileSync } from 'node:fs';
import { resampleCoefficients, type ResampleCoefficients, type RowSink } from './resize.ts';

const WASM_PATH = new URL('../gen/resize.wasm', import.meta.url);

// The WebAssembly API, typed here: core is built without the DOM library that declares it.
interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}
const wasm = (globalThis as unknown as { WebAssembly: { Module: new (bytes: Uint8Array) => object; Instance: new (module: object) => { exports: unknown } } }).WebAssembly;
const SLACK = 16;

interface Kernels {
  memory: WasmMemory;
  horizontal(src: number, inW: number, rows: number, dst: number, outW: number, ksize: number, starts: number, counts: number, weights: number): void;
  vertical(src: number, stride: number, outH: number, dst: number, ksize: number, starts: number, counts: number, weights: number, rowShift: number): void;
}

let kernels: Kernels | null | undefined;

/** The kernels, or null where WebAssembly SIMD or the generated module is unavailable. */
export function simdKernels(): Kernels | null {
  if (kernels !== undefined) return kernels;
  try {
    if (!existsSync(WASM_PATH)) return (kernels = null);
    const instance = new wasm.Instance(new wasm.Module(readFileSync(WASM_PATH)));
    kernels = instance.exports as unknown as Kernels;
  } catch {
    kernels = null;
  }
  return kernels;
}

/** Bump allocator over the module's memory, growing it as needed. */
function layout(k: Kernels, sizes: number[]): number[] {
  const offsets: number[] = [];
  let at = 0;
  for (const size of sizes) {
    offsets.push(at);
    at += Math.ceil((size + SLACK) / 16) * 16;
  }
  const need = at - k.memory.buffer.byteLength;
  if (need > 0) k.memory.grow(Math.ceil(need / 65536));
  return offsets;
}

function putCoefficients(mem: ArrayBuffer, c: ResampleCoefficients, [starts, counts, weights]: number[]): void {
  new Int32Array(mem, starts, c.start.length).set(c.start);
  new Int32Array(mem, counts, c.count.length).set(c.count);
  new Int32Array(mem, weights, c.weights.length).set(c.weights);
}

const coefficientBytes = (c: ResampleCoefficients | undefined) => (c ? [c.start.byteLength, c.count.byteLength, c.weights.byteLength] : [0, 0, 0]);

/** As resizeRgbInto, on the SIMD kernels. */
export function resizeRgbIntoSimd(k: Kernels, src: Uint8Array, width: number, height: number, outW: number, outH: number, emitRow: RowSink): void {
  const horiz = outW !== width ? resampleCoefficients(width, outW) : undefined;
  const vert = outH !== height ? resampleCoefficients(height, outH) : undefined;
  const first = vert ? vert.start[0]! : 0;
  const last = vert ? vert.start[outH - 1]! + vert.count[outH - 1]! : height;
  const rows = horiz ? last - first : height;
  const [hs, hc, hw, vs, vc, vw, srcAt, tempAt, dstAt] = layout(k, [
    ...coefficientBytes(horiz),
    ...coefficientBytes(vert),
    width * height * 3,
    horiz ? outW * rows * 3 : 0,
    vert ? outW * outH * 3 : 0,
  ]) as [number, number, number, number, number, number, number, number, number];
  const mem = k.memory.buffer;
  new Uint8Array(mem, srcAt, src.byteLength).set(src);
  let image = srcAt;
  let rowShift = 0;
  if (horiz) {
    putCoefficients(mem, horiz, [hs, hc, hw]);
    k.horizontal(srcAt + first * width * 3, width, rows, tempAt, outW, horiz.ksize, hs, hc, hw);
    image = tempAt;
    rowShift = first;
  }
  if (vert) {
    putCoefficients(mem, vert, [vs, vc, vw]);
    k.vertical(image, outW * 3, outH, dstAt, vert.ksize, vs, vc, vw, rowShift);
    image = dstAt;
  }
  const stride = outW * 3;
  const out = new Uint8Array(k.memory.buffer, image, stride * outH);
  for (let y = 0; y < outH; y++) emitRow(y, out.subarray(y * stride, (y + 1) * stride));
}
