// The charts of docs/reliability.md, drawn from a full run's JSON report with bench/chart.ts:
//
//   npm run test:reliability -- --json /tmp/reliability.json
//   npx tsx reliability/charts.ts /tmp/reliability.json      # writes docs/img/reliability-*.svg
//
// and fills the tables of docs/reliability.md from the same report: each block between
// `<!-- report:NAME -->` and `<!-- /report -->` is replaced (the prose around them is kept).
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { renderBarChart, renderLineChart } from '../bench/chart.ts';

interface Scenario {
  name: string;
  status: string;
  seconds: number;
  seed?: number;
  details: Record<string, any>;
}

const file = process.argv[2];
if (!file) {
  process.stderr.write('usage: tsx reliability/charts.ts REPORT.json\n');
  process.exit(2);
}
const report = JSON.parse(readFileSync(file, 'utf8')) as { seed: number; mode: string; seconds: number; scenarios: Scenario[] };
const byName = new Map(report.scenarios.map((s) => [s.name, s]));
const out = path.resolve(import.meta.dirname, '..', 'docs', 'img');
mkdirSync(out, { recursive: true });

const load = ['load/clients-8', 'load/clients-32', 'load/clients-128', 'load/live-config']
  .map((n) => byName.get(n))
  .filter((s): s is Scenario => s !== undefined);
if (load.length) {
  writeFileSync(
    path.join(out, 'reliability-load.svg'),
    renderBarChart({
      title: 'Chat latency under load (1–3 mixed images, half streamed, 3 workers in auto)',
      groups: load.map((s) => (s.name === 'load/live-config' ? `${s.details.clients} clients + apply/s` : `${s.details.clients} clients`)),
      series: [
        { name: 'p50 ms', values: load.map((s) => s.details.p50_ms) },
        { name: 'p99 ms', values: load.map((s) => s.details.p99_ms) },
      ],
    }),
  );
}

const rss = byName.get('load/clients-128')?.details.rss_series as Array<[number, number]> | undefined;
if (rss?.length) {
  const bounds = ['load/clients-8', 'load/clients-32', 'load/clients-128'].map((n) => byName.get(n)?.details.rss_mib?.bound as number | undefined);
  writeFileSync(
    path.join(out, 'reliability-rss.svg'),
    renderLineChart({
      title: 'Router RSS through the 8, 32 and 128-client runs (MiB, log scale)',
      xLabels: rss.map(([t], i) => (i % 8 === 0 ? `${Math.round(t)} s` : '')),
      series: [
        { name: 'router RSS', values: rss.map(([, v]) => v) },
        ...(bounds[2] ? [{ name: 'bound at 128 clients', values: rss.map(() => bounds[2]!) }] : []),
        ...(bounds[0] ? [{ name: 'bound at 8 clients', values: rss.map(() => bounds[0]!) }] : []),
      ],
      yUnit: ' MiB',
    }),
  );
}

const GB = (mib: number) => Math.round(((mib * 1024 * 1024) / 1e9) * 100) / 100;
const bombs = byName.get('hardening/bombs-20')?.details.rss_mib;
const clients = byName.get('hardening/clients-128-1080p')?.details.rss_mib;
const urls = byName.get('hardening/urls-50x19mib')?.details.rss_mib;
if (bombs && clients && urls) {
  // The measured figure as it is (0 is a bar of no length); the chart cannot draw a negative
  // length, so RSS that went below where it started is drawn as 0 and its value said in the label.
  const kept = GB(urls.kept);
  writeFileSync(
    path.join(out, 'reliability-hardening.svg'),
    renderBarChart({
      title: 'Router memory before the hardening (issue 12) and now (GB)',
      groups: ['20 bombs, peak RSS', '128 × 1080p, peak RSS', kept < 0 ? `50 URLs × 19 MiB, kept (now ${kept} GB, drawn as 0)` : '50 URLs × 19 MiB, kept'],
      series: [
        { name: 'before', values: [9.2, 4.7, 1.2] },
        { name: 'now', values: [GB(bombs.peak), GB(clients.peak), Math.max(0, kept)] },
      ],
      unit: ' GB',
    }),
  );
}

// The tables of docs/reliability.md.
const cell = (v: unknown) =>
  String(v ?? '')
    .replaceAll('|', '\\|')
    .replaceAll('\n', ' ');
const result = (s: Scenario) =>
  s.status === 'passed'
    ? 'pass'
    : s.status === 'skipped'
      ? `skipped (${cell(s.details.reason)})`
      : `**${s.status}**: ${cell((s.details.failures as string[] | undefined)?.join('; '))}`;
const replay = (s: Scenario) =>
  s.name.startsWith('cleanup/') ? 'every run' : s.seed !== undefined ? `\`--seed ${s.seed} --only ${s.name}\`` : `\`--only ${s.name}\``;
const scenarioTable = (names: (n: string) => boolean) => {
  const rows = report.scenarios.filter((s) => names(s.name));
  return [
    '| scenario | result | s | what happened | replay (`npm run test:reliability --`) |',
    '|---|---|---:|---|---|',
    ...rows.map((s) => `| \`${s.name}\` | ${result(s)} | ${s.seconds} | ${cell(s.details.summary)} | ${replay(s)} |`),
  ].join('\n');
};
const counts = { passed: 0, failed: 0, skipped: 0 } as Record<string, number>;
for (const s of report.scenarios) counts[s.status] = (counts[s.status] ?? 0) + 1;
const groups = [...new Set(report.scenarios.map((s) => s.name.split('/')[0]!))];
const blocks: Record<string, string> = {
  results: [
    `${report.mode} mode, seed ${report.seed}, ${Math.round(report.seconds / 60)} minutes (${report.seconds} s): **${counts.passed} passed, ${counts.failed ?? 0} failed, ${counts.skipped ?? 0} skipped**.`,
    '',
    '| group | scenarios | passed | failed | skipped | seconds |',
    '|---|---:|---:|---:|---:|---:|',
    ...groups.map((g) => {
      const in_ = report.scenarios.filter((s) => s.name.startsWith(`${g}/`));
      const n = (st: string) => in_.filter((s) => s.status === st).length;
      return `| ${g} | ${in_.length} | ${n('passed')} | ${n('failed')} | ${n('skipped')} | ${Math.round(in_.reduce((a, s) => a + s.seconds, 0))} |`;
    }),
  ].join('\n'),
  load: [
    '| clients | result | requests (streamed, images) | req/s | p50 ms | p99 ms | tensors inline / SHM (placed = reported) | by worker | router RSS start → peak → end, MiB | bound, MiB (without what malloc keeps) | files left |',
    '|---:|---|---:|---:|---:|---:|---|---|---|---|---:|',
    ...load
      .filter((s) => s.name !== 'load/live-config')
      .map((s) => {
        const d = s.details;
        // A path no tensor took is absent from the workers' tally and 0 in the router's.
        const same =
          (d.tensors_placed_by_path?.inline ?? 0) === (d.tensors_reported_by_path?.inline ?? 0) &&
          (d.tensors_placed_by_path?.shm ?? 0) === (d.tensors_reported_by_path?.shm ?? 0);
        const w = Object.entries(d.requests_by_worker ?? {})
          .map(([k, v]) => `${k} ${v}`)
          .join(', ');
        return `| ${d.clients} | ${result(s)} | ${d.requests} (${d.streamed}, ${d.images}) | ${d.requests_per_second} | ${d.p50_ms} | ${d.p99_ms} | ${d.tensors_placed_by_path?.inline} / ${d.tensors_placed_by_path?.shm} (${same ? 'equal' : 'DIFFER'}) | ${w} | ${d.rss_mib?.start} → ${d.rss_mib?.peak} → ${d.rss_mib?.end} | ${d.rss_mib?.bound} (${d.rss_mib?.without_malloc_keep ?? '?'}) | ${d.files_left} |`;
      }),
    '',
    `Replay one: \`npm run test:reliability -- --seed ${report.seed} --only load/clients-32\`.`,
  ].join('\n'),
  live: scenarioTable((n) => n === 'load/live-config' || n === 'load/memory-after-idle'),
  'faults-workers': scenarioTable((n) => n.startsWith('faults/worker-') && n !== 'faults/worker-keeps-files'),
  'faults-shm': scenarioTable((n) =>
    ['faults/shm-full', 'faults/shm-read-only', 'faults/worker-keeps-files', 'faults/orphans', 'faults/planted-entries', 'faults/router-killed'].includes(n),
  ),
  'faults-console': scenarioTable((n) => n === 'faults/serve-killed-during-apply' || n === 'faults/config-drift'),
  cache: scenarioTable((n) => n.startsWith('cache/')),
  fuzz: scenarioTable((n) => n.startsWith('fuzz/')),
  attacks: scenarioTable((n) => n.startsWith('attack/')),
  hardening: (() => {
    // Issue 12's figures, measured on the code before the hardening.
    const before: Record<string, string> = {
      'hardening/text-50mb': '/health stalled ~49 s, then the router died (`FATAL ERROR: Reached heap limit`)',
      'hardening/bombs-20': 'RSS grew to 9.2 GB from one 8.3 MB request; 8.8 GB still held 30 s later',
      'hardening/bodies': 'trickled image body → 500; body over 64 MiB → connection reset; `max_tokens: 1e15` → 502',
      'hardening/loopback-urls': "any URL fetched (loopback, private), redirects followed, the target's answer quoted",
      'hardening/urls-50x19mib': '+1.2 GB kept',
      'hardening/worker-as-nobody': 'every request 502 (`[Errno 13] Permission denied`)',
      'hardening/two-routers-pid-ns': "the second router's sweep unlinked the first one's in-flight files: 502 ENOENT",
      'hardening/clients-128-1080p': 'RSS 4.7 GB',
    };
    const rows = report.scenarios.filter((s) => s.name.startsWith('hardening/'));
    return [
      '| case | before (issue 12) | now | result |',
      '|---|---|---|---|',
      ...rows.map((s) => `| \`${s.name}\` | ${before[s.name] ?? ''} | ${cell(s.details.summary ?? s.details.reason)} | ${result(s)} |`),
    ].join('\n');
  })(),
  host: (() => {
    // Issue 32's cases, measured by the same scenarios (short mode) on the code before its fixes.
    const before: Record<string, string> = {
      'host/raw-http-every-port':
        '`GET //[` to a bootstrap port: the TokenSpeed encode and prefill and the vLLM prefill worker exited (3 of the 6 processes); the next EPD request 503',
      'host/oversized-replies': 'Generate replies of 300 MB taken (200 each); router RSS 482 MiB after one → peak 1320 MiB, two at a time',
      'host/shm-foreign-files': '/health p99 1728 ms, max 1999 ms over 1461 polls; the Overview p50 1842 ms',
      'host/foreign-heartbeat': '8 of 8 entries kept by the other user\'s heartbeat; doctor called their router "process is gone"',
      'host/bootstrap-waiters': '6 of 6 requests 502 "prefill worker … DEADLINE_EXCEEDED: item 0: no embedding … within 20000 ms" (p50 235 ms)',
    };
    const rows = report.scenarios.filter((s) => s.name.startsWith('host/'));
    return [
      '| case | before (issue 32) | now | result |',
      '|---|---|---|---|',
      ...rows.map((s) => `| \`${s.name}\` | ${before[s.name] ?? ''} | ${cell(s.details.summary ?? s.details.reason)} | ${result(s)} |`),
    ].join('\n');
  })(),
  cleanup: scenarioTable((n) => n.startsWith('cleanup/')),
};
const docFile = path.resolve(import.meta.dirname, '..', 'docs', 'reliability.md');
let doc = readFileSync(docFile, 'utf8');
for (const [name, text] of Object.entries(blocks)) {
  const re = new RegExp(`(<!-- report:${name} -->\\n)[\\s\\S]*?(<!-- /report -->)`);
  if (re.test(doc)) doc = doc.replace(re, (_m, open: string, close: string) => `${open}${text}\n${close}`);
}
writeFileSync(docFile, doc);
process.stdout.write(`docs/reliability.md filled from ${file} (${report.mode} mode, seed ${report.seed})\n`);
