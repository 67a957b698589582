// Load: concurrent clients (8, 32, 128) sending chat requests with 1–3 images of mixed sizes
// and formats, streaming and not, through a real `mmtc router` to three reference workers in
// `auto` (TokenSpeed and vLLM sharing our /dev/shm, and a TokenSpeed worker advertising
// another /dev/shm token), for a bounded time. Then the same through `mmtc serve` with a
// config apply every second through the console contract, and the console's traffic stream
// held by a slow WebSocket client.
import { readFileSync, statfsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import WebSocket from 'ws';
import { parseConfigYaml } from '../../core/config/yaml.ts';
import { requestLines, randomChat, sendChat, type Verdict } from '../lib/chat.ts';
import { makeCorpus, type CorpusImage } from '../lib/images.ts';
import { consoleCall, get, metrics, metricsIfAnswered, metricSum, percentile } from '../lib/http.ts';
import { sleep, startRouter, startServe, startWorker, type Proc, type Worker } from '../lib/procs.ts';
import { Rng } from '../lib/rng.ts';
import { ourFiles } from '../lib/shm.ts';
import { fmt, bytesText, MiB, type Suite, type T } from '../lib/suite.ts';
import { tempDir } from '../lib/tmp.ts';

const PREPROCESS_BUDGET = 1024 * MiB;
/**
 * What glibc may keep of freed memory under mmtc's malloc settings (trim_threshold 1 GiB,
 * docs/performance.md, "The malloc setting"): RSS a busy router may hold beyond what it uses,
 * given back once preprocessing has been idle (core/multimodal/pool.ts IDLE_TRIM_MS, 15 s).
 */
const MALLOC_KEEP = 1024 * MiB;
/** What one request in flight holds outside preprocessing (body, its text, image bytes): bench/memory.ts's figure for its one-1080p-JPEG requests. */
const REQUEST_BYTES = 3 * MiB;

/**
 * What one of our requests holds outside the preprocessing budget while in flight, by the
 * same reckoning as bench/memory.ts's REQUEST_BYTES but for what it really carries: its body
 * three times (the buffer, the parsed text, the decoded image bytes), a vLLM batch's
 * concatenated float32 copy when it has several images, and the gRPC message's copy of
 * inline tensors.
 */
function requestBytes(v: { verdict: Verdict; images: CorpusImage[]; bodyBytes: number }): number {
  let n = 3 * v.bodyBytes;
  if (v.verdict.runtime === 'vllm' && v.images.length > 1) n += v.images.reduce((a, im) => a + im.f32Bytes, 0);
  for (const t of v.verdict.tensors) if (t.path === 'inline') n += t.nbytes;
  return n;
}

interface Workers {
  ts: Worker;
  vllm: Worker;
  mismatched: Worker;
  all: Worker[];
}

export async function startThreeWorkers(): Promise<Workers> {
  const [ts, vllm] = await Promise.all([startWorker('tokenspeed', [], { name: 'same /dev/shm' }), startWorker('vllm', [], { name: 'same /dev/shm' })]);
  const [boot, dev] = [ts.token.slice(0, ts.token.lastIndexOf(':')), ts.token.slice(ts.token.lastIndexOf(':') + 1)];
  const mismatched = await startWorker('tokenspeed', ['--shm-namespace-id', `${boot}:${dev === '999999' ? '999998' : '999999'}`], { name: 'other token' });
  return { ts, vllm, mismatched, all: [ts, vllm, mismatched] };
}

class RssSampler {
  samples: Array<{ t: number; rss: number }> = [];
  private timer: NodeJS.Timeout;
  private readonly t0 = performance.now();
  constructor(
    readonly proc: Proc,
    everyMs = 200,
  ) {
    this.timer = setInterval(() => {
      const rss = proc.rss();
      if (rss !== undefined) this.samples.push({ t: (performance.now() - this.t0) / 1000, rss });
    }, everyMs);
  }
  peakSince(t: number): number {
    return Math.max(0, ...this.samples.filter((s) => s.t >= t).map((s) => s.rss));
  }
  now(): number {
    return (performance.now() - this.t0) / 1000;
  }
  stop(): void {
    clearInterval(this.timer);
  }
}

interface LoadStats {
  requests: number;
  ok: number;
  failed: number;
  streamed: number;
  images: number;
  latencies: number[];
  wallSeconds: number;
  problems: string[];
  statuses: Record<string, number>;
  verdicts: Array<{ verdict: Verdict; stream: boolean; images: CorpusImage[]; bodyBytes: number }>;
}

/** `clients` loops of request, check, repeat until `seconds` are over (a request started before the end finishes). */
async function drive(
  base: string,
  corpus: readonly CorpusImage[],
  rng: Rng,
  clients: number,
  seconds: number,
  perRequest?: (v: Verdict) => void,
): Promise<LoadStats> {
  const stats: LoadStats = { requests: 0, ok: 0, failed: 0, streamed: 0, images: 0, latencies: [], wallSeconds: 0, problems: [], statuses: {}, verdicts: [] };
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      const r = rng.fork(c);
      // Spread the first requests over a second so 128 clients do not all start at once.
      await sleep(r.int(0, Math.min(1000, seconds * 100)));
      while (performance.now() < end) {
        const sent = randomChat(r, corpus);
        const { reply, verdict } = await sendChat(base, sent, 300_000);
        stats.requests += 1;
        stats.images += sent.images.length;
        if (sent.stream) stats.streamed += 1;
        stats.statuses[String(reply.status || reply.neterr)] = (stats.statuses[String(reply.status || reply.neterr)] ?? 0) + 1;
        stats.latencies.push(reply.ms);
        if (verdict.ok) stats.ok += 1;
        else {
          stats.failed += 1;
          if (stats.problems.length < 20) stats.problems.push(verdict.problems.join('; ').slice(0, 500));
        }
        stats.verdicts.push({ verdict, stream: sent.stream, images: sent.images, bodyBytes: sent.body.byteLength });
        perRequest?.(verdict);
      }
    }),
  );
  stats.wallSeconds = (performance.now() - t0) / 1000;
  return stats;
}

function pathsOf(m: Map<string, number>): { inline: number; shm: number; remote: number } {
  return {
    inline: metricSum(m, 'smg_mm_tensors_total', 'path="inline"'),
    shm: metricSum(m, 'smg_mm_tensors_total', 'path="shm"'),
    remote: metricSum(m, 'smg_mm_tensors_total', 'path="remote"'),
  };
}

/** What the worker must have seen as each tensor's path: the rule of docs/transport.md for one worker's resolved mode and threshold. */
export function predictPath(t: { name: string; nbytes: number }, mode: string, minBytes: number, tokensEqual: boolean): 'shm' | 'inline' {
  const enabled = mode === 'shm' || (mode === 'auto' && tokensEqual);
  return enabled && t.nbytes >= minBytes ? 'shm' : 'inline';
}

/**
 * The router's outstanding SHM bytes (smg_mm_shm_outstanding_bytes), sampled while the clients
 * run. A tensor the rule sends by SHM goes inline when it does not fit under
 * multimodal_shm_max_outstanding_bytes (shm_budget_exceeded) or when its write fails
 * (shm_write_failed, counted in smg_mm_shm_write_failures_total). The router exposes no
 * counter of the first and its log line no reason, so the budget is judged from this gauge:
 * it explains such tensors only if the sampled peak came within two of the largest tensors of
 * the budget (a sample can miss the very peak).
 */
class OutstandingSampler {
  peak = 0;
  samples = 0;
  private running = true;
  private readonly done: Promise<void>;
  constructor(base: string, everyMs = 200) {
    this.done = (async () => {
      for (let i = 0; this.running && i < 10_000; i++) {
        const m = await metricsIfAnswered(base);
        if (m) {
          this.samples += 1;
          this.peak = Math.max(this.peak, metricSum(m, 'smg_mm_shm_outstanding_bytes'));
        }
        await sleep(everyMs);
      }
    })();
  }
  async stop(): Promise<number> {
    this.running = false;
    await this.done;
    return this.peak;
  }
}

export async function loadGroup(suite: Suite): Promise<void> {
  const levels = [8, 32, 128];
  const names = [...levels.map((c) => `clients-${c}`), 'memory-after-idle', 'live-config'];
  await suite.group('load', names, async () => {
    const corpus = await makeCorpus();
    const w = await startThreeWorkers();
    const levelSeconds = suite.short ? { 8: 6, 32: 6, 128: 8 } : { 8: 60, 32: 60, 128: 60 };
    const noLevelRan = 'no load level ran before it (alone it would pass trivially): run it with load/clients-* or the load/ group';
    if (!levels.some((c) => suite.wants(`load/clients-${c}`))) await suite.run('load/memory-after-idle', async () => {}, { maxSeconds: 1, skip: noLevelRan });
    else {
      // The router's default outstanding-bytes budget: half of what /dev/shm has free when it starts (core/router/server.ts).
      const shmAtStart = statfsSync('/dev/shm');
      const shmBudget = Math.floor((shmAtStart.bavail * shmAtStart.bsize) / 2);
      const router = await startRouter(
        ['--worker-urls', ...w.all.map((x) => x.url), '--multimodal-tensor-transport', 'auto', '--request-timeout-secs', '300'],
        { name: 'router (load)' },
      );
      const rss = new RssSampler(router.proc);
      try {
        const rssStart = router.proc.rss()!;
        // Warm-up (threads, pooled memories, JIT), then the idle base of the memory bound as
        // bench:memory measures it (10 s after the warm-up: the "warm idle" of the target RSS
        // is held to), then, once the idle pool has collected and the heap is trimmed
        // (IDLE_TRIM_MS 15 s + 3 s), the trimmed idle, reported beside it.
        const warm = new Rng(1);
        for (let i = 0; i < 6; i++) await sendChat(router.url, randomChat(warm, corpus));
        await sleep(10_000);
        const warmIdle = router.proc.rss()!;
        await sleep(10_000);
        const trimmedIdle = router.proc.rss()!;
        for (const clients of levels) {
          await suite.run(
            `load/clients-${clients}`,
            async (t) => {
              const from = router.proc.output().length;
              const before = await metrics(router.url);
              const tStart = rss.now();
              const startRss = router.proc.rss()!;
              const outstanding = new OutstandingSampler(router.url);
              const stats = await drive(router.url, corpus, t.rng.fork(clients), clients, levelSeconds[clients as 8 | 32 | 128]);
              const peakOutstanding = await outstanding.stop();
              const peak = rss.peakSince(tStart);
              await sleep(3000);
              const endRss = router.proc.rss()!;
              const after = await metrics(router.url);
              const b = pathsOf(before);
              const a = pathsOf(after);
              const placed = { inline: a.inline - b.inline, shm: a.shm - b.shm, remote: a.remote - b.remote };
              const reported: Record<string, number> = {};
              for (const v of stats.verdicts) for (const [p, n] of Object.entries(v.verdict.paths)) reported[p] = (reported[p] ?? 0) + n;
              // Which worker served each request (the router's log line), and whether its tensors took that worker's path.
              const byId = new Map(requestLines(router.proc.output().slice(from)).map((l) => [l.id, l]));
              const perWorker: Record<string, number> = {};
              let wrongPath = 0;
              // Tensors the rule sends by SHM that came inline: the budget or a failed write (judged below).
              let inlineNotShm = 0;
              let largestShmTensor = 0;
              let unattributed = 0;
              for (const { verdict } of stats.verdicts) {
                const line = verdict.id ? byId.get(verdict.id) : undefined;
                if (!line?.worker) {
                  unattributed += 1;
                  continue;
                }
                const which = line.worker === w.ts.url ? 'tokenspeed' : line.worker === w.vllm.url ? 'vllm' : 'tokenspeed (other token)';
                perWorker[which] = (perWorker[which] ?? 0) + 1;
                const equal = line.worker !== w.mismatched.url;
                for (const tensor of verdict.tensors) {
                  const predicted = predictPath(tensor, 'auto', 65536, equal);
                  if (predicted === 'shm') largestShmTensor = Math.max(largestShmTensor, tensor.nbytes);
                  if (predicted === tensor.path) continue;
                  if (predicted === 'shm' && tensor.path === 'inline') inlineNotShm += 1;
                  else wrongPath += 1;
                }
                for (const p of ['inline', 'shm'] as const) {
                  if ((line.tensors?.[p] ?? 0) !== (verdict.paths[p] ?? 0))
                    t.check(false, `request ${verdict.id}: the router logged ${line.tensors?.[p]} ${p} tensors, the worker reported ${verdict.paths[p] ?? 0}`);
                }
              }
              const writeFailures = metricSum(after, 'smg_mm_shm_write_failures_total') - metricSum(before, 'smg_mm_shm_write_failures_total');
              const budgetReached = peakOutstanding + 2 * largestShmTensor >= shmBudget;
              // What the counters and the gauge explain: failed writes exactly, the budget only if it was within reach.
              const explained = budgetReached ? inlineNotShm : Math.min(inlineNotShm, writeFailures);
              const files = ourFiles('/dev/shm');
              const perRequest = stats.verdicts.reduce((a, v) => a + requestBytes(v), 0) / Math.max(1, stats.verdicts.length);
              const tight = warmIdle + clients * perRequest + PREPROCESS_BUDGET;
              const bound = tight + MALLOC_KEEP;
              const benchBound = warmIdle + clients * REQUEST_BYTES + PREPROCESS_BUDGET;
              const rps = stats.requests / stats.wallSeconds;
              const p50 = percentile(stats.latencies, 50);
              const p99 = percentile(stats.latencies, 99);
              t.check(stats.requests > 0, 'no request completed');
              t.check(stats.failed === 0, `${stats.failed} of ${stats.requests} requests failed or came back wrong: ${stats.problems.slice(0, 3).join(' | ')}`);
              t.check(
                placed.inline + placed.shm === (reported.inline ?? 0) + (reported.shm ?? 0),
                `the router placed ${placed.inline + placed.shm} tensors, the workers reported ${(reported.inline ?? 0) + (reported.shm ?? 0)} (lost tensors)`,
              );
              t.check(wrongPath === 0, `${wrongPath} tensors took another path than their worker's resolved transport`);
              t.check(
                explained === inlineNotShm,
                `${inlineNotShm} tensors the rule sends by SHM went inline, ${writeFailures} write failures counted, and the outstanding bytes peaked at ${bytesText(peakOutstanding)} (sampled) against a budget of ${bytesText(shmBudget)}: ${inlineNotShm - explained} not explained by shm_write_failed or shm_budget_exceeded`,
              );
              t.check(unattributed === 0, `${unattributed} replies have no router log line`);
              t.check(files.length === 0, `${files.length} files of ours left in /dev/shm: ${files.slice(0, 3).map((f) => f.name)}`);
              t.check(
                peak <= bound,
                `router peak RSS ${bytesText(peak)} above its bound ${bytesText(bound)} (warm idle ${bytesText(warmIdle)} + ${clients} × ${fmt(perRequest / MiB)} MiB per request in flight + preprocess_memory_bytes 1024 MiB + what malloc may keep, 1024 MiB)`,
              );
              t.check(Object.keys(perWorker).length === 3, `not every worker got requests: ${JSON.stringify(perWorker)}`);
              t.note('clients', clients);
              t.note('seconds', Math.round(stats.wallSeconds * 10) / 10);
              t.note('requests', stats.requests);
              t.note('ok', stats.ok);
              t.note('failed', stats.failed);
              t.note('streamed', stats.streamed);
              t.note('images', stats.images);
              t.note('statuses', stats.statuses);
              t.note('requests_per_second', Math.round(rps * 100) / 100);
              t.note('p50_ms', Math.round(p50));
              t.note('p99_ms', Math.round(p99));
              t.note('tensors_placed_by_path', placed);
              t.note('tensors_reported_by_path', reported);
              t.note('inline_where_shm_predicted', {
                tensors: inlineNotShm,
                shm_write_failures: writeFailures,
                outstanding_peak_mib: Math.round(peakOutstanding / MiB),
                outstanding_samples: outstanding.samples,
                budget_mib: Math.round(shmBudget / MiB),
                budget_within_reach: budgetReached,
              });
              t.note('requests_by_worker', perWorker);
              t.note('rss_mib', {
                start: Math.round(startRss / MiB),
                peak: Math.round(peak / MiB),
                end: Math.round(endRss / MiB),
                bound: Math.round(bound / MiB),
                without_malloc_keep: Math.round(tight / MiB),
                within_it: peak <= tight,
                per_request_mib: Math.round((perRequest / MiB) * 10) / 10,
                bound_with_3mib_requests: Math.round(benchBound / MiB),
                warm_idle: Math.round(warmIdle / MiB),
                process_start: Math.round(rssStart / MiB),
              });
              t.note('files_left', files.length);
              t.summary(
                `${stats.requests} requests (${stats.ok} correct, ${stats.streamed} streamed, ${stats.images} images) in ${fmt(stats.wallSeconds)} s: ${fmt(rps, 2)} req/s, p50 ${fmt(p50, 0)} ms, p99 ${fmt(p99, 0)} ms; tensors inline ${placed.inline} / shm ${placed.shm}${inlineNotShm ? ` (${inlineNotShm} inline past the SHM budget or a failed write)` : ''}; RSS ${bytesText(startRss)} → peak ${bytesText(peak)} (bound ${bytesText(bound)}, ${bytesText(tight)} without what malloc keeps) → ${bytesText(endRss)}; files left ${files.length}`,
              );
            },
            { seeded: true, maxSeconds: levelSeconds[clients as 8 | 32 | 128] + 240 },
          );
        }
        // Memory comes back: after the levels, once idle, the router is back within 2× its warm idle.
        const levelsRan = suite.results.some((r) => r.name.startsWith('load/clients-') && r.status !== 'skipped');
        await suite.run(
          'load/memory-after-idle',
          async (t) => {
            // Up to 30 s (short) or 60 s; the short mode ends at 20 s once the RSS is back by then.
            // The idle trim runs 15 s after the last request, its collection 1 s later: 20 s alone
            // left a loaded machine 4 s of margin.
            const idleSeconds = t.short ? 30 : 60;
            const enoughSeconds = t.short ? 20 : 60;
            const startIdle = rss.now();
            const before = router.proc.rss()!;
            let backAt: number | undefined;
            while (rss.now() - startIdle < idleSeconds && !(backAt !== undefined && rss.now() - startIdle >= enoughSeconds)) {
              await sleep(500);
              if (backAt === undefined && router.proc.rss()! <= 2 * warmIdle) backAt = rss.now() - startIdle;
            }
            const idled = Math.round(rss.now() - startIdle);
            const after = router.proc.rss()!;
            t.note('rss_breakdown_mib', rssBreakdown(router.proc.pid));
            const m = await metricsIfAnswered(router.url);
            if (m)
              t.note('router_memory_mib', {
                preprocess_resident: Math.round(metricSum(m, 'mmtc_preprocess_memory_bytes') / MiB),
                pixel_cache_in_shm: Math.round(metricSum(m, 'smg_mm_pixel_cache_bytes') / MiB),
              });
            t.check(backAt !== undefined, `RSS not back within 2 × warm idle (${bytesText(2 * warmIdle)}) after ${idleSeconds} s idle: ${bytesText(after)}`);
            t.note('rss_mib', {
              warm_idle: Math.round(warmIdle / MiB),
              trimmed_idle: Math.round(trimmedIdle / MiB),
              at_idle_start: Math.round(before / MiB),
              after_idle: Math.round(after / MiB),
              after_idle_vs_trimmed_idle: Math.round((after / trimmedIdle) * 100) / 100,
            });
            t.note('idle_seconds', idled);
            t.note('back_within_2x_warm_idle_after_s', backAt === undefined ? null : Math.round(backAt * 10) / 10);
            t.summary(
              `warm idle ${bytesText(warmIdle)} (trimmed idle ${bytesText(trimmedIdle)}); after the load ${bytesText(before)}; back within 2× warm idle ${backAt === undefined ? 'NOT' : `${fmt(backAt)} s`} into ${idled} s of idle; ${bytesText(after)} at the end (${fmt(after / trimmedIdle, 2)}× the trimmed idle)`,
            );
          },
          { maxSeconds: 120, ...(levelsRan ? {} : { skip: noLevelRan }) },
        );
        suite.results
          .filter((r) => r.name.startsWith('load/clients-') || r.name === 'load/memory-after-idle')
          .forEach((r) => (r.details.rss_series = thin(rss.samples)));
      } finally {
        rss.stop();
        await router.proc.stop();
      }
    }
    await suite.run('load/live-config', (t) => liveConfig(t, corpus, w), { seeded: true, maxSeconds: (suite.short ? 15 : 60) + 240 });
  });
}

/** Where a process's resident memory is, from /proc/<pid>/smaps (MiB): malloc's main heap, other anonymous mappings (thread arenas, V8's heaps, WebAssembly memories), files. */
function rssBreakdown(pid: number): Record<string, number | number[]> {
  const out = { heap: 0, anonymous: 0, files: 0, largest_anonymous: 0 };
  const anonymous: number[] = [];
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/smaps`, 'utf8');
  } catch {
    return out; // the process exited: zeros, in a note (nothing is checked against it)
  }
  let kind: 'heap' | 'anonymous' | 'files' = 'anonymous';
  for (const line of text.split('\n')) {
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \d+\s*(.*)$/.exec(line);
    if (head) {
      const name = head[1]!.trim();
      kind = name === '[heap]' ? 'heap' : name === '' || name.startsWith('[') ? 'anonymous' : 'files';
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) {
      const kb = Number(rss[1]);
      out[kind] += kb;
      if (kind === 'anonymous') {
        out.largest_anonymous = Math.max(out.largest_anonymous, kb);
        if (kb >= 1024) anonymous.push(kb);
      }
    }
  }
  // The anonymous mappings of 1 MiB or more, largest first (MiB): V8's spaces, malloc arenas, WebAssembly memories.
  const top = anonymous
    .sort((a, b) => b - a)
    .slice(0, 16)
    .map((kb) => Math.round(kb / 1024));
  return {
    ...Object.fromEntries(Object.entries(out).map(([k, v]) => [k, Math.round(v / 1024)])),
    anonymous_mappings_1mib_or_more: anonymous.length,
    largest_anonymous_mappings: top,
  };
}

function thin(samples: Array<{ t: number; rss: number }>, n = 80): Array<[number, number]> {
  const every = Math.max(1, Math.ceil(samples.length / n));
  return samples.filter((_, i) => i % every === 0).map((s) => [Math.round(s.t * 10) / 10, Math.round(s.rss / MiB)]);
}

type Draft = Record<string, unknown> & { workers: Array<Record<string, unknown> & { url: string }> };

/**
 * Load through `mmtc serve` while a config is applied every second through the console
 * contract (HTTP binding), rotating three configurations that send each worker's tensors
 * different ways; every reply's tensors must have taken the paths of the revision on its
 * header (a half-applied config would show as a tensor on the wrong path), and the router's
 * log line for it must name the same revision. The traffic stream meanwhile goes to a
 * WebSocket client that reads a tenth of the time.
 */
async function liveConfig(t: T, corpus: CorpusImage[], w: Workers): Promise<void> {
  const dir = tempDir('live');
  const file = path.join(dir, 'router.yaml');
  writeFileSync(
    file,
    `# reliability: live configuration under load\nmultimodal_tensor_transport: auto\nhealth_check_interval_secs: 1\nrequest_timeout_secs: 300\nworkers:\n${w.all.map((x) => `  - url: ${x.url}\n`).join('')}`,
  );
  const serve = await startServe(['--config', file], { name: 'serve (live config)', env: { XDG_CONFIG_HOME: dir } });
  const rss = new RssSampler(serve.proc);
  const seconds = t.short ? 12 : 60;
  const clients = t.short ? 16 : 32;
  try {
    const view = (await consoleCall(serve.consoleUrl, serve.token, 'config.get', {})).json;
    const base = view.config as Draft;
    const configs = new Map<number, Draft>([[view.revision as number, base]]);
    const rotation: Array<(c: Draft) => Draft> = [
      (c) => ({ ...c, multimodal_tensor_transport: 'auto', multimodal_shm_min_bytes: 0, workers: c.workers.map((x) => ({ url: x.url })) }),
      (c) => ({
        ...c,
        multimodal_tensor_transport: 'auto',
        multimodal_shm_min_bytes: 1024 * 1024,
        workers: c.workers.map((x) => (x.url === w.mismatched.url ? { url: x.url, multimodal_tensor_transport: 'shm' } : { url: x.url })),
      }),
      (c) => ({
        ...c,
        multimodal_tensor_transport: 'inline',
        multimodal_shm_min_bytes: 65536,
        workers: c.workers.map((x) =>
          x.url === w.vllm.url ? { url: x.url, multimodal_tensor_transport: 'auto', multimodal_shm_min_bytes: 0 } : { url: x.url },
        ),
      }),
    ];
    // The slow subscriber: reads for 100 ms every 2 s.
    const slow = { messages: 0, events: 0, dropped: 0, lastDropped: 0 };
    const ws = new WebSocket(`${serve.consoleUrl.replace(/^http/, 'ws')}/api/events`, ['mmtc.v1', `mmtc.token.${serve.token}`]);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    ws.on('message', (data) => {
      const msg = JSON.parse(String(data));
      if (msg.stream !== 'traffic') return;
      slow.messages += 1;
      slow.events += msg.payload.events.length;
      slow.lastDropped = msg.payload.dropped;
    });
    ws.send(JSON.stringify({ op: 'subscribe', stream: 'traffic' }));
    ws.pause();
    let reading = true;
    const reader = (async () => {
      while (reading) {
        await sleep(1900);
        ws.resume();
        await sleep(100);
        if (reading) ws.pause();
      }
    })();
    // The applies: one a second, each against the revision the last one returned.
    let revision = view.revision as number;
    let applying = true;
    let applies = 0;
    const applyErrors: string[] = [];
    const applyMs: number[] = [];
    const applier = (async () => {
      for (let i = 0; applying; i++) {
        await sleep(1000);
        if (!applying) break;
        const draft = rotation[i % rotation.length]!(base);
        const t0 = performance.now();
        const r = await consoleCall(serve.consoleUrl, serve.token, 'config.apply', { draft, expectedRevision: revision });
        applyMs.push(performance.now() - t0);
        if (r.status !== 200) {
          applyErrors.push(`${r.status}: ${r.body.slice(0, 200)}`);
          continue;
        }
        revision = r.json.revision;
        configs.set(revision, draft);
        applies += 1;
      }
    })();
    const from = serve.proc.output().length;
    const placedBefore = pathsOf(await metrics(serve.routerUrl));
    const stats = await drive(serve.routerUrl, corpus, t.rng.fork(7), clients, seconds);
    applying = false;
    await applier;
    reading = false;
    await reader;
    ws.resume();
    // Every request is over, so every tensor is placed and published: read the stream until the
    // slow client has heard of all of them (received or dropped), or its counts stop changing
    // for 3 s; 10 s at most.
    const placedAfter = pathsOf(await metrics(serve.routerUrl));
    const published = placedAfter.inline + placedAfter.shm - placedBefore.inline - placedBefore.shm;
    const drainStart = performance.now();
    let lastSeen = -1;
    let stableSince = performance.now();
    while (performance.now() - drainStart < 10_000) {
      const seen = slow.events + slow.lastDropped;
      if (seen === published) break;
      if (seen !== lastSeen) {
        lastSeen = seen;
        stableSince = performance.now();
      } else if (performance.now() - stableSince > 3000) break;
      await sleep(100);
    }
    const drainMs = performance.now() - drainStart;
    slow.dropped = slow.lastDropped;
    ws.close();
    const lines = new Map(requestLines(serve.proc.output().slice(from)).map((l) => [l.id, l]));
    const byRevision: Record<string, number> = {};
    let halfApplied = 0;
    let unknownRevision = 0;
    let logMismatch = 0;
    for (const { verdict } of stats.verdicts) {
      if (verdict.revision === undefined) continue;
      byRevision[verdict.revision] = (byRevision[verdict.revision] ?? 0) + 1;
      const config = configs.get(verdict.revision);
      const line = verdict.id ? lines.get(verdict.id) : undefined;
      if (!line || line.revision !== verdict.revision) logMismatch += 1;
      if (!config || !line?.worker) {
        unknownRevision += 1;
        continue;
      }
      const spec = config.workers.find((x) => x.url === line.worker) ?? { url: line.worker };
      const mode = String(spec.multimodal_tensor_transport ?? config.multimodal_tensor_transport ?? 'inline');
      const minBytes = Number(spec.multimodal_shm_min_bytes ?? config.multimodal_shm_min_bytes ?? 65536);
      const wrong = verdict.tensors.filter((x) => predictPath(x, mode, minBytes, line.worker !== w.mismatched.url) !== x.path);
      if (wrong.length > 0) {
        halfApplied += 1;
        if (halfApplied <= 3)
          t.check(
            false,
            `request ${verdict.id} on revision ${verdict.revision} (${mode}, min ${minBytes}) to ${line.worker}: ${wrong.map((x) => `${x.name} ${x.nbytes} B via ${x.path}`).join(', ')}`,
          );
      }
    }
    const fileNow = parseConfigYaml(readFileSync(file, 'utf8'), file).config;
    const last = configs.get(revision)!;
    const files = ourFiles('/dev/shm');
    const peak = rss.peakSince(0);
    const rps = stats.requests / stats.wallSeconds;
    t.check(stats.failed === 0, `${stats.failed} of ${stats.requests} requests failed or came back wrong: ${stats.problems.slice(0, 3).join(' | ')}`);
    // One apply a second is the pace asked for; how many fit depends on how long each takes under load (reported, not gated).
    t.check(applies >= 3, `only ${applies} applies went through in ${seconds} s`);
    t.check(applyErrors.length === 0, `applies refused: ${applyErrors.slice(0, 3).join(' | ')}`);
    t.check(halfApplied === 0, `${halfApplied} requests took paths their revision does not give (a half-applied config)`);
    t.check(unknownRevision === 0, `${unknownRevision} replies name a revision that was never applied, or have no log line`);
    t.check(logMismatch === 0, `${logMismatch} replies whose log line names another revision than their header (or has none)`);
    t.check(Object.keys(byRevision).length >= 3, `requests saw only ${Object.keys(byRevision).length} revisions`);
    t.check(
      fileNow.multimodal_tensor_transport === last.multimodal_tensor_transport && fileNow.multimodal_shm_min_bytes === last.multimodal_shm_min_bytes,
      `the YAML file does not hold the last applied revision (${fileNow.multimodal_tensor_transport}, ${fileNow.multimodal_shm_min_bytes})`,
    );
    t.check(slow.messages > 0, 'the slow traffic client received nothing');
    t.check(
      slow.events + slow.dropped === published,
      `the slow client received ${slow.events} events and was told of ${slow.dropped} dropped, but ${published} tensors were placed (events lost without being counted)`,
    );
    t.check(files.length === 0, `${files.length} files of ours left in /dev/shm`);
    t.check((await get(serve.routerUrl, '/health')).status === 200, 'the router is not healthy after the run');
    const perRequest = stats.verdicts.reduce((a, v) => a + requestBytes(v), 0) / Math.max(1, stats.verdicts.length);
    // No warm-up here: a cold serve process's base is taken as 600 MiB, above its idle RSS with the console (measured: docs/performance.md, "A serve process's idle RSS").
    const bound = 600 * MiB + clients * perRequest + PREPROCESS_BUDGET + MALLOC_KEEP;
    t.check(
      peak <= bound,
      `serve peak RSS ${bytesText(peak)} above ${bytesText(bound)} (600 MiB + ${clients} × ${fmt(perRequest / MiB)} MiB + preprocess_memory_bytes + what malloc may keep)`,
    );
    t.note('clients', clients);
    t.note('seconds', Math.round(stats.wallSeconds * 10) / 10);
    t.note('requests', stats.requests);
    t.note('failed', stats.failed);
    t.note('requests_per_second', Math.round(rps * 100) / 100);
    t.note('p50_ms', Math.round(percentile(stats.latencies, 50)));
    t.note('p99_ms', Math.round(percentile(stats.latencies, 99)));
    t.note('applies', applies);
    t.note('apply_ms_p50', Math.round(percentile(applyMs, 50)));
    t.note('apply_ms_max', Math.round(Math.max(0, ...applyMs)));
    t.note('requests_by_revision', byRevision);
    t.note('half_applied', halfApplied);
    t.note('slow_traffic_client', { ...slow, tensors_placed: published, drain_ms: Math.round(drainMs) });
    t.note('rss_mib', {
      start: Math.round((rss.samples[0]?.rss ?? 0) / MiB),
      peak: Math.round(peak / MiB),
      end: Math.round((serve.proc.rss() ?? 0) / MiB),
      bound: Math.round(bound / MiB),
    });
    t.note('files_left', files.length);
    t.summary(
      `${stats.requests} requests over ${Object.keys(byRevision).length} revisions (${applies} applies, p50 ${fmt(percentile(applyMs, 50), 0)} ms each), ${fmt(rps, 2)} req/s, p50 ${fmt(percentile(stats.latencies, 50), 0)} ms, p99 ${fmt(percentile(stats.latencies, 99), 0)} ms; half-applied 0 of ${stats.requests} required, got ${halfApplied}; slow client ${slow.messages} batches, ${slow.events} events, ${slow.dropped} dropped; serve peak RSS ${bytesText(peak)}; files left ${files.length}`,
    );
  } finally {
    rss.stop();
    await serve.proc.stop();
  }
}
