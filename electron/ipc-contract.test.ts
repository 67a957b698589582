// The console's IPC binding end to end, as the desktop app wires it: the renderer's client
// (createIpcClient) over the preload's bridge (createBridge) over Electron's IPC, into main's
// handlers (bindConsoleIpc with the real sender check) and the real console backend in this
// process, with real reference workers. Only `electron` itself is faked: ipcMain records the
// handlers and ipcRenderer.invoke calls them with an event from the app's top frame, as
// Chromium would. Then the same contract suite the HTTP binding passes.
import { EventEmitter } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

type Handler = (event: unknown, ...args: unknown[]) => unknown;
const electron = vi.hoisted(() => ({ handlers: new Map<string, Handler>() }));
vi.mock('electron', () => ({
  ipcMain: {
    handle(channel: string, handler: Handler) {
      if (electron.handlers.has(channel)) throw new Error(`Attempted to register a second handler for '${channel}'`);
      electron.handlers.set(channel, handler);
    },
    removeHandler(channel: string) {
      electron.handlers.delete(channel);
    },
  },
  // The preload module imports these at load; createBridge is given its own ipc below.
  contextBridge: { exposeInMainWorld() {} },
  ipcRenderer: { invoke: async () => undefined, on() {}, removeListener() {} },
}));

import type { IpcMainInvokeEvent, IpcRendererEvent, WebContents } from 'electron';
import { readTransportEnvironment } from '../core/config/env.ts';
import { startConsole } from '../core/console/console.ts';
import { describeContract, type ContractEnv } from '../core/console/test/contract-suite.ts';
import { startMmtc } from '../core/test/cli.ts';
import { readNamespaceToken } from '../core/transport/namespace.ts';
import { createIpcClient } from '../renderer/src/client/ipc.ts';
import { bindConsoleIpc, type ConsoleIpc } from './ipc.ts';
import { createBridge, type BridgeIpc } from './preload.ts';
import { senderFrameProblem } from './security.ts';

const APP_ORIGIN = 'mmtc-app://console';

/** The console window's webContents: its top frame at the app origin; what main sends reaches the renderer's listeners. */
class ConsoleWindowContents extends EventEmitter {
  readonly mainFrame = { url: `${APP_ORIGIN}/index.html`, parent: null, processId: 7, routingId: 1 };
  readonly renderer = new EventEmitter();
  isDestroyed() {
    return false;
  }
  send(channel: string, payload: unknown) {
    this.renderer.emit(channel, {}, payload);
  }
}

/** ipcRenderer for one frame of that window: invoke runs main's handler with an event naming that frame as the sender. */
function rendererIpc(contents: ConsoleWindowContents, frame: { url: string; parent: unknown }): BridgeIpc {
  return {
    async invoke(channel: string, ...args: unknown[]) {
      const handler = electron.handlers.get(channel);
      if (!handler) throw new Error(`No handler registered for '${channel}'`);
      // Chromium passes arguments through structured clone: no shared objects between the worlds.
      const event = { sender: contents as unknown as WebContents, senderFrame: frame } as unknown as IpcMainInvokeEvent;
      return structuredClone(await handler(event, ...args.map((a) => structuredClone(a))));
    },
    on(channel: string, listener: (event: IpcRendererEvent, ...args: unknown[]) => void) {
      contents.renderer.on(channel, listener);
      return this as never;
    },
    removeListener(channel: string, listener: (event: IpcRendererEvent, ...args: unknown[]) => void) {
      contents.renderer.removeListener(channel, listener);
      return this as never;
    },
  };
}

const token = readNamespaceToken().token!;
const dir = mkdtempSync(path.join(tmpdir(), 'mmtc-ipc-'));
const configFile = path.join(dir, 'router.yaml');
const stops: Array<() => Promise<unknown>> = [];
const contents = new ConsoleWindowContents();
let ipc: ConsoleIpc;
let env: ContractEnv;
const refusals: string[] = [];

async function worker(args: string[]): Promise<string> {
  const w = await startMmtc(['worker', '--port', '0', ...args], /listening on grpc:\/\//);
  stops.push(() => w.stop());
  return w.line.match(/grpc:\/\/\S+/)![0];
}

beforeAll(async () => {
  const sameShm = await worker(['--runtime', 'tokenspeed']);
  const otherShm = await worker(['--runtime', 'vllm', '--shm-namespace-id', `${token.slice(0, token.lastIndexOf(':'))}:424242`]);
  writeFileSync(configFile, `# hand-written comment\nmultimodal_tensor_transport: inline\nhealth_check_interval_secs: 0.5\nworkers:\n  - url: ${sameShm}\n`);
  const running = await startConsole({ flags: { config: configFile, port: '0' }, env: readTransportEnvironment({}), processEnv: {}, log: () => {} });
  stops.unshift(() => running.close());
  const windows = new WeakSet<object>([contents]);
  ipc = bindConsoleIpc({
    backend: running.backend,
    log: (line) => refusals.push(line),
    refuseSender: (event) => senderFrameProblem(event, { appOrigin: APP_ORIGIN, isAppWindow: (c) => windows.has(c) }),
  });
  const client = createIpcClient(createBridge(rendererIpc(contents, contents.mainFrame)));
  env = { client, binding: 'ipc', configFile, workers: { sameShm, otherShm }, routerPid: () => process.pid };
}, 60_000);

afterAll(async () => {
  ipc?.close();
  for (const stop of stops) await stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('the IPC binding as the desktop app wires it', () => {
  it('refuses a call from a frame inside the console window, and the backend never changes', async () => {
    const before = await env.client.call('config.get', {});
    const framed = createIpcClient(createBridge(rendererIpc(contents, { url: 'https://evil.example/', parent: contents.mainFrame })));
    await expect(
      framed.call('config.apply', { draft: { ...before.config, multimodal_tensor_transport: 'shm' }, expectedRevision: before.revision }),
    ).rejects.toMatchObject({ code: 'forbidden' });
    expect((await env.client.call('config.get', {})).revision).toBe(before.revision);
    expect(refusals.at(-1)).toMatch(/^refused mmtc:call:config\.apply: /);
  });
});

describeContract('IPC', () => env);
