// A lone JPEG decoded by two threads (docs/performance.md, "JPEG decoding without libvips"):
// where the pool gave the image a helper thread and the native decoder is built, the lead
// decodes the top rows and the helper, at the same time, the rest. libjpeg cannot start in the
// middle of a file without restart markers, so the helper reads through the top rows' data
// without their IDCT (jpeg_skip_scanlines, about 58 % of their full cost) before decoding its
// own; the split row balances the two. Both write into one SharedArrayBuffer, this thread's
// and reused image after image, which then holds the image's RGB for the rest of the task.
// The helper stays the image's for its band after.
import { jpegFrame, type RgbImage } from './decode.ts';
import { memTrim } from './memory-release.ts';
import { nativeJpeg, type NativeJpeg } from './native-jpeg.ts';
import { shareWithHelper, type BandHelper } from './qwen-vl.ts';

/**
 * The rows [firstRow, endRow) of a JPEG, decoded by the helper into `shared` (the lead's
 * buffer: the image's RGB rows from byte 0, the file's bytes at `bytesAt`).
 */
export interface DecodeBandJob {
  kind: 'decode';
  shared: SharedArrayBuffer;
  bytesAt: number;
  bytesLength: number;
  maxPixels: number;
  firstRow: number;
  endRow: number;
}

/**
 * Below this many pixels one thread decodes alone: the post and the helper's skipped rows
 * cost about what the split saves.
 */
export const SHARED_DECODE_MIN_PIXELS = 1_000_000;

/**
 * The most bytes of this thread's reused decode buffer (a 4K image and its file take 26 MB):
 * a larger image gets a buffer of its own, dropped with it. What the buffer keeps resident
 * between bursts goes back to the system when the pool is idle (releaseDecodeBuffer).
 */
export const DECODE_BUFFER_MAX_BYTES = 64 * 2 ** 20;

/**
 * This thread's buffer, reused: a new SharedArrayBuffer per image is zeroed and faulted in
 * anew, and is freed only once both threads' collectors have let go of it (measured: resident
 * memory grew from 309 to 566 MB over 60 lone 4K images, where it stays flat with this one).
 */
let reused: SharedArrayBuffer | undefined;

function decodeBuffer(bytes: number): SharedArrayBuffer {
  if (bytes > DECODE_BUFFER_MAX_BYTES) return new SharedArrayBuffer(bytes);
  if (!reused || reused.byteLength < bytes) reused = new SharedArrayBuffer(bytes);
  return reused;
}

/** Hand the reused buffer's pages back to the system (native/memtrim; the pool's idle trim): they read as zeros and fault in again when the next image uses them. */
export function releaseDecodeBuffer(): void {
  if (reused) memTrim()?.releasePages(new Uint8Array(reused));
}

/**
 * The lead's share of the rows: it decodes them whole, the helper skips them and decodes the
 * rest (skipping costs ~0.58 of a decode: at 1080p, 3.6 ms for the top 70 % against 3.2 for
 * the skip and the rest; the helper also starts a little later). Whole 16-row MCU rows.
 */
export function sharedDecodeSplit(height: number): number {
  return Math.max(16, Math.min(height - 16, Math.round((height * 0.68) / 16) * 16));
}

/**
 * The image decoded by this thread and `helper` together; null when it is not for two (not a
 * baseline or extended sequential JPEG — a progressive one is read whole by both threads
 * before either writes a row, so splitting it saves only the IDCT and doubles the memory —,
 * no native decoder, too small, over `maxPixels`, the helper failed); 'declined' when the
 * decoder leaves the file to sharp (a warning or an error: sharp then decodes or refuses it).
 */
export async function decodeJpegShared(
  bytes: Uint8Array,
  maxPixels: number,
  helper: BandHelper,
  jpeg: NativeJpeg | null = nativeJpeg(),
): Promise<RgbImage | 'declined' | null> {
  const frame = jpegFrame(bytes);
  if (!jpeg || !frame || (frame.marker !== 0xc0 && frame.marker !== 0xc1)) return null;
  const { width, height } = frame;
  if (width * height < SHARED_DECODE_MIN_PIXELS || width * height > maxPixels || height < 64) return null;
  const pixels = width * height * 3;
  const split = sharedDecodeSplit(height);
  let decoded: { own: ReturnType<NativeJpeg['decode']>; other: unknown; helped: boolean };
  let into: Uint8Array;
  try {
    const shared = decodeBuffer(pixels + bytes.byteLength);
    into = new Uint8Array(shared, 0, pixels);
    new Uint8Array(shared, pixels, bytes.byteLength).set(bytes);
    const job: DecodeBandJob = { kind: 'decode', shared, bytesAt: pixels, bytesLength: bytes.byteLength, maxPixels, firstRow: split, endRow: height };
    decoded = await shareWithHelper(
      helper,
      job,
      () => 'helper failed',
      () => jpeg.decode(bytes, maxPixels, into, 0, split),
    );
  } catch {
    // No memory for the buffer, or a size the header promised and the file does not keep
    // (the decoder refused `into`): one thread decodes it, or sharp refuses it.
    return null;
  }
  const { own, other, helped } = decoded;
  if (typeof own === 'string') return 'declined';
  if (!helped) return null;
  if (typeof other === 'string') return 'declined';
  if (own.width !== width || own.height !== height) return null;
  return { width, height, rgb: into, format: 'jpeg', decoder: 'libjpeg-turbo', decodeThreads: 2 };
}

/** The helper's side: its rows into the lead's buffer, or why the decoder left the file (a string, the lead's answer). */
export function runPostedDecodeBand(job: DecodeBandJob): undefined | string {
  const jpeg = nativeJpeg();
  if (!jpeg) throw new Error('the native JPEG decoder did not load on the helper thread');
  const bytes = new Uint8Array(job.shared, job.bytesAt, job.bytesLength);
  const done = jpeg.decode(bytes, job.maxPixels, new Uint8Array(job.shared, 0, job.bytesAt), job.firstRow, job.endRow);
  return typeof done === 'string' ? done : undefined;
}
