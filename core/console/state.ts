// What every part of the console backend shares: the running router, the config store, the
// configuration file and its history, the start flags, the one apply queue, the streams. The
// handlers (handlers/), calibration and the doctor's checklist take a ConsoleState; startConsole
// (console.ts) builds it. Nothing here imports a handler, so there is no circle.
import { ConfigError } from '../config/errors.ts';
import type { ConfigFlags } from '../config/load.ts';
import type { RouterConfig, WorkerSpec } from '../config/schema.ts';
import { ConfigConflictError, RestartRequiredError, type ConfigSnapshot, type ConfigStore } from '../config/store.ts';
import type { RunningRouter } from '../router/server.ts';
import type { BindingClient, CallMeta } from './backend.ts';
import type { ConfigFile, ConfigHistory } from './config-file.ts';
import { ContractError, type ApplyResult, type CommandName, type CommandOutput, type DiffEntry, type StreamName, type StreamPayload } from './contract.ts';
import type { StartFlag } from './restart.ts';

export interface ApplyOptions {
  /** A reload: the file's text on disk (drifted) that this revision takes; the drift check accepts exactly this text. */
  reloadOf?: { text: string | undefined };
  /** A rollback: the earlier revision whose configuration this one applies again (History says so). */
  rollbackOf?: number;
}

export interface ConsoleState {
  running: RunningRouter;
  store: ConfigStore;
  file: ConfigFile;
  history: ConfigHistory;
  log: (line: string) => void;
  /** The flags the console started with (a restart with them sets their settings again). */
  flags: ConfigFlags;
  /** The settings flags gave when the console started, with the values they gave. */
  startFlags: readonly StartFlag[];
  /**
   * Run an apply exclusively (the next one starts when this one has written and swapped):
   * revision check, validation, start-only settings, file drift, then the atomic write and the
   * swap. A conflict names what changed meanwhile.
   */
  apply(next: RouterConfig | unknown, expectedRevision: number, client: BindingClient, options?: ApplyOptions): Promise<ApplyResult>;
  /** What a restart with the start flags would undo of `config`, were it applied now (the file as the apply would write it). */
  untilRestart(config: RouterConfig): Promise<DiffEntry[]>;
  /** What a restart with the start flags would change of the running configuration, from the file as it is on disk (null: the file cannot be read as a configuration). */
  restartChangesNow(): Promise<DiffEntry[] | null>;
  /** The file's configuration as the running router takes it on a reload: what a restart runs (the start flags over the file), the embedded worker kept when the file has none. */
  asReloaded(fromFile: RouterConfig): RouterConfig;
  /** `config` as it runs here: with no worker configured, the running embedded reference worker kept (a rollback, a reload). */
  keepEmbedded(config: RouterConfig): RouterConfig;
  /** This launch's embedded reference worker's URL (never written to the file), whether or not the configuration lists it now. */
  embeddedUrls(): Set<string>;
  emit<S extends StreamName>(stream: S, payload: StreamPayload<S>): void;
  /** Long commands running now (one calibration at a time). */
  busy: Set<string>;
}

export type Handler<C extends CommandName> = (input: never, meta: CallMeta) => Promise<CommandOutput<C>>;
/** The handlers of some of the contract's commands. */
export type HandlerGroup<C extends CommandName> = { [K in C]: Handler<K> };

export function originLabel(client: BindingClient): string {
  return `console (${client === 'ipc' ? 'desktop' : 'HTTP'})`;
}

export function toContractError(err: unknown): ContractError {
  if (err instanceof ContractError) return err;
  if (err instanceof ConfigConflictError)
    return new ContractError('conflict', err.message, undefined, [], { currentRevision: err.currentRevision, expectedRevision: err.expectedRevision });
  if (err instanceof RestartRequiredError) return new ContractError('restart_required', err.message, err.issues[0]?.path, err.issues);
  if (err instanceof ConfigError) return new ContractError('invalid_config', err.message, err.issues[0]?.path, err.issues);
  return new ContractError('internal', (err as Error)?.message ?? String(err));
}

/** The worker's entry in `snapshot`, or not_found naming the url. */
export function findWorker(snapshot: ConfigSnapshot, url: string): WorkerSpec {
  const spec = snapshot.config.workers.find((w) => w.url === url);
  if (!spec) throw new ContractError('not_found', `no worker ${url} in configuration revision ${snapshot.revision}`, 'url');
  return spec;
}
