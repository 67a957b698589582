// The console backend: the router core plus everything the operator UI asks of it, behind
// the one ConsoleBackend interface both bindings use. startConsole() loads the configuration
// file (docs/console.md, "Where the configuration lives"), continues the revision numbering
// of its history, starts the router on that store and returns the backend: its state
// (state.ts) with the one apply queue (apply.ts), the handlers (handlers.ts) and the streams
// (feeds.ts).
import { transportEnvironmentAtStart } from '../config/env.ts';
import type { TransportEnvironment } from '../config/env-schema.ts';
import { applyConfigFlags, type ConfigFlags } from '../config/load.ts';
import type { ConfigOrigins } from '../config/origins.ts';
import { RouterConfigSchema, type RouterConfig } from '../config/schema.ts';
import { ConfigStore, RESTART_ONLY_KEYS, type ConfigSnapshot } from '../config/store.ts';
import { parseRouterConfig } from '../config/validate.ts';
import { normalizeConfig } from '../config/yaml.ts';
import { startRouter, type RunningRouter } from '../router/server.ts';
import { createApplier } from './apply.ts';
import type { CallMeta, ConsoleBackend, SubscribeOptions } from './backend.ts';
import { ConfigFile, ConfigHistory, defaultConfigPath } from './config-file.ts';
import {
  commands,
  ContractError,
  parseCommandInput,
  parseCommandOutput,
  streams,
  type CommandName,
  type CommandOutput,
  type StreamName,
  type StreamPayload,
  type RequestsBatch,
  type TrafficBatch,
} from './contract.ts';
import { diffConfigs } from './diff.ts';
import { failureOf, OverviewFeed, RequestsFeed, TrafficFeed } from './feeds.ts';
import { requestFailed } from '../telemetry/requests.ts';
import { createHandlers } from './handlers.ts';
import { startFlagsOf } from './restart.ts';
import { toContractError, type ConsoleState } from './state.ts';

export { TRAFFIC_BACKLOG } from './feeds.ts';

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

/** The configuration a start runs: the file (it need not exist) with the flags over it, and the settings the flags gave, each said once in the log. */
async function startConfiguration(options: StartConsoleOptions, log: (line: string) => void) {
  const filePath = options.flags.config ?? defaultConfigPath(options.processEnv ?? process.env);
  const { file, parsed } = await ConfigFile.open(filePath);
  const origins: ConfigOrigins = {};
  if (parsed) for (const [key, pos] of parsed.positions) origins[key] = `${filePath}:${pos.line}:${pos.column}`;
  const fromFile = parsed?.config ?? parseRouterConfig({});
  const loaded = applyConfigFlags(fromFile, options.flags, origins);
  const startFlags = startFlagsOf(loaded.config, loaded.origins, options.flags);
  const again = 'a change made in the console is written to the file, but a restart with this flag sets it again';
  for (const f of startFlags) {
    // Settings only a restart changes the console cannot change: nothing to say of them.
    if ((RESTART_ONLY_KEYS as readonly string[]).includes(f.key)) continue;
    const inFile = parsed !== undefined && parsed.positions.has(f.key);
    const given = f.key === 'workers' ? fromFile.workers.map((w) => w.url) : (fromFile as Record<string, unknown>)[f.key];
    if (!inFile) log(`note: ${f.flag} sets ${f.key} for this run (${filePath} does not set it); ${again}`);
    else if (JSON.stringify(given) !== JSON.stringify(f.value))
      log(`note: ${f.flag} overrides ${f.key} of ${filePath} for this run (the file says ${JSON.stringify(given)}); ${again}`);
  }
  return { file, loaded, startFlags };
}

/** The config history, continuing its numbering, recording every revision the store applies (the start's first). */
async function startHistory(file: ConfigFile, store: (revision: number) => ConfigStore, log: (line: string) => void) {
  const history = await ConfigHistory.open(file.path);
  const previous = history.last();
  const s = store((previous?.revision ?? 0) + 1);
  // The embedded reference worker is recorded nowhere: its URL is new at every launch, so a
  // record of it would be a dead worker to roll back to (its start makes no revision either).
  const record = (snapshot: ConfigSnapshot, before: RouterConfig | undefined) =>
    history
      .append({
        revision: snapshot.revision,
        appliedAt: snapshot.appliedAt,
        client: snapshot.client,
        ...(snapshot.rollbackOf !== undefined ? { rollbackOf: snapshot.rollbackOf } : {}),
        diff: diffConfigs(before, s.configuredOnly(snapshot.config)),
        config: normalizeConfig(s.configuredOnly(snapshot.config)),
      })
      .catch((err: Error) => log(`warning: cannot write the config history ${history.path}: ${err.message}`));
  // The first revision of a start says what differs from the last one before the restart
  // (a hand edit while the console was down shows here), or from the built-in defaults.
  await record(s.current(), (previous ? RouterConfigSchema.safeParse(previous.config).data : undefined) ?? RouterConfigSchema.parse({}));
  return { history, store: s, record };
}

/** Listeners of the plain streams (config, calibration): each gets every payload; one's failure is its own. */
function streamListeners() {
  const listeners = new Map<StreamName, Set<(payload: never) => void>>();
  return {
    emit<S extends StreamName>(stream: S, payload: StreamPayload<S>) {
      for (const l of listeners.get(stream) ?? []) {
        try {
          (l as (p: StreamPayload<S>) => void)(payload);
        } catch {
          /* one subscriber's failure is its own */
        }
      }
    },
    add(stream: StreamName, listener: (payload: never) => void): () => void {
      const set = listeners.get(stream) ?? new Set();
      set.add(listener);
      listeners.set(stream, set);
      return () => set.delete(listener);
    },
  };
}

/** Load the configuration file, start the router on it and open the console backend. */
export async function startConsole(options: StartConsoleOptions): Promise<RunningConsole> {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const env = options.env ?? transportEnvironmentAtStart();
  const { file, loaded, startFlags } = await startConfiguration(options, log);
  const { history, store, record } = await startHistory(
    file,
    (revision) => new ConfigStore({ config: loaded.config, origins: loaded.origins, env, file: file.path, revision }),
    log,
  );
  const plain = streamListeners();
  const unsubscribeHistory = store.subscribe((next, prev) => {
    void record(next, store.configuredOnly(prev.config));
    plain.emit('config', { revision: next.revision, client: next.client, appliedAt: next.appliedAt });
  });
  const running = await startRouter({
    store,
    log,
    ...(options.processEnv ? { processEnv: options.processEnv } : {}),
    ...(options.shmDir ? { shmDir: options.shmDir } : {}),
  });
  const applier = createApplier({ store, file, history, running, flags: options.flags, startFlags });
  const state: ConsoleState = { running, store, file, history, log, flags: options.flags, startFlags, busy: new Set(), emit: plain.emit, ...applier };

  const handlers = createHandlers(state);
  const overviewFeed = new OverviewFeed(
    async () => commands.overview.output.parse(await handlers.overview({} as never, undefined as unknown as CallMeta)),
    log,
  );
  const unwatchWorkers = running.context.registry.watch(() => overviewFeed.soon());
  // "Every recent request failed" turning on or off reaches the banner as soon as a worker's change does.
  const unwatchOutcomes = running.context.outcomes?.onChange(() => overviewFeed.soon());
  const unwatchStore = store.subscribe(() => overviewFeed.soon());
  const trafficFeeds = new Set<TrafficFeed>();
  const unsubscribeBus = running.context.events.subscribe((batch) => {
    for (const feed of trafficFeeds) feed.push(batch);
  });
  const requestsFeeds = new Set<RequestsFeed>();
  const unsubscribeRequests = running.context.requests?.subscribe((s) => {
    for (const feed of requestsFeeds) feed.push(s);
    if (!requestFailed(s)) return;
    for (const feed of trafficFeeds) feed.pushFailed(failureOf(s));
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
      return parseCommandOutput(command, output);
    },
    subscribe(stream, listener, subscribeOptions: SubscribeOptions = {}) {
      if (!Object.hasOwn(streams, stream)) throw new ContractError('not_found', `no console stream '${String(stream)}'`);
      if (stream === 'overview') return overviewFeed.add(listener as (p: StreamPayload<'overview'>) => void);
      if (stream === 'traffic') {
        const feed = new TrafficFeed(
          listener as (p: TrafficBatch) => void,
          running.context.events.perSecond.bind(running.context.events),
          subscribeOptions.canSend,
        );
        trafficFeeds.add(feed);
        return () => {
          feed.close();
          trafficFeeds.delete(feed);
        };
      }
      if (stream === 'requests') {
        const feed = new RequestsFeed(listener as (p: RequestsBatch) => void, subscribeOptions.canSend);
        requestsFeeds.add(feed);
        return () => {
          feed.close();
          requestsFeeds.delete(feed);
        };
      }
      return plain.add(stream, listener);
    },
    async close() {
      unsubscribeBus();
      unsubscribeRequests?.();
      unsubscribeHistory();
      unwatchWorkers();
      unwatchOutcomes?.();
      unwatchStore();
      overviewFeed.close();
      for (const feed of trafficFeeds) feed.close();
      trafficFeeds.clear();
      for (const feed of requestsFeeds) feed.close();
      requestsFeeds.clear();
      await applier.idle().catch(() => {}); // an apply's failure was answered to its caller; closing only waits for it
      await running.close();
    },
  };
  return { backend, router: running, routerUrl: running.url, configFile: file.path, close: () => backend.close() };
}
