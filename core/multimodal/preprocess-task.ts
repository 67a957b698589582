// One image's preprocessing, as run inside a pool thread: decode, then the fused Qwen-VL
// pipeline, with the time of each stage.
import { closeSync, constants, fstatSync, futimesSync, openSync } from 'node:fs';
import { decodeToRgb } from './decode.ts';
import {
  patchGeometry,
  preprocessRgb,
  preprocessRgbInBands,
  writeAllAt,
  type BandHelper,
  type EncoderMemory,
  type PatchGeometry,
  type QwenVlImageConfig,
} from './qwen-vl.ts';
import { errnoText } from '../transport/errno.ts';

/**
 * The request's /dev/shm file for this image's encoder input in its wire encoding, written
 * here as the bands are done (docs/transport.md, "Written while the image is preprocessed"):
 * the router created it (empty, O_EXCL, 0600: so it is the router's to unlink, whatever
 * happens here) and counted its bytes; the thread opens it once the image is decoded, each
 * band's thread writes that band's rows at their offset, and the file is closed. On any
 * failure the thread says why and the router removes the file and places the tensor as it
 * would have without this.
 */
export interface ShmPrewriteTask {
  path: string;
  nbytes: number;
  kind: 'float32' | 'bf16';
}

/** What became of the file: written whole and closed, or not (the router removes it). */
export type ShmPrewriteResult = { written: true; micros: number } | { written: false; error: string };

/** The error of a file not written because the decoded image is not the one its header described (the router sized the file from the header): no failure of the write. */
export const PREWRITE_HEADER_MISMATCH = 'the decoded image does not match its header';

export interface PreprocessTask {
  bytes: Uint8Array;
  config: QwenVlImageConfig;
  bf16: boolean;
  /** Produce float32 values too (default true); false when only bfloat16 travels. */
  float32?: boolean;
  /** Shared memory for the outputs and the resize, sized by the pool from the image header (reused across requests). */
  output?: EncoderMemory;
  /** The decoder refuses images above this many pixels, whatever their header said. */
  maxPixels?: number;
  /** Write the encoder input to this /dev/shm file too. */
  shm?: ShmPrewriteTask;
}

export interface PreprocessResult extends PatchGeometry {
  width: number;
  height: number;
  format: string;
  pixelValues?: Float32Array;
  bf16?: Uint16Array;
  gridThw: [number, number, number];
  /** Milliseconds: decode, and resize+rescale+normalize+patchify (fused). */
  timings: { decode: number; preprocess: number };
  /** Threads that resized and scattered the image: 2 when a helper thread took half. */
  threads: number;
  /** The outputs are in the task's `output` memory (false: the decoded image did not fit it). */
  inOutput: boolean;
  /** Set when the task asked for a /dev/shm file. */
  shm?: ShmPrewriteResult;
}

/**
 * Open the file the router created for the tensor (never through a symbolic link, never
 * creating one, never waiting on a FIFO), and touch it: its age, which the orphan sweep of a
 * router in another pid namespace judges, counts from now (the image may have queued).
 */
function openPrewrite(shm: ShmPrewriteTask): { fd: number } {
  const fd = openSync(shm.path, constants.O_WRONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const now = Date.now() / 1000;
    futimesSync(fd, now, now);
  } catch {
    /* its age stays its name's: still younger than any sweep removes */
  }
  return { fd };
}

/** Close a descriptor once, whatever happens (Linux frees it even when close fails). */
function closeOnce(file: { fd: number; closed?: boolean }): void {
  if (file.closed) return;
  file.closed = true;
  try {
    closeSync(file.fd);
  } catch {
    /* freed all the same */
  }
}

export async function runPreprocessTask(task: PreprocessTask, helper?: BandHelper): Promise<PreprocessResult> {
  const t0 = performance.now();
  const decoding = decodeToRgb(task.bytes, task.maxPixels);
  let file: { fd: number; closed?: boolean } | undefined;
  let shm: ShmPrewriteResult | undefined;
  // The file is closed before the result goes back; the router unlinks it when it is not sent.
  const drop = (error: string) => {
    if (!file) return;
    closeOnce(file);
    file = undefined;
    shm = { written: false, error };
  };
  const image = await decoding;
  const t1 = performance.now();
  if (task.shm) {
    try {
      file = openPrewrite(task.shm);
    } catch (err) {
      shm = { written: false, error: `open ${task.shm.path}: ${errnoText(err)}` };
    }
  }
  let out: ReturnType<typeof preprocessRgb>;
  let split: Awaited<ReturnType<typeof preprocessRgbInBands>>;
  try {
    // The file holds exactly the encoder input of the decoded image, in its wire encoding.
    if (file && task.shm) {
      const wire = task.shm;
      const g = patchGeometry(image.height, image.width, task.config);
      if (g.patches * g.features * (wire.kind === 'float32' ? 4 : 2) !== wire.nbytes || (wire.kind === 'bf16' ? !task.bf16 : task.float32 === false))
        drop(PREWRITE_HEADER_MISMATCH);
    }
    const write = file ? { fd: file.fd, kind: task.shm!.kind } : undefined;
    // Only the pool's memory, or the JavaScript passes in ordinary memory: a shared WebAssembly
    // memory made here would reach the main thread with the result, and V8 never frees those
    // once two threads have held them (pool.ts, SharedMemoryArena).
    const options = { bf16: task.bf16, float32: task.float32 !== false, allocate: false };
    // With a helper and pooled memory, two threads take half of the image each (and each writes its half).
    split =
      helper && task.output
        ? await preprocessRgbInBands(image.rgb, image.width, image.height, task.config, task.output, { ...options, ...(write ? { write } : {}) }, helper)
        : null;
    out = split ?? preprocessRgb(image.rgb, image.width, image.height, task.config, { ...options, ...(task.output ? { into: task.output } : {}) });
  } catch (err) {
    drop('preprocessing failed');
    throw err;
  }
  if (file) {
    const f = file;
    try {
      let micros: number;
      if (split) {
        // Both bands are done (preprocessRgbInBands returns only then), so are their writes.
        if (split.written?.error) throw Object.assign(new Error(split.written.error), { bandWrite: true });
        micros = split.written?.micros ?? 0;
      } else {
        const values = task.shm!.kind === 'float32' ? out.pixelValues! : out.bf16!;
        micros = writeAllAt(f.fd, new Uint8Array(values.buffer, values.byteOffset, values.byteLength), 0);
      }
      // Removed meanwhile (the request was cleaned up, or swept): not a file a worker can open.
      if (fstatSync(f.fd).nlink === 0) throw Object.assign(new Error('the file was removed while it was written'), { bandWrite: true });
      closeOnce(f);
      file = undefined;
      shm = { written: true, micros };
    } catch (err) {
      drop(`write ${task.shm!.path}: ${(err as { bandWrite?: boolean }).bandWrite ? (err as Error).message : errnoText(err)}`);
    }
  }
  const { memory, written: _written, ...rest } = out;
  const t2 = performance.now();
  return {
    ...rest,
    width: image.width,
    height: image.height,
    format: image.format,
    timings: { decode: t1 - t0, preprocess: t2 - t1 },
    threads: split ? 2 : 1,
    inOutput: memory !== undefined && memory === task.output?.memory,
    ...(shm ? { shm } : {}),
  };
}
