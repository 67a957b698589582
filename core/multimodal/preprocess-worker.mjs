// Entry of a preprocessing pool thread. Worker threads do not inherit the TypeScript loader
// of the thread that started them, so register tsx here before loading the task module.
import { readlinkSync } from 'node:fs';
import os from 'node:os';
import { parentPort } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

// Lower this thread's scheduling priority (Linux lets setpriority take a thread id): when
// the cores are busy, the router's event loop runs first and answers within milliseconds.
// Threads this one starts later (libvips' decoders) inherit the lower priority.
try {
  const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
  if (tid > 0) os.setPriority(tid, 10);
} catch {
  /* not Linux, or not permitted: keep the default priority */
}

register();
const { runPreprocessTask } = await import('./preprocess-task.ts');

parentPort.on('message', async ({ id, task }) => {
  try {
    const result = await runPreprocessTask(task);
    // Outputs in shared memory travel by reference; our own allocations by transfer.
    const transfer = [result.pixelValues?.buffer, result.bf16?.buffer].filter((b) => b instanceof ArrayBuffer);
    parentPort.postMessage({ id, result }, transfer);
  } catch (err) {
    parentPort.postMessage({ id, error: { name: err?.name ?? 'Error', message: String(err?.message ?? err) } });
  }
});
