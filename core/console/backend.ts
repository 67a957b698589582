// The console backend as both bindings see it: one `invoke` that checks a command's input
// against the contract, runs its handler and checks the output, and one `subscribe` for the
// event streams with a bounded backlog per subscriber. The Electron binding (electron/main.ts)
// and the HTTP binding (core/console/http.ts) are thin shells over this interface, so the
// contract behaves the same whichever way the UI reaches it.
import type { CommandName, CommandOutput, StreamName, StreamPayload } from './contract.ts';

/** Which binding a call came through; recorded in the config history. */
export type BindingClient = 'ipc' | 'http';

export interface CallMeta {
  client: BindingClient;
}

export interface SubscribeOptions {
  /**
   * Whether the subscriber can take a message now (an HTTP WebSocket with little buffered).
   * While it cannot, traffic batches are merged and the oldest events beyond the backlog cap
   * are dropped and counted (the next batch reports `dropped`).
   */
  canSend?: () => boolean;
}

export interface ConsoleBackend {
  /** Validate `input` by the contract, run the command, validate its output. Throws ContractError. */
  invoke<C extends CommandName>(command: C, input: unknown, meta: CallMeta): Promise<CommandOutput<C>>;
  subscribe<S extends StreamName>(stream: S, listener: (payload: StreamPayload<S>) => void, options?: SubscribeOptions): () => void;
  close(): Promise<void>;
}
