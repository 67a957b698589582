// Writing one image's crops, [crops, 3, H, W] in float32 and/or bfloat16, through per-channel
// level tables as a resize's rows come out: what LLaVA-NeXT's anyres crops (llava-next.ts) and
// Llama 4's tiles (llama4.ts) share. The outputs live in the pool's memory when it holds them
// (and the resize then runs on the SIMD kernels there), else in arrays of their own.
import { bf16LevelTables, memoryHolding, outputViews, type EncoderMemory } from './qwen-vl.ts';
import type { ResampleFilter } from './resample.ts';
import { resizeRgbInto, resizeRgbIntoJs } from './resize.ts';
import { kernelsOn, planResize, resizeBand } from './resize-simd.ts';

export interface CropWriter {
  pixelValues?: Float32Array;
  bf16?: Uint16Array;
  /** Whether the outputs are in the pool's memory. */
  inMemory: boolean;
  /** `count` pixels of `line` from pixel `from` into crop `index`'s row `y` from column `x`. */
  put(index: number, y: number, x: number, line: Uint8Array, from: number, count: number): void;
  /** Channel `c`'s values [from, to) of the outputs (whole-tensor offsets) set to the value of 8-bit level 0: black padding. */
  padBlack(c: number, from: number, to: number): void;
  /** The image resized to outW × outH by `filter`, each row handed to `row`. */
  resize(outW: number, outH: number, row: (y: number, line: Uint8Array) => void): void;
  /**
   * A row sink for an image resized into a canvas of tiles, placed at (top, left) in it: each
   * row's pixels go to the tiles they cross, crop `first` being the canvas's first tile and
   * `cols` tiles making a row; `resizedWidth` the resized image's width.
   */
  intoTiles(g: { top: number; left: number; cols: number; resizedWidth: number }, first: number): (y: number, line: Uint8Array) => void;
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
    bf16?: boolean;
    float32?: boolean;
    memory?: EncoderMemory;
    javascript?: boolean;
  },
): CropWriter {
  const T = o.cropHeight;
  const TW = o.cropWidth;
  const plane = T * TW;
  const crop = 3 * plane;
  const elements = o.crops * crop;
  const kinds = { float32: o.float32 !== false, bf16: o.bf16 === true };
  const memory = memoryHolding(o.memory, elements, kinds, o.bytes);
  const views = memory ? outputViews(memory, kinds) : {};
  const out = kinds.float32 ? (views.pixelValues ?? new Float32Array(elements)) : undefined;
  const bf = kinds.bf16 ? (views.bf16 ?? new Uint16Array(elements)) : undefined;
  const levels = o.levels;
  const bfLevels = bf16LevelTables(levels);
  const put = (index: number, y: number, x: number, line: Uint8Array, from: number, count: number) => {
    for (let c = 0; c < 3; c++) {
      const at = index * crop + c * plane + y * TW + x;
      if (out) {
        const table = levels[c]!;
        for (let i = 0; i < count; i++) out[at + i] = table[line[(from + i) * 3 + c]!]!;
      }
      if (bf) {
        const table = bfLevels[c]!;
        for (let i = 0; i < count; i++) bf[at + i] = table[line[(from + i) * 3 + c]!]!;
      }
    }
  };
  return {
    ...(out ? { pixelValues: out } : {}),
    ...(bf ? { bf16: bf } : {}),
    inMemory: memory !== undefined,
    put,
    padBlack: (c, from, to) => {
      out?.fill(levels[c]![0]!, from, to);
      bf?.fill(bfLevels[c]![0]!, from, to);
    },
    resize: (outW, outH, row) => {
      const kernels = memory && !o.javascript ? kernelsOn(memory.memory) : null;
      const plan = kernels ? planResize(kernels, rgb, width, height, outW, outH, [], memory!.scratchAt, undefined, o.filter) : null;
      if (kernels && plan) resizeBand(kernels, plan, 0, row);
      else (o.javascript ? resizeRgbIntoJs : resizeRgbInto)(rgb, width, height, outW, outH, row, undefined, o.filter);
    },
    intoTiles: (g, first) => (y, line) => {
      const py = g.top + y;
      const tileRow = Math.floor(py / T);
      for (let x = 0; x < g.resizedWidth;) {
        const px = g.left + x;
        const tileCol = Math.floor(px / TW);
        const count = Math.min(g.resizedWidth - x, (tileCol + 1) * TW - px);
        put(first + tileRow * g.cols + tileCol, py - tileRow * T, px - tileCol * TW, line, x, count);
        x += count;
      }
    },
  };
}
