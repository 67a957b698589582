// Pixel cache benchmark: multi-turn conversations that resend the same 1080p JPEG each turn
// (as a chat client resends its history), through real `mmtc router` processes with the pixel
// cache on (multimodal_pixel_cache_mb 512) and off (0): to a real vLLM reference worker
// (float32 encoder input [4888, 1176], 23 MB, the bundled Qwen2-VL model) auto (SHM: a hit is
// a hard link) and inline, and to a real TokenSpeed reference worker auto (bfloat16, 11.5 MB,
// attached read-write as its scheduler attaches it: a hit is a copy of the request's own),
// each reading into a fresh buffer per tensor (`--read-buffer fresh`, as the gateway's
// Python servicers read). Each conversation has its own image (a different seed, and a few
// pixels set from its number), so no two conversations share an entry and turn 1 is always a
// miss. The four routers run at once and their sessions are interleaved in a rotating order,
// so every configuration sees the same machine; c=1 runs conversations one after another,
// c=8 runs 8 conversations at once.
//
// Printed per configuration: turn-1 (miss) p50, turns 2–N (hits, with the cache on) p50,
// requests/s over the conversations' wall time, and the router's Server-Timing spans. Ratios
// against the cache-off router of the same transport in the same run:
//   - turns 2–5 p50, vLLM auto, c=1: cache off / cache on ≥ 3×;
//   - turns 2–5 p50, TokenSpeed auto, c=1: cache off / cache on ≥ 2× (a copy per hit);
//   - requests/s, vLLM auto, c=8: cache on / cache off ≥ 2.5×;
//   - turn-1 p50: cache on / cache off ≤ 1.05 (the miss costs no more than without a cache).
// Then the hit path's router-side cost, in this process: the media hash (BLAKE3) of the JPEG + PixelCache
// lookup + CachedEntry.place (a hard link) into a request scope + release, for the 23 MB tensor, against a
// bare write of the same bytes to a new /dev/shm file (as bench:router's baseline), same run;
// target hit p50 ≤ 1 ms. At the end: each router's RSS against the cache budget and
// preprocess_memory_bytes, and the /dev/shm files the benchmark's processes left (must be 0:
// the only check that fails the benchmark, with any request that does not answer 200).
//
// Usage: npm run bench:cache [-- --quick]   (--quick: 3 turns, fewer conversations, no chart: the CI smoke)
import { execFileSync } from 'node:child_process';
import { lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { QWEN2_VL } from '../core/multimodal/families/qwen2-vl.ts';
import { mediaHash } from '../core/multimodal/media-hash.ts';
import { patchGeometry, QWEN_VL_DEFAULTS } from '../core/multimodal/qwen-vl.ts';
import { RequestCacheUses } from '../core/router/cached-images.ts';
import { pythonWithPillow } from '../core/test/python.ts';
import { parseShmName } from '../core/transport/shm-names.ts';
import { PixelCache, pixelFingerprint } from '../core/transport/pixel-cache.ts';
import { ShmWriter } from '../core/transport/shm-writer.ts';
import { renderBarChart } from './chart.ts';
import { bareWrite, chatBody1080p, percentile, request, type Sample, inScratchDir } from './chat-load.ts';
import { root, runBench, startMmtc, stopAll, type Started } from './procs.ts';

const quick = process.argv.includes('--quick');
const TURNS = quick ? 3 : 5;
/** Interleaved rounds per concurrency (the order of the routers rotates each round). */
const ROUNDS = { 1: quick ? 2 : 4, 8: quick ? 1 : 4 } as const;
/** Conversations per session: one after another at c=1, all at once at c=8. */
const CONVERSATIONS = { 1: quick ? 1 : 3, 8: 8 } as const;
const CONCURRENCIES = [1, 8] as const;
/**
 * The routers' lanes: vLLM over SHM (the pixel cache's hit is a hard link) and inline, and
 * TokenSpeed over SHM (bfloat16, its model dtype: its scheduler attaches the file read-write,
 * so a hit is a copy of the request's own, never the cached inode).
 */
const LANES = [
  { name: 'vllm auto', runtime: 'vllm', mode: 'auto' },
  { name: 'vllm inline', runtime: 'vllm', mode: 'inline' },
  { name: 'tokenspeed auto', runtime: 'tokenspeed', mode: 'auto' },
] as const;
const CACHES = ['off', 'on'] as const;
const CACHE_MB = Number(process.env.BENCH_CACHE_MB ?? 512);
const PREPROCESS_MEMORY_BYTES = 1024 * 1024 * 1024; // the default, set explicitly so it is the one printed
const MICRO_ROUNDS = quick ? 10 : 40;
const WARMUP = 3;
const MICRO_HITS_PER_ROUND = 5;
const MiB = 1024 * 1024;
const SHM = '/dev/shm';
type Mode = (typeof LANES)[number]['name'];
type Cache = (typeof CACHES)[number];
type Concurrency = (typeof CONCURRENCIES)[number];
const later = `turns 2–${TURNS}`;

/** The place baseline of bench:router: open(O_CREAT|O_EXCL|O_NOFOLLOW, 0600) + write + close of a new /dev/shm file (unlinked after, untimed). */
/** `count` distinct 1080p JPEGs (quality 90, the scene of chatBody1080p with another noise seed and a few pixels set from the index), written under `dir` in one Python run. */
function distinctJpegs(dir: string, count: number): Buffer[] {
  execFileSync(pythonWithPillow(), [
    '-c',
    `import numpy as np, sys; from PIL import Image
h, w = 1080, 1920; y, x = np.mgrid[0:h, 0:w]
r = (128 + 100 * np.sin(x / 37.0) * np.cos(y / 23.0)).astype(np.uint8); g = ((x * 255) // w).astype(np.uint8)
check = ((x // 64 + y // 64) % 2) * 200
for i in range(int(sys.argv[2])):
    rng = np.random.default_rng(1000 + i)
    b = (check + rng.integers(0, 40, (h, w))).astype(np.uint8)
    a = np.dstack([r, g, b]); a[0, 0:4] = [(i >> 16) & 255, (i >> 8) & 255, i & 255]
    Image.fromarray(a).save(f'{sys.argv[1]}/conv-{i}.jpg', quality=90)`,
    dir,
    String(count),
  ]);
  return Array.from({ length: count }, (_, i) => readFileSync(path.join(dir, `conv-${i}.jpg`)));
}

/** Turn `turn` (0-based) of a conversation about one image: its history (the image in the first user message, a short exchange per earlier turn) and the next question. */
function turnBody(jpegBase64: string, turn: number): Buffer {
  const messages: unknown[] = [
    {
      role: 'user',
      content: [
        { type: 'image_url', image_url: { url: `data:image/jpeg;base64,${jpegBase64}` } },
        { type: 'text', text: 'Describe the image.' },
      ],
    },
  ];
  for (let t = 1; t <= turn; t++)
    messages.push(
      { role: 'assistant', content: `Answer ${t}: a striped, checkered test picture.` },
      { role: 'user', content: `Question ${t + 1}: what else is in the picture?` },
    );
  return Buffer.from(JSON.stringify({ model: 'bench', max_tokens: 16, messages }));
}

interface Result {
  first: Sample[];
  rest: Sample[];
  requests: number;
  wallMs: number;
}

/** `conversations` (each its turns' bodies) through `url`, `concurrency` of them at a time, each turn sent once the previous one answered. */
async function session(url: string, conversations: Buffer[][], concurrency: number, into: Result): Promise<void> {
  let next = 0;
  const t = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < conversations.length) {
        const turns = conversations[next++]!;
        for (let turn = 0; turn < turns.length; turn++) {
          const s = await request(url, turns[turn]!);
          (turn === 0 ? into.first : into.rest).push(s);
          into.requests += 1;
        }
      }
    }),
  );
  into.wallMs += performance.now() - t;
}

/** This router's numbers on /metrics (undefined where a metric is not exported). */
async function scrape(url: string): Promise<Record<string, number | undefined>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const value = (name: string) => {
    const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text);
    return m ? Number(m[1]) : undefined;
  };
  return Object.fromEntries(
    [
      'mmtc_preprocess_memory_bytes',
      'smg_mm_pixel_cache_hits_total',
      'smg_mm_pixel_cache_misses_total',
      'smg_mm_pixel_cache_evictions_total',
      'smg_mm_pixel_cache_tampered_total',
      'smg_mm_pixel_cache_bytes',
      'smg_mm_pixel_cache_entries',
      'smg_mm_pixel_cache_budget_bytes',
    ].map((n) => [n, value(n)]),
  );
}

function rssOf(pid: number): number {
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;
}

/** Our /dev/shm entries: tensor files, probes and cache files named after one of `pids`, with their sizes. */
function shmFilesOf(pids: Set<number>): Array<{ name: string; size: number; cache: boolean }> {
  const out: Array<{ name: string; size: number; cache: boolean }> = [];
  for (const name of readdirSync(SHM)) {
    const parsed = parseShmName(name);
    if (!parsed || !pids.has(parsed.pid)) continue;
    try {
      out.push({ name, size: lstatSync(path.join(SHM, name)).size, cache: parsed.kind === 'cache-entry' || parsed.kind === 'cache-heartbeat' });
    } catch {
      /* unlinked meanwhile */
    }
  }
  return out;
}

/**
 * The hit path's router-side cost, in this process, as prepare.ts and placement take it: the
 * key (BLAKE3 of the JPEG), PixelCache.lookup (open + fstat of the entry), CachedEntry.place
 * into a request scope (fstat + link under a tensor name), and at the end of the request the
 * scope's complete() (the worker unlinked the link already: here, untimed) and release()
 * (fstat + close). Interleaved with bare writes of the same bytes. Apart, not in the total:
 * RequestCacheUses.hitImage for a hit that goes by link (prepare.ts), which gives the request
 * an empty placeholder for the tensor (its bytes stay in the cache).
 */
async function hitCost(
  jpeg: Buffer,
  g: ReturnType<typeof patchGeometry>,
  nbytes: number,
): Promise<{ hash: number[]; lookup: number[]; link: number[]; release: number[]; total: number[]; view: number[]; bare: number[]; copy: number[] }> {
  const writer = new ShmWriter({});
  const cache = new PixelCache({ writer, budgetBytes: 4 * nbytes });
  const tensor = Buffer.alloc(nbytes, 0x3c);
  const fingerprint = pixelFingerprint({ bench: 'cache', kind: 'float32' });
  const out = {
    hash: [] as number[],
    lookup: [] as number[],
    link: [] as number[],
    release: [] as number[],
    total: [] as number[],
    view: [] as number[],
    bare: [] as number[],
    copy: [] as number[],
  };
  try {
    const hash = mediaHash(jpeg);
    const key = cache.keyOf(hash, fingerprint);
    const first = await cache.lookup(key);
    if (first.kind !== 'miss') throw new Error(`an empty pixel cache answered ${first.kind}`);
    const stored = await first.miss.store(
      {
        kind: 'float32',
        nbytes,
        patches: g.patches,
        features: g.features,
        encoderShape: QWEN2_VL.encoderShape(g, QWEN2_VL.defaults),
        modelTensors: QWEN2_VL.imageTensors(g),
        tokens: g.tokens,
        mediaHash: hash,
      },
      { kind: 'memory', bytes: tensor },
    );
    if (!stored) throw new Error(`the pixel cache did not store the entry: ${JSON.stringify(cache.stats())}`);
    for (let round = 0; round < MICRO_ROUNDS; round++) {
      for (let i = 0; i < MICRO_HITS_PER_ROUND; i++) {
        const scope = writer.newScope();
        const t0 = performance.now();
        const k = cache.keyOf(mediaHash(jpeg), fingerprint);
        const t1 = performance.now();
        const look = await cache.lookup(k);
        const t2 = performance.now();
        if (look.kind !== 'hit') throw new Error(`lookup ${round}.${i} answered ${look.kind}: ${JSON.stringify(cache.stats())}`);
        let linked: Awaited<ReturnType<typeof look.entry.place>>;
        try {
          linked = await look.entry.place(scope, 'bench', false);
          const t3 = performance.now();
          if (!linked) throw new Error(`link ${round}.${i} failed: ${JSON.stringify(cache.stats())}`);
          unlinkSync(path.join(SHM, linked.handle.name)); // the worker's read and unlink: not the router's cost
          const t4 = performance.now();
          scope.complete();
          look.entry.release();
          const t5 = performance.now();
          out.hash.push(t1 - t0);
          out.lookup.push(t2 - t1);
          out.link.push(t3 - t2);
          out.release.push(t5 - t4);
          out.total.push(t1 - t0 + (t3 - t1) + (t5 - t4));
        } finally {
          scope.cleanup();
          look.entry.release();
        }
      }
      {
        // multimodal_pixel_cache_shm: copy (and a worker caught writing into an entry): a copy of its own instead of a link.
        const look = await cache.lookup(cache.keyOf(mediaHash(jpeg), fingerprint));
        if (look.kind !== 'hit') throw new Error(`lookup ${round} answered ${look.kind}`);
        const scope = writer.newScope();
        try {
          const t0 = performance.now();
          const copied = await look.entry.place(scope, 'bench', true);
          out.copy.push(performance.now() - t0);
          if (!copied?.copied) throw new Error(`copy ${round} failed`);
        } finally {
          scope.cleanup();
          look.entry.release();
        }
      }
      const look = await cache.lookup(cache.keyOf(mediaHash(jpeg), fingerprint));
      if (look.kind !== 'hit') throw new Error(`lookup ${round} answered ${look.kind}: ${JSON.stringify(cache.stats())}`);
      const uses = new RequestCacheUses();
      try {
        const t0 = performance.now();
        const image = await uses.hitImage(look.entry, false, undefined);
        out.view.push(performance.now() - t0);
        if (!image) throw new Error(`hitImage ${round} found no entry`);
      } finally {
        uses.release();
        look.entry.release();
      }
      out.bare.push(bareWrite(tensor));
    }
    const s = cache.stats();
    if (s.tampered > 0 || s.entries !== 1) throw new Error(`the pixel cache changed under the benchmark: ${JSON.stringify(s)}`);
  } finally {
    cache.close();
  }
  return out;
}

const main = () => inScratchDir('mmtc-bench-cache-', measure);

async function measure(dir: string) {
  const began = performance.now();
  const g = patchGeometry(1080, 1920, QWEN_VL_DEFAULTS.qwen2_vl); // the bundled model is Qwen2-VL
  const nbytes = g.patches * g.features * 4; // vLLM: float32
  const warm = chatBody1080p(dir); // warm-up body: its image is none of the conversations'
  const jpegs = distinctJpegs(dir, ROUNDS[1] * CONVERSATIONS[1] + ROUNDS[8] * CONVERSATIONS[8]);
  const jpegBytes = percentile(
    jpegs.map((j) => j.byteLength),
    50,
  );

  const started: Array<{ name: string; proc: Started }> = [];
  const workers = new Map<string, Started>();
  for (const runtime of ['vllm', 'tokenspeed'] as const) {
    const worker = await startMmtc(
      ['worker', '--runtime', runtime, '--port', '0', '--no-fingerprint', '--read-buffer', 'fresh'],
      /listening on (grpc:\/\/\S+)/,
    );
    started.push({ name: `${runtime} worker (fresh)`, proc: worker });
    workers.set(runtime, worker);
  }
  const routers = new Map<string, { url: string; proc: Started; mode: Mode; cache: Cache }>();
  // Started at once (their start-up is model loading, not what is measured), each warmed up on its own.
  await Promise.all(
    LANES.flatMap((lane) =>
      CACHES.map(async (cache) => {
        const mode = lane.name;
        const file = path.join(dir, `router-${lane.runtime}-${lane.mode}-${cache}.yaml`);
        writeFileSync(
          file,
          `${JSON.stringify({ workers: [{ url: workers.get(lane.runtime)!.match }], multimodal_tensor_transport: lane.mode, multimodal_pixel_cache_mb: cache === 'on' ? CACHE_MB : 0, preprocess_memory_bytes: PREPROCESS_MEMORY_BYTES })}\n`,
        );
        const proc = await startMmtc(['router', '--port', '0', '--config', file], /listening on (http:\/\/\S+)/);
        started.push({ name: `router ${mode}, cache ${cache}`, proc });
        if (!/^http:\/\/127\.0\.0\.1:\d+$/.test(proc.match)) throw new Error(`router listens on ${proc.match}, not on 127.0.0.1`);
        routers.set(`${mode} ${cache}`, { url: proc.match, proc, mode, cache });
        // Warm-up: threads, JIT, channels, pooled memory; with the cache on, one miss and then hits of the warm-up image.
        for (let i = 0; i < WARMUP; i++) await request(proc.match, warm);
      }),
    ),
  );
  const keys = LANES.flatMap((lane) => CACHES.map((cache) => `${lane.name} ${cache}`)); // a fixed order to rotate
  process.stdout.write(
    `pixel cache benchmark on ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, Node ${process.version}; conversations of ${TURNS} turns, each turn resending its own 1080p JPEG (${(jpegBytes / 1e6).toFixed(2)} MB, encoder input [${g.patches}, ${g.features}], ${(nbytes / 1e6).toFixed(1)} MB as vLLM's float32, ${(nbytes / 2e6).toFixed(1)} MB as TokenSpeed's bfloat16) to a vLLM and a TokenSpeed reference worker reading into fresh buffers (TokenSpeed attaching its bfloat16 encoder input read-write, as its scheduler does); cache on = multimodal_pixel_cache_mb ${CACHE_MB}, off = 0; interleaved rounds: ${ROUNDS[1]} of ${CONVERSATIONS[1]} conversations one after another (c=1), ${ROUNDS[8]} of ${CONVERSATIONS[8]} at once (c=8)\n\n`,
  );
  process.stdout.write(
    `| runtime, mode | pixel cache | concurrency | conversations | requests | req/s | turn-1 p50 ms | ${later} p50 ms | ${later} p99 ms | turn-1 preprocess p50 | ${later} preprocess p50 | ${later} place p50 | ${later} worker p50 |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n`,
  );

  const results = new Map<string, Result>();
  const res = (c: Concurrency, mode: Mode, cache: Cache) => results.get(`${c} ${mode} ${cache}`)!;
  let image = 0;
  for (const concurrency of CONCURRENCIES) {
    for (const key of keys) results.set(`${concurrency} ${key}`, { first: [], rest: [], requests: 0, wallMs: 0 });
    for (let round = 0; round < ROUNDS[concurrency]; round++) {
      // This round's conversations, each its own image: the same set for every router (each router has its own cache), never sent to any router before.
      const conversations = Array.from({ length: CONVERSATIONS[concurrency] }, () => {
        const b64 = jpegs[image++]!.toString('base64');
        return Array.from({ length: TURNS }, (_, turn) => turnBody(b64, turn));
      });
      for (let k = 0; k < keys.length; k++) {
        const key = keys[(round + k) % keys.length]!; // rotate: no configuration always goes first
        await session(routers.get(key)!.url, conversations, concurrency, results.get(`${concurrency} ${key}`)!);
      }
    }
    for (const key of keys) {
      const { mode, cache } = routers.get(key)!;
      const r = res(concurrency, mode, cache);
      const p = (xs: Sample[], q: number, span?: string) =>
        percentile(
          xs.map((s) => (span ? (s.timing[span] ?? 0) : s.ms)),
          q,
        );
      process.stdout.write(
        `| ${mode} | ${cache} | ${concurrency} | ${r.first.length} | ${r.requests} | ${((r.requests * 1000) / r.wallMs).toFixed(2)} | ${p(r.first, 50).toFixed(1)} | ${p(r.rest, 50).toFixed(1)} | ${p(r.rest, 99).toFixed(1)} | ${p(r.first, 50, 'preprocess').toFixed(1)} | ${p(r.rest, 50, 'preprocess').toFixed(1)} | ${p(r.rest, 50, 'place').toFixed(2)} | ${p(r.rest, 50, 'worker').toFixed(1)} |\n`,
      );
    }
  }

  // Ratios against the cache-off router of the same transport, same run.
  const verdicts: string[] = [];
  const check = (ok: boolean, text: string) => verdicts.push(`${ok ? 'PASS' : 'MISS'}  ${text}`);
  const info = (text: string) => verdicts.push(`INFO  ${text}`);
  const p50 = (xs: Sample[]) =>
    percentile(
      xs.map((s) => s.ms),
      50,
    );
  const rps = (r: Result) => (r.requests * 1000) / r.wallMs;
  for (const concurrency of CONCURRENCIES) {
    for (const { name: mode } of LANES) {
      const on = res(concurrency, mode, 'on');
      const off = res(concurrency, mode, 'off');
      const hitSpeedup = p50(off.rest) / p50(on.rest);
      const rpsGain = rps(on) / rps(off);
      const firstRatio = p50(on.first) / p50(off.first);
      const where = `${mode}, c=${concurrency}`;
      if (mode === 'vllm auto' && concurrency === 1)
        check(
          hitSpeedup >= 3,
          `${later} p50 ${hitSpeedup.toFixed(2)}× faster with the cache than without (${p50(on.rest).toFixed(1)} vs ${p50(off.rest).toFixed(1)} ms), ${where} (target ≥ 3×)`,
        );
      else if (mode === 'tokenspeed auto' && concurrency === 1)
        check(
          hitSpeedup >= 2,
          `${later} p50 ${hitSpeedup.toFixed(2)}× faster with the cache than without (${p50(on.rest).toFixed(1)} vs ${p50(off.rest).toFixed(1)} ms), ${where}: each hit a copy of its own for the read-write attach (target ≥ 2×)`,
        );
      else
        info(
          `${later} p50 ${hitSpeedup.toFixed(2)}× faster with the cache than without (${p50(on.rest).toFixed(1)} vs ${p50(off.rest).toFixed(1)} ms), ${where}`,
        );
      if (mode === 'vllm auto' && concurrency === 8)
        check(rpsGain >= 2.5, `requests/s ${rpsGain.toFixed(2)}× with the cache (${rps(on).toFixed(2)} vs ${rps(off).toFixed(2)}), ${where} (target ≥ 2.5×)`);
      else info(`requests/s ${rpsGain.toFixed(2)}× with the cache (${rps(on).toFixed(2)} vs ${rps(off).toFixed(2)}), ${where}`);
      check(
        firstRatio <= 1.05,
        `turn-1 (miss) p50 with the cache ${firstRatio.toFixed(3)}× of without (${p50(on.first).toFixed(1)} vs ${p50(off.first).toFixed(1)} ms), ${where} (target ≤ 1.05×)`,
      );
    }
  }

  // Each router's memory and cache after the run, before anything stops.
  const memoryLines: string[] = [];
  for (const key of keys) {
    const { url, proc, mode, cache } = routers.get(key)!;
    const m = await scrape(url);
    const rss = rssOf(proc.child.pid!);
    const files = shmFilesOf(new Set([proc.child.pid!])).filter((f) => f.cache);
    const budget = cache === 'on' ? CACHE_MB * MiB : 0;
    const n = (v: number | undefined, f = (x: number) => String(x)) => (v === undefined ? 'n/a' : f(v));
    const conversationsSent = CONCURRENCIES.reduce((s, c) => s + res(c, mode, cache).first.length, 0);
    memoryLines.push(
      `| ${mode} | ${cache} | ${(rss / MiB).toFixed(0)} | ${budget / MiB} | ${PREPROCESS_MEMORY_BYTES / MiB} | ${(rss / (budget + PREPROCESS_MEMORY_BYTES)).toFixed(2)} | ${n(m.mmtc_preprocess_memory_bytes, (x) => (x / MiB).toFixed(0))} | ${files.length} (${(files.reduce((s, f) => s + f.size, 0) / MiB).toFixed(0)} MiB) | ${n(m.smg_mm_pixel_cache_hits_total)} | ${n(m.smg_mm_pixel_cache_misses_total)} | ${n(m.smg_mm_pixel_cache_evictions_total)} | ${n(m.smg_mm_pixel_cache_tampered_total)} |`,
    );
    // The cache must have answered every later turn of every conversation (and the warm-up's two repeats); with it off, never.
    const hits = m.smg_mm_pixel_cache_hits_total;
    const expected = cache === 'on' ? conversationsSent * (TURNS - 1) + WARMUP - 1 : 0;
    if (hits === undefined) info(`router ${mode}, cache ${cache}: no smg_mm_pixel_cache_hits_total on /metrics, hits not checked`);
    else if (cache === 'on')
      check(
        hits >= expected && (m.smg_mm_pixel_cache_tampered_total ?? 0) === 0,
        `router ${mode}, cache on: ${hits} hits, ${m.smg_mm_pixel_cache_misses_total} misses, ${m.smg_mm_pixel_cache_tampered_total ?? 'n/a'} tampered (expected ≥ ${expected} hits: every later turn and the warm-up's repeats; 0 tampered)`,
      );
    else check(hits === 0, `router ${mode}, cache off: ${hits} hits (expected 0)`);
  }

  // The hit path's router-side cost against a bare write of the same bytes.
  const micro = await hitCost(jpegs[0]!, g, nbytes);
  const q = (xs: number[], p: number) => percentile(xs, p).toFixed(3);
  const hitP50 = percentile(micro.total, 50);
  const bareP50 = percentile(micro.bare, 50);
  const routerHit = percentile(
    res(1, 'vllm auto', 'on').rest.map((s) => s.timing.preprocess ?? 0),
    50,
  );
  info(
    `the auto router's own preprocess span on hits (${later}, c=1, cache on; Server-Timing: headers, hash, lookup, the request's image memory) p50 ${routerHit.toFixed(2)} ms, against the micro's hash + lookup ${(percentile(micro.hash, 50) + percentile(micro.lookup, 50)).toFixed(3)} ms and hitImage ${percentile(micro.view, 50).toFixed(3)} ms`,
  );
  check(
    hitP50 <= 1,
    `hit cost (hash + lookup + link + release) p50 ${hitP50.toFixed(3)} ms for the ${(nbytes / 1e6).toFixed(1)} MB tensor, ${(hitP50 / bareP50).toFixed(3)}× a bare write of the same bytes (${bareP50.toFixed(2)} ms) (target ≤ 1 ms)`,
  );

  // Stop everything, then count what the benchmark's processes left in /dev/shm.
  const pids = new Set([process.pid, ...started.map((s) => s.proc.child.pid!)]);
  await stopAll();
  const left = shmFilesOf(pids);

  process.stdout.write(
    `\nthe hit path's router-side cost, in this process (PixelCache over a ShmWriter on ${SHM}; ${micro.total.length} hits, ${micro.bare.length} bare writes interleaved):\n\n| step | p50 ms | p99 ms |\n|---|---:|---:|\n`,
  );
  process.stdout.write(`| hash: BLAKE3 of the ${(jpegBytes / 1e6).toFixed(2)} MB JPEG (its media hash) | ${q(micro.hash, 50)} | ${q(micro.hash, 99)} |\n`);
  process.stdout.write(`| PixelCache.lookup (open + fstat) | ${q(micro.lookup, 50)} | ${q(micro.lookup, 99)} |\n`);
  process.stdout.write(`| CachedEntry.place into a scope (fstat + link) | ${q(micro.link, 50)} | ${q(micro.link, 99)} |\n`);
  process.stdout.write(`| release (scope complete + fstat + close) | ${q(micro.release, 50)} | ${q(micro.release, 99)} |\n`);
  process.stdout.write(`| **hit total** | ${q(micro.total, 50)} | ${q(micro.total, 99)} |\n`);
  process.stdout.write(
    `| bare write of the ${(nbytes / 1e6).toFixed(1)} MB tensor to a new ${SHM} file (the baseline) | ${q(micro.bare, 50)} | ${q(micro.bare, 99)} |\n`,
  );
  process.stdout.write(`| hit total / bare write | ${(hitP50 / bareP50).toFixed(3)}× | |\n`);
  process.stdout.write(
    `| apart: a copy of its own per hit, TokenSpeed's hit (its scheduler attaches the file read-write), and the guard's alternative (multimodal_pixel_cache_shm: copy, workers caught writing into an entry); fs.copyFile on libuv's pool, float32 | ${q(micro.copy, 50)} | ${q(micro.copy, 99)} |\n`,
  );
  process.stdout.write(
    `| not in the total: RequestCacheUses.hitImage for a hit sent by link (an empty placeholder stands for the ${(nbytes / 1e6).toFixed(1)} MB) | ${q(micro.view, 50)} | ${q(micro.view, 99)} |\n`,
  );

  process.stdout.write(
    `\neach router after the run (RSS from /proc; the cache's files are in ${SHM}, not in the RSS; preprocessing resident: mmtc_preprocess_memory_bytes on /metrics):\n\n| runtime, mode | pixel cache | RSS MiB | cache budget MiB | preprocess_memory_bytes MiB | RSS / (budget + preprocess) | preprocessing resident MiB | cache files in ${SHM} | hits | misses | evictions | tampered |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n`,
  );
  process.stdout.write(`${memoryLines.join('\n')}\n`);

  process.stdout.write(
    `\nfiles left in ${SHM} by the benchmark's processes (this one, the worker, the routers; tensor, probe and cache files) after they stopped: ${left.length}${
      left.length
        ? ` (${left
            .slice(0, 5)
            .map((f) => f.name)
            .join(', ')}${left.length > 5 ? ', …' : ''})`
        : ''
    }\n`,
  );
  if (left.length > 0) {
    verdicts.push(`FAIL  ${left.length} file${left.length === 1 ? '' : 's'} left in ${SHM} (${left.filter((f) => f.cache).length} cache files); removed now`);
    for (const f of left) rmSync(path.join(SHM, f.name), { force: true });
    process.exitCode = 1;
  } else verdicts.push(`PASS  0 files left in ${SHM} by the benchmark's processes`);
  process.stdout.write(`\n${verdicts.join('\n')}\n\n${((performance.now() - began) / 1000).toFixed(0)} s in all\n`);

  if (!quick) {
    mkdirSync(path.join(root, 'docs', 'img'), { recursive: true });
    const groups = CONCURRENCIES.flatMap((c) => LANES.map((lane) => ({ c, mode: lane.name })));
    const series = CACHES.flatMap((cache) => [
      { name: `cache ${cache}, turn 1`, values: groups.map(({ c, mode }) => p50(res(c, mode, cache).first)) },
      { name: `cache ${cache}, ${later}`, values: groups.map(({ c, mode }) => p50(res(c, mode, cache).rest)) },
    ]);
    writeFileSync(
      path.join(root, 'docs', 'img', 'cache-bench.svg'),
      renderBarChart({
        title: `${TURNS}-turn conversations resending a 1080p image, p50 latency (ms, lower is better)`,
        groups: groups.map(({ c, mode }) => `${mode} c=${c}`),
        series,
      }),
    );
    process.stdout.write('chart written to docs/img/cache-bench.svg\n');
  }
}

await runBench(main);
