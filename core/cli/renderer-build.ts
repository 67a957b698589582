// The console's user interface is a Vite build of renderer/ into dist/renderer. It takes about
// a second, so nothing asks the operator to run it: `npm install` builds it (the `prepare`
// script), and `mmtc serve`, `npm start` and `bench:ui` build it when it is missing or older
// than its sources (the renderer and the core modules it imports: a checkout updated by git
// would otherwise serve yesterday's screens). Only a checkout without Vite (installed with
// --omit=dev) cannot build it, and says so.
//
// A build goes into a directory of its own beside dist/renderer; its hashed assets are then
// moved in next to the previous build's, and its index.html replaces the old one by rename,
// last: a console serving the UI meanwhile serves the old page or the new one, each with all
// its assets (the previous build's assets stay one generation, for pages already open). One
// build at a time per checkout (a lock file: two `mmtc serve` started together build once,
// the second waits and finds it done).
import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, statSync, unlinkSync } from 'node:fs';
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

/** How long a build may hold the lock; a lock older than this is a crashed build's, and is taken over. */
const LOCK_STALE_MS = 150_000;

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Take the checkout's build lock, waiting for another build to finish; false when it did not finish in time. */
function takeBuildLock(lock: string): boolean {
  const deadline = Date.now() + LOCK_STALE_MS;
  for (;;) {
    try {
      closeSync(openSync(lock, 'wx', 0o600));
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    let age: number;
    try {
      age = Date.now() - statSync(lock).mtimeMs;
    } catch (err) {
      // Released between the open and the stat: try again. Any other failure (a lock that is a
      // link to itself) is not a build in progress, and waiting would never end.
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      continue;
    }
    if (age > LOCK_STALE_MS) rmSync(lock, { force: true });
    else if (Date.now() > deadline) return false;
    else sleepSync(200);
  }
}

/** The asset paths an index.html refers to (`./assets/index-abc.js`). */
function assetsOf(indexHtml: string): Set<string> {
  return new Set([...indexHtml.matchAll(/(?:src|href)="\.\/(assets\/[^"]+)"/g)].map((m) => m[1]!));
}

/** Move the build in `out` into `target`: new assets first, index.html last (by rename), then the assets neither page uses. */
function installBuild(out: string, target: string): void {
  mkdirSync(path.join(target, 'assets'), { recursive: true });
  const oldIndex = path.join(target, 'index.html');
  const keep = existsSync(oldIndex) ? assetsOf(readFileSync(oldIndex, 'utf8')) : new Set<string>();
  for (const name of readdirSync(path.join(out, 'assets'))) renameSync(path.join(out, 'assets', name), path.join(target, 'assets', name));
  for (const name of readdirSync(out)) if (name !== 'assets' && name !== 'index.html') renameSync(path.join(out, name), path.join(target, name));
  for (const a of assetsOf(readFileSync(path.join(out, 'index.html'), 'utf8'))) keep.add(a);
  renameSync(path.join(out, 'index.html'), oldIndex);
  for (const name of readdirSync(path.join(target, 'assets'))) if (!keep.has(`assets/${name}`)) rmSync(path.join(target, 'assets', name), { force: true });
  rmSync(out, { recursive: true, force: true });
}

/**
 * Build the UI when it is missing or stale (or always, with `force`). Returns undefined when
 * it is ready, else why it is not (one line).
 */
export function ensureRendererBuilt(options: { log?: (line: string) => void; force?: boolean; root?: string } = {}): string | undefined {
  const root = options.root ?? ROOT;
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  if (!options.force && rendererStaleness(root) === undefined) return undefined;
  const vite = path.join(root, 'node_modules', 'vite', 'bin', 'vite.js');
  if (!existsSync(vite))
    return `the console UI cannot be built: ${rendererStaleness(root) ?? 'asked to'}, and Vite is not installed (npm install without --omit=dev installs it)`;
  const dist = path.join(root, 'dist');
  mkdirSync(dist, { recursive: true });
  const lock = path.join(dist, '.renderer-build.lock');
  if (!takeBuildLock(lock)) return `the console UI cannot be built: another build has held ${lock} for over ${LOCK_STALE_MS / 1000} s`;
  try {
    // Another build may have finished while this one waited for the lock.
    const why = options.force ? 'asked to' : rendererStaleness(root);
    if (why === undefined) return undefined;
    log(`building the console UI (${why}): vite build --config renderer/vite.config.ts`);
    const started = performance.now();
    const out = path.join(dist, `.renderer-build-${process.pid}`);
    rmSync(out, { recursive: true, force: true });
    const r = spawnSync(
      process.execPath,
      [vite, 'build', '--config', path.join(root, 'renderer', 'vite.config.ts'), '--outDir', out, '--emptyOutDir', '--logLevel', 'warn'],
      { cwd: root, stdio: ['ignore', 'inherit', 'inherit'], timeout: 120_000 },
    );
    if (r.status !== 0 || !existsSync(path.join(out, 'index.html'))) {
      rmSync(out, { recursive: true, force: true });
      return `building the console UI failed (${r.error ? r.error.message : `vite exited with status ${r.status}`}); run npm run build:renderer to see why`;
    }
    installBuild(out, path.join(dist, 'renderer'));
    log(`built the console UI in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    return undefined;
  } finally {
    try {
      unlinkSync(lock);
    } catch {
      // Gone (ENOENT): removed by a build that took it over as stale (this one ran past
      // LOCK_STALE_MS), or by hand. Any other failure leaves a lock the next build takes over
      // once stale; the UI built here stands either way.
    }
  }
}
