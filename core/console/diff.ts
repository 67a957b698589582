// What an apply would change: the difference between two configurations as a list an
// operator reads before applying (and the history keeps after). Values are compared in
// their normalized form (the YAML export's), so key order and defaults spelled out or left
// implicit make no difference. Workers are matched by url, not by position: reordering the
// list is no change, and a worker reads `workers["grpc://a:1"].priority`.
import type { RouterConfig } from '../config/schema.ts';
import { normalizeConfig } from '../config/yaml.ts';
import type { DiffEntry } from './contract.ts';

type Plain = Record<string, unknown>;

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function diffRecords(prefix: string, before: Plain, after: Plain, out: DiffEntry[], nested: ReadonlySet<string> = new Set()): void {
  const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])];
  for (const key of keys) {
    const path = prefix ? `${prefix}.${key}` : key;
    const a = before[key];
    const b = after[key];
    if (nested.has(key) && a && b && typeof a === 'object' && typeof b === 'object') {
      diffRecords(path, a as Plain, b as Plain, out);
      continue;
    }
    if (a === undefined && b !== undefined) out.push({ path, kind: 'added', after: b });
    else if (a !== undefined && b === undefined) out.push({ path, kind: 'removed', before: a });
    else if (!same(a, b)) out.push({ path, kind: 'changed', before: a, after: b });
  }
}

export function workerPath(url: string): string {
  return `workers[${JSON.stringify(url)}]`;
}

/** The changes from `before` (undefined: nothing applied yet) to `after`, router settings first, then workers. */
export function diffConfigs(before: RouterConfig | undefined, after: RouterConfig): DiffEntry[] {
  const a = before ? (normalizeConfig(before) as Plain) : {};
  const b = normalizeConfig(after) as Plain;
  const out: DiffEntry[] = [];
  const { workers: wa = [], ...ra } = a as { workers?: Plain[] };
  const { workers: wb = [], ...rb } = b as { workers?: Plain[] };
  diffRecords('', ra, rb, out);
  const byUrl = (list: Plain[]) => new Map(list.map((w) => [w.url as string, w] as const));
  const oldWorkers = byUrl(wa);
  const newWorkers = byUrl(wb);
  for (const [url, w] of newWorkers) {
    const old = oldWorkers.get(url);
    if (!old) out.push({ path: workerPath(url), kind: 'added', after: w });
    else diffRecords(workerPath(url), old, w, out, new Set(['labels']));
  }
  for (const [url, w] of oldWorkers) if (!newWorkers.has(url)) out.push({ path: workerPath(url), kind: 'removed', before: w });
  return out;
}
