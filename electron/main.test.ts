// The start-up sequence with Electron faked at the edge (an app whose readiness the test
// controls, windows and web contents that record what was done to them) and a fake
// startConsole handing out a fake backend. The guards, scheme, IPC binding and window set-up
// are the real modules, driven the way Electron would drive them.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

type Handler = (event: unknown, ...args: unknown[]) => unknown;

const fake = vi.hoisted(() => {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- vi.hoisted runs before the imports are bound
  const { EventEmitter: Emitter } = require('node:events') as typeof import('node:events');
  const state = {
    order: [] as string[],
    schemes: [] as unknown[],
    protocolHandlers: new Map<string, unknown>(),
    ipcHandlers: new Map<string, Handler>(),
    windows: [] as Array<InstanceType<typeof FakeBrowserWindow>>,
    errorBoxes: [] as Array<[string, string]>,
    app: undefined as unknown as InstanceType<typeof FakeApp>,
  };

  class FakeApp extends Emitter {
    isPackaged = false;
    private resolveReady!: () => void;
    private readyPromise = new Promise<void>((resolve) => (this.resolveReady = resolve));
    lock = true;
    exitCode: number | undefined;
    quitRequests = 0;
    quitDone = false;
    setName = vi.fn((_n: string) => state.order.push('setName'));
    setPath = vi.fn();
    getPath = vi.fn(() => '/home/operator/.config');
    requestSingleInstanceLock = vi.fn(() => this.lock);
    enableSandbox = vi.fn(() => state.order.push('enableSandbox'));
    exit = vi.fn((code: number) => (this.exitCode = code));
    quit = vi.fn(() => {
      this.quitRequests += 1;
      let prevented = false;
      this.emit('before-quit', { preventDefault: () => (prevented = true) });
      if (!prevented) this.quitDone = true;
    });
    whenReady = () => this.readyPromise;
    becomeReady() {
      state.order.push('ready');
      this.resolveReady();
    }
  }

  class FakeWebContents extends Emitter {
    static next = 1;
    readonly mainFrame = { url: 'mmtc-app://console/index.html', parent: null, processId: FakeWebContents.next++, routingId: 1 };
    readonly session = { setPermissionRequestHandler: vi.fn(), setPermissionCheckHandler: vi.fn(), setDevicePermissionHandler: vi.fn() };
    setWindowOpenHandler = vi.fn();
    send = vi.fn();
    isDestroyed = () => false;
  }

  class FakeBrowserWindow extends Emitter {
    readonly webContents = new FakeWebContents();
    loadURL = vi.fn(async (_url: string) => {});
    show = vi.fn();
    focus = vi.fn();
    restore = vi.fn();
    isMinimized = () => false;
    isVisible = () => false;
    isDestroyed = () => false;
    constructor(readonly options: Record<string, unknown>) {
      super();
      state.windows.push(this);
      // Electron announces each new web contents before anything loads in it.
      state.app.emit('web-contents-created', {}, this.webContents);
    }
  }

  return { state, FakeApp, FakeWebContents, FakeBrowserWindow };
});

vi.mock('electron', () => ({
  get app() {
    return fake.state.app;
  },
  BrowserWindow: fake.FakeBrowserWindow,
  dialog: { showErrorBox: (title: string, content: string) => fake.state.errorBoxes.push([title, content]) },
  shell: { openExternal: vi.fn(async () => {}) },
  protocol: {
    registerSchemesAsPrivileged: (schemes: unknown[]) => {
      fake.state.order.push('registerSchemes');
      fake.state.schemes.push(...schemes);
    },
    handle: (scheme: string, handler: unknown) => {
      fake.state.order.push('protocol.handle');
      fake.state.protocolHandlers.set(scheme, handler);
    },
  },
  ipcMain: {
    handle: (channel: string, handler: Handler) => {
      if (fake.state.ipcHandlers.has(channel)) throw new Error(`second handler for ${channel}`);
      fake.state.ipcHandlers.set(channel, handler);
    },
    removeHandler: (channel: string) => fake.state.ipcHandlers.delete(channel),
  },
}));

import type { ConsoleBackend } from '../core/console/backend.ts';
import { COMMAND_NAMES } from '../core/console/contract.ts';
import { ConfigError } from '../core/config/errors.ts';
import { APP_NAME, WINDOW_TITLE, desktopFlags, runDesktopApp, userArguments, type RunningConsole, type StartConsole } from './main.ts';
import { SECURE_WEB_PREFERENCES } from './security.ts';

const flush = () => new Promise((resolve) => setTimeout(resolve, 0));

function fakeConsole() {
  const backend = {
    invoke: vi.fn(async (command: string) => ({ command })),
    subscribe: vi.fn(() => () => {}),
    close: vi.fn(async () => {}),
  };
  const running: RunningConsole = { backend: backend as unknown as ConsoleBackend, routerUrl: 'http://127.0.0.1:31000', close: vi.fn(async () => {}) };
  const startConsole = vi.fn<StartConsole>(async () => running);
  return { backend, running, startConsole };
}

let signalListeners: Map<string, NodeJS.SignalsListener[]>;
beforeEach(() => {
  fake.state.order.length = 0;
  fake.state.schemes.length = 0;
  fake.state.protocolHandlers.clear();
  fake.state.ipcHandlers.clear();
  fake.state.windows.length = 0;
  fake.state.errorBoxes.length = 0;
  fake.state.app = new fake.FakeApp();
  vi.stubEnv('MMTC_EXIT_WITH_PARENT', '');
  signalListeners = new Map(['SIGINT', 'SIGTERM', 'SIGHUP'].map((s) => [s, process.listeners(s as NodeJS.Signals)]));
});
afterEach(() => {
  vi.unstubAllEnvs();
  // runDesktopApp quits the app on these signals; leave the test process as it was.
  for (const [signal, before] of signalListeners)
    for (const l of process.listeners(signal as NodeJS.Signals)) if (!before.includes(l)) process.off(signal, l as () => void);
});

function start(startConsole: StartConsole, argv = ['/usr/lib/electron/electron', '/work/main/electron/entry.mjs']) {
  const log = vi.fn();
  runDesktopApp({ argv, startConsole, log });
  return { app: fake.state.app, log };
}

describe('before the app is ready', () => {
  it('names the app, takes the single-instance lock, enables the sandbox, registers the scheme and installs the guards', () => {
    const { app } = start(fakeConsole().startConsole);
    expect(app.setName).toHaveBeenCalledWith(APP_NAME);
    expect(app.setPath).toHaveBeenCalledWith('userData', '/home/operator/.config/mm-transport-console');
    expect(app.requestSingleInstanceLock).toHaveBeenCalledOnce();
    expect(fake.state.order).toEqual(['setName', 'enableSandbox', 'registerSchemes']);
    expect(fake.state.schemes).toEqual([{ scheme: 'mmtc-app', privileges: expect.objectContaining({ standard: true, secure: true }) }]);
    expect(app.listenerCount('web-contents-created')).toBe(1);
    expect(fake.state.windows).toHaveLength(0);
    expect(fake.state.ipcHandlers.size).toBe(0);
  });

  it('starts the core at once with the router flags it was given, unread Chromium switches aside', async () => {
    const { startConsole } = fakeConsole();
    start(startConsole, [
      '/usr/lib/electron/electron',
      '/work/main/electron/entry.mjs',
      '--port',
      '31000',
      '--enable-logging',
      '--worker-urls',
      'grpc://a:1',
      'grpc://b:2',
    ]);
    await flush();
    expect(startConsole).toHaveBeenCalledOnce();
    const options = startConsole.mock.calls[0]![0];
    expect(options.flags).toEqual({ port: '31000', workerUrls: ['grpc://a:1', 'grpc://b:2'] });
    expect(options.processEnv).toBeUndefined(); // the core starts its embedded worker as a thread here
  });

  it('quits at once as a second instance, starting nothing', async () => {
    fake.state.app = new fake.FakeApp();
    fake.state.app.lock = false;
    const { startConsole } = fakeConsole();
    const { app } = start(startConsole);
    await flush();
    expect(app.quit).toHaveBeenCalledOnce();
    expect(fake.state.schemes).toEqual([]);
    expect(startConsole).not.toHaveBeenCalled();
  });
});

describe('when the app is ready', () => {
  async function ready() {
    const core = fakeConsole();
    const { app, log } = start(core.startConsole);
    app.becomeReady();
    await flush();
    return { ...core, app, log, window: fake.state.windows[0]! };
  }

  it('serves the scheme, binds the IPC and opens one hidden window with the secure webPreferences', async () => {
    const { window } = await ready();
    expect(fake.state.order.slice(-2)).toEqual(['ready', 'protocol.handle']);
    expect(fake.state.protocolHandlers.has('mmtc-app')).toBe(true);
    expect([...fake.state.ipcHandlers.keys()]).toEqual(expect.arrayContaining(COMMAND_NAMES.map((c) => `mmtc:call:${c}`)));
    expect(fake.state.windows).toHaveLength(1);
    expect(window.options).toMatchObject({ title: WINDOW_TITLE, show: false });
    expect(window.options.webPreferences).toEqual(SECURE_WEB_PREFERENCES);
    expect(window.options.width).toBeGreaterThanOrEqual(1024);
    expect(window.loadURL).toHaveBeenCalledExactlyOnceWith('mmtc-app://console/index.html');
  });

  it('guards the window before it loads, and shows it on its first paint', async () => {
    const { window } = await ready();
    expect(window.webContents.setWindowOpenHandler).toHaveBeenCalledOnce();
    expect(window.webContents.listenerCount('will-navigate')).toBe(1);
    expect(window.webContents.session.setPermissionRequestHandler).toHaveBeenCalledOnce();
    expect(window.show).not.toHaveBeenCalled();
    window.emit('ready-to-show');
    expect(window.show).toHaveBeenCalledOnce();
  });

  it('answers IPC from its own window and refuses every other web contents', async () => {
    const { window, backend } = await ready();
    const handler = fake.state.ipcHandlers.get('mmtc:call:overview')!;
    expect(await handler({ sender: window.webContents, senderFrame: window.webContents.mainFrame }, {})).toEqual({ ok: true, result: { command: 'overview' } });
    const stranger = new fake.FakeWebContents();
    expect(await handler({ sender: stranger, senderFrame: stranger.mainFrame }, {})).toMatchObject({ ok: false, error: { code: 'forbidden' } });
    expect(backend.invoke).toHaveBeenCalledOnce();
  });

  it('closes the backend before quitting when the last window closes', async () => {
    const { app, running } = await ready();
    app.emit('window-all-closed');
    expect(app.quitDone).toBe(false);
    await vi.waitFor(() => expect(app.quitDone).toBe(true));
    expect(running.close).toHaveBeenCalledOnce();
    expect(app.quitRequests).toBe(2);
    expect(fake.state.ipcHandlers.size).toBe(0);
  });
});

describe('when the core cannot start', () => {
  it('shows the configuration problem and exits 2', async () => {
    const startConsole = vi.fn<StartConsole>(async () => {
      throw new ConfigError([{ path: '--port', message: "invalid value 'x' for --port: expected a port number" }]);
    });
    const { app, log } = start(startConsole);
    app.becomeReady();
    await vi.waitFor(() => expect(app.exit).toHaveBeenCalledWith(2));
    expect(fake.state.errorBoxes).toEqual([[`${APP_NAME} could not start`, "invalid value 'x' for --port: expected a port number"]]);
    expect(log).toHaveBeenCalledWith(expect.stringContaining('could not start the router'));
  });

  it('exits 1 for any other failure, and a bad flag value is a usage error', async () => {
    const failing = vi.fn<StartConsole>(async () => {
      throw new Error('EADDRINUSE: 127.0.0.1:30000');
    });
    const { app } = start(failing);
    app.becomeReady();
    await vi.waitFor(() => expect(app.exit).toHaveBeenCalledWith(1));

    fake.state.app = new fake.FakeApp();
    const second = start(fakeConsole().startConsole, ['electron', 'entry.mjs', '--port']);
    second.app.becomeReady();
    await vi.waitFor(() => expect(second.app.exit).toHaveBeenCalledWith(2));
  });
});

describe('arguments and environment', () => {
  it('drops the executable, and unpackaged the entry script', () => {
    expect(userArguments(['electron', 'entry.mjs', '--port', '1'], false)).toEqual(['--port', '1']);
    expect(userArguments(['/opt/mm-transport-console/mm-transport-console', '--port', '1'], true)).toEqual(['--port', '1']);
  });

  it('reads the router flags the CLI has', () => {
    expect(desktopFlags(['--config', 'router.yaml', '--multimodal-tensor-transport', 'auto', '--ozone-platform=wayland'])).toEqual({
      config: 'router.yaml',
      multimodalTensorTransport: 'auto',
    });
  });
});
