// Preprocessing off the event loop: a pool of worker threads (one per core, at a lower
// scheduling priority), so the router keeps answering while images are decoded and resized.
// Tasks queue FIFO; image bytes go in by transfer. When an image starts with nothing queued
// behind it and another thread is free, that thread helps: each resizes and scatters half
// of the image (bands of whole merge-block rows), so a lone request's image is ready sooner
// (measured: docs/performance.md, "Where the comments' measurements went: the preprocessing
// pool"). Under load every thread takes whole images.
//
// Each image is worked on in shared WebAssembly memory the pool owns and reuses
// (shared-memory-arena.ts): the image header gives the geometry before decoding, so the pool
// hands the thread a memory of the right size class for the encoder outputs plus the resize's
// working space (where the kernels write the outputs in place), and the caller gives it back
// with release(). Fresh 20-200 MB buffers per image would cost their page faults every time
// and, on the main thread, garbage-collection pauses for the external memory; reused ones
// cost neither (measured: the same section).
//
// Memory is bounded by one budget for all requests (preprocess_memory_bytes), kept by one
// ledger (memory-ledger.ts): what preprocessing keeps resident, its arena of shared memories
// (used or kept for reuse) plus the decoders' buffers of the images being processed, stays
// within it. An image's share (from its header) is taken when a thread starts on it, not while
// it waits in the queue; an image waits at the head of the queue until its share fits. An
// image that could never fit is refused before it queues (ImageMemoryError). After
// IDLE_TRIM_MS without work the kept memories' pages go back to the system, so a burst does
// not keep its memory. A thread's error reaches the caller as the class it was thrown as
// (thread-error.ts).
import { readdirSync } from 'node:fs';
import os from 'node:os';
import { MessageChannel, type MessagePort, Worker } from 'node:worker_threads';
import sharp, { type Metadata } from 'sharp';
import { headerSize } from './decode.ts';
import { MemoryLedger, type MemoryCost, type MemoryUse } from './memory-ledger.ts';
import type { PreprocessResult, PreprocessTask } from './preprocess-task.ts';
import { processorOf, type EncoderGeometry } from './families/index.ts';
import { encoderMemoryIn, type EncoderMemory } from './qwen-vl.ts';
import { MAX_KERNEL_BYTES, type SharedWasmMemory } from './resize-simd.ts';
import { SharedMemoryArena } from './shared-memory-arena.ts';
import { errorFromThread, type ThreadError } from './thread-error.ts';
import { formatBytes } from '../util/bytes.ts';

/**
 * Lower every thread of this process but the main one to nice 10 (Linux; elsewhere a no-op).
 * Decoding runs on libuv's thread pool (sharp queues its work there), not only on our pool
 * threads, and on a 2-core machine those threads would otherwise preempt the event loop
 * (measured: docs/performance.md, "Where the comments' measurements went: the preprocessing
 * pool"). Threads start lazily, so this runs again as work completes.
 */
export function favourEventLoop(): void {
  if (process.platform !== 'linux') return;
  try {
    for (const tid of readdirSync('/proc/self/task')) {
      const id = Number(tid);
      if (id !== process.pid && os.getPriority(id) < 10) os.setPriority(id, 10);
    }
  } catch {
    // Not permitted (setpriority's EACCES/EPERM), a thread that ended while we looked (ESRCH),
    // no /proc: nothing to be done, the threads keep the priority they have, and the next
    // completion's round tries again.
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

export interface ImageHeader {
  width: number;
  height: number;
  geometry: EncoderGeometry;
}

/** How a thread's work on an image ended: its result, or the error its caller gets. */
type Outcome = { result: PreprocessResult } | { error: Error };

/** An image between start() and its thread's answer: what the ledger's reservation holds for it. */
interface Pending {
  task: PreprocessTask;
  header: ImageHeader | undefined;
  end: (outcome: Outcome) => void;
}

/** What a thread posts back for an image (preprocess-worker.mjs). */
type ThreadReply = { id: number; result: PreprocessResult } | { id: number; error: ThreadError };

const closedError = () => new Error('preprocessing pool is closed');

export class PreprocessPool {
  private readonly idle: Worker[] = [];
  private readonly all: Worker[] = [];
  /** Threads at work: on an image (job), or helping the thread `lead` with one. */
  private readonly running = new Map<Worker, { id: number; job: Pending; helper?: Worker } | { lead: Worker }>();
  private nextId = 1;
  private closed = false;
  /** favourEventLoop() runs after each of the first completions, while helper threads appear. */
  private deprioritizeRounds = 16;
  /** The memory budget: every byte images and borrowers take, and the images waiting for theirs. */
  private readonly ledger: MemoryLedger<Pending>;
  private trimTimer: NodeJS.Timeout | undefined;

  /**
   * One thread per core. The threads run at nice 10, so the event loop (nice 0) still gets a
   * core soon when all of them are busy (measured: docs/performance.md, "Where the comments'
   * measurements went: the preprocessing pool").
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
    this.ledger = new MemoryLedger(options.memoryBytes ?? 1024 * 1024 * 1024, () => this.memoryReturned());
    this.idleTrimMs = options.idleTrimMs ?? IDLE_TRIM_MS;
    this.onIdle = options.onIdle;
  }

  /** The memory budget; a lower one applies to images that start from now on (the arena never shrinks). */
  setMemoryBudget(bytes: number): void {
    this.ledger.setBudget(bytes);
    this.pump();
  }

  /** Memory in use, kept for reuse, the arena's size and what is resident by the budget's rule (for metrics and tests). */
  memory(): MemoryUse & { idleTrims: number } {
    return { ...this.ledger.use(), idleTrims: this.idleTrims };
  }

  /**
   * A request the router serves without the pool (a pixel-cache hit, a text-only chat): the
   * router is not idle, so the idle trim (and the router's low-memory collection after it,
   * which holds the event loop: docs/performance.md, "Memory after a burst") waits
   * IDLE_TRIM_MS from now instead of landing mid-traffic.
   */
  stillBusy(): void {
    this.trimTimer?.refresh();
    this.busySinceTrim = true;
  }

  /** Memory was taken: not idle. */
  private cancelIdleTrim(): void {
    if (this.trimTimer) clearTimeout(this.trimTimer);
    this.trimTimer = undefined;
  }

  /** Memory came back (the ledger says so): idle once nothing holds any, and the next image may fit now. */
  private memoryReturned(): void {
    const { inUse, pooled } = this.ledger.use();
    if (inUse <= 0 && this.running.size === 0 && this.ledger.waiting === 0 && pooled > 0) this.armIdleTrim();
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
    if (this.ledger.use().inUse > 0 || this.running.size > 0) return;
    this.busySinceTrim = false;
    this.idleTrims += 1;
    this.ledger.releasePages();
    for (const w of this.idle) w.postMessage({ trim: true });
    // The threads' collections free what they held into malloc's heap, which is process-wide:
    // onIdle (the router's full collection and heap trim) runs once they have had time to,
    // if preprocessing is still idle by then.
    const later = setTimeout(() => {
      if (this.ledger.use().inUse > 0 || this.running.size > 0 || this.closed) return;
      // A request meanwhile: not idle after all; the collection waits for a quiet spell again.
      if (this.busySinceTrim) this.armIdleTrim();
      else this.onIdle?.();
    }, THREAD_TRIM_GRACE_MS);
    later.unref();
  }

  private spawn(): Worker {
    const worker = new Worker(new URL('./preprocess-worker.mjs', import.meta.url));
    worker.on('message', (msg: ThreadReply) => {
      const current = this.running.get(worker);
      if (!current || !('job' in current) || current.id !== msg.id) return;
      this.running.delete(worker);
      current.job.end('error' in msg ? { error: errorFromThread(msg.error) } : { result: msg.result });
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
        current.job.end({ error: new Error(`preprocessing thread failed: ${err.message}`) });
        if (current.helper && this.running.delete(current.helper)) this.idle.push(current.helper);
      }
      this.pump();
    });
    worker.unref();
    this.all.push(worker);
    return worker;
  }

  private hasFreeThread(): boolean {
    return this.idle.length > 0 || this.all.length < this.size;
  }

  private freeThread(): Worker | undefined {
    return this.idle.pop() ?? (this.all.length < this.size ? this.spawn() : undefined);
  }

  private pump(): void {
    while (this.ledger.waiting > 0) {
      // FIFO: the first image waits until its memory fits (the ledger's rule: nothing overtakes
      // it, so nothing starves) and a thread is free.
      if (!this.hasFreeThread()) return;
      const reservation = this.ledger.leaseNext(this.running.size === 0);
      if (!reservation) return;
      this.cancelIdleTrim();
      const worker = this.freeThread()!;
      const job = reservation.holder;
      const output = outputIn(reservation.memory, job.task, job.header);
      const task = output ? { ...job.task, output } : job.task;
      const id = this.nextId++;
      const transfer: Array<ArrayBuffer | MessagePort> = [task.bytes.buffer as ArrayBuffer].filter((b) => b.byteLength === task.bytes.byteLength);
      // Nothing waiting behind this image, its output is shared and its header promises at
      // least two merge-block rows (the bands are whole block rows): let a free thread help.
      // (A helper polls while it waits: one the image could not use would spin for nothing.)
      const splittable = job.header !== undefined && processorOf(task.config).bandStarts(job.header.geometry, 2, job.header).length > 0;
      const helper = this.ledger.waiting === 0 && task.output && splittable ? this.freeThread() : undefined;
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
      worker.postMessage({ id, task, ...(port ? { helper: port } : {}) }, transfer);
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
        // Whatever sharp says of bytes it cannot read: nothing to do here, the thread's decode
        // refuses them with an ImageDecodeError that names the format.
        return undefined;
      }
      const height = meta.pageHeight ?? meta.height;
      if (!meta.width || !height) return undefined;
      size = { width: meta.width, height };
    }
    return { ...size, geometry: processorOf(config).geometry(size.height, size.width) }; // ImageSizeError for bad sizes
  }

  /** What processing this image takes from the budget, from its header. */
  memoryCost(task: PreprocessTask, h: ImageHeader | undefined): MemoryCost {
    // Without a header the decoder will refuse it; a few times its bytes covers that attempt.
    if (!h) return { shared: 0, transient: task.bytes.byteLength * 4 };
    const bytes = processorOf(task.config).memoryBytes(h.width, h.height, outputKinds(task));
    return {
      shared: SharedMemoryArena.sizeClass(bytes),
      // The decoder's RGB output and libvips' own buffers for it, freed when the thread is done.
      transient: 2 * h.width * h.height * 3,
      // Beyond the kernels' limit the thread allocates its own (and the JavaScript passes run).
      ...(bytes <= MAX_KERNEL_BYTES ? { arenaBytes: bytes } : {}),
    };
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
  ): { header: Promise<EncoderGeometry | undefined>; result: Promise<PooledPreprocessResult> } {
    if (this.closed) {
      const closed = Promise.reject(closedError());
      closed.catch(() => {}); // the caller gets this rejection through header or result; this one only keeps it from counting as unhandled
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
    if (this.closed) throw closedError();
    let end: (outcome: Outcome) => void = () => {};
    const ended = new Promise<Outcome>((resolve) => (end = resolve)); // runs at once: `end` is its resolve from here on
    const reserved = this.ledger.reserve(this.memoryCost(task, h), { task, header: h, end });
    if ('refusal' in reserved) {
      const { needs, budget } = reserved.refusal;
      throw new ImageMemoryError(
        `preprocessing this ${h?.width}x${h?.height} image needs ${formatBytes(needs)}, above the preprocessing memory budget of ${formatBytes(budget)} (preprocess_memory_bytes)`,
      );
    }
    const { reservation } = reserved;
    this.pump();
    const outcome = await ended;
    if ('error' in outcome) {
      reservation.release();
      throw outcome.error;
    }
    // The decoder's buffers are gone with the thread's result; shared outputs stay until release.
    reservation.finish(outcome.result.inOutput);
    return { ...outcome.result, release: () => reservation.release() };
  }

  /**
   * Pooled memory for `bytes` outside any image (a pixel-cache hit read for inline): from the
   * same arena, counted in the same budget and let go with the rest when idle, so a burst of
   * hits costs no fresh pages and keeps none. Undefined when the arena has no room now.
   */
  borrow(bytes: number): { bytes: Uint8Array; release(): void } | undefined {
    if (this.closed) return undefined;
    const borrowed = this.ledger.borrow(bytes);
    if (!borrowed) return undefined;
    this.cancelIdleTrim();
    return { bytes: new Uint8Array(borrowed.memory.buffer, 0, bytes), release: borrowed.release };
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.trimTimer) clearTimeout(this.trimTimer);
    for (const waiting of this.ledger.withdrawWaiting()) waiting.holder.end({ error: closedError() });
    await Promise.all(this.all.map((w) => w.terminate()));
    // Images a thread was working on end too, once no thread can touch their memory or their
    // /dev/shm file any more (the request then removes what it had).
    for (const current of [...this.running.values()]) if ('job' in current) current.job.end({ error: closedError() });
    this.running.clear();
    this.all.length = 0;
    this.idle.length = 0;
  }
}

/** Which encodings the task asks for. */
function outputKinds(task: PreprocessTask): { float32: boolean; bf16: boolean } {
  return { float32: task.float32 !== false, bf16: task.bf16 };
}

/** The image's outputs and resize laid out in its arena memory; undefined without one (the thread runs the JavaScript passes in ordinary, freeable memory). */
function outputIn(memory: SharedWasmMemory | undefined, task: PreprocessTask, h: ImageHeader | undefined): EncoderMemory | undefined {
  if (!memory || !h) return undefined;
  return encoderMemoryIn(memory, h.geometry.patches * h.geometry.features, outputKinds(task));
}
