// A request's /dev/shm file as the sink a pool thread writes an image's encoder input into
// (docs/transport.md, "Written while the image is preprocessed"). The router created the file
// (empty, O_EXCL, 0600: so it is the router's to unlink, whatever happens here) and counted its
// bytes; the pool thread's entry (core/multimodal/preprocess-worker.mjs) makes this sink of the
// task's ShmPrewriteTask and gives it to the image library, which opens it once the image is
// decoded, writes it through its descriptor (one thread, or two when a helper takes a band) and
// ends it. Opening, touching, the last check and closing are here; the writing is the library's.
import { closeSync, constants, fstatSync, futimesSync, openSync } from 'node:fs';
import type { EncoderInputSink, ShmPrewriteResult, ShmPrewriteTask, SinkEnd } from '../multimodal/preprocess-task.ts';
import { errnoText } from '../util/errno.ts';

export function prewriteSink(task: ShmPrewriteTask): EncoderInputSink {
  let fd: number | undefined;
  /** What became of the file, judged while it is still open. */
  const outcome = (open: number, how: SinkEnd): ShmPrewriteResult => {
    if (how.kind === 'not-written') return { written: false, error: how.reason };
    if (how.kind === 'write-failed') return { written: false, error: `write ${task.path}: ${how.error}` };
    try {
      // Removed meanwhile (the request was cleaned up, or swept): not a file a worker can open.
      if (fstatSync(open).nlink === 0) return { written: false, error: `write ${task.path}: the file was removed while it was written` };
    } catch (err) {
      // The file cannot be checked: not known to be whole, so not sent.
      return { written: false, error: `write ${task.path}: ${errnoText(err)}` };
    }
    return { written: true, micros: how.micros };
  };
  return {
    nbytes: task.nbytes,
    kind: task.kind,
    open() {
      // Never through a symbolic link, never creating one, never waiting on a FIFO.
      try {
        fd = openSync(task.path, constants.O_WRONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
      } catch (err) {
        return { error: `open ${task.path}: ${errnoText(err)}` };
      }
      // Touched: its age, which the orphan sweep of a router in another pid namespace judges,
      // counts from now (the image may have queued).
      try {
        const now = Date.now() / 1000;
        futimesSync(fd, now, now);
      } catch {
        /* its age stays its name's: still younger than any sweep removes */
      }
      return { fd };
    },
    end(how) {
      if (fd === undefined) throw new Error(`prewriteSink: ${task.path} ended without being open`);
      const open = fd;
      fd = undefined;
      const result = outcome(open, how);
      try {
        closeSync(open);
      } catch {
        /* Linux frees the descriptor even when close fails, and every write is over: nothing is left to do */
      }
      return result;
    },
  };
}
