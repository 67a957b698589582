// One image's preprocessing, as run inside a pool thread: decode, then the family's processor
// (the fused Qwen-VL pipeline, or the CLIP crop), with the time of each stage; and, when the
// caller gives a sink, the encoder input written into it as it is computed (this module never
// opens a file: the sink's owner does).
import { preprocessClipShared } from './clip-image.ts';
import { preprocessAnyresShared } from './llava-next.ts';
import { preprocessLlama4Shared } from './llama4.ts';
import { preprocessInklingInBands, preprocessInklingRgb } from './inkling.ts';
import { preprocessMoonVitRgb, preprocessMoonVitWithKernels } from './moonvit.ts';
import { preprocessPhi3VisionShared } from './phi3v.ts';
import { decodeToRgb, MAX_DECODE_PIXELS, type Decoder } from './decode.ts';
import { decodeJpegShared } from './decode-shared.ts';
import {
  isAnyresConfig,
  isClipConfig,
  isLlama4Config,
  isInklingConfig,
  isMoonVitConfig,
  isPhi3VisionConfig,
  processorOf,
  type EncoderGeometry,
  type ImageConfig,
} from './families/index.ts';
import { preprocessRgb, preprocessRgbInBands, writeTimed, type BandHelper, type EncoderMemory, type TensorFileWrite } from './qwen-vl.ts';
import { errnoText } from '../util/errno.ts';

/**
 * The request's /dev/shm file for this image's encoder input in its wire encoding, written
 * as the bands are done (docs/transport.md, "Written while the image is preprocessed"): the
 * router created it (empty, O_EXCL, 0600: so it is the router's to unlink, whatever happens)
 * and counted its bytes. The pool thread's entry makes a sink of it (core/transport/prewrite-file.ts),
 * which runPreprocessTask opens once the image is decoded, writes and ends. On any failure the
 * result says why and the router removes the file and places the tensor as it would have
 * without this.
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

/** How the writing into a sink ended, as the image library tells it. */
export type SinkEnd =
  /** Every byte written, in this many microseconds (both bands' writes added). */
  | { kind: 'written'; micros: number }
  /** A write failed: the system call's error as errnoText says it (or a band thread's message). */
  | { kind: 'write-failed'; error: string }
  /** Nothing (more) written, for this reason, said to the router as it is. */
  | { kind: 'not-written'; reason: string };

/**
 * Where the encoder input also goes, in one wire encoding, as it is computed: given by the
 * caller (the pool thread's entry makes one of a task's `shm` file, core/transport/prewrite-file.ts).
 * runPreprocessTask opens it once the image is decoded, writes through its descriptor (from one
 * thread, or two when a helper takes a band: a descriptor crosses a MessagePort), and ends it
 * exactly once after a successful open: then it is closed, and says what became of it.
 */
export interface EncoderInputSink {
  readonly nbytes: number;
  readonly kind: 'float32' | 'bf16';
  /** Ready to be written: a descriptor any thread of the process may write to, or why not (said to the router as it is). */
  open(): { fd: number } | { error: string };
  /** No more writes: the sink closed, and what became of it. */
  end(how: SinkEnd): ShmPrewriteResult;
}

/** An image for a pool thread, as the pool posts it. */
export interface PreprocessTask {
  bytes: Uint8Array;
  config: ImageConfig;
  bf16: boolean;
  /** Produce float32 values too (default true); false when only bfloat16 travels. */
  float32?: boolean;
  /** Shared memory for the outputs and the resize, sized by the pool from the image header (reused across requests). */
  output?: EncoderMemory;
  /** The decoder refuses images above this many pixels, whatever their header said. */
  maxPixels?: number;
  /** Write the encoder input to this /dev/shm file too: the thread's entry makes the sink runPreprocessTask writes into of it. */
  shm?: ShmPrewriteTask;
}

export interface PreprocessResult extends EncoderGeometry {
  width: number;
  height: number;
  format: string;
  /** Which decoder gave the pixels (decode.ts). */
  decoder: Decoder;
  /** Threads that decoded the image: 2 for a lone JPEG a helper decoded with (decode-shared.ts). */
  decodeThreads: number;
  pixelValues?: Float32Array;
  bf16?: Uint16Array;
  /** Milliseconds: decode, and the processor's resize, rescale, normalize and layout (fused). */
  timings: { decode: number; preprocess: number };
  /** Threads that resized and scattered the image: 2 when a helper thread took half. */
  threads: number;
  /** The outputs are in the task's `output` memory (false: the decoded image did not fit it). */
  inOutput: boolean;
  /** Set when the task asked for a /dev/shm file. */
  shm?: ShmPrewriteResult;
}

export async function runPreprocessTask(task: Omit<PreprocessTask, 'shm'>, helper?: BandHelper, sink?: EncoderInputSink): Promise<PreprocessResult> {
  const t0 = performance.now();
  // Kimi-K3 flattens an image's alpha over its background: the decoder keeps it for that configuration alone.
  const keepAlpha = isMoonVitConfig(task.config) && task.config.transparent_bg !== undefined;
  // A lone JPEG with a helper thread: the two decode it together (decode-shared.ts); one the
  // native decoder declines is sharp's to decode or refuse.
  const decoding = (async () => {
    const shared = helper ? await decodeJpegShared(task.bytes, task.maxPixels ?? MAX_DECODE_PIXELS, helper) : null;
    if (shared === 'declined') return decodeToRgb(task.bytes, task.maxPixels, keepAlpha, null);
    return shared ?? decodeToRgb(task.bytes, task.maxPixels, keepAlpha);
  })();
  /** The sink while it is open: its descriptor and encoding, which the bands are written to. */
  let file: TensorFileWrite | undefined;
  let shm: ShmPrewriteResult | undefined;
  // The sink is ended (closed) before the result goes back; the router unlinks the file when it is not sent.
  const end = (how: SinkEnd) => {
    if (!file) return;
    file = undefined;
    shm = sink!.end(how);
  };
  const image = await decoding;
  // The decoded image's geometry, computed once when the sink check or the CLIP crop asks for it.
  let known: EncoderGeometry | undefined;
  const geometry = () => (known ??= processorOf(task.config).geometry(image.height, image.width));
  const t1 = performance.now();
  if (sink) {
    const opened = sink.open();
    if ('fd' in opened) file = { fd: opened.fd, kind: sink.kind };
    else shm = { written: false, error: opened.error };
  }
  let out: EncoderGeometry & { pixelValues?: Float32Array; bf16?: Uint16Array; memory?: EncoderMemory['memory']; written?: unknown; gridThw?: unknown };
  let split: Awaited<ReturnType<typeof preprocessRgbInBands>> = null;
  let threads = 1;
  try {
    // The sink takes exactly the encoder input of the decoded image, in its wire encoding.
    if (file && sink) {
      const g = geometry();
      if (g.patches * g.features * (sink.kind === 'float32' ? 4 : 2) !== sink.nbytes || (sink.kind === 'bf16' ? !task.bf16 : task.float32 === false))
        end({ kind: 'not-written', reason: PREWRITE_HEADER_MISMATCH });
    }
    const write = file;
    // Only the pool's memory, or the JavaScript passes in ordinary memory: a shared WebAssembly
    // memory made here would reach the main thread with the result, and V8 never frees those
    // once two threads have held them (shared-memory-arena.ts).
    const options = { bf16: task.bf16, float32: task.float32 !== false, allocate: false };
    const cfg = task.config;
    if (isClipConfig(cfg) || isAnyresConfig(cfg) || isMoonVitConfig(cfg) || isPhi3VisionConfig(cfg) || isLlama4Config(cfg) || isInklingConfig(cfg)) {
      // In the pool's memory when it has it: outputs and the working space, on the SIMD
      // kernels there, a lone image shared with the helper (the crop families' resizes, MoonViT's
      // and Inkling's patch rows); else on the JavaScript passes.
      const memory = task.output ? { memory: task.output } : {};
      const alpha = image.alpha ? { alpha: image.alpha } : {};
      const done = isClipConfig(cfg)
        ? await preprocessClipShared(image.rgb, image.width, image.height, cfg, { ...options, ...memory }, helper)
        : isAnyresConfig(cfg)
          ? await preprocessAnyresShared(image.rgb, image.width, image.height, cfg, { ...options, ...memory }, helper)
          : isPhi3VisionConfig(cfg)
            ? await preprocessPhi3VisionShared(image.rgb, image.width, image.height, cfg, { ...options, ...memory }, helper)
            : isLlama4Config(cfg)
              ? await preprocessLlama4Shared(image.rgb, image.width, image.height, cfg, { ...options, ...memory }, helper)
              : isInklingConfig(cfg)
                ? ((task.output && helper ? await preprocessInklingInBands(image.rgb, image.width, image.height, cfg, task.output, options, helper) : null) ??
                  preprocessInklingRgb(image.rgb, image.width, image.height, cfg, { ...options, ...memory }))
                : ((task.output
                    ? await preprocessMoonVitWithKernels(image.rgb, image.width, image.height, cfg, task.output, { ...options, ...alpha }, helper)
                    : null) ?? preprocessMoonVitRgb(image.rgb, image.width, image.height, cfg, { ...options, ...memory, ...alpha }));
      if ('threads' in done) threads = done.threads;
      out = {
        ...geometry(),
        ...(done.pixelValues ? { pixelValues: done.pixelValues } : {}),
        ...(done.bf16 ? { bf16: done.bf16 } : {}),
        ...(done.inMemory ? { memory: task.output!.memory } : {}),
      };
    } else {
      // With a helper and pooled memory, two threads take half of the image each (and each writes its half).
      split =
        helper && task.output
          ? await preprocessRgbInBands(image.rgb, image.width, image.height, cfg, task.output, { ...options, ...(write ? { write } : {}) }, helper)
          : null;
      out = split ?? preprocessRgb(image.rgb, image.width, image.height, cfg, { ...options, ...(task.output ? { into: task.output } : {}) });
    }
  } catch (err) {
    end({ kind: 'not-written', reason: 'preprocessing failed' });
    throw err;
  }
  if (file) {
    const target = file;
    let how: SinkEnd;
    if (split) {
      // Both bands are done (preprocessRgbInBands returns only then), so are their writes.
      how = split.written?.error ? { kind: 'write-failed', error: split.written.error } : { kind: 'written', micros: split.written?.micros ?? 0 };
    } else {
      try {
        const values = target.kind === 'float32' ? out.pixelValues! : out.bf16!;
        how = { kind: 'written', micros: writeTimed(target, new Uint8Array(values.buffer, values.byteOffset, values.byteLength), 0) };
      } catch (err) {
        // The write failed (ENOSPC when /dev/shm is full): the sink says so; the image itself is fine.
        how = { kind: 'write-failed', error: errnoText(err) };
      }
    }
    end(how);
  }
  const { memory, written: _written, gridThw: _gridThw, ...rest } = out;
  const t2 = performance.now();
  return {
    ...rest,
    width: image.width,
    height: image.height,
    format: image.format,
    decoder: image.decoder,
    decodeThreads: image.decodeThreads ?? 1,
    timings: { decode: t1 - t0, preprocess: t2 - t1 },
    threads: split ? 2 : threads,
    inOutput: memory !== undefined && memory === task.output?.memory,
    ...(shm ? { shm } : {}),
  };
}
