// The programmatic face of the router, for embedding it in other TypeScript code: the
// counterpart of the gateway's Python `RouterArgs`. Options use the same field names as the
// YAML file and are validated by the same schemas; an invalid transport mode or threshold
// throws a ConfigError naming the field, the value and what is accepted. Nothing falls back
// silently and nothing is half-applied: applyConfig swaps the whole config or nothing.
import { transportEnvironmentAtStart, type TransportEnvironment } from '../config/env.ts';
import type { ConfigOrigins } from '../config/load.ts';
import type { RouterConfig, RouterConfigInput } from '../config/schema.ts';
import { parseRouterConfig } from '../config/validate.ts';
import { resolveConfiguredWorkers, type ResolvedWorkerTransport } from '../transport/resolve.ts';
import type { RunningRouter } from './server.ts';

export type RouterOptions = RouterConfigInput;

export interface RouterEmbedding {
  /** The environment layer; defaults to the process environment read once at start. */
  environment?: TransportEnvironment;
}

export interface Router {
  /** The current validated configuration (replaced whole by applyConfig, never mutated). */
  readonly config: RouterConfig;
  /** Increments on every applied change; the next request sees the new revision. */
  readonly revision: number;
  readonly environment: TransportEnvironment;
  /** Every worker's resolved transport settings with their provenance. */
  resolveTransport(): ResolvedWorkerTransport[];
  /** Validate and swap in a new configuration atomically; returns the new revision. */
  applyConfig(options: RouterOptions): number;
  /** Serve the OpenAI API on `config.host:port` with the current configuration. */
  start(options?: { log?: (line: string) => void }): Promise<RunningRouter>;
}

const API_ORIGIN = 'createRouter()';

function apiOrigins(config: RouterConfig): ConfigOrigins {
  const origins: ConfigOrigins = {};
  for (const key of ['multimodal_tensor_transport', 'multimodal_shm_min_bytes'] as const) {
    if (config[key] !== undefined) origins[key] = API_ORIGIN;
    config.workers.forEach((w, i) => {
      if (w[key] !== undefined) origins[`workers[${i}].${key}`] = API_ORIGIN;
    });
  }
  return origins;
}

export function createRouter(options: RouterOptions = {}, embedding: RouterEmbedding = {}): Router {
  let config = parseRouterConfig(options, 'invalid router options:');
  let revision = 1;
  const environment = embedding.environment ?? transportEnvironmentAtStart();
  return {
    get config() {
      return config;
    },
    get revision() {
      return revision;
    },
    environment,
    resolveTransport: () => resolveConfiguredWorkers(config, environment, apiOrigins(config)),
    applyConfig(next) {
      config = parseRouterConfig(next, 'invalid router options:');
      revision += 1;
      return revision;
    },
    async start(options = {}) {
      const { startRouter } = await import('./server.ts');
      return startRouter({ config, env: environment, ...(options.log ? { log: options.log } : {}) });
    },
  };
}
