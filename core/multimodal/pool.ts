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
import { readdirSync } from 'node:fs';
import os from 'node:os';
import { MessageChannel, type MessagePort, Worker } from 'node:worker_threads';
import sharp, { type Metadata } from 'sharp';
import { headerSize, ImageDecodeError } from './decode.ts';
import type { PreprocessResult, PreprocessTask } from './preprocess-task.ts';
import { encoderMemoryBytes, encoderMemoryIn, ImageSizeError, patchGeometry, type EncoderMemory, type PatchGeometry } from './qwen-vl.ts';
import { MAX_KERNEL_BYTES, newSharedMemory, type SharedWasmMemory } from './resize-simd.ts';

interface ImageHeader {
  width: number;
  height: number;
  geometry: PatchGeometry;
}

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

/**
 * Shared WebAssembly memories by size class (four classes per doubling, so at most 19 % of a
 * memory is unused), kept up to a byte budget. Reuse is the point: a fresh memory costs its
 * page faults on first touch, and a dropped one a garbage collection on the event loop.
 */
class SharedMemoryPool {
  private readonly free = new Map<number, SharedWasmMemory[]>();
  private readonly classOf = new WeakMap<SharedWasmMemory, number>();
  private pooled = 0;
  constructor(private readonly maxPooledBytes: number) {}

  private static sizeClass(bytes: number): number {
    const exact = 2 ** (Math.ceil(4 * Math.log2(Math.max(bytes, 1 << 20))) / 4);
    return Math.ceil(exact / 65536) * 65536;
  }

  acquire(bytes: number): SharedWasmMemory {
    const cls = SharedMemoryPool.sizeClass(bytes);
    const memory = this.free.get(cls)?.pop();
    if (memory) {
      this.pooled -= cls;
      return memory;
    }
    const fresh = newSharedMemory(cls);
    this.classOf.set(fresh, cls);
    return fresh;
  }

  release(memory: SharedWasmMemory): void {
    const size = memory.buffer.byteLength;
    // Over budget, or grown past its class by an image its header misdescribed: let it go.
    if (size !== this.classOf.get(memory) || this.pooled + size > this.maxPooledBytes) return;
    this.pooled += size;
    const list = this.free.get(size) ?? [];
    list.push(memory);
    this.free.set(size, list);
  }
}

interface Pending {
  task: PreprocessTask;
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
  private readonly shared = new SharedMemoryPool(1024 * 1024 * 1024);

  /**
   * One thread per core. The threads run at nice 10, so the event loop (nice 0) still gets a
   * core within milliseconds when all of them are busy.
   */
  constructor(readonly size = Math.max(1, os.availableParallelism())) {}

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
      const worker = this.freeThread();
      if (!worker) return;
      const job = this.queue.shift()!;
      const id = this.nextId++;
      const transfer: Array<ArrayBuffer | MessagePort> = [job.task.bytes.buffer as ArrayBuffer].filter((b) => b.byteLength === job.task.bytes.byteLength);
      // Nothing waiting behind this image, and its output is shared: let a free thread help.
      const helper = this.queue.length === 0 && job.task.output ? this.freeThread() : undefined;
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
  private async header(task: PreprocessTask): Promise<ImageHeader | undefined> {
    let size = headerSize(task.bytes);
    if (!size) {
      let meta: Metadata;
      try {
        meta = await sharp(task.bytes).metadata();
      } catch {
        return undefined; // the thread reports the decode error itself
      }
      const height = meta.pageHeight ?? meta.height;
      if (!meta.width || !height) return undefined;
      size = { width: meta.width, height };
    }
    return { ...size, geometry: patchGeometry(size.height, size.width, task.config) }; // ImageSizeError for bad sizes
  }

  /** Pooled shared memory for the outputs and the resize, sized from the header. */
  private outputFor(task: PreprocessTask, h: ImageHeader | undefined): EncoderMemory | undefined {
    if (!h) return undefined;
    const kinds = { float32: task.float32 !== false, bf16: task.bf16 };
    const bytes = encoderMemoryBytes(h.width, h.height, task.config, kinds);
    if (bytes > MAX_KERNEL_BYTES) return undefined; // the thread allocates (and the JavaScript passes run)
    let memory: SharedWasmMemory;
    try {
      memory = this.shared.acquire(bytes);
    } catch {
      return undefined; // no memory could be reserved: the thread works in its own
    }
    return encoderMemoryIn(memory, h.geometry.patches * h.geometry.features, kinds);
  }

  /**
   * Start an image: `header` settles first, with the geometry its header promises (what the
   * caller needs to build the prompt while the pixels are still being processed; undefined
   * when the header does not parse, rejected with ImageSizeError for a size smart_resize
   * refuses), then `result`. The decoded image decides: a result may differ from its header.
   */
  start(task: PreprocessTask): { header: Promise<PatchGeometry | undefined>; result: Promise<PooledPreprocessResult> } {
    if (this.closed) {
      const closed = Promise.reject(new Error('preprocessing pool is closed'));
      closed.catch(() => {});
      return { header: closed, result: closed as Promise<never> };
    }
    const header = this.header(task);
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
    const output = this.outputFor(task, h);
    const giveBack = () => {
      if (output) this.shared.release(output.memory);
    };
    let result: PreprocessResult;
    try {
      result = await new Promise<PreprocessResult>((resolve, reject) => {
        this.queue.push({ task: output ? { ...task, output } : task, resolve, reject });
        this.pump();
      });
    } catch (err) {
      giveBack();
      throw err;
    }
    const usesShared = output !== undefined && result.inOutput;
    if (!usesShared) giveBack();
    let released = false;
    return {
      ...result,
      release: () => {
        if (released || !usesShared) return;
        released = true;
        giveBack();
      },
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.queue.splice(0)) job.reject(new Error('preprocessing pool is closed'));
    await Promise.all(this.all.map((w) => w.terminate()));
    this.all.length = 0;
    this.idle.length = 0;
  }
}
