// The one ConsoleClient every store talks through, set once at start (connect.ts decides
// whether it is IPC or HTTP). Stores never know which binding they are on.
import { ContractError, type ConsoleClient } from '../../../core/console/contract.ts';

let current: ConsoleClient | undefined;

export function setClient(client: ConsoleClient): void {
  current = client;
}

export function client(): ConsoleClient {
  if (!current) throw new Error('the console client is not connected yet');
  return current;
}

/** What to tell the operator about a failed call: the backend's own message, with its code. */
export function describeError(err: unknown): string {
  if (err instanceof ContractError) return err.message;
  return err instanceof Error ? err.message : String(err);
}
