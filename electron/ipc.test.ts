// The IPC binding with ipcMain faked (it records handlers, as Electron refuses a second one
// per channel) and the real sender check wired as main.ts wires it. The backend is a fake:
// what is under test is what reaches it and what comes back.
import { EventEmitter } from 'node:events';
import { beforeEach, describe, expect, it, vi } from 'vitest';

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
}));

import type { IpcMainInvokeEvent, WebContents } from 'electron';
import type { ConsoleBackend } from '../core/console/backend.ts';
import { COMMAND_NAMES, ContractError, errorFromWire } from '../core/console/contract.ts';
import { STREAM_SUBSCRIBE_CHANNEL, STREAM_UNSUBSCRIBE_CHANNEL, bindConsoleIpc, callChannel, streamChannel, type ConsoleIpc } from './ipc.ts';
import { senderFrameProblem } from './security.ts';

const APP_ORIGIN = 'mmtc-app://console';

interface Frame {
  url: string;
  parent: Frame | null;
  processId: number;
  routingId: number;
}

class FakeWebContents extends EventEmitter {
  static next = 1;
  readonly mainFrame: Frame = { url: 'mmtc-app://console/index.html', parent: null, processId: FakeWebContents.next++, routingId: 1 };
  readonly sent: Array<[string, unknown]> = [];
  destroyed = false;
  isDestroyed() {
    return this.destroyed;
  }
  send(channel: string, payload: unknown) {
    if (this.destroyed) throw new Error('Object has been destroyed');
    this.sent.push([channel, payload]);
  }
  destroy() {
    this.destroyed = true;
    this.emit('destroyed');
  }
}

function fakeBackend() {
  const listeners = new Map<string, Array<(payload: unknown) => void>>();
  const unsubscribes: Array<ReturnType<typeof vi.fn>> = [];
  const backend = {
    invoke: vi.fn(async (command: string, _input: unknown, _meta: unknown): Promise<unknown> => ({ answered: command })),
    subscribe: vi.fn((stream: string, listener: (payload: unknown) => void) => {
      listeners.set(stream, [...(listeners.get(stream) ?? []), listener]);
      const unsubscribe = vi.fn(() =>
        listeners.set(
          stream,
          (listeners.get(stream) ?? []).filter((l) => l !== listener),
        ),
      );
      unsubscribes.push(unsubscribe);
      return unsubscribe;
    }),
    close: vi.fn(async () => {}),
  };
  const emit = (stream: string, payload: unknown) => {
    for (const l of listeners.get(stream) ?? []) l(payload);
  };
  return { backend, emit, unsubscribes, asBackend: backend as unknown as ConsoleBackend };
}

let ours: FakeWebContents;
let ipc: ConsoleIpc | undefined;
let log: ReturnType<typeof vi.fn<(line: string) => void>>;

function bind(backend: ConsoleBackend | Promise<ConsoleBackend>) {
  const windows = new WeakSet<object>([ours]);
  log = vi.fn<(line: string) => void>();
  ipc = bindConsoleIpc({
    backend,
    log,
    refuseSender: (event) => senderFrameProblem(event, { appOrigin: APP_ORIGIN, isAppWindow: (c) => windows.has(c) }),
  });
}

function eventFrom(sender: FakeWebContents, senderFrame: Frame | null = sender.mainFrame): IpcMainInvokeEvent {
  return { sender: sender as unknown as WebContents, senderFrame } as unknown as IpcMainInvokeEvent;
}

async function call(channel: string, event: IpcMainInvokeEvent, ...args: unknown[]) {
  const handler = electron.handlers.get(channel);
  if (!handler) throw new Error(`no handler on ${channel}`);
  return (await handler(event, ...args)) as { ok: boolean; result?: unknown; error?: { code: string; message: string } };
}

beforeEach(() => {
  ipc?.close();
  ipc = undefined;
  electron.handlers.clear();
  ours = new FakeWebContents();
});

describe('channels', () => {
  it('registers one handler per contract command, plus subscribe and unsubscribe', () => {
    bind(fakeBackend().asBackend);
    expect([...electron.handlers.keys()].sort()).toEqual([...COMMAND_NAMES.map(callChannel), STREAM_SUBSCRIBE_CHANNEL, STREAM_UNSUBSCRIBE_CHANNEL].sort());
    expect(callChannel('workers.list')).toBe('mmtc:call:workers.list');
    expect(streamChannel('traffic')).toBe('mmtc:stream:traffic');
  });

  it('removes every handler on close', () => {
    bind(fakeBackend().asBackend);
    ipc!.close();
    ipc = undefined;
    expect(electron.handlers.size).toBe(0);
  });
});

describe('a command call', () => {
  it('reaches the backend with the input and client ipc, and answers {ok: true, result}', async () => {
    const { backend, asBackend } = fakeBackend();
    bind(asBackend);
    const answer = await call(callChannel('traffic.snapshot'), eventFrom(ours), { limit: 5 });
    expect(answer).toEqual({ ok: true, result: { answered: 'traffic.snapshot' } });
    expect(backend.invoke).toHaveBeenCalledExactlyOnceWith('traffic.snapshot', { limit: 5 }, { client: 'ipc' });
  });

  describe('from a sender that is not the top frame of our window at the app origin', () => {
    const forged: Array<[string, () => IpcMainInvokeEvent]> = [
      ['another origin', () => eventFrom(ours, { ...ours.mainFrame, url: 'https://evil.example/' })],
      ['a look-alike origin', () => eventFrom(ours, { ...ours.mainFrame, url: 'mmtc-app://console.evil/index.html' })],
      ['an opaque origin', () => eventFrom(ours, { ...ours.mainFrame, url: 'data:text/html,<script>1</script>' })],
      [
        'a subframe at the app origin',
        () => eventFrom(ours, { url: 'mmtc-app://console/index.html', parent: ours.mainFrame, processId: ours.mainFrame.processId, routingId: 7 }),
      ],
      ['a missing senderFrame', () => eventFrom(ours, null)],
      ['a window we did not create', () => eventFrom(new FakeWebContents())],
    ];
    it.each(forged)('%s: refused with forbidden, the backend not called', async (_name, makeEvent) => {
      const { backend, asBackend } = fakeBackend();
      bind(asBackend);
      const answer = await call(callChannel('config.apply'), makeEvent(), { draft: {}, expectedRevision: 1 });
      expect(answer.ok).toBe(false);
      expect(answer.error?.code).toBe('forbidden');
      expect(answer.error?.message).toMatch(/^refused mmtc:call:config\.apply: /);
      expect(backend.invoke).not.toHaveBeenCalled();
      expect(log).toHaveBeenCalledOnce();
    });
  });

  it('answers invalid input with invalid_input naming the field, without calling the backend', async () => {
    const { backend, asBackend } = fakeBackend();
    bind(asBackend);
    const tooMany = await call(callChannel('traffic.snapshot'), eventFrom(ours), { limit: 0 });
    expect(tooMany).toMatchObject({ ok: false, error: { code: 'invalid_input', path: 'limit' } });
    expect(tooMany.error?.message).toMatch(/invalid input for traffic\.snapshot at limit/);
    const unknownField = await call(callChannel('overview'), eventFrom(ours), { verbose: true });
    expect(unknownField).toMatchObject({ ok: false, error: { code: 'invalid_input' } });
    expect(unknownField.error?.message).toMatch(/unknown field verbose/);
    expect(backend.invoke).not.toHaveBeenCalled();
  });

  it('returns a backend ContractError as its wire form, which the UI rebuilds as it was', async () => {
    const { backend, asBackend } = fakeBackend();
    const thrown = new ContractError('conflict', 'revision 3 is not the current revision 4', undefined, [], { currentRevision: 4, expectedRevision: 3 });
    backend.invoke.mockRejectedValueOnce(thrown);
    bind(asBackend);
    const answer = await call(callChannel('config.rollback'), eventFrom(ours), { revision: 2, expectedRevision: 3 });
    expect(answer).toEqual({ ok: false, ...thrown.toWire() });
    const rebuilt = errorFromWire(answer);
    expect(rebuilt).toMatchObject({ code: 'conflict', message: thrown.message, details: { currentRevision: 4, expectedRevision: 3 } });
  });

  it('turns a plain thrown Error into internal with its message, never an opaque rejection', async () => {
    const { backend, asBackend } = fakeBackend();
    backend.invoke.mockRejectedValueOnce(new Error('ENOSPC: no space left on device'));
    backend.invoke.mockRejectedValueOnce('a bare string');
    bind(asBackend);
    expect(await call(callChannel('overview'), eventFrom(ours), {})).toEqual({
      ok: false,
      error: { code: 'internal', message: 'ENOSPC: no space left on device' },
    });
    expect(await call(callChannel('overview'), eventFrom(ours), {})).toEqual({ ok: false, error: { code: 'internal', message: 'a bare string' } });
  });

  it('waits for a backend that is still starting, and reports one that failed to start', async () => {
    const { backend, asBackend } = fakeBackend();
    let ready!: (b: ConsoleBackend) => void;
    bind(new Promise<ConsoleBackend>((resolve) => (ready = resolve)));
    const pending = call(callChannel('overview'), eventFrom(ours), {});
    ready(asBackend);
    expect(await pending).toEqual({ ok: true, result: { answered: 'overview' } });
    expect(backend.invoke).toHaveBeenCalledOnce();

    ipc!.close();
    bind(Promise.reject(new Error('port 30000 is in use')));
    expect(await call(callChannel('overview'), eventFrom(ours), {})).toEqual({
      ok: false,
      error: { code: 'internal', message: 'the console backend did not start: port 30000 is in use' },
    });
  });
});

describe('streams', () => {
  it('forwards payloads to the window that subscribed, once however often it subscribes', async () => {
    const { backend, emit, asBackend } = fakeBackend();
    bind(asBackend);
    expect(await call(STREAM_SUBSCRIBE_CHANNEL, eventFrom(ours), 'traffic')).toEqual({ ok: true, result: null });
    expect(await call(STREAM_SUBSCRIBE_CHANNEL, eventFrom(ours), 'traffic')).toEqual({ ok: true, result: null });
    expect(backend.subscribe).toHaveBeenCalledOnce();
    const batch = { events: [], seconds: [], dropped: 0 };
    emit('traffic', batch);
    emit('config', { revision: 2 });
    expect(ours.sent).toEqual([['mmtc:stream:traffic', batch]]);
  });

  it('stops the backend subscription when the renderer unsubscribes', async () => {
    const { emit, unsubscribes, asBackend } = fakeBackend();
    bind(asBackend);
    await call(STREAM_SUBSCRIBE_CHANNEL, eventFrom(ours), 'config');
    expect(await call(STREAM_UNSUBSCRIBE_CHANNEL, eventFrom(ours), 'config')).toEqual({ ok: true, result: null });
    expect(unsubscribes[0]).toHaveBeenCalledOnce();
    emit('config', { revision: 3 });
    expect(ours.sent).toEqual([]);
  });

  it("stops every subscription of a window when its web contents is destroyed, or its page's process dies", async () => {
    const { emit, unsubscribes, asBackend } = fakeBackend();
    bind(asBackend);
    await call(STREAM_SUBSCRIBE_CHANNEL, eventFrom(ours), 'traffic');
    await call(STREAM_SUBSCRIBE_CHANNEL, eventFrom(ours), 'calibration');
    ours.destroy();
    expect(unsubscribes.map((u) => u.mock.calls.length)).toEqual([1, 1]);
    expect(() => emit('traffic', {})).not.toThrow();

    const other = new FakeWebContents();
    ipc!.close();
    ours = other;
    bind(asBackend);
    await call(STREAM_SUBSCRIBE_CHANNEL, eventFrom(other), 'traffic');
    other.emit('render-process-gone', {}, { reason: 'crashed' });
    expect(unsubscribes[2]).toHaveBeenCalledOnce();
  });

  it('stops every subscription on close', async () => {
    const { unsubscribes, asBackend } = fakeBackend();
    bind(asBackend);
    await call(STREAM_SUBSCRIBE_CHANNEL, eventFrom(ours), 'traffic');
    ipc!.close();
    ipc = undefined;
    expect(unsubscribes[0]).toHaveBeenCalledOnce();
  });

  it('refuses stream names outside the contract without subscribing', async () => {
    const { backend, asBackend } = fakeBackend();
    bind(asBackend);
    for (const name of ['logs', '__proto__', 42, undefined]) {
      const answer = await call(STREAM_SUBSCRIBE_CHANNEL, eventFrom(ours), name);
      expect(answer).toMatchObject({ ok: false, error: { code: 'invalid_input' } });
      expect(answer.error?.message).toMatch(/the streams are traffic, config, overview, requests, calibration/);
    }
    expect(backend.subscribe).not.toHaveBeenCalled();
  });

  it('refuses subscribe and unsubscribe from a forged sender frame', async () => {
    const { backend, asBackend } = fakeBackend();
    bind(asBackend);
    const forged = eventFrom(ours, { ...ours.mainFrame, url: 'https://evil.example/' });
    expect((await call(STREAM_SUBSCRIBE_CHANNEL, forged, 'traffic')).error?.code).toBe('forbidden');
    expect((await call(STREAM_UNSUBSCRIBE_CHANNEL, forged, 'traffic')).error?.code).toBe('forbidden');
    expect((await call(STREAM_SUBSCRIBE_CHANNEL, eventFrom(ours, null), 'traffic')).error?.code).toBe('forbidden');
    expect(backend.subscribe).not.toHaveBeenCalled();
  });

  it('does not subscribe for a window that closed while the backend was starting', async () => {
    const { backend, asBackend } = fakeBackend();
    let ready!: (b: ConsoleBackend) => void;
    bind(new Promise<ConsoleBackend>((resolve) => (ready = resolve)));
    const pending = call(STREAM_SUBSCRIBE_CHANNEL, eventFrom(ours), 'traffic');
    ours.destroy();
    ready(asBackend);
    expect(await pending).toEqual({ ok: true, result: null });
    expect(backend.subscribe).not.toHaveBeenCalled();
  });
});
