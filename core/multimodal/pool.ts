// Preprocessing off the event loop: a pool of worker threads (one per core but one), so
// the router keeps answering while images are decoded and resized. Tasks queue FIFO; image
// bytes go in by transfer and the float32/bf16 outputs come back by transfer (no copies).
import os from 'node:os';
import { Worker } from 'node:worker_threads';
import { ImageDecodeError } from './decode.ts';
import type { PreprocessResult, PreprocessTask } from './preprocess-task.ts';
import { ImageSizeError } from './qwen-vl.ts';

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

  run(task: PreprocessTask): Promise<PreprocessResult> {
    if (this.closed) return Promise.reject(new Error('preprocessing pool is closed'));
    return new Promise((resolve, reject) => {
      this.queue.push({ task, resolve, reject });
      this.pump();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.queue.splice(0)) job.reject(new Error('preprocessing pool is closed'));
    await Promise.all(this.all.map((w) => w.terminate()));
    this.all.length = 0;
    this.idle.length = 0;
  }
}
