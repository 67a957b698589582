// Preprocessing off the event loop: a pool of worker threads (one per core, at a lower
// scheduling priority), so the router keeps answering while images are decoded and resized.
// Tasks queue FIFO; image bytes go in by transfer. When an image starts with nothing queued
// behind it and another thread is free, that thread helps: each resizes and scatters half
// of the image (bands of whole merge-block rows), so a lone request's image is ready in
// about half the time. Under load every thread takes whole images.
//
// Each image is worked on in shared WebAssembly memory the pool owns and reuses: the image
// header gives the geometry before decoding, so the pool hands the thread a memory of the
// right size class for the encoder outputs plus the resize's working space (where the
// kernels write the outputs in place), and the caller gives it back with release(). Fresh
// 20-200 MB buffers per image would cost their page faults every time (on this kind of VM,
// touching fresh memory costs more than the work done in it) and, on the main thread,
// garbage-collection pauses for the external memory; reused ones cost neither.
//
// Memory is bounded by one budget for all requests (preprocess_memory_bytes): what
// preprocessing keeps resident, its arena of shared memories (used or kept for reuse) plus
// the decoders' buffers of the images being processed, stays within it. An image's share
// (from its header) is taken when a thread starts on it, not while it waits in the queue; an
// image waits at the head of the queue until its share fits. An image that could never fit is
// refused before it queues (ImageMemoryError). After IDLE_TRIM_MS without work the kept
// memories' pages go back to the system, so a burst does not keep its memory.
import { readdirSync } from 'node:fs';
import os from 'node:os';
import { MessageChannel, type MessagePort, Worker } from 'node:worker_threads';
import sharp, { type Metadata } from 'sharp';
import { headerSize, ImageDecodeError } from './decode.ts';
import type { PreprocessResult, PreprocessTask } from './preprocess-task.ts';
import { bandStarts, encoderMemoryBytes, encoderMemoryIn, ImageSizeError, patchGeometry, type EncoderMemory, type PatchGeometry } from './qwen-vl.ts';
import { memTrim } from './memory-release.ts';
import { MAX_KERNEL_BYTES, newSharedMemory, type SharedWasmMemory } from './resize-simd.ts';
import { formatBytes } from '../util/bytes.ts';

/**
 * Lower every thread of this process but the main one to nice 10 (Linux; elsewhere a no-op).
 * Decoding runs on libuv's thread pool (sharp queues its work there), not only on our pool
 * threads, and on a 2-core machine those threads would otherwise preempt the event loop for
 * several milliseconds at a time. Threads start lazily, so this runs again as work completes.
 */
export function favourEventLoop(): void {
  if (process.platform !== 'linux') return;
  try {
    for (const tid of readdirSync('/proc/self/task')) {
      const id = Number(tid);
      if (id !== process.pid && os.getPriority(id) < 10) os.setPriority(id, 10);
    }
  } catch {
    /* not permitted, or a thread ended while we looked: keep what we have */
  }
}

/** A result whose output memory goes back to the pool on release(). */
export type PooledPreprocessResult = PreprocessResult & { release(): void };

/** An image whose preprocessing needs more memory than the whole budget: never started. */
export class ImageMemoryError extends Error {
  override readonly name = 'ImageMemoryError';
}

/** The pool lets its kept memories go after this long without work. */
export const IDLE_TRIM_MS = 15_000;
/** How long the threads get for their own full collection before the heap is trimmed. */
const THREAD_TRIM_GRACE_MS = 1000;

/** What an image holds while it is processed: its shared memory (until released) and the decoder's buffers (until its result). */
interface MemoryCost {
  shared: number;
  transient: number;
}

export interface ImageHeader {
  width: number;
  height: number;
  geometry: PatchGeometry;
}

/**
 * The pool's shared WebAssembly memories: an arena that only grows, up to a cap. V8 never
 * frees a shared WebAssembly.Memory once another thread has received it (the worker threads
 * and this one all hold it in their wasm engines; measured: ten 32 MiB memories stay resident
 * after both threads drop them, collect, and the worker exits). So memories are never let go
 * here: they are kept and reused (best fit, by size; grown in place when none fits), and the
 * arena stops growing at its cap, beyond which an image is processed with the JavaScript
 * passes in ordinary memory. After a burst, releasePages() hands the free memories' pages
 * back to the system (native/memtrim; where it is not built, the arena stays resident but
 * bounded by the cap).
 */
class SharedMemoryArena {
  private readonly free: SharedWasmMemory[] = [];
  /** Bytes of every memory created (they are never freed). */
  created = 0;
  /** Bytes of the memories not in use. */
  pooled = 0;

  constructor(public cap: number) {}

  static sizeClass(bytes: number): number {
    const exact = 2 ** (Math.ceil(4 * Math.log2(Math.max(bytes, 1 << 20))) / 4);
    return Math.ceil(exact / 65536) * 65536;
  }

  /** Whether a free memory already holds `bytes` (taking it grows nothing). */
  fitsFree(bytes: number): boolean {
    return this.free.some((m) => m.buffer.byteLength >= bytes);
  }

  /** A memory of at least `bytes`, or undefined when the arena is at its cap and none fits. */
  acquire(bytes: number): SharedWasmMemory | undefined {
    // Best fit: the smallest free memory that is large enough; of equals, the one given back
    // last (its pages are the likeliest to be resident still).
    let best = -1;
    for (let i = this.free.length - 1; i >= 0; i--) {
      const size = this.free[i]!.buffer.byteLength;
      if (size >= bytes && (best < 0 || size < this.free[best]!.buffer.byteLength)) best = i;
    }
    if (best >= 0) return this.take(best);
    const cls = SharedMemoryArena.sizeClass(bytes);
    if (this.created + cls <= this.cap) {
      this.created += cls;
      return newSharedMemory(cls);
    }
    // Grow the largest free memory in place, if the arena can take the difference.
    let largest = -1;
    for (let i = 0; i < this.free.length; i++) if (largest < 0 || this.free[i]!.buffer.byteLength > this.free[largest]!.buffer.byteLength) largest = i;
    if (largest >= 0) {
      const size = this.free[largest]!.buffer.byteLength;
      if (this.created + cls - size <= this.cap) {
        const memory = this.take(largest);
        memory.grow((cls - size) / 65536);
        this.created += cls - size;
        return memory;
      }
    }
    return undefined;
  }

  private take(i: number): SharedWasmMemory {
    const [memory] = this.free.splice(i, 1);
    this.pooled -= memory!.buffer.byteLength;
    return memory!;
  }

  /** A memory back for reuse (an image may have grown it: its new size counts). */
  release(memory: SharedWasmMemory, sizeWhenTaken: number): void {
    const size = memory.buffer.byteLength;
    this.created += size - sizeWhenTaken;
    this.pooled += size;
    this.free.push(memory);
  }

  /** Hand the free memories' pages back to the system; returns the bytes released. */
  releasePages(): number {
    const native = memTrim();
    if (!native) return 0;
    let released = 0;
    for (const memory of this.free) released += native.releasePages(new Uint8Array(memory.buffer));
    return released;
  }
}

interface Pending {
  task: PreprocessTask;
  header: ImageHeader | undefined;
  cost: MemoryCost;
  /** Bytes taken from the budget when a thread started on it (0 while queued). */
  taken: number;
  /** Size of its arena memory when it got it (an image may grow it). */
  outputSize: number;
  resolve: (r: PreprocessResult) => void;
  reject: (e: Error) => void;
}

const ERROR_TYPES: Record<string, new (message: string) => Error> = { ImageDecodeError, ImageSizeError };

export class PreprocessPool {
  private readonly idle: Worker[] = [];
  private readonly all: Worker[] = [];
  private readonly queue: Pending[] = [];
  /** Threads at work: on an image (job), or helping the thread `lead` with one. */
  private readonly running = new Map<Worker, { id: number; job: Pending; helper?: Worker } | { lead: Worker }>();
  private nextId = 1;
  private closed = false;
  /** favourEventLoop() runs after each of the first completions, while helper threads appear. */
  private deprioritizeRounds = 16;
  private readonly shared: SharedMemoryArena;
  private budget: number;
  /** Bytes taken by images being processed and by results not yet released. */
  private inUse = 0;
  /** Of those, the decoders' buffers of images being processed. */
  private transientInUse = 0;
  private trimTimer: NodeJS.Timeout | undefined;

  /**
   * One thread per core. The threads run at nice 10, so the event loop (nice 0) still gets a
   * core within milliseconds when all of them are busy.
   */
  private readonly onIdle: (() => void) | undefined;
  private readonly idleTrimMs: number;
  /** A request came (stillBusy) since the idle trim began: the router's collection is not run. */
  private busySinceTrim = false;
  /** Times the kept memory was let go after a quiet spell. */
  private idleTrims = 0;

  constructor(
    readonly size = Math.max(1, os.availableParallelism()),
    options: { memoryBytes?: number; onIdle?: () => void; idleTrimMs?: number } = {},
  ) {
    this.budget = options.memoryBytes ?? 1024 * 1024 * 1024;
    this.idleTrimMs = options.idleTrimMs ?? IDLE_TRIM_MS;
    this.shared = new SharedMemoryArena(this.budget);
    this.onIdle = options.onIdle;
  }

  /** The memory budget; a lower one applies to images that start from now on (the arena never shrinks). */
  setMemoryBudget(bytes: number): void {
    this.budget = bytes;
    this.shared.cap = Math.max(this.shared.cap, bytes);
    this.pump();
  }

  /** Memory in use, kept for reuse, the arena's size and what is resident by the budget's rule (for metrics and tests). */
  memory(): { budget: number; inUse: number; pooled: number; arena: number; resident: number; idleTrims: number } {
    return {
      budget: this.budget,
      inUse: this.inUse,
      pooled: this.shared.pooled,
      arena: this.shared.created,
      resident: this.shared.created + this.transientInUse,
      idleTrims: this.idleTrims,
    };
  }

  /**
   * A request the router serves without the pool (a pixel-cache hit, a text-only chat): the
   * router is not idle, so the idle trim (and the router's low-memory collection after it,
   * 55-200 ms of the event loop) waits IDLE_TRIM_MS from now instead of landing mid-traffic.
   */
  stillBusy(): void {
    this.trimTimer?.refresh();
    this.busySinceTrim = true;
  }

  private take(bytes: number): void {
    this.inUse += bytes;
    if (this.trimTimer) clearTimeout(this.trimTimer);
    this.trimTimer = undefined;
  }

  private give(bytes: number): void {
    this.inUse -= bytes;
    if (this.inUse <= 0 && this.running.size === 0 && this.queue.length === 0 && this.shared.pooled > 0) this.armIdleTrim();
    this.pump();
  }

  private armIdleTrim(): void {
    if (this.trimTimer || this.closed) return;
    this.trimTimer = setTimeout(() => {
      this.trimTimer = undefined;
      this.trimIdle();
    }, this.idleTrimMs);
    this.trimTimer.unref();
  }

  /** After a burst: let every kept memory go, and have the threads collect theirs. */
  private trimIdle(): void {
    if (this.inUse > 0 || this.running.size > 0) return;
    this.busySinceTrim = false;
    this.idleTrims += 1;
    this.shared.releasePages();
    for (const w of this.idle) w.postMessage({ trim: true });
    // The threads' collections free what they held into malloc's heap, which is process-wide:
    // onIdle (the router's full collection and heap trim) runs once they have had time to,
    // if preprocessing is still idle by then.
    const later = setTimeout(() => {
      if (this.inUse > 0 || this.running.size > 0 || this.closed) return;
      // A request meanwhile: not idle after all; the collection waits for a quiet spell again.
      if (this.busySinceTrim) this.armIdleTrim();
      else this.onIdle?.();
    }, THREAD_TRIM_GRACE_MS);
    later.unref();
  }

  private spawn(): Worker {
    const worker = new Worker(new URL('./preprocess-worker.mjs', import.meta.url));
    worker.on('message', (msg: { id: number; result?: PreprocessResult; error?: { name: string; message: string } }) => {
      const current = this.running.get(worker);
      if (!current || !('job' in current) || current.id !== msg.id) return;
      this.running.delete(worker);
      if (msg.error) {
        const Type = ERROR_TYPES[msg.error.name] ?? Error;
        current.job.reject(new Type(msg.error.message));
      } else current.job.resolve(msg.result!);
      if (this.deprioritizeRounds > 0) {
        this.deprioritizeRounds -= 1;
        favourEventLoop();
      }
      // The lead has its helper's answer before it answers, so the helper is free too.
      if (current.helper && this.running.delete(current.helper)) this.idle.push(current.helper);
      this.idle.push(worker);
      this.pump();
    });
    worker.on('error', (err) => {
      const current = this.running.get(worker);
      this.running.delete(worker);
      this.all.splice(this.all.indexOf(worker), 1);
      // A helper's lead notices the closed port and runs the band itself.
      if (current && 'job' in current) {
        current.job.reject(new Error(`preprocessing thread failed: ${err.message}`));
        if (current.helper && this.running.delete(current.helper)) this.idle.push(current.helper);
      }
      this.pump();
    });
    worker.unref();
    this.all.push(worker);
    return worker;
  }

  private freeThread(): Worker | undefined {
    return this.idle.pop() ?? (this.all.length < this.size ? this.spawn() : undefined);
  }

  private pump(): void {
    while (this.queue.length > 0) {
      const head = this.queue[0]!;
      // FIFO: the head waits until its memory fits (nothing overtakes it, so nothing starves).
      const cost = head.cost.shared + head.cost.transient;
      // What preprocessing keeps resident: the arena (used or free: it never shrinks) and the
      // decoders' buffers of running images. The head starts when its share fits the budget.
      const grows = this.shared.fitsFree(head.cost.shared) ? 0 : head.cost.shared;
      if (this.running.size > 0 && this.shared.created + this.transientInUse + grows + head.cost.transient > this.budget) return;
      const worker = this.freeThread();
      if (!worker) return;
      const job = this.queue.shift()!;
      this.take(cost);
      job.taken = cost;
      this.transientInUse += head.cost.transient;
      const output = this.outputFor(job.task, job.header);
      job.task = output ? { ...job.task, output } : job.task;
      job.outputSize = output?.memory.buffer.byteLength ?? 0;
      const id = this.nextId++;
      const transfer: Array<ArrayBuffer | MessagePort> = [job.task.bytes.buffer as ArrayBuffer].filter((b) => b.byteLength === job.task.bytes.byteLength);
      // Nothing waiting behind this image, its output is shared and its header promises at
      // least two merge-block rows (the bands are whole block rows): let a free thread help.
      // (A helper polls while it waits: one the image could not use would spin for nothing.)
      const splittable = job.header !== undefined && bandStarts(job.header.geometry, job.task.config, 2).length > 0;
      const helper = this.queue.length === 0 && job.task.output && splittable ? this.freeThread() : undefined;
      let port: MessagePort | undefined;
      if (helper) {
        const channel = new MessageChannel();
        port = channel.port1;
        transfer.push(port);
        this.running.set(helper, { lead: worker });
        helper.ref();
        helper.postMessage({ help: channel.port2 }, [channel.port2]);
      }
      this.running.set(worker, { id, job, ...(helper ? { helper } : {}) });
      worker.ref();
      worker.postMessage({ id, task: job.task, ...(port ? { helper: port } : {}) }, transfer);
    }
    for (const w of this.idle) w.unref();
  }

  /**
   * The image's size and geometry from its header (no decode): read here in JavaScript, or
   * by sharp for a header that does not parse that way; undefined when neither can read it.
   */
  async readHeader(bytes: Uint8Array, config: PreprocessTask['config']): Promise<ImageHeader | undefined> {
    let size = headerSize(bytes);
    if (!size) {
      let meta: Metadata;
      try {
        meta = await sharp(bytes).metadata();
      } catch {
        return undefined; // the thread reports the decode error itself
      }
      const height = meta.pageHeight ?? meta.height;
      if (!meta.width || !height) return undefined;
      size = { width: meta.width, height };
    }
    return { ...size, geometry: patchGeometry(size.height, size.width, config) }; // ImageSizeError for bad sizes
  }

  /** What processing this image takes from the budget, from its header. */
  memoryCost(task: PreprocessTask, h: ImageHeader | undefined): MemoryCost {
    // Without a header the decoder will refuse it; a few times its bytes covers that attempt.
    if (!h) return { shared: 0, transient: task.bytes.byteLength * 4 };
    const kinds = { float32: task.float32 !== false, bf16: task.bf16 };
    const bytes = encoderMemoryBytes(h.width, h.height, task.config, kinds);
    // The decoder's RGB output and libvips' own buffers for it, freed when the thread is done.
    return { shared: SharedMemoryArena.sizeClass(bytes), transient: 2 * h.width * h.height * 3 };
  }

  /** Pooled shared memory for the outputs and the resize, sized from the header. */
  private outputFor(task: PreprocessTask, h: ImageHeader | undefined): EncoderMemory | undefined {
    if (!h) return undefined;
    const kinds = { float32: task.float32 !== false, bf16: task.bf16 };
    const bytes = encoderMemoryBytes(h.width, h.height, task.config, kinds);
    if (bytes > MAX_KERNEL_BYTES) return undefined; // the thread allocates (and the JavaScript passes run)
    let memory: SharedWasmMemory | undefined;
    try {
      memory = this.shared.acquire(bytes);
    } catch {
      memory = undefined; // no memory could be reserved
    }
    // Without one the thread runs the JavaScript passes in ordinary (freeable) memory.
    return memory ? encoderMemoryIn(memory, h.geometry.patches * h.geometry.features, kinds) : undefined;
  }

  /**
   * Start an image: `header` settles first, with the geometry its header promises (what the
   * caller needs to build the prompt while the pixels are still being processed; undefined
   * when the header does not parse, rejected with ImageSizeError for a size smart_resize
   * refuses), then `result`. The decoded image decides: a result may differ from its header.
   */
  start(
    task: PreprocessTask,
    known?: Promise<ImageHeader | undefined>,
  ): { header: Promise<PatchGeometry | undefined>; result: Promise<PooledPreprocessResult> } {
    if (this.closed) {
      const closed = Promise.reject(new Error('preprocessing pool is closed'));
      closed.catch(() => {});
      return { header: closed, result: closed };
    }
    const header = known ?? this.readHeader(task.bytes, task.config);
    header.catch(() => {}); // the same error reaches the caller through result
    const geometry = header.then((h) => h?.geometry);
    geometry.catch(() => {}); // a caller that only awaits result gets the error there
    return { header: geometry, result: header.then((h) => this.process(task, h)) };
  }

  run(task: PreprocessTask): Promise<PooledPreprocessResult> {
    return this.start(task).result;
  }

  private async process(task: PreprocessTask, h: ImageHeader | undefined): Promise<PooledPreprocessResult> {
    if (this.closed) throw new Error('preprocessing pool is closed');
    const cost = this.memoryCost(task, h);
    if (cost.shared + cost.transient > this.budget) {
      throw new ImageMemoryError(
        `preprocessing this ${h?.width}x${h?.height} image needs ${formatBytes(cost.shared + cost.transient)}, above the preprocessing memory budget of ${formatBytes(this.budget)} (preprocess_memory_bytes)`,
      );
    }
    const job: Pending = { task, header: h, cost, taken: 0, outputSize: 0, resolve: () => {}, reject: () => {} };
    let result: PreprocessResult;
    try {
      result = await new Promise<PreprocessResult>((resolve, reject) => {
        job.resolve = resolve;
        job.reject = reject;
        this.queue.push(job);
        this.pump();
      });
    } catch (err) {
      this.settle(job, 0);
      throw err;
    }
    // The decoder's buffers are gone with the thread's result; shared outputs stay until release.
    const usesShared = job.task.output !== undefined && result.inOutput;
    this.settle(job, usesShared ? cost.shared : 0);
    let released = false;
    return {
      ...result,
      release: () => {
        if (released || !usesShared) return;
        released = true;
        this.shared.release(job.task.output!.memory, job.outputSize);
        this.give(cost.shared);
      },
    };
  }

  /**
   * Pooled memory for `bytes` outside any image (a pixel-cache hit read for inline): from the
   * same arena, counted in the same budget and let go with the rest when idle, so a burst of
   * hits costs no fresh pages and keeps none. Undefined when the arena has no room now.
   */
  borrow(bytes: number): { bytes: Uint8Array; release(): void } | undefined {
    if (this.closed) return undefined;
    let memory: SharedWasmMemory | undefined;
    try {
      memory = this.shared.acquire(bytes);
    } catch {
      memory = undefined;
    }
    if (!memory) return undefined;
    const taken = memory.buffer.byteLength;
    this.take(taken);
    let released = false;
    const owned = memory;
    return {
      bytes: new Uint8Array(owned.buffer, 0, bytes),
      release: () => {
        if (released) return;
        released = true;
        this.shared.release(owned, taken);
        this.give(taken);
      },
    };
  }

  /** A job is over: give back what it took but `kept` (outputs the caller still reads). */
  private settle(job: Pending, kept: number): void {
    const queued = this.queue.indexOf(job);
    if (queued >= 0) this.queue.splice(queued, 1);
    if (job.taken > 0) this.transientInUse -= job.cost.transient;
    if (kept === 0 && job.task.output) this.shared.release(job.task.output.memory, job.outputSize);
    if (job.taken > 0) this.give(job.taken - kept);
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.trimTimer) clearTimeout(this.trimTimer);
    for (const job of this.queue.splice(0)) job.reject(new Error('preprocessing pool is closed'));
    await Promise.all(this.all.map((w) => w.terminate()));
    // Images a thread was working on end too, once no thread can touch their memory or their
    // /dev/shm file any more (the request then removes what it had).
    for (const current of [...this.running.values()]) if ('job' in current) current.job.reject(new Error('preprocessing pool is closed'));
    this.running.clear();
    this.all.length = 0;
    this.idle.length = 0;
  }
}
