// A lone JPEG decoded by two threads (docs/performance.md, "JPEG decoding without libvips"):
// where the pool gave the image a helper thread and the native decoder is built, the lead
// decodes the top rows and the helper, at the same time, the rest. libjpeg cannot start in the
// middle of a file without restart markers, so the helper reads through the top rows' data
// without their IDCT (jpeg_skip_scanlines, about 58 % of their full cost) before decoding its
// own; the split row balances the two. Both write into one SharedArrayBuffer, which then is
// the image's RGB for the rest of the task. The helper stays the image's for its band after.
import { headerSize, type RgbImage } from './decode.ts';
import type { NativeJpeg } from './native-jpeg.ts';
import { nativeJpeg } from './native-jpeg.ts';
import { shareWithHelper, type BandHelper } from './qwen-vl.ts';

/** The rows [firstRow, endRow) of a JPEG, decoded by the helper into `rgb` (shared with the lead). */
export interface DecodeBandJob {
  kind: 'decode';
  bytes: Uint8Array;
  maxPixels: number;
  rgb: SharedArrayBuffer;
  firstRow: number;
  endRow: number;
}

/**
 * Below this many pixels one thread decodes alone: the post and the helper's skipped rows
 * cost about what the split saves.
 */
export const SHARED_DECODE_MIN_PIXELS = 1_000_000;

/**
 * The lead's share of the rows: it decodes them whole, the helper skips them and decodes the
 * rest (skipping costs ~0.58 of a decode: 1080p, 3.6 ms for the top 70 % against 3.2 for the
 * skip and the rest; the helper also starts a little later). Whole 16-row MCU rows.
 */
export function sharedDecodeSplit(height: number): number {
  return Math.max(16, Math.min(height - 16, Math.round((height * 0.68) / 16) * 16));
}

/**
 * The image decoded by this thread and `helper` together, or null when it is not for two:
 * not a JPEG, no native decoder, too small, over `maxPixels`, or anything the decoder leaves
 * to sharp (then the caller's decodeToRgb decodes or refuses it, as for one thread).
 */
export async function decodeJpegShared(
  bytes: Uint8Array,
  maxPixels: number,
  helper: BandHelper,
  jpeg: NativeJpeg | null = nativeJpeg(),
): Promise<RgbImage | null> {
  const size = headerSize(bytes);
  if (!jpeg || !size || bytes[0] !== 0xff || bytes[1] !== 0xd8) return null;
  const { width, height } = size;
  if (width * height < SHARED_DECODE_MIN_PIXELS || width * height > maxPixels || height < 64) return null;
  const rgb = new SharedArrayBuffer(width * height * 3);
  const into = new Uint8Array(rgb);
  const split = sharedDecodeSplit(height);
  const shared = new Uint8Array(new SharedArrayBuffer(bytes.byteLength));
  shared.set(bytes);
  const job: DecodeBandJob = { kind: 'decode', bytes: shared, maxPixels, rgb, firstRow: split, endRow: height };
  let decoded: { own: ReturnType<NativeJpeg['decode']>; other: unknown };
  try {
    decoded = await shareWithHelper(
      helper,
      job,
      // The helper failed (or went away): its rows decoded here.
      () => jpeg.decode(bytes, maxPixels, into, split, height),
      () => jpeg.decode(bytes, maxPixels, into, 0, split),
    );
  } catch {
    // A size the header promised and the file does not keep (the decoder refused the memory),
    // or the helper's decode refused the file: one thread decodes it, or sharp refuses it.
    return null;
  }
  const { own, other } = decoded;
  if (typeof own === 'string' || own.width !== width || own.height !== height) return null;
  if (typeof other === 'string') return null;
  return { width, height, rgb: into, format: 'jpeg', decoder: 'libjpeg-turbo' };
}

/** The helper's side: its rows, or an error naming why the decoder left the file (the lead then decides). */
export function runPostedDecodeBand(job: DecodeBandJob): undefined {
  const jpeg = nativeJpeg();
  if (!jpeg) throw new Error('the native JPEG decoder did not load on the helper thread');
  const done = jpeg.decode(job.bytes, job.maxPixels, new Uint8Array(job.rgb), job.firstRow, job.endRow);
  if (typeof done === 'string') throw new Error(`the JPEG's rows ${job.firstRow}..${job.endRow} were not decoded: ${done}`);
  return undefined;
}
