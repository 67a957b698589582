// Router memory under hostile load: the resident set of a real `mmtc router` process (read
// from /proc/<pid>/status while it works) and what its preprocessing holds by its own
// accounting (mmtc_preprocess_memory_bytes on /metrics), through a burst of concurrent 1080p
// clients, a request of 20 decompression-bomb PNGs (10000x10000) and a long idle afterwards.
// Targets (docs/reliability.md): preprocessing memory ≤ preprocess_memory_bytes at every
// sample; peak RSS ≤ base + budget, the base being the warm idle RSS plus what the requests
// in flight hold outside preprocessing (REQUEST_BYTES each: body, its text, image bytes);
// RSS back within 2× warm idle within 60 s of idle.
//
// Usage: npm run bench:memory [-- --quick]   (quick: 16 clients, at most 20 s of idle, ended once RSS is back)
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { pythonWithPillow } from '../core/test/python.ts';
import { renderLineChart } from './chart.ts';

const root = path.resolve(import.meta.dirname, '..');
const quick = process.argv.includes('--quick');
const CLIENTS = quick ? 16 : 128;
const REQUESTS_PER_CLIENT = quick ? 2 : 3;
const IDLE_S = quick ? 20 : 60;
const BUDGET = 1024 * 1024 * 1024;
const children: ChildProcess[] = [];
const MiB = 1024 * 1024;
/** What one request in flight holds outside preprocessing: its body, the body's JSON text and the image bytes (a 1080p JPEG: ~1.3 MB base64 each). */
const REQUEST_BYTES = 3 * MiB;

function start(args: string[], ready: RegExp, env: Record<string, string> = {}): Promise<{ child: ChildProcess; match: string }> {
  const tunables = JSON.parse(readFileSync(path.join(root, 'bin', 'malloc-tunables.json'), 'utf8')).GLIBC_TUNABLES as string;
  // The malloc settings mmtc uses, set directly (no re-exec), so the pid is the router itself.
  const child = spawn(process.execPath, [path.join(root, 'bin', 'mmtc.js'), ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, MMTC_MALLOC_HUGETLB: '0', GLIBC_TUNABLES: tunables, ...env },
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const m = ready.exec(out);
      if (m) resolve({ child, match: m[1]! });
    });
    child.on('exit', (code) => reject(new Error(`mmtc ${args.join(' ')} exited ${code}: ${out}`)));
  });
}

function rssOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
function post(url: string, body: Buffer): Promise<number> {
  const u = new URL(`${url}/v1/chat/completions`);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': body.byteLength },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function main() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mmtc-bench-memory-'));
  // Every request its own image: each is a miss of the pixel cache (on, at its default budget),
  // so preprocessing takes the full load as without a cache, and the cache keeps (and evicts)
  // entries meanwhile.
  const images = 8 + CLIENTS * REQUESTS_PER_CLIENT;
  execFileSync(pythonWithPillow(), [
    '-c',
    `import numpy as np; from PIL import Image
rng = np.random.default_rng(5); a = rng.integers(0, 256, (1080, 1920, 3), dtype=np.uint8)
for i in range(${images}):
    a[0:16, 0:16, 0] = i % 256; a[0:16, 0:16, 1] = i // 256
    Image.fromarray(a).save('${dir}/1080p-%d.jpg' % i, quality=85)`,
  ]);
  const chats = Array.from({ length: images }, (_, i) =>
    Buffer.from(
      JSON.stringify({
        max_tokens: 8,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'image_url', image_url: { url: `data:image/jpeg;base64,${readFileSync(path.join(dir, `1080p-${i}.jpg`)).toString('base64')}` } },
              { type: 'text', text: 'describe' },
            ],
          },
        ],
      }),
    ),
  );
  let nextChat = 0;
  const chat = () => chats[nextChat++]!;
  const bomb = await sharp({ create: { width: 10_000, height: 10_000, channels: 3, background: '#000' } })
    .png({ compressionLevel: 9 })
    .toBuffer();
  const bombs = Buffer.from(
    JSON.stringify({
      messages: [
        {
          role: 'user',
          content: [
            ...Array.from({ length: 20 }, () => ({ type: 'image_url', image_url: { url: `data:image/png;base64,${bomb.toString('base64')}` } })),
            { type: 'text', text: 'x' },
          ],
        },
      ],
    }),
  );
  const samples: Array<{ t: number; rss: number; phase: string }> = [];
  const t0 = performance.now();
  try {
    const worker = await start(['worker', '--runtime', 'tokenspeed', '--port', '0', '--no-fingerprint'], /listening on (grpc:\/\/\S+)/);
    const router = await start(
      [
        'router',
        '--port',
        '0',
        '--worker-urls',
        worker.match,
        '--multimodal-tensor-transport',
        'auto',
        '--limit-mm-per-prompt',
        'image=20',
        '--preprocess-memory-bytes',
        String(BUDGET),
      ],
      /listening on (http:\/\/\S+)/,
    );
    const pid = router.child.pid!;
    let phase = 'start';
    let preprocessPeak = 0;
    // Unref'd, so neither keeps the benchmark alive once it is done (or has failed).
    const sampler = setInterval(() => samples.push({ t: (performance.now() - t0) / 1000, rss: rssOf(pid), phase }), 100).unref();
    const accounting = setInterval(() => {
      void fetch(`${router.match}/metrics`)
        .then((r) => r.text())
        .then((t) => {
          const m = /^mmtc_preprocess_memory_bytes (\d+)/m.exec(t);
          if (m) preprocessPeak = Math.max(preprocessPeak, Number(m[1]));
        })
        // A sample missed (the router busy or stopping): the peak is of the samples that came.
        .catch(() => {});
    }, 200).unref();
    for (let i = 0; i < 8; i++) await post(router.match, chat()); // warm: threads, pooled memories, JIT
    phase = 'warm idle';
    await new Promise((r) => setTimeout(r, 10_000));
    const warmIdle = rssOf(pid);
    phase = `${CLIENTS} clients`;
    const statuses: number[] = [];
    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        for (let i = 0; i < REQUESTS_PER_CLIENT; i++) statuses.push(await post(router.match, chat()));
      }),
    );
    const burstPeak = Math.max(...samples.filter((s) => s.phase === phase).map((s) => s.rss));
    phase = '20 bombs';
    const bombStatus = await post(router.match, bombs);
    await new Promise((r) => setTimeout(r, 1000));
    const bombPeak = Math.max(...samples.filter((s) => s.phase === phase).map((s) => s.rss));
    phase = 'idle';
    const idleStart = performance.now();
    let backAt: number | undefined;
    // The quick mode (the CI smoke) ends its idle once RSS is back: the verdict is decided then.
    while (performance.now() - idleStart < IDLE_S * 1000 && !(quick && backAt !== undefined)) {
      await new Promise((r) => setTimeout(r, 500));
      if (backAt === undefined && rssOf(pid) <= 2 * warmIdle) backAt = (performance.now() - idleStart) / 1000;
    }
    const end = rssOf(pid);
    const idleS = (performance.now() - idleStart) / 1000;
    clearInterval(sampler);
    clearInterval(accounting);
    const metrics = await fetch(`${router.match}/metrics`)
      .then((r) => r.text())
      // No answer: the cache's figures in the report read NaN, the RSS measured stands.
      .catch(() => '');
    const metric = (name: string) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(metrics)?.[1] ?? NaN);
    const ok = statuses.filter((s) => s === 200).length;
    process.stdout.write(
      `router memory benchmark on ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, Node ${process.version}; preprocess_memory_bytes ${BUDGET / MiB} MiB; every request its own 1080p image; the pixel cache at its default budget (${(metric('smg_mm_pixel_cache_budget_bytes') / MiB).toFixed(0)} MiB, in /dev/shm, not in the RSS): ${metric('smg_mm_pixel_cache_hits_total')} hits, ${metric('smg_mm_pixel_cache_misses_total')} misses, ${metric('smg_mm_pixel_cache_evictions_total')} evictions, ${(metric('smg_mm_pixel_cache_bytes') / MiB).toFixed(0)} MiB held at the end\n\n`,
    );
    process.stdout.write('| phase | requests | answered 200 | RSS MiB |\n|---|---:|---:|---:|\n');
    process.stdout.write(`| warm idle (the base) | 8 | 8 | ${(warmIdle / MiB).toFixed(0)} |\n`);
    process.stdout.write(`| ${CLIENTS} concurrent 1080p clients, peak | ${statuses.length} | ${ok} | ${(burstPeak / MiB).toFixed(0)} |\n`);
    process.stdout.write(
      `| one request of 20 PNG bombs (10000x10000), peak | 1 | ${bombStatus === 200 ? 1 : `0 (HTTP ${bombStatus})`} | ${(bombPeak / MiB).toFixed(0)} |\n`,
    );
    process.stdout.write(`| after ${idleS.toFixed(0)} s idle | – | – | ${(end / MiB).toFixed(0)} |\n\n`);
    const base = warmIdle + CLIENTS * REQUEST_BYTES;
    const bound = base + BUDGET;
    process.stdout.write(
      `${preprocessPeak <= BUDGET ? 'PASS' : 'MISS'}  preprocessing held at most ${(preprocessPeak / MiB).toFixed(0)} MiB by its accounting ≤ budget ${(BUDGET / MiB).toFixed(0)} MiB\n`,
    );
    process.stdout.write(
      `${Math.max(burstPeak, bombPeak) <= bound ? 'PASS' : 'MISS'}  peak RSS ${(Math.max(burstPeak, bombPeak) / MiB).toFixed(0)} MiB ≤ base (warm idle ${(warmIdle / MiB).toFixed(0)} + ${CLIENTS} requests × ${REQUEST_BYTES / MiB} MiB) + budget = ${(bound / MiB).toFixed(0)} MiB\n`,
    );
    process.stdout.write(
      `${backAt !== undefined ? 'PASS' : 'MISS'}  RSS back within 2× warm idle (${((2 * warmIdle) / MiB).toFixed(0)} MiB) ${backAt !== undefined ? `${backAt.toFixed(1)} s into the idle` : `not within ${IDLE_S} s (${(end / MiB).toFixed(0)} MiB at the end)`} (target ≤ 60 s)\n`,
    );
    if (!quick) {
      const every = Math.max(1, Math.floor(samples.length / 60));
      const points = samples.filter((_, i) => i % every === 0);
      const { writeFileSync, mkdirSync } = await import('node:fs');
      mkdirSync(path.join(root, 'docs', 'img'), { recursive: true });
      writeFileSync(
        path.join(root, 'docs', 'img', 'memory-bench.svg'),
        renderLineChart({
          title: `Router RSS (MiB, log scale): ${CLIENTS} clients, 20 bombs, then idle`,
          xLabels: points.map((p) => `${p.t.toFixed(0)} s`),
          series: [
            { name: 'router RSS', values: points.map((p) => p.rss / MiB) },
            { name: 'base + budget', values: points.map(() => bound / MiB) },
            { name: '2 × warm idle', values: points.map(() => (2 * warmIdle) / MiB) },
          ],
        }),
      );
      process.stdout.write('chart written to docs/img/memory-bench.svg\n');
    }
  } finally {
    for (const c of children) c.kill('SIGTERM');
    agent.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
