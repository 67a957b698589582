// The programmatic face of the router, for embedding it in other TypeScript code: the
// counterpart of the gateway's Python `RouterArgs`. Options use the same field names as the
// YAML file and are validated by the same schemas; an invalid transport mode or threshold
// throws a ConfigError naming the field, the value and what is accepted. Nothing falls back
// silently and nothing is half-applied.
//
// The router owns one config store. applyConfig() goes through it, so once start()ed the
// running server uses the new revision for the next request that starts (requests already
// running finish on theirs); a change to host, port or model_path is refused while it runs.
import type { TransportEnvironment } from '../config/env-schema.ts';
import { transportEnvironmentAtStart } from '../config/env.ts';
import type { RouterConfig, RouterConfigInput } from '../config/schema.ts';
import { originsOfInput } from '../config/origins.ts';
import { ConfigStore } from '../config/store.ts';
import { parseRouterConfig } from '../config/validate.ts';
import type { ResolvedWorkerTransport } from '../transport/resolution-schema.ts';
import { declaredRuntime, laneFacts, undeclaredRuntimeNote } from '../engines/table.ts';
import { resolveConfiguredWorkers } from '../transport/resolve.ts';
import type { RunningRouter } from './server.ts';

export type RouterOptions = RouterConfigInput;

export interface RouterEmbedding {
  /** The environment layer; defaults to the process environment read once at start. */
  environment?: TransportEnvironment;
}

export interface Router {
  /** The live configuration: revisions, origins, subscribers. */
  readonly store: ConfigStore;
  /** The current validated configuration (replaced whole by applyConfig, never mutated). */
  readonly config: RouterConfig;
  /** Increments on every applied change. */
  readonly revision: number;
  readonly environment: TransportEnvironment;
  /** Every worker's resolved transport settings with their provenance. */
  resolveTransport(): ResolvedWorkerTransport[];
  /**
   * Validate and swap in a new configuration atomically; returns the new revision. With
   * `expectedRevision`, a config changed meanwhile is a ConfigConflictError instead.
   */
  applyConfig(options: RouterOptions, expectedRevision?: number): number;
  /** Serve the OpenAI API on `config.host:port`; later applyConfig calls reach it. */
  start(options?: { log?: (line: string) => void }): Promise<RunningRouter>;
}

const API_ORIGIN = 'createRouter()';

export function createRouter(options: RouterOptions = {}, embedding: RouterEmbedding = {}): Router {
  const environment = embedding.environment ?? transportEnvironmentAtStart();
  const store = new ConfigStore({
    config: parseRouterConfig(options, 'invalid router options:'),
    origins: originsOfInput(options, API_ORIGIN),
    env: environment,
    client: 'api',
  });
  return {
    store,
    get config() {
      return store.current().config;
    },
    get revision() {
      return store.current().revision;
    },
    environment,
    resolveTransport: () => {
      const s = store.current();
      return resolveConfiguredWorkers(s.config, s.env, s.origins, (w) => laneFacts(declaredRuntime(w.runtime)), undeclaredRuntimeNote());
    },
    applyConfig(next, expectedRevision = store.current().revision) {
      return store.apply(next, expectedRevision, { origin: API_ORIGIN, client: 'api' }).revision;
    },
    async start(start = {}) {
      const { startRouter } = await import('./server.ts');
      return startRouter({ store, ...(start.log ? { log: start.log } : {}) });
    },
  };
}
