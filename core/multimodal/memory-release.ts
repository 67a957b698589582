// The optional native helper that gives idle memory back to the system (native/memtrim):
// built from source when the project is installed, where a C toolchain and Node's headers
// are present (they are on the machines this runs on); without it everything works, and the
// preprocessing memory stays bounded by its budget instead of returning after a burst.
import { optionalNativeHelper } from './native-helper.ts';

interface MemTrim {
  releasePages(view: Uint8Array): number;
  trimHeap(): boolean;
  /** V8's LowMemoryNotification on this thread's isolate; absent from a helper built before it existed. */
  collectAllGarbage?(): boolean;
}

/** The native helper, or null when it was not built here (or does not load: the ordinary collection runs, malloc's heap is not trimmed). */
export const memTrim: () => MemTrim | null = optionalNativeHelper<MemTrim>('memtrim');
