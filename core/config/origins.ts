// Where each value of a configuration came from: a key path (`multimodal_tensor_transport`,
// `workers[1].url`, `workers[0].labels.zone`) -> its origin (`/etc/mmtc/router.yaml:4:3`,
// `--policy`, `console (HTTP)`, `createRouter()`). The store keeps one map per revision; the
// console shows it next to every value, and transport resolution names it in its notes.
import { RouterConfigSchema, WorkerSpecSchema, type RouterConfig } from './schema.ts';

export type ConfigOrigins = Record<string, string>;

const WORKER_KEYS = Object.keys(WorkerSpecSchema.shape) as Array<keyof RouterConfig['workers'][number]>;
const WORKER_DEFAULTS: Readonly<Record<string, unknown>> = WorkerSpecSchema.parse({ url: 'grpc://defaults:1' });
const ROUTER_KEYS = (Object.keys(RouterConfigSchema.shape) as Array<keyof RouterConfig>).filter((k) => k !== 'workers');

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * Origins of `next` after a change labelled `origin`: a value equal to the previous
 * revision's keeps its previous origin (workers are matched by url, so reordering keeps
 * them), a new or changed one gets `origin`, and a value that was only a default stays
 * without one.
 */
export function carryOrigins(previous: RouterConfig, previousOrigins: Readonly<ConfigOrigins>, next: RouterConfig, origin: string): ConfigOrigins {
  const out: ConfigOrigins = {};
  for (const key of ROUTER_KEYS) {
    if (next[key] === undefined) continue;
    if (same(next[key], previous[key])) {
      if (previousOrigins[key] !== undefined) out[key] = previousOrigins[key];
    } else out[key] = origin;
  }
  const previousIndex = new Map(previous.workers.map((w, i) => [w.url, i] as const));
  next.workers.forEach((worker, i) => {
    const j = previousIndex.get(worker.url);
    const before = j === undefined ? undefined : previous.workers[j];
    const at = `workers[${i}]`;
    if (!before) {
      out[at] = origin;
      for (const key of WORKER_KEYS) if (worker[key] !== undefined && (key === 'url' || !same(worker[key], WORKER_DEFAULTS[key]))) out[`${at}.${key}`] = origin;
      return;
    }
    const was = `workers[${j}]`;
    if (previousOrigins[was] !== undefined) out[at] = previousOrigins[was];
    for (const key of WORKER_KEYS) {
      if (worker[key] === undefined) continue;
      if (!same(worker[key], before[key])) {
        out[`${at}.${key}`] = origin;
        continue;
      }
      // Unchanged: keep this field's origin and, for labels, each label's.
      for (const [path, o] of Object.entries(previousOrigins)) {
        if (path === `${was}.${key}` || path.startsWith(`${was}.${key}.`)) out[`${at}${path.slice(was.length)}`] = o;
      }
    }
  });
  return out;
}

/** Origins for a config given as plain data: every key the input spelled out gets `origin`. */
export function originsOfInput(input: unknown, origin: string): ConfigOrigins {
  const out: ConfigOrigins = {};
  if (input === null || typeof input !== 'object') return out;
  const record = input as Record<string, unknown>;
  for (const key of ROUTER_KEYS) if (record[key] !== undefined) out[key] = origin;
  if (Array.isArray(record.workers)) {
    record.workers.forEach((w: unknown, i) => {
      out[`workers[${i}]`] = origin;
      if (w && typeof w === 'object')
        for (const key of WORKER_KEYS) if ((w as Record<string, unknown>)[key] !== undefined) out[`workers[${i}].${key}`] = origin;
    });
  }
  return out;
}
