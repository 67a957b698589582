// The optional native helper that gives idle memory back to the system (native/memtrim):
// built from source when the project is installed, where a C toolchain and Node's headers
// are present (they are on the machines this runs on); without it everything works, and the
// preprocessing memory stays bounded by its budget instead of returning after a burst.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

interface MemTrim {
  releasePages(view: Uint8Array): number;
  trimHeap(): boolean;
  /** V8's LowMemoryNotification on this thread's isolate; absent from a helper built before it existed. */
  collectAllGarbage?(): boolean;
}

export const MEMTRIM_PATH = path.resolve(import.meta.dirname, '../../native/memtrim/build/Release/memtrim.node');

let loaded: MemTrim | null | undefined;

/** The native helper, or null when it was not built here. */
export function memTrim(): MemTrim | null {
  if (loaded !== undefined) return loaded;
  try {
    loaded = existsSync(MEMTRIM_PATH) ? (createRequire(import.meta.url)(MEMTRIM_PATH) as MemTrim) : null;
  } catch {
    // Built for another Node or platform, or broken: as when it was not built (the ordinary collection runs, malloc's heap is not trimmed).
    loaded = null;
  }
  return loaded;
}
