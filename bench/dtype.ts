// float32 -> bfloat16 / float16 conversion speed, in ns per element, next to copying the same
// float32 values (Float32Array.set) in the same run. Target: bf16 ≤ 1.5 ns/element.
//
// Usage: npm run bench:dtype [-- --quick]   (--quick: 4 Mi values, 5 runs: the CI smoke)
import { f32ToBf16, f32ToF16 } from '../core/transport/dtype.ts';

const quick = process.argv.includes('--quick');
const N = (quick ? 4 : 16) * 1024 * 1024;
const RUNS = quick ? 5 : 11;
const input = new Float32Array(N);
for (let i = 0; i < N; i++) input[i] = Math.sin(i) * 3; // normalised-pixel-like values
const copyOut = new Float32Array(N);
const halfOut = new Uint8Array(N * 2);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const variants: Record<string, () => void> = {
  'copy float32 (baseline)': () => copyOut.set(input),
  'float32 -> bfloat16': () => f32ToBf16(input, halfOut),
  'float32 -> float16': () => f32ToF16(input, halfOut),
};
const samples: Record<string, number[]> = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
for (const f of Object.values(variants)) f(); // warm-up (JIT, page faults)
for (let r = 0; r < RUNS; r++) {
  for (const [name, f] of Object.entries(variants)) {
    const t = performance.now();
    f();
    samples[name]!.push(performance.now() - t);
  }
}
const base = median(samples['copy float32 (baseline)']!);
process.stdout.write(
  `dtype conversion of ${N} float32 values, median of ${RUNS} runs\n\n| conversion | ms | ns/element | × baseline |\n|---|---:|---:|---:|\n`,
);
for (const [name, xs] of Object.entries(samples)) {
  const ms = median(xs);
  process.stdout.write(`| ${name} | ${ms.toFixed(2)} | ${((ms * 1e6) / N).toFixed(3)} | ${(ms / base).toFixed(1)} |\n`);
}
const bf = (median(samples['float32 -> bfloat16']!) * 1e6) / N;
process.stdout.write(`\n${bf <= 1.5 ? 'PASS' : 'MISS'}  bfloat16 ${bf.toFixed(3)} ns/element (target ≤ 1.5)\n`);
