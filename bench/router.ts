// End-to-end router benchmark: chat requests with one 1080p JPEG through HTTP, a real
// `mmtc router` process and a real `mmtc worker` on the same host, inline vs auto (SHM),
// for vLLM (float32 encoder input) and TokenSpeed (bfloat16), at concurrency 1 and 8.
// Both routers of a pair run at once and their rounds are interleaved, so both see the
// same machine. Router overhead per request comes from the router's Server-Timing header:
// total - body - preprocess - place - worker (the body read, 1.3 MB of base64 JSON that both
// modes parse, is shown in its own column).
//
// Usage: npm run bench:router [-- --quick]
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { pythonWithPillow } from '../core/test/python.ts';
import { renderBarChart } from './chart.ts';

const root = path.resolve(import.meta.dirname, '..');
const quick = process.argv.includes('--quick');
const ROUNDS = quick ? 2 : 4;
const children: ChildProcess[] = [];

function start(args: string[], ready: RegExp): Promise<string> {
  const child = spawn(process.execPath, [path.join(root, 'bin', 'mmtc.js'), ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = ready.exec(out);
      if (m) resolve(m[1]!);
    });
    child.on('exit', (code) => reject(new Error(`mmtc ${args.join(' ')} exited ${code}: ${out}`)));
  });
}

const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

interface Sample {
  ms: number;
  timing: Record<string, number>;
}

// node:http with a keep-alive agent: about 3 ms less client-side work per request than fetch
// (undici) here, and the client shares the machine's two cores with router and worker.
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

function request(url: string, body: Uint8Array): Promise<Sample> {
  const u = new URL(`${url}/v1/chat/completions`);
  const t = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': body.byteLength } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const ms = performance.now() - t;
        if (res.statusCode !== 200) return reject(new Error(`HTTP ${res.statusCode}: ${Buffer.concat(chunks).toString()}`));
        const timing = Object.fromEntries(String(res.headers['server-timing'] ?? '').split(', ').map((p) => {
          const [name, dur] = p.split(';dur=');
          return [name!, Number(dur)];
        }));
        resolve({ ms, timing });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function burst(url: string, body: Uint8Array, concurrency: number, count: number): Promise<{ samples: Sample[]; wallMs: number }> {
  const samples: Sample[] = [];
  let next = 0;
  const t = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        next += 1;
        samples.push(await request(url, body));
      }
    }),
  );
  return { samples, wallMs: performance.now() - t };
}

async function main() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mmtc-bench-router-'));
  const jpeg = path.join(dir, '1080p.jpg');
  execFileSync(pythonWithPillow(), [
    '-c',
    `import numpy as np; from PIL import Image
h, w = 1080, 1920; y, x = np.mgrid[0:h, 0:w]; rng = np.random.default_rng(3)
r = (128 + 100 * np.sin(x / 37.0) * np.cos(y / 23.0)).astype(np.uint8); g = ((x * 255) // w).astype(np.uint8)
b = (((x // 64 + y // 64) % 2) * 200 + rng.integers(0, 40, (h, w))).astype(np.uint8)
Image.fromarray(np.dstack([r, g, b])).save('${jpeg}', quality=90)`,
  ]);
  // Encoded once: the client's own cost should not be in the numbers (it shares the cores).
  const body = Buffer.from(JSON.stringify({
    model: 'bench',
    max_tokens: 16,
    messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `data:image/jpeg;base64,${readFileSync(jpeg).toString('base64')}` } }, { type: 'text', text: 'Describe the image.' }] }],
  }));
  process.stdout.write(`router benchmark on ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, Node ${process.version}; one 1080p JPEG per request, ${ROUNDS} interleaved rounds\n\n`);
  process.stdout.write('| runtime (dtype) | mode | concurrency | requests | req/s | p50 ms | p99 ms | body p50 | preprocess p50 | place p50 | worker p50 | router overhead p50 |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n');
  const chart: Array<{ label: string; inline: number; auto: number }> = [];
  const verdicts: string[] = [];
  try {
    for (const runtime of ['vllm', 'tokenspeed'] as const) {
      const worker = await start(['worker', '--runtime', runtime, '--port', '0', '--no-fingerprint'], /listening on (grpc:\/\/\S+)/);
      const routers: Record<string, string> = {};
      for (const mode of ['inline', 'auto']) {
        routers[mode] = await start(['router', '--port', '0', '--worker-urls', worker, '--multimodal-tensor-transport', mode], /listening on (http:\/\/\S+)/);
        await request(routers[mode]!, body); // warm-up: threads, JIT, channels
      }
      for (const concurrency of [1, 8]) {
        const per = concurrency === 1 ? (quick ? 3 : 10) : quick ? 8 : 16;
        const results: Record<string, { samples: Sample[]; wallMs: number }> = { inline: { samples: [], wallMs: 0 }, auto: { samples: [], wallMs: 0 } };
        for (let round = 0; round < ROUNDS; round++) {
          for (const mode of round % 2 === 0 ? ['inline', 'auto'] : ['auto', 'inline']) {
            const r = await burst(routers[mode]!, body, concurrency, per);
            results[mode]!.samples.push(...r.samples);
            results[mode]!.wallMs += r.wallMs;
          }
        }
        const p50 = (mode: string) => percentile(results[mode]!.samples.map((s) => s.ms), 50);
        for (const mode of ['inline', 'auto']) {
          const { samples, wallMs } = results[mode]!;
          const t = (k: string) => percentile(samples.map((s) => s.timing[k] ?? 0), 50);
          const overhead = percentile(samples.map((s) => (s.timing.total ?? 0) - (s.timing.body ?? 0) - (s.timing.preprocess ?? 0) - (s.timing.place ?? 0) - (s.timing.worker ?? 0)), 50);
          process.stdout.write(
            `| ${runtime} (${runtime === 'vllm' ? 'float32' : 'bfloat16'}) | ${mode} | ${concurrency} | ${samples.length} | ${((samples.length * 1000) / wallMs).toFixed(2)} | ${p50(mode).toFixed(1)} | ${percentile(samples.map((s) => s.ms), 99).toFixed(1)} | ${t('body').toFixed(1)} | ${t('preprocess').toFixed(1)} | ${t('place').toFixed(1)} | ${t('worker').toFixed(1)} | ${overhead.toFixed(2)} |\n`,
          );
          if (concurrency === 1) verdicts.push(`${overhead <= 2 ? 'PASS' : 'MISS'}  router overhead p50 ${overhead.toFixed(2)} ms, ${runtime} ${mode} (target ≤ 2 ms)`);
        }
        const speedup = p50('inline') / p50('auto');
        const target = runtime === 'vllm' ? 3 : 2;
        verdicts.push(`${speedup >= target ? 'PASS' : 'MISS'}  auto ${speedup.toFixed(2)}× faster than inline at p50, ${runtime}, concurrency ${concurrency} (target ≥ ${target}×)`);
        chart.push({ label: `${runtime} c=${concurrency}`, inline: p50('inline'), auto: p50('auto') });
      }
    }
  } finally {
    for (const c of children) c.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  }
  process.stdout.write(`\n${verdicts.join('\n')}\n`);
  mkdirSync(path.join(root, 'docs', 'img'), { recursive: true });
  writeFileSync(
    path.join(root, 'docs', 'img', 'router-bench.svg'),
    renderBarChart({ title: 'Chat request with a 1080p image, p50 latency (ms, lower is better)', groups: chart.map((c) => c.label), series: [{ name: 'inline', values: chart.map((c) => c.inline) }, { name: 'auto (/dev/shm)', values: chart.map((c) => c.auto) }] }),
  );
  process.stdout.write('chart written to docs/img/router-bench.svg\n');
}

await main();
