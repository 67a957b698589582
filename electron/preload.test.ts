// The preload as the page sees it: electron's contextBridge and ipcRenderer are faked at the
// edge and record what the preload exposes and sends. Then the same bridge wired to the real
// main-side binding (ipc.ts, over a fake ipcMain) to show the two agree on every channel;
// then the bundle esbuild makes, run with a require that knows only `electron`, as a
// sandboxed preload is.
import { EventEmitter } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import vm from 'node:vm';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

type Handler = (event: unknown, ...args: unknown[]) => unknown;
const electron = vi.hoisted(() => {
  const exposed: Array<[string, unknown]> = [];
  return {
    exposed,
    ipcRenderer: { invoke: vi.fn(async (..._args: unknown[]): Promise<unknown> => ({ ok: true, result: null })), on: vi.fn(), removeListener: vi.fn() },
    mainHandlers: new Map<string, Handler>(),
  };
});
vi.mock('electron', () => ({
  contextBridge: { exposeInMainWorld: (key: string, api: unknown) => electron.exposed.push([key, api]) },
  ipcRenderer: electron.ipcRenderer,
  ipcMain: {
    handle: (channel: string, handler: Handler) => electron.mainHandlers.set(channel, handler),
    removeHandler: (channel: string) => electron.mainHandlers.delete(channel),
  },
}));

import type { WebContents } from 'electron';
import type { ConsoleBackend } from '../core/console/backend.ts';
import { COMMAND_NAMES, ContractError, STREAM_NAMES } from '../core/console/contract.ts';
import { bindConsoleIpc } from './ipc.ts';
import { createBridge, type BridgeIpc, type MmtcBridge } from './preload.ts';
import { senderFrameProblem } from './security.ts';

const [[exposedKey, exposedBridge]] = electron.exposed as [[string, MmtcBridge]];

/** A renderer-side ipc whose stream channels can be fired at. */
function fakeRendererIpc() {
  const bus = new EventEmitter();
  const ipc = {
    invoke: vi.fn(async (..._args: unknown[]): Promise<unknown> => ({ ok: true, result: null })),
    on: vi.fn((channel: string, listener: (...args: unknown[]) => void) => bus.on(channel, listener)),
    removeListener: vi.fn((channel: string, listener: (...args: unknown[]) => void) => bus.off(channel, listener)),
  };
  const fire = (channel: string, payload: unknown) => bus.emit(channel, { sender: 'ipcRenderer internals' }, payload);
  return { ipc, fire, bus, asIpc: ipc as unknown as BridgeIpc };
}

beforeEach(() => {
  electron.ipcRenderer.invoke.mockClear();
  electron.ipcRenderer.on.mockClear();
});

describe('what the preload exposes', () => {
  it('exposes exactly one object, window.mmtc, with exactly invoke, subscribe and binding', () => {
    expect(electron.exposed).toHaveLength(1);
    expect(exposedKey).toBe('mmtc');
    expect(Object.keys(exposedBridge).sort()).toEqual(['binding', 'invoke', 'subscribe']);
    expect(exposedBridge.binding).toBe('ipc');
    expect(exposedBridge.invoke).toBeTypeOf('function');
    expect(exposedBridge.subscribe).toBeTypeOf('function');
  });

  it('never hands out ipcRenderer or a generic send', () => {
    for (const value of Object.values(exposedBridge)) expect(value).not.toBe(electron.ipcRenderer);
    expect(exposedBridge).not.toHaveProperty('send');
    expect(exposedBridge).not.toHaveProperty('on');
    expect(exposedBridge).not.toHaveProperty('ipcRenderer');
  });

  it('sends a contract command on its own channel through the real ipcRenderer', async () => {
    electron.ipcRenderer.invoke.mockResolvedValueOnce({ ok: true, result: { text: '# metrics' } });
    expect(await exposedBridge.invoke('metrics.text', {})).toEqual({ ok: true, result: { text: '# metrics' } });
    expect(electron.ipcRenderer.invoke).toHaveBeenCalledExactlyOnceWith('mmtc:call:metrics.text', {});
  });
});

describe('invoke', () => {
  it('refuses names outside the contract locally, sending nothing', async () => {
    const { ipc, asIpc } = fakeRendererIpc();
    const bridge = createBridge(asIpc);
    for (const name of ['shell.exec', 'config.apply ', '__proto__', 'constructor', 'toString', 'hasOwnProperty', '', 42, null]) {
      const answer = await bridge.invoke(name as never, {} as never);
      expect(answer, String(name)).toMatchObject({ ok: false, error: { code: 'not_found' } });
      if (!answer.ok) expect(answer.error.message).toContain(COMMAND_NAMES.join(', '));
    }
    expect(ipc.invoke).not.toHaveBeenCalled();
  });

  it("passes main's answer on, success and contract error alike", async () => {
    const { ipc, asIpc } = fakeRendererIpc();
    const bridge = createBridge(asIpc);
    const conflict = { ok: false, ...new ContractError('conflict', 'stale revision', undefined, [], { currentRevision: 9, expectedRevision: 2 }).toWire() };
    ipc.invoke.mockResolvedValueOnce({ ok: true, result: { revision: 3 } }).mockResolvedValueOnce(conflict);
    expect(await bridge.invoke('config.exportYaml', {})).toEqual({ ok: true, result: { revision: 3 } });
    expect(await bridge.invoke('config.reloadFile', { expectedRevision: 2 })).toEqual(conflict);
  });

  it("turns Electron's opaque rejection and malformed answers into internal errors that say what happened", async () => {
    const { ipc, asIpc } = fakeRendererIpc();
    const bridge = createBridge(asIpc);
    ipc.invoke.mockRejectedValueOnce(new Error("Error invoking remote method 'mmtc:call:overview': Error: No handler registered for 'mmtc:call:overview'"));
    const rejected = await bridge.invoke('overview', {});
    expect(rejected).toMatchObject({ ok: false, error: { code: 'internal' } });
    if (!rejected.ok) expect(rejected.error.message).toMatch(/^the overview call did not reach the console backend: /);
    ipc.invoke.mockResolvedValueOnce('surprise');
    expect(await bridge.invoke('overview', {})).toMatchObject({ ok: false, error: { code: 'internal' } });
  });
});

describe('subscribe', () => {
  it('refuses names outside the contract, sending and listening to nothing', () => {
    const { ipc, asIpc } = fakeRendererIpc();
    const bridge = createBridge(asIpc);
    for (const name of ['logs', 'subscribe', '__proto__', '', 7]) {
      expect(() => bridge.subscribe(name as never, () => {}), String(name)).toThrow(`the streams are ${STREAM_NAMES.join(', ')}`);
    }
    expect(() => bridge.subscribe('traffic', 'not a function' as never)).toThrow(/must be a function/);
    expect(ipc.invoke).not.toHaveBeenCalled();
    expect(ipc.on).not.toHaveBeenCalled();
  });

  it('gives the listener the payload only, never the IpcRendererEvent', () => {
    const { ipc, fire, asIpc } = fakeRendererIpc();
    const bridge = createBridge(asIpc);
    const listener = vi.fn();
    bridge.subscribe('config', listener);
    expect(ipc.on).toHaveBeenCalledWith('mmtc:stream:config', expect.any(Function));
    expect(ipc.invoke).toHaveBeenCalledExactlyOnceWith('mmtc:subscribe', 'config');
    fire('mmtc:stream:config', { revision: 4, client: 'http', appliedAt: 1 });
    expect(listener).toHaveBeenCalledExactlyOnceWith({ revision: 4, client: 'http', appliedAt: 1 });
  });

  it('shares one IPC subscription per stream, and ends it with the last listener', () => {
    const { ipc, fire, bus, asIpc } = fakeRendererIpc();
    const bridge = createBridge(asIpc);
    const a = vi.fn();
    const b = vi.fn();
    const stopA = bridge.subscribe('traffic', a);
    const stopB = bridge.subscribe('traffic', b);
    expect(ipc.invoke.mock.calls).toEqual([['mmtc:subscribe', 'traffic']]);
    fire('mmtc:stream:traffic', { n: 1 });
    expect([a.mock.calls.length, b.mock.calls.length]).toEqual([1, 1]);
    stopA();
    stopA();
    expect(ipc.invoke.mock.calls).toHaveLength(1);
    fire('mmtc:stream:traffic', { n: 2 });
    expect([a.mock.calls.length, b.mock.calls.length]).toEqual([1, 2]);
    stopB();
    expect(ipc.invoke.mock.calls[1]).toEqual(['mmtc:unsubscribe', 'traffic']);
    expect(bus.listenerCount('mmtc:stream:traffic')).toBe(0);
  });

  it('keeps delivering to the other listeners when one throws', () => {
    const { fire, asIpc } = fakeRendererIpc();
    const bridge = createBridge(asIpc);
    const quiet = vi.spyOn(console, 'error').mockImplementation(() => {});
    const after = vi.fn();
    bridge.subscribe('calibration', () => {
      throw new Error('view bug');
    });
    bridge.subscribe('calibration', after);
    fire('mmtc:stream:calibration', { url: 'grpc://a:1', done: 1, total: 4, phase: 'inline' });
    expect(after).toHaveBeenCalledOnce();
    quiet.mockRestore();
  });
});

describe('the bridge against the real main-side binding', () => {
  it('agrees with ipc.ts on every command and stream channel', async () => {
    const mainFrame = { url: 'mmtc-app://console/index.html', parent: null, processId: 1, routingId: 1 };
    const contents = Object.assign(new EventEmitter(), {
      mainFrame,
      isDestroyed: () => false,
      send: (channel: string, payload: unknown) => renderer.fire(channel, payload),
    });
    const renderer = fakeRendererIpc();
    const listeners: Record<string, (payload: unknown) => void> = {};
    const backend = {
      invoke: vi.fn(async (command: string) => ({ command })),
      subscribe: vi.fn((stream: string, listener: (payload: unknown) => void) => {
        listeners[stream] = listener;
        return () => delete listeners[stream];
      }),
      close: async () => {},
    } as unknown as ConsoleBackend;
    const ipc = bindConsoleIpc({
      backend,
      refuseSender: (event) => senderFrameProblem(event, { appOrigin: 'mmtc-app://console', isAppWindow: (c) => c === (contents as unknown) }),
    });
    renderer.ipc.invoke.mockImplementation(async (channel: unknown, ...args: unknown[]) => {
      const handler = electron.mainHandlers.get(channel as string);
      if (!handler) throw new Error(`No handler registered for '${String(channel)}'`);
      return handler({ sender: contents as unknown as WebContents, senderFrame: mainFrame }, ...args);
    });
    const bridge = createBridge(renderer.asIpc);

    for (const command of COMMAND_NAMES) {
      const answer = await bridge.invoke(command, {});
      // Empty input is valid for some commands only; either way it reached main's handler.
      expect(answer.ok ? 'ok' : answer.error.code, command).toMatch(/^(ok|invalid_input)$/);
    }
    expect(await bridge.invoke('overview', {})).toEqual({ ok: true, result: { command: 'overview' } });

    for (const stream of STREAM_NAMES) {
      const got = vi.fn();
      const stop = bridge.subscribe(stream, got);
      await vi.waitFor(() => expect(listeners[stream]).toBeTypeOf('function'));
      listeners[stream]!({ from: stream });
      expect(got, stream).toHaveBeenCalledExactlyOnceWith({ from: stream });
      stop();
      await vi.waitFor(() => expect(listeners[stream]).toBeUndefined());
    }
    ipc.close();
  });
});

describe('the bundled preload', () => {
  let out: string;
  beforeEach(() => {
    out = mkdtempSync(path.join(tmpdir(), 'mmtc-preload-'));
  });
  afterEach(() => rmSync(out, { recursive: true, force: true }));

  it('requires nothing but electron and exposes only window.mmtc', async () => {
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion -- a string specifier: TypeScript does not look for types of this plain .mjs module
    const { buildPreload } = (await import('../scripts/build-electron.mjs' as string)) as { buildPreload(o: { outfile: string }): Promise<unknown> };
    const outfile = path.join(out, 'preload.cjs');
    await buildPreload({ outfile });
    const required: string[] = [];
    const exposed: Array<[string, unknown]> = [];
    const sandboxRequire = (name: string) => {
      required.push(name);
      if (name !== 'electron') throw new Error(`module not found: ${name}`);
      return { contextBridge: { exposeInMainWorld: (key: string, api: unknown) => exposed.push([key, api]) }, ipcRenderer: fakeRendererIpc().ipc };
    };
    const module = { exports: {} };
    vm.runInNewContext(readFileSync(outfile, 'utf8'), { require: sandboxRequire, module, exports: module.exports, console });
    expect(new Set(required)).toEqual(new Set(['electron']));
    expect(exposed.map(([key]) => key)).toEqual(['mmtc']);
    expect(Object.keys(exposed[0]![1] as object).sort()).toEqual(['binding', 'invoke', 'subscribe']);
  });
});
