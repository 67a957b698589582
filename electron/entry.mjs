// Electron's main entry (`electron electron/entry.mjs …`, or package.json `main` when
// packaged). Electron cannot load TypeScript, and the core is not bundled: it finds its
// worker threads, its wasm kernel and the native sharp module through import.meta.url. So
// tsx compiles the sources on load, as bin/mmtc.js does for the CLI; only the sandboxed
// preload is bundled (scripts/build-electron.mjs).
//
// Electron emits `ready` only once this module's top-level awaits have settled, so
// runDesktopApp registers the scheme and the guards before the app is ready, as it must.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// Packaged, tsx's esbuild binary is inside app.asar, which child_process cannot execute;
// electron-builder unpacks it (asarUnpack), and esbuild reads this variable when it loads,
// hence before tsx is imported.
const here = fileURLToPath(import.meta.url);
const asar = `${path.sep}app.asar${path.sep}`;
if (here.includes(asar) && process.env.ESBUILD_BINARY_PATH === undefined) {
  try {
    const binary = createRequire(import.meta.url).resolve(`@esbuild/${process.platform}-${process.arch}/bin/esbuild`);
    process.env.ESBUILD_BINARY_PATH = binary.replace(asar, `${path.sep}app.asar.unpacked${path.sep}`);
  } catch {
    // No esbuild binary for this platform in the package: tsx reports it on first use.
  }
}

const { register } = await import('tsx/esm/api');
register();
const { runDesktopApp } = await import('./main.ts');
runDesktopApp({ argv: process.argv });
