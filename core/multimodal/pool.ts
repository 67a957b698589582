// Preprocessing off the event loop: a pool of worker threads (one per core but one, at a
// lower scheduling priority), so the router keeps answering while images are decoded and
// resized. Tasks queue FIFO; image bytes go in by transfer.
//
// Outputs land in shared memory the pool owns and reuses: the image header gives the
// geometry before decoding, so the pool hands the thread a SharedArrayBuffer of the right
// size class, and the caller gives it back with release(). Fresh 20-200 MB buffers per image
// would cost their page faults every time and, on the main thread, garbage-collection
// pauses for the external memory; reused ones cost neither.
import { readdirSync } from 'node:fs';
import os from 'node:os';
import { Worker } from 'node:worker_threads';
import sharp, { type Metadata } from 'sharp';
import { ImageDecodeError } from './decode.ts';
import type { PreprocessResult, PreprocessTask } from './preprocess-task.ts';
import { ImageSizeError, patchGeometry } from './qwen-vl.ts';

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

/** Shared buffers by power-of-two size class, kept up to a byte budget. */
class SharedBufferPool {
  private readonly free = new Map<number, SharedArrayBuffer[]>();
  private pooled = 0;
  constructor(private readonly maxPooledBytes: number) {}

  acquire(bytes: number): SharedArrayBuffer {
    let cls = 1 << 20;
    while (cls < bytes) cls *= 2;
    const buf = this.free.get(cls)?.pop();
    if (buf) {
      this.pooled -= cls;
      return buf;
    }
    return new SharedArrayBuffer(cls);
  }

  release(buf: SharedArrayBuffer): void {
    if (this.pooled + buf.byteLength > this.maxPooledBytes) return;
    this.pooled += buf.byteLength;
    const list = this.free.get(buf.byteLength) ?? [];
    list.push(buf);
    this.free.set(buf.byteLength, list);
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
  private readonly running = new Map<Worker, { id: number; job: Pending }>();
  private nextId = 1;
  private closed = false;
  /** favourEventLoop() runs after each of the first completions, while helper threads appear. */
  private deprioritizeRounds = 16;
  private readonly shared = new SharedBufferPool(768 * 1024 * 1024);

  /** One thread per core but one: the event loop keeps a core, so the router stays responsive. */
  constructor(readonly size = Math.max(1, os.availableParallelism() - 1)) {}

  private spawn(): Worker {
    const worker = new Worker(new URL('./preprocess-worker.mjs', import.meta.url));
    worker.on('message', (msg: { id: number; result?: PreprocessResult; error?: { name: string; message: string } }) => {
      const current = this.running.get(worker);
      if (!current || current.id !== msg.id) return;
      this.running.delete(worker);
      if (msg.error) {
        const Type = ERROR_TYPES[msg.error.name] ?? Error;
        current.job.reject(new Type(msg.error.message));
      } else current.job.resolve(msg.result!);
      if (this.deprioritizeRounds > 0) {
        this.deprioritizeRounds -= 1;
        favourEventLoop();
      }
      this.idle.push(worker);
      this.pump();
    });
    worker.on('error', (err) => {
      const current = this.running.get(worker);
      this.running.delete(worker);
      this.all.splice(this.all.indexOf(worker), 1);
      current?.job.reject(new Error(`preprocessing thread failed: ${err.message}`));
      this.pump();
    });
    worker.unref();
    this.all.push(worker);
    return worker;
  }

  private pump(): void {
    while (this.queue.length > 0) {
      let worker = this.idle.pop();
      if (!worker && this.all.length < this.size) worker = this.spawn();
      if (!worker) return;
      const job = this.queue.shift()!;
      const id = this.nextId++;
      this.running.set(worker, { id, job });
      worker.ref();
      worker.postMessage({ id, task: job.task }, [job.task.bytes.buffer as ArrayBuffer].filter((b) => b.byteLength === job.task.bytes.byteLength));
    }
    for (const w of this.idle) w.unref();
  }

  /** Shared output buffers for this image, from its header; none when the header does not parse. */
  private async outputFor(task: PreprocessTask): Promise<PreprocessTask['output']> {
    let meta: Metadata;
    try {
      meta = await sharp(task.bytes).metadata();
    } catch {
      return undefined; // the thread reports the decode error itself
    }
    const height = meta.pageHeight ?? meta.height;
    if (!meta.width || !height) return undefined;
    const g = patchGeometry(height, meta.width, task.config); // ImageSizeError for bad sizes
    const elements = g.patches * g.features;
    return {
      ...(task.float32 !== false ? { pixelValues: this.shared.acquire(elements * 4) } : {}),
      ...(task.bf16 ? { bf16: this.shared.acquire(elements * 2) } : {}),
      elements,
    };
  }

  async run(task: PreprocessTask): Promise<PooledPreprocessResult> {
    if (this.closed) throw new Error('preprocessing pool is closed');
    const output = await this.outputFor(task);
    const giveBack = () => {
      if (output?.pixelValues) this.shared.release(output.pixelValues);
      if (output?.bf16) this.shared.release(output.bf16);
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
    const usesShared = output !== undefined && (result.pixelValues ?? result.bf16)?.buffer instanceof SharedArrayBuffer;
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
