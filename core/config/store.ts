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
      origins: Object.freeze(carryOrigins(current.config, current.origins, config, options.origin)),
      env: current.env,
      appliedAt: Date.now(),
      client: options.client,
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
