// The operator's draft: a whole RouterConfig edited locally and applied in one go with the
// revision it was based on. These helpers are the only way screens change it, so "inherit"
// (a worker knob left unset, letting the router, env or default decide) is a real state —
// the key is absent — and never the default value spelled out, which would beat the env
// layer and make the ladder lie (docs/configuration.md, "Precedence").
//
// rebaseDraft carries the operator's own edits onto a newer applied config (after a
// conflict, or after their own discrete apply), key by key and worker by worker (matched
// by url), so someone else's change is kept rather than silently reverted.
import type { RouterConfig, WorkerSpec } from '../../../core/console/contract.ts';

export type Knob = 'multimodal_tensor_transport' | 'multimodal_shm_min_bytes';
type Plain = Record<string, unknown>;

const clone = <T>(v: T): T => structuredClone(v);
const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/**
 * The one rule of every number field (Router, Limits, Workers' Add and Edit, Precedence): its
 * text as the draft holds it. A plain decimal number (digits with an optional sign and
 * fraction: `-1`, `0.5`; no exponent, unit or separator, as the flags take them) is that
 * number, and the setting's schema then says whether it is whole and in range (`1.5` as a
 * priority, `-1` as a threshold). Blank is unset where the setting may be left unset
 * (`optional`: it has no default, see mayBeUnset) and otherwise stays '', which its schema
 * refuses by name, as it does any other text (`1e3`, `30x`). So what a field shows is what the
 * draft holds: never a blank field over a default that applies, nor the last valid value
 * typed on the way to an invalid one (7000 of 70000).
 */
export function typedNumber(text: string, options: { optional?: boolean } = {}): number | string | undefined {
  const t = text.trim();
  if (t === '') return options.optional ? undefined : '';
  return /^-?\d+(\.\d+)?$/.test(t) ? Number(t) : t;
}

/** Whether a setting's schema lets it be left unset with nothing in its place (`.optional()`), as opposed to a default that then applies. */
export function mayBeUnset(schema: { safeParse(v: unknown): { success: boolean; data?: unknown } }): boolean {
  const r = schema.safeParse(undefined);
  return r.success && r.data === undefined;
}

/** Set a router-level setting; undefined removes the key (unset). */
export function setRouterField<K extends keyof RouterConfig>(draft: RouterConfig, key: K, value: RouterConfig[K] | string | undefined): RouterConfig {
  const next = { ...draft } as Plain;
  if (value === undefined) delete next[key];
  else next[key] = value;
  return next as RouterConfig;
}

/** Patch one worker by url; a field set to undefined is removed (inherit). */
export function patchWorker(draft: RouterConfig, url: string, patch: Partial<Record<keyof WorkerSpec, unknown>>): RouterConfig {
  return {
    ...draft,
    workers: draft.workers.map((w) => {
      if (w.url !== url) return w;
      const next = { ...w } as Plain;
      for (const [k, v] of Object.entries(patch)) {
        if (v === undefined) delete next[k];
        else next[k] = v;
      }
      return next as WorkerSpec;
    }),
  };
}

export function addWorker(draft: RouterConfig, spec: WorkerSpec, options: { replaceUrls?: ReadonlySet<string> } = {}): RouterConfig {
  const kept = draft.workers.filter((w) => w.url !== spec.url && !options.replaceUrls?.has(w.url));
  return { ...draft, workers: [...kept, spec] };
}

export function removeWorker(draft: RouterConfig, url: string): RouterConfig {
  return { ...draft, workers: draft.workers.filter((w) => w.url !== url) };
}

/** Replace worker `url` by `spec` (the url may change). */
export function replaceWorker(draft: RouterConfig, url: string, spec: WorkerSpec): RouterConfig {
  return { ...draft, workers: draft.workers.map((w) => (w.url === url ? spec : w)) };
}

/** Whether two configs differ in anything an apply would change (key order aside). */
export function configsDiffer(a: RouterConfig, b: RouterConfig): boolean {
  return !same(normalize(a), normalize(b));
}

function normalize(c: RouterConfig): Plain {
  const sortKeys = (o: Plain): Plain =>
    Object.fromEntries(
      Object.entries(o)
        .filter(([, v]) => v !== undefined)
        .sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)),
    );
  const workers = [...c.workers].map((w) => sortKeys({ ...w, labels: sortKeys(w.labels as Plain) })).sort((x, y) => String(x.url).localeCompare(String(y.url)));
  return { ...sortKeys(c), workers };
}

/** The operator's edits (base → draft) carried onto `current`. */
export function rebaseDraft(base: RouterConfig, draft: RouterConfig, current: RouterConfig): RouterConfig {
  const out: Plain = clone(current);
  const b: Plain = base;
  const d: Plain = draft;
  for (const key of new Set([...Object.keys(b), ...Object.keys(d)])) {
    if (key === 'workers' || same(b[key], d[key])) continue;
    if (d[key] === undefined) delete out[key];
    else out[key] = clone(d[key]);
  }
  const baseWorkers = new Map(base.workers.map((w) => [w.url, w]));
  const draftWorkers = new Map(draft.workers.map((w) => [w.url, w]));
  let workers = [...current.workers];
  for (const [url, w] of draftWorkers) {
    const was = baseWorkers.get(url);
    if (!was) {
      if (!workers.some((x) => x.url === url)) workers.push(clone(w));
      continue;
    }
    if (same(was, w)) continue;
    workers = workers.map((x) => {
      if (x.url !== url) return x;
      const next = { ...x } as Plain;
      const wp: Plain = w;
      const bp: Plain = was;
      for (const k of new Set([...Object.keys(wp), ...Object.keys(bp)])) {
        if (same(wp[k], bp[k])) continue;
        if (wp[k] === undefined) delete next[k];
        else next[k] = clone(wp[k]);
      }
      return next as WorkerSpec;
    });
  }
  for (const url of baseWorkers.keys()) if (!draftWorkers.has(url)) workers = workers.filter((x) => x.url !== url);
  out.workers = workers;
  return out as RouterConfig;
}

/** `workers["grpc://a:1"].labels.zone` → {url, rest: ['labels', 'zone']}; a router key → {key}. */
export function parseDiffPath(path: string): { url: string; rest: string[] } | { key: string } {
  const m = /^workers\[("(?:[^"\\]|\\.)*")\](?:\.(.+))?$/.exec(path);
  if (m) return { url: JSON.parse(m[1]!) as string, rest: m[2] ? m[2].split('.') : [] };
  return { key: path };
}
