// EPD benchmark: chat requests with one 1080p JPEG through a real `mmtc router` under
// `disaggregation: epd`, to real reference workers on this host: two encode workers (sharing
// /dev/shm), one prefill and one decode worker (TokenSpeed, bfloat16 encoder input). Two
// routers over the same workers, one `inline`, one `auto` (SHM to the encode workers), at
// concurrency 1 and 8, their bursts interleaved (the order rotates), so both see the same
// machine. Spans come from the router's Server-Timing header, as in bench:router: preprocess,
// and `legs` (from the decode worker's request being built to its answer: the Encode calls,
// the prefill and the decode run meanwhile).
//
// Target: auto ≥ 2× faster than inline at p50, concurrency 8.
//
// Usage: npm run bench:epd [-- --quick]   (--quick: fewer requests: the CI smoke)
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { patchGeometry, QWEN_VL_DEFAULTS } from '../core/multimodal/qwen-vl.ts';
import { burst, chatBody1080p, percentile, request, type Sample, inScratchDir } from './chat-load.ts';
import { runBench, startMmtc } from './procs.ts';

const quick = process.argv.includes('--quick');
const ROUNDS = quick ? 1 : 4;
const MODES = ['inline', 'auto'] as const;

const main = () => inScratchDir('mmtc-bench-epd-', measure);

async function measure(dir: string) {
  const body = chatBody1080p(dir);
  const g = patchGeometry(1080, 1920, QWEN_VL_DEFAULTS.qwen2_vl);
  const workers: Array<{ url: string; worker_type: string; bootstrap_port?: number }> = [];
  for (const name of ['encode', 'encode', 'prefill', 'decode']) {
    const served = name !== 'decode';
    const started = await startMmtc(
      ['worker', '--runtime', 'tokenspeed', '--port', '0', '--no-fingerprint', '--role', name, ...(served ? ['--bootstrap-port', '0'] : [])],
      served ? /listening on (grpc:\/\/\S+)\n[\s\S]*?bootstrap server on http:\/\/\S+:(\d+)/ : /listening on (grpc:\/\/\S+)/,
    );
    workers.push({ url: started.match, worker_type: name, ...(served ? { bootstrap_port: Number(started.groups[1]) } : {}) });
  }
  const routers = new Map<string, string>();
  for (const mode of MODES) {
    const file = path.join(dir, `router-${mode}.yaml`);
    writeFileSync(file, `${JSON.stringify({ disaggregation: 'epd', multimodal_tensor_transport: mode, workers })}\n`);
    const { match: url } = await startMmtc(['router', '--port', '0', '--config', file], /listening on (http:\/\/\S+)/);
    routers.set(mode, url);
    for (let i = 0; i < 3; i++) await request(url, body); // warm-up: threads, JIT, channels
  }
  process.stdout.write(
    `EPD benchmark on ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, Node ${process.version}; one 1080p JPEG per request (encoder input [${g.patches}, ${g.features}] bfloat16, ${((g.patches * g.features * 2) / 1e6).toFixed(1)} MB) to one of 2 encode workers, 1 prefill, 1 decode (TokenSpeed reference workers); ${ROUNDS} interleaved rounds\n\n`,
  );
  process.stdout.write(
    '| mode to the encode workers | concurrency | requests | req/s | p50 ms | p99 ms | preprocess p50 | legs p50 |\n|---|---:|---:|---:|---:|---:|---:|---:|\n',
  );
  const verdicts: string[] = [];
  for (const concurrency of [1, 8]) {
    const per = concurrency === 1 ? (quick ? 3 : 10) : quick ? 8 : 16;
    const results = new Map(MODES.map((m) => [m, { samples: [] as Sample[], wallMs: 0 }]));
    for (let round = 0; round < ROUNDS; round++) {
      for (let k = 0; k < MODES.length; k++) {
        const mode = MODES[(round + k) % MODES.length]!;
        const r = await burst(routers.get(mode)!, body, concurrency, per);
        results.get(mode)!.samples.push(...r.samples);
        results.get(mode)!.wallMs += r.wallMs;
      }
    }
    const p50 = (mode: string) =>
      percentile(
        results.get(mode as (typeof MODES)[number])!.samples.map((s) => s.ms),
        50,
      );
    for (const mode of MODES) {
      const { samples, wallMs } = results.get(mode)!;
      const span = (name: string) =>
        percentile(
          samples.map((s) => s.timing[name] ?? 0),
          50,
        );
      process.stdout.write(
        `| ${mode} | ${concurrency} | ${samples.length} | ${((samples.length * 1000) / wallMs).toFixed(2)} | ${p50(mode).toFixed(1)} | ${percentile(
          samples.map((s) => s.ms),
          99,
        ).toFixed(1)} | ${span('preprocess').toFixed(1)} | ${span('worker').toFixed(1)} |\n`,
      );
    }
    const speedup = p50('inline') / p50('auto');
    if (concurrency === 8)
      verdicts.push(`${speedup >= 2 ? 'PASS' : 'MISS'}  auto ${speedup.toFixed(2)}× faster than inline at p50, EPD, concurrency 8 (target ≥ 2×)`);
    else verdicts.push(`INFO  auto ${speedup.toFixed(2)}× faster than inline at p50, EPD, concurrency 1`);
  }
  process.stdout.write(`\n${verdicts.join('\n')}\n`);
}

await runBench(main);
