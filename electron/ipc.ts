// The console contract bound onto Electron IPC: one `ipcMain.handle` channel per command
// (`mmtc:call:<command>`), two for starting and stopping an event stream, and one push
// channel per stream (`mmtc:stream:<name>`). The channel names are defined here once; the
// preload bundles them from this module, so it must import nothing but `electron` and the
// contract at run time (no `node:`, no security.ts; the sender check comes in as an option).
//
// Every handler answers `{ok: true, result}` or `{ok: false, error}` (the contract's wire
// error) and never throws: a thrown error would reach the UI as Electron's opaque "Error
// invoking remote method", losing the code, path and issues the UI shows. A message whose
// sender is not the console's top frame is answered `forbidden` without touching the backend.
import { ipcMain, type IpcMainInvokeEvent, type WebContents } from 'electron';
import type { ConsoleBackend } from '../core/console/backend.ts';
import { COMMAND_NAMES, ContractError, STREAM_NAMES, parseCommandInput, type CommandName, type StreamName, type WireError } from '../core/console/contract.ts';

/** What every IPC handler answers. */
export type IpcResult<T> = { ok: true; result: T } | ({ ok: false } & WireError);

export function callChannel(command: CommandName): string {
  return `mmtc:call:${command}`;
}
/** Where main pushes a stream's payloads to the window. */
export function streamChannel(stream: StreamName): string {
  return `mmtc:stream:${stream}`;
}
/** Outside the `mmtc:stream:` space, so no stream name can collide with them. */
export const STREAM_SUBSCRIBE_CHANNEL = 'mmtc:subscribe';
export const STREAM_UNSUBSCRIBE_CHANNEL = 'mmtc:unsubscribe';

export function isStreamName(name: unknown): name is StreamName {
  return typeof name === 'string' && (STREAM_NAMES as readonly string[]).includes(name);
}

/** A thrown value as the wire error the UI rebuilds: contract errors as they are, anything else `internal` with its message. */
export function failure(err: unknown): { ok: false } & WireError {
  if (err instanceof ContractError) return { ok: false, ...err.toWire() };
  const message = err instanceof Error ? err.message : String(err);
  return { ok: false, error: { code: 'internal', message } };
}

function forbidden(channel: string, problem: string): { ok: false } & WireError {
  return failure(new ContractError('forbidden', `refused ${channel}: ${problem}`));
}

export interface ConsoleIpcOptions {
  /** The backend, or the promise of it while the core starts (calls wait for it). */
  backend: ConsoleBackend | Promise<ConsoleBackend>;
  /** Why this message's sender may not use the console, or null when it may (security.ts senderFrameProblem, bound to our windows). */
  refuseSender: (event: IpcMainInvokeEvent) => string | null;
  log?: (line: string) => void;
}

export interface ConsoleIpc {
  /** Remove every handler and stop every stream subscription. */
  close(): void;
}

/** Register the console's IPC handlers on ipcMain. Call once: ipcMain refuses a second handler per channel. */
export function bindConsoleIpc(options: ConsoleIpcOptions): ConsoleIpc {
  const log = options.log ?? (() => {});
  const backendReady = Promise.resolve(options.backend);
  // A backend that failed to start is reported per call (and by main.ts); not an unhandled rejection.
  backendReady.catch(() => {});
  const getBackend = () =>
    backendReady.catch((err: unknown) => {
      throw new ContractError('internal', `the console backend did not start: ${err instanceof Error ? err.message : String(err)}`);
    });

  const subscriptions = new Map<WebContents, Map<StreamName, () => void>>();
  const watched = new WeakSet<WebContents>();
  const dropAll = (contents: WebContents) => {
    const streams = subscriptions.get(contents);
    if (!streams) return;
    subscriptions.delete(contents);
    for (const unsubscribe of streams.values()) unsubscribe();
  };

  const checked = (channel: string, event: IpcMainInvokeEvent): ({ ok: false } & WireError) | null => {
    const problem = options.refuseSender(event);
    if (problem === null) return null;
    log(`refused ${channel}: ${problem}`);
    return forbidden(channel, problem);
  };

  const channels: string[] = [];
  for (const command of COMMAND_NAMES) {
    const channel = callChannel(command);
    channels.push(channel);
    ipcMain.handle(channel, async (event, input: unknown): Promise<IpcResult<unknown>> => {
      const refused = checked(channel, event);
      if (refused) return refused;
      try {
        // Refused here before the backend sees it; the backend checks again by the same schema.
        parseCommandInput(command, input);
        const backend = await getBackend();
        return { ok: true, result: await backend.invoke(command, input, { client: 'ipc' }) };
      } catch (err) {
        return failure(err);
      }
    });
  }

  channels.push(STREAM_SUBSCRIBE_CHANNEL);
  ipcMain.handle(STREAM_SUBSCRIBE_CHANNEL, async (event, stream: unknown): Promise<IpcResult<null>> => {
    const refused = checked(STREAM_SUBSCRIBE_CHANNEL, event);
    if (refused) return refused;
    if (!isStreamName(stream))
      return failure(new ContractError('invalid_input', `unknown stream ${JSON.stringify(stream)}; the streams are ${STREAM_NAMES.join(', ')}`));
    try {
      const backend = await getBackend();
      const contents = event.sender;
      // Checked after the wait, synchronously with the insertion below: no window that closed
      // meanwhile gets a subscription, and two quick requests make one.
      if (contents.isDestroyed()) return { ok: true, result: null };
      const streams = subscriptions.get(contents) ?? new Map<StreamName, () => void>();
      subscriptions.set(contents, streams);
      if (!watched.has(contents)) {
        watched.add(contents);
        contents.once('destroyed', () => dropAll(contents));
        contents.on('render-process-gone', () => dropAll(contents));
      }
      if (!streams.has(stream)) {
        const channel = streamChannel(stream);
        streams.set(
          stream,
          backend.subscribe(stream, (payload) => {
            if (!contents.isDestroyed()) contents.send(channel, payload);
          }),
        );
      }
      return { ok: true, result: null };
    } catch (err) {
      return failure(err);
    }
  });

  channels.push(STREAM_UNSUBSCRIBE_CHANNEL);
  ipcMain.handle(STREAM_UNSUBSCRIBE_CHANNEL, (event, stream: unknown): IpcResult<null> => {
    const refused = checked(STREAM_UNSUBSCRIBE_CHANNEL, event);
    if (refused) return refused;
    if (!isStreamName(stream))
      return failure(new ContractError('invalid_input', `unknown stream ${JSON.stringify(stream)}; the streams are ${STREAM_NAMES.join(', ')}`));
    const streams = subscriptions.get(event.sender);
    const unsubscribe = streams?.get(stream);
    if (unsubscribe) {
      streams!.delete(stream);
      unsubscribe();
    }
    return { ok: true, result: null };
  });

  return {
    close() {
      for (const channel of channels) ipcMain.removeHandler(channel);
      for (const contents of [...subscriptions.keys()]) dropAll(contents);
    },
  };
}
