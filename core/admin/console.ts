// The console backend: the router core plus everything the operator UI asks of it, behind
// the one ConsoleBackend interface both bindings use. startConsole() loads the configuration
// file (docs/console.md, "Where the configuration lives"), continues the revision numbering
// of its history, starts the router on that store and returns the backend.
//
// Every apply (config.apply, rollback, reload, workers.add/update/remove) runs one at a time
// and in this order: revision check, validation, start-only settings, file drift — any of
// them refuses and nothing changes — then the file is written atomically, then the store
// swaps, so the running router uses the new revision for its next request. A failed write
// applies nothing; a file changed by hand is never overwritten (file_drift: reload it or
// edit on).
import { ConfigError } from '../config/errors.ts';
import { transportEnvironmentAtStart } from '../config/env.ts';
import type { TransportEnvironment } from '../config/env-schema.ts';
import { applyConfigFlags, type ConfigFlags, type ConfigOrigins } from '../config/load.ts';
import { RouterConfigSchema, type RouterConfig } from '../config/schema.ts';
import { ConfigConflictError, ConfigStore, EMBEDDED_DEFAULT_ORIGIN, RestartRequiredError, type ConfigSnapshot } from '../config/store.ts';
import { parseRouterConfig } from '../config/validate.ts';
import { normalizeConfig } from '../config/yaml.ts';
import { startRouter, type RunningRouter } from '../router/server.ts';
import type { TensorEvent } from '../telemetry/event-schema.ts';
import type { BindingClient, CallMeta, ConsoleBackend, SubscribeOptions } from './backend.ts';
import { ConfigFile, ConfigHistory, defaultConfigPath } from './config-file.ts';
import { commands, ContractError, parseCommandInput, streams, type CommandName, type CommandOutput, type DiffEntry, type StreamName, type StreamPayload, type TrafficBatch } from './contract.ts';
import { diffConfigs } from './diff.ts';
import { createHandlers } from './handlers.ts';
import { configForFile, restartChanges, startFlagsOf, type StartFlag } from './restart.ts';

/** Events one subscriber may have waiting while it cannot take them; older ones are dropped and counted. */
export const TRAFFIC_BACKLOG = 5_000;
const RETRY_MS = 100;

export interface ConsoleState {
  running: RunningRouter;
  store: ConfigStore;
  file: ConfigFile | undefined;
  history: ConfigHistory;
  log: (line: string) => void;
  /** Run an apply exclusively: the next one starts when this one has written and swapped. */
  apply(next: RouterConfig | unknown, expectedRevision: number, client: BindingClient): Promise<{ revision: number; diff: DiffEntry[]; file: string | null; untilRestart: DiffEntry[] }>;
  /** The settings flags gave when the console started (a restart with the same flags sets them again). */
  startFlags: readonly StartFlag[];
  /** What a restart with the start flags would undo of `config`, were it applied now (the file as the apply would write it). */
  untilRestart(config: RouterConfig): Promise<DiffEntry[]>;
  /** What a restart with the start flags would change of the running configuration, from the file as it is on disk (null: the file cannot be read as a configuration). */
  restartChangesNow(): Promise<DiffEntry[] | null>;
  /** Workers whose entry is the embedded reference worker (never written to the file). */
  embeddedUrls(): Set<string>;
  emit<S extends StreamName>(stream: S, payload: StreamPayload<S>): void;
  busy: Set<string>;
}

const nextTask = () => new Promise<void>((resolve) => setImmediate(resolve));

export function originLabel(client: BindingClient): string {
  return `console (${client === 'ipc' ? 'desktop' : 'HTTP'})`;
}

export function toContractError(err: unknown): ContractError {
  if (err instanceof ContractError) return err;
  if (err instanceof ConfigConflictError) return new ContractError('conflict', err.message, undefined, [], { currentRevision: err.currentRevision, expectedRevision: err.expectedRevision });
  if (err instanceof RestartRequiredError) return new ContractError('restart_required', err.message, err.issues[0]?.path, err.issues);
  if (err instanceof ConfigError) return new ContractError('invalid_config', err.message, err.issues[0]?.path, err.issues);
  return new ContractError('internal', (err as Error)?.message ?? String(err));
}

export interface StartConsoleOptions {
  flags: ConfigFlags;
  log?: (line: string) => void;
  env?: TransportEnvironment;
  processEnv?: Readonly<Record<string, string | undefined>>;
  /** Directory for SHM files (tests); defaults to /dev/shm. */
  shmDir?: string;
}

export interface RunningConsole {
  backend: ConsoleBackend;
  routerUrl: string;
  router: RunningRouter;
  configFile: string;
  close(): Promise<void>;
}

/** Load the configuration file, start the router on it and open the console backend. */
export async function startConsole(options: StartConsoleOptions): Promise<RunningConsole> {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const env = options.env ?? transportEnvironmentAtStart();
  const filePath = options.flags.config ?? defaultConfigPath(options.processEnv ?? process.env);
  const { file, parsed } = await ConfigFile.open(filePath);
  const origins: ConfigOrigins = {};
  if (parsed) for (const [key, pos] of parsed.positions) origins[key] = `${filePath}:${pos.line}:${pos.column}`;
  const fromFile = parsed?.config ?? parseRouterConfig({});
  const loaded = applyConfigFlags(fromFile, options.flags, origins);
  const startFlags = startFlagsOf(loaded.config, loaded.origins, options.flags);
  for (const f of startFlags) {
    const before = (fromFile as Record<string, unknown>)[f.key];
    const given = f.key === 'workers' ? fromFile.workers.map((w) => w.url) : before;
    if (parsed && JSON.stringify(given) !== JSON.stringify(f.value)) log(`note: ${f.flag} overrides ${f.key} of ${filePath} for this run (the file says ${JSON.stringify(given)}); a change made in the console is written to the file, but a restart with this flag sets it again`);
  }
  const history = await ConfigHistory.open(file.path);
  const previous = history.last();
  const store = new ConfigStore({ config: loaded.config, origins: loaded.origins, env, file: file.path, revision: (previous?.revision ?? 0) + 1 });
  const record = (s: ConfigSnapshot, before: RouterConfig | undefined) =>
    history.append({ revision: s.revision, appliedAt: s.appliedAt, client: s.client, diff: diffConfigs(before, s.config), config: normalizeConfig(s.config) }).catch((err: Error) => log(`warning: cannot write the config history ${history.path}: ${err.message}`));
  // The first revision of a start says what differs from the last one before the restart
  // (a hand edit while the console was down shows here), or from the built-in defaults.
  await record(store.current(), (previous ? RouterConfigSchema.safeParse(previous.config).data : undefined) ?? RouterConfigSchema.parse({}));
  const listeners = new Map<StreamName, Set<(payload: never) => void>>();
  const emit = <S extends StreamName>(stream: S, payload: StreamPayload<S>) => {
    for (const l of listeners.get(stream) ?? []) {
      try {
        (l as (p: StreamPayload<S>) => void)(payload);
      } catch {
        /* one subscriber's failure is its own */
      }
    }
  };
  const unsubscribeHistory = store.subscribe((next, prev) => {
    void record(next, prev.config);
    emit('config', { revision: next.revision, client: next.client, appliedAt: next.appliedAt });
  });
  const running = await startRouter({ store, log, ...(options.processEnv ? { processEnv: options.processEnv } : {}), ...(options.shmDir ? { shmDir: options.shmDir } : {}) });

  let queue: Promise<unknown> = Promise.resolve();
  const state: ConsoleState = {
    running,
    store,
    file,
    history,
    log,
    busy: new Set(),
    emit,
    startFlags,
    async untilRestart(config) {
      const embedded = state.embeddedUrls();
      const { text } = await file.drift();
      let onDisk: RouterConfig | undefined;
      try {
        onDisk = text === undefined ? undefined : file.parse(text).config;
      } catch {
        onDisk = undefined; // a drifted, invalid file: the apply is refused anyway
      }
      return restartChanges(config, configForFile(config, startFlags, onDisk, embedded), options.flags, embedded);
    },
    async restartChangesNow() {
      const { text } = await file.drift();
      try {
        return restartChanges(store.current().config, file.parse(text).config, options.flags, state.embeddedUrls());
      } catch (err) {
        if (err instanceof ConfigError) return null;
        throw err;
      }
    },
    embeddedUrls() {
      const s = store.current();
      return new Set(s.config.workers.filter((_, i) => s.origins[`workers[${i}]`] === EMBEDDED_DEFAULT_ORIGIN).map((w) => w.url));
    },
    apply(next, expectedRevision, client) {
      const run = async () => {
        // Each step below parses or writes a configuration of up to 32 KiB: between them the
        // event loop answers what waits (/health), so no apply holds it for their sum.
        await nextTask();
        const current = store.current();
        const config = store.check(next, expectedRevision);
        const drift = await file.drift();
        if (drift.drifted) throw driftError(file, drift.text, current.config);
        const before = current.config;
        const fileConfig = drift.text === undefined ? undefined : file.parse(drift.text).config;
        const embedded = state.embeddedUrls();
        const written = configForFile(config, startFlags, fileConfig, embedded);
        await nextTask();
        await file.save(written);
        await nextTask();
        const applied = store.apply(config, expectedRevision, { origin: originLabel(client), client });
        return { revision: applied.revision, diff: diffConfigs(before, applied.config), file: file.path, untilRestart: restartChanges(config, written, options.flags, embedded) };
      };
      const result = queue.then(run, run);
      queue = result.catch(() => {});
      // Answer once the workers this revision added have been discovered, so the reply (and
      // the next workers.list) shows whether they are healthy; other applies need not wait.
      return result.then(async (r) => {
        await running.reconciled();
        return r;
      });
    },
  };

  const handlers = createHandlers(state);
  const overviewFeed = new OverviewFeed(async () => commands.overview.output.parse(await handlers.overview({} as never, undefined as unknown as CallMeta)), log);
  const unwatchWorkers = running.context.registry.watch(() => overviewFeed.soon());
  const unwatchStore = store.subscribe(() => overviewFeed.soon());
  const trafficFeeds = new Set<TrafficFeed>();
  const unsubscribeBus = running.context.events.subscribe((batch) => {
    for (const feed of trafficFeeds) feed.push(batch);
  });

  const backend: ConsoleBackend = {
    async invoke<C extends CommandName>(command: C, input: unknown, meta: CallMeta): Promise<CommandOutput<C>> {
      if (!Object.hasOwn(commands, command)) throw new ContractError('not_found', `no console command '${String(command)}'`);
      const parsed = parseCommandInput(command, input);
      let output: unknown;
      try {
        output = await (handlers[command] as (input: unknown, meta: CallMeta) => Promise<unknown>)(parsed, meta);
      } catch (err) {
        throw toContractError(err);
      }
      const checked = commands[command].output.safeParse(output);
      if (!checked.success) throw new ContractError('internal', `the output of ${command} does not match the contract: ${checked.error.issues[0]?.message} at ${checked.error.issues[0]?.path.join('.')}`);
      return checked.data as CommandOutput<C>;
    },
    subscribe(stream, listener, subscribeOptions: SubscribeOptions = {}) {
      if (!Object.hasOwn(streams, stream)) throw new ContractError('not_found', `no console stream '${String(stream)}'`);
      if (stream === 'overview') return overviewFeed.add(listener as (p: StreamPayload<'overview'>) => void);
      if (stream === 'traffic') {
        const feed = new TrafficFeed(listener as (p: TrafficBatch) => void, running.context.events.perSecond.bind(running.context.events), subscribeOptions.canSend);
        trafficFeeds.add(feed);
        return () => {
          feed.close();
          trafficFeeds.delete(feed);
        };
      }
      const set = listeners.get(stream) ?? new Set();
      set.add(listener as (payload: never) => void);
      listeners.set(stream, set);
      return () => set.delete(listener as (payload: never) => void);
    },
    async close() {
      unsubscribeBus();
      unsubscribeHistory();
      unwatchWorkers();
      unwatchStore();
      overviewFeed.close();
      for (const feed of trafficFeeds) feed.close();
      trafficFeeds.clear();
      await queue.catch(() => {});
      await running.close();
    },
  };
  return { backend, router: running, routerUrl: running.url, configFile: file.path, close: () => backend.close() };
}

function driftError(file: ConfigFile, text: string | undefined, applied: RouterConfig): ContractError {
  let diff: DiffEntry[] = [];
  let issues: ConfigError['issues'] = [];
  try {
    diff = diffConfigs(applied, file.parse(text).config);
  } catch (err) {
    if (err instanceof ConfigError) issues = err.issues;
  }
  return new ContractError(
    'file_drift',
    `${file.path} was changed on disk since the console last read or wrote it; it was not overwritten. Review the change and reload the file, then apply again`,
    undefined,
    issues,
    { diff, file: file.path },
  );
}

/**
 * One subscriber's traffic: batches from the bus, merged while the subscriber cannot take
 * them (canSend false), capped at TRAFFIC_BACKLOG events (the oldest go, and are counted).
 */
class TrafficFeed {
  private pending: TensorEvent[] = [];
  private dropped = 0;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly listener: (batch: TrafficBatch) => void,
    private readonly seconds: () => readonly TrafficBatch['seconds'][number][],
    private readonly canSend: (() => boolean) | undefined,
  ) {}

  push(events: readonly TensorEvent[]): void {
    if (this.closed) return;
    for (const e of events) this.pending.push(e);
    if (this.pending.length > TRAFFIC_BACKLOG) {
      this.dropped += this.pending.length - TRAFFIC_BACKLOG;
      this.pending.splice(0, this.pending.length - TRAFFIC_BACKLOG);
    }
    this.flush();
  }

  private flush(): void {
    if (this.closed || this.pending.length === 0) return;
    if (this.canSend && !this.canSend()) {
      this.timer ??= setTimeout(() => {
        this.timer = undefined;
        this.flush();
      }, RETRY_MS);
      return;
    }
    const events = this.pending;
    this.pending = [];
    try {
      this.listener({ events, seconds: this.seconds().slice(-2).map((s) => ({ ...s, tensors: { ...s.tensors }, bytes: { ...s.bytes } })), dropped: this.dropped });
    } catch {
      /* a subscriber's failure is its own */
    }
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
  }
}

/** How often the overview stream sends while anyone listens, and how soon after a worker's change. */
export const OVERVIEW_PUSH_MS = 1000;
const OVERVIEW_SOON_MS = 100;

/**
 * The overview stream: one computation per tick for every listener, about once a second, and
 * again within OVERVIEW_SOON_MS of a worker's change (a lane broken, a worker down), so a
 * warning reaches the screen within a second of its cause. Nothing runs while nobody listens.
 */
class OverviewFeed {
  private readonly listeners = new Set<(overview: StreamPayload<'overview'>) => void>();
  private timer: NodeJS.Timeout | undefined;
  private soonTimer: NodeJS.Timeout | undefined;
  private computing = false;
  private again = false;
  private closed = false;

  constructor(
    private readonly compute: () => Promise<StreamPayload<'overview'>>,
    private readonly log: (line: string) => void,
  ) {}

  add(listener: (overview: StreamPayload<'overview'>) => void): () => void {
    this.listeners.add(listener);
    if (!this.timer && !this.closed) {
      this.timer = setInterval(() => void this.push(), OVERVIEW_PUSH_MS);
      this.timer.unref();
    }
    this.soon();
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) this.stop();
    };
  }

  soon(): void {
    if (this.listeners.size === 0 || this.soonTimer || this.closed) return;
    this.soonTimer = setTimeout(() => {
      this.soonTimer = undefined;
      void this.push();
    }, OVERVIEW_SOON_MS);
    this.soonTimer.unref();
  }

  private async push(): Promise<void> {
    if (this.computing) {
      this.again = true;
      return;
    }
    this.computing = true;
    try {
      const overview = await this.compute();
      for (const l of this.listeners) {
        try {
          l(overview);
        } catch {
          /* a subscriber's failure is its own */
        }
      }
    } catch (err) {
      this.log(`warning: the overview stream could not compute the overview: ${(err as Error).message}`);
    } finally {
      this.computing = false;
      if (this.again) {
        this.again = false;
        this.soon();
      }
    }
  }

  private stop(): void {
    if (this.timer) clearInterval(this.timer);
    if (this.soonTimer) clearTimeout(this.soonTimer);
    this.timer = undefined;
    this.soonTimer = undefined;
  }

  close(): void {
    this.closed = true;
    this.stop();
    this.listeners.clear();
  }
}
