// `mmtc desktop`: start the Electron app from the development tree (the packaged app starts
// itself). It decides whether the desktop app can open here at all, and says why not in a
// form the caller can act on (scripts/start.mjs then opens the console in the browser): the
// Electron binary may be missing (CI and this repo's `allowScripts` skip its download, and
// nothing here downloads it: ELECTRON_INSTALL_HINT says how), or there may be no display (a
// headless GPU host over SSH).
//
// Electron runs as a child with this process's stdio and environment, which bin/mmtc.js has
// already given the malloc settings; glibc cuts GLIBC_TUNABLES down in a process's own
// environment, so the whole value is restored from MMTC_GLIBC_TUNABLES as the router does
// for its worker. The child exits with us (MMTC_EXIT_WITH_PARENT) and gets our signals.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { constants } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const ENTRY_PATH = path.join(ROOT, 'electron', 'entry.mjs');
export const PRELOAD_SOURCE = path.join(ROOT, 'electron', 'preload.ts');
export const PRELOAD_BUNDLE = path.join(ROOT, 'dist', 'electron', 'preload.cjs');
const PRELOAD_METAFILE = path.join(ROOT, 'dist', 'electron', 'preload.meta.json');
const BUILD_SCRIPT = path.join(ROOT, 'scripts', 'build-electron.mjs');

/** The exit code of `mmtc desktop` when the desktop app cannot open here (sysexits EX_UNAVAILABLE). */
export const EXIT_DESKTOP_UNAVAILABLE = 69;

export type ElectronBinary = { found: true; path: string } | { found: false; reason: string };

/**
 * What the operator does about a missing Electron binary. Nothing here downloads it: a start
 * that tried would stall where Electron's downloads cannot be reached (an air-gapped box).
 */
export const ELECTRON_INSTALL_HINT =
  'for the desktop app, download it once with `node node_modules/electron/install.js` where github.com (or your ELECTRON_MIRROR) is reachable, without ELECTRON_SKIP_BINARY_DOWNLOAD set (air-gapped: electron/README.md)';

/**
 * Where the Electron executable is. The `electron` package's export is that path, read from
 * the path.txt its install script writes; without the script's download there is none.
 */
export function locateElectronBinary(): ElectronBinary {
  const require = createRequire(import.meta.url);
  let resolved: string;
  try {
    resolved = require.resolve('electron');
  } catch {
    return { found: false, reason: 'the electron package is not installed (it is a devDependency: run npm install)' };
  }
  // A failed or later-completed install must be seen afresh, not from require's cache.
  delete require.cache[resolved];
  let binary: unknown;
  try {
    binary = require('electron');
  } catch {
    return {
      found: false,
      reason: `Electron's binary is not installed (npm install does not run its download here: allowScripts in package.json, or ELECTRON_SKIP_BINARY_DOWNLOAD); ${ELECTRON_INSTALL_HINT}`,
    };
  }
  if (typeof binary !== 'string') return { found: false, reason: `the electron package exported ${typeof binary}, not the path of its binary` };
  if (!existsSync(binary)) return { found: false, reason: `the Electron binary is missing at ${binary}; ${ELECTRON_INSTALL_HINT}` };
  return { found: true, path: binary };
}

/** Why no window can open on this machine, or null. Linux needs an X11 or Wayland display. */
export function displayProblem(env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform): string | null {
  if (platform !== 'linux') return null;
  if (env.DISPLAY || env.WAYLAND_DISPLAY) return null;
  return 'no display to open a window on (neither DISPLAY nor WAYLAND_DISPLAY is set)';
}

function mtime(file: string): number {
  try {
    return statSync(file).mtimeMs;
  } catch {
    return Number.POSITIVE_INFINITY; // gone or unreadable: counts as newer, so the bundle is rebuilt
  }
}

/** The bundle is missing, or older than preload.ts, the build script or any input esbuild recorded. */
export function preloadIsStale(): boolean {
  if (!existsSync(PRELOAD_BUNDLE)) return true;
  const built = mtime(PRELOAD_BUNDLE);
  const inputs = [PRELOAD_SOURCE, BUILD_SCRIPT];
  try {
    const meta = JSON.parse(readFileSync(PRELOAD_METAFILE, 'utf8')) as { inputs?: Record<string, unknown> };
    for (const input of Object.keys(meta.inputs ?? {})) inputs.push(path.resolve(ROOT, input));
  } catch {
    return true; // no readable metafile: the inputs are unknown, so rebuild
  }
  return inputs.some((input) => mtime(input) > built);
}

/** Build the preload as `npm run build:electron` does (the same function). */
export async function buildPreload(): Promise<void> {
  const script = (await import(pathToFileURL(BUILD_SCRIPT).href)) as { buildPreload(): Promise<unknown> };
  await script.buildPreload();
}

export type DesktopUnavailable = 'electron-missing' | 'no-display' | 'preload-build-failed';

export type DesktopLaunchResult =
  /** Electron ran; its exit code (128 + signal number when a signal ended it). */
  | { status: 'exited'; exitCode: number }
  /** The desktop app cannot open here; `mmtc serve` can (reason is one line for the operator). */
  | { status: 'unavailable'; problem: DesktopUnavailable; reason: string; exitCode: typeof EXIT_DESKTOP_UNAVAILABLE };

export interface LaunchDesktopOptions {
  /** Arguments for the app: the router flags (`--config`, `--port`, …), passed on as given. */
  args: string[];
  log: (line: string) => void;
}

/** The environment of the Electron child. */
export function electronEnvironment(env: NodeJS.ProcessEnv = process.env, parentPid: number = process.pid): NodeJS.ProcessEnv {
  const next: NodeJS.ProcessEnv = { ...env, MMTC_EXIT_WITH_PARENT: String(parentPid) };
  if (env.MMTC_GLIBC_TUNABLES) next.GLIBC_TUNABLES = env.MMTC_GLIBC_TUNABLES;
  // Set, it would make Electron a plain Node that cannot import 'electron'.
  delete next.ELECTRON_RUN_AS_NODE;
  return next;
}

export async function launchDesktop(options: LaunchDesktopOptions): Promise<DesktopLaunchResult> {
  const unavailable = (problem: DesktopUnavailable, reason: string): DesktopLaunchResult => ({
    status: 'unavailable',
    problem,
    reason,
    exitCode: EXIT_DESKTOP_UNAVAILABLE,
  });

  const electron = locateElectronBinary();
  if (!electron.found) return unavailable('electron-missing', electron.reason);
  const noDisplay = displayProblem();
  if (noDisplay) return unavailable('no-display', noDisplay);

  if (preloadIsStale()) {
    options.log('building the preload bridge (dist/electron/preload.cjs)');
    try {
      await buildPreload();
    } catch (err) {
      return unavailable('preload-build-failed', `the preload bridge did not build: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  const child = spawn(electron.path, [ENTRY_PATH, ...options.args], { stdio: 'inherit', env: electronEnvironment() });
  const forward = (signal: NodeJS.Signals) => () => child.kill(signal);
  const forwarders = (['SIGINT', 'SIGTERM', 'SIGHUP'] as const).map((signal) => [signal, forward(signal)] as const);
  for (const [signal, handler] of forwarders) process.on(signal, handler);
  try {
    const exitCode = await new Promise<number>((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', (code, signal) => resolve(code ?? 128 + (signal ? (constants.signals[signal] ?? 0) : 1)));
    });
    return { status: 'exited', exitCode };
  } catch (err) {
    return unavailable('electron-missing', `Electron did not start (${electron.path}): ${err instanceof Error ? err.message : String(err)}`);
  } finally {
    for (const [signal, handler] of forwarders) process.off(signal, handler);
  }
}
