// Validation of a whole RouterConfig from plain data (the programmatic API, parsed YAML,
// the console's draft). All or nothing: on any problem a ConfigError lists every issue and
// no partial config exists.
import { ConfigError, issuesFromZod, type ConfigIssue, type PathSegment } from './errors.ts';
import { RouterConfigSchema, WorkerSpecSchema, type RouterConfig } from './schema.ts';

const ROUTER_KEYS = Object.keys(RouterConfigSchema.shape);
const WORKER_KEYS = Object.keys(WorkerSpecSchema.shape);

/** The keys accepted at a path of a RouterConfig document, for "did you mean" hints. */
export function knownRouterConfigKeysAt(path: readonly PathSegment[]): readonly string[] {
  if (path.length === 0) return ROUTER_KEYS;
  if (path.length === 2 && path[0] === 'workers' && typeof path[1] === 'number') return WORKER_KEYS;
  return [];
}

/** `rest`: the closing issue that counts the problems past MAX_LISTED_ISSUES (listed last). */
export type LocatedIssue = ConfigIssue & { keyPath: PathSegment[]; unknownKey?: boolean; rest?: boolean; params?: Record<string, unknown> };

/** Validate without throwing: the config, or every issue with its key path. */
export function checkRouterConfig(input: unknown): { ok: true; config: RouterConfig } | { ok: false; issues: LocatedIssue[] } {
  const parsed = RouterConfigSchema.safeParse(input ?? {});
  if (parsed.success) return { ok: true, config: parsed.data };
  return { ok: false, issues: issuesFromZod(parsed.error, { input: input ?? {}, knownKeysAt: knownRouterConfigKeysAt }) };
}

export function parseRouterConfig(input: unknown, heading = 'invalid router configuration:'): RouterConfig {
  const result = checkRouterConfig(input);
  if (!result.ok)
    throw new ConfigError(
      result.issues.map(({ path, message }) => ({ path, message })),
      heading,
    );
  return result.config;
}
