#!/usr/bin/env node
// `npm run build:electron`: bundle the sandboxed preload (electron/preload.ts and what it
// imports: the contract's names, zod) into one CommonJS file, dist/electron/preload.cjs. A
// sandboxed preload cannot load modules from disk; its `require` knows only `electron` (and a
// few browser-safe built-ins), so everything else is inlined and nothing node-only may be
// reached: the platform is the browser's, and a `node:` import fails the build here instead
// of the page at run time. The main process is not bundled (electron/entry.mjs runs it
// through tsx). The metafile lists every input, so launch.ts can rebuild when any changed.
//
// Also imported by electron/launch.ts (buildPreload), so both build the same way.
import { build } from 'esbuild';
import { realpathSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const PRELOAD_SOURCE = path.join(ROOT, 'electron', 'preload.ts');
export const PRELOAD_BUNDLE = path.join(ROOT, 'dist', 'electron', 'preload.cjs');
export const PRELOAD_METAFILE = path.join(ROOT, 'dist', 'electron', 'preload.meta.json');

/**
 * Build dist/electron/preload.cjs (and its metafile next to it; tests pass another outfile);
 * rejects with esbuild's messages on error.
 */
export async function buildPreload({ outfile = PRELOAD_BUNDLE } = {}) {
  const metafile = outfile.replace(/\.cjs$/, '.meta.json');
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: [PRELOAD_SOURCE],
    outfile,
    bundle: true,
    format: 'cjs',
    platform: 'browser',
    // Electron 41 runs Chromium 146; 130 leaves room without transpiling anything we use.
    target: 'chrome130',
    external: ['electron'],
    metafile: true,
    // Parsed on every page load; zod (which the contract's names come with) is most of it.
    minify: true,
    legalComments: 'none',
    logLevel: 'warning',
  });
  writeFileSync(metafile, JSON.stringify(result.metafile, null, 1));
  return { bundle: outfile, bytes: Object.values(result.metafile.outputs)[0]?.bytes ?? 0 };
}

const invokedDirectly = process.argv[1] !== undefined && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href;
if (invokedDirectly) {
  try {
    const { bundle, bytes } = await buildPreload();
    process.stdout.write(`built ${path.relative(process.cwd(), bundle)} (${Math.round(bytes / 1024)} KiB)\n`);
  } catch (err) {
    process.stderr.write(`build:electron failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  }
}
