// The console's user interface is a Vite build of renderer/ into dist/renderer. It takes about
// a second, so nothing asks the operator to run it: `npm install` builds it (the `prepare`
// script), and `mmtc serve`, `npm start` and `bench:ui` build it when it is missing or older
// than its sources (the renderer and the core modules it imports: a checkout updated by git
// would otherwise serve yesterday's screens). Only a checkout without Vite (installed with
// --omit=dev) cannot build it, and says so.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';

export const ROOT = path.resolve(import.meta.dirname, '../..');
export const RENDERER_DIR = path.join(ROOT, 'dist', 'renderer');
const SOURCES = ['renderer', 'core'];

/** Newest modification time (ms) of the renderer's sources (tests and generated code aside). */
function newestSource(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name === 'gen' || entry.name.startsWith('.')) continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(full));
    else if (/\.(tsx?|css|html)$/.test(entry.name) && !/\.test\.tsx?$/.test(entry.name)) newest = Math.max(newest, statSync(full).mtimeMs);
  }
  return newest;
}

/** Why the built UI cannot be served as it is, or undefined when it is up to date. */
export function rendererStaleness(root = ROOT): string | undefined {
  const index = path.join(root, 'dist', 'renderer', 'index.html');
  if (!existsSync(index)) return 'it has not been built in this checkout';
  const built = statSync(index).mtimeMs;
  const newest = Math.max(...SOURCES.map((d) => newestSource(path.join(root, d))));
  return newest > built ? 'its sources changed since it was built' : undefined;
}

/**
 * Build the UI when it is missing or stale (or always, with `force`). Returns undefined when
 * it is ready, else why it is not (one line).
 */
export function ensureRendererBuilt(options: { log?: (line: string) => void; force?: boolean; root?: string } = {}): string | undefined {
  const root = options.root ?? ROOT;
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const why = options.force ? 'asked to' : rendererStaleness(root);
  if (why === undefined) return undefined;
  const vite = path.join(root, 'node_modules', 'vite', 'bin', 'vite.js');
  if (!existsSync(vite)) return `the console UI cannot be built: ${why}, and Vite is not installed (npm install without --omit=dev installs it)`;
  log(`building the console UI (${why}): vite build --config renderer/vite.config.ts`);
  const started = performance.now();
  const r = spawnSync(process.execPath, [vite, 'build', '--config', path.join(root, 'renderer', 'vite.config.ts'), '--logLevel', 'warn'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'], timeout: 120_000 });
  if (r.status !== 0) return `building the console UI failed (${r.error ? r.error.message : `vite exited with status ${r.status}`}); run npm run build:renderer to see why`;
  log(`built the console UI in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  return undefined;
}
