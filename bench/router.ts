// End-to-end router benchmark: chat requests with one 1080p JPEG through HTTP, a real
// `mmtc router` process and a real `mmtc worker` on the same host, inline vs auto (SHM),
// for vLLM (float32 encoder input) and TokenSpeed (bfloat16), at concurrency 1 and 8,
// against two reference workers: `pooled` (reads each /dev/shm tensor into a reused,
// pre-faulted buffer) and `fresh` (a new buffer per tensor, as the gateway's Python
// servicers read). All routers of a runtime run at once and their rounds are interleaved
// (the order rotates), so every configuration sees the same machine.
//
// Per request, from the router's Server-Timing header: body (reading and parsing the request),
// preprocess, place (building the worker request: inline copies or /dev/shm files), worker
// (the gRPC call to its last message); router overhead = total - body - preprocess - place -
// worker. The baseline for `place`, measured in this process between the bursts of the same
// run: a bare write of the same bytes, open(O_CREAT|O_EXCL) + write + close of a new file in
// /dev/shm, unlinked right after.
//
// Usage: npm run bench:router [-- --quick]   (--quick: fewer requests, no chart: the CI smoke)
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { patchGeometry, QWEN_VL_DEFAULTS } from '../core/multimodal/qwen-vl.ts';
import { renderBarChart } from './chart.ts';
import { bareWrite, burst, chatBody1080p, percentile, request, type Sample, inScratchDir } from './chat-load.ts';
import { root, runBench, startMmtc } from './procs.ts';

const quick = process.argv.includes('--quick');
const ROUNDS = quick ? 1 : 4;
const READS = ['pooled', 'fresh'] as const;
const MODES = ['inline', 'auto'] as const;
type Read = (typeof READS)[number];
type Mode = (typeof MODES)[number];

/** The place baseline: open(O_CREAT|O_EXCL|O_NOFOLLOW, 0600) + write + close of a new /dev/shm file (unlinked after, untimed). */
const main = () => inScratchDir('mmtc-bench-router-', measure);

async function measure(dir: string) {
  const body = chatBody1080p(dir);
  const g = patchGeometry(1080, 1920, QWEN_VL_DEFAULTS.qwen2_vl); // the bundled model is Qwen2-VL
  process.stdout.write(
    `router benchmark on ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, Node ${process.version}; one 1080p JPEG per request (encoder input [${g.patches}, ${g.features}]), ${ROUNDS} interleaved rounds\n\n`,
  );
  process.stdout.write(
    '| runtime (dtype) | worker reads into | mode | concurrency | requests | req/s | p50 ms | p99 ms | body p50 | preprocess p50 | place p50 | worker p50 | router overhead p50 |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n',
  );
  const chart: Array<{ label: string; values: Record<string, number> }> = [];
  const verdicts: string[] = [];
  const check = (ok: boolean, text: string) => verdicts.push(`${ok ? 'PASS' : 'MISS'}  ${text}`);
  const placeLines: string[] = [];
  for (const runtime of ['vllm', 'tokenspeed'] as const) {
    const dtype = runtime === 'vllm' ? 'float32' : 'bfloat16';
    const nbytes = g.patches * g.features * (dtype === 'float32' ? 4 : 2);
    const tensor = Buffer.alloc(nbytes, 0x3c);
    const routers = new Map<string, string>();
    for (const read of READS) {
      const { match: worker } = await startMmtc(
        ['worker', '--runtime', runtime, '--port', '0', '--no-fingerprint', '--read-buffer', read],
        /listening on (grpc:\/\/\S+)/,
      );
      for (const mode of MODES) {
        const { match: url } = await startMmtc(
          ['router', '--port', '0', '--worker-urls', worker, '--multimodal-tensor-transport', mode],
          /listening on (http:\/\/\S+)/,
        );
        routers.set(`${read} ${mode}`, url);
        for (let i = 0; i < 3; i++) await request(url, body); // warm-up: threads, JIT, channels, pooled memory
      }
    }
    const keys = [...routers.keys()];
    for (const concurrency of [1, 8]) {
      const per = concurrency === 1 ? (quick ? 3 : 10) : quick ? 8 : 16;
      const results = new Map(keys.map((k) => [k, { samples: [] as Sample[], wallMs: 0 }]));
      const bare: number[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        for (let k = 0; k < keys.length; k++) {
          const key = keys[(round + k) % keys.length]!; // rotate: no configuration always goes first (over the full run's rounds; the quick smoke has one)
          const r = await burst(routers.get(key)!, body, concurrency, per);
          results.get(key)!.samples.push(...r.samples);
          results.get(key)!.wallMs += r.wallMs;
          for (let i = 0; i < 2; i++) bare.push(bareWrite(tensor));
        }
      }
      const p50 = (key: string) =>
        percentile(
          results.get(key)!.samples.map((s) => s.ms),
          50,
        );
      const span = (key: string, name: string) =>
        percentile(
          results.get(key)!.samples.map((s) => s.timing[name] ?? 0),
          50,
        );
      for (const key of keys) {
        const [read, mode] = key.split(' ') as [Read, Mode];
        const { samples, wallMs } = results.get(key)!;
        const overhead = percentile(
          samples.map((s) => (s.timing.total ?? 0) - (s.timing.body ?? 0) - (s.timing.preprocess ?? 0) - (s.timing.place ?? 0) - (s.timing.worker ?? 0)),
          50,
        );
        process.stdout.write(
          `| ${runtime} (${dtype}) | ${read} | ${mode} | ${concurrency} | ${samples.length} | ${((samples.length * 1000) / wallMs).toFixed(2)} | ${p50(key).toFixed(1)} | ${percentile(
            samples.map((s) => s.ms),
            99,
          ).toFixed(
            1,
          )} | ${span(key, 'body').toFixed(1)} | ${span(key, 'preprocess').toFixed(1)} | ${span(key, 'place').toFixed(1)} | ${span(key, 'worker').toFixed(1)} | ${overhead.toFixed(2)} |\n`,
        );
        if (concurrency === 1) check(overhead <= 2, `router overhead p50 ${overhead.toFixed(2)} ms, ${runtime} ${mode}, ${read} worker (target ≤ 2 ms)`);
      }
      const bareP50 = percentile(bare, 50);
      for (const read of READS) {
        const speedup = p50(`${read} inline`) / p50(`${read} auto`);
        // The issue's targets are set against the fresh-buffer worker (vLLM: 3× at c=1, 4× at c=8);
        // TokenSpeed's bfloat16 tensor is half the bytes, so inline has less to lose.
        const target = runtime === 'vllm' ? (concurrency === 1 ? 3 : 4) : 2;
        check(
          speedup >= target,
          `auto ${speedup.toFixed(2)}× faster than inline at p50, ${runtime}, ${read} worker, concurrency ${concurrency} (target ≥ ${target}×)`,
        );
        const place = span(`${read} auto`, 'place');
        placeLines.push(
          `| ${runtime} (${dtype}, ${(nbytes / 1e6).toFixed(1)} MB) | ${read} | ${concurrency} | ${place.toFixed(2)} | ${bareP50.toFixed(2)} | ${(place / bareP50).toFixed(2)}× | ${span(`${read} auto`, 'preprocess').toFixed(1)} | ${span(`${read} inline`, 'preprocess').toFixed(1)} | ${p50(`${read} auto`).toFixed(1)} | ${(p50(`${read} auto`) - span(`${read} inline`, 'preprocess')).toFixed(1)} |`,
        );
        check(
          place <= 1.5 * bareP50,
          `place p50 ${place.toFixed(2)} ms = ${(place / bareP50).toFixed(2)}× a bare write of the same ${nbytes} bytes (${bareP50.toFixed(2)} ms), ${runtime}, ${read} worker, concurrency ${concurrency} (target ≤ 1.5×)`,
        );
        if (concurrency === 1) {
          const slack = p50(`${read} auto`) - span(`${read} inline`, 'preprocess');
          check(
            slack <= 10,
            `auto p50 ${p50(`${read} auto`).toFixed(1)} ms = preprocessing p50 ${span(`${read} inline`, 'preprocess').toFixed(1)} ms (inline router, no write in it) + ${slack.toFixed(1)} ms, ${runtime}, ${read} worker (target ≤ + 10 ms)`,
          );
        }
      }
      chart.push({ label: `${runtime} c=${concurrency}`, values: Object.fromEntries(keys.map((k) => [k, p50(k)])) });
    }
  }
  process.stdout.write(
    '\nplacement against a bare write of the same bytes (medians; preprocess of the auto router includes the band writes it overlaps):\n\n| runtime (tensor) | worker | concurrency | place p50 ms | bare write p50 ms | place / bare | preprocess p50, auto | preprocess p50, inline | auto p50 | auto − inline preprocess |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n',
  );
  process.stdout.write(`${placeLines.join('\n')}\n`);
  process.stdout.write(`\n${verdicts.join('\n')}\n`);
  if (!quick) {
    mkdirSync(path.join(root, 'docs', 'img'), { recursive: true });
    const series = READS.flatMap((read) =>
      MODES.map((mode) => ({
        name: `${mode === 'auto' ? 'auto (/dev/shm)' : 'inline'}, ${read} worker`,
        values: chart.map((c) => c.values[`${read} ${mode}`]!),
      })),
    );
    writeFileSync(
      path.join(root, 'docs', 'img', 'router-bench.svg'),
      renderBarChart({ title: 'Chat request with a 1080p image, p50 latency (ms, lower is better)', groups: chart.map((c) => c.label), series }),
    );
    process.stdout.write('chart written to docs/img/router-bench.svg\n');
  }
}

await runBench(main);
