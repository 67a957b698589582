// Entry of a preprocessing pool thread. Worker threads do not inherit the TypeScript loader
// of the thread that started them, so register tsx here before loading the task module.
//
// A thread gets an image ({ id, task, helper? }), a request to help another thread with one
// ({ help: port }), or, when the pool has been idle a while, { trim: true }: a full
// collection, so what the last burst left behind goes back to the system. A helper waits on
// its port (polling it first: HELPER_POLL_MS) for a job: the bottom rows of the image's JPEG
// (decode-shared.ts), after which it waits again, or one band job, or null when the image was
// not split (or not any further); it runs it and answers on the same port. What a thread catches goes back as plain
// data (thread-error.ts), so the error reaches the pool's caller as the class it was thrown as.
import { readlinkSync } from 'node:fs';
import os from 'node:os';
import v8 from 'node:v8';
import vm from 'node:vm';
import { parentPort, receiveMessageOnPort } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

// sharp hands back each decoded image in memory only this thread's garbage collector frees.
// Until it does, the next decode gets fresh memory, and on a VM touching fresh pages costs
// more than the decode itself. A young-generation collection after each image (once the
// result is on its way) frees that memory in time for the next decode, at a fraction of a
// full one's cost (measured: docs/performance.md, "Where the comments' measurements went: the
// preprocessing pool"). (A worker thread cannot be started with --expose-gc, so the flag is
// set here and the function taken from a fresh context.)
v8.setFlagsFromString('--expose-gc');
const collectGarbage = vm.runInNewContext('gc');

// Lower this thread's scheduling priority (Linux lets setpriority take a thread id): when
// the cores are busy, the router's event loop runs first and answers soon (measured: the same
// section). Threads this one starts later (libvips' decoders) inherit the lower priority.
try {
  const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
  if (tid > 0) os.setPriority(tid, 10);
} catch {
  // Not Linux (no /proc/thread-self), or not permitted (EACCES/EPERM): nothing to be done, the
  // thread runs at the default priority.
}

register();
const { runPreprocessTask } = await import('./preprocess-task.ts');
const { runPostedBand } = await import('./posted-band.ts');
const { errorFromThread, threadErrorOf } = await import('./thread-error.ts');
const { prewriteSink } = await import('../transport/prewrite-file.ts');
const { releaseDecodeBuffer } = await import('./decode-shared.ts');

/**
 * How long a helper polls its port for its band before it sleeps on it: the lead posts the
 * band once the image is decoded (a 1080p or 4K decode ends well within this), and a thread
 * that slept meanwhile is slow to wake on these VMs (its core idles), which the lone image
 * waits for. The polling runs on the core the decode leaves idle, and only when the pool had a
 * thread to spare. It is a busy loop from the start: any sleep in it gave the whole gain back
 * (measured: docs/performance.md, "Where the comments' measurements went: the preprocessing
 * pool").
 */
const HELPER_POLL_MS = 60;

function helpWith(port) {
  // A loop, not a call per job, so that a job done is not reachable from the stack while the
  // next is awaited.
  let deadline = performance.now() + HELPER_POLL_MS;
  while (performance.now() < deadline) {
    const posted = receiveMessageOnPort(port);
    if (!posted) continue;
    if (!runHelp(port, posted.message)) return void setImmediate(helped);
    deadline = performance.now() + HELPER_POLL_MS;
  }
  port.once('message', (job) => (runHelp(port, job) ? helpWith(port) : setImmediate(helped)));
}

/**
 * After the image's last job, once the stack has let go of the jobs: what they held (a shared
 * decode's buffer, for an image too large for the lead's reused one) goes now, not at this
 * thread's next collection, which a thread that only helps may not have for hundreds of images.
 */
function helped() {
  collectGarbage({ type: 'minor' });
}

/** Run a job and answer it; true when the lead may post another (after the decode's rows). */
function runHelp(port, job) {
  try {
    // The band's write to the tensor file, if asked for: its time, or why it failed.
    const write = job ? runPostedBand(job) : undefined;
    port.postMessage({ done: true, write });
  } catch (err) {
    // The band failed: the lead gets why (and the band's error class), and fails the image
    // with it (or, for the decode's rows, decodes them itself).
    port.postMessage({ error: threadErrorOf(err) });
  }
  // After the decode's rows the image may still have a band for this thread.
  if (job?.kind === 'decode') return true;
  port.close();
  return false;
}

/**
 * The band helper a task gets when the pool gave it a helper thread. `onUse(final)`: a job
 * was posted; final unless it was the decode's rows (the helper then waits for another).
 */
function bandHelper(port, onUse) {
  let answer;
  const helper = (job) =>
    new Promise((resolve, reject) => {
      onUse(job?.kind !== 'decode');
      const take = (reply) => {
        answer = undefined;
        port.off('message', take);
        if (reply.error) reject(errorFromThread(reply.error));
        else resolve(reply.write);
      };
      answer = take;
      port.on('message', take);
      port.once('close', () => reject(new Error('helper thread went away')));
      try {
        port.postMessage(job);
      } catch (err) {
        // Not posted: nothing will answer, so nothing is polled or listened for.
        answer = undefined;
        port.off('message', take);
        reject(err);
      }
    });
  helper.pollAnswer = (ms) => {
    const deadline = performance.now() + ms;
    while (answer && performance.now() < deadline) {
      const reply = receiveMessageOnPort(port);
      if (reply) answer(reply.message);
    }
  };
  return helper;
}

parentPort.on('message', async ({ id, task, helper, help, trim }) => {
  if (trim) {
    releaseDecodeBuffer();
    return collectGarbage({ type: 'major' });
  }
  if (help) return helpWith(help);
  // The helper is released by the last job posted to it, or by null when that was not one.
  let released = false;
  try {
    // The image's /dev/shm file, when the task has one, is the sink the image library writes into: the transport opens and closes it.
    const result = await runPreprocessTask(
      task,
      helper ? bandHelper(helper, (final) => (released = final)) : undefined,
      task.shm ? prewriteSink(task.shm) : undefined,
    );
    // Outputs in shared memory travel by reference; our own allocations by transfer.
    const transfer = [result.pixelValues?.buffer, result.bf16?.buffer].filter((b) => b instanceof ArrayBuffer);
    parentPort.postMessage({ id, result }, transfer);
  } catch (err) {
    // The image failed: the pool's caller gets the error, rebuilt from what is posted here.
    parentPort.postMessage({ id, error: threadErrorOf(err) });
  } finally {
    if (helper && !released) helper.postMessage(null); // release the helper
    helper?.close();
  }
  collectGarbage({ type: 'minor' });
});
