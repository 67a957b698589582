// One image's preprocessing, as run inside a pool thread: decode, then the fused Qwen-VL
// pipeline, with the time of each stage.
import { createHash } from 'node:crypto';
import { closeSync, constants, openSync, unlinkSync } from 'node:fs';
import { decodeToRgb } from './decode.ts';
import { fileWriteClock, patchGeometry, preprocessRgb, preprocessRgbInBands, writeAllAt, type BandHelper, type EncoderMemory, type PatchGeometry, type QwenVlImageConfig } from './qwen-vl.ts';

/**
 * The request's /dev/shm file for this image's encoder input in its wire encoding, written
 * here as the bands are done (docs/transport.md, "Writing a tensor"): the router named it and
 * counted its bytes; the thread creates it (O_CREAT|O_EXCL|O_NOFOLLOW, 0600) once the image is
 * decoded, each band's thread writes that band's rows at their offset, and the file is closed.
 * On any failure the file is removed and the router places the tensor as it would have
 * without this.
 */
export interface ShmPrewriteTask {
  path: string;
  nbytes: number;
  kind: 'float32' | 'bf16';
}

/** What became of the file: written whole, or not (and then removed). */
export type ShmPrewriteResult = { written: true; micros: number } | { written: false; error: string };

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
  /** SHA-256 of the encoded image bytes (the workers' content_hash / mm_hashes). */
  contentHash: Uint8Array;
  /** Milliseconds: decode, and resize+rescale+normalize+patchify (fused). */
  timings: { decode: number; preprocess: number };
  /** Threads that resized and scattered the image: 2 when a helper thread took half. */
  threads: number;
  /** The outputs are in the task's `output` memory (false: the decoded image did not fit it). */
  inOutput: boolean;
  /** Set when the task asked for a /dev/shm file. */
  shm?: ShmPrewriteResult;
}

/** Create the tensor's file, as the router's writer creates its files. */
function openPrewrite(shm: ShmPrewriteTask): { fd: number } {
  return { fd: openSync(shm.path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600) };
}

function errorText(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  return e?.code ? `${e.code}: ${e.message}` : String(e?.message ?? err);
}

export async function runPreprocessTask(task: PreprocessTask, helper?: BandHelper): Promise<PreprocessResult> {
  const t0 = performance.now();
  // sharp decodes on a libuv thread; the hash is computed here meanwhile.
  const decoding = decodeToRgb(task.bytes, task.maxPixels);
  const contentHash = createHash('sha256').update(task.bytes).digest();
  let file: { fd: number } | undefined;
  let shm: ShmPrewriteResult | undefined;
  const drop = (error: string) => {
    if (!file) return;
    closeSync(file.fd);
    file = undefined;
    try {
      unlinkSync(task.shm!.path);
    } catch {
      /* removed already (the request was cleaned up) */
    }
    shm = { written: false, error };
  };
  const image = await decoding;
  const t1 = performance.now();
  if (task.shm) {
    try {
      file = openPrewrite(task.shm);
    } catch (err) {
      shm = { written: false, error: `create ${task.shm.path}: ${errorText(err)}` };
    }
  }
  // The file holds exactly the encoder input of the decoded image, in its wire encoding.
  const wire = task.shm && file ? task.shm : undefined;
  if (wire) {
    const g = patchGeometry(image.height, image.width, task.config);
    if (g.patches * g.features * (wire.kind === 'float32' ? 4 : 2) !== wire.nbytes || (wire.kind === 'bf16' ? !task.bf16 : task.float32 === false)) drop('the decoded image does not match its header');
  }
  const write = file ? { fd: file.fd, kind: task.shm!.kind } : undefined;
  const clockAtStart = fileWriteClock.micros;
  // Only the pool's memory, or the JavaScript passes in ordinary memory: a shared WebAssembly
  // memory made here would reach the main thread with the result, and V8 never frees those
  // once two threads have held them (pool.ts, SharedMemoryArena).
  const options = { bf16: task.bf16, float32: task.float32 !== false, allocate: false };
  let out: ReturnType<typeof preprocessRgb>;
  let split: Awaited<ReturnType<typeof preprocessRgbInBands>> = null;
  try {
    // With a helper and pooled memory, two threads take half of the image each (and each writes its half).
    split = helper && task.output ? await preprocessRgbInBands(image.rgb, image.width, image.height, task.config, task.output, { ...options, ...(write ? { write } : {}) }, helper) : null;
    out = split ?? preprocessRgb(image.rgb, image.width, image.height, task.config, { ...options, ...(task.output ? { into: task.output } : {}) });
  } catch (err) {
    drop('preprocessing failed');
    throw err;
  }
  if (file && write) {
    try {
      if (!split) {
        const values = write.kind === 'float32' ? out.pixelValues! : out.bf16!;
        writeAllAt(file.fd, new Uint8Array(values.buffer, values.byteOffset, values.byteLength), 0);
      }
      closeSync(file.fd);
      // This thread's writes (a helper's band is written meanwhile, on its thread).
      shm = { written: true, micros: fileWriteClock.micros - clockAtStart };
      file = undefined;
    } catch (err) {
      drop(`write ${task.shm!.path}: ${errorText(err)}`);
    }
  }
  const { memory, ...rest } = out;
  const t2 = performance.now();
  return { ...rest, width: image.width, height: image.height, format: image.format, contentHash, timings: { decode: t1 - t0, preprocess: t2 - t1 }, threads: split ? 2 : 1, inOutput: memory !== undefined && memory === task.output?.memory, ...(shm ? { shm } : {}) };
}
