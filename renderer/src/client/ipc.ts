// The Electron binding: the preload exposes `window.mmtc` (the contract's IpcBridge), whose
// invoke never rejects but resolves `{ok: true, result}` or `{ok: false, error}`; this wraps
// it into the same ConsoleClient the browser binding offers, rebuilding errors with
// errorFromWire so both bindings throw the same ContractErrors.
import {
  errorFromWire,
  type CommandInput,
  type CommandName,
  type CommandOutput,
  type ConsoleClient,
  type IpcBridge,
  type StreamName,
  type StreamPayload,
} from '../../../core/console/contract.ts';

export interface IpcConsoleClient extends ConsoleClient {
  readonly binding: 'ipc';
}

export function createIpcClient(bridge: IpcBridge): IpcConsoleClient {
  return {
    binding: 'ipc',
    async call<C extends CommandName>(command: C, input: CommandInput<C>): Promise<CommandOutput<C>> {
      const answer = await bridge.invoke(command, input);
      if (answer.ok) return answer.result;
      throw errorFromWire(answer);
    },
    subscribe<S extends StreamName>(stream: S, listener: (payload: StreamPayload<S>) => void): () => void {
      return bridge.subscribe(stream, listener);
    },
  };
}
