// The bridge between the console page and main: exactly one object, `window.mmtc`, with
// `invoke` (one contract command), `subscribe` (one contract stream) and `binding: 'ipc'`.
// Never ipcRenderer itself, nor a generic send: a page that could name any channel could
// reach any handler. Names outside the contract are refused here, before anything is sent.
//
// Runs sandboxed (webPreferences.sandbox): bundled by scripts/build-electron.mjs into one
// CommonJS file whose only require is `electron`, and it may use only contextBridge and
// ipcRenderer from it. The renderer wraps `window.mmtc` into its ConsoleClient and rebuilds
// `{ok: false, error}` into a ContractError with errorFromWire.
import { contextBridge, ipcRenderer, type IpcRendererEvent } from 'electron';
import {
  COMMAND_NAMES,
  STREAM_NAMES,
  isCommandName,
  type BridgeResult,
  type CommandOutput,
  type IpcBridge,
  type PlainErrorCode,
  type StreamName,
  type WireError,
} from '../core/console/contract.ts';
import { STREAM_SUBSCRIBE_CHANNEL, STREAM_UNSUBSCRIBE_CHANNEL, callChannel, isStreamName, streamChannel, type IpcResult } from './ipc.ts';

/** What `window.mmtc.invoke` resolves with (it never rejects): the contract's own bridge shape. */
export type { BridgeResult };

/** `window.mmtc` in the Electron renderer: the contract's IpcBridge. */
export type MmtcBridge = IpcBridge;

/** The part of ipcRenderer the bridge uses. */
export type BridgeIpc = Pick<typeof ipcRenderer, 'invoke' | 'on' | 'removeListener'>;

function localError(code: PlainErrorCode, message: string): { ok: false; error: WireError['error'] } {
  return { ok: false, error: { code, message } };
}

function isIpcResult(value: unknown): value is IpcResult<unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as { ok?: unknown; error?: unknown };
  return v.ok === true || (v.ok === false && typeof v.error === 'object' && v.error !== null);
}

export function createBridge(ipc: BridgeIpc): MmtcBridge {
  // One IPC subscription per stream however many listeners the page adds.
  const listeners = new Map<StreamName, Set<(payload: never) => void>>();
  const forwarders = new Map<StreamName, (event: IpcRendererEvent, payload: unknown) => void>();

  const startStream = (stream: StreamName) => {
    const forward = (_event: IpcRendererEvent, payload: unknown) => {
      for (const listener of [...(listeners.get(stream) ?? [])]) {
        try {
          listener(payload as never);
        } catch (err) {
          // One broken view must not starve the others of the stream.
          console.error(`mmtc: a ${stream} stream listener threw`, err);
        }
      }
    };
    forwarders.set(stream, forward);
    ipc.on(streamChannel(stream), forward);
    ipc.invoke(STREAM_SUBSCRIBE_CHANNEL, stream).then(
      (answer: unknown) => {
        if (isIpcResult(answer) && !answer.ok) console.error(`mmtc: could not subscribe to the ${stream} stream: ${answer.error.message}`);
      },
      (err: unknown) => console.error(`mmtc: could not subscribe to the ${stream} stream: ${(err as Error).message}`),
    );
  };

  const stopStream = (stream: StreamName) => {
    const forward = forwarders.get(stream);
    if (forward) ipc.removeListener(streamChannel(stream), forward);
    forwarders.delete(stream);
    listeners.delete(stream);
    ipc.invoke(STREAM_UNSUBSCRIBE_CHANNEL, stream).catch(() => {
      // The window is going away, or main already dropped the subscription.
    });
  };

  return {
    binding: 'ipc',

    async invoke(command, input) {
      if (typeof command !== 'string' || !isCommandName(command)) {
        return localError('not_found', `unknown command ${JSON.stringify(command)}; the commands are ${COMMAND_NAMES.join(', ')}`);
      }
      let answer: unknown;
      try {
        answer = await ipc.invoke(callChannel(command), input);
      } catch (err) {
        // Electron rejects only when the message could not be sent or no handler exists
        // (main still starting, or the input not cloneable): say so instead of its opaque text.
        return localError('internal', `the ${command} call did not reach the console backend: ${err instanceof Error ? err.message : String(err)}`);
      }
      if (!isIpcResult(answer))
        return localError(
          'internal',
          `the ${command} call got an answer that is neither a result nor a contract error: ${JSON.stringify(answer)?.slice(0, 200)}`,
        );
      return answer.ok ? { ok: true, result: answer.result as CommandOutput<typeof command> } : { ok: false, error: answer.error };
    },

    subscribe(stream, listener) {
      if (!isStreamName(stream)) throw new TypeError(`unknown stream ${JSON.stringify(stream)}; the streams are ${STREAM_NAMES.join(', ')}`);
      if (typeof listener !== 'function') throw new TypeError(`the ${stream} listener must be a function, got ${typeof listener}`);
      let set = listeners.get(stream);
      const first = !set;
      if (!set) {
        set = new Set();
        listeners.set(stream, set);
      }
      // A wrapper per call, so the same function subscribed twice is two subscriptions.
      const entry = (payload: never) => listener(payload);
      set.add(entry);
      if (first) startStream(stream);
      let active = true;
      return () => {
        if (!active) return;
        active = false;
        const current = listeners.get(stream);
        current?.delete(entry);
        if (current && current.size === 0) stopStream(stream);
      };
    },
  };
}

contextBridge.exposeInMainWorld('mmtc', createBridge(ipcRenderer));
