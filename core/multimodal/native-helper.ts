// The one loader of the optional native helpers under native/ (scripts/build-native.mjs builds
// them on install): a helper's module, loaded once per thread on first use, or null where it
// was not built, or was built for another Node or platform, or its library is missing (then
// the caller runs without it, as documented with each helper).
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

/** Where native/<name>'s build puts its module. */
function nativeHelperPath(name: string): string {
  return path.resolve(import.meta.dirname, `../../native/${name}/build/Release/${name}.node`);
}

/** A getter for native/<name>'s module: the module, or null when it does not load here. */
export function optionalNativeHelper<T>(name: string): () => T | null {
  let loaded: T | null | undefined;
  return () => {
    if (loaded !== undefined) return loaded;
    try {
      const file = nativeHelperPath(name);
      loaded = existsSync(file) ? (createRequire(import.meta.url)(file) as T) : null;
    } catch {
      loaded = null;
    }
    return loaded;
  };
}
