// The one live configuration of a running router: the current validated RouterConfig, its
// revision, where every value came from, and the environment layer (read once at start).
//
// apply(next, expectedRevision) is all or nothing: a stale expectedRevision is a conflict
// naming the current revision, an invalid config lists every issue, a change to a setting
// that only takes effect at start (host, port, model_path) is refused with that reason; in
// each case nothing changes. Otherwise the whole config is swapped at once, the revision
// goes up by one, and subscribers hear of it. A request reads `current()` once when it
// starts and keeps that snapshot to its end, so no request ever mixes two revisions.
//
// What changes live and what needs a restart is written down in docs/configuration.md
// ("Live changes"); RESTART_ONLY_KEYS below is that list.
import { ConfigError, formatValue, type ConfigIssue } from './errors.ts';
import type { TransportEnvironment } from './env-schema.ts';
import { carryOrigins, type ConfigOrigins } from './origins.ts';
import type { RouterConfig } from './schema.ts';
import { parseRouterConfig } from './validate.ts';

/** Who applied a revision: how the console shows it in the history. */
export const CONFIG_CLIENTS = ['start', 'api', 'ipc', 'http', 'router'] as const;
export type ConfigClient = (typeof CONFIG_CLIENTS)[number];

/** The origin of the embedded reference worker's entry (started when no worker is configured). */
export const EMBEDDED_DEFAULT_ORIGIN = 'embedded default';

/** Settings the running server read once at start; changing them means a restart. */
export const RESTART_ONLY_KEYS = ['host', 'port', 'model_path'] as const;

export interface ConfigSnapshot {
  readonly revision: number;
  readonly config: RouterConfig;
  /** Key path (`multimodal_tensor_transport`, `workers[1].url`) -> where its value came from. */
  readonly origins: Readonly<ConfigOrigins>;
  readonly env: TransportEnvironment;
  /** Unix milliseconds when this revision was applied. */
  readonly appliedAt: number;
  readonly client: ConfigClient;
  /** The earlier revision whose configuration this one applied again (a rollback, an Undo). */
  readonly rollbackOf?: number;
  /** The YAML file the router was started with, if any. */
  readonly file?: string;
}

export class ConfigConflictError extends Error {
  override readonly name = 'ConfigConflictError';
  constructor(
    readonly expectedRevision: number,
    readonly currentRevision: number,
  ) {
    super(
      `the configuration changed meanwhile: you edited revision ${expectedRevision}, the router is at revision ${currentRevision}; review the changes and apply again`,
    );
  }
}

/** A change the running router cannot take: the issues name each setting. */
export class RestartRequiredError extends ConfigError {
  constructor(issues: ConfigIssue[]) {
    super(issues, 'these settings take effect only when the router starts; nothing was applied:');
  }
}

export interface ApplyOptions {
  /** How this change's values are labelled in provenance: 'createRouter()', 'console (HTTP)', … */
  origin: string;
  client: ConfigClient;
  /** The revision a rollback applies again. */
  rollbackOf?: number;
}

type Listener = (next: ConfigSnapshot, previous: ConfigSnapshot) => void;

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function restartIssues(current: RouterConfig, next: RouterConfig): ConfigIssue[] {
  return RESTART_ONLY_KEYS.filter((key) => !same(current[key], next[key])).map((key) => ({
    path: key,
    message: `${key} cannot change while the router runs (${formatValue(current[key])} -> ${formatValue(next[key])}): restart the router with the new value`,
  }));
}

export class ConfigStore {
  private snapshot: ConfigSnapshot;
  /** The embedded reference worker of this launch, once started: its entry keeps its origin whenever it is in the configuration. */
  private embedded: RouterConfig['workers'][number] | undefined;
  private readonly listeners = new Set<Listener>();

  constructor(initial: { config: RouterConfig; origins?: ConfigOrigins; env: TransportEnvironment; file?: string; client?: ConfigClient; revision?: number }) {
    this.snapshot = Object.freeze({
      // A router whose history survives restarts continues its numbering.
      revision: initial.revision ?? 1,
      config: initial.config,
      origins: Object.freeze({ ...(initial.origins ?? {}) }),
      env: initial.env,
      appliedAt: Date.now(),
      client: initial.client ?? 'start',
      ...(initial.file !== undefined ? { file: initial.file } : {}),
    });
  }

  /** The configuration a request starting now uses, with its revision. Never mutated. */
  current(): ConfigSnapshot {
    return this.snapshot;
  }

  /**
   * Validate `next` whole and swap it in; returns the new snapshot. Throws (changing
   * nothing) ConfigConflictError for a stale revision, ConfigError for an invalid config,
   * RestartRequiredError for a change to a start-only setting.
   */
  apply(next: unknown, expectedRevision: number, options: ApplyOptions): ConfigSnapshot {
    const current = this.snapshot;
    const config = this.check(next, expectedRevision);
    const snapshot: ConfigSnapshot = Object.freeze({
      revision: current.revision + 1,
      config,
      origins: Object.freeze(this.markEmbedded(config, carryOrigins(current.config, current.origins, config, options.origin))),
      env: current.env,
      appliedAt: Date.now(),
      client: options.client,
      ...(options.rollbackOf !== undefined ? { rollbackOf: options.rollbackOf } : {}),
      ...(current.file !== undefined ? { file: current.file } : {}),
    });
    this.snapshot = snapshot;
    for (const listener of this.listeners) {
      try {
        listener(snapshot, current);
      } catch {
        /* a listener's failure is its own; the change is applied */
      }
    }
    return snapshot;
  }

  /**
   * The embedded reference worker joins the start's revision, before anyone has read it: its
   * per-launch URL is no configuration (never written to the file, never recorded in the
   * history), so it makes no revision of its own. Refused once the start's revision has been
   * replaced or when workers are configured. Listeners are not told: nothing was applied.
   */
  startEmbeddedWorker(worker: RouterConfig['workers'][number]): ConfigSnapshot {
    const current = this.snapshot;
    if (current.client !== 'start' || current.config.workers.length > 0)
      throw new Error('the embedded reference worker joins only a start revision with no worker configured');
    const config = parseRouterConfig({ ...current.config, workers: [worker] }, 'invalid embedded worker:');
    this.embedded = config.workers[0];
    this.snapshot = Object.freeze({
      ...current,
      config,
      origins: Object.freeze(carryOrigins(current.config, current.origins, config, EMBEDDED_DEFAULT_ORIGIN)),
    });
    return this.snapshot;
  }

  /** The embedded reference worker this launch started (whether or not the configuration has it now), if any. */
  embeddedWorker(): RouterConfig['workers'][number] | undefined {
    return this.embedded;
  }

  /** `config` without this launch's embedded reference worker: what the file and the history hold (its per-launch URL is no configuration). */
  configuredOnly(config: RouterConfig): RouterConfig {
    const url = this.embedded?.url;
    return url === undefined || !config.workers.some((w) => w.url === url) ? config : { ...config, workers: config.workers.filter((w) => w.url !== url) };
  }

  /** The embedded worker's entry, back after a change that had removed it (a rollback, an undo), is still the embedded worker: its origin says so. */
  private markEmbedded(config: RouterConfig, origins: ConfigOrigins): ConfigOrigins {
    const url = this.embedded?.url;
    if (url === undefined) return origins;
    config.workers.forEach((w, i) => {
      const at = `workers[${i}]`;
      if (w.url !== url || origins[at] === EMBEDDED_DEFAULT_ORIGIN) return;
      for (const key of Object.keys(origins)) if (key === at || key.startsWith(`${at}.`)) origins[key] = EMBEDDED_DEFAULT_ORIGIN;
    });
    return origins;
  }

  /** Everything apply() checks, without applying: the validated config, or the error apply() would throw. */
  check(next: unknown, expectedRevision: number): RouterConfig {
    const current = this.snapshot;
    if (expectedRevision !== current.revision) throw new ConfigConflictError(expectedRevision, current.revision);
    const config = parseRouterConfig(next, 'invalid configuration; nothing was applied:');
    const restart = restartIssues(current.config, config);
    if (restart.length > 0) throw new RestartRequiredError(restart);
    return config;
  }

  /** Hear of every applied revision (after the swap); returns the unsubscribe function. */
  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
