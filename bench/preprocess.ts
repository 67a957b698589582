// Preprocessing benchmark: decode + resize + rescale/normalize + patchify per image, ours
// (sharp decode + our fused pipeline) next to the same pipeline in Pillow + numpy (what a
// Python gateway does), measured in the same run on the same JPEG files.
//
// Also: the router's event loop while a batch of images goes through the worker-thread pool
// (worst delay of a 1 ms timer), which must stay under 5 ms.
//
// Usage: npm run bench:preprocess [-- --quick]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { decodeToRgb } from '../core/multimodal/decode.ts';
import { PreprocessPool } from '../core/multimodal/pool.ts';
import { encoderMemoryIn, preprocessRgb, QWEN_VL_DEFAULTS, type EncoderMemory, type QwenVlFamily } from '../core/multimodal/qwen-vl.ts';
import { pythonWithPillow } from '../core/test/python.ts';
import mallocTunables from '../bin/malloc-tunables.json' with { type: 'json' };
import { renderBarChart } from './chart.ts';

const root = path.resolve(import.meta.dirname, '..');
const quick = process.argv.includes('--quick');
const RUNS = quick ? 5 : 11;
const REFERENCE = path.join(root, 'scripts', 'reference', 'qwen_vl_reference.py');

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function makeJpegs(dir: string): Record<string, string> {
  // A photo-like test card: gradients, edges and noise, so JPEG decoding does real work.
  const code = `
import sys, numpy as np
from PIL import Image
out = sys.argv[1]
for name, (w, h) in {'1080p': (1920, 1080), '4k': (3840, 2160)}.items():
    y, x = np.mgrid[0:h, 0:w]
    rng = np.random.default_rng(3)
    r = (128 + 100 * np.sin(x / 37.0) * np.cos(y / 23.0)).astype(np.uint8)
    g = ((x * 255) // w).astype(np.uint8)
    b = (((x // 64 + y // 64) % 2) * 200 + rng.integers(0, 40, (h, w))).astype(np.uint8)
    Image.fromarray(np.dstack([r, g, b])).save(f'{out}/{name}.jpg', quality=90)
`;
  execFileSync(pythonWithPillow(), ['-c', code, dir]);
  return { '1080p': path.join(dir, '1080p.jpg'), '4k': path.join(dir, '4k.jpg') };
}

async function ours(file: string, family: QwenVlFamily): Promise<{ ms: number; decode: number; shape: string }> {
  const bytes = readFileSync(file);
  const times: number[] = [];
  const decodes: number[] = [];
  let shape = '';
  // Output memory reused across images, as the router's pool does (released after each request).
  let into: EncoderMemory | undefined;
  for (let i = 0; i < RUNS + 1; i++) {
    const t0 = performance.now();
    const img = await decodeToRgb(bytes);
    const t1 = performance.now();
    const out = preprocessRgb(img.rgb, img.width, img.height, QWEN_VL_DEFAULTS[family], into ? { into } : {});
    into ??= out.memory && encoderMemoryIn(out.memory, out.patches * out.features, { float32: true, bf16: false });
    const t2 = performance.now();
    shape = `${out.patches}x${out.features}`;
    if (i === 0) continue; // warm-up
    times.push(t2 - t0);
    decodes.push(t1 - t0);
  }
  return { ms: median(times), decode: median(decodes), shape };
}

/**
 * The same image through the router's PreprocessPool, one at a time (a lone request): the
 * image's resize and scatter are split between two threads. Includes the header read and the
 * thread hand-offs.
 */
async function oursPool(pool: PreprocessPool, file: string, family: QwenVlFamily): Promise<{ ms: number; threads: number }> {
  const bytes = readFileSync(file);
  const times: number[] = [];
  let threads = 0;
  for (let i = 0; i < RUNS + 1; i++) {
    const input = Buffer.from(bytes); // the pool takes the bytes by transfer
    const t0 = performance.now();
    const r = await pool.run({ bytes: input, config: QWEN_VL_DEFAULTS[family], bf16: false });
    const t1 = performance.now();
    threads = r.threads;
    r.release();
    if (i > 0) times.push(t1 - t0);
  }
  return { ms: median(times), threads };
}

/** The Python side runs under the same malloc setting (glibc cut our own copy down at start). */
const pythonEnv = { ...process.env, ...(process.env.MMTC_GLIBC_TUNABLES ? { GLIBC_TUNABLES: process.env.MMTC_GLIBC_TUNABLES } : {}) };

function pillowNumpy(file: string, family: QwenVlFamily): { ms: number; shape: string } {
  const info = JSON.parse(execFileSync(pythonWithPillow(), [REFERENCE, family, file, '--bench', String(RUNS)], { env: pythonEnv }).toString());
  return { ms: info.median_ms, shape: `${info.shape[0]}x${info.shape[1]}` };
}

/** Worst and p99 timer delay on this thread while `work` runs (a 1 ms interval and the histogram). */
async function eventLoopDelay(work: () => Promise<unknown>): Promise<{ worstMs: number; p99Ms: number; wallMs: number }> {
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  let worst = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last - 1);
    last = now;
  }, 1);
  histogram.enable();
  const t = performance.now();
  await work();
  const wallMs = performance.now() - t;
  histogram.disable();
  clearInterval(timer);
  return { worstMs: Math.max(worst, histogram.max / 1e6 - 1), p99Ms: histogram.percentile(99) / 1e6 - 1, wallMs };
}

/**
 * The event loop while a batch of 1080p images goes through the pool, next to the same
 * thread idle for as long (the baseline: what the machine alone does to a timer).
 */
async function eventLoopUnderLoad(file: string): Promise<{ load: { worstMs: number; p99Ms: number; wallMs: number }; idle: { worstMs: number; p99Ms: number }; images: number }> {
  const pool = new PreprocessPool();
  const bytes = readFileSync(file);
  const images = quick ? 8 : 16;
  const batch = () => Array.from({ length: images }, () => Buffer.from(bytes)); // copies made before the clock starts
  // Warm-up: threads started, JIT warm, shared output buffers allocated.
  for (const r of await Promise.all(batch().map((b) => pool.run({ bytes: b, config: QWEN_VL_DEFAULTS.qwen2_vl, bf16: true, float32: false })))) r.release();
  const inputs = batch();
  const load = await eventLoopDelay(() => Promise.all(inputs.map(async (b) => (await pool.run({ bytes: b, config: QWEN_VL_DEFAULTS.qwen2_vl, bf16: true, float32: false })).release())));
  await pool.close();
  const idle = await eventLoopDelay(() => new Promise((resolve) => setTimeout(resolve, load.wallMs)));
  return { load, idle, images };
}

async function main() {
  if (process.env.GLIBC_TUNABLES === undefined && process.env.MMTC_BENCH_DEFAULT_MALLOC !== '1') {
    // Measure as the router runs (bin/mmtc.js sets these tunables); the Python reference inherits them.
    const { spawnSync } = await import('node:child_process');
    const t = mallocTunables.GLIBC_TUNABLES;
    const r = spawnSync(process.execPath, [...process.execArgv, ...process.argv.slice(1)], { stdio: 'inherit', env: { ...process.env, GLIBC_TUNABLES: t, MMTC_GLIBC_TUNABLES: t } });
    process.exit(r.status ?? 1);
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mmtc-bench-pre-'));
  try {
    const files = makeJpegs(dir);
    const machine = `${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, Node ${process.version}, ${execFileSync(pythonWithPillow(), ['-c', 'import PIL, numpy, sys; print("Python", sys.version.split()[0], "Pillow", PIL.__version__, "numpy", numpy.__version__)']).toString().trim()}`;
    process.stdout.write(`preprocessing benchmark on ${machine}, median of ${RUNS} runs, GLIBC_TUNABLES=${process.env.MMTC_GLIBC_TUNABLES ?? process.env.GLIBC_TUNABLES ?? '(unset)'} for both\n\n`);
    process.stdout.write(
      '| image | model | encoder input | one thread ms (decode) | router pool ms (threads) | Pillow + numpy ms | speed-up, one thread | speed-up, router pool |\n|---|---|---|---:|---:|---:|---:|---:|\n',
    );
    const rows: Array<{ label: string; ours: number; pooled: number; ref: number }> = [];
    const pool = new PreprocessPool();
    for (const [name, file] of Object.entries(files)) {
      for (const family of ['qwen2_vl', 'qwen3_vl'] as const) {
        // Interleave: ours in one thread, ours through the pool, reference, per configuration.
        const a = await ours(file, family);
        const p = await oursPool(pool, file, family);
        const b = pillowNumpy(file, family);
        if (a.shape !== b.shape) throw new Error(`shape mismatch ${a.shape} vs ${b.shape}`);
        rows.push({ label: `${name} ${family}`, ours: a.ms, pooled: p.ms, ref: b.ms });
        process.stdout.write(
          `| ${name} | ${family} | ${a.shape} | ${a.ms.toFixed(1)} (${a.decode.toFixed(1)}) | ${p.ms.toFixed(1)} (${p.threads}) | ${b.ms.toFixed(1)} | ${(b.ms / a.ms).toFixed(2)}× | ${(b.ms / p.ms).toFixed(2)}× |\n`,
        );
      }
    }
    await pool.close();
    const worstPooled = Math.min(...rows.map((r) => r.ref / r.pooled));
    const worstSingle = Math.min(...rows.map((r) => r.ref / r.ours));
    process.stdout.write(`\n${worstPooled >= 1.5 ? 'PASS' : 'MISS'}  slowest speed-up ${worstPooled.toFixed(2)}× over Pillow + numpy per image as the router runs it (target ≥ 1.5×, stretch 3×)\n`);
    process.stdout.write(`${worstSingle >= 1.5 ? 'PASS' : 'MISS'}  slowest speed-up ${worstSingle.toFixed(2)}× over Pillow + numpy in one thread\n`);
    const loop = await eventLoopUnderLoad(files['1080p']!);
    process.stdout.write(
      `${loop.load.worstMs <= 5 ? 'PASS' : 'MISS'}  worst event-loop delay ${loop.load.worstMs.toFixed(2)} ms (p99 ${loop.load.p99Ms.toFixed(2)} ms) while ${loop.images} 1080p images went through the pool in ${loop.load.wallMs.toFixed(0)} ms (target ≤ 5 ms); baseline, the same thread idle as long: worst ${loop.idle.worstMs.toFixed(2)} ms (p99 ${loop.idle.p99Ms.toFixed(2)} ms)\n`,
    );
    mkdirSync(path.join(root, 'docs', 'img'), { recursive: true });
    writeFileSync(
      path.join(root, 'docs', 'img', 'preprocess-bench.svg'),
      renderBarChart({
        title: 'Preprocessing per image (median ms, lower is better)',
        groups: rows.map((r) => r.label),
        series: [
          { name: 'mmtc, one thread', values: rows.map((r) => r.ours) },
          { name: 'mmtc, router pool (2 threads per lone image)', values: rows.map((r) => r.pooled) },
          { name: 'Pillow + numpy', values: rows.map((r) => r.ref) },
        ],
      }),
    );
    process.stdout.write('chart written to docs/img/preprocess-bench.svg\n');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
