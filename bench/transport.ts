// Transport benchmark: how long a tensor takes to reach a worker, inline vs /dev/shm,
// against the cost of copying the same bytes in memory (the baseline of the same run).
//
//   memcpy   Buffer.copy into a reused, hot buffer in this process
//   shm      router write (create, write, close) + handle in a real gRPC Generate call to a
//            separate worker process + worker open/read (into its pool)/unlink + reply
//   inline   the same bytes inside the gRPC message, same worker, same reply
//   writer   the SHM write alone (create, write, close), for throughput
//
// A/B interleaved (each run measures all variants in rotating order), medians. The whole
// measurement runs twice, once with the default malloc and once with
// GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (set for the router-side and the worker process).
//
// Usage: npm run bench:transport [-- --quick] [-- --json FILE]   (--quick: up to 32 MiB, fewer
// runs, no chart written: the CI smoke)
import { spawn } from 'node:child_process';
import { mkdirSync, unlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ENGINES } from '../core/engines/table.ts';
import { tensorDataFromPlaced } from '../core/engines/tensor-data.ts';
import * as ts from '../core/gen/tokenspeed/grpc/scheduler.ts';
import { placeTensor } from '../core/transport/placement.ts';
import { ShmWriter } from '../core/transport/shm-writer.ts';
import { renderLineChart } from './chart.ts';
import { exitWithParent, root, runBench, startMmtc, track } from './procs.ts';

const KiB = 1024;
const MiB = 1024 * KiB;
const args = process.argv.slice(2);
const quick = args.includes('--quick');
// --quick (the CI smoke) leaves out 128 MiB: its inline leg alone takes seconds per run.
const SIZES = quick ? [64 * KiB, 1 * MiB, 8 * MiB, 32 * MiB] : [64 * KiB, 1 * MiB, 8 * MiB, 32 * MiB, 128 * MiB];

function runsFor(size: number): number {
  if (quick) return size >= 32 * MiB ? 5 : 9;
  if (size <= 64 * KiB) return 201;
  if (size <= 1 * MiB) return 61;
  if (size <= 8 * MiB) return 21;
  if (size <= 32 * MiB) return 15;
  return 9;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

interface Row {
  size: number;
  runs: number;
  memcpyMs: number;
  shmMs: number;
  inlineMs: number;
  writerMs: number;
}

// ---------------------------------------------------------------- child: one measurement
async function measure(): Promise<Row[]> {
  // The worker runs under this child's malloc setting (the variant being measured).
  const { match: url } = await startMmtc(['worker', '--runtime', 'tokenspeed', '--port', '0', '--no-fingerprint'], /listening on (grpc:\/\/\S+)/, {
    malloc: 'inherit',
  });
  const connection = ENGINES.tokenspeed.connect(url);
  const writer = new ShmWriter();
  if (!writer.probe().writable) throw new Error('/dev/shm is not writable');

  const generate = (req: ts.GenerateRequest) =>
    new Promise<void>((resolve, reject) => {
      connection.generate(
        { runtime: 'tokenspeed', message: req },
        { deadline: Date.now() + 60_000 },
        {
          event: () => {},
          failure: (f) => reject(new Error(`${f.status}: ${f.details}`)),
          end: resolve,
        },
      );
    });
  // The tensor as the worker checks an image's encoder input: [rows, 8192] bfloat16 (16 KiB a
  // row; every size here is a multiple of 64 KiB) with an int64 image_grid_thw [1, 3] whose
  // patches are the rows, and the image's place in the prompt: rows / 4 tokens (merge size 2).
  const ROW_BYTES = 16 * KiB;
  const request = (id: string, encoderInput: ts.TensorData, size: number) => {
    const patches = size / ROW_BYTES;
    const tokens = patches / 4;
    return ts.GenerateRequest.fromPartial({
      requestId: id,
      tokenized: { inputIds: new Array<number>(tokens).fill(1) },
      mmInputs: {
        items: [
          {
            modality: 1,
            // TokenSpeed's servicer requires it of an encoder input its scheduler attaches from /dev/shm.
            contentHash: Buffer.alloc(32, 1),
            encoderInput,
            modelSpecificTensors: {
              image_grid_thw: {
                shape: [1, 3],
                dtype: 'int64',
                payload: { $case: 'inline', value: Buffer.from(BigInt64Array.of(1n, 2n, BigInt(patches / 2)).buffer) },
              },
            },
            placeholders: [{ offset: 0, length: tokens }],
          },
        ],
      },
    });
  };

  const rows: Row[] = [];
  let seq = 0;
  for (const size of SIZES) {
    const src = Buffer.allocUnsafeSlow(size);
    for (let i = 0; i < size; i += 4096) src[i] = i & 0xff;
    const dst = Buffer.allocUnsafeSlow(size);
    src.copy(dst);
    const shape = [size / ROW_BYTES, ROW_BYTES / 2];
    const variants: Record<string, () => Promise<number>> = {
      memcpy: async () => {
        const t = performance.now();
        src.copy(dst);
        return performance.now() - t;
      },
      shm: async () => {
        const t = performance.now();
        // As the router does: the scope's files are unlinked once the worker has answered
        // (it normally did already) or when the call fails, so nothing stays in /dev/shm.
        const scope = writer.newScope();
        try {
          const placed = await placeTensor(
            {
              requestId: `b${seq}`,
              revision: 1,
              source: 'api' as const,
              worker: url,
              runtime: 'tokenspeed',
              decision: { shmEnabled: true, reason: 'shm_writable' },
              minBytes: 0,
              writer,
              scope,
            },
            { name: 'encoder_input', shape, dtype: 'bfloat16', bytes: src },
          );
          if (placed.payload.kind !== 'shm') throw new Error('SHM write failed during the benchmark');
          await generate(request(`b${seq++}`, tensorDataFromPlaced(placed), size));
          const ms = performance.now() - t;
          if (scope.complete() > 0) throw new Error('the worker left its tensor file in /dev/shm');
          return ms;
        } finally {
          scope.cleanup();
        }
      },
      inline: async () => {
        const t = performance.now();
        await generate(request(`b${seq++}`, { shape, dtype: 'bfloat16', payload: { $case: 'inline', value: src } }, size));
        return performance.now() - t;
      },
      writer: async () => {
        const t = performance.now();
        const r = await writer.write(src);
        const ms = performance.now() - t;
        if (!r.ok) throw new Error(r.error);
        unlinkSync(path.join(writer.dir, r.handle.name));
        return ms;
      },
    };
    const names = Object.keys(variants);
    // Warm-up: JIT, gRPC channel, pool buffers in the worker, page cache of tmpfs.
    for (let w = 0; w < 3; w++) for (const n of names) await variants[n]!();
    const samples: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
    const runs = runsFor(size);
    for (let r = 0; r < runs; r++) {
      for (let k = 0; k < names.length; k++) {
        const n = names[(r + k) % names.length]!; // rotate the order: no variant always runs first
        samples[n]!.push(await variants[n]!());
      }
    }
    rows.push({
      size,
      runs,
      memcpyMs: median(samples.memcpy!),
      shmMs: median(samples.shm!),
      inlineMs: median(samples.inline!),
      writerMs: median(samples.writer!),
    });
    process.stderr.write(`  ${fmtSize(size)} done (${runs} runs)\n`);
  }
  connection.close();
  return rows;
}

// ---------------------------------------------------------------- parent: both mallocs, report
function fmtSize(n: number): string {
  return n >= MiB ? `${n / MiB} MiB` : `${n / KiB} KiB`;
}

function table(rows: Row[]): string {
  const head = '| size | runs | memcpy ms | SHM handoff ms | inline ms | SHM / memcpy | inline / SHM | SHM − inline ms | writer GB/s |';
  const sep = '|---:|---:|---:|---:|---:|---:|---:|---:|---:|';
  const lines = rows.map(
    (r) =>
      `| ${fmtSize(r.size)} | ${r.runs} | ${r.memcpyMs.toFixed(3)} | ${r.shmMs.toFixed(3)} | ${r.inlineMs.toFixed(3)} | ${(r.shmMs / r.memcpyMs).toFixed(1)}× | ${(r.inlineMs / r.shmMs).toFixed(2)}× | ${(r.shmMs - r.inlineMs).toFixed(3)} | ${(r.size / (r.writerMs / 1000) / 1e9).toFixed(2)} |`,
  );
  return [head, sep, ...lines].join('\n');
}

function targets(rows: Row[]): string[] {
  const at = (s: number) => rows.find((r) => r.size === s)!;
  const r64k = at(64 * KiB);
  const r1m = at(1 * MiB);
  const r32 = at(32 * MiB);
  const bigWriters = rows.filter((r) => r.size >= 8 * MiB).map((r) => r.size / (r.writerMs / 1000) / 1e9);
  const check = (ok: boolean, text: string) => `${ok ? 'PASS' : 'MISS'}  ${text}`;
  return [
    check(
      r32.shmMs / r32.memcpyMs <= 20,
      `SHM handoff 32 MiB = ${(r32.shmMs / r32.memcpyMs).toFixed(1)}× memcpy (target ≤ 20×, stretch ≤ 12×${r32.shmMs / r32.memcpyMs <= 12 ? ': met' : ''})`,
    ),
    check(r32.inlineMs / r32.shmMs >= 3, `SHM ${(r32.inlineMs / r32.shmMs).toFixed(2)}× faster than inline at 32 MiB (target ≥ 3×)`),
    check(r64k.shmMs <= r64k.inlineMs + 0.25, `SHM − inline at 64 KiB = ${(r64k.shmMs - r64k.inlineMs).toFixed(3)} ms (target ≤ +0.25 ms)`),
    check(r1m.inlineMs / r1m.shmMs >= 1.5, `SHM ${(r1m.inlineMs / r1m.shmMs).toFixed(2)}× faster than inline at 1 MiB (target ≥ 1.5×)`),
    check(Math.min(...bigWriters) >= 3, `writer ${Math.min(...bigWriters).toFixed(2)} GB/s at ≥ 8 MiB, slowest size (target ≥ 3 GB/s)`),
  ];
}

/** One measurement in a child process with this environment; its last stdout line is the rows. */
function measureInChild(env: Record<string, string>): Promise<Row[]> {
  const child = track(
    spawn(process.execPath, [path.join(root, 'node_modules', 'tsx', 'dist', 'cli.mjs'), import.meta.filename, ...args], {
      env,
      stdio: ['ignore', 'pipe', 'inherit'],
    }),
  );
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      if (code !== 0) return reject(new Error(`benchmark child failed (${signal ?? `status ${code}`})`));
      resolve(JSON.parse(out.trim().split('\n').at(-1)!) as Row[]);
    });
  });
}

async function main() {
  if (process.env.MMTC_BENCH_CHILD === '1') {
    exitWithParent();
    const rows = await measure();
    process.stdout.write(`${JSON.stringify(rows)}\n`);
    return;
  }
  const cpu = os.cpus()[0]?.model ?? 'unknown cpu';
  const machine = `${os.cpus().length} × ${cpu}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, Linux ${os.release()}, Node ${process.version}`;
  process.stdout.write(`transport benchmark on ${machine}\n`);
  const results: Record<string, Row[]> = {};
  for (const [label, tunables] of [
    ['default malloc', undefined],
    ['GLIBC_TUNABLES=glibc.malloc.hugetlb=1', 'glibc.malloc.hugetlb=1'],
  ] as const) {
    process.stderr.write(`measuring with ${label}\n`);
    const env = { ...process.env, MMTC_BENCH_CHILD: '1', MMTC_BENCH_PARENT: String(process.pid) } as Record<string, string>;
    // MMTC_MALLOC_HUGETLB=0 stops bin/mmtc.js from adding the tunable to the worker itself.
    env.MMTC_MALLOC_HUGETLB = '0';
    delete env.MMTC_GLIBC_TUNABLES;
    if (tunables) env.GLIBC_TUNABLES = tunables;
    else delete env.GLIBC_TUNABLES;
    const rows = await measureInChild(env).catch((err: Error) => {
      throw new Error(`${label}: ${err.message}`);
    });
    results[label] = rows;
    process.stdout.write(`\n### ${label}\n\n${table(rows)}\n\n${targets(rows).join('\n')}\n`);
  }
  const [a, b] = Object.values(results) as [Row[], Row[]];
  process.stdout.write(
    '\n### hugetlb=1 vs default (ratio of medians, < 1 means faster with hugetlb)\n\n| size | memcpy | SHM handoff | inline | writer |\n|---:|---:|---:|---:|---:|\n',
  );
  a.forEach((r, i) => {
    const h = b[i]!;
    process.stdout.write(
      `| ${fmtSize(r.size)} | ${(h.memcpyMs / r.memcpyMs).toFixed(2)} | ${(h.shmMs / r.shmMs).toFixed(2)} | ${(h.inlineMs / r.inlineMs).toFixed(2)} | ${(h.writerMs / r.writerMs).toFixed(2)} |\n`,
    );
  });

  const chart = renderLineChart({
    title: 'Tensor handoff time vs size (median ms, log scale)',
    xLabels: a.map((r) => fmtSize(r.size)),
    series: [
      { name: 'memcpy (baseline)', values: a.map((r) => r.memcpyMs) },
      { name: 'SHM handoff', values: a.map((r) => r.shmMs) },
      { name: 'inline gRPC', values: a.map((r) => r.inlineMs) },
      { name: 'SHM handoff, hugetlb=1', values: b.map((r) => r.shmMs) },
      { name: 'inline gRPC, hugetlb=1', values: b.map((r) => r.inlineMs) },
    ],
  });
  // A quick run (the CI smoke) never replaces the committed chart.
  if (!quick) {
    mkdirSync(path.join(root, 'docs', 'img'), { recursive: true });
    writeFileSync(path.join(root, 'docs', 'img', 'transport-bench.svg'), chart);
    process.stdout.write('\nchart written to docs/img/transport-bench.svg\n');
  }
  const jsonAt = args.indexOf('--json');
  if (jsonAt >= 0 && args[jsonAt + 1]) writeFileSync(args[jsonAt + 1]!, JSON.stringify({ machine, results }, null, 2));
}

await runBench(main);
