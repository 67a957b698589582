// torch's bicubic interpolate of a float32 plane (upsample_bicubic2d: a = −0.75, align_corners
// false, no antialias), bit for bit as its AVX2 CPU kernel computes it: Phi-3-vision's global
// image (phi3v.ts). Its two steps are apart so that a resize's rows can be summed as they come
// out (crop-writer.ts): each source row's four-column sums (rowSums), then each output row of
// four rows' sums (sumRows).
/**
 * torch's cubic interpolation weights and source indices along one axis (upsample_bicubic2d,
 * align_corners false: source = scale · (i + 0.5) − 0.5, a = −0.75, indices clamped to the
 * edge), every step in float32 as its CPU kernel computes them.
 */
export function torchCubicAxis(inSize: number, outSize: number): { index: Int32Array; weight: Float32Array } {
  const f = Math.fround;
  const A = -0.75;
  const scale = f(inSize / outSize);
  const conv1 = (x: number) => f(f(f(1.25 * x - 2.25) * x) * x + 1);
  const conv2 = (x: number) => f(f(f(A * x + 3.75) * x - 6) * x + 3);
  const index = new Int32Array(outSize * 4);
  const weight = new Float32Array(outSize * 4);
  for (let i = 0; i < outSize; i++) {
    const real = f(scale * f(i + 0.5) - 0.5);
    const at = Math.floor(real);
    const t = f(real - at);
    const x2 = f(1 - t);
    weight[i * 4] = conv2(f(t + 1));
    weight[i * 4 + 1] = conv1(t);
    weight[i * 4 + 2] = conv1(x2);
    weight[i * 4 + 3] = conv2(f(x2 + 1));
    for (let j = 0; j < 4; j++) index[i * 4 + j] = Math.max(Math.min(at - 1 + j, inSize - 1), 0);
  }
  return { index, weight };
}

/**
 * A float32 plane (`height` × `width`) resized to `outH` × `outW` by torch's bicubic
 * interpolate: per output value four rows' sums of four columns each, in float32, each product
 * added with one rounding (a fused multiply-add) in torch's order: torch's CPU kernel compiled
 * for AVX2 fuses them (that is the reference's arithmetic bit for bit; a build without fused
 * multiply-adds differs by a float32 ulp, docs/preprocessing.md). A float32 product is exact
 * in a double, so rounding `a * b + c` once is the fused multiply-add (up to a double rounding
 * of the sum that a tie would need: none in the reference's images). `sums` holds a row of
 * `outW` for each source row.
 */
export function torchBicubicPlane(src: Float32Array, height: number, width: number, outH: number, outW: number, into: Float32Array, sums: Float32Array): void {
  const sumRow = rowSummer(torchCubicAxis(width, outW));
  // A source row's four-column sums do not depend on the output row: each row read once (every
  // row of a downscaled image but for an odd scale's picks: rowsRead), then the rows' sums combined.
  const read = rowsRead(height, outH);
  for (let r = 0; r < height; r++) if (read[r]) sumRow(src, r * width, sums, r * outW);
  sumRows(sums, height, outH, outW, into);
}

/** Whether an output's taps are one source value (weights 0, 1, 0, 0: an odd integer scale puts every output on a source pixel's centre). */
const picks = (weight: Float32Array, k: number) => weight[k] === 0 && weight[k + 1] === 1 && weight[k + 2] === 0 && weight[k + 3] === 0;

/**
 * Which of `height` source rows sumRows reads for `outH` output rows: an output row's four,
 * or, where its taps are one row (picks: an odd integer scale), that row alone. The rows' sums
 * need only be made for these.
 */
export function rowsRead(height: number, outH: number): Uint8Array {
  const { index, weight } = torchCubicAxis(height, outH);
  const read = new Uint8Array(height);
  for (let k = 0; k < index.length; k += 4) {
    if (picks(weight, k)) read[index[k + 1]!] = 1;
    else for (let j = 0; j < 4; j++) read[index[k + j]!] = 1;
  }
  return read;
}

/**
 * Where every one of the `outH` output rows is one source row (picks: an odd integer scale),
 * the output row of each of the `height` source rows (−1: none); else undefined. Those rows'
 * sums are the output rows themselves, bit for bit (as rowSummer's picks).
 */
export function pickedRows(height: number, outH: number): Int32Array | undefined {
  const { index, weight } = torchCubicAxis(height, outH);
  const row = new Int32Array(height).fill(-1);
  for (let y = 0; y < outH; y++) {
    if (!picks(weight, y * 4)) return undefined;
    row[index[y * 4 + 1]!] = y;
  }
  return row;
}

/** Where every output's taps are one column (picks), those columns; else undefined. */
export function pickedColumns(axis: { index: Int32Array; weight: Float32Array }): Int32Array | undefined {
  const outW = axis.index.length / 4;
  for (let k = 0; k < axis.index.length; k += 4) if (!picks(axis.weight, k)) return undefined;
  return Int32Array.from({ length: outW }, (_, x) => axis.index[x * 4 + 1]!);
}

/**
 * A source row's four-column sums (the row at `from` of `src`, into `sums` from `to`), for
 * these taps: where every output's taps are one column (picks), that column's value, which is
 * the sum bit for bit as long as the source holds no −0 and no infinity or NaN (its products
 * with the zero weights are then zeros that leave the sum as it is): true of the level tables
 * (a positive std gives no −0) and of every sum of them; else rowSums. sumRows's picked rows,
 * and so torchBicubicPlane, ask the same of their input.
 */
export function rowSummer(axis: { index: Int32Array; weight: Float32Array }): (src: Float32Array, from: number, sums: Float32Array, to: number) => void {
  const { index, weight } = axis;
  const outW = index.length / 4;
  const column = pickedColumns(axis);
  if (!column) return (src, from, sums, to) => rowSums(src, from, index, weight, sums, to, outW);
  return (src, from, sums, to) => {
    for (let x = 0; x < outW; x++) sums[to + x] = src[from + column[x]!]!;
  };
}

/** The output rows from every source row's sums (`sums`: a row of `outW` for each of the `height` source rows) into `into`. */
export function sumRows(sums: Float32Array, height: number, outH: number, outW: number, into: Float32Array): void {
  const rows = torchCubicAxis(height, outH);
  const f = Math.fround;
  const ri = rows.index;
  const rw = rows.weight;
  for (let y = 0; y < outH; y++) {
    const k = y * 4;
    const a0 = ri[k]! * outW;
    const a1 = ri[k + 1]! * outW;
    const a2 = ri[k + 2]! * outW;
    const a3 = ri[k + 3]! * outW;
    const w0 = rw[k]!;
    const w1 = rw[k + 1]!;
    const w2 = rw[k + 2]!;
    const w3 = rw[k + 3]!;
    const at = y * outW;
    // One row's sums (an odd scale's pick: the same bits, as rowSummer's).
    if (picks(rw, k)) {
      into.set(sums.subarray(a1, a1 + outW), at);
      continue;
    }
    for (let x = 0; x < outW; x++) {
      const output = f(sums[a2 + x]! * w2 + f(sums[a0 + x]! * w0 + f(sums[a1 + x]! * w1)));
      into[at + x] = sums[a3 + x]! * w3 + output;
    }
  }
}

/** One source row's four-column sums (the row at `from` of `src`) into `sums` from `to`. */
export function rowSums(src: Float32Array, from: number, ci: Int32Array, cw: Float32Array, sums: Float32Array, to: number, outW: number): void {
  for (let x = 0, k = 0; x < outW; x++, k += 4) {
    const t = Math.fround(src[from + ci[k]!]! * cw[k]! + Math.fround(src[from + ci[k + 1]!]! * cw[k + 1]!));
    const u = Math.fround(src[from + ci[k + 2]!]! * cw[k + 2]! + t);
    sums[to + x] = src[from + ci[k + 3]!]! * cw[k + 3]! + u;
  }
}
