// The desktop app's start-up, in the order Electron demands: before `ready`, the app's
// identity, one instance, the sandbox for every renderer, the privileged scheme and the
// security guards; at `ready`, the scheme's handler, the IPC binding and one window. The
// core (router, backend) starts at once in the background, so the window appears while it
// loads; calls made before the backend is up wait for it. Quitting closes the backend (and
// with it the router, its worker and its /dev/shm files) before the process exits.
//
// Nothing heavy runs on this thread beyond the router's own event loop: image preprocessing
// is in the core's worker threads. electron/entry.mjs loads this module through tsx and
// calls runDesktopApp; importing it has no side effects, so tests can drive it.
import { app, BrowserWindow, dialog, type WebContents } from 'electron';
import { Command, CommanderError, Option } from 'commander';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { ConsoleBackend } from '../core/console/backend.ts';
import { ConfigError } from '../core/config/errors.ts';
import { CONFIG_FLAG_HELP, type ConfigFlags } from '../core/config/load.ts';
import { bindConsoleIpc, type ConsoleIpc } from './ipc.ts';
import { APP_ENTRY_URL, APP_ORIGIN, RENDERER_MISSING_MESSAGE, handleAppProtocol, registerAppScheme, rendererIsBuilt } from './protocol.ts';
import { PRELOAD_PATH, SECURE_WEB_PREFERENCES, installSecurityGuards, projectLinkRules, senderFrameProblem } from './security.ts';

export const APP_NAME = 'mm-transport-console';
export const WINDOW_TITLE = 'mm-transport-console';
/** How long quitting waits for the backend to close before exiting anyway. */
export const CLOSE_TIMEOUT_MS = 10_000;

/** What core/console/console.ts's startConsole gives back. */
export interface RunningConsole {
  backend: ConsoleBackend;
  routerUrl: string;
  close(): Promise<void>;
}
export type StartConsole = (options: {
  flags: ConfigFlags;
  log?: (line: string) => void;
  processEnv?: Readonly<Record<string, string | undefined>>;
}) => Promise<RunningConsole>;

export interface DesktopAppOptions {
  /** process.argv of the Electron main process. */
  argv: readonly string[];
  /** Defaults to core/console/console.ts's startConsole (tests pass one with a fake backend). */
  startConsole?: StartConsole;
  log?: (line: string) => void;
}

/**
 * The router flags given to `mmtc desktop` (the same set as `mmtc router`). Options Chromium
 * or Electron understand (`--ozone-platform=wayland`, `--enable-logging`) pass through unread.
 */
export function desktopFlags(args: readonly string[]): ConfigFlags {
  const command = new Command('mmtc desktop')
    .helpOption(false)
    .allowUnknownOption()
    .allowExcessArguments()
    .exitOverride()
    .configureOutput({ writeErr: () => {}, writeOut: () => {} });
  for (const flag of CONFIG_FLAG_HELP) command.addOption(new Option(flag.flags, flag.description));
  command.parse([...args], { from: 'user' });
  return command.opts<ConfigFlags>();
}

/** The arguments after the executable (and, unpackaged, after electron/entry.mjs). */
export function userArguments(argv: readonly string[], packaged: boolean): string[] {
  return argv.slice(packaged ? 1 : 2);
}

function readPackageJson(): { repository?: string | { url?: string }; homepage?: string } {
  try {
    return JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { repository?: string | { url?: string }; homepage?: string };
  } catch {
    return {}; // no readable package.json (a repackaged app): no project links to allow
  }
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms / 1000} s`)), ms);
    timer.unref?.();
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

/** The console window: secure webPreferences, hidden until its first paint so it never flashes empty. */
export function createConsoleWindow(log: (line: string) => void): BrowserWindow {
  const window = new BrowserWindow({
    title: WINDOW_TITLE,
    width: 1440,
    height: 900,
    minWidth: 960,
    minHeight: 600,
    show: false,
    autoHideMenuBar: true,
    webPreferences: { ...SECURE_WEB_PREFERENCES },
  });
  window.once('ready-to-show', () => window.show());
  window.webContents.on('did-fail-load', (_event, code, description, url, isMainFrame) => {
    if (!isMainFrame) return;
    log(`the console page did not load (${url}: ${description}, code ${code})`);
    if (!window.isDestroyed() && !window.isVisible()) window.show();
  });
  window.webContents.on('preload-error', (_event, preloadPath, error) => log(`the preload bridge failed in the page (${preloadPath}): ${error.message}`));
  window.webContents.on('render-process-gone', (_event, details) =>
    log(`the console page's process ended (${details.reason}); reload the window to start it again`),
  );
  return window;
}

async function loadStartConsole(): Promise<StartConsole> {
  // Imported on demand, not at the top: the core's module graph then loads while Electron
  // starts instead of before it, and the window appears sooner.
  const core = await import('../core/console/console.ts');
  return core.startConsole;
}

export function runDesktopApp(options: DesktopAppOptions): void {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));

  // Unpackaged, Electron would call the app "Electron" and share ~/.config/Electron with
  // every other development app.
  app.setName(APP_NAME);
  app.setPath('userData', path.join(app.getPath('appData'), APP_NAME));
  // Two consoles would start two routers on the same port; and the core's embedded worker,
  // started as `process.execPath …`, must not become a second app that starts a third.
  if (!app.requestSingleInstanceLock()) {
    log(`${APP_NAME} is already running; bringing its window to the front instead`);
    app.quit();
    return;
  }
  app.enableSandbox();
  registerAppScheme();
  installSecurityGuards(app, { appOrigin: APP_ORIGIN, externalLinks: projectLinkRules(readPackageJson()), log });

  const appWindows = new WeakSet<WebContents>();
  let window: BrowserWindow | null = null;
  let ipc: ConsoleIpc | null = null;
  let quitting: 'no' | 'closing' | 'done' = 'no';

  const started = (async () => {
    const flags = desktopFlags(userArguments(options.argv, app.isPackaged));
    const startConsole = options.startConsole ?? (await loadStartConsole());
    // The core runs its embedded reference worker as a thread here (core/refworker/embedded.ts).
    return startConsole({ flags, log });
  })();
  const backend = started.then((running) => running.backend);

  const fail = async (err: unknown) => {
    if (quitting !== 'no') return;
    const code = err instanceof ConfigError || err instanceof CommanderError ? 2 : 1;
    log(`${APP_NAME} could not start the router: ${message(err)}`);
    await app.whenReady();
    dialog.showErrorBox(`${APP_NAME} could not start`, message(err));
    ipc?.close();
    ipc = null;
    app.exit(code);
  };
  started.then(
    (running) => log(`${APP_NAME}: router listening on ${running.routerUrl}`),
    (err: unknown) => void fail(err),
  );

  const shutdown = async () => {
    ipc?.close();
    ipc = null;
    try {
      await withTimeout(
        started.then(
          (running) => running.close(),
          () => {},
        ),
        CLOSE_TIMEOUT_MS,
        'closing the console backend',
      );
    } catch (err) {
      log(`${APP_NAME} did not close cleanly: ${message(err)}`);
    }
  };

  app.on('before-quit', (event) => {
    if (quitting === 'done') return;
    event.preventDefault();
    if (quitting === 'closing') return;
    quitting = 'closing';
    void shutdown().finally(() => {
      quitting = 'done';
      app.quit();
    });
  });
  app.on('window-all-closed', () => app.quit());
  app.on('second-instance', () => {
    if (!window || window.isDestroyed()) return;
    if (window.isMinimized()) window.restore();
    window.focus();
  });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => app.quit());

  // Started by `mmtc desktop` (launch.ts): do not outlive it, even if it is killed outright.
  const parent = Number(process.env.MMTC_EXIT_WITH_PARENT);
  if (parent > 0) {
    const watchdog = setInterval(() => {
      try {
        process.kill(parent, 0);
      } catch {
        // ESRCH: the parent is gone. (EPERM would mean its pid now belongs to another user's
        // process: the parent, which ran as this user, is gone too.)
        clearInterval(watchdog);
        log(`the mmtc process that started ${APP_NAME} (pid ${parent}) is gone; quitting`);
        app.quit();
      }
    }, 1000);
    watchdog.unref();
  }

  app
    .whenReady()
    .then(() => {
      handleAppProtocol({ log });
      if (!rendererIsBuilt()) log(RENDERER_MISSING_MESSAGE);
      if (!existsSync(PRELOAD_PATH)) log(`the preload bridge is not built (${PRELOAD_PATH} is missing): run \`npm run build:electron\``);
      ipc = bindConsoleIpc({
        backend,
        log,
        refuseSender: (event) => senderFrameProblem(event, { appOrigin: APP_ORIGIN, isAppWindow: (contents) => appWindows.has(contents) }),
      });
      const created = createConsoleWindow(log);
      window = created;
      appWindows.add(created.webContents);
      created.on('closed', () => {
        if (window === created) window = null;
      });
      created.loadURL(APP_ENTRY_URL).catch((err: unknown) => log(`could not load ${APP_ENTRY_URL}: ${message(err)}`));
    })
    .catch((err: unknown) => void fail(err));
}
