// The Grafana dashboard in the repository (docs/grafana/mmtc.json; docs/router.md, "Metrics"):
// every query it holds names only metrics a live router's /metrics exports, so no panel of it is
// empty for a metric's name.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { useRouterRig } from '../test/router-rig.ts';

const { startWorker, router } = useRouterRig();
const DASHBOARD = new URL('../../docs/grafana/mmtc.json', import.meta.url);

interface Panel {
  title: string;
  targets?: { expr: string }[];
  panels?: Panel[];
}

/** Every PromQL expression of the dashboard, with where it is: panels' targets and the template variables' queries. */
function queriesOf(dashboard: { panels: Panel[]; templating?: { list: { name: string; query?: string | { query: string } }[] } }) {
  const out: { where: string; expr: string }[] = [];
  const walk = (panels: Panel[]) => {
    for (const p of panels) {
      for (const t of p.targets ?? []) out.push({ where: `panel '${p.title}'`, expr: t.expr });
      walk(p.panels ?? []);
    }
  };
  walk(dashboard.panels);
  for (const v of dashboard.templating?.list ?? []) {
    const q = typeof v.query === 'string' ? v.query : v.query?.query;
    if (q) out.push({ where: `variable '${v.name}'`, expr: q });
  }
  return out;
}

const KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'offset', 'bool', 'inf', 'nan']);

/** The metric names a PromQL expression reads: its identifiers less functions, keywords, label names and values, grouping labels and $variables. */
export function metricNames(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""') // label values
    .replace(/\{[^}]*\}/g, '') // label matchers
    .replace(/\[[^\]]*\]/g, '') // range selectors
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '') // grouping labels
    .replace(/\$\w+/g, '');
  const names = new Set<string>();
  for (const m of stripped.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)) {
    // An identifier right before "(" is a function (label_values too).
    if (/^\s*\(/.test(stripped.slice(m.index + m[0].length))) continue;
    if (!KEYWORDS.has(m[0].toLowerCase())) names.add(m[0]);
  }
  // label_values(metric, label): the label is not a metric.
  for (const m of expr.matchAll(/label_values\(\s*[A-Za-z_:][A-Za-z0-9_:]*\s*,\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)/g)) names.delete(m[1]!);
  return [...names];
}

describe('the Grafana dashboard', () => {
  it('reads its metric names out of PromQL', () => {
    expect(
      metricNames(
        'histogram_quantile(0.99, sum by (worker, le) (rate(a_seconds_bucket{outcome="x y",worker=~"$worker"}[$__rate_interval]))) / on(worker) b_total or 0 * c',
      ),
    ).toEqual(['a_seconds_bucket', 'b_total', 'c']);
    expect(metricNames('label_values(smg_worker_health, worker)')).toEqual(['smg_worker_health']);
  });

  it("names in every query only metrics a live router's /metrics exports", async () => {
    const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8'));
    const queries = queriesOf(dashboard);
    expect(queries.length).toBeGreaterThan(10);
    const r = await router(await startWorker('vllm'), 'inline');
    const res = await fetch(`${r.url}/metrics`);
    expect(res.status).toBe(200);
    const exported = new Set([...(await res.text()).matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
    const unknown: string[] = [];
    for (const { where, expr } of queries) {
      const names = metricNames(expr);
      if (names.length === 0) unknown.push(`${where}: no metric in ${expr}`);
      for (const name of names) {
        const base = name.replace(/_(bucket|sum|count)$/, '');
        if (!exported.has(name) && !exported.has(base)) unknown.push(`${where}: ${name}`);
      }
    }
    expect(unknown).toEqual([]);
  });
});
