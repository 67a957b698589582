// Which binding this page runs on: IPC when the Electron preload exposed `window.mmtc`
// (binding 'ipc'), else HTTP + WebSocket to the origin that served the page, with the token
// from the URL fragment or this tab's storage. Nothing else in the renderer knows which.
import type { ConsoleClient, IpcBridge } from '../../../core/console/contract.ts';
import { createHttpClient, type ConnectionState } from './http.ts';
import { createIpcClient } from './ipc.ts';
import { takeToken } from './token.ts';

declare global {
  interface Window {
    mmtc?: IpcBridge;
  }
}

export type Connected = { ok: true; client: ConsoleClient; binding: 'ipc' | 'http' } | { ok: false; reason: string };

export function connectClient(onConnection?: (state: ConnectionState) => void): Connected {
  if (window.mmtc?.binding === 'ipc') return { ok: true, client: createIpcClient(window.mmtc), binding: 'ipc' };
  const token = takeToken();
  if (!token) {
    return {
      ok: false,
      reason: 'This page needs the console token. Open the URL that `mmtc serve` printed (it ends with #token=…); the token stays in this tab only.',
    };
  }
  const client = createHttpClient({ origin: window.location.origin, token, ...(onConnection ? { onConnection } : {}) });
  return { ok: true, client, binding: 'http' };
}
